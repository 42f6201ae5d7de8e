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

static int refuse(const llmc_graph *g, int node, const char *why, llmc_error *err)
{
    return llmc_fail(err, LLMC_E_UNSUPPORTED, "--logits last: %s%s%s%s", node >= 0 ? "node '" : "",
                     node >= 0 ? g->nodes[node].name : "", node >= 0 ? "': " : "", why);
}

/* The head producing `logits`, checked; -1 after setting err. */
static int checked_head(const llmc_graph *g, int logits, llmc_error *err)
{
    if (logits < 0)
        return refuse(g, -1, "the model has no 'logits' output", err), -1;
    int head = g->values[logits].producer;
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
    one_row(&g->values[logits]);
    llmc_pass_detail(ctx, "logits of the last position: '%s' sliced before '%s'", g->values[h].name,
                     g->nodes[at].name);
    return LLMC_OK;
}

const llmc_pass llmc_pass_logits_last = {"logits-last", run_logits_last};
