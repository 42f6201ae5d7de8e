/* Layout ops become Copy ops with regions (MNN-LLM's geometry computing,
 * paper 002 §5.4): each region is an affine map from destination indices
 * to source indices, so Transpose, Slice, Concat, Split, Expand and Gather
 * with constant indices all run on the one strided-copy kernel. */
#include "lower_layout.h"

#include <stdlib.h>
#include <string.h>

#include "lower_linear_weights.h"
#include "lower_ops.h"

/* Gather with more constant indices than this becomes a Gather op: one
 * region per index stops paying off. */
#define GATHER_MAX_REGIONS 64

/* Slice starts at or beyond +-2^31 are the "to the end" idioms (INT_MAX,
 * INT64_MAX, -INT64_MAX): clamp them without knowing the dim. */
#define SLICE_TO_END ((int64_t)1 << 31)

static int emit_copy(lower_ctx *L, cg_op **op)
{
    *op = lower_emit(L, LLMC_RT_OP_Copy);
    return *op ? LLMC_OK : L->err->code;
}

/* A Copy op from src to dst with one region (identity mapping when the
 * ranks match); *r is valid until the next emit. */
/* A Copy op reading src and writing dst, with no regions yet. */
static int emit_copy_between(lower_ctx *L, uint32_t src, uint32_t dst, cg_op **op)
{
    int rc = emit_copy(L, op);
    if (!rc)
        rc = op_add_input(L, *op, src);
    if (!rc)
        rc = op_add_output(L, *op, dst);
    return rc;
}

static int emit_copy_region(lower_ctx *L, uint32_t src, uint32_t dst, cg_region **r)
{
    cg_op *op;
    int rc = emit_copy_between(L, src, dst, &op);
    if (rc)
        return rc;
    *r = op_add_region(L, op, src, dst);
    return *r ? LLMC_OK : L->err->code;
}

/* The node's input 0 copied to its output 0: the Copy op, no regions yet. */
static int emit_node_copy(lower_ctx *L, uint32_t *src, uint32_t *dst, cg_op **op)
{
    int rc = lower_input(L, 0, src);
    if (!rc)
        rc = lower_output(L, 0, dst);
    return rc ? rc : emit_copy_between(L, *src, *dst, op);
}

/* The same with one region from input 0 to output 0. */
static int emit_node_region(lower_ctx *L, uint32_t *src, uint32_t *dst, cg_region **r)
{
    cg_op *op;
    int rc = emit_node_copy(L, src, dst, &op);
    if (rc)
        return rc;
    *r = op_add_region(L, op, *src, *dst);
    return *r ? LLMC_OK : L->err->code;
}

int lower_transpose_2d(lower_ctx *L, uint32_t src, const char *suffix, uint32_t *out)
{
    const cg_tensor s = L->p->tensors[src];
    if (s.rank != 2)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "tensor '%s' must be a matrix", s.name);
    llmc_affine dims[2] = {s.dims[1], s.dims[0]};
    cg_region *r;
    int rc = lower_temp(L, suffix, s.dtype, 2, dims, out);
    if (!rc)
        rc = emit_copy_region(L, src, *out, &r);
    if (rc)
        return rc;
    r->src_axis[0] = 1;
    r->src_axis[1] = 0;
    return LLMC_OK;
}

int lower_transpose(lower_ctx *L, int unused)
{
    (void)unused;
    uint32_t src, dst;
    int rc = lower_input(L, 0, &src);
    if (!rc)
        rc = lower_output(L, 0, &dst);
    if (rc)
        return rc;
    int rank = L->p->tensors[src].rank;
    int8_t perm[LLMC_MAX_RANK];
    const llmc_attr *a = llmc_node_attr(L->g, L->node, "perm");
    if (a && (a->type != LLMC_ATTR_INTS || a->n_ints != rank))
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "perm does not match rank %d", rank);
    unsigned seen = 0;
    for (int k = 0; k < rank; k++) {
        int64_t axis = a ? a->ints[k] : rank - 1 - k;   /* default: reverse the axes */
        if (axis < 0 || axis >= rank || (seen >> axis & 1u))
            return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "perm is not a permutation");
        seen |= 1u << axis;
        perm[k] = (int8_t)axis;
    }
    cg_region *r;
    rc = emit_copy_region(L, src, dst, &r);
    if (!rc)
        memcpy(r->src_axis, perm, (size_t)rank);
    return rc;
}

/* c + s*S + p*P over the bounds S >= 1, P >= 0: always >= 0 / always < 0. */
static bool aff_never_negative(llmc_affine a) { return a.s >= 0 && a.p >= 0 && a.c + a.s >= 0; }
static bool aff_always_negative(llmc_affine a) { return a.s <= 0 && a.p <= 0 && a.c + a.s < 0; }

static int64_t clamp64(int64_t x, int64_t lo, int64_t hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* ONNX Slice start: negative counts from the end, then clamped to
 * [0, dim] (step > 0) or [0, dim - 1] (step < 0).  Symbolic starts or dims
 * are resolved when the sign is the same for every S and P. */
static int slice_start(lower_ctx *L, llmc_affine start, llmc_affine dim, int64_t step,
                       llmc_affine *out)
{
    llmc_affine last = aff_add(dim, llmc_aff_const(step > 0 ? 0 : -1));
    if (llmc_aff_is_const(start) && llmc_aff_is_const(dim)) {
        int64_t s = start.c < 0 ? start.c + dim.c : start.c;
        *out = llmc_aff_const(clamp64(s, 0, last.c > 0 ? last.c : 0));
    } else if (llmc_aff_is_const(start) && start.c >= SLICE_TO_END) {
        *out = last;
    } else if (llmc_aff_is_const(start) && start.c <= -SLICE_TO_END) {
        *out = llmc_aff_const(0);
    } else if (aff_never_negative(start)) {
        *out = start;
    } else if (aff_always_negative(start)) {
        *out = aff_add(dim, start);
    } else {
        return lower_fail(L, LLMC_E_UNSUPPORTED, node_in(L, 1),
                          "a start of %lld%+lld*S%+lld*P changes sign with S and P",
                          (long long)start.c, (long long)start.s, (long long)start.p);
    }
    return LLMC_OK;
}

int lower_slice(lower_ctx *L, int unused)
{
    (void)unused;
    const llmc_shape *in = &node_in_value(L, 0)->shape;
    llmc_affine starts[LLMC_MAX_RANK];
    int64_t axes[LLMC_MAX_RANK], steps[LLMC_MAX_RANK];
    int n_starts, n_axes, n_steps;
    int rc = lower_ints(L, 1, starts, LLMC_MAX_RANK, &n_starts);
    if (!rc)
        rc = lower_const_ints(L, 3, axes, LLMC_MAX_RANK, &n_axes);
    if (!rc)
        rc = lower_const_ints(L, 4, steps, LLMC_MAX_RANK, &n_steps);
    if (rc)
        return rc;
    for (int i = n_axes; i < n_starts; i++)   /* default axes: 0, 1, ... */
        axes[n_axes++] = i;
    for (int i = n_steps; i < n_starts; i++)
        steps[n_steps++] = 1;
    if (n_axes != n_starts || n_steps != n_starts)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "starts, axes and steps differ in length");
    llmc_affine src_start[LLMC_MAX_RANK];
    int64_t src_step[LLMC_MAX_RANK];
    for (int k = 0; k < in->rank; k++) {
        src_start[k] = llmc_aff_const(0);
        src_step[k] = 1;
    }
    for (int i = 0; i < n_starts && !rc; i++) {
        int32_t axis;
        rc = lower_axis(L, axes[i], in->rank, &axis);
        if (!rc && steps[i] == 0)
            rc = lower_fail(L, LLMC_E_UNSUPPORTED, -1, "step 0");
        if (!rc)
            rc = slice_start(L, starts[i], in->dims[axis], steps[i], &src_start[axis]);
        src_step[axis] = steps[i];
    }
    uint32_t src, dst;
    cg_region *r;
    if (!rc)
        rc = emit_node_region(L, &src, &dst, &r);
    if (rc)
        return rc;
    memcpy(r->src_start, src_start, sizeof *src_start * (size_t)in->rank);
    memcpy(r->src_step, src_step, sizeof *src_step * (size_t)in->rank);
    return LLMC_OK;
}

static bool has_zero_dim(const cg_tensor *t)
{
    for (int k = 0; k < t->rank; k++)
        if (llmc_aff_eq(t->dims[k], llmc_aff_const(0)))
            return true;
    return false;
}

/* Concat: input i lands at offset sum(extent of inputs < i) along axis. */
int lower_concat(lower_ctx *L, int unused)
{
    (void)unused;
    int n = cur_node(L)->n_inputs;
    uint32_t *in = malloc(sizeof *in * (size_t)(n + 1)), dst;
    if (!in)
        return llmc_fail(L->err, LLMC_E_NOMEM, "out of memory while lowering");
    int32_t axis = 0;
    int rc = lower_output(L, 0, &dst);
    if (!rc)
        rc = lower_axis(L, llmc_node_attr_int(L->g, L->node, "axis", 0), L->p->tensors[dst].rank,
                        &axis);
    for (int i = 0; i < n && !rc; i++)
        rc = lower_input(L, i, &in[i]);
    cg_op *op;
    if (!rc)
        rc = emit_copy(L, &op);
    if (!rc)
        rc = op_add_output(L, op, dst);
    llmc_affine offset = llmc_aff_const(0);
    for (int i = 0; i < n && !rc; i++) {
        const cg_tensor *t = &L->p->tensors[in[i]];
        if (has_zero_dim(t))
            continue;
        rc = op_add_input(L, op, in[i]);
        cg_region *r = rc ? NULL : op_add_region(L, op, in[i], dst);
        if (!r) {
            rc = L->err->code;
            break;
        }
        memcpy(r->size, t->dims, sizeof *t->dims * (size_t)t->rank);
        r->dst_start[axis] = offset;
        offset = aff_add(offset, t->dims[axis]);
    }
    free(in);
    return rc;
}

/* Split: output k starts at sum(extent of outputs < k) along axis; the
 * output shapes already carry the split sizes.  Unused outputs are skipped. */
int lower_split(lower_ctx *L, int unused)
{
    (void)unused;
    const llmc_node *node = cur_node(L);
    uint32_t src;
    int32_t axis = 0;
    int rc = lower_input(L, 0, &src);
    if (!rc)
        rc = lower_axis(L, llmc_node_attr_int(L->g, L->node, "axis", 0), L->p->tensors[src].rank,
                        &axis);
    cg_op *op;
    if (!rc)
        rc = emit_copy(L, &op);
    if (!rc)
        rc = op_add_input(L, op, src);
    llmc_affine offset = llmc_aff_const(0);
    for (int k = 0; k < node->n_outputs && !rc; k++) {
        int v = node->outputs[k];
        if (v < 0)
            return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "output %d is missing", k);
        llmc_affine extent = L->g->values[v].shape.dims[axis];
        if (llmc_graph_use_count(L->g, v) > 0) {
            uint32_t dst;
            rc = lower_output(L, k, &dst);
            if (!rc)
                rc = op_add_output(L, op, dst);
            cg_region *r = rc ? NULL : op_add_region(L, op, src, dst);
            if (!r)
                return rc ? rc : L->err->code;
            r->src_start[axis] = offset;
        }
        offset = aff_add(offset, extent);
    }
    return rc;
}

/* Expand: numpy broadcasting; a source axis of extent 1 stays put. */
int lower_expand(lower_ctx *L, int unused)
{
    (void)unused;
    uint32_t src, dst;
    cg_region *r;
    int rc = emit_node_region(L, &src, &dst, &r);
    if (rc)
        return rc;
    const cg_tensor *s = &L->p->tensors[src], *d = &L->p->tensors[dst];
    if (s->rank > d->rank)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "input rank exceeds output rank");
    for (int k = 0; k < d->rank; k++) {
        int j = k - (d->rank - s->rank);
        bool moves = j >= 0 && !llmc_aff_eq(s->dims[j], llmc_aff_const(1));
        r->src_axis[k] = (int8_t)(moves ? j : -1);
    }
    return LLMC_OK;
}

/* ---- Gather ---- */

/* The table quantize-embedding marked: embed_bits 16/8/4, or 32 for a tied
 * table the target stores in fp32 tiles; 0 when the Gather reads data as
 * it is. */
static int packed_table_bits(const lower_ctx *L)
{
    int bits = (int)llmc_node_attr_int(L->g, L->node, "embed_bits", 32);
    bool tied = llmc_node_attr_int(L->g, L->node, "embed_tied", 0) != 0;
    return bits != 32 || (tied && L->target->f_hp) ? bits : 0;
}

static int gather_data(lower_ctx *L, uint32_t *data)
{
    int bits = packed_table_bits(L);
    if (!bits)
        return lower_input(L, 0, data);
    int64_t group = llmc_node_attr_int(L->g, L->node, "embed_group", 0);
    return lower_embedding_table(L, L->g->nodes[L->node].inputs[0], bits, group, data);
}

static int emit_gather_op(lower_ctx *L, int32_t axis)
{
    uint32_t data, indices, out;
    int rc = gather_data(L, &data);
    if (!rc)
        rc = lower_input(L, 1, &indices);
    if (!rc)
        rc = lower_output(L, 0, &out);
    if (rc)
        return rc;
    cg_op *op = lower_emit(L, LLMC_RT_OP_Gather);
    if (!op)
        return L->err->code;
    op->axis = axis;
    rc = op_add_input(L, op, data);
    if (!rc)
        rc = op_add_input(L, op, indices);
    return rc ? rc : op_add_output(L, op, out);
}

/* Reads constant index j, wrapped to a source position along an axis of
 * extent `dim`. */
static llmc_affine gather_index(const llmc_value *indices, uint64_t j, llmc_affine dim)
{
    int64_t i = indices->dtype == LLMC_DT_INT32 ? ((const int32_t *)indices->konst.data)[j]
                                                : ((const int64_t *)indices->konst.data)[j];
    return i < 0 ? aff_add(dim, llmc_aff_const(i)) : llmc_aff_const(i);
}

/* 1-D indices a, a+d, a+2d, ...: one region with step d. */
static bool gather_is_progression(const llmc_value *idx, uint64_t count, llmc_affine dim,
                                  int64_t *first, int64_t *step)
{
    if (idx->shape.rank != 1 || count < 2)
        return false;
    llmc_affine a = gather_index(idx, 0, dim), b = gather_index(idx, 1, dim);
    if (!llmc_aff_is_const(a) || !llmc_aff_is_const(b))
        return false;
    *first = a.c;
    *step = b.c - a.c;
    for (uint64_t j = 2; j < count; j++)
        if (!llmc_aff_eq(gather_index(idx, j, dim), llmc_aff_const(a.c + (int64_t)j * *step)))
            return false;
    return true;
}

/* out[pre, m, post] = data[pre, idx[m], post]: per index m one region whose
 * index axes have extent 1 and whose source starts at idx[m] on `axis`. */
static int gather_regions(lower_ctx *L, int32_t axis, uint64_t count)
{
    const llmc_value *idx = node_in_value(L, 1);
    int q = idx->shape.rank;
    uint32_t src, dst;
    cg_op *op;
    int rc = emit_node_copy(L, &src, &dst, &op);
    if (rc)
        return rc;
    llmc_affine dim = L->p->tensors[src].dims[axis];
    int64_t first, step;
    bool progression = gather_is_progression(idx, count, dim, &first, &step);
    for (uint64_t j = 0; j < (progression ? 1 : count); j++) {
        cg_region *r = op_add_region(L, op, src, dst);
        if (!r)
            return L->err->code;
        int dst_rank = L->p->tensors[dst].rank;
        for (int k = 0; k < dst_rank; k++)
            r->src_axis[k] = (int8_t)(k < axis ? k : k < axis + q ? -1 : k - q + 1);
        r->src_start[axis] = progression ? llmc_aff_const(first) : gather_index(idx, j, dim);
        if (progression) {
            r->src_axis[axis] = (int8_t)axis;
            r->src_step[axis] = step;
            continue;
        }
        uint64_t rest = j;   /* j as a multi-index over the indices' shape */
        for (int i = q - 1; i >= 0; i--) {
            uint64_t extent = (uint64_t)idx->shape.dims[i].c;
            r->dst_start[axis + i] = llmc_aff_const((int64_t)(rest % extent));
            r->size[axis + i] = llmc_aff_const(1);
            rest /= extent;
        }
    }
    return LLMC_OK;
}

int lower_gather(lower_ctx *L, int unused)
{
    (void)unused;
    const llmc_value *data = node_in_value(L, 0), *idx = node_in_value(L, 1);
    int32_t axis = 0;
    int rc = lower_axis(L, llmc_node_attr_int(L->g, L->node, "axis", 0), data->shape.rank, &axis);
    if (rc)
        return rc;
    size_t esize = llmc_dtype_size(idx->dtype);
    uint64_t count = esize ? idx->konst.nbytes / esize : 0;
    bool small_const = idx->is_const && count > 0 && count <= GATHER_MAX_REGIONS &&
                       (idx->dtype == LLMC_DT_INT64 || idx->dtype == LLMC_DT_INT32);
    return small_const ? gather_regions(L, axis, count) : emit_gather_op(L, axis);
}
