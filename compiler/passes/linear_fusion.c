/* linear-fusion: projections by constant weights -> llmc.Linear, in
 * steps, each over the result of the one before:
 *
 *  0. scales: a constant scalar Mul/Div on a MatMul's output or on an
 *     embedding Gather's rows moves into the constant (scale_fold.c).
 *  1. formation: MatMul(x, W), W a float constant [K, N] (or a weight of a
 *     pre-quantized file, DequantizeLinear of constants in the canonical
 *     form of quant_canonical.c, which stays the Linear's W) and x float
 *     [..., K], with a following Add of a float constant bias [N] (either
 *     operand order, nothing broadcast past the MatMul's shape) when there
 *     is one and the MatMul's output has no other reader -> Linear(x, W,
 *     bias).  Gemm(A, B, C) with alpha = beta = 1 and transA = 0 too: B
 *     becomes [K, N] (transposed into a new constant when transB = 1), C
 *     must be a constant [N] or [1, N].
 *  2. merging: Linears reading the same x (q/k/v; gate/up) become one whose
 *     W is theirs concatenated along N (a new constant) and whose outputs
 *     are theirs in node-id order (file-quantized weights merge with each
 *     other when block size and integer type agree: their Wq, scales and
 *     zero points concatenated under one new DequantizeLinear); biases are concatenated, zeros standing
 *     in for a missing one only when some sibling has a bias.
 *  3. splits: a Split along the last axis that is the only reader of a
 *     Linear output (GPT-2's c_attn) becomes outputs of the Linear.
 *  4. residual: Add(y, r) with y the only output of a Linear, read by
 *     nothing else, and r of y's shape (no broadcasting) -> the Linear
 *     takes r as its residual input and the Add's output.
 *  5. residual chains: Add(y, c) with y from a Linear B that has a residual
 *     already, y read by the Add alone: B's residual chain (each residual
 *     the only output of a Linear, read by that Linear alone) is followed
 *     to a Linear A without one, which takes c (sums reassociate:
 *     (A + B) + c = (A + c) + B).  Transformers' Phi sums
 *     `attn_out + mlp_out + residual` in that order, so after step 4 the
 *     MLP's Linear has the attention's as residual and the stream's Add
 *     is left over; the stream becomes the attention Linear's residual.
 *     c cannot depend on A or B: their outputs are read along the chain
 *     alone.
 *  6. post-norm residuals: Add(r, RMSNorm(y)) with the norm's output read
 *     by the Add alone and r of its shape -> the RMSNorm takes r as its
 *     residual input and the Add's output (OLMo2's x + norm(attn(x))).
 */
#include <stdlib.h>
#include <string.h>

#include "ir/const_view.h"
#include "fusion_match.h"
#include "ir/llmc_ops.h"
#include "pass.h"
#include "quant_weight.h"
#include "scale_fold.h"

#define PASS_NAME "linear-fusion"
/* Linear(x, W, bias, residual): input positions */
enum { LIN_X, LIN_W, LIN_BIAS, LIN_RESIDUAL, LIN_INPUTS };

static int64_t dim(const llmc_graph *g, int v, int axis)
{
    return g->values[v].shape.dims[axis].c;
}

/* Records and explains why the candidate at `node` was not fused; 0. */
static int give_up(llmc_match *m, int node, const char *why)
{
    llmc_match_reject(m, node, "%s", why);
    llmc_match_explain(m);
    return 0;
}

/* x is float [..., k] */
static bool is_input_of_width(const llmc_graph *g, int x, int64_t k)
{
    const llmc_shape *xs = &g->values[x].shape;
    return g->values[x].dtype == LLMC_DT_FLOAT && xs->rank >= 1 && llmc_aff_eq(xs->dims[xs->rank - 1], llmc_aff_const(k));
}

/* ---- 1. formation ---- */

/* An Add of a float constant [N] reading `y` alone: its node (collected),
 * *bias the constant; -1 with the match unchanged. */
static int match_bias_add(llmc_match *m, int y, int64_t n, int *bias)
{
    const llmc_graph *g = m->g;
    int n_before = m->n_nodes;
    int add = llmc_match_consumer(m, y, "Add");
    *bias = add >= 0 ? llmc_other_input(g, add, y) : -1;
    if (*bias >= 0 && llmc_const_vector(g, *bias, llmc_aff_const(n)) &&
        llmc_shape_eq(&g->values[g->nodes[add].outputs[0]].shape, &g->values[y].shape))
        return add;
    if (*bias >= 0 && g->values[*bias].is_const) {
        llmc_match_reject(m, add, "a constant addend that is not a float bias [N]: the Linear gets no bias");
        llmc_match_explain(m);
    }
    m->n_nodes = n_before;
    *bias = -1;
    return -1;
}

/* Replaces the match by Linear(x, w, bias?) taking root's outputs. */
static int emit_linear(llmc_match *m, int root, int x, int w, int bias)
{
    int inputs[3] = {x, w, bias};
    return llmc_match_replace(m, root, "Linear", false, inputs, bias >= 0 ? 3 : 2) < 0 ? -1 : 1;
}

static int form_from_matmul(llmc_graph *g, const llmc_pass_ctx *ctx, int mm)
{
    llmc_match m;
    llmc_match_init(&m, g, ctx, PASS_NAME);
    llmc_match_add(&m, mm);
    int x = g->nodes[mm].inputs[0], w = g->nodes[mm].inputs[1];
    bool from_file = llmc_quant_weight(g, w) >= 0;   /* pre-quantized: kept as it is */
    if (!g->values[w].is_const && !from_file)
        return 0;   /* activation times activation (attention): not a projection */
    if (!from_file && !llmc_const_matrix(g, w))
        return give_up(&m, mm, "the weight is not a 2-D float constant");
    if (!is_input_of_width(g, x, dim(g, w, 0)))
        return give_up(&m, mm, "x is not float [..., K] with K the weight's rows");
    int bias, add = match_bias_add(&m, g->nodes[mm].outputs[0], dim(g, w, 1), &bias);
    return emit_linear(&m, add >= 0 ? add : mm, x, w, bias);
}

static int form_from_gemm(llmc_graph *g, const llmc_pass_ctx *ctx, int gemm)
{
    llmc_match m;
    llmc_match_init(&m, g, ctx, PASS_NAME);
    llmc_match_add(&m, gemm);
    const llmc_node *n = &g->nodes[gemm];
    int a = n->inputs[0], b = n->inputs[1], c = n->n_inputs > 2 ? n->inputs[2] : -1;
    bool trans_b = llmc_node_attr_int(g, gemm, "transB", 0) != 0;
    if (!llmc_const_matrix(g, b) || !llmc_gemm_is_plain(g, gemm) || g->values[a].shape.rank != 2 ||
        !is_input_of_width(g, a, dim(g, b, trans_b ? 1 : 0)))
        return give_up(&m, gemm, "not A [M, K] times a constant float B with alpha = beta = 1, transA = 0");
    int bias = llmc_gemm_bias(g, c, dim(g, b, trans_b ? 0 : 1));
    if (bias == -2)
        return give_up(&m, gemm, "C is not a float constant [N] or [1, N]");
    int w = trans_b ? llmc_add_transposed_const(g, b) : b;
    if (bias == -3 || w < 0)
        return -1;
    return emit_linear(&m, gemm, a, w, bias);
}

static int visit_projection(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    if (llmc_is_onnx_op(&g->nodes[node], "MatMul"))
        return form_from_matmul(g, ctx, node);
    return llmc_is_onnx_op(&g->nodes[node], "Gemm") ? form_from_gemm(g, ctx, node) : 0;
}

/* ---- 2. merging ---- */

/* A live Linear without a residual input. */
static bool is_plain_linear(const llmc_node *n)
{
    return !n->dead && llmc_is_op(n, "Linear") && n->n_inputs <= LIN_RESIDUAL;
}

static int bias_of(const llmc_node *n)
{
    return n->n_inputs > LIN_BIAS ? n->inputs[LIN_BIAS] : -1;
}

/* What must agree for Linears to merge: their weights are float constants
 * (0) or file-quantized with the same block size and integer type. */
static int64_t weight_kind(const llmc_graph *g, int node)
{
    int dq = llmc_quant_weight(g, g->nodes[node].inputs[LIN_W]);
    if (dq < 0)
        return 0;
    int64_t block = llmc_node_attr_int(g, dq, "block_size", 0);
    return block * 64 + g->values[llmc_quant_weight_input(g, dq, 0)].dtype;
}

/* values[0..n) ([rows, cols_i] constants of one dtype) side by side: a new
 * constant [rows, sum cols_i]; -1 on OOM. */
static int concat_columns(llmc_graph *g, const int *values, int n)
{
    const llmc_value *first = &g->values[values[0]];
    int64_t rows = first->shape.dims[0].c, total = 0;
    size_t esize = llmc_dtype_size(first->dtype);
    for (int i = 0; i < n; i++)
        total += g->values[values[i]].shape.dims[1].c;
    uint8_t *cat = malloc((size_t)(rows * total) * esize + 1);
    int64_t col = 0;
    for (int i = 0; cat && i < n; i++) {
        const uint8_t *src = llmc_const_bytes(&g->values[values[i]].konst);
        int64_t cols = g->values[values[i]].shape.dims[1].c;
        if (!src) {
            free(cat);
            return -1;
        }
        for (int64_t r = 0; r < rows; r++)
            memcpy(cat + ((size_t)(r * total + col)) * esize, src + (size_t)(r * cols) * esize, (size_t)cols * esize);
        col += cols;
    }
    llmc_shape shape = {.rank = 2, .dims = {llmc_aff_const(rows), llmc_aff_const(total)}};
    int v = cat ? llmc_add_const(g, first->name, ".merged", first->dtype, &shape, cat, (size_t)(rows * total) * esize)
                : -1;
    free(cat);
    return v;
}

/* The members' file-quantized weights side by side: Wq, scales and zero
 * points concatenated along N, dequantized by a new DequantizeLinear of the
 * same block size; its output value, -1 on OOM. */
static int concat_file_weights(llmc_graph *g, const int *members, int n)
{
    int parts[3][LLMC_MATCH_MAX_NODES], ins[3];
    int dq0 = llmc_quant_weight(g, g->nodes[members[0]].inputs[LIN_W]);
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < n; i++)
            parts[k][i] = llmc_quant_weight_input(g, llmc_quant_weight(g, g->nodes[members[i]].inputs[LIN_W]), k);
        if ((ins[k] = concat_columns(g, parts[k], n)) < 0)
            return -1;
    }
    llmc_shape shape = g->values[ins[0]].shape;   /* (adding values moves g->values) */
    char *name = llmc_graph_unique_name(g, g->values[g->nodes[members[0]].inputs[LIN_W]].name, ".merged");
    int out = name ? llmc_graph_add_value(g, name, LLMC_DT_FLOAT) : -1;
    int node = out >= 0 ? llmc_graph_add_node(g, "DequantizeLinear", name, ins, 3, &out, 1) : -1;
    free(name);
    if (node < 0 || llmc_node_set_int(g, node, "axis", 0) ||
        llmc_node_set_int(g, node, "block_size", llmc_node_attr_int(g, dq0, "block_size", 0)))
        return -1;
    g->nodes[node].opset = g->nodes[dq0].opset;
    g->values[out].shape = shape;
    return out;
}

/* The members' weights [K, N_i] side by side: a new constant [K, sum N_i],
 * lazily (a view of theirs: a 2.5 GB model's q/k/v and gate/up are not
 * copied; the plan writer reads the view as it writes). */
static int concat_weights(llmc_graph *g, const int *members, int n)
{
    llmc_view *parts[LLMC_MATCH_MAX_NODES];
    for (int i = 0; i < n; i++)
        parts[i] = llmc_graph_const_view(g, g->nodes[members[i]].inputs[LIN_W]);
    int first = g->nodes[members[0]].inputs[LIN_W];
    return llmc_add_const_view(g, g->values[first].name, ".merged", llmc_view_concat(parts, n, 1));
}

/* The members' biases in a row, zeros for a missing one: a new constant
 * [total]; -1 when no member has a bias, -2 on OOM. */
static int concat_biases(llmc_graph *g, const int *members, int n, int64_t total)
{
    int with_bias = -1;
    for (int i = 0; i < n && with_bias < 0; i++)
        with_bias = bias_of(&g->nodes[members[i]]) >= 0 ? members[i] : -1;
    if (with_bias < 0)
        return -1;
    float *cat = calloc((size_t)total + 1, sizeof(float));
    int64_t col = 0;
    for (int i = 0; cat && i < n; i++) {
        int w = g->nodes[members[i]].inputs[LIN_W], b = bias_of(&g->nodes[members[i]]);
        if (b >= 0)   /* a float [N_i] (step 1 checked it), so the read cannot fail */
            llmc_const_read(&g->values[b].konst, 0, cat + col, sizeof(float) * (size_t)dim(g, w, 1));
        col += dim(g, w, 1);
    }
    llmc_shape shape = {.rank = 1, .dims = {llmc_aff_const(total)}};
    int v = cat ? llmc_add_const(g, g->values[bias_of(&g->nodes[with_bias])].name, ".merged", LLMC_DT_FLOAT, &shape,
                                 cat, sizeof(float) * (size_t)total)
                : -1;
    free(cat);
    return v < 0 ? -2 : v;
}

static int merge_group(llmc_graph *g, const llmc_pass_ctx *ctx, const int *members, int n)
{
    llmc_match m;
    int64_t total = 0;
    int n_out = 0, *outputs = NULL, rc = -1;
    llmc_match_init(&m, g, ctx, PASS_NAME);
    for (int i = 0; i < n; i++) {
        llmc_match_add(&m, members[i]);
        total += dim(g, g->nodes[members[i]].inputs[LIN_W], 1);
        n_out += g->nodes[members[i]].n_outputs;
    }
    int w = weight_kind(g, members[0]) ? concat_file_weights(g, members, n) : concat_weights(g, members, n);
    int bias = concat_biases(g, members, n, total);
    if (w >= 0 && bias != -2 && (outputs = malloc(sizeof(int) * (size_t)n_out))) {
        n_out = 0;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < g->nodes[members[i]].n_outputs; k++)
                outputs[n_out++] = g->nodes[members[i]].outputs[k];
        int inputs[3] = {g->nodes[members[0]].inputs[LIN_X], w, bias};
        int old_w[LLMC_MATCH_MAX_NODES];
        for (int i = 0; i < n; i++)
            old_w[i] = g->nodes[members[i]].inputs[LIN_W];
        rc = llmc_match_replace_outputs(&m, members[0], "Linear", false, inputs, bias >= 0 ? 3 : 2, outputs, n_out) < 0
                 ? -1
                 : 1;
        for (int i = 0; rc == 1 && i < n; i++) /* the members' own DequantizeLinears, now unread */
            if (llmc_quant_weight(g, old_w[i]) >= 0 && llmc_graph_use_count(g, old_w[i]) == 0)
                llmc_graph_erase_node(g, g->values[old_w[i]].producer);
    }
    free(outputs);
    return rc;
}

/* Visiting the first Linear of a group (in topological order) merges its
 * siblings, in node-id order, into it. */
static int visit_merge(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    if (!is_plain_linear(&g->nodes[node]) || g->nodes[node].n_outputs < 1)
        return 0;
    int x = g->nodes[node].inputs[LIN_X], n = 0, rc = 0;
    int64_t kind = weight_kind(g, node);
    int *members = malloc(sizeof(int) * (size_t)g->n_nodes);
    for (int i = 0; members && i < g->n_nodes; i++)
        if (is_plain_linear(&g->nodes[i]) && g->nodes[i].inputs[LIN_X] == x && weight_kind(g, i) == kind &&
            n < LLMC_MATCH_MAX_NODES)
            members[n++] = i;
    if (!members)
        rc = -1;
    else if (n > 1)
        rc = merge_group(g, ctx, members, n);
    free(members);
    return rc;
}

/* ---- 3. splits ---- */

/* The Split that alone reads y, along its last axis: collected, its node;
 * -1 (nothing collected) otherwise. */
static int last_axis_split(llmc_match *m, int y)
{
    const llmc_graph *g = m->g;
    const llmc_shape *ys = &g->values[y].shape;
    int n_before = m->n_nodes, split = llmc_match_consumer(m, y, "Split");
    int64_t axis = split >= 0 ? llmc_node_attr_int(g, split, "axis", 0) : 0;
    bool ok = split >= 0 && (axis == -1 || axis == ys->rank - 1);
    for (int k = 0; ok && k < g->nodes[split].n_outputs; k++) {
        int v = g->nodes[split].outputs[k];
        ok = v >= 0 && g->values[v].shape.rank == ys->rank &&
             llmc_aff_is_const(g->values[v].shape.dims[ys->rank - 1]);
        for (int d = 0; ok && d < ys->rank - 1; d++)
            ok = llmc_aff_eq(g->values[v].shape.dims[d], ys->dims[d]);
    }
    if (!ok)
        m->n_nodes = n_before;
    return ok ? split : -1;
}

static int visit_splits(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    const llmc_node *n = &g->nodes[node];
    if (!is_plain_linear(n))
        return 0;
    llmc_match m;
    llmc_match_init(&m, g, ctx, PASS_NAME);
    llmc_match_add(&m, node);
    int outputs[LLMC_MATCH_MAX_NODES * 4], n_out = 0;
    for (int k = 0; k < n->n_outputs; k++) {
        int split = last_axis_split(&m, n->outputs[k]);
        const llmc_node *s = split >= 0 ? &g->nodes[split] : NULL;
        if (split >= 0 && n_out + s->n_outputs + n->n_outputs - k <= (int)(sizeof outputs / sizeof outputs[0])) {
            memcpy(outputs + n_out, s->outputs, sizeof(int) * (size_t)s->n_outputs);
            n_out += s->n_outputs;
        } else {
            outputs[n_out++] = n->outputs[k];
        }
    }
    if (m.n_nodes == 1)
        return 0;
    return llmc_match_replace_outputs(&m, node, "Linear", false, n->inputs, n->n_inputs, outputs, n_out) < 0 ? -1 : 1;
}

/* ---- 4. residual ---- */

static int visit_residual(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    const llmc_node *n = &g->nodes[node];
    if (!is_plain_linear(n) || n->n_outputs != 1)
        return 0;
    llmc_match m;
    llmc_match_init(&m, g, ctx, PASS_NAME);
    llmc_match_add(&m, node);
    int y = n->outputs[0];
    int add = llmc_match_consumer(&m, y, "Add");
    int r = add >= 0 ? llmc_other_input(g, add, y) : -1;
    if (r < 0 || g->values[r].is_const)
        return 0;   /* a constant addend is a bias question, settled in step 1 */
    if (g->values[r].dtype != LLMC_DT_FLOAT || !llmc_shape_eq(&g->values[r].shape, &g->values[y].shape) ||
        !llmc_shape_eq(&g->values[g->nodes[add].outputs[0]].shape, &g->values[y].shape))
        return give_up(&m, add, "the residual is not a float tensor of the Linear's output shape");
    int inputs[LIN_INPUTS] = {n->inputs[LIN_X], n->inputs[LIN_W], bias_of(n), r};
    return llmc_match_replace(&m, add, "Linear", false, inputs, LIN_INPUTS) < 0 ? -1 : 1;
}

/* ---- 5. residual chains ---- */

/* The Linear producing v as its only output, with v read by nothing else
 * (and not a graph output); -1 otherwise. */
static int sole_linear_producer(const llmc_graph *g, int v)
{
    int p = v >= 0 ? g->values[v].producer : -1;
    if (p < 0 || g->nodes[p].dead || !llmc_is_op(&g->nodes[p], "Linear") || g->nodes[p].n_outputs != 1 ||
        llmc_graph_use_count(g, v) != 1 || g->values[v].is_graph_output)
        return -1;
    return p;
}

/* From Linear b (with a residual), down its residual chain to the first
 * Linear without one; -1 if the chain ends elsewhere. */
static int chain_end(const llmc_graph *g, int b)
{
    for (int node = b; node >= 0;) {
        if (is_plain_linear(&g->nodes[node]))
            return node;
        node = sole_linear_producer(g, g->nodes[node].inputs[LIN_RESIDUAL]);
    }
    return -1;
}

static int visit_residual_chain(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    const llmc_node *add = &g->nodes[node];
    if (!llmc_is_onnx_op(add, "Add") || add->n_inputs != 2)
        return 0;
    for (int k = 0; k < 2; k++) {
        int y = add->inputs[k], c = add->inputs[1 - k];
        int b = sole_linear_producer(g, y);
        if (b < 0 || is_plain_linear(&g->nodes[b]) || g->values[c].is_const ||
            g->values[c].dtype != LLMC_DT_FLOAT || !llmc_shape_eq(&g->values[c].shape, &g->values[y].shape) ||
            !llmc_shape_eq(&g->values[add->outputs[0]].shape, &g->values[y].shape))
            continue;
        int a = chain_end(g, sole_linear_producer(g, g->nodes[b].inputs[LIN_RESIDUAL]));
        if (a < 0)
            continue;
        llmc_match ma, mb;
        llmc_match_init(&ma, g, ctx, PASS_NAME);
        llmc_match_init(&mb, g, ctx, PASS_NAME);
        llmc_match_add(&ma, a);
        llmc_match_add(&mb, b);
        llmc_match_add(&mb, node);
        const llmc_node *an = &g->nodes[a], *bn = &g->nodes[b];
        int a_inputs[LIN_INPUTS] = {an->inputs[LIN_X], an->inputs[LIN_W], bias_of(an), c};
        int b_inputs[LIN_INPUTS] = {bn->inputs[LIN_X], bn->inputs[LIN_W], bias_of(bn), bn->inputs[LIN_RESIDUAL]};
        if (llmc_match_replace(&ma, a, "Linear", false, a_inputs, LIN_INPUTS) < 0 ||
            llmc_match_replace(&mb, node, "Linear", false, b_inputs, LIN_INPUTS) < 0)
            return -1;
        return 1;
    }
    return 0;
}

/* ---- 6. post-norm residuals ---- */

static int visit_norm_residual(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    const llmc_node *add = &g->nodes[node];
    if (!llmc_is_onnx_op(add, "Add") || add->n_inputs != 2)
        return 0;
    for (int k = 0; k < 2; k++) {
        int y = add->inputs[k], r = add->inputs[1 - k], norm = g->values[y].producer;
        if (norm < 0 || !llmc_is_op(&g->nodes[norm], "RMSNorm") || g->nodes[norm].n_inputs != 2 ||
            llmc_match_sole_reader(g, y) != node || g->values[r].dtype != LLMC_DT_FLOAT ||
            !llmc_shape_eq(&g->values[r].shape, &g->values[y].shape) ||
            !llmc_shape_eq(&g->values[add->outputs[0]].shape, &g->values[y].shape))
            continue;
        llmc_match m;
        llmc_match_init(&m, g, ctx, PASS_NAME);
        llmc_match_add(&m, norm);
        llmc_match_add(&m, node);
        const llmc_node *n = &g->nodes[norm];
        int inputs[3] = {n->inputs[0], n->inputs[1], r};
        float eps = llmc_node_attr_float(g, norm, "epsilon", 1e-5f);
        int id = llmc_match_replace(&m, node, "RMSNorm", false, inputs, 3);
        return id < 0 || llmc_node_set_float(g, id, "epsilon", eps) ? -1 : 1;
    }
    return 0;
}

static int run_linear_fusion(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    /* steps 0..6 in order: scales, projections, merging, splits, residuals,
     * residual chains, post-norm residuals */
    static const llmc_fusion_visit steps[] = {llmc_scale_fold_visit, visit_projection, visit_merge, visit_splits,
                                              visit_residual, visit_residual_chain, visit_norm_residual};
    int n[7];
    int rc = llmc_fusion_walks(g, ctx, PASS_NAME, steps, 7, n, err);
    if (rc == LLMC_OK)
        llmc_pass_detail(ctx, "%d linears, %d merged groups, %d residuals (%d down a chain), %d splits absorbed%s%s",
                         n[1], n[2], n[4] + n[5], n[5], n[3], n[0] ? ", scales folded into weights (--explain)" : "",
                         n[6] ? ", post-norm residuals into RMSNorm" : "");
    return rc;
}

const llmc_pass llmc_pass_linear_fusion = {PASS_NAME, run_linear_fusion};
