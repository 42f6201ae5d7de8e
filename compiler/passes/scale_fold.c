/* Scale folding (linear-fusion's step 0): a constant scalar factor on the
 * output of a projection or an embedding lookup moves into its weights.
 *
 *   Mul(MatMul(x, W), c), Mul(c, MatMul(x, W)), Div(MatMul(x, W), c)
 *       -> MatMul(x, W c) (W / c for Div): Granite's residual_multiplier on
 *       o_proj and down_proj, its logits / logits_scaling on the LM head.
 *       (x W) c and x (W c) round differently unless c is a power of two,
 *       so `--explain` says which folds change the rounding.
 *   Mul(Gather(T, ids), c) -> Gather(T c, ids): Granite's
 *       embedding_multiplier.  Exact: each row element is multiplied by c
 *       once either way.
 *
 * Tied weights stay unscaled: when T is an LM head's W transposed (by the
 * bytes, as quantize-embedding decides tying), neither the embedding's nor
 * the head's scale is folded, so both still share one table; the Mul/Div
 * stays (outside the decoder layers) and `--explain` says so.
 *
 * Pre-quantized weights and tables (quant-canonical's form, quant_weight.h:
 * W = DequantizeLinear(Wq, S, Z), Wq integer, S float [G, N] or [V, G])
 * take c into their float scales: (Wq - Z) (S c).  Wq and Z stay as the
 * file has them (exact in the integers); each scale s c is rounded once (to
 * binary16 when every scale was a binary16, so a binary16-coefficient
 * weight keeps its tile form), so ((q - z) s) c and (q - z) (s c) differ
 * in the last bit unless every s c is exact (c a power of two, no scale
 * leaving the normal range), and `--explain` says which.
 * Preconditions: the DequantizeLinear's output is read by this projection
 * alone (checked as for W below); its scale may have other readers (a new
 * constant is made).  No tying check: quantize-embedding shares bytes
 * between float tables and float heads only.
 *
 * W and T are float32 constant matrices or pre-quantized as above; c a
 * finite nonzero float scalar constant; the scaled output has
 * the projection's shape and the projection's output has no other reader.
 * The projection takes over the Mul's output value (a graph output keeps
 * its name) and reads a new constant; the old one is dropped once unread. */
#include "scale_fold.h"

#include <math.h>
#include <stdlib.h>

#include "fusion_match.h"
#include "quant_weight.h"

#define PASS_NAME "linear-fusion"

static void say(const llmc_pass_ctx *ctx, const llmc_graph *g, int node, const char *fmt, const char *what,
                double c, const char *weight)
{
    if (!ctx->explain || !ctx->log)
        return;
    const llmc_node *n = &g->nodes[node];
    fprintf(ctx->log, "%s: node '%s' (#%d, %s) ", PASS_NAME, n->name, node, n->op_type);
    fprintf(ctx->log, fmt, what, c, weight);
    fputc('\n', ctx->log);
}

/* The float scalar constant operand of node (Mul: either input, Div: the
 * divisor) as the factor it applies, *other the scaled input; false if none. */
static bool scale_operand(const llmc_graph *g, int node, double *factor, int *other)
{
    const llmc_node *n = &g->nodes[node];
    bool div = llmc_is_onnx_op(n, "Div");
    if ((!div && !llmc_is_onnx_op(n, "Mul")) || n->n_inputs != 2 || g->values[n->outputs[0]].dtype != LLMC_DT_FLOAT)
        return false;
    for (int k = div ? 1 : 0; k < 2; k++) {
        double c;
        int v = n->inputs[k];
        if (g->values[v].dtype == LLMC_DT_FLOAT && llmc_match_const_scalar(g, v, &c) && isfinite(c) && c != 0) {
            *factor = div ? 1.0 / c : c;
            *other = n->inputs[1 - k];
            return !(div && k == 0);
        }
    }
    return false;
}

/* v times `factor`, or divided by `divisor` when nonzero (as Div computes). */
static float scaled(float v, double factor, double divisor)
{
    return divisor != 0 ? (float)(v / divisor) : (float)(v * factor);
}

/* A copy of float constant matrix w times `factor` (divided by `divisor`
 * when nonzero, as Div computes) as a new constant; -1 on OOM. */
static int scaled_copy(llmc_graph *g, int w, double factor, double divisor)
{
    const llmc_value *v = &g->values[w];
    int64_t rows = v->shape.dims[0].c, cols = v->shape.dims[1].c, n = rows * cols;
    float *data = malloc((size_t)(n ? n : 1) * sizeof *data);
    if (!data || llmc_const_read_rows(v, 0, rows, data) != 0) {
        free(data);
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        data[i] = scaled(data[i], factor, divisor);
    llmc_shape shape = v->shape;
    int id = llmc_add_const(g, v->name, "/scaled", LLMC_DT_FLOAT, &shape, data, (uint64_t)n * sizeof *data);
    free(data);
    return id;
}

static bool is_half(float f)
{
    return rt_half_to_float(rt_float_to_half(f)) == f;
}

/* Pre-quantized weight / table: DequantizeLinear dq's scales scaled() as
 * its new scale input, *exact whether every one is the exact product; 0,
 * 1 when nothing changed (the scales have no bytes, or a scaled scale
 * would not be finite, e.g. past binary16's range), -1 on OOM. */
static int scale_quantized(llmc_graph *g, int dq, double factor, double divisor, bool *exact)
{
    int sv = llmc_quant_weight_input(g, dq, 1);
    const llmc_value *v = &g->values[sv];
    int64_t n = v->shape.dims[0].c * v->shape.dims[1].c;
    const float *s = llmc_const_bytes(&v->konst);
    if (!s)
        return 1;
    float *data = malloc((size_t)(n ? n : 1) * sizeof *data);
    if (!data)
        return -1;
    bool half = true, finite = true;
    for (int64_t i = 0; i < n; i++)
        half = half && is_half(s[i]);
    *exact = true;
    for (int64_t i = 0; i < n; i++) {
        float f = scaled(s[i], factor, divisor);
        data[i] = half ? rt_half_to_float(rt_float_to_half(f)) : f;
        finite = finite && isfinite(data[i]);
        *exact = *exact && data[i] == (divisor != 0 ? s[i] / divisor : s[i] * factor);
    }
    llmc_shape shape = v->shape;
    uint64_t bytes = (uint64_t)n * sizeof *data;
    int id = finite ? llmc_add_const(g, v->name, "/scaled", LLMC_DT_FLOAT, &shape, data, bytes) : 0;
    free(data);
    if (!finite || id < 0)
        return finite ? -1 : 1;
    g->nodes[dq].inputs[1] = id;
    if (llmc_graph_use_count(g, sv) == 0)
        llmc_graph_drop_const(g, sv);
    return 0;
}

/* Is c a power of two, so that scaling by it is exact (normal numbers)? */
static bool power_of_two(double c)
{
    int e;
    return fabs(frexp(c, &e)) == 0.5;
}

/* Is constant matrix w the transpose of a matrix the other side of a tied
 * pair reads: a MatMul's W for an embedding table, a Gather's table for a W? */
static bool tied(const llmc_graph *g, int w, bool table)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const llmc_node *n = &g->nodes[i];
        int k = table ? 1 : 0;
        if (n->dead || !llmc_is_onnx_op(n, table ? "MatMul" : "Gather") || n->n_inputs < 2 ||
            !llmc_const_matrix(g, n->inputs[k]))
            continue;
        const llmc_value *e = &g->values[table ? w : n->inputs[k]], *t = &g->values[table ? n->inputs[k] : w];
        if (llmc_const_holds_transpose(e, t))
            return true;
    }
    return false;
}

/* Node `node` (the scale) erased; `proj` reads `w` at input 1 and writes
 * the scale's output. */
static void rewire(llmc_graph *g, int node, int proj, int weight_input, int w)
{
    int y = g->nodes[node].outputs[0], old = g->nodes[proj].inputs[weight_input];
    llmc_graph_erase_node(g, node);
    g->nodes[proj].inputs[weight_input] = w;
    g->nodes[proj].outputs[0] = y;
    g->values[y].producer = proj;
    if (llmc_graph_use_count(g, old) == 0)
        llmc_graph_drop_const(g, old);
}

int llmc_scale_fold_visit(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    double c;
    int x;
    if (!scale_operand(g, node, &c, &x))
        return 0;
    int proj = g->values[x].producer;
    if (proj < 0 || llmc_match_sole_reader(g, x) != node ||
        !llmc_shape_eq(&g->values[x].shape, &g->values[g->nodes[node].outputs[0]].shape))
        return 0;
    const llmc_node *p = &g->nodes[proj];
    bool gather = llmc_is_onnx_op(p, "Gather");
    if ((!gather && !llmc_is_onnx_op(p, "MatMul")) || p->n_inputs < 2)
        return 0;
    int weight_input = gather ? 0 : 1, w = p->inputs[weight_input];
    int dq = gather ? llmc_quant_table(g, w) : llmc_quant_weight(g, w);
    if ((dq < 0 && !llmc_const_matrix(g, w)) || (gather && llmc_node_attr_int(g, proj, "axis", 0) != 0))
        return 0;
    const char *wname = g->values[dq < 0 ? w : llmc_quant_weight_input(g, dq, 0)].name;
    if (llmc_graph_use_count(g, w) != 1 || (dq < 0 && tied(g, w, gather))) {
        say(ctx, g, node, "not folded: the %s scale %g stays, '%s' is read elsewhere or tied (embedding table "
            "and LM head share the unscaled bytes)", gather ? "embedding" : "output", c, wname);
        return 0;
    }
    bool div = llmc_is_onnx_op(&g->nodes[node], "Div");
    const char *what = gather ? "embedding" : "output";
    if (dq >= 0) {
        bool exact;
        int rc = scale_quantized(g, dq, c, div ? 1.0 / c : 0, &exact);
        if (rc)
            return rc < 0 ? -1 : 0;
        if (exact)
            say(ctx, g, node, "folded: %s scale %g into the scales of quantized '%s' (exact)", what, c, wname);
        else
            say(ctx, g, node, "folded: %s scale %g into the scales of quantized '%s' (its integers exact; a "
                "rounding change of the scales: (q - z) (s c) is not ((q - z) s) c bit for bit)", what, c, wname);
        rewire(g, node, proj, weight_input, w);
        return 1;
    }
    int scaled = scaled_copy(g, w, c, div ? 1.0 / c : 0);
    if (scaled < 0)
        return -1;
    if (gather || power_of_two(c))
        say(ctx, g, node, "folded: %s scale %g into '%s' (exact)", gather ? "embedding" : "output", c, wname);
    else
        say(ctx, g, node, "folded: %s scale %g into weight '%s' (a rounding change: x (W c) is not (x W) c "
            "bit for bit)", "output", c, wname);
    rewire(g, node, proj, weight_input, scaled);
    return 1;
}
