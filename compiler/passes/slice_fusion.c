/* slice-fusion: Slice(Slice(x)) becomes one Slice of x when the inner
 * result has no other reader and every start, end, axis and step is a
 * constant (ONNX Slice from opset 13: negative indices count from the end,
 * then indices clamp to the dim).
 *
 * Axes only one of the two slices touches keep their bounds.  On an axis
 * both slice, the inner one takes `len1` elements first1 + i*step1 and the
 * outer one elements first2 + k*step2 of those, i.e. the elements
 * (first1 + first2*step1) + k*(step1*step2), len2 of them:
 *   - a constant dim: both slices are normalized on it and the result gets
 *     exact bounds (an end past index 0 with a negative step becomes
 *     INT64_MIN, since -1 would count from the end);
 *   - a dim in S or P: only starts and ends >= 0 with steps > 0, where the
 *     composed [s1 + s2*step1 : min(e1, s1 + e2*step1) : step1*step2] takes
 *     the same elements for every dim: outer position j < e2 is inner
 *     element s1 + j*step1 < s1 + e2*step1, and j < len1 is s1 + j*step1 <
 *     min(e1, dim).  Anything else depends on the dim and is left alone. */
#include <stdlib.h>
#include <string.h>

#include "ir/llmc_ops.h"
#include "pass.h"
#include "shape_inference.h"
#include "symbolic.h"

#define PASS_NAME "slice-fusion"

/* The bounds of one axis; `sliced` is false for an axis a Slice leaves. */
typedef struct {
    bool sliced;
    int64_t start, end, step;
} axis_bounds;

typedef struct {
    llmc_graph *g;
    const llmc_pass_ctx *ctx;
    int fused;
    char why[160];          /* why the current pair was refused */
} fuser;

/* ---- reading a Slice ---- */

/* The constant integers of input k (absent: n = 0); false if not constant. */
static bool const_input(const llmc_graph *g, const llmc_node *n, int k, int64_t *out, int *count)
{
    llmc_affine vals[LLMC_MAX_RANK];
    int v = k < n->n_inputs ? n->inputs[k] : -1;
    *count = 0;
    if (v < 0)
        return true;
    if (!g->values[v].is_const || g->values[v].is_graph_input)
        return false;
    int m = llmc_value_ints(g, v, vals, LLMC_MAX_RANK);
    for (int i = 0; i < m; i++) {
        if (!llmc_aff_is_const(vals[i]))
            return false;
        out[i] = vals[i].c;
    }
    *count = m;
    return m >= 0;
}

/* Per-axis bounds of Slice `node` on a tensor of rank `rank`. */
static bool read_slice(fuser *f, int node, int rank, axis_bounds *axes)
{
    const llmc_node *n = &f->g->nodes[node];
    int64_t starts[LLMC_MAX_RANK], ends[LLMC_MAX_RANK], ax[LLMC_MAX_RANK], steps[LLMC_MAX_RANK];
    int ns, ne, na, nk;
    memset(axes, 0, sizeof(axis_bounds) * LLMC_MAX_RANK);
    if (!const_input(f->g, n, 1, starts, &ns) || !const_input(f->g, n, 2, ends, &ne) ||
        !const_input(f->g, n, 3, ax, &na) || !const_input(f->g, n, 4, steps, &nk)) {
        snprintf(f->why, sizeof f->why, "Slice '%s' has bounds that are not constants", n->name);
        return false;
    }
    if (ns != ne || (na && na != ns) || (nk && nk != ns)) {
        snprintf(f->why, sizeof f->why, "Slice '%s' has starts, ends, axes, steps of different lengths", n->name);
        return false;
    }
    for (int i = 0; i < ns; i++) {
        int64_t a = na ? ax[i] : i;
        a += a < 0 ? rank : 0;
        int64_t step = nk ? steps[i] : 1;
        if (a < 0 || a >= rank || axes[a].sliced || step == 0) {
            snprintf(f->why, sizeof f->why, "Slice '%s' has an invalid axis or a zero step", n->name);
            return false;
        }
        axes[a] = (axis_bounds){true, starts[i], ends[i], step};
    }
    return true;
}

/* ---- composing one axis ---- */

static bool compose_const_dim(int64_t dim, const axis_bounds *in, const axis_bounds *out, axis_bounds *r)
{
    int64_t first1, len1, first2, len2;
    llmc_slice_axis_const(dim, in->start, in->end, in->step, &first1, &len1);
    llmc_slice_axis_const(len1, out->start, out->end, out->step, &first2, &len2);
    int64_t step, start = first1, last;
    /* An empty result is not worth fusing; the indices stay within the dim,
     * only the step product can overflow. */
    if (len2 == 0 || __builtin_mul_overflow(in->step, out->step, &step))
        return false;
    start += first2 * in->step;
    last = start + (len2 - 1) * step;
    int64_t end = step > 0 ? last + 1 : last - 1;
    *r = (axis_bounds){true, start, step < 0 && end < 0 ? INT64_MIN : end, step};
    return true;
}

/* a + b*c for a, b, c >= 0, saturated at INT64_MAX (which any end beyond
 * the dim means anyway). */
static int64_t sat_mul_add(int64_t a, int64_t b, int64_t c)
{
    int64_t prod, sum;
    if (__builtin_mul_overflow(b, c, &prod) || __builtin_add_overflow(a, prod, &sum))
        return INT64_MAX;
    return sum;
}

static bool compose_symbolic_dim(const axis_bounds *in, const axis_bounds *out, axis_bounds *r)
{
    int64_t step;
    if (in->step <= 0 || out->step <= 0 || in->start < 0 || in->end < 0 || out->start < 0 || out->end < 0 ||
        __builtin_mul_overflow(in->step, out->step, &step))
        return false;
    int64_t end = sat_mul_add(in->start, out->end, in->step);
    *r = (axis_bounds){true, sat_mul_add(in->start, out->start, in->step), end < in->end ? end : in->end, step};
    return true;
}

static bool compose_axis(fuser *f, int axis, llmc_affine dim, const axis_bounds *in, const axis_bounds *out,
                         axis_bounds *r)
{
    if (!in->sliced || !out->sliced) {
        *r = in->sliced ? *in : *out;
        return true;
    }
    if (llmc_aff_is_const(dim) ? compose_const_dim(dim.c, in, out, r) : compose_symbolic_dim(in, out, r))
        return true;
    char d[64];
    llmc_shape one = {.rank = 1, .dims = {dim}};
    llmc_shape_format(&one, d, sizeof d);
    snprintf(f->why, sizeof f->why, "axis %d (dim %s): %s", axis, d,
             llmc_aff_is_const(dim) ? "the composed slice is empty or its step overflows"
                                    : "a negative index or step on a symbolic dim depends on its length");
    return false;
}

/* ---- rewriting ---- */

static int int64_const(llmc_graph *g, const char *base, const char *suffix, const int64_t *vals, int n)
{
    char *name = llmc_graph_unique_name(g, base, suffix);
    int v = name ? llmc_graph_add_value(g, name, LLMC_DT_INT64) : -1;
    llmc_shape shape = {.rank = 1, .dims = {llmc_aff_const(n)}};
    free(name);
    if (v >= 0 && llmc_graph_set_const(g, v, LLMC_DT_INT64, &shape, vals, sizeof(int64_t) * (size_t)n))
        return -1;
    return v;
}

/* One Slice of x with the composed bounds replaces `outer` and `inner`. */
static int replace_pair(fuser *f, int outer, int inner, const axis_bounds *axes, int rank, llmc_error *err)
{
    llmc_graph *g = f->g;
    int64_t starts[LLMC_MAX_RANK], ends[LLMC_MAX_RANK], ax[LLMC_MAX_RANK], steps[LLMC_MAX_RANK];
    int n = 0;
    for (int a = 0; a < rank; a++) {
        if (!axes[a].sliced)
            continue;
        starts[n] = axes[a].start;
        ends[n] = axes[a].end;
        ax[n] = a;
        steps[n++] = axes[a].step;
    }
    const char *base = g->nodes[outer].name;
    int ins[5] = {g->nodes[inner].inputs[0], int64_const(g, base, "/starts", starts, n),
                  int64_const(g, base, "/ends", ends, n), int64_const(g, base, "/axes", ax, n),
                  int64_const(g, base, "/steps", steps, n)};
    int y = g->nodes[outer].outputs[0];
    char *name = llmc_graph_unique_name(g, base, "/fused");
    if (!name || ins[1] < 0 || ins[2] < 0 || ins[3] < 0 || ins[4] < 0) {
        free(name);
        return llmc_fail(err, LLMC_E_NOMEM, PASS_NAME ": out of memory");
    }
    llmc_graph_erase_node(g, outer);
    llmc_graph_erase_node(g, inner);
    int node = llmc_graph_add_node(g, "Slice", name, ins, 5, &y, 1);
    free(name);
    if (node < 0)
        return llmc_fail(err, LLMC_E_NOMEM, PASS_NAME ": out of memory");
    f->fused++;
    return LLMC_OK;
}

/* The Slice producing outer's data input, or -1 (not the pattern). */
static int inner_slice(const llmc_graph *g, int outer)
{
    const llmc_node *n = &g->nodes[outer];
    if (n->dead || !llmc_is_onnx_op(n, "Slice") || n->n_inputs < 3 || n->n_outputs != 1)
        return -1;
    int p = g->values[n->inputs[0]].producer;
    return p >= 0 && !g->nodes[p].dead && llmc_is_onnx_op(&g->nodes[p], "Slice") && g->nodes[p].n_inputs >= 3 &&
                   g->nodes[p].n_outputs == 1
               ? p
               : -1;
}

static bool composable(fuser *f, int outer, int inner, axis_bounds *fused)
{
    const llmc_graph *g = f->g;
    const llmc_shape *x = &g->values[g->nodes[inner].inputs[0]].shape;
    axis_bounds in[LLMC_MAX_RANK], out[LLMC_MAX_RANK];
    if (g->nodes[outer].opset < 13 || g->nodes[inner].opset < 13) {
        snprintf(f->why, sizeof f->why, "Slice before opset 13");
        return false;
    }
    if (llmc_graph_use_count(g, g->nodes[inner].outputs[0]) != 1) {
        snprintf(f->why, sizeof f->why, "the inner Slice '%s' has other readers", g->nodes[inner].name);
        return false;
    }
    if (x->rank < 0 || !read_slice(f, inner, x->rank, in) || !read_slice(f, outer, x->rank, out))
        return false;
    for (int a = 0; a < x->rank; a++)
        if (!compose_axis(f, a, x->dims[a], &in[a], &out[a], &fused[a]))
            return false;
    return true;
}

static int run_slice_fusion(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    fuser f = {.g = g, .ctx = ctx};
    int refused = 0;
    /* Fused Slices are appended and visited in turn: chains fuse fully. */
    for (int outer = 0; outer < g->n_nodes; outer++) {
        int inner = inner_slice(g, outer);
        axis_bounds fused[LLMC_MAX_RANK];
        if (inner < 0)
            continue;
        f.why[0] = 0;
        if (!composable(&f, outer, inner, fused)) {
            llmc_pass_explain(ctx, PASS_NAME, g, outer, "%s", f.why);
            refused++;
            continue;
        }
        int rc = replace_pair(&f, outer, inner, fused, g->values[g->nodes[inner].inputs[0]].shape.rank, err);
        if (rc)
            return rc;
    }
    if (f.fused + refused > 0)
        llmc_pass_detail(ctx, "%d Slice pairs fused, %d left", f.fused, refused);
    return LLMC_OK;
}

const llmc_pass llmc_pass_slice_fusion = {PASS_NAME, run_slice_fusion};
