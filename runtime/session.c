/* Sessions: working memory, the op interpreter (run) and the LLM path (feed). */
#include <string.h>

#include "kernels/kernel_table.h"
#include "plan_format.h"
#include "rt_msg.h"
#include "tensor_traits.h"

#define NO_RUN UINT32_MAX /* last_S before the first run */
#define MAX_OP_INPUTS 5   /* the most any op but Copy takes (plan_verify.c op_arity) */

static uint64_t align64(uint64_t v)
{
    return (v + 63) & ~(uint64_t)63;
}

#define NO_SLOT UINT32_MAX /* a cache chunk not taken from the pool yet */

/* The pieces of working memory (see the layout in llmc_rt.h), as byte
 * offsets from the 64-aligned start; false if they do not fit in size_t. */
typedef struct {
    uint64_t kv, table, pool, end;
    uint32_t chunks_per_cache, pool_chunks;
} mem_layout;

static bool layout_for(const llmc_rt_plan *p, uint32_t context, mem_layout *m)
{
    if (context < 1 || context > p->max_context)
        return false;
    uint64_t arena = align64(p->arena_size);
    m->chunks_per_cache = p->n_caches ? (uint32_t)((context - 1ull) / p->kv_chunk + 1) : 0;
    uint64_t pool_chunks = (uint64_t)p->n_caches * m->chunks_per_cache; /* n_caches <= n_ops */
    uint64_t table = 4u * (uint64_t)p->n_caches * (1u + (uint64_t)m->chunks_per_cache);
    if (arena < p->arena_size || pool_chunks > UINT32_MAX || p->kv_bytes > UINT64_MAX / 4 ||
        (p->kv_slot_bytes && pool_chunks > UINT64_MAX / 4 / p->kv_slot_bytes))
        return false;
    m->pool_chunks = (uint32_t)pool_chunks;
    m->kv = arena;
    m->table = m->kv + p->kv_bytes;
    m->pool = m->table + align64(table);
    m->end = m->pool + pool_chunks * p->kv_slot_bytes;
    return m->end >= arena && m->end <= SIZE_MAX - 64;
}

size_t llmc_rt_session_memory_for(const llmc_rt_plan *plan, uint32_t context)
{
    mem_layout m;
    if (!plan || !layout_for(plan, context, &m))
        return SIZE_MAX; /* cannot be provided: init will say so */
    return (size_t)(m.end + 64); /* + 64: aligning the block */
}

size_t llmc_rt_session_memory(const llmc_rt_plan *plan)
{
    return plan ? llmc_rt_session_memory_for(plan, plan->max_context) : 0;
}

/* Empties every fused cache and returns its chunks to the pool. */
static void caches_clear(llmc_rt_session *s)
{
    uint32_t stride = 1 + s->chunks_per_cache;
    for (uint32_t c = 0; c < s->plan->n_caches; c++) {
        s->caches[c * stride] = 0;
        for (uint32_t k = 1; k < stride; k++)
            s->caches[c * stride + k] = NO_SLOT;
    }
    s->pool_used = 0;
    s->stats.kv_chunks_used = 0;
}

llmc_rt_status llmc_rt_session_init_for(llmc_rt_session *s, const llmc_rt_plan *plan,
                                        uint32_t context, void *memory, size_t memory_size,
                                        llmc_rt_error *err)
{
    mem_layout m;
    if (!s || !plan || !plan->base || !memory)
        return rt_fail(err, LLMC_RT_E_ARG, "session, plan and memory must not be NULL", NULL,
                       NULL);
    if (context < 1 || context > plan->max_context)
        return rt_fail(err, LLMC_RT_E_ARG, "context %u outside [1, max_context %u]",
                       RT_N(context, plan->max_context), NULL);
    if (!plan->kernels && !rt_kernels_for_target(plan->target, err)) /* says why */
        return LLMC_RT_E_TARGET;
    size_t need = llmc_rt_session_memory_for(plan, context);
    if (need == SIZE_MAX || memory_size < need || !layout_for(plan, context, &m))
        return rt_fail(err, LLMC_RT_E_MEMORY, "working memory has %u bytes; the plan needs %u",
                       RT_N((int64_t)memory_size, (int64_t)need), NULL);
    uint8_t *base = memory;
    base += (64 - (uintptr_t)base % 64) % 64;
    memset(s, 0, sizeof *s);
    s->plan = plan;
    s->arena = base;
    s->kv = base + m.kv;
    s->caches = (uint32_t *)(void *)(base + m.table);
    s->kv_pool = base + m.pool;
    s->chunks_per_cache = m.chunks_per_cache;
    s->pool_chunks = m.pool_chunks;
    s->context = context;
    s->last_S = NO_RUN;
    s->stats.kv_chunks = m.pool_chunks;
    caches_clear(s);
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_session_init(llmc_rt_session *s, const llmc_rt_plan *plan,
                                    void *memory, size_t memory_size, llmc_rt_error *err)
{
    return llmc_rt_session_init_for(s, plan, plan ? plan->max_context : 0, memory,
                                    memory_size, err);
}

void llmc_rt_session_reset(llmc_rt_session *s)
{
    if (!s || !s->plan || !s->caches)
        return;
    s->position = 0;
    caches_clear(s);
}

void llmc_rt_session_set_parallel(llmc_rt_session *s, llmc_rt_parallel_fn fn, void *pool)
{
    if (!s)
        return;
    s->parallel = fn;
    s->parallel_pool = fn ? pool : NULL;
}

/* The kernels' view of the session's parallel-for. */
static rt_parallel session_parallel(const llmc_rt_session *s)
{
    rt_parallel par = {s->parallel, s->parallel_pool};
    return par;
}

llmc_rt_status llmc_rt_session_stats(const llmc_rt_session *s, llmc_rt_stats *out)
{
    if (!s || !s->plan || !out)
        return LLMC_RT_E_ARG;
    *out = s->stats;
    return LLMC_RT_OK;
}

/* ---- tensor views ------------------------------------------------------ */

static llmc_rt_status view_of(const llmc_rt_session *s, fb_reader *r, uint32_t t, int64_t S,
                              int64_t P, rt_view *v, llmc_rt_error *err)
{
    rt_tensor_desc d;
    rt_segment_desc seg;
    uint64_t bytes;
    llmc_rt_status st = rt_read_tensor(r, s->plan, t, &d, err);
    if (st)
        return st;
    memset(v, 0, sizeof *v);
    v->dtype = d.dtype;
    v->rank = (int)d.dims.len;
    st = rt_eval_dims(r, &d, S, P, v->dims, &bytes, LLMC_RT_E_EXEC, err);
    if (!st && d.kind == KIND_ARENA && bytes > d.max_bytes)
        st = rt_fail(err, LLMC_RT_E_EXEC, "needs %u bytes at S=%d P=%d; %u reserved",
                     RT_N((int64_t)bytes, S, P, (int64_t)d.max_bytes), NULL);
    if (!st && d.kind == KIND_WEIGHT)
        st = rt_read_segment(r, s->plan, d.segment, &seg, err);
    if (st)
        return rt_prefix(err, st, "tensor %u '%s': ", RT_N(t), RT_S(d.name));
    if (d.kind == KIND_ARENA)
        v->data = s->arena + d.arena_offset;
    else /* weights are only read: outputs are verified to be arena tensors */
        v->data = (void *)(s->plan->base + seg.offset);
    return LLMC_RT_OK;
}

static uint64_t view_bytes(const rt_view *v)
{
    return (uint64_t)k_count(v) * k_dtype_size(v->dtype);
}

/* ---- the interpreter --------------------------------------------------- */

static llmc_rt_status eval_affines(const fb_reader *r, fb_vector v, int64_t S, int64_t P,
                                   int64_t *out, const char *what, llmc_rt_error *err)
{
    for (uint32_t k = 0; k < v.len && k < LLMC_RT_MAX_RANK; k++)
        if (!rt_affine_eval(fb_vec_affine(r, v, k), S, P, &out[k]))
            return rt_fail(err, LLMC_RT_E_EXEC, "%s[%d] overflows", RT_N(k), RT_S(what));
    return LLMC_RT_OK;
}

static llmc_rt_status region_of(const fb_reader *r, const rt_region_desc *d, int64_t S,
                                int64_t P, rt_region *g, llmc_rt_error *err)
{
    llmc_rt_status st = eval_affines(r, d->dst_start, S, P, g->dst_start, "dst_start", err);
    if (!st)
        st = eval_affines(r, d->size, S, P, g->size, "size", err);
    if (!st)
        st = eval_affines(r, d->src_start, S, P, g->src_start, "src_start", err);
    for (uint32_t k = 0; k < d->src_axis.len && k < LLMC_RT_MAX_RANK; k++) {
        g->src_axis[k] = (int8_t)r->base[d->src_axis.pos + k];
        g->src_step[k] = fb_i64(r->base + d->src_step.pos + 8u * k);
    }
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

static llmc_rt_status exec_copy(const llmc_rt_session *s, fb_reader *r, const rt_op_desc *op,
                                int64_t S, int64_t P, uint64_t *moved, llmc_rt_error *err)
{
    for (uint32_t i = 0; i < op->regions.len; i++) {
        rt_region_desc d;
        rt_region g;
        rt_view src, dst;
        llmc_rt_status st = rt_read_region(r, op, i, &d, err);
        if (!st)
            st = view_of(s, r, d.src, S, P, &src, err);
        if (!st)
            st = view_of(s, r, d.dst, S, P, &dst, err);
        if (!st)
            st = region_of(r, &d, S, P, &g, err);
        if (!st)
            st = k_copy_region(&g, &src, &dst, err);
        if (st)
            return rt_prefix(err, st, "region %u: ", RT_N(i), NULL);
        *moved += region_bytes(&g, &dst);
    }
    return LLMC_RT_OK;
}

static llmc_rt_status exec_symbols(const fb_reader *r, const rt_op_desc *op, int64_t S,
                                   int64_t P, rt_view *y, llmc_rt_error *err)
{
    if (k_count(y) != op->values.len)
        return rt_fail(err, LLMC_RT_E_EXEC, "%u values for %d output elements",
                       RT_N(op->values.len, k_count(y)), NULL);
    for (uint32_t k = 0; k < op->values.len; k++)
        if (!rt_affine_eval(fb_vec_affine(r, op->values, k), S, P, (int64_t *)y->data + k))
            return rt_fail(err, LLMC_RT_E_EXEC, "value %u overflows", RT_N(k), NULL);
    return LLMC_RT_OK;
}

static llmc_rt_status exec_reduce(const fb_reader *r, const rt_op_desc *op, const rt_view *x,
                                  rt_view *y, llmc_rt_error *err)
{
    int axes[LLMC_RT_MAX_RANK];
    int n = 0;
    for (; (uint32_t)n < op->axes.len && n < LLMC_RT_MAX_RANK; n++)
        axes[n] = (int32_t)fb_vec_u32(r, op->axes, (uint32_t)n);
    return k_reduce(op->kind, x, axes, n, op->keepdims, y, err);
}

/* LayerNorm writes y and, with 3 outputs, Mean and InvStdDev. */
static llmc_rt_status exec_layernorm(const rt_op_desc *op, const rt_view *in, rt_view *out,
                                     llmc_rt_error *err)
{
    bool with_stats = op->outputs.len == 3;
    rt_layernorm_stats stats = {with_stats ? &out[1] : NULL, with_stats ? &out[2] : NULL};
    return k_layernorm(&in[0], &in[1], op->inputs.len > 2 ? &in[2] : NULL, op->axis,
                       op->epsilon, &out[0], &stats, err);
}

/* The dtype/layout fields of tensor t (tensor_traits.h). */
static llmc_rt_status format_of(const llmc_rt_session *s, fb_reader *r, uint32_t t,
                                rt_tensor_format *f, llmc_rt_error *err)
{
    rt_tensor_desc d;
    llmc_rt_status st = rt_read_tensor(r, s->plan, t, &d, err);
    if (!st)
        *f = rt_format_of(&d);
    return st;
}

/* Linear's W as the kernels see it, and the matching shape of x (input 0). */
typedef struct {
    rt_tensor_format wf, xf;
    rt_qweight_shape qw;
    rt_qact_shape qx;
    rt_ftile_shape fw;
} linear_operands;

static llmc_rt_status linear_operands_of(const llmc_rt_session *s, fb_reader *r,
                                         const rt_op_desc *op, const rt_view *in,
                                         linear_operands *lo, llmc_rt_error *err)
{
    llmc_rt_status st = format_of(s, r, fb_vec_u32(r, op->inputs, 0), &lo->xf, err);
    if (!st)
        st = format_of(s, r, fb_vec_u32(r, op->inputs, 1), &lo->wf, err);
    if (st)
        return st;
    bool ok = true;
    if (lo->wf.layout == LAYOUT_QWEIGHT)
        ok = rt_qweight_shape_of(&lo->wf, in[1].rank, in[1].dims, &lo->qw) &&
             rt_qact_shape_of(&lo->xf, in[0].rank, in[0].dims, &lo->qx);
    else if (lo->wf.layout == LAYOUT_FWEIGHT)
        ok = rt_ftile_shape_of(&lo->wf, in[1].rank, in[1].dims, &lo->fw);
    return ok ? LLMC_RT_OK : rt_fail(err, LLMC_RT_E_EXEC, "W or x has an invalid packed format",
                                     NULL, NULL);
}

/* One output's columns [col0, col0 + y's last dim) of z, by W's layout. */
static llmc_rt_status linear_columns(const llmc_rt_session *s, const linear_operands *lo,
                                     const rt_view *in, const rt_view *bias,
                                     const rt_view *residual, int64_t col0, rt_view *y,
                                     llmc_rt_error *err)
{
    rt_parallel par = session_parallel(s);
    const rt_kernels *kt = s->plan->kernels;
    switch (lo->wf.layout) {
    case LAYOUT_QWEIGHT:
        return k_qlinear(kt, &in[0], &lo->qx, in[1].data, &lo->qw, bias, residual, col0, y,
                         s->plan->gemm_min_rows, &par, err);
    case LAYOUT_FWEIGHT:
        return k_linear_tiles(kt, &in[0], in[1].data, &lo->fw, bias, residual, col0, y, &par, err);
    default:
        return k_linear(&in[0], &in[1], bias, residual, col0, y, &par, err);
    }
}

/* Linear: inputs x, W, then bias if kind & 1, residual if kind & 2; each
 * output takes the next columns of z, viewed one at a time (any number);
 * adds the bytes written to *moved. */
static llmc_rt_status exec_linear(const llmc_rt_session *s, fb_reader *r, const rt_op_desc *op,
                                  const rt_view *in, int64_t S, int64_t P, uint64_t *moved,
                                  llmc_rt_error *err)
{
    int next = 2;
    const rt_view *bias = op->kind & 1 ? &in[next++] : NULL;
    const rt_view *residual = op->kind & 2 ? &in[next++] : NULL;
    linear_operands lo;
    if ((uint32_t)next != op->inputs.len) /* the verifier's kind check */
        return rt_fail(err, LLMC_RT_E_EXEC, "kind %d does not match %u inputs",
                       RT_N(op->kind, op->inputs.len), NULL);
    llmc_rt_status st = linear_operands_of(s, r, op, in, &lo, err);
    int64_t col0 = 0;
    for (uint32_t j = 0; !st && j < op->outputs.len; j++) {
        rt_view y;
        st = view_of(s, r, fb_vec_u32(r, op->outputs, j), S, P, &y, err);
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
static llmc_rt_status exec_quantize_rows(const llmc_rt_session *s, fb_reader *r,
                                         const rt_op_desc *op, const rt_view *x, rt_view *xq,
                                         uint64_t *moved, llmc_rt_error *err)
{
    rt_tensor_format f;
    rt_qact_shape qs;
    llmc_rt_status st = format_of(s, r, fb_vec_u32(r, op->outputs, 0), &f, err);
    if (st)
        return st;
    if (!rt_qact_shape_of(&f, xq->rank, xq->dims, &qs))
        return rt_fail(err, LLMC_RT_E_EXEC, "output has an invalid QActTiles format", NULL, NULL);
    rt_parallel par = session_parallel(s);
    st = k_quantize_rows(s->plan->kernels, x, &qs, xq, &par, err);
    if (!st)
        *moved += rt_qact_bytes(&qs);
    return st;
}

/* Runs one op whose inputs (at most MAX_OP_INPUTS) and outputs (at most 3
 * outside Copy and Linear) are viewed; most ops have the one output out[0]. */
static llmc_rt_status dispatch(const fb_reader *r, const rt_op_desc *op, const rt_view *in,
                               rt_view *out, int64_t S, int64_t P, const rt_parallel *par,
                               llmc_rt_error *err)
{
    rt_view *y = &out[0];
    switch (op->code) {
    case OP_RESHAPE: return k_reshape(&in[0], y, err);
    case OP_UNARY: return k_unary(op->kind, &in[0], y, err);
    case OP_BINARY: return k_binary(op->kind, &in[0], &in[1], y, err);
    case OP_WHERE: return k_where(&in[0], &in[1], &in[2], y, err);
    case OP_CAST: return k_cast(&in[0], y, err);
    case OP_MATMUL: return k_matmul(&in[0], &in[1], y, par, err);
    case OP_REDUCE: return exec_reduce(r, op, &in[0], y, err);
    case OP_SOFTMAX: return k_softmax(&in[0], op->axis, y, err);
    case OP_LAYERNORM: return exec_layernorm(op, in, out, err);
    case OP_GATHER: return k_gather(&in[0], &in[1], op->axis, y, err);
    case OP_FILL: return k_fill(op->value, y, err);
    case OP_RANGE: return k_range(&in[0], &in[1], &in[2], y, err);
    case OP_SYMBOLS: return exec_symbols(r, op, S, P, y, err);
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
static llmc_rt_status view_all(const llmc_rt_session *s, fb_reader *r, fb_vector tensors,
                               int64_t S, int64_t P, rt_view *views, llmc_rt_error *err)
{
    for (uint32_t k = 0; k < tensors.len; k++) {
        llmc_rt_status st = view_of(s, r, fb_vec_u32(r, tensors, k), S, P, &views[k], err);
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
static llmc_rt_status exec_attention(llmc_rt_session *s, const rt_op_desc *op,
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

/* Runs one op; adds the bytes it wrote to *moved. */
static llmc_rt_status exec_op_body(llmc_rt_session *s, fb_reader *r, const rt_op_desc *op,
                                   int64_t S, int64_t P, uint64_t *moved, llmc_rt_error *err)
{
    rt_view in[MAX_OP_INPUTS], out[3];
    if (op->code == OP_COPY)
        return exec_copy(s, r, op, S, P, moved, err);
    /* the verifier's arity check */
    if (op->inputs.len > MAX_OP_INPUTS || op->outputs.len < 1 ||
        (op->outputs.len > 3 && op->code != OP_LINEAR))
        return rt_fail(err, LLMC_RT_E_EXEC, "unexpected operand count", NULL, NULL);
    llmc_rt_status st = view_all(s, r, op->inputs, S, P, in, err);
    if (!st && op->code == OP_LINEAR)
        return exec_linear(s, r, op, in, S, P, moved, err);
    if (!st)
        st = view_all(s, r, op->outputs, S, P, out, err);
    if (!st && op->code == OP_QUANTIZE_ROWS)
        return outputs_empty(out, 1) ? LLMC_RT_OK
                                     : exec_quantize_rows(s, r, op, &in[0], &out[0], moved, err);
    if (!st && op->code == OP_ATTENTION)
        st = exec_attention(s, op, in, &out[0], S, P, moved, err);
    else if (!st && !outputs_empty(out, op->outputs.len)) {
        rt_parallel par = session_parallel(s);
        st = dispatch(r, op, in, out, S, P, &par, err);
    }
    for (uint32_t k = 0; !st && k < op->outputs.len; k++)
        *moved += view_bytes(&out[k]);
    return st;
}

static llmc_rt_status run_ops(llmc_rt_session *s, int64_t S, int64_t P, uint64_t *moved,
                              llmc_rt_error *err)
{
    fb_reader r = rt_reader(s->plan);
    for (uint32_t i = 0; i < s->plan->n_ops; i++) {
        rt_op_desc op;
        llmc_rt_status st = rt_read_op(&r, s->plan, i, &op, err);
        if (st)
            return st;
        st = exec_op_body(s, &r, &op, S, P, moved, err);
        if (st)
            return rt_prefix(err, st, "op %u (%s '%s'): ", RT_N(i),
                             RT_S(rt_op_code_name(op.code), op.name));
    }
    return LLMC_RT_OK;
}

/* ---- bounds ------------------------------------------------------------ */

static bool affines_static(const fb_reader *r, fb_vector v)
{
    for (uint32_t k = 0; k < v.len; k++) {
        const uint8_t *a = fb_vec_affine(r, v, k);
        if (fb_i64(a + 8) || fb_i64(a + 16))
            return false;
    }
    return true;
}

static bool op_is_static(fb_reader *r, const llmc_rt_plan *p, uint32_t i)
{
    rt_op_desc op;
    if (rt_read_op(r, p, i, &op, NULL) || !affines_static(r, op.values))
        return false;
    for (uint32_t k = 0; k < op.regions.len; k++) {
        rt_region_desc g;
        if (rt_read_region(r, &op, k, &g, NULL) || !affines_static(r, g.dst_start) ||
            !affines_static(r, g.size) || !affines_static(r, g.src_start))
            return false;
    }
    return true;
}

/* True when nothing in the plan depends on S or P. */
static bool plan_is_static(const llmc_rt_plan *p)
{
    fb_reader r = rt_reader(p);
    for (uint32_t i = 0; i < p->n_tensors; i++) {
        rt_tensor_desc d;
        if (rt_read_tensor(&r, p, i, &d, NULL) || !affines_static(&r, d.dims))
            return false;
    }
    for (uint32_t i = 0; i < p->n_ops; i++)
        if (!op_is_static(&r, p, i))
            return false;
    return true;
}

static llmc_rt_status check_bounds(const llmc_rt_session *s, uint32_t S, uint32_t P,
                                   bool allow_static_zero, llmc_rt_error *err)
{
    if ((S == 0 && !(allow_static_zero && plan_is_static(s->plan))) ||
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
    if (!s || !s->plan || !s->arena)
        return rt_fail(err, LLMC_RT_E_ARG, "session not initialized", NULL, NULL);
    return LLMC_RT_OK;
}

static llmc_rt_status place_input(const llmc_rt_session *s, fb_reader *r, uint32_t i,
                                  const llmc_rt_tensor *given, uint32_t S, uint32_t P,
                                  uint64_t *moved, llmc_rt_error *err)
{
    rt_io_desc io;
    rt_view v;
    llmc_rt_status st = rt_read_io(r, s->plan, 0, i, &io, err);
    if (!st)
        st = view_of(s, r, io.tensor, S, P, &v, err);
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
    fb_reader r = rt_reader(s->plan);
    uint64_t moved = 0;
    for (uint32_t i = 0; !st && i < s->plan->n_inputs; i++)
        st = place_input(s, &r, i, &inputs[i], S, P, &moved, err);
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
    rt_io_desc io;
    llmc_rt_status st = check_session(s, err);
    if (st)
        return st;
    if (!out || index >= s->plan->n_outputs || s->last_S == NO_RUN)
        return rt_fail(err, LLMC_RT_E_ARG, "output %u of %u: no such output, or no "
                       "successful run yet", RT_N(index, s->plan->n_outputs), NULL);
    fb_reader r = rt_reader(s->plan);
    st = rt_read_io(&r, s->plan, 1, index, &io, err);
    return st ? st : view_of(s, &r, io.tensor, s->last_S, s->last_P, out, err);
}

/* ---- the LLM path ------------------------------------------------------ */

/* The KV store keeps, for every PastKey/PastValue input in plan order, a
 * 64-aligned slot holding that tensor at P = max_context:
 * [batch, kv_heads, max_context, head_dim]. */
typedef struct {
    float *data;
    int64_t heads;    /* batch * kv_heads: independent row blocks */
    int64_t rows;     /* max_context */
    int64_t row_len;  /* head_dim */
} kv_slot;

static llmc_rt_status find_kv_slot(const llmc_rt_session *s, fb_reader *r, int role,
                                   int32_t layer, kv_slot *slot, llmc_rt_error *err)
{
    uint64_t offset = 0;
    for (uint32_t i = 0; i < s->plan->n_inputs; i++) {
        rt_io_desc io;
        rt_tensor_desc d;
        int64_t dims[LLMC_RT_MAX_RANK];
        uint64_t bytes;
        llmc_rt_status st = rt_read_io(r, s->plan, 0, i, &io, err);
        if (st)
            return st;
        if (io.role != ROLE_PAST_KEY && io.role != ROLE_PAST_VALUE)
            continue;
        st = rt_read_tensor(r, s->plan, io.tensor, &d, err);
        if (!st)
            st = rt_eval_dims(r, &d, 0, s->plan->max_context, dims, &bytes, LLMC_RT_E_EXEC, err);
        if (st)
            return st;
        if (io.role == role && io.layer == layer) {
            slot->data = (float *)(s->kv + offset);
            slot->heads = dims[0] * dims[1];
            slot->rows = dims[2];
            slot->row_len = dims[3];
            return LLMC_RT_OK;
        }
        offset += align64(bytes);
    }
    return rt_fail(err, LLMC_RT_E_EXEC, "no %s input for layer %d",
                   RT_N(layer), RT_S(role == ROLE_PAST_KEY ? "PastKey" : "PastValue"));
}

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
static llmc_rt_status fill_input(const llmc_rt_session *s, fb_reader *r, const rt_io_desc *io,
                                 const int64_t *tokens, int64_t S, int64_t P,
                                 uint64_t *moved, llmc_rt_error *err)
{
    rt_view v;
    kv_slot slot;
    llmc_rt_status st = view_of(s, r, io->tensor, S, P, &v, err);
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
    case ROLE_PAST_KEY:
    case ROLE_PAST_VALUE:
        st = find_kv_slot(s, r, io->role, io->layer, &slot, err);
        if (!st)
            st = check_kv_view(&v, &slot, P, err);
        if (!st)
            kv_copy(&slot, v.data, P, false);
        return st;
    default:
        return rt_fail(err, LLMC_RT_E_ARG, "a Generic input cannot be fed; use "
                       "llmc_rt_session_run", NULL, NULL);
    }
}

static llmc_rt_status take_output(const llmc_rt_session *s, fb_reader *r, const rt_io_desc *io,
                                  int64_t S, int64_t P, float *logits, uint64_t *moved,
                                  llmc_rt_error *err)
{
    rt_view v;
    kv_slot slot;
    int past_role = io->role == ROLE_PRESENT_KEY ? ROLE_PAST_KEY : ROLE_PAST_VALUE;
    if (io->role != ROLE_LOGITS && io->role != ROLE_PRESENT_KEY &&
        io->role != ROLE_PRESENT_VALUE)
        return LLMC_RT_OK;
    llmc_rt_status st = view_of(s, r, io->tensor, S, P, &v, err);
    if (st)
        return st;
    if (io->role == ROLE_LOGITS) {
        int64_t vocab = s->plan->vocab_size;
        if (v.dims[0] != 1 || v.dims[1] != S || v.dims[2] != vocab)
            return rt_fail(err, LLMC_RT_E_EXEC, "logits are not [1, %d, vocab_size %d]",
                           RT_N(S, vocab), NULL);
        if (logits)
            memcpy(logits, (const float *)v.data + (S - 1) * vocab, (size_t)vocab * sizeof(float));
        return LLMC_RT_OK;
    }
    st = find_kv_slot(s, r, past_role, io->layer, &slot, err);
    if (!st)
        st = check_kv_view(&v, &slot, P + S, err);
    if (!st)
        kv_copy(&slot, v.data, P + S, true);
    if (!st)
        *moved += view_bytes(&v);
    return st;
}

static bool has_binding(const llmc_rt_plan *p, int is_output, int role)
{
    fb_reader r = rt_reader(p);
    uint32_t n = is_output ? p->n_outputs : p->n_inputs;
    for (uint32_t i = 0; i < n; i++) {
        rt_io_desc io;
        if (rt_read_io(&r, p, is_output, i, &io, NULL) == LLMC_RT_OK && io.role == role)
            return true;
    }
    return false;
}

static llmc_rt_status feed_inputs(llmc_rt_session *s, fb_reader *r, const int64_t *tokens,
                                  int64_t S, int64_t P, uint64_t *moved, llmc_rt_error *err)
{
    for (uint32_t i = 0; i < s->plan->n_inputs; i++) {
        rt_io_desc io;
        llmc_rt_status st = rt_read_io(r, s->plan, 0, i, &io, err);
        if (!st)
            st = fill_input(s, r, &io, tokens, S, P, moved, err);
        if (st)
            return rt_prefix(err, st, "input %u: ", RT_N(i), NULL);
    }
    return LLMC_RT_OK;
}

static llmc_rt_status take_outputs(llmc_rt_session *s, fb_reader *r, int64_t S, int64_t P,
                                   float *logits, uint64_t *moved, llmc_rt_error *err)
{
    for (uint32_t i = 0; i < s->plan->n_outputs; i++) {
        rt_io_desc io;
        llmc_rt_status st = rt_read_io(r, s->plan, 1, i, &io, err);
        if (!st)
            st = take_output(s, r, &io, S, P, logits, moved, err);
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
    if (!has_binding(s->plan, 0, ROLE_INPUT_IDS) || !has_binding(s->plan, 1, ROLE_LOGITS))
        return rt_fail(err, LLMC_RT_E_ARG, "feed needs a plan with InputIds and Logits "
                       "bindings", NULL, NULL);
    st = check_bounds(s, n, s->position, false, err);
    if (st)
        return st;
    fb_reader r = rt_reader(s->plan);
    int64_t S = n, P = s->position;
    uint64_t moved = 0;
    st = feed_inputs(s, &r, tokens, S, P, &moved, err);
    if (!st)
        st = run_ops(s, S, P, &moved, err);
    if (!st)
        st = take_outputs(s, &r, S, P, logits, &moved, err);
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
