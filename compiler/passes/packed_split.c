/* packed-split (canonicalization): the pieces of a packed projection taken
 * by Slices become one Split.  Transformers' Phi-3 computes q, k and v with
 * one qkv_proj and slices them apart (`qkv[..., :q]`, `qkv[..., q:q+kv]`,
 * `qkv[..., q+kv:]`), and its MLP chunks one gate_up_proj in two
 * (`.chunk(2, dim=-1)`); torch exports both as Slices.  A Split along the
 * last axis is the form GPT-2's c_attn exports, which attention- and
 * activation-fusion read through and linear-fusion turns into outputs of
 * the projection's llmc.Linear, so packed and separate projections end in
 * the same plan ops.
 *
 * Preconditions: y is the output of a MatMul (any weight: a float constant
 * or a pre-quantized file's canonical DequantizeLinear), not a graph
 * output, with a constant last dim N; y is read by two or more nodes, all
 * Slices of y (as their data input) on its last axis with constant bounds
 * and step 1 (llmc_match_slice_last_range), whose ranges, none empty,
 * cover [0, N) exactly without overlap.  The Split (axis -1, the piece
 * sizes in range order as a constant int64 input) writes the Slices'
 * outputs.  Slices of any other value, such as the partial-rotary
 * q[..., :r] that rope-fusion takes, are left alone. */
#include <stdlib.h>
#include <string.h>

#include "fusion_match.h"
#include "pass.h"
#include "pass_list.h"

static const char PASS[] = "packed-split";

/* More pieces than this (q, k, v; gate, up) is not a packed projection. */
#define MAX_PIECES 8

typedef struct {
    int node;               /* the Slice */
    int64_t start, end;     /* its range on y's last axis, clamped */
} piece;

/* Is v read by node `node` in any input position but 0? */
static bool reads_as_parameter(const llmc_node *n, int v)
{
    for (int k = 1; k < n->n_inputs; k++)
        if (n->inputs[k] == v)
            return true;
    return false;
}

/* The readers of y as pieces; the count, or -1 with *bad the first reader
 * that is not a last-axis Slice of y with constant bounds (or one too many). */
static int collect_pieces(const llmc_graph *g, int y, piece *p, int *bad)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const llmc_node *node = &g->nodes[i];
        int x = -1;
        bool reads = !node->dead && node->n_inputs > 0 && (node->inputs[0] == y || reads_as_parameter(node, y));
        if (!reads)
            continue;
        if (n == MAX_PIECES || !llmc_is_onnx_op(node, "Slice") || reads_as_parameter(node, y) ||
            !llmc_match_slice_last_range(g, i, &p[n].start, &p[n].end, &x)) {
            *bad = i;
            return -1;
        }
        p[n++].node = i;
    }
    return n;
}

/* Sorts the pieces by start; do they cover [0, len) in order, none empty? */
static bool tiles(piece *p, int n, int64_t len)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && p[j].start < p[j - 1].start; j--) {
            piece t = p[j];
            p[j] = p[j - 1];
            p[j - 1] = t;
        }
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (p[i].start != at || p[i].end <= p[i].start)
            return false;
        at = p[i].end;
    }
    return at == len;
}

/* Split(y, sizes) writing the Slices' outputs; 1, or -1 on OOM. */
static int rewrite(llmc_graph *g, int y, const piece *p, int n)
{
    int64_t sizes[MAX_PIECES];
    int outputs[MAX_PIECES];
    for (int i = 0; i < n; i++) {
        sizes[i] = p[i].end - p[i].start;
        outputs[i] = g->nodes[p[i].node].outputs[0];
    }
    llmc_shape shape = {.rank = 1, .dims = {llmc_aff_const(n)}};
    int split = llmc_add_const(g, g->values[y].name, "/split_sizes", LLMC_DT_INT64, &shape, sizes,
                               sizeof(int64_t) * (uint64_t)n);
    char *name = strdup(g->nodes[p[0].node].name);
    if (split < 0 || !name)
        return free(name), -1;
    for (int i = 0; i < n; i++)
        llmc_graph_erase_node(g, p[i].node);
    int ins[2] = {y, split};
    int node = llmc_graph_add_node(g, "Split", name, ins, 2, outputs, n);
    free(name);
    return node >= 0 && llmc_node_set_int(g, node, "axis", -1) == 0 ? 1 : -1;
}

static int visit(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    const llmc_node *mm = &g->nodes[node];
    if (!llmc_is_onnx_op(mm, "MatMul") || mm->n_outputs != 1)
        return 0;
    int y = mm->outputs[0], bad = -1;
    const llmc_shape *ys = &g->values[y].shape;
    piece p[MAX_PIECES];
    int n = collect_pieces(g, y, p, &bad);
    if (n < 0) {
        /* explained only when some reader is a Slice: a packed projection
         * this pass was meant for */
        for (int i = 0; i < g->n_nodes && bad >= 0; i++)
            if (!g->nodes[i].dead && llmc_is_onnx_op(&g->nodes[i], "Slice") && g->nodes[i].n_inputs > 0 &&
                g->nodes[i].inputs[0] == y) {
                llmc_pass_explain(ctx, PASS, g, bad, "reads the MatMul's output '%s' but is not a Slice of "
                                  "its last axis with constant bounds and step 1", g->values[y].name);
                break;
            }
        return 0;
    }
    if (n < 2)
        return 0;
    if (g->values[y].is_graph_output || ys->rank < 1 || !llmc_aff_is_const(ys->dims[ys->rank - 1]) ||
        !tiles(p, n, ys->dims[ys->rank - 1].c)) {
        llmc_pass_explain(ctx, PASS, g, p[0].node, "the Slices of '%s' do not cover its last axis exactly once "
                          "(or it is a graph output)", g->values[y].name);
        return 0;
    }
    return rewrite(g, y, p, n);
}

static int run_packed_split(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    int count = 0;
    int rc = llmc_fusion_walk(g, ctx, PASS, visit, &count, err);
    if (!rc && count)
        rc = llmc_match_sweep(g, err);
    if (!rc)
        llmc_pass_detail(ctx, "%d packed projections split", count);
    return rc;
}

const llmc_pass llmc_pass_packed_split = {PASS, run_packed_split};
