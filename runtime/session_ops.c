/* The exec function of every plan op code and Linear's kernels: the op
 * resolver's entries (llmc_rt.h).  Each reads the op's prepared fields and
 * the operands the interpreter viewed (session_prepared.h rt_op_call) and
 * calls its kernel; a function nothing references (a firmware resolver
 * without its op) is dropped by --gc-sections with its kernel. */
#include <string.h>

#include "kernels/kernel_table.h"
#include "rt_msg.h"
#include "session.h"
#include "llmc_rt_internal.h"

/* ---- Copy ---------------------------------------------------------------- */

static llmc_rt_status eval_affines(const rt_affine *a, int n, int64_t S, int64_t P,
                                   int64_t *out, const char *what, llmc_rt_error *err)
{
    for (int k = 0; k < n; k++)
        if (!rt_affine_value(&a[k], S, P, &out[k]))
            return rt_fail(err, LLMC_RT_E_EXEC, "%s[%d] overflows", RT_N(k), RT_S(what));
    return LLMC_RT_OK;
}

/* The region's Affines at (S, P); dst_start and size have dst's rank,
 * src_start src's (verified). */
static llmc_rt_status region_of(const rt_prep_region *d, const rt_affine *a, int dst_rank,
                                int src_rank, int64_t S, int64_t P, rt_region *g,
                                llmc_rt_error *err)
{
    llmc_rt_status st = eval_affines(a, dst_rank, S, P, g->dst_start, "dst_start", err);
    if (!st)
        st = eval_affines(a + dst_rank, dst_rank, S, P, g->size, "size", err);
    if (!st)
        st = eval_affines(a + 2 * dst_rank, src_rank, S, P, g->src_start, "src_start", err);
    memcpy(g->src_axis, d->src_axis, sizeof g->src_axis);
    memcpy(g->src_step, d->src_step, sizeof g->src_step);
    return st;
}

/* Bytes a region writes into its destination. */
static uint64_t region_bytes(const rt_region *g, const rt_view *dst)
{
    uint64_t n = k_dtype_size(dst->dtype);
    for (int k = 0; k < dst->rank; k++)
        n *= (uint64_t)g->size[k];
    return n;
}

llmc_rt_status llmc_rt_exec_Copy(rt_op_call *c, llmc_rt_error *err)
{
    const rt_prepared *pr = rt_state(c->s)->prepared;
    for (uint32_t i = 0; i < c->op->regions.len; i++) {
        const rt_prep_region *d = &pr->regions[c->op->regions.first + i];
        rt_region g;
        rt_view src, dst;
        llmc_rt_status st = rt_call_view(c, d->src, &src, err);
        if (!st)
            st = rt_call_view(c, d->dst, &dst, err);
        if (!st)
            st = region_of(d, &pr->affines[d->affines], dst.rank, src.rank, c->S, c->P, &g, err);
        if (!st)
            st = k_copy_region(&g, &src, &dst, err);
        if (st)
            return rt_prefix(err, st, "region %u: ", RT_N(i), NULL);
        c->moved += region_bytes(&g, &dst);
    }
    return LLMC_RT_OK;
}

/* ---- elementwise and shape ops ------------------------------------------ */

llmc_rt_status llmc_rt_exec_Reshape(rt_op_call *c, llmc_rt_error *err)
{
    return k_reshape(&c->in[0], &c->out[0], err);
}

llmc_rt_status llmc_rt_exec_Unary(rt_op_call *c, llmc_rt_error *err)
{
    return k_unary(c->op->unary, c->op->kind, &c->in[0], &c->out[0], err);
}

llmc_rt_status llmc_rt_exec_Binary(rt_op_call *c, llmc_rt_error *err)
{
    rt_parallel par = rt_session_parallel(c->s);
    return k_binary_kernels(c->kernels, c->op->kind, &c->op->binary, &c->in[0],
                            &c->in[1], &c->out[0], &par, err);
}

llmc_rt_status llmc_rt_exec_Where(rt_op_call *c, llmc_rt_error *err)
{
    return k_where(&c->in[0], &c->in[1], &c->in[2], &c->out[0], err);
}

llmc_rt_status llmc_rt_exec_Cast(rt_op_call *c, llmc_rt_error *err)
{
    return k_cast(&c->in[0], &c->out[0], err);
}

llmc_rt_status llmc_rt_exec_Fill(rt_op_call *c, llmc_rt_error *err)
{
    return k_fill(c->op->value_bits, &c->out[0], err);
}

llmc_rt_status llmc_rt_exec_Range(rt_op_call *c, llmc_rt_error *err)
{
    return k_range(&c->in[0], &c->in[1], &c->in[2], &c->out[0], err);
}

llmc_rt_status llmc_rt_exec_Symbols(rt_op_call *c, llmc_rt_error *err)
{
    const rt_prep_op *op = c->op;
    const rt_affine *values = &rt_state(c->s)->prepared->affines[op->values.first];
    rt_view *y = &c->out[0];
    if (k_count(y) != op->values.len)
        return rt_fail(err, LLMC_RT_E_EXEC, "%u values for %d output elements",
                       RT_N(op->values.len, k_count(y)), NULL);
    for (uint32_t k = 0; k < op->values.len; k++)
        if (!rt_affine_value(&values[k], c->S, c->P, (int64_t *)y->data + k))
            return rt_fail(err, LLMC_RT_E_EXEC, "value %u overflows", RT_N(k), NULL);
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_exec_Trilu(rt_op_call *c, llmc_rt_error *err)
{
    return k_trilu(&c->in[0], c->op->inputs.len > 1 ? &c->in[1] : NULL, c->op->kind == 1,
                   &c->out[0], err);
}

llmc_rt_status llmc_rt_exec_ScatterND(rt_op_call *c, llmc_rt_error *err)
{
    return k_scatter_nd(c->op->kind, &c->in[0], &c->in[1], &c->in[2], &c->out[0], err);
}

llmc_rt_status llmc_rt_exec_CumSum(rt_op_call *c, llmc_rt_error *err)
{
    return k_cumsum(&c->in[0], c->op->axis, c->op->kind, &c->out[0], err);
}

/* ---- reductions and norms ------------------------------------------------ */

llmc_rt_status llmc_rt_exec_MatMul(rt_op_call *c, llmc_rt_error *err)
{
    rt_parallel par = rt_session_parallel(c->s);
    return k_matmul(&c->in[0], &c->in[1], &c->out[0], &par, err);
}

llmc_rt_status llmc_rt_exec_Reduce(rt_op_call *c, llmc_rt_error *err)
{
    const rt_prep_op *op = c->op;
    return k_reduce(op->kind, &c->in[0], op->axes, op->n_axes, op->keepdims, &c->out[0], err);
}

llmc_rt_status llmc_rt_exec_Softmax(rt_op_call *c, llmc_rt_error *err)
{
    return k_softmax(&c->in[0], c->op->axis, &c->out[0], err);
}

/* LayerNorm writes y and, with 3 outputs, Mean and InvStdDev. */
llmc_rt_status llmc_rt_exec_LayerNorm(rt_op_call *c, llmc_rt_error *err)
{
    const rt_prep_op *op = c->op;
    bool with_stats = op->outputs.len == 3;
    rt_layernorm_stats stats = {with_stats ? &c->out[1] : NULL, with_stats ? &c->out[2] : NULL};
    return k_layernorm(&c->in[0], &c->in[1], op->inputs.len > 2 ? &c->in[2] : NULL, op->axis,
                       op->epsilon, &c->out[0], &stats, err);
}

llmc_rt_status llmc_rt_exec_RMSNorm(rt_op_call *c, llmc_rt_error *err)
{
    rt_parallel par = rt_session_parallel(c->s);
    return k_rmsnorm(c->kernels, &c->in[0], &c->in[1],
                     c->op->inputs.len > 2 ? &c->in[2] : NULL, c->op->epsilon, &c->out[0], &par, err);
}

llmc_rt_status llmc_rt_exec_Rope(rt_op_call *c, llmc_rt_error *err)
{
    return k_rope(&c->in[0], &c->in[1], &c->in[2], c->op->rotary_dim, c->P, &c->out[0], err);
}

/* ---- Gather -------------------------------------------------------------- */

/* The prepared entry of the op's input k. */
static const rt_prep_tensor *input_tensor(const rt_prepared *pr, const rt_prep_op *op,
                                          uint32_t k)
{
    return &pr->tensors[prep_operand(pr, op->inputs, k)];
}

/* Through the kernel init chose for the table's layout. */
llmc_rt_status llmc_rt_exec_Gather(rt_op_call *c, llmc_rt_error *err)
{
    return c->op->gather(c, err);
}

llmc_rt_status llmc_rt_gather_Dense(rt_op_call *c, llmc_rt_error *err)
{
    return k_gather(&c->in[0], &c->in[1], c->op->axis, &c->out[0], err);
}

/* Rows of a packed weight (an embedding table) dequantized. */
llmc_rt_status llmc_rt_gather_PackedRows(rt_op_call *c, llmc_rt_error *err)
{
    const rt_tensor_format *f = &input_tensor(rt_state(c->s)->prepared, c->op, 0)->format;
    return k_gather_rows(f, &c->in[0], &c->in[1], &c->out[0], err);
}

/* ---- Linear and QuantizeRows --------------------------------------------- */

/* Linear's inputs x, W, then bias if kind & LINEAR_BIAS, residual if kind
 * & LINEAR_RESIDUAL (prepared: kind matches the inputs). */
static const rt_view *linear_bias(const rt_op_call *c)
{
    return c->op->kind & LINEAR_BIAS ? &c->in[2] : NULL;
}

static const rt_view *linear_residual(const rt_op_call *c)
{
    return c->op->kind & LINEAR_RESIDUAL ? &c->in[2 + (c->op->kind & LINEAR_BIAS)] : NULL;
}

/* The tensor of x's activation tiles: a LINEAR_QUANTIZE op's last output
 * (its workspace), else input 0 (a QuantizeRows' output). */
static uint32_t x_tiles_tensor(const rt_op_call *c)
{
    const rt_prepared *pr = rt_state(c->s)->prepared;
    return c->op->kind & LINEAR_QUANTIZE ? prep_operand(pr, c->op->outputs, c->op->outputs.len - 1)
                                         : prep_operand(pr, c->op->inputs, 0);
}

/* A LINEAR_QUANTIZE op's float32 x quantized into its tiles (with the
 * static scale Op.scale, or per row when 0), which then stand in for x as
 * input 0: the kernels below read tiles, as from a QuantizeRows.  An empty
 * x has no rows to quantize (and its outputs none to compute). */
static llmc_rt_status quantize_x(rt_op_call *c, llmc_rt_error *err)
{
    uint32_t t = x_tiles_tensor(c);
    rt_view xq;
    rt_qact_shape qs;
    llmc_rt_status st = k_count(&c->in[0]) ? rt_call_view(c, t, &xq, err) : LLMC_RT_OK;
    if (st || !k_count(&c->in[0]))
        return st;
    if (!rt_qact_shape_of(&rt_state(c->s)->prepared->tensors[t].format, xq.rank, xq.dims, &qs))
        return rt_fail(err, LLMC_RT_E_EXEC, "x's tiles have an invalid QActTiles format", NULL, NULL);
    rt_parallel par = rt_session_parallel(c->s);
    st = k_quantize_rows(c->kernels, &c->in[0], &qs, c->op->scale, &xq,
                         &par, err);
    if (!st) {
        c->moved += rt_qact_bytes(&qs);
        c->in[0] = xq;
    }
    return st;
}

/* A kernel gets a Linear's outputs LLMC_RT_LINEAR_OUTPUTS at a time, and
 * the tiled kernels run that many as one parallel job. */
LLMC_STATIC_ASSERT(linear_outputs_one_job, LLMC_RT_LINEAR_OUTPUTS <= RT_JOBS_MAX);

/* The outputs take consecutive columns of z (any number of them, but a
 * LINEAR_QUANTIZE op's tiles, quantized first), through the kernel init
 * chose for W, LLMC_RT_LINEAR_OUTPUTS per call. */
llmc_rt_status llmc_rt_exec_Linear(rt_op_call *c, llmc_rt_error *err)
{
    int64_t col0 = 0;
    bool quantizes = c->op->kind & LINEAR_QUANTIZE;
    uint32_t n_out = c->op->outputs.len - quantizes;
    llmc_rt_status qst = quantizes ? quantize_x(c, err) : LLMC_RT_OK;
    if (qst)
        return qst;
    for (uint32_t j0 = 0; j0 < n_out; j0 += LLMC_RT_LINEAR_OUTPUTS) {
        rt_view ys[LLMC_RT_LINEAR_OUTPUTS];
        uint32_t n = 0;
        uint32_t end = n_out - j0 < LLMC_RT_LINEAR_OUTPUTS ? n_out : j0 + LLMC_RT_LINEAR_OUTPUTS;
        int64_t cols = 0;
        for (uint32_t j = j0; j < end; j++) {
            uint32_t t = prep_operand(rt_state(c->s)->prepared, c->op->outputs, j);
            llmc_rt_status st = rt_call_view(c, t, &ys[n], err);
            if (st)
                return rt_prefix(err, st, "output %u: ", RT_N(j), NULL);
            cols += ys[n].rank ? ys[n].dims[ys[n].rank - 1] : 0;
            c->moved += rt_view_bytes(&ys[n]);
            /* an empty output has no rows (then none has) or no columns */
            n += k_count(&ys[n]) != 0;
        }
        llmc_rt_status st = n ? c->op->linear(c, col0, ys, n, err) : LLMC_RT_OK;
        if (st)
            return j0 ? rt_prefix(err, st, "outputs %u..: ", RT_N(j0), NULL) : st;
        col0 += cols;
    }
    return LLMC_RT_OK;
}

/* After output j of n_ys failed: its index when there are several. */
static llmc_rt_status output_failed(llmc_rt_error *err, llmc_rt_status st, uint32_t j,
                                    uint32_t n_ys)
{
    return n_ys > 1 ? rt_prefix(err, st, "output %u: ", RT_N(j), NULL) : st;
}

llmc_rt_status llmc_rt_linear_Dense(rt_op_call *c, int64_t col0, rt_view *ys, uint32_t n_ys,
                                    llmc_rt_error *err)
{
    rt_parallel par = rt_session_parallel(c->s);
    for (uint32_t j = 0; j < n_ys; col0 += ys[j].dims[ys[j].rank - 1], j++) {
        llmc_rt_status st = k_linear(&c->in[0], &c->in[1], linear_bias(c), linear_residual(c),
                                     col0, &ys[j], &par, err);
        if (st)
            return output_failed(err, st, j, n_ys);
    }
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_linear_FWeightTiles(rt_op_call *c, int64_t col0, rt_view *ys,
                                           uint32_t n_ys, llmc_rt_error *err)
{
    rt_parallel par = rt_session_parallel(c->s);
    return k_linear_tiles(c->kernels, &c->in[0], c->in[1].data, &c->op->w.f,
                          linear_bias(c), linear_residual(c), col0, ys, n_ys, &par, err);
}

/* The shape of x's activation tiles (input 0's view) at this call's rows. */
static llmc_rt_status qact_shape(const rt_op_call *c, rt_qact_shape *qx, llmc_rt_error *err)
{
    const rt_view *x = &c->in[0];
    if (!rt_qact_shape_of(&rt_state(c->s)->prepared->tensors[x_tiles_tensor(c)].format, x->rank, x->dims, qx))
        return rt_fail(err, LLMC_RT_E_EXEC, "x has an invalid packed format", NULL, NULL);
    return LLMC_RT_OK;
}

/* The quantized Linear of activation tiles qx on the target's int8 kernel. */
static llmc_rt_status qlinear_int8(rt_op_call *c, const rt_qact_shape *qx, int64_t col0,
                                   rt_view *ys, uint32_t n_ys, llmc_rt_error *err)
{
    const llmc_rt_plan *plan = rt_state(c->s)->plan;
    rt_parallel par = rt_session_parallel(c->s);
    return k_qlinear(c->kernels, &c->in[0], qx, c->in[1].data, &c->op->w.q, linear_bias(c),
                     linear_residual(c), col0, ys, n_ys, rt_plan_of(plan)->gemm_min_rows,
                     rt_plan_of(plan)->gemv_prefetch, &par, err);
}

llmc_rt_status llmc_rt_linear_QWeightTiles(rt_op_call *c, int64_t col0, rt_view *ys,
                                           uint32_t n_ys, llmc_rt_error *err)
{
    rt_qact_shape qx;
    llmc_rt_status st = qact_shape(c, &qx, err);
    return st ? st : qlinear_int8(c, &qx, col0, ys, n_ys, err);
}

/* Prefill (gemm_min_rows rows or more) on weight blocks dequantized to
 * fp32 panels when the target's fp32 tiles hold W's; the int8 kernel
 * otherwise. */
llmc_rt_status llmc_rt_linear_QWeightTilesF32Dequant(rt_op_call *c, int64_t col0, rt_view *ys,
                                                     uint32_t n_ys, llmc_rt_error *err)
{
    const llmc_rt_plan *plan = rt_state(c->s)->plan;
    rt_qact_shape qx;
    llmc_rt_status status = qact_shape(c, &qx, err);
    if (status)
        return status;
    if (qx.m < rt_plan_of(plan)->gemm_min_rows || !k_qlinear_dequant_runs(c->kernels, &c->op->w.q))
        return qlinear_int8(c, &qx, col0, ys, n_ys, err);
    rt_parallel par = rt_session_parallel(c->s);
    for (uint32_t j = 0; j < n_ys; col0 += ys[j].dims[ys[j].rank - 1], j++) {
        status = k_qlinear_dequant(c->kernels, &c->in[0], &qx, c->in[1].data, &c->op->w.q,
                                   linear_bias(c), linear_residual(c), col0, &ys[j], &par, err);
        if (status)
            return output_failed(err, status, j, n_ys);
    }
    return LLMC_RT_OK;
}

/* x float32 [..., K] -> its QActTiles (bytes of the tiles, scales and
 * sums counted); scale > 0: the op's static per-tensor scale. */
llmc_rt_status llmc_rt_exec_QuantizeRows(rt_op_call *c, llmc_rt_error *err)
{
    uint32_t t = prep_operand(rt_state(c->s)->prepared, c->op->outputs, 0);
    const rt_tensor_format *f = &rt_state(c->s)->prepared->tensors[t].format;
    rt_view *xq = &c->out[0];
    rt_qact_shape qs;
    if (!rt_qact_shape_of(f, xq->rank, xq->dims, &qs))
        return rt_fail(err, LLMC_RT_E_EXEC, "output has an invalid QActTiles format", NULL, NULL);
    rt_parallel par = rt_session_parallel(c->s);
    llmc_rt_status st = k_quantize_rows(c->kernels, &c->in[0], &qs, c->op->scale, xq, &par,
                                        err);
    if (!st)
        c->moved += rt_qact_bytes(&qs);
    return st;
}

/* x, W[, hot], y_0.. -> z_0..: the outliers' exact part added (q_shadow.c). */
llmc_rt_status llmc_rt_exec_ShadowLinear(rt_op_call *c, llmc_rt_error *err)
{
    rt_parallel par = rt_session_parallel(c->s);
    const rt_view *hot = c->op->kind ? &c->in[2] : NULL;
    return k_shadow_linear(&c->in[0], c->in[1].data, &c->op->w.q, c->op->scale, hot,
                           &c->in[hot ? 3 : 2], c->out, c->op->outputs.len, &par, err);
}

/* ---- Attention and its fused KV cache ------------------------------------ */

/* Takes pool chunks for the positions [0, end) of a cache that lack one;
 * end = P + S <= the session's context (check_bounds), so 32 bits hold it.
 * A windowed cache holds `ring` chunks: chunk c >= ring reuses the slot of
 * chunk c - ring, whose positions no query sees any more. */
static llmc_rt_status take_chunks(llmc_rt_session *s, uint32_t *slots, int64_t end, uint32_t ring,
                                  llmc_rt_error *err)
{
    int64_t need = rt_kv_chunks((uint32_t)end, rt_plan_of(rt_state(s)->plan)->kv_chunk);
    if (need > rt_state(s)->chunks_per_cache)
        return rt_fail(err, LLMC_RT_E_BOUNDS, "%d positions exceed the session's %u chunks",
                       RT_N(end, rt_state(s)->chunks_per_cache), NULL);
    for (int64_t c = 0; c < need; c++) {
        if (slots[c] != NO_SLOT)
            continue;
        if (c >= ring) {
            slots[c] = slots[c - ring];
            continue;
        }
        if (rt_state(s)->pool_used == rt_state(s)->pool_chunks)
            return rt_fail(err, LLMC_RT_E_MEMORY, "KV pool exhausted (%u chunks)",
                           RT_N(rt_state(s)->pool_chunks), NULL);
        slots[c] = rt_state(s)->pool_used++;
    }
    rt_state(s)->stats.kv_chunks_used = rt_state(s)->pool_used;
    return LLMC_RT_OK;
}

/* The next n rows of each [1, S, width] view after its `rows` rows (one
 * loop over the four views: a Cortex-M image keeps one copy of it). */
static void next_rows(rt_view *views, int64_t rows, int64_t n)
{
    for (int k = 0; k < 4; k++) {
        views[k].data = (float *)views[k].data + rows * views[k].dims[2];
        views[k].dims[1] = n;
    }
}

/* Positions [P, P + S) in calls whose keys fit the cache's ring: a call
 * from P may append up to the end of chunk lo(P) / chunk + ring - 1, lo(P)
 * = P - window + 1 its first query's oldest key (all of S without a ring).
 * P + S <= the session's context and the ring's chunks hold less than it,
 * so 32 bits do (no libgcc 64-bit division on a Cortex-M). */
static uint32_t piece_rows(const rt_prep_op *op, uint32_t ring, uint32_t chunks, uint32_t chunk,
                           uint32_t P, uint32_t S)
{
    if (ring >= chunks)
        return S;
    uint32_t lo = P >= op->window ? P - op->window + 1 : 0;
    uint32_t n = (lo / chunk + ring) * chunk - P; /* >= 2: ring > window / chunk + 1 */
    return n < S ? n : S;
}

/* Rows [0, P) must be in the op's cache; appends rows P .. P+S-1. */
llmc_rt_status llmc_rt_exec_Attention(rt_op_call *c, llmc_rt_error *err)
{
    llmc_rt_session *s = c->s;
    const rt_prep_op *op = c->op;
    const rt_plan *plan = rt_plan_of(rt_state(s)->plan);
    int64_t S = c->S, P = c->P;
    uint32_t *table = rt_state(s)->caches + (uint64_t)op->cache * (1u + rt_state(s)->chunks_per_cache);
    if (op->cache >= plan->n_caches || P > table[0])
        return rt_fail(err, LLMC_RT_E_EXEC, "cache %u holds %u positions; the call starts at "
                       "P=%d", RT_N(op->cache, op->cache < plan->n_caches ? table[0] : 0, P),
                       NULL);
    uint32_t ring = rt_kv_ring(op->window, plan->kv_chunk, rt_state(s)->chunks_per_cache);
    rt_kv_cache cache = {rt_state(s)->kv_pool, table + 1, plan->kv_slot_bytes, plan->kv_chunk,
                         plan->kv_cache_dtype};
    /* q, k, v, [cos, sin], [q_norm, k_norm] (the verifier proved the count) */
    bool rope = op->rotary_dim > 0, norms = op->inputs.len == (rope ? 7u : 5u);
    const rt_view *in = c->in, *q_norm = norms ? &in[op->inputs.len - 2] : NULL;
    rt_attention_attrs a = {op->heads, op->kv_heads, op->head_dim, op->rotary_dim, op->scale,
                            q_norm, q_norm ? q_norm + 1 : NULL, op->epsilon, op->window, op->softcap};
    rt_parallel par = rt_session_parallel(s);
    llmc_rt_status st;
    rt_view qkvo[4] = {in[0], in[1], in[2], c->out[0]};
    int64_t done = 0, n = 0;
    do {
        int64_t last = n;
        n = piece_rows(op, ring, rt_state(s)->chunks_per_cache, plan->kv_chunk,
                       (uint32_t)(P + done), (uint32_t)(S - done));
        next_rows(qkvo, last, n);
        st = take_chunks(s, table + 1, P + done + n, ring, err);
        if (!st)
            st = k_attention_loops(c->kernels, op->kv_cache, &a, &qkvo[0], &qkvo[1], &qkvo[2],
                                   rope ? &in[3] : NULL, rope ? &in[4] : NULL, &cache, P + done,
                                   &qkvo[3], &par, err);
        done += n;
    } while (!st && done < S);
    if (st)
        return st;
    table[0] = (uint32_t)(P + S);
    c->moved += (uint64_t)S * rt_kv_position_bytes(cache.dtype, a.kv_heads, a.head_dim);
    return LLMC_RT_OK;
}
