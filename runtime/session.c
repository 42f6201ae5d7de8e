/* Sessions: the op interpreter (run) and the LLM path (feed).  They read
 * only the prepared tables llmc_rt_session_init decoded (session_prepare.c),
 * never the plan's FlatBuffer. */
#include <string.h>

#include "kernels/kernel_table.h"
#include "rt_msg.h"
#include "session.h"
#include "llmc_rt_internal.h"

/* ---- tensor views ------------------------------------------------------ */

llmc_rt_status rt_session_view(const llmc_rt_session *s, uint8_t *arena, uint32_t t,
                               int64_t S, int64_t P, rt_view *v, llmc_rt_error *err)
{
    const rt_prep_tensor *d = &rt_state(s)->prepared->tensors[t];
    uint64_t bytes;
    memset(v, 0, sizeof *v);
    v->dtype = d->format.dtype;
    v->rank = d->rank;
    llmc_rt_status st = rt_dims_at(&rt_state(s)->prepared->affines[d->dims], d->rank, &d->format, S, P,
                                   v->dims, &bytes, LLMC_RT_E_EXEC, err);
    if (!st && d->kind == KIND_ARENA && bytes > d->max_bytes)
        st = rt_fail(err, LLMC_RT_E_EXEC, "needs %u bytes at S=%d P=%d; %u reserved",
                     RT_N((int64_t)bytes, S, P, (int64_t)d->max_bytes), NULL);
    if (st)
        return rt_prefix(err, st, "tensor %u '%s': ", RT_N(t), RT_S(d->name));
    v->data = arena && d->kind == KIND_ARENA ? arena + (d->data - rt_state(s)->arena) : d->data;
    return LLMC_RT_OK;
}

/* ---- the interpreter --------------------------------------------------- */

/* Views of the tensors listed in `tensors` (an op's inputs or outputs). */
static llmc_rt_status view_all(const rt_op_call *c, rt_prep_list tensors, rt_view *views,
                               llmc_rt_error *err)
{
    for (uint32_t k = 0; k < tensors.len; k++) {
        llmc_rt_status st = rt_call_view(c, prep_operand(rt_state(c->s)->prepared, tensors, k), &views[k], err);
        if (st)
            return st;
    }
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

/* The table a step of S rows runs on: Plan.decode_isa's below
 * gemm_min_rows (the GEMV split's steps), else Plan.prefill_isa's. */
static const rt_kernels *step_kernels(const rt_plan *plan, int64_t S)
{
    return RT_KERNELS_TUNABLE && S < plan->gemm_min_rows ? plan->decode_kernels : plan->kernels;
}

const char *llmc_rt_plan_step_isa(const llmc_rt_plan *plan, uint32_t rows)
{
    const rt_kernels *k = step_kernels(rt_plan_of(plan), rows);
    return k ? k->isa : "none";
}

/* Runs one op through its exec function (the operand counts were checked
 * at init): views its inputs and outputs first (Copy: none, its regions
 * name their tensors; Linear: only its inputs, it views its outputs one at
 * a time), skips it when no viewed output has an element (but Attention,
 * which checks and extends its cache even then), and adds the bytes it
 * wrote to *moved: its outputs', or what it counted itself (Copy, Linear,
 * QuantizeRows). */
static llmc_rt_status exec_op(llmc_rt_session *s, const rt_prep_op *op, int64_t S, int64_t P,
                              uint8_t *arena, uint64_t *moved, llmc_rt_error *err)
{
    rt_op_call c; /* views filled below, as the op takes them */
    c.s = s;
    c.op = op;
    c.S = S;
    c.P = P;
    c.kernels = step_kernels(rt_plan_of(rt_state(s)->plan), S);
    c.arena = arena;
    c.moved = 0;
    bool views_outputs = op->code != LLMC_RT_OP_Copy && op->code != LLMC_RT_OP_Linear;
    llmc_rt_status st = LLMC_RT_OK;
    if (op->code != LLMC_RT_OP_Copy)
        st = view_all(&c, op->inputs, c.in, err);
    if (!st && views_outputs)
        st = view_all(&c, op->outputs, c.out, err);
    if (st || (views_outputs && op->code != LLMC_RT_OP_Attention && outputs_empty(c.out, op->outputs.len)))
        return st;
    st = op->exec(&c, err);
    bool counts_outputs = views_outputs && op->code != LLMC_RT_OP_QuantizeRows;
    for (uint32_t k = 0; !st && counts_outputs && k < op->outputs.len; k++)
        c.moved += rt_view_bytes(&c.out[k]);
    *moved += c.moved;
    return st;
}

llmc_rt_status rt_session_run_ops(llmc_rt_session *s, uint32_t first, uint32_t n, int64_t S,
                                  int64_t P, uint8_t *arena, uint64_t *moved,
                                  llmc_rt_error *err)
{
    for (uint32_t i = first; i < first + n; i++) {
        const rt_prep_op *op = &rt_state(s)->prepared->ops[i];
        if (rt_state(s)->observer)
            rt_state(s)->observer(rt_state(s)->observer_ctx, i, 0);
        llmc_rt_status st = exec_op(s, op, S, P, arena, moved, err);
        if (rt_state(s)->observer)
            rt_state(s)->observer(rt_state(s)->observer_ctx, i, 1);
        if (st)
            return rt_prefix(err, st, "op %u (%s '%s'): ", RT_N(i),
                             RT_S(rt_op_code_name(op->code), op->name));
    }
    return LLMC_RT_OK;
}

/* Every op in plan order, each between the observer's two calls. */
static llmc_rt_status run_ops(llmc_rt_session *s, int64_t S, int64_t P, uint64_t *moved,
                              llmc_rt_error *err)
{
    return rt_session_run_ops(s, 0, rt_plan_of(rt_state(s)->plan)->n_ops, S, P, NULL, moved, err);
}

/* ---- bounds ------------------------------------------------------------ */

static llmc_rt_status check_bounds(const llmc_rt_session *s, uint32_t S, uint32_t P,
                                   bool allow_static_zero, llmc_rt_error *err)
{
    if ((S == 0 && !(allow_static_zero && rt_state(s)->prepared->is_static)) ||
        (uint64_t)S + P > rt_state(s)->context)
        return rt_fail(err, LLMC_RT_E_BOUNDS, "S=%u P=%u outside 1 <= S, S + P <= "
                       "context %u", RT_N(S, P, rt_state(s)->context), NULL);
    return LLMC_RT_OK;
}

/* Records what a run moved. */
static void count_run(llmc_rt_session *s, uint64_t moved)
{
    rt_state(s)->stats.bytes_last = moved;
    rt_state(s)->stats.bytes_total += moved;
    rt_state(s)->stats.runs++;
}

/* ---- generic run ------------------------------------------------------- */

static llmc_rt_status check_session(const llmc_rt_session *s, llmc_rt_error *err)
{
    if (!s || !rt_state(s)->plan || !rt_state(s)->arena || !rt_state(s)->prepared)
        return rt_fail(err, LLMC_RT_E_ARG, "session not initialized", NULL, NULL);
    return LLMC_RT_OK;
}

static llmc_rt_status place_input(const llmc_rt_session *s, uint32_t i,
                                  const llmc_rt_tensor *given, uint32_t S, uint32_t P,
                                  uint64_t *moved, llmc_rt_error *err)
{
    rt_view v;
    llmc_rt_status st = rt_session_view(s, NULL, rt_state(s)->prepared->inputs[i].tensor, S, P, &v, err);
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
    if (rt_view_bytes(&v) && !given->data)
        return rt_fail(err, LLMC_RT_E_ARG, "input %u: data is NULL", RT_N(i), NULL);
    if (rt_view_bytes(&v) && given->data != v.data)
        memmove(v.data, given->data, (size_t)rt_view_bytes(&v));
    *moved += rt_view_bytes(&v);
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_session_run(llmc_rt_session *s, uint32_t S, uint32_t P,
                                   const llmc_rt_tensor *inputs, llmc_rt_error *err)
{
    llmc_rt_status st = check_session(s, err);
    if (st)
        return st;
    if (!inputs && rt_plan_of(rt_state(s)->plan)->n_inputs)
        return rt_fail(err, LLMC_RT_E_ARG, "inputs is NULL", NULL, NULL);
    st = check_bounds(s, S, P, true, err);
    uint64_t moved = 0;
    for (uint32_t i = 0; !st && i < rt_plan_of(rt_state(s)->plan)->n_inputs; i++)
        st = place_input(s, i, &inputs[i], S, P, &moved, err);
    if (!st)
        st = run_ops(s, S, P, &moved, err);
    count_run(s, moved);
    rt_state(s)->last_S = st ? NO_RUN : S;
    rt_state(s)->last_P = P;
    return st;
}

llmc_rt_status llmc_rt_session_output(const llmc_rt_session *s, uint32_t index,
                                      llmc_rt_tensor *out, llmc_rt_error *err)
{
    llmc_rt_status st = check_session(s, err);
    if (st)
        return st;
    if (!out || index >= rt_plan_of(rt_state(s)->plan)->n_outputs || rt_state(s)->last_S == NO_RUN)
        return rt_fail(err, LLMC_RT_E_ARG, "output %u of %u: no such output, or no "
                       "successful run yet", RT_N(index, rt_plan_of(rt_state(s)->plan)->n_outputs), NULL);
    return rt_session_view(s, NULL, rt_state(s)->prepared->outputs[index].tensor, rt_state(s)->last_S, rt_state(s)->last_P, out,
                           err);
}

llmc_rt_status llmc_rt_session_op_input(const llmc_rt_session *s, uint32_t op_index,
                                        uint32_t slot, uint32_t S, uint32_t P,
                                        llmc_rt_tensor *out, const char **name,
                                        llmc_rt_error *err)
{
    llmc_rt_status st = check_session(s, err);
    if (st)
        return st;
    if (!out || op_index >= rt_plan_of(rt_state(s)->plan)->n_ops || slot >= rt_state(s)->prepared->ops[op_index].inputs.len)
        return rt_fail(err, LLMC_RT_E_ARG, "op %u input %u: no such op or input",
                       RT_N(op_index, slot), NULL);
    st = check_bounds(s, S, P, false, err);
    if (st)
        return st;
    uint32_t t = prep_operand(rt_state(s)->prepared, rt_state(s)->prepared->ops[op_index].inputs, slot);
    if (name)
        *name = rt_state(s)->prepared->tensors[t].name;
    return rt_session_view(s, NULL, t, S, P, out, err);
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
                                 const int64_t *tokens, int64_t S, int64_t P, uint8_t *arena,
                                 uint64_t *moved, llmc_rt_error *err)
{
    rt_view v;
    llmc_rt_status st = rt_session_view(s, arena, io->tensor, S, P, &v, err);
    if (st)
        return st;
    *moved += rt_view_bytes(&v);
    int64_t *ints = v.data;
    switch (io->role) {
    case ROLE_INPUT_IDS:
        st = check_count(&v, S, err);
        if (!st)
            memcpy(ints, tokens, (size_t)S * sizeof *ints);
        return st;
    case ROLE_ATTENTION_MASK: /* P + S ones */
    case ROLE_POSITION_IDS: { /* P, P + 1, ... P + S - 1 */
        bool mask = io->role == ROLE_ATTENTION_MASK;
        int64_t n = mask ? P + S : S;
        st = check_count(&v, n, err);
        for (int64_t i = 0; !st && i < n; i++)
            ints[i] = mask ? 1 : P + i;
        return st;
    }
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
                                  int64_t P, uint8_t *arena, float *logits, uint64_t *moved,
                                  llmc_rt_error *err)
{
    rt_view v;
    if (io->role != ROLE_LOGITS && io->role != ROLE_PRESENT_KEY &&
        io->role != ROLE_PRESENT_VALUE)
        return LLMC_RT_OK;
    llmc_rt_status st = rt_session_view(s, arena, io->tensor, S, P, &v, err);
    if (st)
        return st;
    if (io->role == ROLE_LOGITS) {
        int64_t vocab = rt_plan_of(rt_state(s)->plan)->vocab_size;
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
        *moved += rt_view_bytes(&v);
    return st;
}

llmc_rt_status rt_session_feed_inputs(llmc_rt_session *s, const int64_t *tokens, int64_t S,
                                      int64_t P, uint8_t *arena, uint64_t *moved,
                                      llmc_rt_error *err)
{
    for (uint32_t i = 0; i < rt_plan_of(rt_state(s)->plan)->n_inputs; i++) {
        llmc_rt_status st =
            fill_input(s, &rt_state(s)->prepared->inputs[i], tokens, S, P, arena, moved, err);
        if (st)
            return rt_prefix(err, st, "input %u: ", RT_N(i), NULL);
    }
    return LLMC_RT_OK;
}

llmc_rt_status rt_session_take_outputs(llmc_rt_session *s, int64_t S, int64_t P,
                                       uint8_t *arena, float *logits, uint64_t *moved,
                                       llmc_rt_error *err)
{
    for (uint32_t i = 0; i < rt_plan_of(rt_state(s)->plan)->n_outputs; i++) {
        llmc_rt_status st =
            take_output(s, &rt_state(s)->prepared->outputs[i], S, P, arena, logits, moved, err);
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
    if (!rt_state(s)->prepared->can_feed)
        return rt_fail(err, LLMC_RT_E_ARG, "feed needs a plan with InputIds and Logits "
                       "bindings", NULL, NULL);
    st = check_bounds(s, n, rt_state(s)->position, false, err);
    if (st)
        return st;
    int64_t S = n, P = rt_state(s)->position;
    uint64_t moved = 0;
    st = rt_session_feed_inputs(s, tokens, S, P, NULL, &moved, err);
    if (!st)
        st = run_ops(s, S, P, &moved, err);
    if (!st)
        st = rt_session_take_outputs(s, S, P, NULL, logits, &moved, err);
    count_run(s, moved);
    rt_state(s)->last_S = st ? NO_RUN : n;
    rt_state(s)->last_P = rt_state(s)->position;
    if (!st)
        rt_state(s)->position += n;
    return st;
}
