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
 * layernorm-fusion's and left alone here. */
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

static int run_rmsnorm_fusion(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    int fused;
    int rc = llmc_fusion_walk(g, ctx, PASS_NAME, visit, &fused, err);
    if (rc == LLMC_OK)
        llmc_pass_detail(ctx, "%d fused", fused);
    return rc;
}

const llmc_pass llmc_pass_rmsnorm_fusion = {PASS_NAME, run_rmsnorm_fusion};
