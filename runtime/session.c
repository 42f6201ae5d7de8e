/* Sessions: the op interpreter (run) and the LLM path (feed).  They read
 * only the prepared tables llmc_rt_session_init decoded (session_prepare.c),
 * never the plan's FlatBuffer. */
#include <string.h>

#include "kernels/kernel_table.h"
#include "rt_msg.h"
#include "session_prepared.h"

/* The kernels' view of the session's parallel-for. */
static rt_parallel session_parallel(const llmc_rt_session *s)
{
    rt_parallel par = {s->parallel, s->parallel_pool};
    return par;
}

/* ---- tensor views ------------------------------------------------------ */

static llmc_rt_status view_of(const llmc_rt_session *s, uint32_t t, int64_t S, int64_t P,
                              rt_view *v, llmc_rt_error *err)
{
    const rt_prep_tensor *d = &s->prepared->tensors[t];
    uint64_t bytes;
    memset(v, 0, sizeof *v);
    v->dtype = d->format.dtype;
    v->rank = d->rank;
    llmc_rt_status st = rt_dims_at(&s->prepared->affines[d->dims], d->rank, &d->format, S, P,
                                   v->dims, &bytes, LLMC_RT_E_EXEC, err);
    if (!st && d->kind == KIND_ARENA && bytes > d->max_bytes)
        st = rt_fail(err, LLMC_RT_E_EXEC, "needs %u bytes at S=%d P=%d; %u reserved",
                     RT_N((int64_t)bytes, S, P, (int64_t)d->max_bytes), NULL);
    if (st)
        return rt_prefix(err, st, "tensor %u '%s': ", RT_N(t), RT_S(d->name));
    v->data = d->data;
    return LLMC_RT_OK;
}

static uint64_t view_bytes(const rt_view *v)
{
    return (uint64_t)k_count(v) * k_dtype_size(v->dtype);
}

/* ---- the interpreter --------------------------------------------------- */

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

static llmc_rt_status exec_copy(const llmc_rt_session *s, const rt_prep_op *op, int64_t S,
                                int64_t P, uint64_t *moved, llmc_rt_error *err)
{
    const rt_prepared *pr = s->prepared;
    for (uint32_t i = 0; i < op->regions.len; i++) {
        const rt_prep_region *d = &pr->regions[op->regions.first + i];
        rt_region g;
        rt_view src, dst;
        llmc_rt_status st = view_of(s, d->src, S, P, &src, err);
        if (!st)
            st = view_of(s, d->dst, S, P, &dst, err);
        if (!st)
            st = region_of(d, &pr->affines[d->affines], dst.rank, src.rank, S, P, &g, err);
        if (!st)
            st = k_copy_region(&g, &src, &dst, err);
        if (st)
            return rt_prefix(err, st, "region %u: ", RT_N(i), NULL);
        *moved += region_bytes(&g, &dst);
    }
    return LLMC_RT_OK;
}

static llmc_rt_status exec_symbols(const rt_prepared *pr, const rt_prep_op *op, int64_t S,
                                   int64_t P, rt_view *y, llmc_rt_error *err)
{
    const rt_affine *values = &pr->affines[op->values.first];
    if (k_count(y) != op->values.len)
        return rt_fail(err, LLMC_RT_E_EXEC, "%u values for %d output elements",
                       RT_N(op->values.len, k_count(y)), NULL);
    for (uint32_t k = 0; k < op->values.len; k++)
        if (!rt_affine_value(&values[k], S, P, (int64_t *)y->data + k))
            return rt_fail(err, LLMC_RT_E_EXEC, "value %u overflows", RT_N(k), NULL);
    return LLMC_RT_OK;
}

/* LayerNorm writes y and, with 3 outputs, Mean and InvStdDev. */
static llmc_rt_status exec_layernorm(const rt_prep_op *op, const rt_view *in, rt_view *out,
                                     llmc_rt_error *err)
{
    bool with_stats = op->outputs.len == 3;
    rt_layernorm_stats stats = {with_stats ? &out[1] : NULL, with_stats ? &out[2] : NULL};
    return k_layernorm(&in[0], &in[1], op->inputs.len > 2 ? &in[2] : NULL, op->axis,
                       op->epsilon, &out[0], &stats, err);
}

/* The prepared entry of the op's input k. */
static const rt_prep_tensor *input_tensor(const rt_prepared *pr, const rt_prep_op *op,
                                          uint32_t k)
{
    return &pr->tensors[prep_operand(pr, op->inputs, k)];
}

/* Linear's operands as the kernels see them: W's layout and packed shape
 * (prepared), and the shape of x (input 0) at this call's rows. */
typedef struct {
    int layout;
    const rt_qweight_shape *qw;
    const rt_ftile_shape *fw;
    rt_qact_shape qx;
} linear_operands;

static llmc_rt_status linear_operands_of(const rt_prepared *pr, const rt_prep_op *op,
                                         const rt_view *x, linear_operands *lo,
                                         llmc_rt_error *err)
{
    lo->layout = input_tensor(pr, op, 1)->format.layout;
    lo->qw = &op->w.q;
    lo->fw = &op->w.f;
    if (lo->layout == LAYOUT_QWEIGHT &&
        !rt_qact_shape_of(&input_tensor(pr, op, 0)->format, x->rank, x->dims, &lo->qx))
        return rt_fail(err, LLMC_RT_E_EXEC, "x has an invalid packed format", NULL, NULL);
    return LLMC_RT_OK;
}

/* One output's columns [col0, col0 + y's last dim) of z, by W's layout. */
static llmc_rt_status linear_columns(const llmc_rt_session *s, const linear_operands *lo,
                                     const rt_view *in, const rt_view *bias,
                                     const rt_view *residual, int64_t col0, rt_view *y,
                                     llmc_rt_error *err)
{
    rt_parallel par = session_parallel(s);
    const rt_kernels *kt = s->plan->kernels;
    switch (lo->layout) {
    case LAYOUT_QWEIGHT:
        if (s->plan->prefill_kernel == PREFILL_F32_DEQUANT && lo->qx.m >= s->plan->gemm_min_rows &&
            k_qlinear_dequant_runs(kt, lo->qw))
            return k_qlinear_dequant(kt, &in[0], &lo->qx, in[1].data, lo->qw, bias, residual,
                                     col0, y, &par, err);
        return k_qlinear(kt, &in[0], &lo->qx, in[1].data, lo->qw, bias, residual, col0, y,
                         s->plan->gemm_min_rows, &par, err);
    case LAYOUT_FWEIGHT:
        return k_linear_tiles(kt, &in[0], in[1].data, lo->fw, bias, residual, col0, y, &par, err);
    default:
        return k_linear(&in[0], &in[1], bias, residual, col0, y, &par, err);
    }
}

/* Linear: inputs x, W, then bias if kind & 1, residual if kind & 2; each
 * output takes the next columns of z, viewed one at a time (any number);
 * adds the bytes written to *moved. */
static llmc_rt_status exec_linear(const llmc_rt_session *s, const rt_prep_op *op,
                                  const rt_view *in, int64_t S, int64_t P, uint64_t *moved,
                                  llmc_rt_error *err)
{
    int next = 2; /* prepared: kind matches the inputs */
    const rt_view *bias = op->kind & 1 ? &in[next++] : NULL;
    const rt_view *residual = op->kind & 2 ? &in[next++] : NULL;
    linear_operands lo;
    llmc_rt_status st = linear_operands_of(s->prepared, op, &in[0], &lo, err);
    int64_t col0 = 0;
    for (uint32_t j = 0; !st && j < op->outputs.len; j++) {
        rt_view y;
        st = view_of(s, prep_operand(s->prepared, op->outputs, j), S, P, &y, err);
        if (!st && k_count(&y) != 0)
            st = linear_columns(s, &lo, in, bias, residual, col0, &y, err);
        if (st)
            return rt_prefix(err, st, "output %u: ", RT_N(j), NULL);
        col0 += y.rank ? y.dims[y.rank - 1] : 0;
        *moved += view_bytes(&y);
    }
    return st;
}

/* QuantizeRows: x float32 [..., K] -> its QActTiles (bytes of the tiles,
 * scales and sums added to *moved). */
static llmc_rt_status exec_quantize_rows(const llmc_rt_session *s, const rt_prep_op *op,
                                         const rt_view *x, rt_view *xq, uint64_t *moved,
                                         llmc_rt_error *err)
{
    uint32_t t = prep_operand(s->prepared, op->outputs, 0);
    const rt_tensor_format *f = &s->prepared->tensors[t].format;
    rt_qact_shape qs;
    if (!rt_qact_shape_of(f, xq->rank, xq->dims, &qs))
        return rt_fail(err, LLMC_RT_E_EXEC, "output has an invalid QActTiles format", NULL, NULL);
    rt_parallel par = session_parallel(s);
    llmc_rt_status st = k_quantize_rows(s->plan->kernels, x, &qs, xq, &par, err);
    if (!st)
        *moved += rt_qact_bytes(&qs);
    return st;
}

/* Gather: rows of a packed weight (an embedding table) dequantized, else
 * the dense take. */
static llmc_rt_status exec_gather(const llmc_rt_session *s, const rt_prep_op *op,
                                  const rt_view *in, rt_view *y, llmc_rt_error *err)
{
    const rt_tensor_format *f = &input_tensor(s->prepared, op, 0)->format;
    return f->layout == LAYOUT_DENSE ? k_gather(&in[0], &in[1], op->axis, y, err)
                                     : k_gather_rows(f, &in[0], &in[1], y, err);
}

/* Runs one op whose inputs (at most MAX_OP_INPUTS) and outputs (at most
 * MAX_OP_OUTPUTS outside Copy and Linear) are viewed; most ops have the one
 * output out[0]. */
static llmc_rt_status dispatch(const rt_kernels *kt, const rt_prepared *pr, const rt_prep_op *op,
                               const rt_view *in, rt_view *out, int64_t S, int64_t P,
                               const rt_parallel *par, llmc_rt_error *err)
{
    rt_view *y = &out[0];
    switch (op->code) {
    case OP_RESHAPE: return k_reshape(&in[0], y, err);
    case OP_UNARY: return k_unary(op->kind, &in[0], y, err);
    case OP_BINARY: return k_binary_kernels(kt, op->kind, &in[0], &in[1], y, par, err);
    case OP_WHERE: return k_where(&in[0], &in[1], &in[2], y, err);
    case OP_CAST: return k_cast(&in[0], y, err);
    case OP_MATMUL: return k_matmul(&in[0], &in[1], y, par, err);
    case OP_REDUCE: return k_reduce(op->kind, &in[0], op->axes, op->n_axes, op->keepdims, y, err);
    case OP_SOFTMAX: return k_softmax(&in[0], op->axis, y, err);
    case OP_LAYERNORM: return exec_layernorm(op, in, out, err);
    case OP_FILL: return k_fill(op->value_bits, y, err);
    case OP_RANGE: return k_range(&in[0], &in[1], &in[2], y, err);
    case OP_SYMBOLS: return exec_symbols(pr, op, S, P, y, err);
    case OP_RMSNORM: return k_rmsnorm(&in[0], &in[1], op->epsilon, y, err);
    case OP_ROPE: return k_rope(&in[0], &in[1], &in[2], op->rotary_dim, P, y, err);
    case OP_TRILU:
        return k_trilu(&in[0], op->inputs.len > 1 ? &in[1] : NULL, op->kind == 1, y, err);
    case OP_SCATTER_ND: return k_scatter_nd(op->kind, &in[0], &in[1], &in[2], y, err);
    case OP_CUMSUM: return k_cumsum(&in[0], op->axis, op->kind, y, err);
    default:
        return rt_fail(err, LLMC_RT_E_EXEC, "opcode %d unknown", RT_N(op->code), NULL);
    }
}

/* Views of the tensors listed in `tensors` (an op's inputs or outputs). */
static llmc_rt_status view_all(const llmc_rt_session *s, rt_prep_list tensors, int64_t S,
                               int64_t P, rt_view *views, llmc_rt_error *err)
{
    for (uint32_t k = 0; k < tensors.len; k++) {
        llmc_rt_status st = view_of(s, prep_operand(s->prepared, tensors, k), S, P, &views[k],
                                    err);
        if (st)
            return st;
    }
    return LLMC_RT_OK;
}

/* ---- fused KV caches --------------------------------------------------- */

/* Takes pool chunks for the positions [0, end) of a cache that lack one. */
static llmc_rt_status take_chunks(llmc_rt_session *s, uint32_t *slots, int64_t end,
                                  llmc_rt_error *err)
{
    int64_t need = (end + s->plan->kv_chunk - 1) / s->plan->kv_chunk;
    if (need > s->chunks_per_cache)
        return rt_fail(err, LLMC_RT_E_BOUNDS, "%d positions exceed the session's %u chunks",
                       RT_N(end, s->chunks_per_cache), NULL);
    for (int64_t c = 0; c < need; c++) {
        if (slots[c] != NO_SLOT)
            continue;
        if (s->pool_used == s->pool_chunks)
            return rt_fail(err, LLMC_RT_E_MEMORY, "KV pool exhausted (%u chunks)",
                           RT_N(s->pool_chunks), NULL);
        slots[c] = s->pool_used++;
    }
    s->stats.kv_chunks_used = s->pool_used;
    return LLMC_RT_OK;
}

/* Attention: rows [0, P) must be in the op's cache; appends rows P .. P+S-1. */
static llmc_rt_status exec_attention(llmc_rt_session *s, const rt_prep_op *op,
                                     const rt_view *in, rt_view *o, int64_t S, int64_t P,
                                     uint64_t *moved, llmc_rt_error *err)
{
    uint32_t *table = s->caches + (uint64_t)op->cache * (1u + s->chunks_per_cache);
    if (op->cache >= s->plan->n_caches || P > table[0])
        return rt_fail(err, LLMC_RT_E_EXEC, "cache %u holds %u positions; the call starts at "
                       "P=%d", RT_N(op->cache, op->cache < s->plan->n_caches ? table[0] : 0, P),
                       NULL);
    llmc_rt_status st = take_chunks(s, table + 1, P + S, err);
    if (st)
        return st;
    rt_kv_cache cache = {s->kv_pool, table + 1, s->plan->kv_slot_bytes, s->plan->kv_chunk,
                         s->plan->kv_cache_dtype};
    rt_attention_attrs a = {op->heads, op->kv_heads, op->head_dim, op->rotary_dim, op->scale};
    bool rope = op->rotary_dim > 0 && op->inputs.len == 5;
    rt_parallel par = session_parallel(s);
    st = k_attention_kernels(s->plan->kernels, &a, &in[0], &in[1], &in[2], rope ? &in[3] : NULL,
                             rope ? &in[4] : NULL, &cache, P, o, &par, err);
    if (st)
        return st;
    table[0] = (uint32_t)(P + S);
    *moved += (uint64_t)S * rt_kv_position_bytes(cache.dtype, a.kv_heads, a.head_dim);
    return LLMC_RT_OK;
}

/* True when no output has an element.  Such an op has nothing to compute,
 * and its kernel must not run: the other dims of an empty tensor may be as
 * large as 2^48, and a kernel's outer loops would walk them for hours. */
static int outputs_empty(const rt_view *out, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (k_count(&out[k]) != 0)
            return 0;
    return 1;
}

/* Runs one op (its operand counts were checked at init); adds the bytes
 * it wrote to *moved. */
static llmc_rt_status exec_op_body(llmc_rt_session *s, const rt_prep_op *op, int64_t S,
                                   int64_t P, uint64_t *moved, llmc_rt_error *err)
{
    rt_view in[MAX_OP_INPUTS], out[MAX_OP_OUTPUTS];
    if (op->code == OP_COPY)
        return exec_copy(s, op, S, P, moved, err);
    llmc_rt_status st = view_all(s, op->inputs, S, P, in, err);
    if (!st && op->code == OP_LINEAR)
        return exec_linear(s, op, in, S, P, moved, err);
    if (!st)
        st = view_all(s, op->outputs, S, P, out, err);
    if (!st && op->code == OP_QUANTIZE_ROWS)
        return outputs_empty(out, 1) ? LLMC_RT_OK
                                     : exec_quantize_rows(s, op, &in[0], &out[0], moved, err);
    if (!st && op->code == OP_ATTENTION)
        st = exec_attention(s, op, in, &out[0], S, P, moved, err);
    else if (!st && op->code == OP_GATHER && !outputs_empty(out, 1))
        st = exec_gather(s, op, in, &out[0], err);
    else if (!st && !outputs_empty(out, op->outputs.len)) {
        rt_parallel par = session_parallel(s);
        st = dispatch(s->plan->kernels, s->prepared, op, in, out, S, P, &par, err);
    }
    for (uint32_t k = 0; !st && k < op->outputs.len; k++)
        *moved += view_bytes(&out[k]);
    return st;
}

/* Every op in plan order, each between the observer's two calls. */
static llmc_rt_status run_ops(llmc_rt_session *s, int64_t S, int64_t P, uint64_t *moved,
                              llmc_rt_error *err)
{
    for (uint32_t i = 0; i < s->plan->n_ops; i++) {
        const rt_prep_op *op = &s->prepared->ops[i];
        if (s->observer)
            s->observer(s->observer_ctx, i, 0);
        llmc_rt_status st = exec_op_body(s, op, S, P, moved, err);
        if (s->observer)
            s->observer(s->observer_ctx, i, 1);
        if (st)
            return rt_prefix(err, st, "op %u (%s '%s'): ", RT_N(i),
                             RT_S(rt_op_code_name(op->code), op->name));
    }
    return LLMC_RT_OK;
}

/* ---- bounds ------------------------------------------------------------ */

static llmc_rt_status check_bounds(const llmc_rt_session *s, uint32_t S, uint32_t P,
                                   bool allow_static_zero, llmc_rt_error *err)
{
    if ((S == 0 && !(allow_static_zero && s->prepared->is_static)) ||
        (uint64_t)S + P > s->context)
        return rt_fail(err, LLMC_RT_E_BOUNDS, "S=%u P=%u outside 1 <= S, S + P <= "
                       "context %u", RT_N(S, P, s->context), NULL);
    return LLMC_RT_OK;
}

/* Records what a run moved. */
static void count_run(llmc_rt_session *s, uint64_t moved)
{
    s->stats.bytes_last = moved;
    s->stats.bytes_total += moved;
    s->stats.runs++;
}

/* ---- generic run ------------------------------------------------------- */

static llmc_rt_status check_session(const llmc_rt_session *s, llmc_rt_error *err)
{
    if (!s || !s->plan || !s->arena || !s->prepared)
        return rt_fail(err, LLMC_RT_E_ARG, "session not initialized", NULL, NULL);
    return LLMC_RT_OK;
}

static llmc_rt_status place_input(const llmc_rt_session *s, uint32_t i,
                                  const llmc_rt_tensor *given, uint32_t S, uint32_t P,
                                  uint64_t *moved, llmc_rt_error *err)
{
    rt_view v;
    llmc_rt_status st = view_of(s, s->prepared->inputs[i].tensor, S, P, &v, err);
    if (st)
        return st;
    if (given->dtype != v.dtype || given->rank != v.rank ||
        memcmp(given->dims, v.dims, (size_t)v.rank * sizeof v.dims[0]) != 0) {
        char want[96], got[96];
        return rt_fail(err, LLMC_RT_E_ARG, "input %u: expected dtype %d dims %s at S=%u P=%u, "
                       "got dtype %d dims %s", RT_N(i, v.dtype, S, P, given->dtype),
                       RT_S(k_dims_text(&v, want, sizeof want),
                            k_dims_text(given, got, sizeof got)));
    }
    if (view_bytes(&v) && !given->data)
        return rt_fail(err, LLMC_RT_E_ARG, "input %u: data is NULL", RT_N(i), NULL);
    if (view_bytes(&v) && given->data != v.data)
        memmove(v.data, given->data, (size_t)view_bytes(&v));
    *moved += view_bytes(&v);
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_session_run(llmc_rt_session *s, uint32_t S, uint32_t P,
                                   const llmc_rt_tensor *inputs, llmc_rt_error *err)
{
    llmc_rt_status st = check_session(s, err);
    if (st)
        return st;
    if (!inputs && s->plan->n_inputs)
        return rt_fail(err, LLMC_RT_E_ARG, "inputs is NULL", NULL, NULL);
    st = check_bounds(s, S, P, true, err);
    uint64_t moved = 0;
    for (uint32_t i = 0; !st && i < s->plan->n_inputs; i++)
        st = place_input(s, i, &inputs[i], S, P, &moved, err);
    if (!st)
        st = run_ops(s, S, P, &moved, err);
    count_run(s, moved);
    s->last_S = st ? NO_RUN : S;
    s->last_P = P;
    return st;
}

llmc_rt_status llmc_rt_session_output(const llmc_rt_session *s, uint32_t index,
                                      llmc_rt_tensor *out, llmc_rt_error *err)
{
    llmc_rt_status st = check_session(s, err);
    if (st)
        return st;
    if (!out || index >= s->plan->n_outputs || s->last_S == NO_RUN)
        return rt_fail(err, LLMC_RT_E_ARG, "output %u of %u: no such output, or no "
                       "successful run yet", RT_N(index, s->plan->n_outputs), NULL);
    return view_of(s, s->prepared->outputs[index].tensor, s->last_S, s->last_P, out, err);
}

/* ---- the LLM path ------------------------------------------------------ */

/* A [b, h, rows, d] view matching the slot's b*h and d with `rows` rows. */
static llmc_rt_status check_kv_view(const rt_view *v, const kv_slot *slot, int64_t rows,
                                    llmc_rt_error *err)
{
    if (v->dims[0] * v->dims[1] != slot->heads || v->dims[3] != slot->row_len ||
        v->dims[2] != rows || rows > slot->rows) {
        char got[96];
        return rt_fail(err, LLMC_RT_E_EXEC, "KV tensor has dims %s; the KV store expects "
                       "%d heads of %d rows (of at most %d) x %d",
                       RT_N(slot->heads, rows, slot->rows, slot->row_len),
                       RT_S(k_dims_text(v, got, sizeof got)));
    }
    return LLMC_RT_OK;
}

/* Copies `rows` rows per head between a tensor of exactly `rows` rows and a
 * slot of max_context rows: the row strides differ, so per head. */
static void kv_copy(const kv_slot *slot, float *tensor, int64_t rows, bool to_slot)
{
    size_t bytes = (size_t)(rows * slot->row_len) * sizeof(float);
    for (int64_t h = 0; h < slot->heads; h++) {
        float *in_slot = slot->data + h * slot->rows * slot->row_len;
        float *in_tensor = tensor + h * rows * slot->row_len;
        if (to_slot)
            memcpy(in_slot, in_tensor, bytes);
        else
            memcpy(in_tensor, in_slot, bytes);
    }
}

static llmc_rt_status check_count(const rt_view *v, int64_t want, llmc_rt_error *err)
{
    if (k_count(v) == want)
        return LLMC_RT_OK;
    return rt_fail(err, LLMC_RT_E_EXEC, "has %d elements; expected %d",
                   RT_N(k_count(v), want), NULL);
}

/* Fills one input of the LLM path; every role writes the whole view. */
static llmc_rt_status fill_input(const llmc_rt_session *s, const rt_prep_io *io,
                                 const int64_t *tokens, int64_t S, int64_t P,
                                 uint64_t *moved, llmc_rt_error *err)
{
    rt_view v;
    llmc_rt_status st = view_of(s, io->tensor, S, P, &v, err);
    if (st)
        return st;
    *moved += view_bytes(&v);
    int64_t *ints = v.data;
    switch (io->role) {
    case ROLE_INPUT_IDS:
        st = check_count(&v, S, err);
        if (!st)
            memcpy(ints, tokens, (size_t)S * sizeof *ints);
        return st;
    case ROLE_ATTENTION_MASK:
        st = check_count(&v, P + S, err);
        for (int64_t i = 0; !st && i < P + S; i++)
            ints[i] = 1;
        return st;
    case ROLE_POSITION_IDS:
        st = check_count(&v, S, err);
        for (int64_t i = 0; !st && i < S; i++)
            ints[i] = P + i;
        return st;
    case ROLE_PAST_KEY: /* prepared: every such input has its slot */
    case ROLE_PAST_VALUE:
        st = check_kv_view(&v, &io->slot, P, err);
        if (!st)
            kv_copy(&io->slot, v.data, P, false);
        return st;
    default:
        return rt_fail(err, LLMC_RT_E_ARG, "a Generic input cannot be fed; use "
                       "llmc_rt_session_run", NULL, NULL);
    }
}

static llmc_rt_status take_output(const llmc_rt_session *s, const rt_prep_io *io, int64_t S,
                                  int64_t P, float *logits, uint64_t *moved, llmc_rt_error *err)
{
    rt_view v;
    if (io->role != ROLE_LOGITS && io->role != ROLE_PRESENT_KEY &&
        io->role != ROLE_PRESENT_VALUE)
        return LLMC_RT_OK;
    llmc_rt_status st = view_of(s, io->tensor, S, P, &v, err);
    if (st)
        return st;
    if (io->role == ROLE_LOGITS) {
        int64_t vocab = s->plan->vocab_size;
        /* every position's row, or the last one's (llmc compile --logits last) */
        if (v.dims[0] != 1 || (v.dims[1] != S && v.dims[1] != 1) || v.dims[1] < 1 ||
            v.dims[2] != vocab)
            return rt_fail(err, LLMC_RT_E_EXEC, "logits are not [1, %d or 1, vocab_size %d]",
                           RT_N(S, vocab), NULL);
        if (logits)
            memcpy(logits, (const float *)v.data + (v.dims[1] - 1) * vocab,
                   (size_t)vocab * sizeof(float));
        return LLMC_RT_OK;
    }
    if (!io->has_slot)
        return rt_fail(err, LLMC_RT_E_EXEC, "no %s input for layer %d", RT_N(io->layer),
                       RT_S(io->role == ROLE_PRESENT_KEY ? "PastKey" : "PastValue"));
    st = check_kv_view(&v, &io->slot, P + S, err);
    if (!st)
        kv_copy(&io->slot, v.data, P + S, true);
    if (!st)
        *moved += view_bytes(&v);
    return st;
}

static llmc_rt_status feed_inputs(llmc_rt_session *s, const int64_t *tokens, int64_t S,
                                  int64_t P, uint64_t *moved, llmc_rt_error *err)
{
    for (uint32_t i = 0; i < s->plan->n_inputs; i++) {
        llmc_rt_status st = fill_input(s, &s->prepared->inputs[i], tokens, S, P, moved, err);
        if (st)
            return rt_prefix(err, st, "input %u: ", RT_N(i), NULL);
    }
    return LLMC_RT_OK;
}

static llmc_rt_status take_outputs(llmc_rt_session *s, int64_t S, int64_t P, float *logits,
                                   uint64_t *moved, llmc_rt_error *err)
{
    for (uint32_t i = 0; i < s->plan->n_outputs; i++) {
        llmc_rt_status st = take_output(s, &s->prepared->outputs[i], S, P, logits, moved, err);
        if (st)
            return rt_prefix(err, st, "output %u: ", RT_N(i), NULL);
    }
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_session_feed(llmc_rt_session *s, const int64_t *tokens, uint32_t n,
                                    float *logits, llmc_rt_error *err)
{
    llmc_rt_status st = check_session(s, err);
    if (st)
        return st;
    if (!tokens && n)
        return rt_fail(err, LLMC_RT_E_ARG, "tokens is NULL", NULL, NULL);
    if (!s->prepared->can_feed)
        return rt_fail(err, LLMC_RT_E_ARG, "feed needs a plan with InputIds and Logits "
                       "bindings", NULL, NULL);
    st = check_bounds(s, n, s->position, false, err);
    if (st)
        return st;
    int64_t S = n, P = s->position;
    uint64_t moved = 0;
    st = feed_inputs(s, tokens, S, P, &moved, err);
    if (!st)
        st = run_ops(s, S, P, &moved, err);
    if (!st)
        st = take_outputs(s, S, P, logits, &moved, err);
    count_run(s, moved);
    s->last_S = st ? NO_RUN : n;
    s->last_P = s->position;
    if (!st)
        s->position += n;
    return st;
}

/* ---- generation -------------------------------------------------------- */

llmc_rt_status llmc_prefill(llmc_rt_session *s, const int64_t *tokens, uint32_t n,
                            float *logits, llmc_rt_error *err)
{
    return llmc_rt_session_feed(s, tokens, n, logits, err);
}

llmc_rt_status llmc_decode(llmc_rt_session *s, int64_t token, float *logits,
                           llmc_rt_error *err)
{
    return llmc_rt_session_feed(s, &token, 1, logits, err);
}

void llmc_reset(llmc_rt_session *s)
{
    llmc_rt_session_reset(s);
}
