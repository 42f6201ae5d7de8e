/* rmsnorm-fusion: x / sqrt(mean(x^2) + eps) * scale -> llmc.RMSNorm(x, scale).
 *
 * torch exports LLaMA's `x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) +
 * eps) * weight` as Pow(x, 2) -> ReduceMean -> Add(eps) -> Sqrt ->
 * Div(1, .) (opsets 13..21) -> Mul(x, .) -> Mul(., weight).  Every spelling
 * norm_match.h accepts is fused: the square as Pow(x, 2) or Mul(x, x), the
 * division as Div(x, sqrt) or a product with Reciprocal / Div(1, .), with
 * identity Casts anywhere, provided the mean is over the last axis only
 * with keepdims, epsilon is a scalar constant, the scale a float constant
 * [D], nothing broadcasts the result past x's shape and no intermediate is
 * read outside the pattern.  Norms of a centered value (x - mean(x)) are
 * layernorm-fusion's and left alone here.
 *
 * Then Add(llmc.RMSNorm(x, scale), r), r float with the norm's shape and
 * the Add its only reader, becomes llmc.RMSNorm(x, scale, r): Gemma's
 * post-attention and post-feedforward norms, on the branch before its
 * residual add.  The same float sum, added after the norm's product. */
#include "ir/llmc_ops.h"
#include "norm_match.h"
#include "pass.h"

#define PASS_NAME "rmsnorm-fusion"

/* 1 when fused, 0 when not, -1 on OOM. */
static int fuse_at_sqrt(llmc_graph *g, const llmc_pass_ctx *ctx, int sqrt_node)
{
    llmc_match m;
    llmc_norm_parts parts;
    llmc_match_init(&m, g, ctx, PASS_NAME);
    bool matched = llmc_match_norm(&m, sqrt_node, &parts);
    if (parts.squared >= 0 && llmc_is_centered(g, parts.squared))
        return 0;
    if (matched && llmc_strip_casts(g, parts.numerator) != llmc_strip_casts(g, parts.squared))
        matched = llmc_match_reject(&m, sqrt_node, "it divides another value than the one squared");
    if (!matched || !llmc_match_is_closed(&m, parts.root)) {
        llmc_match_explain(&m);
        return 0;
    }
    int inputs[2] = {parts.squared, parts.scale};
    int id = llmc_match_replace(&m, parts.root, "RMSNorm", false, inputs, 2);
    return id < 0 || llmc_node_set_float(g, id, "epsilon", parts.epsilon) ? -1 : 1;
}

static int visit(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    return llmc_is_onnx_op(&g->nodes[node], "Sqrt") ? fuse_at_sqrt(g, ctx, node) : 0;
}

/* Add(RMSNorm(x, scale), r) -> RMSNorm(x, scale, r); 1 when fused, 0 when
 * not (a norm read by no Add is no candidate: nothing to explain), -1 on OOM */
static int fuse_residual(llmc_graph *g, const llmc_pass_ctx *ctx, int norm)
{
    int y = g->nodes[norm].outputs[0], add = llmc_match_sole_reader(g, y);
    if (add < 0 || !llmc_is_onnx_op(&g->nodes[add], "Add"))
        return 0;
    llmc_match m;
    llmc_match_init(&m, g, ctx, PASS_NAME);
    llmc_match_add(&m, norm);
    llmc_match_add(&m, add);
    int r = llmc_other_input(g, add, y);
    const llmc_shape *ys = &g->values[y].shape;
    if (r < 0 || g->values[r].dtype != LLMC_DT_FLOAT || !llmc_shape_eq(&g->values[r].shape, ys) ||
        !llmc_shape_eq(&g->values[g->nodes[add].outputs[0]].shape, ys)) {
        llmc_match_reject(&m, add, "not a float Add of the norm and a value of its shape");
        llmc_match_explain(&m);
        return 0;
    }
    float epsilon = llmc_node_attr_float(g, norm, "epsilon", 1e-5f);
    int inputs[3] = {g->nodes[norm].inputs[0], g->nodes[norm].inputs[1], r}, out = g->nodes[add].outputs[0];
    int id = llmc_match_replace_outputs(&m, norm, "RMSNorm", false, inputs, 3, &out, 1);
    return id < 0 || llmc_node_set_float(g, id, "epsilon", epsilon) ? -1 : 1;
}

static int visit_norm(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    const llmc_node *n = &g->nodes[node];
    return llmc_is_op(n, "RMSNorm") && n->n_inputs == 2 ? fuse_residual(g, ctx, node) : 0;
}

static int run_rmsnorm_fusion(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    /* residuals last: they join the norms the walk before makes */
    static const llmc_fusion_visit walks[] = {visit, visit_norm};
    int n[2];
    int rc = llmc_fusion_walks(g, ctx, PASS_NAME, walks, 2, n, err);
    if (rc == LLMC_OK && n[1] == 0)
        llmc_pass_detail(ctx, "%d fused", n[0]);
    else if (rc == LLMC_OK)
        llmc_pass_detail(ctx, "%d fused, %d with the residual Add after them", n[0], n[1]);
    return rc;
}

const llmc_pass llmc_pass_rmsnorm_fusion = {PASS_NAME, run_rmsnorm_fusion};
