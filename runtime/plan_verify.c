/* llmc_rt_plan_open: proves the whole plan before anything executes.
 * Structure (offsets, vectors, strings, tables) is checked by the decoders in
 * plan_reader.c; this file adds the meaning: indices, op arities, dtypes,
 * ranks, region shapes, arena and segment placement, hashes, IO bindings. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/kernel_table.h"
#include "tensor_traits.h"
#include "plan_format.h"
#include "rt_div64.h"
#include "rt_msg.h"

#define ANY LLMC_ANY_COUNT

/* Inputs and outputs each op takes: min, max (plan_enums.h). */
#define ARITY_(s, name, v, in_min, in_max, out_min, out_max) {in_min, in_max, out_min, out_max},
static const uint32_t op_arity[OP_COUNT][4] = {LLMC_PLAN_OPS(ARITY_)};

static uint64_t align64(uint64_t v)
{
    return (v + 63) & ~(uint64_t)63;
}

/* ---- header ------------------------------------------------------------ */

static llmc_rt_status read_plan_vectors(fb_reader *r, const fb_table *t, llmc_rt_plan *p,
                                        llmc_rt_error *err)
{
    static const fb_vector_spec fields[6] = {
        {PLAN_TENSORS, 4, 4}, {PLAN_OPS, 4, 4},      {PLAN_INPUTS, 4, 4},
        {PLAN_OUTPUTS, 4, 4}, {PLAN_SEGMENTS, 4, 4}, {PLAN_PASSES, 4, 4}};
    fb_vector v[6] = {{0, 0}};
    llmc_rt_status st = fb_vectors(r, t, fields, 6, v, err);
    p->tensors = v[0].pos, p->n_tensors = v[0].len;
    p->ops = v[1].pos, p->n_ops = v[1].len;
    p->inputs = v[2].pos, p->n_inputs = v[2].len;
    p->outputs = v[3].pos, p->n_outputs = v[3].len;
    p->segments = v[4].pos, p->n_segments = v[4].len;
    p->passes = v[5].pos, p->n_passes = v[5].len;
    return st;
}

static llmc_rt_status read_plan_scalars(fb_reader *r, const fb_table *t, llmc_rt_plan *p,
                                        llmc_rt_error *err)
{
    static const fb_scalar_spec fields[10] = {
        {PLAN_SOURCE_HASH, 8, 0},   {PLAN_MAX_CONTEXT, 4, 0},    {PLAN_ARENA_SIZE, 8, 0},
        {PLAN_VOCAB_SIZE, 4, 0},    {PLAN_N_LAYERS, 4, 0},       {PLAN_N_CACHES, 4, 0},
        {PLAN_KV_CHUNK, 4, 0},      {PLAN_GEMM_MIN_ROWS, 4, 0},  {PLAN_PREFILL_KERNEL, 4, 0},
        {PLAN_KV_CACHE_DTYPE, 4, LLMC_RT_F32}};
    uint64_t v[10] = {0};
    const char *compiler_version;
    llmc_rt_status st = fb_string_field(r, t, PLAN_COMPILER_VERSION, &compiler_version, err);
    if (!st)
        st = fb_scalars(r, t, fields, 10, v, err);
    if (!st && v[8] >= PREFILL_KERNEL_COUNT)
        st = rt_fail(err, LLMC_RT_E_CORRUPT, "Plan.prefill_kernel %d is not a known kernel",
                     RT_N((int64_t)v[8]), NULL);
    p->source_hash = v[0];
    p->max_context = (uint32_t)v[1];
    p->arena_size = v[2];
    p->vocab_size = (uint32_t)v[3];
    p->n_layers = (uint32_t)v[4];
    p->n_caches = (uint32_t)v[5];
    p->kv_chunk = (uint32_t)v[6];
    p->gemm_min_rows = v[7] ? (uint32_t)v[7] : RT_DEFAULT_GEMM_MIN_ROWS;
    p->prefill_kernel = (uint32_t)v[8];
    p->kv_cache_dtype = v[9] <= INT32_MAX ? (int)v[9] : -1;
    return st;
}

/* Knows the plan's target (its tile sizes) and, unless the caller only
 * verifies (OPEN_ANY_TARGET), can run it here. */
static llmc_rt_status choose_target(const char *target, unsigned flags, llmc_rt_plan *p,
                                    llmc_rt_error *err)
{
    bool any = (flags & LLMC_RT_OPEN_ANY_TARGET) && rt_target_index(target) >= 0;
    p->target = target;
    p->kernels = rt_kernels_for_target(target, any ? NULL : err); /* says why not */
    return p->kernels || any ? LLMC_RT_OK : LLMC_RT_E_TARGET;
}

static llmc_rt_status verify_header(fb_reader *r, llmc_rt_plan *p, unsigned flags,
                                    llmc_rt_error *err)
{
    fb_table t;
    uint64_t version;
    const char *target;
    if (r->size < 8)
        return rt_fail(err, LLMC_RT_E_TRUNCATED, "plan has %u bytes; its header needs 8",
                       RT_N((int64_t)r->size), NULL);
    if (memcmp(r->base + 4, "LLMC", 4) != 0)
        return rt_fail(err, LLMC_RT_E_MAGIC, "bytes 4..7 are not the identifier \"LLMC\"",
                       NULL, NULL);
    llmc_rt_status st = fb_table_at(r, fb_u32(r->base), "Plan", &t, err);
    if (!st)
        st = fb_scalar(r, &t, PLAN_FORMAT_VERSION, 4, 0, &version, err);
    if (!st && version != LLMC_RT_FORMAT_VERSION)
        return rt_fail(err, LLMC_RT_E_VERSION, "format_version %u; this runtime reads %u",
                       RT_N((int64_t)version, LLMC_RT_FORMAT_VERSION), NULL);
    if (!st)
        st = fb_string_field(r, &t, PLAN_TARGET, &target, err);
    if (!st)
        st = choose_target(target, flags, p, err);
    if (!st)
        st = read_plan_scalars(r, &t, p, err);
    if (!st)
        st = read_plan_vectors(r, &t, p, err);
    p->root = t.pos;
    return st;
}

/* ---- tensors ----------------------------------------------------------- */

static llmc_rt_status verify_weight(fb_reader *r, const llmc_rt_plan *p, const rt_tensor_desc *d,
                                    llmc_rt_error *err)
{
    rt_segment_desc seg;
    int64_t dims[LLMC_RT_MAX_RANK];
    uint64_t bytes;
    for (uint32_t k = 0; k < d->dims.len; k++) {
        const uint8_t *a = fb_vec_affine(r, d->dims, k);
        if (fb_i64(a + 8) || fb_i64(a + 16))
            return rt_fail(err, LLMC_RT_E_CORRUPT, "weight dim %d depends on S or P",
                           RT_N(k), NULL);
    }
    llmc_rt_status st = rt_eval_dims(r, d, 0, 0, dims, &bytes, LLMC_RT_E_CORRUPT, err);
    if (!st)
        st = rt_read_segment(r, p, d->segment, &seg, err);
    if (!st && seg.size != bytes)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "weight has %u bytes but segment %u has %u",
                       RT_N((int64_t)bytes, d->segment, (int64_t)seg.size), NULL);
    return st;
}

static llmc_rt_status verify_arena_tensor(const llmc_rt_plan *p, const rt_tensor_desc *d,
                                          llmc_rt_error *err)
{
    if (d->arena_offset % 64)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "arena_offset %u is not 64-byte aligned",
                       RT_N((int64_t)d->arena_offset), NULL);
    if (d->arena_offset > p->arena_size || d->max_bytes > p->arena_size - d->arena_offset)
        return rt_fail(err, LLMC_RT_E_CORRUPT,
                       "arena bytes [%u, %u + %u) exceed arena_size %u",
                       RT_N((int64_t)d->arena_offset, (int64_t)d->arena_offset,
                            (int64_t)d->max_bytes, (int64_t)p->arena_size), NULL);
    return LLMC_RT_OK;
}

/* A layout the plan's target packs that way, on a tensor of the right
 * kind (the dtype and byte size are checked with the dims, tensor_traits.h). */
static llmc_rt_status verify_layout(const llmc_rt_plan *p, const rt_tensor_desc *d,
                                    llmc_rt_error *err)
{
    const rt_target_info *t = rt_target_info_of(rt_target_index(p->target));
    int rows = 0, depth = 0, kind = KIND_WEIGHT;
    switch (d->layout) {
    case LAYOUT_DENSE:
        if (rt_dtype_bytes(d->dtype))
            return LLMC_RT_OK;
        return rt_fail(err, LLMC_RT_E_CORRUPT, "dtype %d cannot be Dense", RT_N(d->dtype), NULL);
    case LAYOUT_QWEIGHT:
        rows = t->q_hp, depth = t->q_lp;
        break;
    case LAYOUT_QACT:
        rows = t->q_ep, depth = t->q_lp, kind = KIND_ARENA;
        break;
    case LAYOUT_FWEIGHT:
        rows = t->f_hp;
        break;
    case LAYOUT_HALF: /* any target, no tiles */
        if (d->kind == KIND_WEIGHT && !d->tile_rows && !d->tile_depth)
            return LLMC_RT_OK;
        return rt_fail(err, LLMC_RT_E_CORRUPT, "layout Half as kind %d with %dx%d tiles; it is a "
                       "weight without tiles", RT_N(d->kind, d->tile_rows, d->tile_depth), NULL);
    default:
        return rt_fail(err, LLMC_RT_E_CORRUPT, "layout %d unknown", RT_N(d->layout), NULL);
    }
    if (d->kind != kind || !rows || d->tile_rows != rows || d->tile_depth != depth)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "layout %d as kind %d with %dx%d tiles; target %s "
                       "packs it as kind %d with %dx%d tiles", RT_N(d->layout, d->kind,
                       d->tile_rows, d->tile_depth, kind, rows, depth), RT_S(t->name));
    return LLMC_RT_OK;
}

static llmc_rt_status verify_tensor(fb_reader *r, const llmc_rt_plan *p, uint32_t i,
                                    llmc_rt_error *err)
{
    rt_tensor_desc d;
    llmc_rt_status st = rt_read_tensor(r, p, i, &d, err);
    if (st)
        return st;
    if (!rt_dtype_bits(d.dtype))
        st = rt_fail(err, LLMC_RT_E_CORRUPT, "dtype %d unsupported", RT_N(d.dtype), NULL);
    else if (d.dims.len > LLMC_RT_MAX_RANK)
        st = rt_fail(err, LLMC_RT_E_CORRUPT, "rank %u > %d", RT_N(d.dims.len, LLMC_RT_MAX_RANK),
                     NULL);
    else if (d.kind != KIND_ARENA && d.kind != KIND_WEIGHT)
        st = rt_fail(err, LLMC_RT_E_CORRUPT, "kind %d unknown", RT_N(d.kind), NULL);
    else
        st = verify_layout(p, &d, err);
    if (!st)
        st = d.kind == KIND_ARENA ? verify_arena_tensor(p, &d, err) : verify_weight(r, p, &d, err);
    if (st)
        return rt_prefix(err, st, "tensor %u '%s': ", RT_N(i), RT_S(d.name));
    return LLMC_RT_OK;
}

/* ---- ops --------------------------------------------------------------- */

/* What the op checks need to know about one of its tensors. */
typedef struct {
    int dtype, rank, kind, layout;
    uint32_t group;
} tensor_meta;

static tensor_meta meta_of(fb_reader *r, const llmc_rt_plan *p, uint32_t i)
{
    rt_tensor_desc d;
    tensor_meta m = {0, 0, 0, 0, 0};
    if (rt_read_tensor(r, p, i, &d, NULL) == LLMC_RT_OK) { /* verified already */
        m.dtype = d.dtype;
        m.rank = (int)d.dims.len;
        m.kind = d.kind;
        m.layout = d.layout;
        m.group = d.group;
    }
    return m;
}

/* Where a tensor with a non-Dense layout may appear. */
static bool packed_operand(int code, bool is_input, uint32_t slot)
{
    return (code == OP_LINEAR && is_input && slot <= 1) ||
           (code == OP_SHADOW_LINEAR && is_input && slot == 1) ||
           (code == OP_QUANTIZE_ROWS && !is_input) || (code == OP_GATHER && is_input && slot == 0);
}

static llmc_rt_status verify_op_tensors(fb_reader *r, const llmc_rt_plan *p,
                                        const rt_op_desc *op, llmc_rt_error *err)
{
    const uint32_t *arity = op_arity[op->code];
    if (op->inputs.len < arity[0] || op->inputs.len > arity[1] ||
        op->outputs.len < arity[2] || op->outputs.len > arity[3])
        return rt_fail(err, LLMC_RT_E_CORRUPT, "%u inputs and %u outputs; %s takes %u..%d "
                       "inputs and %u..%d outputs",
                       RT_N(op->inputs.len, op->outputs.len, arity[0],
                            arity[1] == ANY ? -1 : (int64_t)arity[1], arity[2],
                            arity[3] == ANY ? -1 : (int64_t)arity[3]),
                       RT_S(rt_op_code_name(op->code)));
    for (uint32_t k = 0; k < op->inputs.len + op->outputs.len; k++) {
        bool is_in = k < op->inputs.len;
        uint32_t slot = is_in ? k : k - op->inputs.len;
        uint32_t t = fb_vec_u32(r, is_in ? op->inputs : op->outputs, slot);
        if (t >= p->n_tensors)
            return rt_fail(err, LLMC_RT_E_CORRUPT, "%s %u: tensor %u >= %u tensors",
                           RT_N(slot, t, p->n_tensors), RT_S(is_in ? "input" : "output"));
        tensor_meta m = meta_of(r, p, t);
        if (!is_in && m.kind != KIND_ARENA)
            return rt_fail(err, LLMC_RT_E_CORRUPT, "output %u: tensor %u is a weight",
                           RT_N(slot, t), NULL);
        if (m.layout != LAYOUT_DENSE && !packed_operand(op->code, is_in, slot))
            return rt_fail(err, LLMC_RT_E_CORRUPT, "%s %u: tensor %u has layout %d; only "
                           "Linear's x and W, Gather's data, ShadowLinear's W and QuantizeRows' "
                           "output may be packed",
                           RT_N(slot, t, m.layout), RT_S(is_in ? "input" : "output"));
    }
    return LLMC_RT_OK;
}

static bool is_output_of(const fb_reader *r, const rt_op_desc *op, uint32_t t)
{
    for (uint32_t k = 0; k < op->outputs.len; k++)
        if (fb_vec_u32(r, op->outputs, k) == t)
            return true;
    return false;
}

static llmc_rt_status verify_region(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                    uint32_t i, llmc_rt_error *err)
{
    rt_region_desc g;
    llmc_rt_status st = rt_read_region(r, op, i, &g, err);
    if (st)
        return st;
    if (g.src >= p->n_tensors)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "region %u src tensor %u >= %u tensors",
                       RT_N(i, g.src, p->n_tensors), NULL);
    if (!is_output_of(r, op, g.dst))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "region %u dst tensor %u is not an output "
                       "of the op", RT_N(i, g.dst), NULL);
    tensor_meta src = meta_of(r, p, g.src), dst = meta_of(r, p, g.dst);
    uint32_t rd = (uint32_t)dst.rank;
    if (src.dtype != dst.dtype)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "region %u copies dtype %d into %d",
                       RT_N(i, src.dtype, dst.dtype), NULL);
    if (g.dst_start.len != rd || g.size.len != rd || g.src_axis.len != rd ||
        g.src_step.len != rd || g.src_start.len != (uint32_t)src.rank)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "region %u: dst_start/size/src_axis/src_step "
                       "lengths %u/%u/%u/%u must be dst rank %d, src_start length %u src "
                       "rank %d", RT_N(i, g.dst_start.len, g.size.len, g.src_axis.len,
                                       g.src_step.len, rd, g.src_start.len, src.rank), NULL);
    for (uint32_t k = 0; k < rd; k++) {
        int axis = (int8_t)r->base[g.src_axis.pos + k];
        if (axis < -1 || axis >= src.rank)
            return rt_fail(err, LLMC_RT_E_CORRUPT, "region %u: src_axis[%u] = %d outside "
                           "[-1, %d)", RT_N(i, k, axis, src.rank), NULL);
    }
    return LLMC_RT_OK;
}

static llmc_rt_status verify_reduce_axes(fb_reader *r, const rt_op_desc *op, tensor_meta x,
                                         tensor_meta y, llmc_rt_error *err)
{
    int64_t prev = -1;
    for (uint32_t k = 0; k < op->axes.len; k++) {
        int64_t axis = (int32_t)fb_vec_u32(r, op->axes, k);
        if (axis <= prev || axis >= x.rank)
            return rt_fail(err, LLMC_RT_E_CORRUPT, "axes[%u] = %d: axes must ascend within "
                           "rank %d", RT_N(k, axis, x.rank), NULL);
        prev = axis;
    }
    int removed = op->axes.len ? (int)op->axes.len : x.rank; /* no axes: all of them */
    if (y.rank != (op->keepdims ? x.rank : x.rank - removed))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "output rank %d does not follow from input "
                       "rank %d", RT_N(y.rank, x.rank), NULL);
    return LLMC_RT_OK;
}

static llmc_rt_status bad_dtypes(const char *what, llmc_rt_error *err)
{
    return rt_fail(err, LLMC_RT_E_CORRUPT, "dtypes not supported: %s", NULL, RT_S(what));
}

static llmc_rt_status bad_axis(int64_t axis, int rank, llmc_rt_error *err)
{
    return rt_fail(err, LLMC_RT_E_CORRUPT, "axis %d outside rank %d", RT_N(axis, rank), NULL);
}

/* LayerNorm's outputs: y alone, or y, Mean and InvStdDev (float32, x's rank). */
static llmc_rt_status verify_layernorm_stats(fb_reader *r, const llmc_rt_plan *p,
                                             const rt_op_desc *op, int rank, llmc_rt_error *err)
{
    if (op->outputs.len == 2)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "LayerNorm has 1 output or 3 (y, mean, "
                       "inv_std_dev), not 2", NULL, NULL);
    for (uint32_t k = 1; k < op->outputs.len; k++) {
        tensor_meta stats = meta_of(r, p, fb_vec_u32(r, op->outputs, k));
        if (stats.dtype != LLMC_RT_F32 || stats.rank != rank)
            return bad_dtypes("LayerNorm mean and inv_std_dev float32 of the input's rank", err);
    }
    return LLMC_RT_OK;
}

/* ---- fused ops --------------------------------------------------------- */

#define MAX_META 5 /* inputs described by tensor_meta: the most any op but Copy takes */

/* Dim `axis` (negative: from the end) of tensor t, when it is a constant. */
static bool const_dim(fb_reader *r, const llmc_rt_plan *p, uint32_t t, int axis, int64_t *out)
{
    rt_tensor_desc d;
    if (rt_read_tensor(r, p, t, &d, NULL) != LLMC_RT_OK)
        return false;
    if (axis < 0)
        axis += (int)d.dims.len;
    if (axis < 0 || (uint32_t)axis >= d.dims.len)
        return false;
    const uint8_t *a = fb_vec_affine(r, d.dims, (uint32_t)axis);
    *out = fb_i64(a);
    return !fb_i64(a + 8) && !fb_i64(a + 16);
}

/* Do dims [0, n) of tensors a and b have the same Affines? */
static bool same_leading_dims(fb_reader *r, const llmc_rt_plan *p, uint32_t a, uint32_t b,
                              uint32_t n)
{
    rt_tensor_desc da, db;
    if (rt_read_tensor(r, p, a, &da, NULL) || rt_read_tensor(r, p, b, &db, NULL) ||
        da.dims.len < n || db.dims.len < n)
        return false;
    return memcmp(r->base + da.dims.pos, r->base + db.dims.pos, (size_t)n * AFFINE_BYTES) == 0;
}

static uint32_t op_in(const fb_reader *r, const rt_op_desc *op, uint32_t k)
{
    return fb_vec_u32(r, op->inputs, k);
}

static uint32_t op_out(const fb_reader *r, const rt_op_desc *op, uint32_t k)
{
    return fb_vec_u32(r, op->outputs, k);
}

static bool all_f32(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op)
{
    for (uint32_t k = 0; k < op->inputs.len + op->outputs.len; k++) {
        bool is_in = k < op->inputs.len;
        uint32_t t = is_in ? op_in(r, op, k) : op_out(r, op, k - op->inputs.len);
        if (meta_of(r, p, t).dtype != LLMC_RT_F32)
            return false;
    }
    return true;
}

/* ---- Attention ---------------------------------------------------------- */

/* Dim `axis` of tensor t: *c + *s * S + *q * P (tensors verified already). */
static void dim_of(fb_reader *r, const llmc_rt_plan *p, uint32_t t, uint32_t axis, int64_t *c,
                   int64_t *s, int64_t *q)
{
    rt_tensor_desc d;
    *c = *s = *q = -1;
    if (rt_read_tensor(r, p, t, &d, NULL) == LLMC_RT_OK && axis < d.dims.len) {
        const uint8_t *a = fb_vec_affine(r, d.dims, axis);
        *c = fb_i64(a);
        *s = fb_i64(a + 8);
        *q = fb_i64(a + 16);
    }
}

/* Input k (or the output for k = inputs.len) has dims [want0, want1, ...]
 * where a want of -1 stands for S and others are constants. */
static bool dims_match(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op, uint32_t k,
                       const int64_t *want, uint32_t rank)
{
    uint32_t t = k < op->inputs.len ? fb_vec_u32(r, op->inputs, k) : fb_vec_u32(r, op->outputs, 0);
    for (uint32_t a = 0; a < rank; a++) {
        int64_t c, s, q;
        dim_of(r, p, t, a, &c, &s, &q);
        if (want[a] < 0 ? (c || s != 1 || q) : (c != want[a] || s || q))
            return false;
    }
    return true;
}

static llmc_rt_status bad_shape(const char *fmt, const int64_t *nums, llmc_rt_error *err)
{
    return rt_fail(err, LLMC_RT_E_CORRUPT, fmt, nums, NULL);
}

/* Bias [N] when kind & 1, then residual (y's dims, one output) when kind & 2. */
static llmc_rt_status verify_linear_extras(fb_reader *r, const llmc_rt_plan *p,
                                          const rt_op_desc *op, int64_t n, llmc_rt_error *err)
{
    uint32_t next = 2;
    int64_t bias_n;
    uint32_t want = 2u + (op->kind & 1) + (op->kind >> 1 & 1);
    if (op->kind & ~3 || op->inputs.len != want)
        return bad_shape("kind %d (bit 0 bias, bit 1 residual) does not match %d inputs",
                         RT_N(op->kind, op->inputs.len), err);
    if (op->kind & 1) {
        uint32_t b = op_in(r, op, next++);
        if (meta_of(r, p, b).rank != 1 || !const_dim(r, p, b, 0, &bias_n) || bias_n != n)
            return bad_shape("bias must be [N] = [%d]", RT_N(n), err);
    }
    if (op->kind & 2) {
        uint32_t res = op_in(r, op, next), y = op_out(r, op, 0);
        tensor_meta m = meta_of(r, p, res);
        if (op->outputs.len != 1 || m.rank != meta_of(r, p, y).rank ||
            !same_leading_dims(r, p, res, y, (uint32_t)m.rank))
            return bad_shape("residual needs exactly one output, with the residual's dims",
                             NULL, err);
    }
    return LLMC_RT_OK;
}

/* x and W: float32 Dense both, float32 x by FWeightTiles, or QuantizeRows'
 * tiles by QWeightTiles of the same group; bias, residual and outputs
 * float32 (Dense: verify_op_tensors). */
static llmc_rt_status verify_linear_operands(fb_reader *r, const llmc_rt_plan *p,
                                             const rt_op_desc *op, tensor_meta mx,
                                             tensor_meta mw, llmc_rt_error *err)
{
    for (uint32_t k = 2; k < op->inputs.len; k++)
        if (meta_of(r, p, op_in(r, op, k)).dtype != LLMC_RT_F32)
            return bad_dtypes("Linear bias and residual float32", err);
    for (uint32_t k = 0; k < op->outputs.len; k++)
        if (meta_of(r, p, op_out(r, op, k)).dtype != LLMC_RT_F32)
            return bad_dtypes("Linear outputs float32", err);
    switch (mw.layout) {
    case LAYOUT_DENSE:
    case LAYOUT_FWEIGHT:
        return mx.dtype == LLMC_RT_F32 && mx.layout == LAYOUT_DENSE && mw.dtype == LLMC_RT_F32
                   ? LLMC_RT_OK : bad_dtypes("Linear float32 x by float32 W", err);
    default: /* QWeightTiles */
        if (mx.layout != LAYOUT_QACT || mx.group != mw.group)
            return bad_shape("x of a quantized W must be QuantizeRows tiles of its group %d",
                             RT_N(mw.group), err);
        return LLMC_RT_OK;
    }
}

/* Gather of rows of a packed weight [N, K] (an embedding table, maybe the
 * LM head's own W): axis 0, int32/int64 indices [...] -> float32 [..., K]. */
static llmc_rt_status verify_packed_gather(fb_reader *r, const llmc_rt_plan *p,
                                           const rt_op_desc *op, tensor_meta idx, tensor_meta y,
                                           llmc_rt_error *err)
{
    uint32_t w = op_in(r, op, 0);
    tensor_meta mw = meta_of(r, p, w);
    int64_t n, k, yk;
    if (y.dtype != LLMC_RT_F32 || (idx.dtype != LLMC_RT_I32 && idx.dtype != LLMC_RT_I64))
        return bad_dtypes("Gather of a packed weight, int32/int64 -> float32", err);
    if (mw.kind != KIND_WEIGHT || mw.rank != 2 || op->axis != 0 || !const_dim(r, p, w, 0, &n) ||
        !const_dim(r, p, w, 1, &k))
        return bad_shape("a packed Gather reads rows (axis 0) of a weight [N, K]", NULL, err);
    if (y.rank != idx.rank + 1 || !same_leading_dims(r, p, op_in(r, op, 1), op_out(r, op, 0),
                                                     (uint32_t)idx.rank) ||
        !const_dim(r, p, op_out(r, op, 0), -1, &yk) || yk != k)
        return bad_shape("the output of a packed Gather must be [indices dims..., %d]", RT_N(k),
                         err);
    return LLMC_RT_OK;
}

/* QuantizeRows: float32 Dense x [..., K] -> QActTiles with x's dims. */
static llmc_rt_status verify_quantize_rows(fb_reader *r, const llmc_rt_plan *p,
                                           const rt_op_desc *op, tensor_meta x, tensor_meta y,
                                           llmc_rt_error *err)
{
    if (x.dtype != LLMC_RT_F32 || x.layout != LAYOUT_DENSE || y.layout != LAYOUT_QACT)
        return bad_dtypes("QuantizeRows float32 -> QActTiles", err);
    if (x.rank < 1 || y.rank != x.rank ||
        !same_leading_dims(r, p, op_in(r, op, 0), op_out(r, op, 0), (uint32_t)x.rank) ||
        op->kind)
        return bad_shape("the output must have x's dims, and kind 0", NULL, err);
    if (!(op->scale == 0.0f || (op->scale >= FLT_MIN && op->scale <= FLT_MAX)))
        return bad_shape("static scale: 0 (per row) or a normal positive float", NULL, err);
    return LLMC_RT_OK;
}

static llmc_rt_status verify_linear(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                    llmc_rt_error *err)
{
    uint32_t x = op_in(r, op, 0), w = op_in(r, op, 1);
    tensor_meta mx = meta_of(r, p, x), mw = meta_of(r, p, w);
    int64_t n, k, xk, sum = 0;
    llmc_rt_status st = verify_linear_operands(r, p, op, mx, mw, err);
    if (st)
        return st;
    if (mw.kind != KIND_WEIGHT || mw.rank != 2 || !const_dim(r, p, w, 0, &n) ||
        !const_dim(r, p, w, 1, &k))
        return bad_shape("W must be a weight of rank 2 [N, K]", NULL, err);
    if (mx.rank < 1 || (const_dim(r, p, x, -1, &xk) && xk != k))
        return bad_shape("x must be [..., K] with K = %d, W's second dim", RT_N(k), err);
    for (uint32_t j = 0; j < op->outputs.len; j++) {
        uint32_t y = op_out(r, op, j);
        int64_t nj;
        if (meta_of(r, p, y).rank != mx.rank || !const_dim(r, p, y, -1, &nj) ||
            !same_leading_dims(r, p, x, y, (uint32_t)mx.rank - 1))
            return bad_shape("output %u must have x's dims but a constant last one",
                             RT_N(j), err);
        sum += nj;
    }
    if (sum != n)
        return bad_shape("output last dims sum to %d; W has N = %d rows", RT_N(sum, n), err);
    return verify_linear_extras(r, p, op, n, err);
}

/* kind 1: input 2 is the hot channels' table, a float32 weight [H, N + 1]. */
static llmc_rt_status verify_hot_table(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                       int64_t n, llmc_rt_error *err)
{
    uint32_t h = op_in(r, op, 2);
    tensor_meta m = meta_of(r, p, h);
    int64_t rows, cols;
    if (m.dtype != LLMC_RT_F32 || m.layout != LAYOUT_DENSE || m.kind != KIND_WEIGHT ||
        m.rank != 2 || !const_dim(r, p, h, 0, &rows) || !const_dim(r, p, h, 1, &cols) ||
        rows < 1 || cols != n + 1)
        return bad_shape("hot table: a float32 weight [H >= 1, N + 1 = %d]", RT_N(n + 1), err);
    return LLMC_RT_OK;
}

/* ShadowLinear: x float32 [..., K], W an Int8 QWeightTiles weight [N, K],
 * with kind 1 the hot channels' table, then as many float32 inputs y_j as
 * outputs z_j, each z_j with y_j's dims [..., N_j] and x's leading ones,
 * sum N_j = N; a static scale. */
static llmc_rt_status verify_shadow_linear(fb_reader *r, const llmc_rt_plan *p,
                                           const rt_op_desc *op, llmc_rt_error *err)
{
    uint32_t x = op_in(r, op, 0), w = op_in(r, op, 1);
    tensor_meta mx = meta_of(r, p, x), mw = meta_of(r, p, w);
    int64_t n, k, xk, sum = 0;
    if (mx.dtype != LLMC_RT_F32 || mx.layout != LAYOUT_DENSE || mw.dtype != LLMC_RT_I8 ||
        mw.layout != LAYOUT_QWEIGHT || mw.kind != KIND_WEIGHT)
        return bad_dtypes("ShadowLinear float32 x by an Int8 QWeightTiles weight", err);
    if (mw.rank != 2 || !const_dim(r, p, w, 0, &n) || !const_dim(r, p, w, 1, &k) ||
        mx.rank < 1 || !const_dim(r, p, x, -1, &xk) || xk != k)
        return bad_shape("x must be [..., K] and W [N, K], K constant", NULL, err);
    uint32_t ys = 2u + (op->kind == 1);
    if (op->inputs.len != ys + op->outputs.len || op->kind > 1)
        return bad_shape("inputs x, W, the hot table if kind is 1, then one y per output "
                         "(%u); kind 0 or 1", RT_N(op->outputs.len), err);
    llmc_rt_status st = op->kind ? verify_hot_table(r, p, op, n, err) : LLMC_RT_OK;
    if (st)
        return st;
    for (uint32_t j = 0; j < op->outputs.len; j++) {
        uint32_t y = op_in(r, op, ys + j), z = op_out(r, op, j);
        tensor_meta my = meta_of(r, p, y), mz = meta_of(r, p, z);
        int64_t nj;
        if (my.dtype != LLMC_RT_F32 || mz.dtype != LLMC_RT_F32 || my.rank != mx.rank ||
            mz.rank != mx.rank || !same_leading_dims(r, p, y, z, (uint32_t)mx.rank) ||
            !same_leading_dims(r, p, x, z, (uint32_t)mx.rank - 1) || !const_dim(r, p, z, -1, &nj))
            return bad_shape("y %u and z %u: float32 with x's leading dims, the same dims, a "
                             "constant last one", RT_N(j, j), err);
        sum += nj;
    }
    if (sum != n)
        return bad_shape("output last dims sum to %d; W has N = %d rows", RT_N(sum, n), err);
    if (!(op->scale >= FLT_MIN && op->scale <= FLT_MAX))
        return bad_shape("static scale: a normal positive float", NULL, err);
    return LLMC_RT_OK;
}

static llmc_rt_status verify_rmsnorm(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                     llmc_rt_error *err)
{
    uint32_t x = op_in(r, op, 0), scale = op_in(r, op, 1);
    int64_t d, sd;
    if (!all_f32(r, p, op))
        return bad_dtypes("RMSNorm float32", err);
    if (meta_of(r, p, x).rank < 1 || meta_of(r, p, op_out(r, op, 0)).rank != meta_of(r, p, x).rank)
        return bad_axis(-1, meta_of(r, p, x).rank, err);
    if (!const_dim(r, p, x, -1, &d) || meta_of(r, p, scale).rank != 1 ||
        !const_dim(r, p, scale, 0, &sd) || sd != d)
        return bad_shape("scale must be [D] with D the input's constant last dim", NULL, err);
    return LLMC_RT_OK;
}

static llmc_rt_status verify_rope(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                  llmc_rt_error *err)
{
    uint32_t x = op_in(r, op, 0);
    int rank = meta_of(r, p, x).rank;
    int64_t d, rows, cols;
    if (!all_f32(r, p, op))
        return bad_dtypes("Rope float32", err);
    if (rank < 2 || meta_of(r, p, op_out(r, op, 0)).rank != rank || !const_dim(r, p, x, -1, &d))
        return bad_shape("x must be [..., S, D] with a constant D", NULL, err);
    if (op->rotary_dim <= 0 || op->rotary_dim % 2 || op->rotary_dim > d)
        return bad_shape("rotary_dim %d must be even, > 0 and <= the last dim %d",
                         RT_N(op->rotary_dim, d), err);
    for (uint32_t k = 1; k <= 2; k++) {
        uint32_t t = op_in(r, op, k);
        if (meta_of(r, p, t).rank != 2 || !const_dim(r, p, t, 0, &rows) ||
            !const_dim(r, p, t, 1, &cols) || rows != p->max_context || cols != op->rotary_dim)
            return bad_shape("cos and sin must be [max_context %u, rotary_dim %d]",
                             RT_N(p->max_context, op->rotary_dim), err);
    }
    return LLMC_RT_OK;
}

static llmc_rt_status verify_attention(fb_reader *r, const llmc_rt_plan *p,
                                       const rt_op_desc *op, const tensor_meta *in,
                                       tensor_meta y, llmc_rt_error *err)
{
    int64_t H = op->heads, G = op->kv_heads, D = op->head_dim, R = op->rotary_dim;
    uint32_t n_in = R > 0 ? 5 : 3;
    if (H < 1 || G < 1 || rt_umod64((uint64_t)H, (uint64_t)G) || D < 1 ||
        D > RT_ATTN_MAX_HEAD_DIM || R < 0 || R % 2 || R > D)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "heads %d, kv_heads %d, head_dim %d (at most "
                       "%d), rotary_dim %d: need kv_heads | heads and an even rotary_dim <= "
                       "head_dim", RT_N(H, G, D, RT_ATTN_MAX_HEAD_DIM, R), NULL);
    if (!isfinite(op->scale))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "scale is not finite", NULL, NULL);
    if (op->inputs.len != n_in)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "%u inputs; rotary_dim %d needs %u",
                       RT_N(op->inputs.len, R, n_in), NULL);
    for (uint32_t k = 0; k < n_in; k++)
        if (in[k].dtype != LLMC_RT_F32 || in[k].rank != (k < 3 ? 3 : 2))
            return bad_dtypes("Attention float32 q, k, v [1, S, n] (cos, sin [rows, n])", err);
    if (y.dtype != LLMC_RT_F32 || y.rank != 3)
        return bad_dtypes("Attention -> float32 [1, S, heads*head_dim]", err);
    const int64_t q_dims[3] = {1, -1, H * D}, kv_dims[3] = {1, -1, G * D};
    const int64_t table[2] = {p->max_context, R};
    if (!dims_match(r, p, op, 0, q_dims, 3) || !dims_match(r, p, op, op->inputs.len, q_dims, 3) ||
        !dims_match(r, p, op, 1, kv_dims, 3) || !dims_match(r, p, op, 2, kv_dims, 3))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "q and the output must be [1, S, %d], k and v "
                       "[1, S, %d]", RT_N(H * D, G * D), NULL);
    if (R && (!dims_match(r, p, op, 3, table, 2) || !dims_match(r, p, op, 4, table, 2)))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "cos and sin must be [max_context %u, "
                       "rotary_dim %d]", RT_N(p->max_context, R), NULL);
    if (op->cache >= p->n_caches)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "cache %u >= n_caches %u",
                       RT_N(op->cache, p->n_caches), NULL);
    return LLMC_RT_OK;
}

/* ---- Trilu, ScatterND, CumSum ------------------------------------------ */

/* The output has input 0's dtype and exactly its dims (the same Affines). */
static bool same_as_input0(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                           tensor_meta x, tensor_meta y)
{
    return y.dtype == x.dtype && y.rank == x.rank &&
           same_leading_dims(r, p, op_in(r, op, 0), op_out(r, op, 0), (uint32_t)x.rank);
}

static llmc_rt_status verify_trilu(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                   const tensor_meta *in, tensor_meta y, llmc_rt_error *err)
{
    int64_t one;
    if (op->kind > 1)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "kind %d: Trilu's kind is 1 (upper) or 0 "
                       "(lower)", RT_N(op->kind), NULL);
    if (in[0].rank < 2 || !same_as_input0(r, p, op, in[0], y))
        return bad_shape("x must have rank >= 2 and the output x's dtype and dims", NULL, err);
    if (op->inputs.len == 2 &&
        (in[1].dtype != LLMC_RT_I64 || in[1].rank > 1 ||
         (in[1].rank == 1 && (!const_dim(r, p, op_in(r, op, 1), 0, &one) || one != 1))))
        return bad_shape("k must be one int64 (rank 0, or rank 1 of dim 1)", NULL, err);
    return LLMC_RT_OK;
}

/* updates dims = indices dims[:-1] + data dims[q:], Affine by Affine. */
static bool scatter_updates_dims(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                 uint32_t lead, uint32_t q, uint32_t data_rank)
{
    rt_tensor_desc data, idx, upd;
    if (rt_read_tensor(r, p, op_in(r, op, 0), &data, NULL) ||
        rt_read_tensor(r, p, op_in(r, op, 1), &idx, NULL) ||
        rt_read_tensor(r, p, op_in(r, op, 2), &upd, NULL) || upd.dims.len != lead + data_rank - q)
        return false;
    return memcmp(r->base + upd.dims.pos, r->base + idx.dims.pos, lead * AFFINE_BYTES) == 0 &&
           memcmp(r->base + upd.dims.pos + lead * AFFINE_BYTES,
                  r->base + data.dims.pos + q * AFFINE_BYTES,
                  (data_rank - q) * AFFINE_BYTES) == 0;
}

static llmc_rt_status verify_scatter_nd(fb_reader *r, const llmc_rt_plan *p,
                                        const rt_op_desc *op, const tensor_meta *in,
                                        tensor_meta y, llmc_rt_error *err)
{
    int64_t q;
    if (!k_scatter_nd_supports(op->kind, in[0].dtype) || in[2].dtype != in[0].dtype ||
        in[1].dtype != LLMC_RT_I64)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "kind %d: ScatterND takes T, int64 indices, "
                       "T -> T with reduction 0..4 (none, add, mul, max, min; bool only "
                       "without one); dtypes %d, %d, %d",
                       RT_N(op->kind, in[0].dtype, in[1].dtype, in[2].dtype), NULL);
    if (!same_as_input0(r, p, op, in[0], y))
        return bad_shape("the output must have data's dtype and dims", NULL, err);
    if (in[1].rank < 1 || !const_dim(r, p, op_in(r, op, 1), -1, &q) || q > in[0].rank)
        return bad_shape("indices must be [..., q] with a constant q <= the rank %d of data",
                         RT_N(in[0].rank), err);
    if (!scatter_updates_dims(r, p, op, (uint32_t)in[1].rank - 1, (uint32_t)q,
                              (uint32_t)in[0].rank))
        return bad_shape("updates must have dims indices[:-1] + data[%d:]", RT_N(q), err);
    return LLMC_RT_OK;
}

static llmc_rt_status verify_cumsum(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                    const tensor_meta *in, tensor_meta y, llmc_rt_error *err)
{
    if (!k_cumsum_supports(in[0].dtype) || op->kind & ~3)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "kind %d, dtype %d: CumSum takes float32, "
                       "int32 or int64 and kind bits 0 (exclusive) and 1 (reverse)",
                       RT_N(op->kind, in[0].dtype), NULL);
    if (op->axis < 0 || op->axis >= in[0].rank)
        return bad_axis(op->axis, in[0].rank, err);
    return same_as_input0(r, p, op, in[0], y)
               ? LLMC_RT_OK : bad_shape("the output must have x's dtype and dims", NULL, err);
}

/* ---- per-op checks: the op resolver's verify entries -------------------- */

/* What an op's checks see (llmc_rt.h): the op, the meta of its first
 * MAX_META inputs and of its first output. */
struct llmc_rt_op_check {
    fb_reader *r;
    const llmc_rt_plan *p;
    const rt_op_desc *op;
    tensor_meta in[MAX_META], y;
};
typedef const struct llmc_rt_op_check op_check;

llmc_rt_status llmc_rt_verify_Copy(op_check *c, llmc_rt_error *err)
{
    for (uint32_t i = 0; i < c->op->regions.len; i++) {
        llmc_rt_status st = verify_region(c->r, c->p, c->op, i, err);
        if (st)
            return st;
    }
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_verify_Reshape(op_check *c, llmc_rt_error *err)
{
    return c->in[0].dtype == c->y.dtype ? LLMC_RT_OK : bad_dtypes("Reshape T -> T", err);
}

llmc_rt_status llmc_rt_verify_Unary(op_check *c, llmc_rt_error *err)
{
    return k_unary_supports(c->op->kind, c->in[0].dtype, c->y.dtype)
               ? LLMC_RT_OK : bad_dtypes("Unary kind with these dtypes", err);
}

llmc_rt_status llmc_rt_verify_Binary(op_check *c, llmc_rt_error *err)
{
    return k_binary_supports(c->op->kind, c->in[0].dtype, c->in[1].dtype, c->y.dtype)
               ? LLMC_RT_OK : bad_dtypes("Binary kind with these dtypes", err);
}

llmc_rt_status llmc_rt_verify_Where(op_check *c, llmc_rt_error *err)
{
    const tensor_meta *in = c->in;
    return in[0].dtype == LLMC_RT_BOOL && in[1].dtype == c->y.dtype && in[2].dtype == c->y.dtype
               ? LLMC_RT_OK : bad_dtypes("Where bool, T, T -> T", err);
}

llmc_rt_status llmc_rt_verify_Cast(op_check *c, llmc_rt_error *err)
{
    return k_cast_supports(c->in[0].dtype, c->y.dtype) ? LLMC_RT_OK : bad_dtypes("Cast", err);
}

llmc_rt_status llmc_rt_verify_MatMul(op_check *c, llmc_rt_error *err)
{
    const tensor_meta *in = c->in;
    if (in[0].dtype != LLMC_RT_F32 || in[1].dtype != LLMC_RT_F32 || c->y.dtype != LLMC_RT_F32)
        return bad_dtypes("MatMul float32", err);
    return in[0].rank && in[1].rank ? LLMC_RT_OK : bad_axis(0, 0, err);
}

llmc_rt_status llmc_rt_verify_Reduce(op_check *c, llmc_rt_error *err)
{
    if (!k_reduce_supports(c->op->kind, c->in[0].dtype, c->y.dtype))
        return bad_dtypes("Reduce kind with these dtypes", err);
    return verify_reduce_axes(c->r, c->op, c->in[0], c->y, err);
}

/* Softmax and LayerNorm: float32 inputs and output, an axis of x. */
static llmc_rt_status verify_f32_axis(op_check *c, llmc_rt_error *err)
{
    for (uint32_t k = 0; k < c->op->inputs.len; k++)
        if (c->in[k].dtype != LLMC_RT_F32)
            return bad_dtypes("float32 only", err);
    if (c->y.dtype != LLMC_RT_F32)
        return bad_dtypes("float32 only", err);
    if (c->op->axis < 0 || c->op->axis >= c->in[0].rank)
        return bad_axis(c->op->axis, c->in[0].rank, err);
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_verify_Softmax(op_check *c, llmc_rt_error *err)
{
    return verify_f32_axis(c, err);
}

llmc_rt_status llmc_rt_verify_LayerNorm(op_check *c, llmc_rt_error *err)
{
    llmc_rt_status st = verify_f32_axis(c, err);
    return st ? st : verify_layernorm_stats(c->r, c->p, c->op, c->in[0].rank, err);
}

llmc_rt_status llmc_rt_verify_Gather(op_check *c, llmc_rt_error *err)
{
    const tensor_meta *in = c->in;
    tensor_meta y = c->y;
    int32_t axis = c->op->axis;
    if (in[0].layout != LAYOUT_DENSE)
        return verify_packed_gather(c->r, c->p, c->op, in[1], y, err);
    if (y.dtype != in[0].dtype || (in[1].dtype != LLMC_RT_I32 && in[1].dtype != LLMC_RT_I64))
        return bad_dtypes("Gather T, int32/int64 -> T", err);
    if (axis < 0 || axis >= in[0].rank)
        return bad_axis(axis, in[0].rank, err);
    return y.rank == in[0].rank - 1 + in[1].rank ? LLMC_RT_OK : bad_axis(axis, y.rank, err);
}

llmc_rt_status llmc_rt_verify_Fill(op_check *c, llmc_rt_error *err)
{
    (void)c, (void)err; /* any dtype */
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_verify_Range(op_check *c, llmc_rt_error *err)
{
    const tensor_meta *in = c->in;
    int t = c->y.dtype;
    if ((t != LLMC_RT_F32 && t != LLMC_RT_I32 && t != LLMC_RT_I64) || in[0].dtype != t ||
        in[1].dtype != t || in[2].dtype != t)
        return bad_dtypes("Range T, T, T -> T with T float32/int32/int64", err);
    return c->y.rank == 1 ? LLMC_RT_OK : bad_axis(0, c->y.rank, err);
}

llmc_rt_status llmc_rt_verify_Symbols(op_check *c, llmc_rt_error *err)
{
    return c->y.dtype == LLMC_RT_I64 && c->y.rank <= 1 ? LLMC_RT_OK
                                                       : bad_dtypes("Symbols -> int64 [n]", err);
}

llmc_rt_status llmc_rt_verify_Linear(op_check *c, llmc_rt_error *err)
{
    return verify_linear(c->r, c->p, c->op, err);
}

llmc_rt_status llmc_rt_verify_ShadowLinear(op_check *c, llmc_rt_error *err)
{
    return verify_shadow_linear(c->r, c->p, c->op, err);
}

llmc_rt_status llmc_rt_verify_RMSNorm(op_check *c, llmc_rt_error *err)
{
    return verify_rmsnorm(c->r, c->p, c->op, err);
}

llmc_rt_status llmc_rt_verify_Rope(op_check *c, llmc_rt_error *err)
{
    return verify_rope(c->r, c->p, c->op, err);
}

llmc_rt_status llmc_rt_verify_Attention(op_check *c, llmc_rt_error *err)
{
    return verify_attention(c->r, c->p, c->op, c->in, c->y, err);
}

llmc_rt_status llmc_rt_verify_Trilu(op_check *c, llmc_rt_error *err)
{
    return verify_trilu(c->r, c->p, c->op, c->in, c->y, err);
}

llmc_rt_status llmc_rt_verify_ScatterND(op_check *c, llmc_rt_error *err)
{
    return verify_scatter_nd(c->r, c->p, c->op, c->in, c->y, err);
}

llmc_rt_status llmc_rt_verify_CumSum(op_check *c, llmc_rt_error *err)
{
    return verify_cumsum(c->r, c->p, c->op, c->in, c->y, err);
}

llmc_rt_status llmc_rt_verify_QuantizeRows(op_check *c, llmc_rt_error *err)
{
    return verify_quantize_rows(c->r, c->p, c->op, c->in[0], c->y, err);
}

/* The checks llmc_rt_plan_open applies: every op's (llmc_rt_plan_open_ops
 * takes its resolver's instead, so a firmware links only its ops' checks). */
#define VERIFY_ENTRY_(s, Name, ...) llmc_rt_verify_##Name,
static const llmc_rt_verify_fn all_verifiers[OP_COUNT] = {LLMC_PLAN_OPS(VERIFY_ENTRY_)};

static llmc_rt_status verify_op_body(fb_reader *r, const llmc_rt_plan *p, const rt_op_desc *op,
                                     const llmc_rt_verify_fn *verify, llmc_rt_error *err)
{
    struct llmc_rt_op_check c;
    memset(&c, 0, sizeof c);
    if (op->code < 0 || op->code >= OP_COUNT)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "opcode %d unknown", RT_N(op->code), NULL);
    if (!verify[op->code])
        return rt_fail(err, LLMC_RT_E_RESOLVER, "op %s is not in the op resolver", NULL,
                       RT_S(rt_op_code_name(op->code)));
    llmc_rt_status st = verify_op_tensors(r, p, op, err);
    if (st)
        return st;
    c.r = r, c.p = p, c.op = op;
    for (uint32_t k = 0; k < op->inputs.len && k < MAX_META; k++)
        c.in[k] = meta_of(r, p, fb_vec_u32(r, op->inputs, k));
    c.y = meta_of(r, p, fb_vec_u32(r, op->outputs, 0));
    return verify[op->code](&c, err);
}

static llmc_rt_status verify_op(fb_reader *r, const llmc_rt_plan *p, uint32_t i,
                                const llmc_rt_verify_fn *verify, llmc_rt_error *err)
{
    rt_op_desc op;
    llmc_rt_status st = rt_read_op(r, p, i, &op, err);
    if (st)
        return st;
    st = verify_op_body(r, p, &op, verify, err);
    if (st)
        return rt_prefix(err, st, "op %u (%s '%s'): ", RT_N(i),
                         RT_S(rt_op_code_name(op.code), op.name));
    return LLMC_RT_OK;
}

/* ---- IO bindings ------------------------------------------------------- */

static bool role_is_input(int role)
{
    return role <= ROLE_PAST_VALUE;
}

static llmc_rt_status verify_binding(fb_reader *r, const llmc_rt_plan *p, const rt_io_desc *io,
                                     int is_output, llmc_rt_error *err)
{
    if (io->tensor >= p->n_tensors)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "tensor %u >= %u tensors",
                       RT_N(io->tensor, p->n_tensors), NULL);
    if (io->role < 0 || io->role >= ROLE_COUNT ||
        (io->role != ROLE_GENERIC && role_is_input(io->role) == (is_output != 0)))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "role %d is not an %s role",
                       RT_N(io->role), RT_S(is_output ? "output" : "input"));
    tensor_meta m = meta_of(r, p, io->tensor);
    if (!is_output && m.kind != KIND_ARENA)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "input tensor %u is a weight",
                       RT_N(io->tensor), NULL);
    if (io->role != ROLE_GENERIC &&
        (m.dtype != role_dtype(io->role) || m.rank != role_rank(io->role)))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "role %d needs dtype %d rank %d; tensor %u "
                       "has dtype %d rank %d",
                       RT_N(io->role, role_dtype(io->role), role_rank(io->role), io->tensor,
                            m.dtype, m.rank), NULL);
    if (role_is_kv(io->role) && (io->layer < 0 || (uint32_t)io->layer >= p->n_layers))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "layer %d outside [0, n_layers %u)",
                       RT_N(io->layer, p->n_layers), NULL);
    return LLMC_RT_OK;
}

static llmc_rt_status verify_io(fb_reader *r, const llmc_rt_plan *p, int is_output,
                                llmc_rt_error *err)
{
    uint32_t n = is_output ? p->n_outputs : p->n_inputs;
    for (uint32_t i = 0; i < n; i++) {
        rt_io_desc io;
        llmc_rt_status st = rt_read_io(r, p, is_output, i, &io, err);
        if (st)
            return st;
        st = verify_binding(r, p, &io, is_output, err);
        if (st)
            return rt_prefix(err, st, "%s %u: ", RT_N(i), RT_S(is_output ? "output" : "input"));
    }
    return LLMC_RT_OK;
}

static llmc_rt_status verify_passes(fb_reader *r, const llmc_rt_plan *p, llmc_rt_error *err)
{
    fb_vector v = {p->passes, p->n_passes};
    for (uint32_t i = 0; i < p->n_passes; i++) {
        static const fb_scalar_spec fields[2] = {{PASS_NODES, 4, 0}, {PASS_DIGEST, 8, 0}};
        fb_table t;
        const char *name;
        uint64_t values[2];
        llmc_rt_status st = fb_vec_table(r, v, i, "PassRecord", &t, err);
        if (!st)
            st = fb_string_field(r, &t, PASS_NAME, &name, err);
        if (!st)
            st = fb_scalars(r, &t, fields, 2, values, err);
        if (st)
            return rt_prefix(err, st, "pass %u: ", RT_N(i), NULL);
    }
    return LLMC_RT_OK;
}

/* ---- segments ---------------------------------------------------------- */

static llmc_rt_status verify_segment_place(const fb_reader *r, const rt_segment_desc *s,
                                           uint64_t fb_end, llmc_rt_error *err)
{
    if (s->offset % 64)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "offset %u is not 64-byte aligned",
                       RT_N((int64_t)s->offset), NULL);
    if (s->offset < fb_end)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "offset %u lies inside the FlatBuffer "
                       "(which ends at byte %u)", RT_N((int64_t)s->offset, (int64_t)fb_end), NULL);
    if (s->offset > r->size || s->size > r->size - s->offset)
        return rt_fail(err, LLMC_RT_E_TRUNCATED, "bytes [%u, %u + %u) run past the end of "
                       "the plan (%u bytes)", RT_N((int64_t)s->offset, (int64_t)s->offset,
                                                   (int64_t)s->size, (int64_t)r->size), NULL);
    return LLMC_RT_OK;
}

static bool segments_overlap(const rt_segment_desc *a, const rt_segment_desc *b)
{
    return a->size && b->size && a->offset < b->offset + b->size &&
           b->offset < a->offset + a->size;
}

/* Pairwise, but linear when the segments come sorted (the usual layout). */
static llmc_rt_status verify_no_overlap(fb_reader *r, const llmc_rt_plan *p,
                                        llmc_rt_error *err)
{
    rt_segment_desc a, b;
    uint64_t prev_end = 0;
    bool sorted = true;
    for (uint32_t i = 0; i < p->n_segments && sorted; i++) {
        rt_read_segment(r, p, i, &a, NULL); /* read before: cannot fail */
        sorted = !a.size || a.offset >= prev_end;
        if (a.size)
            prev_end = a.offset + a.size;
    }
    for (uint32_t i = 0; i < p->n_segments && !sorted; i++) {
        rt_read_segment(r, p, i, &a, NULL);
        for (uint32_t j = i + 1; j < p->n_segments; j++) {
            rt_read_segment(r, p, j, &b, NULL);
            if (segments_overlap(&a, &b))
                return rt_fail(err, LLMC_RT_E_CORRUPT, "segments %u and %u overlap",
                               RT_N(i, j), NULL);
        }
    }
    return LLMC_RT_OK;
}

static llmc_rt_status verify_segments(fb_reader *r, const llmc_rt_plan *p, unsigned flags,
                                      llmc_rt_error *err)
{
    uint64_t fb_end = r->end; /* every table, vector and string is verified by now */
    for (uint32_t i = 0; i < p->n_segments; i++) {
        rt_segment_desc s;
        llmc_rt_status st = rt_read_segment(r, p, i, &s, err);
        if (!st)
            st = verify_segment_place(r, &s, fb_end, err);
        if (st)
            return rt_prefix(err, st, "segment %u: ", RT_N(i), NULL);
    }
    /* Placement before hashes: a misplaced segment is reported as such,
     * not as the hash mismatch that reading the wrong bytes gives. */
    llmc_rt_status st = verify_no_overlap(r, p, err);
    for (uint32_t i = 0; !st && (flags & LLMC_RT_VERIFY_HASHES) && i < p->n_segments; i++) {
        rt_segment_desc s;
        rt_read_segment(r, p, i, &s, NULL); /* read above: cannot fail */
        if (llmc_rt_xxh64(r->base + s.offset, (size_t)s.size, 0) != s.xxhash64)
            st = rt_prefix(err, rt_fail(err, LLMC_RT_E_HASH, "xxhash64 of %u bytes at %u does not match",
                                        RT_N((int64_t)s.size, (int64_t)s.offset), NULL),
                           "segment %u: ", RT_N(i), NULL);
    }
    return st;
}

/* ---- KV store ---------------------------------------------------------- */

static llmc_rt_status compute_kv_bytes(fb_reader *r, llmc_rt_plan *p, llmc_rt_error *err)
{
    p->kv_bytes = 0;
    for (uint32_t i = 0; i < p->n_inputs; i++) {
        rt_io_desc io;
        rt_tensor_desc d;
        int64_t dims[LLMC_RT_MAX_RANK];
        uint64_t bytes;
        llmc_rt_status st = rt_read_io(r, p, 0, i, &io, err);
        if (st)
            return st;
        if (io.role != ROLE_PAST_KEY && io.role != ROLE_PAST_VALUE)
            continue;
        st = rt_read_tensor(r, p, io.tensor, &d, err);
        if (!st)
            st = rt_eval_dims(r, &d, 0, p->max_context, dims, &bytes, LLMC_RT_E_CORRUPT, err);
        if (!st && align64(bytes) < bytes)
            st = rt_fail(err, LLMC_RT_E_CORRUPT, "size overflows", NULL, NULL);
        if (!st && p->kv_bytes + align64(bytes) < p->kv_bytes)
            st = rt_fail(err, LLMC_RT_E_CORRUPT, "KV store size overflows", NULL, NULL);
        if (st)
            return rt_prefix(err, st, "input %u (KV store at P=max_context): ", RT_N(i), NULL);
        p->kv_bytes += align64(bytes);
    }
    return LLMC_RT_OK;
}

/* ---- fused KV caches ---------------------------------------------------- */

/* Every cache index belongs to exactly one Attention op; sizes the pool
 * chunk slot (K and V of the widest cache, 64-aligned). */
static llmc_rt_status verify_caches(fb_reader *r, llmc_rt_plan *p, llmc_rt_error *err)
{
    uint32_t seen = 0;
    p->kv_slot_bytes = 0;
    if (!rt_kv_dtype_known(p->kv_cache_dtype))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "kv_cache_dtype %d is not Float32, Float16 or "
                       "Int8", RT_N(p->kv_cache_dtype), NULL);
    if (p->n_caches && (p->kv_chunk < 1 || p->n_caches > p->n_ops))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "n_caches %u needs kv_chunk >= 1 (has %u) and "
                       "at most one cache per op", RT_N(p->n_caches, p->kv_chunk), NULL);
    for (uint32_t i = 0; i < p->n_ops; i++) {
        rt_op_desc op, other;
        rt_read_op(r, p, i, &op, NULL); /* verified: cannot fail */
        if (op.code != OP_ATTENTION)
            continue;
        for (uint32_t j = 0; j < i; j++)
            if (!rt_read_op(r, p, j, &other, NULL) && other.code == OP_ATTENTION &&
                other.cache == op.cache)
                return rt_fail(err, LLMC_RT_E_CORRUPT, "ops %u and %u both use cache %u",
                               RT_N(j, i, op.cache), NULL);
        seen++;
        /* kv_heads < 2^31 rows of head_dim <= RT_ATTN_MAX_HEAD_DIM elements */
        uint64_t row = rt_kv_position_bytes(p->kv_cache_dtype, op.kv_heads, op.head_dim);
        if (row > rt_udiv64(UINT64_MAX - 64, p->kv_chunk))
            return rt_fail(err, LLMC_RT_E_CORRUPT, "op %u: cache chunk size overflows",
                           RT_N(i), NULL);
        if (align64(row * p->kv_chunk) > p->kv_slot_bytes)
            p->kv_slot_bytes = align64(row * p->kv_chunk);
    }
    if (seen != p->n_caches)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "n_caches %u but %u Attention ops",
                       RT_N(p->n_caches, seen), NULL);
    return LLMC_RT_OK;
}

/* ---- prepared table sizes ---------------------------------------------- */

/* Pool counts stop growing here: a plan may share one vector among many
 * ops, so the sums can exceed any memory, and no session holds 2^40. */
#define COUNT_CAP ((uint64_t)1 << 40)

static uint64_t add_capped(uint64_t total, uint64_t n)
{
    return n >= COUNT_CAP - total ? COUNT_CAP : total + n; /* total <= COUNT_CAP */
}

/* What the Affine pool holds of a Copy op's regions. */
static uint64_t region_affines(fb_reader *r, const rt_op_desc *op)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < op->regions.len && n < COUNT_CAP; i++) {
        rt_region_desc g;
        rt_read_region(r, op, i, &g, NULL); /* verified: cannot fail */
        n = add_capped(n, (uint64_t)g.dst_start.len + g.size.len + g.src_start.len);
    }
    return n;
}

/* The pool entries of the session's prepared tables (session_prepare.c
 * fills them in this order of ops). */
static void count_pools(fb_reader *r, llmc_rt_plan *p)
{
    p->n_operands = p->n_regions = p->n_affines = 0;
    for (uint32_t i = 0; i < p->n_tensors; i++) {
        rt_tensor_desc d;
        rt_read_tensor(r, p, i, &d, NULL); /* verified: cannot fail */
        p->n_affines += d.dims.len;         /* rank <= 8 */
    }
    for (uint32_t i = 0; i < p->n_ops; i++) {
        rt_op_desc op;
        rt_read_op(r, p, i, &op, NULL);
        p->n_operands = add_capped(p->n_operands, (uint64_t)op.inputs.len + op.outputs.len);
        if (op.code == OP_COPY) {
            p->n_regions = add_capped(p->n_regions, op.regions.len);
            p->n_affines = add_capped(p->n_affines, region_affines(r, &op));
        } else if (op.code == OP_SYMBOLS) {
            p->n_affines = add_capped(p->n_affines, op.values.len);
        }
    }
}

/* ---- tokenizer --------------------------------------------------------- */

/* Plan.tokenizer: its segment (placed by verify_segments) and every table
 * inside it (llmc_rt_tokenizer_open). */
static llmc_rt_status verify_tokenizer(fb_reader *r, llmc_rt_plan *p, llmc_rt_error *err)
{
    fb_table root, t;
    uint64_t segment = 0;
    rt_segment_desc s;
    llmc_rt_tokenizer tok;
    p->tokenizer_segment = UINT32_MAX;
    llmc_rt_status st = fb_table_at(r, p->root, "Plan", &root, err);
    if (!st)
        st = fb_table_field(r, &root, PLAN_TOKENIZER, "Tokenizer", &t, err);
    if (st || !t.pos)
        return st;
    st = fb_scalar(r, &t, TOKENIZER_SEGMENT, 4, 0, &segment, err);
    if (!st)
        st = rt_read_segment(r, p, (uint32_t)(segment < p->n_segments ? segment : p->n_segments), &s, err);
    if (!st && (s.offset > SIZE_MAX || s.size > SIZE_MAX))
        st = rt_fail(err, LLMC_RT_E_CORRUPT, "segment too large", NULL, NULL);
    if (!st)
        st = llmc_rt_tokenizer_open(&tok, r->base + s.offset, (size_t)s.size, err);
    if (st)
        return rt_prefix(err, st, "tokenizer: ", NULL, NULL);
    p->tokenizer_segment = (uint32_t)segment;
    return LLMC_RT_OK;
}

/* ---- entry points ------------------------------------------------------ */

static llmc_rt_status verify_all(fb_reader *r, llmc_rt_plan *p, unsigned flags,
                                 const llmc_rt_verify_fn *verify, llmc_rt_error *err)
{
    llmc_rt_status st = verify_header(r, p, flags, err);
    for (uint32_t i = 0; !st && i < p->n_segments; i++) {
        rt_segment_desc s;
        st = rt_read_segment(r, p, i, &s, err);
    }
    for (uint32_t i = 0; !st && i < p->n_tensors; i++)
        st = verify_tensor(r, p, i, err);
    for (uint32_t i = 0; !st && i < p->n_ops; i++)
        st = verify_op(r, p, i, verify, err);
    if (!st)
        st = verify_caches(r, p, err);
    if (!st)
        st = verify_io(r, p, 0, err);
    if (!st)
        st = verify_io(r, p, 1, err);
    if (!st)
        st = verify_passes(r, p, err);
    if (!st)
        st = verify_segments(r, p, flags, err);
    if (!st)
        st = verify_tokenizer(r, p, err);
    if (!st)
        st = compute_kv_bytes(r, p, err);
    if (!st)
        count_pools(r, p);
    return st;
}

static llmc_rt_status open_plan(llmc_rt_plan *plan, const void *bytes, size_t size,
                                unsigned flags, const llmc_rt_verify_fn *verify,
                                llmc_rt_error *err)
{
    if (err) {
        err->code = LLMC_RT_OK;
        err->msg[0] = '\0';
    }
    if (!plan || !bytes)
        return rt_fail(err, LLMC_RT_E_ARG, "plan and bytes must not be NULL", NULL, NULL);
    if ((uintptr_t)bytes % LLMC_RT_PLAN_ALIGN)
        return rt_fail(err, LLMC_RT_E_ARG, "plan at address %u is not %u-byte aligned (align "
                       "the section that holds it: ALIGN(%u) in a linker script)",
                       RT_N((int64_t)(uintptr_t)bytes, LLMC_RT_PLAN_ALIGN, LLMC_RT_PLAN_ALIGN),
                       NULL);
    memset(plan, 0, sizeof *plan);
    llmc_rt_plan p;
    memset(&p, 0, sizeof p);
    p.base = bytes;
    p.size = size;
    fb_reader r = {bytes, size, LLMC_RT_PLAN_ALIGN};
    llmc_rt_status st = verify_all(&r, &p, flags, verify, err);
    if (st)
        return st;
    *plan = p;
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_plan_open(llmc_rt_plan *plan, const void *bytes, size_t size,
                                 unsigned flags, llmc_rt_error *err)
{
    return open_plan(plan, bytes, size, flags, all_verifiers, err);
}

llmc_rt_status llmc_rt_plan_open_ops(llmc_rt_plan *plan, const void *bytes, size_t size,
                                     unsigned flags, const llmc_rt_op_resolver *ops,
                                     llmc_rt_error *err)
{
    if (!ops)
        return rt_fail(err, LLMC_RT_E_ARG, "the op resolver must not be NULL", NULL, NULL);
    return open_plan(plan, bytes, size, flags, ops->verify, err);
}

llmc_rt_status llmc_rt_plan_io(const llmc_rt_plan *plan, int is_output, uint32_t index,
                               llmc_rt_io *io)
{
    rt_io_desc d;
    rt_tensor_desc t;
    if (!plan || !plan->base || !io)
        return LLMC_RT_E_ARG;
    fb_reader r = rt_reader(plan);
    if (index >= (is_output ? plan->n_outputs : plan->n_inputs))
        return LLMC_RT_E_ARG;
    llmc_rt_status st = rt_read_io(&r, plan, is_output, index, &d, NULL);
    if (!st)
        st = rt_read_tensor(&r, plan, d.tensor, &t, NULL);
    if (st)
        return st;
    io->name = t.name;
    io->dtype = t.dtype;
    io->role = d.role;
    io->layer = d.layer;
    io->tensor = d.tensor;
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_plan_op(const llmc_rt_plan *plan, uint32_t index, llmc_rt_op_info *info)
{
    rt_op_desc op;
    rt_tensor_desc w;
    if (!plan || !plan->base || !info || index >= plan->n_ops)
        return LLMC_RT_E_ARG;
    fb_reader r = rt_reader(plan);
    llmc_rt_status st = rt_read_op(&r, plan, index, &op, NULL);
    if (st)
        return st;
    info->code = op.code;
    info->name = op.name;
    info->weight_dtype = info->weight_layout = 0;
    if (op.code == OP_LINEAR) { /* verified: W is input 1 */
        st = rt_read_tensor(&r, plan, fb_vec_u32(&r, op.inputs, 1), &w, NULL);
        info->weight_dtype = st ? 0 : w.dtype;
        info->weight_layout = st ? 0 : w.layout;
    }
    return st;
}
