/* Checked FlatBuffer access and the table decoders (see plan_format.h). */
#include "plan_format.h"
#include "tensor_traits.h"

#include <string.h>

#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "rt_div64.h"
#include "rt_msg.h"

/* FlatBuffer objects must lie below 4 GiB (32-bit offsets); the file may be
 * larger because weight segments use 64-bit offsets. */
static uint64_t fb_limit(const fb_reader *r)
{
    return r->size < UINT32_MAX ? (uint64_t)r->size : UINT32_MAX;
}

/* Checks [pos, pos + len) lies inside the FlatBuffer part and pos is a
 * multiple of align (a power of two); records its end. */
static llmc_rt_status fb_span(fb_reader *r, uint64_t pos, uint64_t len, uint64_t align,
                              const char *what, llmc_rt_error *err)
{
    if (pos & (align - 1))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "%s at byte %u is not %u-byte aligned",
                       RT_N((int64_t)pos, (int64_t)align), RT_S(what));
    if (pos > fb_limit(r) || len > fb_limit(r) - pos)
        return rt_fail(err, LLMC_RT_E_TRUNCATED,
                       "%s at byte %u (%u bytes) runs past the end of the plan (%u bytes)",
                       RT_N((int64_t)pos, (int64_t)len, (int64_t)r->size), RT_S(what));
    if (pos + len > r->end)
        r->end = pos + len;
    return LLMC_RT_OK;
}

static uint16_t fb_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

llmc_rt_status fb_table_at(fb_reader *r, uint64_t pos, const char *what, fb_table *t,
                           llmc_rt_error *err)
{
    llmc_rt_status st = fb_span(r, pos, 4, 4, what, err);
    if (st)
        return st;
    int64_t vt = (int64_t)pos - (int64_t)(int32_t)fb_u32(r->base + pos);
    if (vt < 0)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "%s at byte %u: vtable at byte %d",
                       RT_N((int64_t)pos, vt), RT_S(what));
    st = fb_span(r, (uint64_t)vt, 4, 2, "vtable", err);
    if (st)
        return rt_prefix(err, st, "%s at byte %u: ", RT_N((int64_t)pos), RT_S(what));
    uint16_t vt_bytes = fb_u16(r->base + vt), table_bytes = fb_u16(r->base + vt + 2);
    if (vt_bytes < 4 || vt_bytes % 2 || table_bytes < 4)
        return rt_fail(err, LLMC_RT_E_CORRUPT,
                       "%s at byte %u: vtable at byte %d has sizes %u/%u",
                       RT_N((int64_t)pos, vt, vt_bytes, table_bytes), RT_S(what));
    st = fb_span(r, (uint64_t)vt, vt_bytes, 2, "vtable", err);
    if (!st)
        st = fb_span(r, pos, table_bytes, 4, "table", err);
    if (st)
        return rt_prefix(err, st, "%s at byte %u: ", RT_N((int64_t)pos), RT_S(what));
    t->what = what;
    t->pos = (uint32_t)pos;
    t->vtable = (uint32_t)vt;
    t->n_fields = (uint16_t)((vt_bytes - 4) / 2);
    t->bytes = table_bytes;
    return LLMC_RT_OK;
}

/* Position of field `id` (0 if absent), checked to hold `width` aligned bytes. */
static llmc_rt_status fb_field_pos(const fb_reader *r, const fb_table *t, int id,
                                   unsigned width, uint32_t *pos, llmc_rt_error *err)
{
    uint16_t off = id < t->n_fields ? fb_u16(r->base + t->vtable + 4 + 2 * id) : 0;
    *pos = 0;
    if (!off)
        return LLMC_RT_OK;
    if (off + width > t->bytes || (t->pos + off) % width)
        return rt_fail(err, LLMC_RT_E_CORRUPT,
                       "%s at byte %u: field %d (%u bytes) at table offset %u is outside "
                       "the table (%u bytes) or misaligned",
                       RT_N(t->pos, id, width, off, t->bytes), RT_S(t->what));
    *pos = t->pos + off;
    return LLMC_RT_OK;
}

llmc_rt_status fb_scalar(fb_reader *r, const fb_table *t, int id, unsigned width,
                         uint64_t dflt, uint64_t *out, llmc_rt_error *err)
{
    uint32_t pos;
    llmc_rt_status st = fb_field_pos(r, t, id, width, &pos, err);
    *out = dflt;
    if (st || !pos)
        return st;
    uint64_t v = 0;
    for (unsigned i = width; i-- > 0;)
        v = v << 8 | r->base[pos + i];
    *out = v;
    return LLMC_RT_OK;
}

/* Where the uoffset field `id` points (0 if the field is absent). */
static llmc_rt_status fb_target(fb_reader *r, const fb_table *t, int id, uint64_t *target,
                                llmc_rt_error *err)
{
    uint32_t pos;
    llmc_rt_status st = fb_field_pos(r, t, id, 4, &pos, err);
    *target = 0;
    if (!st && pos)
        *target = (uint64_t)pos + fb_u32(r->base + pos);
    return st;
}

static llmc_rt_status fb_vector_at(fb_reader *r, uint64_t pos, unsigned elem_size,
                                   unsigned elem_align, fb_vector *out, llmc_rt_error *err)
{
    llmc_rt_status st = fb_span(r, pos, 4, 4, "vector length", err);
    if (st)
        return st;
    uint32_t len = fb_u32(r->base + pos);
    /* writers do not align the data of an empty vector */
    st = fb_span(r, pos + 4, (uint64_t)len * elem_size, len ? elem_align : 1, "vector data", err);
    if (st)
        return rt_prefix(err, st, "vector of %u elements: ", RT_N(len), NULL);
    out->pos = (uint32_t)pos + 4;
    out->len = len;
    return LLMC_RT_OK;
}

llmc_rt_status fb_vector_field(fb_reader *r, const fb_table *t, int id, unsigned elem_size,
                               unsigned elem_align, fb_vector *out, llmc_rt_error *err)
{
    uint64_t target;
    llmc_rt_status st = fb_target(r, t, id, &target, err);
    out->pos = 0;
    out->len = 0;
    if (!st && target)
        st = fb_vector_at(r, target, elem_size, elem_align, out, err);
    if (st)
        return rt_prefix(err, st, "%s field %d: ", RT_N(id), RT_S(t->what));
    return LLMC_RT_OK;
}

llmc_rt_status fb_string_field(fb_reader *r, const fb_table *t, int id, const char **out,
                               llmc_rt_error *err)
{
    uint64_t target;
    fb_vector chars = {0, 0};
    llmc_rt_status st = fb_target(r, t, id, &target, err);
    *out = "";
    if (!st && target) {
        /* one byte more than the length: the terminating NUL */
        st = fb_vector_at(r, target, 1, 1, &chars, err);
        if (!st)
            st = fb_span(r, chars.pos, (uint64_t)chars.len + 1, 1, "string", err);
        if (!st && r->base[chars.pos + chars.len] != 0)
            st = rt_fail(err, LLMC_RT_E_CORRUPT, "string at byte %u lacks its NUL",
                         RT_N(chars.pos), NULL);
        if (!st)
            *out = (const char *)r->base + chars.pos;
    }
    if (st)
        return rt_prefix(err, st, "%s field %d: ", RT_N(id), RT_S(t->what));
    return LLMC_RT_OK;
}

llmc_rt_status fb_table_field(fb_reader *r, const fb_table *t, int id, const char *what,
                              fb_table *out, llmc_rt_error *err)
{
    uint64_t target;
    llmc_rt_status st = fb_target(r, t, id, &target, err);
    out->pos = 0;
    if (!st && target)
        st = fb_table_at(r, target, what, out, err);
    return st;
}

llmc_rt_status fb_vec_table(fb_reader *r, fb_vector v, uint32_t i, const char *what,
                            fb_table *t, llmc_rt_error *err)
{
    uint32_t elem = v.pos + 4u * i;
    return fb_table_at(r, (uint64_t)elem + fb_u32(r->base + elem), what, t, err);
}

/* v as a member of `size` bytes (fb_scalar_spec). */
static void fb_store(uint8_t *at, unsigned size, uint64_t v)
{
    uint32_t low = (uint32_t)v;
    if (size == 8)
        memcpy(at, &v, sizeof v);
    else if (size == 4)
        memcpy(at, &low, sizeof low);
    else
        *(bool *)(void *)at = v != 0;
}

llmc_rt_status fb_scalars(fb_reader *r, const fb_table *t, const fb_scalar_spec *specs, int n,
                          void *out, llmc_rt_error *err)
{
    llmc_rt_status st = LLMC_RT_OK;
    for (int i = 0; !st && i < n; i++) {
        uint64_t v;
        st = fb_scalar(r, t, specs[i].id, specs[i].width, specs[i].dflt, &v, err);
        fb_store((uint8_t *)out + specs[i].offset, specs[i].size, v);
    }
    return st;
}

llmc_rt_status fb_vectors(fb_reader *r, const fb_table *t, const fb_vector_spec *specs, int n,
                          void *out, llmc_rt_error *err)
{
    llmc_rt_status st = LLMC_RT_OK;
    for (int i = 0; !st && i < n; i++)
        st = fb_vector_field(r, t, specs[i].id, specs[i].elem_size, specs[i].elem_align,
                             (fb_vector *)(void *)((uint8_t *)out + specs[i].offset), err);
    return st;
}

/* ---- decoders ---------------------------------------------------------- */

static llmc_rt_status index_in(uint32_t i, uint32_t n, const char *what,
                               llmc_rt_error *err)
{
    if (i < n)
        return LLMC_RT_OK;
    return rt_fail(err, LLMC_RT_E_CORRUPT, "%s index %u >= %u", RT_N(i, n), RT_S(what));
}

static llmc_rt_status read_tensor_fields(fb_reader *r, const fb_table *t,
                                         rt_tensor_desc *d, llmc_rt_error *err)
{
#define TF_(id, width, dflt, member) FB_SCALAR(id, width, dflt, rt_tensor_desc, member)
    static const fb_scalar_spec fields[10] = {
        TF_(TENSOR_DTYPE, 4, LLMC_RT_F32, dtype),   TF_(TENSOR_KIND, 1, KIND_ARENA, kind),
        TF_(TENSOR_ARENA_OFFSET, 8, 0, arena_offset), TF_(TENSOR_MAX_BYTES, 8, 0, max_bytes),
        TF_(TENSOR_SEGMENT, 4, 0, segment), TF_(TENSOR_LAYOUT, 1, LLMC_RT_LAYOUT_Dense, layout),
        TF_(TENSOR_GROUP, 4, 0, group),             TF_(TENSOR_TILE_ROWS, 1, 0, tile_rows),
        TF_(TENSOR_TILE_DEPTH, 1, 0, tile_depth),   TF_(TENSOR_COEF, 4, LLMC_RT_F16, coef)};
#undef TF_
    llmc_rt_status st = fb_string_field(r, t, TENSOR_NAME, &d->name, err);
    if (!st)
        st = fb_vector_field(r, t, TENSOR_DIMS, AFFINE_BYTES, 8, &d->dims, err);
    if (!st)
        st = fb_scalars(r, t, fields, 10, d, err);
    return st;
}

llmc_rt_status rt_read_tensor(fb_reader *r, const llmc_rt_plan *p, uint32_t i,
                              rt_tensor_desc *d, llmc_rt_error *err)
{
    fb_vector v = {rt_plan_of(p)->tensors, rt_plan_of(p)->n_tensors};
    fb_table t;
    llmc_rt_status st = index_in(i, rt_plan_of(p)->n_tensors, "tensor", err);
    if (!st)
        st = fb_vec_table(r, v, i, "Tensor", &t, err);
    if (!st)
        st = read_tensor_fields(r, &t, d, err);
    if (st)
        return rt_prefix(err, st, "tensor %u: ", RT_N(i), NULL);
    return LLMC_RT_OK;
}

llmc_rt_status rt_read_segment(fb_reader *r, const llmc_rt_plan *p, uint32_t i,
                               rt_segment_desc *d, llmc_rt_error *err)
{
    static const fb_scalar_spec fields[3] = {
        FB_SCALAR(SEGMENT_OFFSET, 8, 0, rt_segment_desc, offset),
        FB_SCALAR(SEGMENT_SIZE, 8, 0, rt_segment_desc, size),
        FB_SCALAR(SEGMENT_XXHASH64, 8, 0, rt_segment_desc, xxhash64)};
    fb_vector segments = {rt_plan_of(p)->segments, rt_plan_of(p)->n_segments};
    fb_table t;
    llmc_rt_status st = index_in(i, rt_plan_of(p)->n_segments, "segment", err);
    if (!st)
        st = fb_vec_table(r, segments, i, "Segment", &t, err);
    if (!st)
        st = fb_scalars(r, &t, fields, 3, d, err);
    if (st)
        return rt_prefix(err, st, "segment %u: ", RT_N(i), NULL);
    return LLMC_RT_OK;
}

static llmc_rt_status read_op_vectors(fb_reader *r, const fb_table *t, rt_op_desc *d,
                                      llmc_rt_error *err)
{
#define OV_(id, elem_size, elem_align, member) FB_VECTOR(id, elem_size, elem_align, rt_op_desc, member)
    static const fb_vector_spec fields[5] = {
        OV_(OP_INPUTS, 4, 4, inputs), OV_(OP_OUTPUTS, 4, 4, outputs), OV_(OP_AXES, 4, 4, axes),
        OV_(OP_VALUES, AFFINE_BYTES, 8, values), OV_(OP_REGIONS, 4, 4, regions)};
#undef OV_
    return fb_vectors(r, t, fields, 5, d, err);
}

/* Float fields (epsilon, scale) take the stored float32's bits. */
static llmc_rt_status read_op_scalars(fb_reader *r, const fb_table *t, rt_op_desc *d,
                                      llmc_rt_error *err)
{
#define OF_(id, width, dflt, member) FB_SCALAR(id, width, dflt, rt_op_desc, member)
    static const fb_scalar_spec fields[14] = {
        OF_(OP_CODE, 1, 0, code),         OF_(OP_KIND, 1, 0, kind),
        OF_(OP_AXIS, 4, 0, axis),         OF_(OP_KEEPDIMS, 1, 1, keepdims),
        OF_(OP_EPSILON, 4, 0, epsilon),   OF_(OP_VALUE, 8, 0, value_bits),
        OF_(OP_HEADS, 4, 0, heads),       OF_(OP_KV_HEADS, 4, 0, kv_heads),
        OF_(OP_HEAD_DIM, 4, 0, head_dim), OF_(OP_ROTARY_DIM, 4, 0, rotary_dim),
        OF_(OP_SCALE, 4, 0, scale),       OF_(OP_CACHE, 4, 0, cache),
        OF_(OP_WINDOW, 4, 0, window),     OF_(OP_SOFTCAP, 4, 0, softcap)};
#undef OF_
    return fb_scalars(r, t, fields, 14, d, err);
}

llmc_rt_status rt_read_op(fb_reader *r, const llmc_rt_plan *p, uint32_t i, rt_op_desc *d,
                          llmc_rt_error *err)
{
    fb_vector v = {rt_plan_of(p)->ops, rt_plan_of(p)->n_ops};
    fb_table t;
    llmc_rt_status st = index_in(i, rt_plan_of(p)->n_ops, "op", err);
    if (!st)
        st = fb_vec_table(r, v, i, "Op", &t, err);
    if (!st)
        st = fb_string_field(r, &t, OP_NAME, &d->name, err);
    if (!st)
        st = read_op_scalars(r, &t, d, err);
    if (!st)
        st = read_op_vectors(r, &t, d, err);
    if (st)
        return rt_prefix(err, st, "op %u: ", RT_N(i), NULL);
    return LLMC_RT_OK;
}

static llmc_rt_status read_region_fields(fb_reader *r, const fb_table *t, rt_region_desc *d,
                                         llmc_rt_error *err)
{
#define RV_(id, elem_size, elem_align, member) \
    FB_VECTOR(id, elem_size, elem_align, rt_region_desc, member)
    static const fb_scalar_spec scalars[2] = {FB_SCALAR(REGION_SRC, 4, 0, rt_region_desc, src),
                                              FB_SCALAR(REGION_DST, 4, 0, rt_region_desc, dst)};
    static const fb_vector_spec vectors[5] = {
        RV_(REGION_DST_START, AFFINE_BYTES, 8, dst_start), RV_(REGION_SIZE, AFFINE_BYTES, 8, size),
        RV_(REGION_SRC_START, AFFINE_BYTES, 8, src_start), RV_(REGION_SRC_AXIS, 1, 1, src_axis),
        RV_(REGION_SRC_STEP, 8, 8, src_step)};
#undef RV_
    llmc_rt_status st = fb_scalars(r, t, scalars, 2, d, err);
    if (!st)
        st = fb_vectors(r, t, vectors, 5, d, err);
    return st;
}

llmc_rt_status rt_read_region(fb_reader *r, const rt_op_desc *op, uint32_t i,
                              rt_region_desc *d, llmc_rt_error *err)
{
    fb_table t;
    llmc_rt_status st = index_in(i, op->regions.len, "region", err);
    if (!st)
        st = fb_vec_table(r, op->regions, i, "Region", &t, err);
    if (!st)
        st = read_region_fields(r, &t, d, err);
    if (st)
        return rt_prefix(err, st, "region %u: ", RT_N(i), NULL);
    return LLMC_RT_OK;
}

llmc_rt_status rt_read_io(fb_reader *r, const llmc_rt_plan *p, int is_output, uint32_t i,
                          rt_io_desc *d, llmc_rt_error *err)
{
    fb_vector v = is_output ? (fb_vector){rt_plan_of(p)->outputs, rt_plan_of(p)->n_outputs}
                            : (fb_vector){rt_plan_of(p)->inputs, rt_plan_of(p)->n_inputs};
    static const fb_scalar_spec fields[3] = {FB_SCALAR(IO_TENSOR, 4, 0, rt_io_desc, tensor),
                                             FB_SCALAR(IO_ROLE, 1, ROLE_GENERIC, rt_io_desc, role),
                                             FB_SCALAR(IO_LAYER, 4, 0, rt_io_desc, layer)};
    const char *what = is_output ? "output" : "input";
    fb_table t;
    llmc_rt_status st = index_in(i, v.len, what, err);
    if (!st)
        st = fb_vec_table(r, v, i, "IoBinding", &t, err);
    if (!st)
        st = fb_scalars(r, &t, fields, 3, d, err);
    if (st)
        return rt_prefix(err, st, "%s %u: ", RT_N(i), RT_S(what));
    return LLMC_RT_OK;
}

llmc_rt_status rt_read_npu(fb_reader *r, const llmc_rt_plan *p, rt_npu_desc *d,
                           llmc_rt_error *err)
{
    fb_table t;
    uint64_t chunk = 0;
    d->subgraphs = (fb_vector){0, 0};
    llmc_rt_status st = fb_table_at(r, rt_plan_of(p)->root, "Plan", &t, err);
    if (!st)
        st = fb_scalar(r, &t, PLAN_NPU_CHUNK, 4, 0, &chunk, err);
    if (!st)
        st = fb_vector_field(r, &t, PLAN_SUBGRAPHS, 4, 4, &d->subgraphs, err);
    d->costs = (fb_vector){0, 0};
    if (!st)
        st = fb_vector_field(r, &t, PLAN_NPU_COSTS, 8, 8, &d->costs, err);
    d->chunk = (uint32_t)chunk;
    return st;
}

llmc_rt_status rt_read_subgraph(fb_reader *r, const rt_npu_desc *npu, uint32_t i,
                                rt_subgraph_desc *d, llmc_rt_error *err)
{
    static const fb_scalar_spec scalars[2] = {
        FB_SCALAR(SUBGRAPH_FIRST_OP, 4, 0, rt_subgraph_desc, first_op),
        FB_SCALAR(SUBGRAPH_N_OPS, 4, 0, rt_subgraph_desc, n_ops)};
    static const fb_vector_spec vectors[2] = {
        FB_VECTOR(SUBGRAPH_INPUTS, 4, 4, rt_subgraph_desc, inputs),
        FB_VECTOR(SUBGRAPH_OUTPUTS, 4, 4, rt_subgraph_desc, outputs)};
    fb_table t;
    llmc_rt_status st = index_in(i, npu->subgraphs.len, "subgraph", err);
    if (!st)
        st = fb_vec_table(r, npu->subgraphs, i, "Subgraph", &t, err);
    if (!st)
        st = fb_string_field(r, &t, SUBGRAPH_NAME, &d->name, err);
    if (!st)
        st = fb_scalars(r, &t, scalars, 2, d, err);
    if (!st)
        st = fb_vectors(r, &t, vectors, 2, d, err);
    if (st)
        return rt_prefix(err, st, "subgraph %u: ", RT_N(i), NULL);
    return LLMC_RT_OK;
}

/* ---- small shared helpers ---------------------------------------------- */

const char *rt_op_code_name(int code)
{
#define OP_NAME_(s, name, ...) #name,
    static const char *const names[LLMC_RT_OP_COUNT] = {LLMC_PLAN_OPS(OP_NAME_)};
    return code >= 0 && code < LLMC_RT_OP_COUNT ? names[code] : "?";
}

const char *llmc_rt_op_name(int code)
{
    return rt_op_code_name(code);
}

llmc_rt_status llmc_rt_plan_info_of(const llmc_rt_plan *plan, llmc_rt_plan_info *info)
{
    const rt_plan *p = plan ? rt_plan_of(plan) : NULL;
    if (!p || !p->base || !info)
        return LLMC_RT_E_ARG;
    info->vocab_size = p->vocab_size;
    info->max_context = p->max_context;
    info->n_layers = p->n_layers;
    info->n_inputs = p->n_inputs;
    info->n_outputs = p->n_outputs;
    info->target = p->target;
    info->source_hash = p->source_hash;
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_plan_use_kernels(llmc_rt_plan *plan, const char *isa,
                                        llmc_rt_error *err)
{
    if (!plan || !rt_plan_of(plan)->base || !isa)
        return rt_fail(err, LLMC_RT_E_ARG, "plan_use_kernels: plan or isa is NULL", NULL, NULL);
    const rt_kernels *kernels = rt_kernels_for_isa(rt_plan_of(plan)->target, isa, err);
    if (!kernels)
        return LLMC_RT_E_TARGET;
    rt_plan_of(plan)->kernels = rt_plan_of(plan)->decode_kernels = kernels;
    return LLMC_RT_OK;
}

bool rt_affine_value(const rt_affine *a, int64_t S, int64_t P, int64_t *out)
{
    int64_t sS, pP, sum;
    return rt_mul_i64(a->s, S, &sS) && rt_mul_i64(a->p, P, &pP) && rt_add_i64(a->c, sS, &sum) &&
           rt_add_i64(sum, pP, out);
}

bool rt_affine_eval(const uint8_t *affine, int64_t S, int64_t P, int64_t *out)
{
    rt_affine a = fb_affine(affine);
    return rt_affine_value(&a, S, P, out);
}

llmc_rt_status rt_dims_at(const rt_affine *affines, int rank, const rt_tensor_format *f,
                          int64_t S, int64_t P, int64_t *dims, uint64_t *bytes,
                          llmc_rt_status code, llmc_rt_error *err)
{
    for (int k = 0; k < rank; k++) {
        if (!rt_affine_value(&affines[k], S, P, &dims[k]))
            return rt_fail(err, code, "dim %d overflows at S=%d P=%d", RT_N(k, S, P), NULL);
        if (dims[k] < 0)
            return rt_fail(err, code, "dim %d is %d at S=%d P=%d", RT_N(k, dims[k], S, P), NULL);
    }
    /* Kernels multiply dims (counts, strides) in any order, so the bytes of
     * the non-zero dims must fit in int64 even when another dim is 0:
     * [0, 2^40, 2^40] does not pass as an empty tensor. */
    if (!rt_tensor_bytes(f, rank, dims, bytes))
        return rt_fail(err, code, "dtype %d layout %d (group %d, tiles %d x %d) does not fit "
                       "the dims at S=%d P=%d, or its byte size overflows",
                       RT_N(f->dtype, f->layout, f->group, f->tile_rows, f->tile_depth, S, P),
                       NULL);
    return LLMC_RT_OK;
}

llmc_rt_status rt_eval_dims(const fb_reader *r, const rt_tensor_desc *d, int64_t S, int64_t P,
                            int64_t *dims, uint64_t *bytes, llmc_rt_status code,
                            llmc_rt_error *err)
{
    rt_affine affines[LLMC_RT_MAX_RANK];
    rt_tensor_format f = rt_format_of(d);
    int rank = d->dims.len < LLMC_RT_MAX_RANK ? (int)d->dims.len : LLMC_RT_MAX_RANK;
    for (int k = 0; k < rank; k++)
        affines[k] = fb_affine(fb_vec_affine(r, d->dims, (uint32_t)k));
    return rt_dims_at(affines, rank, &f, S, P, dims, bytes, code, err);
}
