/* Pattern-matching helpers for the fusion passes (match.h). */
#include "match.h"

#include <string.h>

#include "ir/const_view.h"
#include "pass_list.h"

int llmc_match_producer(const llmc_graph *g, int v, const char *op)
{
    if (v < 0 || g->values[v].producer < 0)
        return -1;
    const llmc_node *n = &g->nodes[g->values[v].producer];
    bool default_domain = n->domain[0] == 0 || strcmp(n->domain, "ai.onnx") == 0;
    return default_domain && strcmp(n->op_type, op) == 0 ? g->values[v].producer : -1;
}

bool llmc_match_const_ints(const llmc_graph *g, int v, int64_t *out, int max, int *n)
{
    if (v < 0 || !g->values[v].is_const)
        return false;
    const llmc_value *val = &g->values[v];
    size_t elem = llmc_dtype_size(val->dtype);
    if ((val->dtype != LLMC_DT_INT64 && val->dtype != LLMC_DT_INT32) || val->konst.nbytes > elem * (size_t)max)
        return false;
    *n = (int)(val->konst.nbytes / elem);
    for (int i = 0; i < *n; i++) {
        if (val->dtype == LLMC_DT_INT64)
            memcpy(&out[i], (const char *)val->konst.data + 8 * i, 8);
        else {
            int32_t x;
            memcpy(&x, (const char *)val->konst.data + 4 * i, 4);
            out[i] = x;
        }
    }
    return true;
}

bool llmc_match_const_scalar(const llmc_graph *g, int v, double *x)
{
    if (v < 0 || !g->values[v].is_const)
        return false;
    const llmc_value *val = &g->values[v];
    union { float f; double d; int64_t i64; int32_t i32; } u;
    size_t size = llmc_dtype_size(val->dtype);
    bool numeric = val->dtype == LLMC_DT_FLOAT || val->dtype == LLMC_DT_DOUBLE ||
                   val->dtype == LLMC_DT_INT64 || val->dtype == LLMC_DT_INT32;
    const void *bytes = numeric && val->konst.nbytes == size ? llmc_const_bytes(&val->konst) : NULL;
    if (!bytes)                                  /* exactly one element */
        return false;
    memcpy(&u, bytes, size);                     /* constants may be unaligned */
    *x = val->dtype == LLMC_DT_FLOAT ? u.f : val->dtype == LLMC_DT_DOUBLE ? u.d
       : val->dtype == LLMC_DT_INT64 ? (double)u.i64 : u.i32;
    return true;
}

bool llmc_match_dim_is_s(llmc_affine d)
{
    return d.c == 0 && d.s == 1 && d.p == 0;
}

int llmc_match_axis_attr(const llmc_graph *g, int node, const char *name, int64_t dflt, int rank)
{
    int64_t axis = llmc_node_attr_int(g, node, name, dflt);
    if (axis < 0)
        axis += rank;
    return axis >= 0 && axis < rank ? (int)axis : -1;
}

bool llmc_match_ints_attr(const llmc_graph *g, int node, const char *name, const int64_t *want, int n)
{
    const llmc_attr *a = llmc_node_attr(g, node, name);
    if (!a || a->type != LLMC_ATTR_INTS || a->n_ints != n)
        return false;
    return memcmp(a->ints, want, sizeof(int64_t) * (size_t)n) == 0;
}

/* One-element constant input k of a Slice, or `dflt` when omitted. */
static bool slice_param(const llmc_graph *g, const llmc_node *n, int k, int64_t dflt, int64_t *x)
{
    int count;
    *x = dflt;
    if (k >= n->n_inputs || n->inputs[k] < 0)
        return true;
    return llmc_match_const_ints(g, n->inputs[k], x, 1, &count) && count == 1;
}

bool llmc_match_slice_last_range(const llmc_graph *g, int node, int64_t *start, int64_t *end, int *x)
{
    const llmc_node *n = &g->nodes[node];
    int64_t s, e, axis, step;
    if (n->n_inputs < 3 || n->inputs[0] < 0)
        return false;
    const llmc_shape *in = &g->values[n->inputs[0]].shape;
    if (in->rank < 1 || !llmc_aff_is_const(in->dims[in->rank - 1]))
        return false;
    int64_t len = in->dims[in->rank - 1].c;
    if (!slice_param(g, n, 1, 0, &s) || !slice_param(g, n, 2, 0, &e) ||
        !slice_param(g, n, 3, in->rank - 1, &axis) || !slice_param(g, n, 4, 1, &step))
        return false;
    if (axis < 0)
        axis += in->rank;
    /* ONNX: negative bounds count from the end, then clamp to [0, len] */
    s = s < 0 ? s + len : s;
    e = e < 0 ? e + len : e;
    *start = s < 0 ? 0 : s > len ? len : s;
    *end = e < 0 ? 0 : e > len ? len : e;
    *x = n->inputs[0];
    return axis == in->rank - 1 && step == 1;
}

bool llmc_match_slice_last(const llmc_graph *g, int node, int64_t start, int64_t end, int *x)
{
    int64_t s, e;
    if (!llmc_match_slice_last_range(g, node, &s, &e, x))
        return false;
    int64_t len = g->values[*x].shape.dims[g->values[*x].shape.rank - 1].c;
    return s == start && e == (end < 0 ? len : end);
}

int llmc_match_sweep(llmc_graph *g, llmc_error *err)
{
    llmc_pass_ctx quiet = {0};
    return llmc_pass_dead_code.run(g, &quiet, err);
}

int llmc_match_sole_reader(const llmc_graph *g, int v)
{
    if (llmc_graph_use_count(g, v) != 1 || g->values[v].is_graph_output)
        return -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; !g->nodes[i].dead && k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] == v)
                return i;
    return -1;
}
