/* Sessions: working memory, and init, which decodes the verified plan once
 * into the prepared tables (session_prepared.h) so that runs never read the
 * FlatBuffer.  Everything here happens before the first run. */
#include <string.h>

#include "kernels/kernel_table.h"
#include "op_resolver.h"
#include "rt_div64.h"
#include "rt_msg.h"
#include "session_prepared.h"
#include "llmc_rt_internal.h"

static uint64_t align64(uint64_t v)
{
    return (v + 63) & ~(uint64_t)63;
}

/* ---- working memory ---------------------------------------------------- */

/* The prepared tables as byte offsets from their start (64-aligned pieces);
 * false if a pool count does not fit the uint32 pool indices. */
typedef struct {
    uint64_t tensors, ops, inputs, outputs, regions, affines, operands, end;
} prep_layout;

static bool prep_layout_of(const llmc_rt_plan *p, prep_layout *l)
{
    if (rt_plan_of(p)->n_operands > UINT32_MAX || rt_plan_of(p)->n_regions > UINT32_MAX || rt_plan_of(p)->n_affines > UINT32_MAX)
        return false;
    l->tensors = align64(sizeof(rt_prepared));
    l->ops = l->tensors + align64((uint64_t)rt_plan_of(p)->n_tensors * sizeof(rt_prep_tensor));
    l->inputs = l->ops + align64((uint64_t)rt_plan_of(p)->n_ops * sizeof(rt_prep_op));
    l->outputs = l->inputs + align64((uint64_t)rt_plan_of(p)->n_inputs * sizeof(rt_prep_io));
    l->regions = l->outputs + align64((uint64_t)rt_plan_of(p)->n_outputs * sizeof(rt_prep_io));
    l->affines = l->regions + align64(rt_plan_of(p)->n_regions * sizeof(rt_prep_region));
    l->operands = l->affines + align64(rt_plan_of(p)->n_affines * sizeof(rt_affine));
    l->end = l->operands + align64(rt_plan_of(p)->n_operands * sizeof(uint32_t));
    return true;
}

/* The pieces of working memory (see the layout in llmc_rt.h), as byte
 * offsets from the 64-aligned start; false if they do not fit in size_t. */
typedef struct {
    uint64_t kv, table, pool, prep, end;
    uint32_t chunks_per_cache, pool_chunks;
    prep_layout tables;
} mem_layout;

/* Pool chunks the caches take at most: each its ring (rt_kv_ring) of
 * `chunks` (n_caches <= n_ops, so no overflow). */
static uint64_t pool_chunks_of(const llmc_rt_plan *p, uint32_t chunks)
{
    fb_reader r = rt_reader(p);
    uint64_t n = 0;
    for (uint32_t i = 0; chunks && i < rt_plan_of(p)->n_ops; i++) {
        rt_op_desc op;
        if (!rt_read_op(&r, p, i, &op, NULL) && op.code == LLMC_RT_OP_Attention) /* verified */
            n += rt_kv_ring(op.window, rt_plan_of(p)->kv_chunk, chunks);
    }
    return n;
}

static bool layout_for(const llmc_rt_plan *p, uint32_t context, mem_layout *m)
{
    if (context < 1 || context > rt_plan_of(p)->max_context || !prep_layout_of(p, &m->tables))
        return false;
    uint64_t arena = align64(rt_plan_of(p)->arena_size);
    m->chunks_per_cache = rt_plan_of(p)->n_caches ? rt_kv_chunks(context, rt_plan_of(p)->kv_chunk) : 0;
    uint64_t pool_chunks = pool_chunks_of(p, m->chunks_per_cache);
    uint64_t table = 4u * (uint64_t)rt_plan_of(p)->n_caches * (1u + (uint64_t)m->chunks_per_cache);
    if (arena < rt_plan_of(p)->arena_size || pool_chunks > UINT32_MAX || rt_plan_of(p)->kv_bytes > UINT64_MAX / 4 ||
        (rt_plan_of(p)->kv_slot_bytes && pool_chunks > rt_udiv64(UINT64_MAX / 4, rt_plan_of(p)->kv_slot_bytes)))
        return false;
    m->pool_chunks = (uint32_t)pool_chunks;
    m->kv = arena;
    m->table = m->kv + rt_plan_of(p)->kv_bytes;
    m->pool = m->table + align64(table);
    m->prep = m->pool + align64(pool_chunks * rt_plan_of(p)->kv_slot_bytes);
    m->end = m->prep + m->tables.end; /* tables.end < 2^42 */
    return m->prep >= arena && m->end >= m->prep && m->end <= SIZE_MAX - 64;
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
    return plan ? llmc_rt_session_memory_for(plan, rt_plan_of(plan)->max_context) : 0;
}

/* ---- decoding into the tables ------------------------------------------ */


static llmc_rt_status prepare_tensor(fb_reader *r, const llmc_rt_session *s, prep_fill *f,
                                     uint32_t i, llmc_rt_error *err)
{
    rt_prep_tensor *t = &f->pr->tensors[i];
    rt_tensor_desc d;
    rt_segment_desc seg;
    rt_prep_list dims;
    llmc_rt_status st = rt_read_tensor(r, rt_state(s)->plan, i, &d, err);
    if (!st && d.kind == KIND_WEIGHT)
        st = rt_read_segment(r, rt_state(s)->plan, d.segment, &seg, err);
    if (!st)
        st = rt_prep_take_affines(r, f, d.dims, &dims, err);
    if (st)
        return st;
    t->name = d.name;
    if (d.kind == KIND_ARENA)
        t->data = rt_state(s)->arena + d.arena_offset;
    else /* weights are only read: outputs are verified to be arena tensors */
        t->data = (uint8_t *)(uintptr_t)(rt_plan_of(rt_state(s)->plan)->base + seg.offset);
    t->max_bytes = d.max_bytes;
    t->format = rt_format_of(&d);
    t->dims = dims.first;
    t->rank = (int)d.dims.len; /* verified <= LLMC_RT_MAX_RANK */
    t->kind = d.kind;
    return LLMC_RT_OK;
}


static void copy_op_scalars(const rt_op_desc *d, rt_prep_op *o)
{
    o->code = d->code;
    o->name = d->name;
    o->kind = d->kind;
    o->axis = d->axis;
    o->keepdims = d->keepdims;
    o->epsilon = d->epsilon;
    o->value_bits = d->value_bits;
    o->heads = d->heads;
    o->kv_heads = d->kv_heads;
    o->head_dim = d->head_dim;
    o->rotary_dim = d->rotary_dim;
    o->scale = d->scale;
    o->cache = d->cache;
    o->window = d->window;
    o->softcap = d->softcap;
}

/* The op's input then output tensor indices, in the operand pool. */
static llmc_rt_status prepare_operands(fb_reader *r, prep_fill *f, const rt_op_desc *d,
                                       rt_prep_op *o, llmc_rt_error *err)
{
    /* the verifier's arity check: the interpreter's arrays hold this many */
    if (d->code != LLMC_RT_OP_Copy &&
        (d->inputs.len > MAX_OP_INPUTS || d->outputs.len < 1 ||
         (d->outputs.len > MAX_OP_OUTPUTS && d->code != LLMC_RT_OP_Linear)))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "unexpected operand count", NULL, NULL);
    llmc_rt_status st = rt_prep_take(&f->operands, rt_plan_of(f->plan)->n_operands,
                                     d->inputs.len, "operand", &o->inputs, err);
    if (!st)
        st = rt_prep_take(&f->operands, rt_plan_of(f->plan)->n_operands, d->outputs.len,
                          "operand", &o->outputs, err);
    for (uint32_t k = 0; !st && k < d->inputs.len; k++)
        f->pr->operands[o->inputs.first + k] = fb_vec_u32(r, d->inputs, k);
    for (uint32_t k = 0; !st && k < d->outputs.len; k++)
        f->pr->operands[o->outputs.first + k] = fb_vec_u32(r, d->outputs, k);
    return st;
}

static llmc_rt_status not_resolved(const char *entry, const char *name, llmc_rt_error *err)
{
    return rt_fail(err, LLMC_RT_E_RESOLVER, "%s %s is not in the session's op resolver", NULL,
                   RT_S(entry, name));
}

/* The format of the op's input k, if it has one. */
static const rt_tensor_format *input_format(const prep_fill *f, const rt_prep_op *o, uint32_t k)
{
    return k < o->inputs.len ? &f->pr->tensors[prep_operand(f->pr, o->inputs, k)].format : NULL;
}

/* What decides the op's entries (operands prepared). */
static rt_op_key op_key(const prep_fill *f, const rt_prep_op *o)
{
    const rt_tensor_format *in0 = input_format(f, o, 0), *in1 = input_format(f, o, 1);
    rt_op_key key = {o->code, o->kind, {in0 ? in0->dtype : -1, in1 ? in1->dtype : -1},
                     {in0 ? in0->layout : LLMC_RT_LAYOUT_Dense, in1 ? in1->layout : LLMC_RT_LAYOUT_Dense},
                     rt_plan_of(f->plan)->prefill_kernel, rt_plan_of(f->plan)->kv_cache_dtype};
    return key;
}

/* The op's entries from the session's op resolver (operands prepared);
 * *entry: its code's. */
static llmc_rt_status resolve_op(const prep_fill *f, rt_prep_op *o,
                                 const llmc_rt_op_entry **entry, llmc_rt_error *err)
{
    rt_op_key key = op_key(f, o);
    rt_op_needs need = rt_op_needs_of(&key);
    *entry = f->ops->op[need.op];
    o->exec = *entry ? (*entry)->exec : NULL;
    o->unary = need.unary >= 0 ? f->ops->unary[need.unary] : NULL;
    o->binary.f32 = need.binary >= 0 ? f->ops->binary[need.binary] : NULL;
    o->binary.any_dtype = need.binary_any_dtype ? f->ops->binary_any_dtype : NULL;
    o->gather = need.gather >= 0 ? f->ops->gather[need.gather] : NULL;
    o->linear = need.linear >= 0 ? f->ops->linear[need.linear] : NULL;
    o->kv_cache = need.kv_cache >= 0 ? f->ops->kv_cache[need.kv_cache] : NULL;
    if (!o->exec)
        return not_resolved("op", rt_op_code_name(o->code), err);
    if (need.unary >= 0 && !o->unary)
        return not_resolved("Unary kind", rt_unary_kind_name(need.unary), err);
    if (need.binary >= 0 && !o->binary.f32)
        return not_resolved("Binary kind", rt_binary_kind_name(need.binary), err);
    if (need.binary_any_dtype && !o->binary.any_dtype)
        return not_resolved("LLMC_RT_BINARY_ANY_DTYPE for Binary kind",
                            rt_binary_kind_name(o->kind), err);
    if (need.gather >= 0 && !o->gather)
        return not_resolved("Gather kernel", rt_gather_kernel_name(need.gather), err);
    if (need.linear >= 0 && !o->linear)
        return not_resolved("Linear kernel", rt_linear_kernel_name(need.linear), err);
    if (o->code == LLMC_RT_OP_Attention && !o->kv_cache)
        return not_resolved("KV cache", rt_kv_cache_name(need.kv_cache), err);
    return LLMC_RT_OK;
}

static llmc_rt_status prepare_op(fb_reader *r, prep_fill *f, uint32_t i, llmc_rt_error *err)
{
    rt_prep_op *o = &f->pr->ops[i];
    rt_op_desc d;
    const llmc_rt_op_entry *entry = NULL;
    llmc_rt_status st = rt_read_op(r, f->plan, i, &d, err);
    if (st)
        return st;
    memset(o, 0, sizeof *o);
    copy_op_scalars(&d, o);
    st = prepare_operands(r, f, &d, o, err);
    if (!st)
        st = resolve_op(f, o, &entry, err);
    if (!st && entry->prepare) {
        struct llmc_rt_op_prep prep = {r, f, &d, o};
        st = entry->prepare(&prep, err);
    }
    if (st)
        return rt_prefix(err, st, "op %u (%s '%s'): ", RT_N(i),
                         RT_S(rt_op_code_name(d.code), d.name));
    return LLMC_RT_OK;
}

/* ---- IO bindings and the KV store --------------------------------------- */

/* A PastKey/PastValue input's slot at byte `offset` of the KV store: the
 * tensor at P = max_context; *bytes is its size. */
static llmc_rt_status kv_slot_at(const llmc_rt_session *s, const rt_prep_tensor *t,
                                 uint64_t offset, kv_slot *slot, uint64_t *bytes,
                                 llmc_rt_error *err)
{
    int64_t dims[LLMC_RT_MAX_RANK];
    llmc_rt_status st = rt_dims_at(&rt_state(s)->prepared->affines[t->dims], t->rank, &t->format, 0,
                                   rt_plan_of(rt_state(s)->plan)->max_context, dims, bytes, LLMC_RT_E_CORRUPT, err);
    if (st)
        return st;
    slot->data = (float *)(void *)(rt_state(s)->kv + offset); /* verified: rank 4 */
    slot->heads = dims[0] * dims[1];
    slot->rows = dims[2];
    slot->row_len = dims[3];
    return LLMC_RT_OK;
}

static void copy_binding(const rt_io_desc *d, rt_prep_io *io)
{
    memset(io, 0, sizeof *io);
    io->tensor = d->tensor;
    io->role = d->role;
    io->layer = d->layer;
}

/* Inputs in plan order; the KV store's slots follow the order of the
 * PastKey/PastValue inputs, as the verifier sized it (kv_bytes). */
static llmc_rt_status prepare_inputs(fb_reader *r, const llmc_rt_session *s, rt_prepared *pr,
                                     llmc_rt_error *err)
{
    uint64_t offset = 0, bytes;
    for (uint32_t i = 0; i < rt_plan_of(rt_state(s)->plan)->n_inputs; i++) {
        rt_io_desc d;
        rt_prep_io *io = &pr->inputs[i];
        llmc_rt_status st = rt_read_io(r, rt_state(s)->plan, 0, i, &d, err);
        if (st)
            return st;
        copy_binding(&d, io);
        io->has_slot = d.role == ROLE_PAST_KEY || d.role == ROLE_PAST_VALUE;
        if (!io->has_slot)
            continue;
        st = kv_slot_at(s, &pr->tensors[d.tensor], offset, &io->slot, &bytes, err);
        if (st)
            return rt_prefix(err, st, "input %u: ", RT_N(i), NULL);
        offset += align64(bytes);
    }
    return LLMC_RT_OK;
}

/* The first input of `role` and `layer`, or NULL. */
static const rt_prep_io *input_of(const llmc_rt_plan *p, const rt_prepared *pr, int role,
                                  int32_t layer)
{
    for (uint32_t i = 0; i < rt_plan_of(p)->n_inputs; i++)
        if (pr->inputs[i].role == role && pr->inputs[i].layer == layer)
            return &pr->inputs[i];
    return NULL;
}

/* Outputs in plan order; a PresentKey/PresentValue output shares the slot
 * of the PastKey/PastValue input of its layer. */
static llmc_rt_status prepare_outputs(fb_reader *r, const llmc_rt_plan *p, rt_prepared *pr,
                                      llmc_rt_error *err)
{
    for (uint32_t i = 0; i < rt_plan_of(p)->n_outputs; i++) {
        rt_io_desc d;
        rt_prep_io *io = &pr->outputs[i];
        llmc_rt_status st = rt_read_io(r, p, 1, i, &d, err);
        if (st)
            return st;
        copy_binding(&d, io);
        int past = d.role == ROLE_PRESENT_KEY     ? ROLE_PAST_KEY
                   : d.role == ROLE_PRESENT_VALUE ? ROLE_PAST_VALUE
                                                  : -1;
        const rt_prep_io *in = past < 0 ? NULL : input_of(p, pr, past, d.layer);
        io->has_slot = in != NULL;
        if (in)
            io->slot = in->slot;
    }
    return LLMC_RT_OK;
}

static bool has_role(const rt_prep_io *io, uint32_t n, int role)
{
    for (uint32_t i = 0; i < n; i++)
        if (io[i].role == role)
            return true;
    return false;
}

/* True when no Affine of the pool (every one the runs evaluate) depends on
 * S or P. */
static bool pool_is_static(const rt_prepared *pr, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (pr->affines[k].s || pr->affines[k].p)
            return false;
    return true;
}

/* ---- init ---------------------------------------------------------------- */

/* Points the tables into working memory at `at` (laid out by tables). */
static rt_prepared *tables_at(uint8_t *at, const prep_layout *l)
{
    rt_prepared *pr = (rt_prepared *)(void *)at;
    memset(pr, 0, sizeof *pr);
    pr->tensors = (rt_prep_tensor *)(void *)(at + l->tensors);
    pr->ops = (rt_prep_op *)(void *)(at + l->ops);
    pr->inputs = (rt_prep_io *)(void *)(at + l->inputs);
    pr->outputs = (rt_prep_io *)(void *)(at + l->outputs);
    pr->regions = (rt_prep_region *)(void *)(at + l->regions);
    pr->affines = (rt_affine *)(void *)(at + l->affines);
    pr->operands = (uint32_t *)(void *)(at + l->operands);
    return pr;
}

/* Decodes the whole plan into the tables, in the order the verifier
 * counted the pools (count_pools). */
static llmc_rt_status prepare_tables(llmc_rt_session *s, rt_prepared *pr,
                                     const llmc_rt_op_resolver *ops, llmc_rt_error *err)
{
    fb_reader r = rt_reader(rt_state(s)->plan);
    prep_fill f = {pr, rt_state(s)->plan, ops, 0, 0, 0};
    llmc_rt_status st = LLMC_RT_OK;
    rt_state(s)->prepared = pr;
    for (uint32_t i = 0; !st && i < rt_plan_of(rt_state(s)->plan)->n_tensors; i++)
        st = prepare_tensor(&r, s, &f, i, err);
    for (uint32_t i = 0; !st && i < rt_plan_of(rt_state(s)->plan)->n_ops; i++)
        st = prepare_op(&r, &f, i, err);
    if (!st)
        st = prepare_inputs(&r, s, pr, err);
    if (!st)
        st = prepare_outputs(&r, rt_state(s)->plan, pr, err);
    pr->can_feed = has_role(pr->inputs, rt_plan_of(rt_state(s)->plan)->n_inputs, ROLE_INPUT_IDS) &&
                   has_role(pr->outputs, rt_plan_of(rt_state(s)->plan)->n_outputs, ROLE_LOGITS);
    pr->is_static = pool_is_static(pr, f.affines);
    return st;
}

/* Empties every fused cache and returns its chunks to the pool. */
static void caches_clear(llmc_rt_session *s)
{
    uint32_t stride = 1 + rt_state(s)->chunks_per_cache;
    for (uint32_t c = 0; c < rt_plan_of(rt_state(s)->plan)->n_caches; c++) {
        rt_state(s)->caches[c * stride] = 0;
        for (uint32_t k = 1; k < stride; k++)
            rt_state(s)->caches[c * stride + k] = NO_SLOT;
    }
    rt_state(s)->pool_used = 0;
    rt_state(s)->stats.kv_chunks_used = 0;
}

/* Points the session's pieces into working memory starting at `base`. */
static void carve(llmc_rt_session *s, const llmc_rt_plan *plan, uint32_t context, uint8_t *base,
                  const mem_layout *m)
{
    memset(s, 0, sizeof *s);
    rt_state(s)->plan = plan;
    rt_state(s)->arena = base;
    rt_state(s)->kv = base + m->kv;
    rt_state(s)->caches = (uint32_t *)(void *)(base + m->table);
    rt_state(s)->kv_pool = base + m->pool;
    rt_state(s)->chunks_per_cache = m->chunks_per_cache;
    rt_state(s)->pool_chunks = m->pool_chunks;
    rt_state(s)->context = context;
    rt_state(s)->last_S = NO_RUN;
    rt_state(s)->stats.kv_chunks = m->pool_chunks;
}

llmc_rt_status llmc_rt_session_init_ops(llmc_rt_session *s, const llmc_rt_plan *plan,
                                        uint32_t context, const llmc_rt_op_resolver *ops,
                                        void *memory, size_t memory_size, llmc_rt_error *err)
{
    mem_layout m;
    if (!s || !plan || !rt_plan_of(plan)->base || !ops || !memory)
        return rt_fail(err, LLMC_RT_E_ARG, "session, plan, op resolver and memory must not be "
                       "NULL", NULL, NULL);
    if (context < 1 || context > rt_plan_of(plan)->max_context)
        return rt_fail(err, LLMC_RT_E_ARG, "context %u outside [1, max_context %u]",
                       RT_N(context, rt_plan_of(plan)->max_context), NULL);
    if (!rt_plan_of(plan)->kernels && !rt_kernels_for_target(rt_plan_of(plan)->target, err)) /* says why */
        return LLMC_RT_E_TARGET;
    size_t need = llmc_rt_session_memory_for(plan, context);
    if (need == SIZE_MAX || memory_size < need || !layout_for(plan, context, &m))
        return rt_fail(err, LLMC_RT_E_MEMORY, "working memory has %u bytes; the plan needs %u",
                       RT_N((int64_t)memory_size, (int64_t)need), NULL);
    uint8_t *base = memory;
    base += (64 - (uintptr_t)base % 64) % 64;
    carve(s, plan, context, base, &m);
    llmc_rt_status st = prepare_tables(s, tables_at(base + m.prep, &m.tables), ops, err);
    if (st) {
        memset(s, 0, sizeof *s); /* not a session: runs refuse it */
        return st;
    }
    caches_clear(s);
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_session_init_for(llmc_rt_session *s, const llmc_rt_plan *plan,
                                        uint32_t context, void *memory, size_t memory_size,
                                        llmc_rt_error *err)
{
    return llmc_rt_session_init_ops(s, plan, context, &llmc_rt_all_ops, memory, memory_size,
                                    err);
}

llmc_rt_status llmc_rt_session_init(llmc_rt_session *s, const llmc_rt_plan *plan,
                                    void *memory, size_t memory_size, llmc_rt_error *err)
{
    return llmc_rt_session_init_for(s, plan, plan ? rt_plan_of(plan)->max_context : 0, memory,
                                    memory_size, err);
}

void llmc_rt_session_reset(llmc_rt_session *s)
{
    if (!s || !rt_state(s)->plan || !rt_state(s)->caches)
        return;
    rt_state(s)->position = 0;
    caches_clear(s);
}

void llmc_rt_session_set_parallel(llmc_rt_session *s, llmc_rt_parallel_fn fn, void *pool)
{
    if (!s)
        return;
    rt_state(s)->parallel = fn;
    rt_state(s)->parallel_pool = fn ? pool : NULL;
}

void llmc_rt_session_set_observer(llmc_rt_session *s, llmc_rt_op_observer fn, void *ctx)
{
    if (!s)
        return;
    rt_state(s)->observer = fn;
    rt_state(s)->observer_ctx = fn ? ctx : NULL;
}

const llmc_rt_plan *llmc_rt_session_plan(const llmc_rt_session *s)
{
    return s ? rt_state(s)->plan : NULL;
}

llmc_rt_status llmc_rt_session_stats(const llmc_rt_session *s, llmc_rt_stats *out)
{
    if (!s || !rt_state(s)->plan || !out)
        return LLMC_RT_E_ARG;
    *out = rt_state(s)->stats;
    out->position = rt_state(s)->position;
    out->context = rt_state(s)->context;
    return LLMC_RT_OK;
}
