/* identity: nodes that compute nothing are removed and their readers
 * read the input, so the fusions after it match one form.  Exporters leave
 * many:
 *   - a Cast to the dtype its input already has: transformers'
 *     `softmax(dtype=torch.float32).to(query.dtype)`, Phi's
 *     `.to(torch.float32)` on q and k, RMSNorm's float32 round trip, and
 *     every `.to(dtype)` of a model exported in float32 (or widened to it
 *     from float16 at import);
 *   - a Slice whose output has its input's shape (affine dims in S and P,
 *     after shape inference), with every start resolving to 0 and every
 *     step 1: partial-rotary code at rotary fraction 1.0 (`q[..., :d]` over
 *     a dim of size d; ends of INT64_MAX; starts of -d);
 *   - a Concat input whose concat-axis dim is 0 (that code's `q[..., d:]`,
 *     the part that does not rotate) is dropped, and a Concat left with one
 *     input of its output's shape is removed like the rest;
 *   - layout round trips: a Reshape to its input's own shape is removed,
 *     and so are a Reshape of a Reshape back to that one's input shape and
 *     a Transpose of a Transpose whose perms compose to the identity (their
 *     readers read the inner one's input).  onnxruntime-genai's
 *     RotaryEmbedding on [B, S, N*D] expands to split heads, rotate, merge
 *     heads; the GroupQueryAttention after it splits the heads again, and
 *     only without the merge-split pair between them is the rotation on the
 *     split heads, the form rope- and attention-fusion take.
 *
 * When the removed node's output is a graph output (transformers'
 * `present.N.key` produced through a Cast), the input takes over the
 * output's ONNX name, because roles are bound by name; that needs an input
 * that is not itself a graph input, graph output or constant (those keep
 * their names), else the node stays. */
#include <stdlib.h>

#include "ir/llmc_ops.h"
#include "match.h"
#include "pass.h"
#include "pass_list.h"

static const char PASS[] = "identity";

/* Node `node` has one data input x and one output y of x's dtype and shape. */
static bool keeps_type(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    if (n->n_inputs < 1 || n->n_outputs != 1 || n->inputs[0] < 0 || n->outputs[0] < 0)
        return false;
    const llmc_value *x = &g->values[n->inputs[0]], *y = &g->values[n->outputs[0]];
    return x->dtype != LLMC_DT_UNDEFINED && y->dtype == x->dtype && llmc_shape_eq(&x->shape, &y->shape);
}

static bool is_identity_cast(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    return llmc_is_onnx_op(n, "Cast") && n->n_inputs == 1 && keeps_type(g, node) &&
           llmc_node_attr_int(g, node, "to", 0) == g->values[n->inputs[0]].dtype;
}

/* Constant ints of optional Slice input k into out[n]; `dflt(i)` when omitted. */
static bool slice_ints(const llmc_graph *g, const llmc_node *n, int k, int64_t *out, int want, bool is_axes)
{
    int count;
    if (k >= n->n_inputs || n->inputs[k] < 0) {
        for (int i = 0; i < want; i++)
            out[i] = is_axes ? i : 1;
        return true;
    }
    return llmc_match_const_ints(g, n->inputs[k], out, LLMC_MAX_RANK, &count) && count == want;
}

/* A Slice of x to x's own shape with starts that resolve to 0 and steps 1:
 * the output is x (ends of any size clamp to the dim). */
static bool is_identity_slice(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    int64_t starts[LLMC_MAX_RANK], axes[LLMC_MAX_RANK], steps[LLMC_MAX_RANK];
    int count;
    if (!llmc_is_onnx_op(n, "Slice") || n->n_inputs < 3 || !keeps_type(g, node) ||
        !llmc_match_const_ints(g, n->inputs[1], starts, LLMC_MAX_RANK, &count) ||
        !slice_ints(g, n, 3, axes, count, true) || !slice_ints(g, n, 4, steps, count, false))
        return false;
    const llmc_shape *x = &g->values[n->inputs[0]].shape;
    for (int i = 0; i < count; i++) {
        int64_t axis = axes[i] < 0 ? axes[i] + x->rank : axes[i];
        if (axis < 0 || axis >= x->rank || steps[i] != 1)
            return false;
        llmc_affine dim = x->dims[axis];
        if (starts[i] != 0 && !(starts[i] < 0 && llmc_aff_is_const(dim) && starts[i] + dim.c <= 0))
            return false;
    }
    return true;
}

/* Drops the inputs of Concat `node` that are empty along its axis (while
 * another input is left); the number dropped. */
static int drop_empty_inputs(llmc_graph *g, int node)
{
    llmc_node *n = &g->nodes[node];
    if (!llmc_is_onnx_op(n, "Concat") || n->n_outputs != 1 || n->outputs[0] < 0)
        return 0;
    int rank = g->values[n->outputs[0]].shape.rank;
    int axis = llmc_match_axis_attr(g, node, "axis", 0, rank), dropped = 0;
    for (int k = n->n_inputs - 1; axis >= 0 && k >= 0 && n->n_inputs > 1; k--) {
        int v = n->inputs[k];
        llmc_affine d = v >= 0 && g->values[v].shape.rank == rank ? g->values[v].shape.dims[axis] : (llmc_affine){1, 0, 0};
        if (!llmc_aff_is_const(d) || d.c != 0)
            continue;
        for (int j = k; j + 1 < n->n_inputs; j++)
            n->inputs[j] = n->inputs[j + 1];
        n->n_inputs--;
        dropped++;
    }
    return dropped;
}

static bool is_identity_concat(const llmc_graph *g, int node)
{
    return llmc_is_onnx_op(&g->nodes[node], "Concat") && g->nodes[node].n_inputs == 1 && keeps_type(g, node);
}

/* Reshape `node` of a Reshape, back to that one's input shape: *x is
 * that input (a reshape depends only on the element order). */
static bool is_reshape_round_trip(const llmc_graph *g, int node, int *x)
{
    const llmc_node *n = &g->nodes[node];
    if (!llmc_is_onnx_op(n, "Reshape") || n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs != 1 ||
        n->outputs[0] < 0)
        return false;
    int inner = g->values[n->inputs[0]].producer;
    if (inner < 0 || g->nodes[inner].dead || !llmc_is_onnx_op(&g->nodes[inner], "Reshape") ||
        g->nodes[inner].inputs[0] < 0)
        return false;
    const llmc_value *in = &g->values[g->nodes[inner].inputs[0]], *y = &g->values[n->outputs[0]];
    *x = g->nodes[inner].inputs[0];
    return in->dtype == y->dtype && llmc_shape_eq(&in->shape, &y->shape);
}

static bool is_identity_reshape(const llmc_graph *g, int node)
{
    return llmc_is_onnx_op(&g->nodes[node], "Reshape") && keeps_type(g, node);
}

/* The perm of Transpose `node` into p (its rank r entries); false when it
 * has none of that rank (the default reverses: never an identity pair
 * partner worth matching). */
static bool transpose_perm(const llmc_graph *g, int node, int r, int64_t *p)
{
    const llmc_attr *a = llmc_node_attr(g, node, "perm");
    if (!a || a->type != LLMC_ATTR_INTS || a->n_ints != r)
        return false;
    for (int i = 0; i < r; i++)
        p[i] = a->ints[i];
    return true;
}

/* Transpose `node` of a Transpose, the two perms composing to the identity
 * (output axis i of the outer is axis inner[outer[i]] of the inner's
 * input): *x is the inner one's input. */
static bool is_transpose_round_trip(const llmc_graph *g, int node, int *x)
{
    const llmc_node *n = &g->nodes[node];
    if (!llmc_is_onnx_op(n, "Transpose") || n->n_inputs != 1 || n->inputs[0] < 0 || n->n_outputs != 1 ||
        n->outputs[0] < 0)
        return false;
    int inner = g->values[n->inputs[0]].producer, r = g->values[n->inputs[0]].shape.rank;
    int64_t outer_p[LLMC_MAX_RANK], inner_p[LLMC_MAX_RANK];
    if (inner < 0 || g->nodes[inner].dead || !llmc_is_onnx_op(&g->nodes[inner], "Transpose") ||
        g->nodes[inner].inputs[0] < 0 || !transpose_perm(g, node, r, outer_p) ||
        !transpose_perm(g, inner, r, inner_p))
        return false;
    for (int i = 0; i < r; i++)
        if (outer_p[i] < 0 || outer_p[i] >= r || inner_p[outer_p[i]] != i)
            return false;
    *x = g->nodes[inner].inputs[0];
    return true;
}

/* The graph output y is computed by an identity of x: x gets y's name
 * (the names swap, so every name stays unique). */
static bool take_output_name(llmc_graph *g, int x, int y)
{
    llmc_value *in = &g->values[x];
    if (in->is_graph_input || in->is_graph_output || in->is_const)
        return false;
    char *name = in->name;
    in->name = g->values[y].name;
    g->values[y].name = name;
    return true;
}

/* Node `node`'s output equals x (its input, or the input of the node it
 * undoes): its readers read x and the node goes. */
static int remove_node(llmc_graph *g, const llmc_pass_ctx *ctx, int node, int x)
{
    int y = g->nodes[node].outputs[0];
    if (g->values[y].is_graph_output && !take_output_name(g, x, y)) {
        llmc_pass_explain(ctx, PASS, g, node, "its output equals '%s', a graph input, output or constant, and "
                          "output '%s' keeps its name", g->values[x].name, g->values[y].name);
        return 0;
    }
    llmc_graph_replace_value(g, y, x);
    llmc_graph_erase_node(g, node);
    return 1;
}

static int remove_identity(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    return remove_node(g, ctx, node, g->nodes[node].inputs[0]);
}

typedef struct {
    int casts, slices, empties, concats, reshapes, transposes;
} identity_counts;

static void remove_node_identities(llmc_graph *g, const llmc_pass_ctx *ctx, int i, identity_counts *c)
{
    int x;
    if (is_identity_cast(g, i))
        c->casts += remove_identity(g, ctx, i);
    else if (is_identity_slice(g, i))
        c->slices += remove_identity(g, ctx, i);
    else if (is_identity_reshape(g, i))
        c->reshapes += remove_identity(g, ctx, i);
    else if (is_reshape_round_trip(g, i, &x))
        c->reshapes += remove_node(g, ctx, i, x);
    else if (is_transpose_round_trip(g, i, &x))
        c->transposes += remove_node(g, ctx, i, x);
    else if ((c->empties += drop_empty_inputs(g, i), is_identity_concat(g, i)))
        c->concats += remove_identity(g, ctx, i);
}

static int run_identity(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    identity_counts c = {0};
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead)
            remove_node_identities(g, ctx, i, &c);
    /* the Slices that made the dropped inputs and the inner halves of
     * round trips are unread now */
    int rc = c.empties + c.reshapes + c.transposes ? llmc_match_sweep(g, err) : LLMC_OK;
    if (c.slices + c.empties + c.concats + c.reshapes + c.transposes == 0)
        llmc_pass_detail(ctx, "%d removed", c.casts);
    else
        llmc_pass_detail(ctx, "%d casts, %d slices, %d concats removed; %d empty concat inputs dropped; "
                         "%d reshapes and %d transposes undone", c.casts, c.slices, c.concats, c.empties,
                         c.reshapes, c.transposes);
    return rc;
}

const llmc_pass llmc_pass_identity = {"identity", run_identity};
