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

llmc_rt_status fb_scalars(fb_reader *r, const fb_table *t, const fb_scalar_spec *specs, int n,
                          uint64_t *out, llmc_rt_error *err)
{
    llmc_rt_status st = LLMC_RT_OK;
    for (int i = 0; !st && i < n; i++)
        st = fb_scalar(r, t, specs[i].id, specs[i].width, specs[i].dflt, &out[i], err);
    return st;
}

llmc_rt_status fb_vectors(fb_reader *r, const fb_table *t, const fb_vector_spec *specs, int n,
                          fb_vector *vec, llmc_rt_error *err)
{
    llmc_rt_status st = LLMC_RT_OK;
    for (int i = 0; !st && i < n; i++)
        st = fb_vector_field(r, t, specs[i].id, specs[i].elem_size, specs[i].elem_align, &vec[i],
                             err);
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

static int32_t as_i32(uint64_t v)
{
    uint32_t u = (uint32_t)v;
    return u <= INT32_MAX ? (int32_t)u : -(int32_t)(~u) - 1;
}

static llmc_rt_status read_tensor_fields(fb_reader *r, const fb_table *t,
                                         rt_tensor_desc *d, llmc_rt_error *err)
{
    static const fb_scalar_spec fields[10] = {
        {TENSOR_DTYPE, 4, LLMC_RT_F32}, {TENSOR_KIND, 1, KIND_ARENA},
        {TENSOR_ARENA_OFFSET, 8, 0},    {TENSOR_MAX_BYTES, 8, 0},
        {TENSOR_SEGMENT, 4, 0},         {TENSOR_LAYOUT, 1, LLMC_RT_LAYOUT_Dense},
        {TENSOR_GROUP, 4, 0},           {TENSOR_TILE_ROWS, 1, 0},
        {TENSOR_TILE_DEPTH, 1, 0},      {TENSOR_COEF, 4, LLMC_RT_F16}};
    uint64_t v[10] = {0};
    llmc_rt_status st = fb_string_field(r, t, TENSOR_NAME, &d->name, err);
    if (!st)
        st = fb_vector_field(r, t, TENSOR_DIMS, AFFINE_BYTES, 8, &d->dims, err);
    if (!st)
        st = fb_scalars(r, t, fields, 10, v, err);
    d->dtype = as_i32(v[0]);
    d->kind = (int)v[1];
    d->arena_offset = v[2];
    d->max_bytes = v[3];
    d->segment = (uint32_t)v[4];
    d->layout = (int)v[5];
    d->group = (uint32_t)v[6];
    d->tile_rows = (int)v[7];
    d->tile_depth = (int)v[8];
    d->coef = as_i32(v[9]);
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
        {SEGMENT_OFFSET, 8, 0}, {SEGMENT_SIZE, 8, 0}, {SEGMENT_XXHASH64, 8, 0}};
    fb_vector segments = {rt_plan_of(p)->segments, rt_plan_of(p)->n_segments};
    fb_table t;
    uint64_t v[3] = {0};
    llmc_rt_status st = index_in(i, rt_plan_of(p)->n_segments, "segment", err);
    if (!st)
        st = fb_vec_table(r, segments, i, "Segment", &t, err);
    if (!st)
        st = fb_scalars(r, &t, fields, 3, v, err);
    d->offset = v[0];
    d->size = v[1];
    d->xxhash64 = v[2];
    if (st)
        return rt_prefix(err, st, "segment %u: ", RT_N(i), NULL);
    return LLMC_RT_OK;
}

static llmc_rt_status read_op_vectors(fb_reader *r, const fb_table *t, rt_op_desc *d,
                                      llmc_rt_error *err)
{
    static const fb_vector_spec fields[5] = {
        {OP_INPUTS, 4, 4}, {OP_OUTPUTS, 4, 4}, {OP_AXES, 4, 4}, {OP_VALUES, AFFINE_BYTES, 8},
        {OP_REGIONS, 4, 4}};
    fb_vector v[5] = {{0, 0}};
    llmc_rt_status st = fb_vectors(r, t, fields, 5, v, err);
    d->inputs = v[0];
    d->outputs = v[1];
    d->axes = v[2];
    d->values = v[3];
    d->regions = v[4];
    return st;
}

/* The float32 stored as the low 32 bits of v. */
static float f32_of(uint64_t v)
{
    uint32_t bits = (uint32_t)v;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static llmc_rt_status read_op_scalars(fb_reader *r, const fb_table *t, rt_op_desc *d,
                                      llmc_rt_error *err)
{
    static const fb_scalar_spec fields[14] = {
        {OP_CODE, 1, 0},     {OP_KIND, 1, 0},      {OP_AXIS, 4, 0},     {OP_KEEPDIMS, 1, 1},
        {OP_EPSILON, 4, 0},  {OP_VALUE, 8, 0},     {OP_HEADS, 4, 0},    {OP_KV_HEADS, 4, 0},
        {OP_HEAD_DIM, 4, 0}, {OP_ROTARY_DIM, 4, 0}, {OP_SCALE, 4, 0},    {OP_CACHE, 4, 0},
        {OP_WINDOW, 4, 0},   {OP_SOFTCAP, 4, 0}};
    uint64_t v[14] = {0};
    llmc_rt_status st = fb_scalars(r, t, fields, 14, v, err);
    d->code = (int)v[0];
    d->kind = (int)v[1];
    d->axis = as_i32(v[2]);
    d->keepdims = v[3] != 0;
    d->epsilon = f32_of(v[4]);
    d->value_bits = v[5];
    d->heads = as_i32(v[6]);
    d->kv_heads = as_i32(v[7]);
    d->head_dim = as_i32(v[8]);
    d->rotary_dim = as_i32(v[9]);
    d->scale = f32_of(v[10]);
    d->cache = (uint32_t)v[11];
    d->window = (uint32_t)v[12];
    d->softcap = f32_of(v[13]);
    return st;
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
    static const fb_scalar_spec scalars[2] = {{REGION_SRC, 4, 0}, {REGION_DST, 4, 0}};
    static const fb_vector_spec vectors[5] = {
        {REGION_DST_START, AFFINE_BYTES, 8}, {REGION_SIZE, AFFINE_BYTES, 8},
        {REGION_SRC_START, AFFINE_BYTES, 8}, {REGION_SRC_AXIS, 1, 1}, {REGION_SRC_STEP, 8, 8}};
    uint64_t v[2] = {0};
    fb_vector vec[5] = {{0, 0}};
    llmc_rt_status st = fb_scalars(r, t, scalars, 2, v, err);
    if (!st)
        st = fb_vectors(r, t, vectors, 5, vec, err);
    d->src = (uint32_t)v[0];
    d->dst = (uint32_t)v[1];
    d->dst_start = vec[0];
    d->size = vec[1];
    d->src_start = vec[2];
    d->src_axis = vec[3];
    d->src_step = vec[4];
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
    static const fb_scalar_spec fields[3] = {
        {IO_TENSOR, 4, 0}, {IO_ROLE, 1, ROLE_GENERIC}, {IO_LAYER, 4, 0}};
    const char *what = is_output ? "output" : "input";
    uint64_t f[3];
    fb_table t;
    llmc_rt_status st = index_in(i, v.len, what, err);
    if (!st)
        st = fb_vec_table(r, v, i, "IoBinding", &t, err);
    if (!st)
        st = fb_scalars(r, &t, fields, 3, f, err);
    if (st)
        return rt_prefix(err, st, "%s %u: ", RT_N(i), RT_S(what));
    d->tensor = (uint32_t)f[0];
    d->role = (int)f[1];
    d->layer = as_i32(f[2]);
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
    static const fb_scalar_spec scalars[2] = {{SUBGRAPH_FIRST_OP, 4, 0}, {SUBGRAPH_N_OPS, 4, 0}};
    static const fb_vector_spec vectors[2] = {{SUBGRAPH_INPUTS, 4, 4}, {SUBGRAPH_OUTPUTS, 4, 4}};
    uint64_t v[2] = {0};
    fb_vector vec[2] = {{0, 0}};
    fb_table t;
    llmc_rt_status st = index_in(i, npu->subgraphs.len, "subgraph", err);
    if (!st)
        st = fb_vec_table(r, npu->subgraphs, i, "Subgraph", &t, err);
    if (!st)
        st = fb_string_field(r, &t, SUBGRAPH_NAME, &d->name, err);
    if (!st)
        st = fb_scalars(r, &t, scalars, 2, v, err);
    if (!st)
        st = fb_vectors(r, &t, vectors, 2, vec, err);
    if (st)
        return rt_prefix(err, st, "subgraph %u: ", RT_N(i), NULL);
    d->first_op = (uint32_t)v[0];
    d->n_ops = (uint32_t)v[1];
    d->inputs = vec[0];
    d->outputs = vec[1];
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
    rt_plan_of(plan)->kernels = kernels;
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
