/* logits-last (`llmc compile --logits last`): the LM head computes the
 * logits of the last position of each call only.
 *
 * Generation reads one row of logits per call, the last; the LM head over
 * every row of a prompt costs S x V x H multiply-adds (a 128-token prompt
 * through Qwen2-0.5B's 151936 x 896 head: 17 G) and an [S, V] arena tensor.
 * The pass slices the hidden state to its last position,
 * Slice(h, starts [-1], ends [INT64_MAX], axes [1]) -> [1, 1, H], before the
 * final norm (or straight before the head when no norm precedes it), so the
 * Logits output becomes [1, 1, V].
 *
 * Preconditions (each refusal names the node and the condition):
 *   - a graph output with the Logits role, produced by an llmc.Linear (the
 *     head: MatMul/Gemm by a constant W, linear-fusion ran before) with one
 *     output and no residual input, over x [1, S, H];
 *   - or produced from the head's output through a chain of ops that act on
 *     each logit alone (Gemma 2's soft-cap tanh(l / c) * c; Granite's
 *     l / scale when it was not folded into W): a unary of PER_LOGIT_UNARY,
 *     or an op of PER_LOGIT_BINARY with a constant scalar operand, each
 *     link's input read by that op only.  Each logit's value depends on its
 *     own row alone, so slicing the row before the head gives the same
 *     last row; the chain's values become one row too;
 *   - between the slice point and the head nothing mixes positions: the
 *     only op allowed there is a norm over the last axis (llmc.RMSNorm,
 *     LayerNormalization with axis -1 or rank - 1 and its statistics
 *     unread) whose output only the head reads; the head itself (x W + b)
 *     is per position.
 * Without --logits last (ONNX semantics, every row) the pass changes nothing. */
#include <stdint.h>
#include <stdlib.h>

#include "fusion_match.h"
#include "ir/io_roles.h"
#include "ir/llmc_ops.h"
#include "pass.h"
#include "pass_list.h"

static const char PASS[] = "logits-last";

static int logits_output(const llmc_graph *g)
{
    for (int i = 0; i < g->n_outputs; i++) {
        int layer, v = g->outputs[i];
        if (llmc_io_role(g->values[v].name, 1, &layer) == LLMC_ROLE_LOGITS)
            return v;
    }
    return -1;
}

/* [1, S, n] */
static bool is_rows_of_call(const llmc_value *v)
{
    llmc_affine s = {0, 1, 0};
    return v->shape.rank == 3 && llmc_aff_eq(v->shape.dims[0], llmc_aff_const(1)) &&
           llmc_aff_eq(v->shape.dims[1], s) && llmc_aff_is_const(v->shape.dims[2]);
}

/* A norm over the last axis whose only output read is the head's x. */
static bool is_last_axis_norm(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    if (llmc_is_op(n, "RMSNorm"))
        return n->n_outputs == 1;
    if (!llmc_is_onnx_op(n, "LayerNormalization"))
        return false;
    int rank = g->values[n->outputs[0]].shape.rank;
    int64_t axis = llmc_node_attr_int(g, node, "axis", -1);
    for (int j = 1; j < n->n_outputs; j++)
        if (n->outputs[j] >= 0 && llmc_graph_use_count(g, n->outputs[j]) > 0)
            return false;
    return axis == -1 || axis == rank - 1;
}

/* Ops applied to every element alone: a unary, or a binary whose other
 * operand is a constant scalar. */
static const char *const PER_LOGIT_UNARY[] = {"Tanh", "Sigmoid", "Neg", "Abs", "Relu", "Exp", "Log",
                                              "Sqrt", "Reciprocal", "Erf"};
static const char *const PER_LOGIT_BINARY[] = {"Add", "Sub", "Mul", "Div", "Pow"};

static bool op_in_list(const llmc_node *n, const char *const *ops, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (llmc_is_onnx_op(n, ops[i]))
            return true;
    return false;
}

/* The input of node `node` that carries the logits when the node maps each
 * logit alone to its output of the same shape; -1 otherwise. */
static int per_logit_input(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    double c;
    int x = -1;
    if (n->n_outputs != 1)
        return -1;
    if (n->n_inputs == 1 && op_in_list(n, PER_LOGIT_UNARY, sizeof PER_LOGIT_UNARY / sizeof *PER_LOGIT_UNARY))
        x = n->inputs[0];
    else if (n->n_inputs == 2 && op_in_list(n, PER_LOGIT_BINARY, sizeof PER_LOGIT_BINARY / sizeof *PER_LOGIT_BINARY))
        for (int k = 0; k < 2 && x < 0; k++)
            if (llmc_match_const_scalar(g, n->inputs[1 - k], &c) && n->inputs[k] >= 0 &&
                !g->values[n->inputs[k]].is_const)
                x = n->inputs[k];
    if (x < 0 || llmc_graph_use_count(g, x) != 1 ||
        !llmc_shape_eq(&g->values[x].shape, &g->values[n->outputs[0]].shape))
        return -1;
    return x;
}

/* The value the head writes: logits itself, or the start of its chain of
 * per-logit ops. */
static int head_output(const llmc_graph *g, int logits)
{
    int v = logits, x;
    while (g->values[v].producer >= 0 && (x = per_logit_input(g, g->values[v].producer)) >= 0)
        v = x;
    return v;
}

static int refuse(const llmc_graph *g, int node, const char *why, llmc_error *err)
{
    return llmc_fail(err, LLMC_E_UNSUPPORTED, "--logits last: %s%s%s%s", node >= 0 ? "node '" : "",
                     node >= 0 ? g->nodes[node].name : "", node >= 0 ? "': " : "", why);
}

/* The head producing `logits` (through its per-logit ops), checked; -1
 * after setting err. */
static int checked_head(const llmc_graph *g, int logits, llmc_error *err)
{
    if (logits < 0)
        return refuse(g, -1, "the model has no 'logits' output", err), -1;
    int head = g->values[head_output(g, logits)].producer;
    if (head < 0 || !llmc_is_op(&g->nodes[head], "Linear"))
        return refuse(g, head, "the logits are not produced by an LM head (a MatMul by a constant "
                      "weight, fused to llmc.Linear), so slicing before it may change them", err), -1;
    const llmc_node *n = &g->nodes[head];
    if (n->n_outputs != 1 || (n->n_inputs > 3 && n->inputs[3] >= 0))
        return refuse(g, head, "the LM head has several outputs or a residual input", err), -1;
    if (!is_rows_of_call(&g->values[n->inputs[0]]))
        return refuse(g, head, "the LM head's input is not the hidden states [1, S, H]", err), -1;
    return head;
}

/* Slice(h, [-1], [INT64_MAX], axes [1]) -> [1, 1, H]; the value id or -1. */
static int last_row(llmc_graph *g, int h, const char *base)
{
    static const int64_t start = -1, end = INT64_MAX, axis = 1;
    llmc_shape one = {.rank = 1, .dims = {llmc_aff_const(1)}};
    int ins[4] = {h, llmc_add_const(g, base, "/last/starts", LLMC_DT_INT64, &one, &start, 8),
                  llmc_add_const(g, base, "/last/ends", LLMC_DT_INT64, &one, &end, 8),
                  llmc_add_const(g, base, "/last/axes", LLMC_DT_INT64, &one, &axis, 8)};
    char *name = llmc_graph_unique_name(g, g->values[h].name, "/last");
    int y = name && ins[1] >= 0 && ins[2] >= 0 && ins[3] >= 0 ? llmc_graph_add_value(g, name, LLMC_DT_FLOAT) : -1;
    if (y >= 0) {
        g->values[y].shape = g->values[h].shape;
        g->values[y].shape.dims[1] = llmc_aff_const(1);
        if (llmc_graph_add_node(g, "Slice", name, ins, 4, &y, 1) < 0)
            y = -1;
    }
    free(name);
    return y;
}

static void one_row(llmc_value *v)
{
    v->shape.dims[1] = llmc_aff_const(1);
}

/* The logits and the values of their per-logit chain back to the head's
 * output become one row (each link read before its output changes). */
static void chain_one_row(llmc_graph *g, int logits, int head)
{
    for (int v = logits; v >= 0;) {
        int p = g->values[v].producer, next = p == head ? -1 : per_logit_input(g, p);
        one_row(&g->values[v]);
        v = next;
    }
}

static int run_logits_last(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    if (!ctx->logits_last)
        return LLMC_OK;
    int logits = logits_output(g), head = checked_head(g, logits, err);
    if (head < 0)
        return err->code;
    int x = g->nodes[head].inputs[0], norm = g->values[x].producer;
    bool before_norm = norm >= 0 && is_last_axis_norm(g, norm) && llmc_graph_use_count(g, x) == 1 &&
                       is_rows_of_call(&g->values[g->nodes[norm].inputs[0]]);
    int at = before_norm ? norm : head, h = g->nodes[at].inputs[0];
    int y = last_row(g, h, g->nodes[at].name);
    if (y < 0)
        return llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", PASS);
    g->nodes[at].inputs[0] = y;
    for (int j = 0; before_norm && j < g->nodes[norm].n_outputs; j++)
        if (g->nodes[norm].outputs[j] >= 0)
            one_row(&g->values[g->nodes[norm].outputs[j]]);
    chain_one_row(g, logits, head);
    llmc_pass_detail(ctx, "logits of the last position: '%s' sliced before '%s'", g->values[h].name,
                     g->nodes[at].name);
    return LLMC_OK;
}

const llmc_pass llmc_pass_logits_last = {"logits-last", run_logits_last};
