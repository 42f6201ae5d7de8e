/* llmc_rt_plan_open: proves the whole plan before anything executes.
 * Structure (offsets, vectors, strings, tables) is checked by the decoders in
 * plan_reader.c; the verifier adds the meaning (verify.h lists its files).
 * This one: the header, the tensors (dtypes, ranks, layouts, arena and
 * weight sizes), the fused KV caches, the sizes of the session's prepared
 * tables, and the driver and entry points. */
#include <string.h>

#include "kernels/kernel_table.h"
#include "rt_div64.h"
#include "tensor_traits.h"
#include "verify.h"
#include "llmc_rt_internal.h"

/* ---- header ------------------------------------------------------------ */

static llmc_rt_status read_plan_vectors(fb_reader *r, const fb_table *t, llmc_rt_plan *p,
                                        llmc_rt_error *err)
{
    /* into v[]: rt_plan keeps positions and lengths apart */
    static const fb_vector_spec fields[6] = {
        {PLAN_TENSORS, 4, 4, 0 * sizeof(fb_vector)}, {PLAN_OPS, 4, 4, 1 * sizeof(fb_vector)},
        {PLAN_INPUTS, 4, 4, 2 * sizeof(fb_vector)},  {PLAN_OUTPUTS, 4, 4, 3 * sizeof(fb_vector)},
        {PLAN_SEGMENTS, 4, 4, 4 * sizeof(fb_vector)}, {PLAN_PASSES, 4, 4, 5 * sizeof(fb_vector)}};
    fb_vector v[6] = {{0, 0}};
    llmc_rt_status st = fb_vectors(r, t, fields, 6, v, err);
    rt_plan_of(p)->tensors = v[0].pos, rt_plan_of(p)->n_tensors = v[0].len;
    rt_plan_of(p)->ops = v[1].pos, rt_plan_of(p)->n_ops = v[1].len;
    rt_plan_of(p)->inputs = v[2].pos, rt_plan_of(p)->n_inputs = v[2].len;
    rt_plan_of(p)->outputs = v[3].pos, rt_plan_of(p)->n_outputs = v[3].len;
    rt_plan_of(p)->segments = v[4].pos, rt_plan_of(p)->n_segments = v[4].len;
    rt_plan_of(p)->passes = v[5].pos, rt_plan_of(p)->n_passes = v[5].len;
    return st;
}

/* Plan.decode_isa and Plan.prefill_isa name tables of the plan's target;
 * each step runs on its table where this CPU runs it, else on the fastest
 * (choose_target's), which gives the same bits. */
static llmc_rt_status choose_tuned_kernels(rt_plan *P, llmc_rt_error *err)
{
    P->decode_kernels = P->kernels;
    if (!RT_KERNELS_TUNABLE)
        return LLMC_RT_OK;
    const uint32_t isa[2] = {P->decode_isa, P->prefill_isa};
    for (int i = 0; i < 2; i++)
        if (isa[i] && rt_kernel_isa_target(isa[i]) != rt_target_index(P->target))
            return rt_fail(err, LLMC_RT_E_CORRUPT, "Plan.%s %d (%s) is not a kernel table of "
                           "target \"%s\"", RT_N(isa[i]), RT_S(i ? "prefill_isa" : "decode_isa",
                           rt_kernel_isa_name(isa[i]), P->target));
    P->decode_kernels = rt_kernels_tuned(P->target, P->kernels, P->decode_isa);
    P->kernels = rt_kernels_tuned(P->target, P->kernels, P->prefill_isa);
    return LLMC_RT_OK;
}

/* the bound spelled out in read_plan_scalars' message (a second %d there
 * costs the Cortex-M core's .text budget) */
LLMC_STATIC_ASSERT(gemv_prefetch_max, RT_GEMV_PREFETCH_MAX == 65536u);

static llmc_rt_status read_plan_scalars(fb_reader *r, const fb_table *t, llmc_rt_plan *p,
                                        llmc_rt_error *err)
{
#define PF_(id, width, dflt, member) FB_SCALAR(id, width, dflt, rt_plan, member)
    static const fb_scalar_spec fields[13] = {
        PF_(PLAN_SOURCE_HASH, 8, 0, source_hash),   PF_(PLAN_MAX_CONTEXT, 4, 0, max_context),
        PF_(PLAN_ARENA_SIZE, 8, 0, arena_size),     PF_(PLAN_VOCAB_SIZE, 4, 0, vocab_size),
        PF_(PLAN_N_LAYERS, 4, 0, n_layers),         PF_(PLAN_N_CACHES, 4, 0, n_caches),
        PF_(PLAN_KV_CHUNK, 4, 0, kv_chunk),         PF_(PLAN_GEMM_MIN_ROWS, 4, 0, gemm_min_rows),
        PF_(PLAN_PREFILL_KERNEL, 4, 0, prefill_kernel),
        PF_(PLAN_KV_CACHE_DTYPE, 4, LLMC_RT_F32, kv_cache_dtype),
        PF_(PLAN_DECODE_ISA, 4, 0, decode_isa),     PF_(PLAN_PREFILL_ISA, 4, 0, prefill_isa),
        PF_(PLAN_GEMV_PREFETCH, 4, 0, gemv_prefetch)};
#undef PF_
    rt_plan *P = rt_plan_of(p);
    const char *compiler_version;
    llmc_rt_status st = fb_string_field(r, t, PLAN_COMPILER_VERSION, &compiler_version, err);
    if (!st)
        st = fb_scalars(r, t, fields, 13, P, err);
    if (!st && P->prefill_kernel >= PREFILL_KERNEL_COUNT)
        st = rt_fail(err, LLMC_RT_E_CORRUPT, "Plan.prefill_kernel %d is not a known kernel",
                     RT_N(P->prefill_kernel), NULL);
    if (!st && (P->gemv_prefetch % 64 || P->gemv_prefetch > RT_GEMV_PREFETCH_MAX))
        st = rt_fail(err, LLMC_RT_E_CORRUPT, "Plan.gemv_prefetch %d is not a multiple of 64 "
                     "up to 65536", RT_N(P->gemv_prefetch), NULL);
    if (!st)
        st = choose_tuned_kernels(P, err);
    if (!P->gemv_prefetch)
        P->gemv_prefetch = rt_gemv_prefetch_default();
    if (!P->gemm_min_rows)
        P->gemm_min_rows = RT_DEFAULT_GEMM_MIN_ROWS;
    if (P->kv_cache_dtype < 0) /* a uint32 past INT32_MAX: unknown */
        P->kv_cache_dtype = -1;
    return st;
}

/* Knows the plan's target (its tile sizes) and, unless the caller only
 * verifies (OPEN_ANY_TARGET), can run it here. */
static llmc_rt_status choose_target(const char *target, unsigned flags, llmc_rt_plan *p,
                                    llmc_rt_error *err)
{
    bool any = (flags & LLMC_RT_OPEN_ANY_TARGET) && rt_target_index(target) >= 0;
    rt_plan_of(p)->target = target;
    rt_plan_of(p)->kernels = rt_kernels_for_target(target, any ? NULL : err); /* says why not */
    return rt_plan_of(p)->kernels || any ? LLMC_RT_OK : LLMC_RT_E_TARGET;
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
    rt_plan_of(p)->root = t.pos;
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
    if (d->arena_offset > rt_plan_of(p)->arena_size || d->max_bytes > rt_plan_of(p)->arena_size - d->arena_offset)
        return rt_fail(err, LLMC_RT_E_CORRUPT,
                       "arena bytes [%u, %u + %u) exceed arena_size %u",
                       RT_N((int64_t)d->arena_offset, (int64_t)d->arena_offset,
                            (int64_t)d->max_bytes, (int64_t)rt_plan_of(p)->arena_size), NULL);
    return LLMC_RT_OK;
}

/* A layout the plan's target packs that way, on a tensor of the right
 * kind (the dtype and byte size are checked with the dims, tensor_traits.h). */
static llmc_rt_status verify_layout(const llmc_rt_plan *p, const rt_tensor_desc *d,
                                    llmc_rt_error *err)
{
    const rt_target_info *t = rt_target_info_of(rt_target_index(rt_plan_of(p)->target));
    int rows = 0, depth = 0, kind = KIND_WEIGHT;
    switch (d->layout) {
    case LLMC_RT_LAYOUT_Dense:
        if (rt_dtype_bytes(d->dtype))
            return LLMC_RT_OK;
        return rt_fail(err, LLMC_RT_E_CORRUPT, "dtype %d cannot be Dense", RT_N(d->dtype), NULL);
    case LLMC_RT_LAYOUT_QWeightTiles:
        rows = t->q_hp, depth = t->q_lp;
        break;
    case LLMC_RT_LAYOUT_QActTiles:
        rows = t->q_ep, depth = t->q_lp, kind = KIND_ARENA;
        break;
    case LLMC_RT_LAYOUT_FWeightTiles:
        rows = t->f_hp;
        break;
    case LLMC_RT_LAYOUT_Half: /* any target, no tiles */
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

/* ---- fused KV caches ---------------------------------------------------- */

/* Every cache index belongs to exactly one Attention op; sizes the pool
 * chunk slot (K and V of the widest cache, 64-aligned). */
static llmc_rt_status verify_caches(fb_reader *r, llmc_rt_plan *p, llmc_rt_error *err)
{
    uint32_t seen = 0;
    rt_plan_of(p)->kv_slot_bytes = 0;
    if (!rt_kv_dtype_known(rt_plan_of(p)->kv_cache_dtype))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "kv_cache_dtype %d is not Float32, Float16 or "
                       "Int8", RT_N(rt_plan_of(p)->kv_cache_dtype), NULL);
    if (rt_plan_of(p)->n_caches && (rt_plan_of(p)->kv_chunk < 1 || rt_plan_of(p)->n_caches > rt_plan_of(p)->n_ops))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "n_caches %u needs kv_chunk >= 1 (has %u) and "
                       "at most one cache per op", RT_N(rt_plan_of(p)->n_caches, rt_plan_of(p)->kv_chunk), NULL);
    for (uint32_t i = 0; i < rt_plan_of(p)->n_ops; i++) {
        rt_op_desc op, other;
        rt_read_op(r, p, i, &op, NULL); /* verified: cannot fail */
        if (op.code != LLMC_RT_OP_Attention)
            continue;
        for (uint32_t j = 0; j < i; j++)
            if (!rt_read_op(r, p, j, &other, NULL) && other.code == LLMC_RT_OP_Attention &&
                other.cache == op.cache)
                return rt_fail(err, LLMC_RT_E_CORRUPT, "ops %u and %u both use cache %u",
                               RT_N(j, i, op.cache), NULL);
        seen++;
        /* kv_heads < 2^31 rows of head_dim <= RT_ATTN_MAX_HEAD_DIM elements */
        uint64_t row = rt_kv_position_bytes(rt_plan_of(p)->kv_cache_dtype, op.kv_heads, op.head_dim);
        if (row > rt_udiv64(UINT64_MAX - 64, rt_plan_of(p)->kv_chunk))
            return rt_fail(err, LLMC_RT_E_CORRUPT, "op %u: cache chunk size overflows",
                           RT_N(i), NULL);
        if (rt_qalign64(row * rt_plan_of(p)->kv_chunk) > rt_plan_of(p)->kv_slot_bytes)
            rt_plan_of(p)->kv_slot_bytes = rt_qalign64(row * rt_plan_of(p)->kv_chunk);
    }
    if (seen != rt_plan_of(p)->n_caches)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "n_caches %u but %u Attention ops",
                       RT_N(rt_plan_of(p)->n_caches, seen), NULL);
    return LLMC_RT_OK;
}

/* ---- prepared table sizes ---------------------------------------------- */

/* The pool entries of the session's prepared tables (session_prepare.c
 * fills them in this order of ops), with region_affines those of the Copy
 * ops' regions (their checks counted them). */
static void count_pools(fb_reader *r, llmc_rt_plan *p, uint64_t region_affines)
{
    rt_plan_of(p)->n_operands = rt_plan_of(p)->n_regions = 0;
    rt_plan_of(p)->n_affines = region_affines;
    for (uint32_t i = 0; i < rt_plan_of(p)->n_tensors; i++) {
        rt_tensor_desc d;
        rt_read_tensor(r, p, i, &d, NULL); /* verified: cannot fail */
        rt_plan_of(p)->n_affines = rt_add_capped(rt_plan_of(p)->n_affines, d.dims.len);
    }
    for (uint32_t i = 0; i < rt_plan_of(p)->n_ops; i++) {
        rt_op_desc op;
        rt_read_op(r, p, i, &op, NULL);
        rt_plan_of(p)->n_operands = rt_add_capped(rt_plan_of(p)->n_operands, (uint64_t)op.inputs.len + op.outputs.len);
        if (op.code == LLMC_RT_OP_Copy)
            rt_plan_of(p)->n_regions = rt_add_capped(rt_plan_of(p)->n_regions, op.regions.len);
        else if (op.code == LLMC_RT_OP_Symbols)
            rt_plan_of(p)->n_affines = rt_add_capped(rt_plan_of(p)->n_affines, op.values.len);
    }
}

/* ---- entry points ------------------------------------------------------ */

static llmc_rt_status verify_all(fb_reader *r, llmc_rt_plan *p, unsigned flags,
                                 const llmc_rt_op_resolver *ops, llmc_rt_error *err)
{
    uint64_t region_affines = 0;
    llmc_rt_status st = verify_header(r, p, flags, err);
    for (uint32_t i = 0; !st && i < rt_plan_of(p)->n_segments; i++) {
        rt_segment_desc s;
        st = rt_read_segment(r, p, i, &s, err);
    }
    for (uint32_t i = 0; !st && i < rt_plan_of(p)->n_tensors; i++)
        st = verify_tensor(r, p, i, err);
    if (!st)
        st = rt_verify_ops(r, p, ops, &region_affines, err);
    if (!st)
        st = verify_caches(r, p, err);
    if (!st)
        st = rt_verify_after_ops(r, p, flags, err);
    if (!st)
        count_pools(r, p, region_affines);
    return st;
}

/* With the checks of the op codes in ops: llmc_rt_plan_open applies every
 * op's (llmc_rt_plan_open_ops its resolver's, so a firmware links only its
 * ops' checks). */
static llmc_rt_status open_plan(llmc_rt_plan *plan, const void *bytes, size_t size,
                                unsigned flags, const llmc_rt_op_resolver *ops,
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
    rt_plan_of(&p)->base = bytes;
    rt_plan_of(&p)->size = size;
    fb_reader r = {bytes, size, LLMC_RT_PLAN_ALIGN};
    llmc_rt_status st = verify_all(&r, &p, flags, ops, err);
    if (st)
        return st;
    *plan = p;
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_plan_open(llmc_rt_plan *plan, const void *bytes, size_t size,
                                 unsigned flags, llmc_rt_error *err)
{
    return open_plan(plan, bytes, size, flags, &llmc_rt_all_ops, err);
}

llmc_rt_status llmc_rt_plan_open_ops(llmc_rt_plan *plan, const void *bytes, size_t size,
                                     unsigned flags, const llmc_rt_op_resolver *ops,
                                     llmc_rt_error *err)
{
    if (!ops)
        return rt_fail(err, LLMC_RT_E_ARG, "the op resolver must not be NULL", NULL, NULL);
    return open_plan(plan, bytes, size, flags, ops, err);
}

llmc_rt_status llmc_rt_plan_io(const llmc_rt_plan *plan, int is_output, uint32_t index,
                               llmc_rt_io *io)
{
    rt_io_desc d;
    rt_tensor_desc t;
    if (!plan || !rt_plan_of(plan)->base || !io)
        return LLMC_RT_E_ARG;
    fb_reader r = rt_reader(plan);
    if (index >= (is_output ? rt_plan_of(plan)->n_outputs : rt_plan_of(plan)->n_inputs))
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
    if (!plan || !rt_plan_of(plan)->base || !info || index >= rt_plan_of(plan)->n_ops)
        return LLMC_RT_E_ARG;
    fb_reader r = rt_reader(plan);
    llmc_rt_status st = rt_read_op(&r, plan, index, &op, NULL);
    if (st)
        return st;
    info->code = op.code;
    info->name = op.name;
    info->weight_dtype = info->weight_layout = 0;
    if (op.code == LLMC_RT_OP_Linear) { /* verified: W is input 1 */
        st = rt_read_tensor(&r, plan, fb_vec_u32(&r, op.inputs, 1), &w, NULL);
        info->weight_dtype = st ? 0 : w.dtype;
        info->weight_layout = st ? 0 : w.layout;
    }
    return st;
}
