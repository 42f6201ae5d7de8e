/* gemm-unflatten: a Gemm between two Reshapes that flatten the leading
 * axes and restore them is a MatMul over the last axis.  Transformers'
 * Conv1D (GPT-2's c_attn, c_proj, c_fc) exports as
 *     Reshape(x [..., K] -> [M, K]) -> Gemm(., W, b) -> Reshape(-> [..., N])
 * which becomes MatMul(x, W) [-> Add(., b)], the form linear-fusion turns
 * into llmc.Linear (with a residual, and merged with its siblings).
 *
 * Preconditions: alpha = beta = 1 and transA = 0; W is a constant [K, N]
 * (or [N, K] with transB = 1, then transposed into a new constant); C is
 * omitted or a constant [N] or [1, N]; the first Reshape's output is read
 * by the Gemm alone and the Gemm's by the second Reshape alone; shape
 * inference gave the first Reshape [M, K] from x [..., K] and the second
 * x's leading dims followed by N. */
#include <stdlib.h>
#include <string.h>

#include "fusion_match.h"
#include "pass.h"
#include "pass_list.h"

static const char PASS[] = "gemm-unflatten";

typedef struct {
    int flatten, gemm, unflatten;   /* the three nodes */
    int x, w, bias, y;              /* x [..., K], W, the bias [N] (or -1), y [..., N] */
    bool trans_b;
} gemm_match;

static bool reject(const llmc_pass_ctx *ctx, const llmc_graph *g, int node, const char *why)
{
    llmc_pass_explain(ctx, PASS, g, node, "%s", why);
    return false;
}

/* W a float constant [K, N], or [N, K] with transB. */
static bool weight_fits(const llmc_graph *g, const gemm_match *m, int64_t k, int64_t n)
{
    const llmc_shape *w = &g->values[m->w].shape;
    return llmc_const_matrix(g, m->w) && w->dims[0].c == (m->trans_b ? n : k) && w->dims[1].c == (m->trans_b ? k : n);
}

/* y = x's dims with the last one replaced by n. */
static bool restores_leading_dims(const llmc_shape *x, const llmc_shape *y, int64_t n)
{
    if (x->rank < 2 || y->rank != x->rank || !llmc_aff_eq(y->dims[y->rank - 1], llmc_aff_const(n)))
        return false;
    for (int i = 0; i + 1 < x->rank; i++)
        if (!llmc_aff_eq(x->dims[i], y->dims[i]))
            return false;
    return true;
}

static bool match_gemm(llmc_graph *g, const llmc_pass_ctx *ctx, int gemm, gemm_match *m)
{
    const llmc_node *n = &g->nodes[gemm];
    m->gemm = gemm;
    m->flatten = llmc_match_producer(g, n->inputs[0], "Reshape");
    if (m->flatten < 0 || n->n_inputs < 2)
        return false;   /* a plain 2-D Gemm: linear-fusion takes it as it is */
    m->x = g->nodes[m->flatten].inputs[0];
    m->w = n->inputs[1];
    m->trans_b = llmc_node_attr_int(g, gemm, "transB", 0) != 0;
    m->unflatten = llmc_match_sole_reader(g, n->outputs[0]);
    const llmc_shape *xs = &g->values[m->x].shape, *flat = &g->values[n->inputs[0]].shape;
    if (m->unflatten < 0 || !llmc_is_onnx_op(&g->nodes[m->unflatten], "Reshape"))
        return reject(ctx, g, gemm, "its output is not read by one Reshape alone");
    m->y = g->nodes[m->unflatten].outputs[0];
    if (llmc_match_sole_reader(g, n->inputs[0]) != gemm)
        return reject(ctx, g, gemm, "the flattening Reshape's output has other readers");
    if (!llmc_gemm_is_plain(g, gemm))
        return reject(ctx, g, gemm, "alpha or beta is not 1, or transA is set");
    if (g->values[m->x].dtype != LLMC_DT_FLOAT || xs->rank < 2 || flat->rank != 2 ||
        !llmc_aff_is_const(xs->dims[xs->rank - 1]) || !llmc_aff_eq(flat->dims[1], xs->dims[xs->rank - 1]))
        return reject(ctx, g, gemm, "the first Reshape does not flatten a float x [..., K] to [M, K]");
    const llmc_shape *ys = &g->values[m->y].shape;
    int64_t k = xs->dims[xs->rank - 1].c, nn = ys->rank > 0 ? ys->dims[ys->rank - 1].c : -1;
    if (!restores_leading_dims(xs, ys, nn))
        return reject(ctx, g, gemm, "the second Reshape does not restore x's leading dims");
    if (!weight_fits(g, m, k, nn))
        return reject(ctx, g, gemm, "W is not a float constant [K, N] (or [N, K] with transB)");
    /* last: a [1, N] C becomes a new [N] constant only once all else fits */
    m->bias = llmc_gemm_bias(g, n->n_inputs > 2 ? n->inputs[2] : -1, nn);
    return m->bias != -2 || reject(ctx, g, gemm, "C is not a float constant [N] or [1, N]");
}

/* MatMul(x, W) -> y, or MatMul(x, W) -> Add(., C) -> y. */
static int rewrite(llmc_graph *g, const gemm_match *m)
{
    char *name = strdup(g->nodes[m->gemm].name);
    int w = m->trans_b ? llmc_add_transposed_const(g, m->w) : m->w, c = m->bias;
    int product = m->y;
    if (!name || w < 0 || c == -3)
        return free(name), -1;
    if (c >= 0) {
        char *pname = llmc_graph_unique_name(g, g->values[m->y].name, "/matmul");
        product = pname ? llmc_graph_add_value(g, pname, LLMC_DT_FLOAT) : -1;
        free(pname);
        if (product < 0)
            return free(name), -1;
        g->values[product].shape = g->values[m->y].shape;
    }
    llmc_graph_erase_node(g, m->unflatten);
    llmc_graph_erase_node(g, m->gemm);
    int ins[2] = {m->x, w}, add_ins[2] = {product, c};
    int rc = llmc_graph_add_node(g, "MatMul", name, ins, 2, &product, 1) < 0 ? -1 : 1;
    if (rc > 0 && c >= 0) {
        char *aname = llmc_graph_unique_name(g, name, "/bias");   /* node names need not be unique */
        rc = aname && llmc_graph_add_node(g, "Add", aname, add_ins, 2, &m->y, 1) >= 0 ? 1 : -1;
        free(aname);
    }
    free(name);
    return rc;
}

static int visit(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    gemm_match m;
    if (!llmc_is_onnx_op(&g->nodes[node], "Gemm") || !match_gemm(g, ctx, node, &m))
        return 0;
    return rewrite(g, &m);
}

static int run_gemm_unflatten(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    int count = 0;
    int rc = llmc_fusion_walk(g, ctx, PASS, visit, &count, err);
    if (!rc && count)
        rc = llmc_match_sweep(g, err);
    if (!rc)
        llmc_pass_detail(ctx, "%d Gemms unflattened", count);
    return rc;
}

const llmc_pass llmc_pass_gemm_unflatten = {"gemm-unflatten", run_gemm_unflatten};
