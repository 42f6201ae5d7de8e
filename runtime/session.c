/* Sessions: working memory, the op interpreter (run) and the LLM path (feed). */
#include <string.h>

#include "kernels/kernels.h"
#include "plan_format.h"
#include "rt_msg.h"

#define NO_RUN UINT32_MAX /* last_S before the first run */
#define MAX_OP_INPUTS 5   /* the most any op but Copy takes (plan_verify.c op_arity) */

static uint64_t align64(uint64_t v)
{
    return (v + 63) & ~(uint64_t)63;
}

size_t llmc_rt_session_memory(const llmc_rt_plan *plan)
{
    if (!plan)
        return 0;
    uint64_t arena = align64(plan->arena_size);
    if (arena < plan->arena_size || plan->kv_bytes > UINT64_MAX - 64 - arena ||
        arena + plan->kv_bytes + 64 > SIZE_MAX)
        return SIZE_MAX; /* cannot be provided: init will say so */
    return (size_t)(arena + plan->kv_bytes + 64); /* + 64: aligning the block */
}

llmc_rt_status llmc_rt_session_init(llmc_rt_session *s, const llmc_rt_plan *plan,
                                    void *memory, size_t memory_size, llmc_rt_error *err)
{
    if (!s || !plan || !plan->base || !memory)
        return rt_fail(err, LLMC_RT_E_ARG, "session, plan and memory must not be NULL", NULL,
                       NULL);
    size_t need = llmc_rt_session_memory(plan);
    if (need == SIZE_MAX || memory_size < need)
        return rt_fail(err, LLMC_RT_E_MEMORY, "working memory has %u bytes; the plan needs %u",
                       RT_N((int64_t)memory_size, (int64_t)need), NULL);
    uint8_t *base = memory;
    base += (64 - (uintptr_t)base % 64) % 64;
    s->plan = plan;
    s->arena = base;
    s->kv = base + align64(plan->arena_size);
    s->position = 0;
    s->last_S = NO_RUN;
    s->last_P = 0;
    return LLMC_RT_OK;
}

void llmc_rt_session_reset(llmc_rt_session *s)
{
    if (s)
        s->position = 0;
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

static llmc_rt_status exec_copy(const llmc_rt_session *s, fb_reader *r, const rt_op_desc *op,
                                int64_t S, int64_t P, llmc_rt_error *err)
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

/* Linear: inputs x, W, then bias if kind & 1, residual if kind & 2; each
 * output takes the next columns of z, viewed one at a time (any number). */
static llmc_rt_status exec_linear(const llmc_rt_session *s, fb_reader *r, const rt_op_desc *op,
                                  const rt_view *in, int64_t S, int64_t P, llmc_rt_error *err)
{
    int next = 2;
    const rt_view *bias = op->kind & 1 ? &in[next++] : NULL;
    const rt_view *residual = op->kind & 2 ? &in[next++] : NULL;
    if ((uint32_t)next != op->inputs.len) /* the verifier's kind check */
        return rt_fail(err, LLMC_RT_E_EXEC, "kind %d does not match %u inputs",
                       RT_N(op->kind, op->inputs.len), NULL);
    int64_t col0 = 0;
    for (uint32_t j = 0; j < op->outputs.len; j++) {
        rt_view y;
        llmc_rt_status st = view_of(s, r, fb_vec_u32(r, op->outputs, j), S, P, &y, err);
        if (!st)
            st = k_linear(&in[0], &in[1], bias, residual, col0, &y, err);
        if (st)
            return rt_prefix(err, st, "output %u: ", RT_N(j), NULL);
        col0 += y.rank ? y.dims[y.rank - 1] : 0;
    }
    return LLMC_RT_OK;
}

/* Runs one op whose inputs (at most MAX_OP_INPUTS) and outputs (at most 3
 * outside Copy and Linear) are viewed; most ops have the one output out[0]. */
static llmc_rt_status dispatch(const fb_reader *r, const rt_op_desc *op, const rt_view *in,
                               rt_view *out, int64_t S, int64_t P, llmc_rt_error *err)
{
    rt_view *y = &out[0];
    switch (op->code) {
    case OP_RESHAPE: return k_reshape(&in[0], y, err);
    case OP_UNARY: return k_unary(op->kind, &in[0], y, err);
    case OP_BINARY: return k_binary(op->kind, &in[0], &in[1], y, err);
    case OP_WHERE: return k_where(&in[0], &in[1], &in[2], y, err);
    case OP_CAST: return k_cast(&in[0], y, err);
    case OP_MATMUL: return k_matmul(&in[0], &in[1], y, err);
    case OP_REDUCE: return exec_reduce(r, op, &in[0], y, err);
    case OP_SOFTMAX: return k_softmax(&in[0], op->axis, y, err);
    case OP_LAYERNORM: return exec_layernorm(op, in, out, err);
    case OP_GATHER: return k_gather(&in[0], &in[1], op->axis, y, err);
    case OP_FILL: return k_fill(op->value, y, err);
    case OP_RANGE: return k_range(&in[0], &in[1], &in[2], y, err);
    case OP_SYMBOLS: return exec_symbols(r, op, S, P, y, err);
    case OP_RMSNORM: return k_rmsnorm(&in[0], &in[1], op->epsilon, y, err);
    case OP_ROPE: return k_rope(&in[0], &in[1], &in[2], op->rotary_dim, P, y, err);
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

static llmc_rt_status exec_op_body(const llmc_rt_session *s, fb_reader *r,
                                   const rt_op_desc *op, int64_t S, int64_t P,
                                   llmc_rt_error *err)
{
    rt_view in[MAX_OP_INPUTS], out[3];
    if (op->code == OP_COPY)
        return exec_copy(s, r, op, S, P, err);
    /* the verifier's arity check */
    if (op->inputs.len > MAX_OP_INPUTS || op->outputs.len < 1 ||
        (op->outputs.len > 3 && op->code != OP_LINEAR))
        return rt_fail(err, LLMC_RT_E_EXEC, "unexpected operand count", NULL, NULL);
    llmc_rt_status st = view_all(s, r, op->inputs, S, P, in, err);
    if (!st && op->code == OP_LINEAR)
        return exec_linear(s, r, op, in, S, P, err);
    if (!st)
        st = view_all(s, r, op->outputs, S, P, out, err);
    return st ? st : dispatch(r, op, in, out, S, P, err);
}

static llmc_rt_status run_ops(const llmc_rt_session *s, int64_t S, int64_t P,
                              llmc_rt_error *err)
{
    fb_reader r = rt_reader(s->plan);
    for (uint32_t i = 0; i < s->plan->n_ops; i++) {
        rt_op_desc op;
        llmc_rt_status st = rt_read_op(&r, s->plan, i, &op, err);
        if (st)
            return st;
        st = exec_op_body(s, &r, &op, S, P, err);
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

static llmc_rt_status check_bounds(const llmc_rt_plan *p, uint32_t S, uint32_t P,
                                   bool allow_static_zero, llmc_rt_error *err)
{
    if ((S == 0 && !(allow_static_zero && plan_is_static(p))) ||
        (uint64_t)S + P > p->max_context)
        return rt_fail(err, LLMC_RT_E_BOUNDS, "S=%u P=%u outside 1 <= S, S + P <= "
                       "max_context %u", RT_N(S, P, p->max_context), NULL);
    return LLMC_RT_OK;
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
                                  llmc_rt_error *err)
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
    st = check_bounds(s->plan, S, P, true, err);
    fb_reader r = rt_reader(s->plan);
    for (uint32_t i = 0; !st && i < s->plan->n_inputs; i++)
        st = place_input(s, &r, i, &inputs[i], S, P, err);
    if (!st)
        st = run_ops(s, S, P, err);
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

static llmc_rt_status fill_input(const llmc_rt_session *s, fb_reader *r, const rt_io_desc *io,
                                 const int64_t *tokens, int64_t S, int64_t P,
                                 llmc_rt_error *err)
{
    rt_view v;
    kv_slot slot;
    llmc_rt_status st = view_of(s, r, io->tensor, S, P, &v, err);
    if (st)
        return st;
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
                                  int64_t S, int64_t P, float *logits, llmc_rt_error *err)
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
                                  int64_t S, int64_t P, llmc_rt_error *err)
{
    for (uint32_t i = 0; i < s->plan->n_inputs; i++) {
        rt_io_desc io;
        llmc_rt_status st = rt_read_io(r, s->plan, 0, i, &io, err);
        if (!st)
            st = fill_input(s, r, &io, tokens, S, P, err);
        if (st)
            return rt_prefix(err, st, "input %u: ", RT_N(i), NULL);
    }
    return LLMC_RT_OK;
}

static llmc_rt_status take_outputs(llmc_rt_session *s, fb_reader *r, int64_t S, int64_t P,
                                   float *logits, llmc_rt_error *err)
{
    for (uint32_t i = 0; i < s->plan->n_outputs; i++) {
        rt_io_desc io;
        llmc_rt_status st = rt_read_io(r, s->plan, 1, i, &io, err);
        if (!st)
            st = take_output(s, r, &io, S, P, logits, err);
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
    st = check_bounds(s->plan, n, s->position, false, err);
    if (st)
        return st;
    fb_reader r = rt_reader(s->plan);
    int64_t S = n, P = s->position;
    st = feed_inputs(s, &r, tokens, S, P, err);
    if (!st)
        st = run_ops(s, S, P, err);
    if (!st)
        st = take_outputs(s, &r, S, P, logits, err);
    s->last_S = st ? NO_RUN : n;
    s->last_P = s->position;
    if (!st)
        s->position += n;
    return st;
}
