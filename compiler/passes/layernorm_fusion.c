/* layernorm-fusion: the decomposed LayerNorm torch emits below opset 17,
 *
 *     mu = ReduceMean(x); d = Sub(x, mu); var = ReduceMean(Pow(d, 2))
 *     y  = Add(Mul(Div(d, Sqrt(Add(var, eps))), scale), bias)
 *
 * -> ONNX LayerNormalization(x, scale, bias){axis=-1, epsilon}.  Accepted:
 * identity Casts anywhere, one Sub read twice or two equal Subs, the other
 * spellings of the square and the division norm_match.h lists, no bias
 * (bias is then omitted).  Required: both means over the last axis only
 * with keepdims, a scalar constant epsilon, float constants scale and bias
 * of shape [D], no broadcasting past x's shape, and no intermediate read
 * outside the pattern.  LayerNormalization nodes already in the graph
 * (opset-17 exports) are counted, not changed. */
#include "norm_match.h"
#include "pass.h"

#define PASS_NAME "layernorm-fusion"
/* LayerNormalization entered the default domain at opset 17. */
#define LAYERNORM_OPSET 17

/* d = Sub(x, ReduceMean(x)) and the numerator is d or an equal Sub;
 * *x gets the value the mean reads. */
static bool match_centering(llmc_match *m, const llmc_norm_parts *parts, int *x)
{
    const llmc_graph *g = m->g;
    int sub = llmc_fusion_producer(m, parts->squared, "Sub");
    int mu = g->nodes[sub].inputs[1];
    int mean = llmc_fusion_producer(m, mu, "ReduceMean");
    if (!llmc_reduces_last_axis(m, mean))
        return false;
    *x = g->nodes[mean].inputs[0];
    if (llmc_strip_casts(g, g->nodes[sub].inputs[0]) != llmc_strip_casts(g, *x))
        return llmc_match_reject(m, sub, "it centers another value than the one averaged");
    if (llmc_strip_casts(g, parts->numerator) == llmc_strip_casts(g, parts->squared))
        return llmc_match_add_casts(m, parts->numerator);   /* Div(Cast(d), .) */
    int sub2 = llmc_fusion_producer(m, parts->numerator, "Sub");
    if (sub2 < 0 || llmc_strip_casts(g, g->nodes[sub2].inputs[0]) != llmc_strip_casts(g, *x) ||
        llmc_strip_casts(g, g->nodes[sub2].inputs[1]) != llmc_strip_casts(g, mu))
        return llmc_match_reject(m, sub, "the value divided is not x - mean(x)");
    return true;
}

/* An Add of a float constant [D] after the scale: returns the bias (the
 * Add becomes *root), or -1 with the match unchanged. */
static int match_bias(llmc_match *m, int *root)
{
    const llmc_graph *g = m->g;
    int scaled = g->nodes[*root].outputs[0], n_before = m->n_nodes;
    const llmc_shape *shape = &g->values[scaled].shape;
    int add = llmc_match_consumer(m, scaled, "Add");
    int bias = add >= 0 ? llmc_other_input(g, add, scaled) : -1;
    if (bias < 0 || !llmc_const_vector(g, bias, shape->dims[shape->rank - 1]) ||
        !llmc_shape_eq(&g->values[g->nodes[add].outputs[0]].shape, shape)) {
        m->n_nodes = n_before;
        return -1;
    }
    *root = add;
    return bias;
}

/* 1 when fused, 0 when not, -1 on OOM. */
static int fuse_at_sqrt(llmc_graph *g, const llmc_pass_ctx *ctx, int sqrt_node)
{
    llmc_match m;
    llmc_norm_parts parts;
    int x = -1;
    llmc_match_init(&m, g, ctx, PASS_NAME);
    bool matched = llmc_match_norm(&m, sqrt_node, &parts);
    if (parts.squared < 0 || !llmc_is_centered(g, parts.squared))
        return 0;   /* not a LayerNorm: rmsnorm-fusion's */
    matched = matched && match_centering(&m, &parts, &x);
    int root = parts.root, bias = matched ? match_bias(&m, &root) : -1;
    if (!matched || !llmc_match_is_closed(&m, root)) {
        llmc_match_explain(&m);
        return 0;
    }
    int inputs[3] = {x, parts.scale, bias};
    int id = llmc_match_replace(&m, root, "LayerNormalization", true, inputs, bias >= 0 ? 3 : 2);
    if (id < 0 || llmc_node_set_int(g, id, "axis", -1) || llmc_node_set_float(g, id, "epsilon", parts.epsilon))
        return -1;
    g->nodes[id].opset = LAYERNORM_OPSET;
    return 1;
}

static int visit(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    return llmc_is_onnx_op(&g->nodes[node], "Sqrt") ? fuse_at_sqrt(g, ctx, node) : 0;
}

static int run_layernorm_fusion(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    int fused, native = 0;
    for (int i = 0; i < g->n_nodes; i++)
        native += llmc_is_onnx_op(&g->nodes[i], "LayerNormalization");
    int rc = llmc_fusion_walk(g, ctx, PASS_NAME, visit, &fused, err);
    if (rc == LLMC_OK)
        llmc_pass_detail(ctx, "%d fused, %d already LayerNormalization", fused, native);
    return rc;
}

const llmc_pass llmc_pass_layernorm_fusion = {PASS_NAME, run_layernorm_fusion};
