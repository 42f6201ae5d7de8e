/* Chunked prefill: a prompt in chunks of C tokens, every subgraph of every
 * chunk on the delegate, the other ops on the calling thread, nodes picked
 * in or out of order (paper 003 §3.4; chunked_internal.h has the model). */
#include <string.h>

#include "chunked_internal.h"
#include "rt_msg.h"
#include "llmc_rt_internal.h"

enum { LANE_CPU, LANE_DELEGATE };

/* ---- memory ---------------------------------------------------------------- */

typedef struct {
    uint64_t nodes, state, subgraphs, tensors, ids, ops, descs, graphs, io, lanes, total;
} chunk_layout;

static uint64_t take(uint64_t *at, uint64_t bytes)
{
    uint64_t start = *at;
    *at += (bytes + 63) & ~(uint64_t)63;
    return start;
}

static chunk_layout layout_of(const rt_chunk_sizes *z, uint32_t lanes)
{
    chunk_layout l;
    uint64_t at = (sizeof(llmc_rt_chunked) + 63) & ~(uint64_t)63;
    l.nodes = take(&at, (uint64_t)z->max_nodes * sizeof(rt_chunk_node));
    l.state = take(&at, (uint64_t)z->max_chunks * z->max_nodes);
    l.subgraphs = take(&at, (uint64_t)z->n_subgraphs * sizeof(llmc_rt_subgraph));
    l.tensors = take(&at, z->tensor_entries * sizeof(llmc_rt_sg_tensor));
    l.ids = take(&at, z->tensor_entries * sizeof(uint32_t));
    l.ops = take(&at, z->op_entries * sizeof(llmc_rt_sg_op));
    l.descs = take(&at, (uint64_t)z->n_subgraphs * sizeof(rt_subgraph_desc));
    l.graphs = take(&at, (uint64_t)z->n_subgraphs * sizeof(void *));
    l.io = take(&at, (uint64_t)(z->max_io + 1) * sizeof(void *));
    l.lanes = take(&at, (uint64_t)(lanes - 1) * z->lane_bytes);
    l.total = at + 63; /* the caller's block may start anywhere */
    return l;
}

size_t llmc_rt_chunked_memory(const llmc_rt_plan *plan, uint32_t context, uint32_t lanes)
{
    rt_chunk_sizes z;
    if (!plan || !rt_plan_of(plan)->base || lanes < 1 || lanes > CHUNK_MAX_LANES ||
        rt_chunk_measure(plan, context, &z, NULL))
        return SIZE_MAX;
    uint64_t total = layout_of(&z, lanes).total;
    return total > SIZE_MAX ? SIZE_MAX : (size_t)total;
}

/* ---- init and release ------------------------------------------------------ */

static llmc_rt_status check_session_for_chunks(const llmc_rt_session *s, uint32_t lanes,
                                               llmc_rt_error *err)
{
    if (!s || !rt_state(s)->plan || !rt_state(s)->prepared || lanes < 1 || lanes > CHUNK_MAX_LANES)
        return rt_fail(err, LLMC_RT_E_ARG, "chunked prefill: no session, or lanes %u outside "
                       "[1, %u]", RT_N(lanes, CHUNK_MAX_LANES), NULL);
    if (!rt_state(s)->prepared->can_feed || rt_plan_of(rt_state(s)->plan)->kv_bytes)
        return rt_fail(err, LLMC_RT_E_ARG, "chunked prefill needs InputIds and Logits bindings "
                       "and fused Attention caches (no past_key_values inputs)", NULL, NULL);
    return LLMC_RT_OK;
}

static void carve(llmc_rt_chunked *c, uint8_t *base, const chunk_layout *l, const rt_chunk_sizes *z)
{
    c->nodes = (rt_chunk_node *)(void *)(base + l->nodes);
    c->state = base + l->state;
    c->subgraphs = (llmc_rt_subgraph *)(void *)(base + l->subgraphs);
    c->graphs = (void **)(void *)(base + l->graphs);
    c->io = (void **)(void *)(base + l->io);
    c->sg_tensors = (const llmc_rt_sg_tensor *)(const void *)(base + l->tensors);
    c->sg_ids = (const uint32_t *)(const void *)(base + l->ids);
    c->lane[0] = rt_state(c->s)->arena;
    for (uint32_t k = 1; k < c->lanes; k++)
        c->lane[k] = base + l->lanes + (uint64_t)(k - 1) * z->lane_bytes;
}

void llmc_rt_chunked_release(llmc_rt_chunked *c)
{
    if (!c)
        return;
    for (uint32_t k = 0; c->has_delegate && k < c->prepared; k++)
        c->delegate.release(c->delegate.ctx, c->graphs[k]);
    c->prepared = 0;
}

static llmc_rt_status prepare_all(llmc_rt_chunked *c, llmc_rt_error *err)
{
    for (uint32_t k = 0; c->has_delegate && k < c->n_subgraphs; k++) {
        c->graphs[k] = NULL;
        llmc_rt_status st = c->delegate.prepare(c->delegate.ctx, &c->subgraphs[k], &c->graphs[k],
                                                err);
        if (st) {
            llmc_rt_chunked_release(c);
            return rt_prefix(err, st, "delegate prepare of subgraph %u '%s': ", RT_N(k),
                             RT_S(c->subgraphs[k].name));
        }
        c->prepared = k + 1;
    }
    return LLMC_RT_OK;
}

static llmc_rt_status check_delegate(const llmc_rt_delegate *d, llmc_rt_error *err)
{
    if (d && (!d->prepare || !d->execute || !d->wait || !d->release))
        return rt_fail(err, LLMC_RT_E_ARG, "delegate lacks a function", NULL, NULL);
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_chunked_init(llmc_rt_chunked **out, llmc_rt_session *s,
                                    const llmc_rt_delegate *delegate, uint32_t lanes,
                                    void *memory, size_t memory_size, llmc_rt_error *err)
{
    rt_chunk_sizes z;
    llmc_rt_status st = check_session_for_chunks(s, lanes, err);
    if (!st)
        st = check_delegate(delegate, err);
    if (!st && (!out || !memory))
        st = rt_fail(err, LLMC_RT_E_ARG, "chunked prefill: out or memory is NULL", NULL, NULL);
    if (!st)
        st = rt_chunk_measure(rt_state(s)->plan, rt_state(s)->context, &z, err);
    if (st)
        return st;
    chunk_layout l = layout_of(&z, lanes);
    if (l.total > memory_size)
        return rt_fail(err, LLMC_RT_E_MEMORY, "chunked prefill needs %u bytes; %u given",
                       RT_N((int64_t)l.total, (int64_t)memory_size), NULL);
    uint8_t *base = (uint8_t *)memory + ((64 - ((uintptr_t)memory & 63)) & 63);
    llmc_rt_chunked *c = (llmc_rt_chunked *)(void *)base;
    memset(c, 0, sizeof *c);
    c->s = s;
    c->has_delegate = delegate != NULL;
    if (delegate)
        c->delegate = *delegate;
    c->chunk = z.chunk;
    c->lanes = lanes;
    c->max_chunks = z.max_chunks;
    c->n_subgraphs = z.n_subgraphs;
    c->out_of_order = 1;
    carve(c, base, &l, &z);
    st = rt_chunk_describe(c, &z, (llmc_rt_sg_tensor *)(void *)(base + l.tensors),
                           (uint32_t *)(void *)(base + l.ids),
                           (llmc_rt_sg_op *)(void *)(base + l.ops),
                           (rt_subgraph_desc *)(void *)(base + l.descs), err);
    if (!st)
        st = prepare_all(c, err);
    if (!st)
        *out = c;
    return st;
}

void llmc_rt_chunked_set_schedule(llmc_rt_chunked *c, int out_of_order, const uint64_t *cost)
{
    if (!c)
        return;
    c->out_of_order = out_of_order != 0;
    for (uint32_t j = 0; cost && j < c->n_nodes; j++)
        c->nodes[j].cost = cost[j] < RT_CHUNK_COST_CAP ? cost[j] : RT_CHUNK_COST_CAP;
}

void llmc_rt_chunked_set_observer(llmc_rt_chunked *c, llmc_rt_chunk_observer fn, void *ctx)
{
    if (!c)
        return;
    c->observer = fn;
    c->observer_ctx = ctx;
}

void llmc_rt_chunked_set_logits(llmc_rt_chunked *c, llmc_rt_chunk_logits_fn fn, void *ctx)
{
    if (!c)
        return;
    c->logits_fn = fn;
    c->logits_ctx = ctx;
}

uint32_t llmc_rt_chunked_nodes(const llmc_rt_chunked *c)
{
    return c ? c->n_nodes : 0;
}

static int lane_of(const llmc_rt_chunked *c, uint32_t j)
{
    return c->has_delegate && c->nodes[j].subgraph != NO_SUBGRAPH ? LANE_DELEGATE : LANE_CPU;
}

static llmc_rt_chunk_event event_of(const llmc_rt_chunked *c, uint32_t i, uint32_t j, int end)
{
    const rt_chunk_node *n = &c->nodes[j];
    llmc_rt_chunk_event e = {i, j, lane_of(c, j), end, n->subgraph, n->first_op, n->n_ops};
    return e;
}

llmc_rt_status llmc_rt_chunked_node(const llmc_rt_chunked *c, uint32_t k,
                                    llmc_rt_chunk_event *info)
{
    if (!c || !info || k >= c->n_nodes)
        return LLMC_RT_E_ARG;
    *info = event_of(c, 0, k, 0);
    return LLMC_RT_OK;
}

/* ---- dependencies (Eqs. 2-3) and the choice (Eq. 6) ----------------------- */

static uint8_t *state_at(const llmc_rt_chunked *c, uint32_t i, uint32_t j)
{
    return &c->state[(uint64_t)i * c->n_nodes + j];
}

/* Nodes chunk i runs: the last one (or every one, for their logits)
 * computes the logits too. */
static uint32_t nodes_of(const llmc_rt_chunked *c, uint32_t i)
{
    return i + 1 < c->n_chunks && !c->logits_fn ? c->body_nodes : c->n_nodes;
}

static bool chunk_done(const llmc_rt_chunked *c, uint32_t i)
{
    return *state_at(c, i, nodes_of(c, i) - 1) == NODE_DONE;
}

static bool ready(const llmc_rt_chunked *c, uint32_t i, uint32_t j)
{
    if (i >= c->n_chunks || j >= nodes_of(c, i) || *state_at(c, i, j) != NODE_PENDING)
        return false;
    bool after_own = j == 0 ? i < c->lanes || chunk_done(c, i - c->lanes) /* its lane is free */
                            : *state_at(c, i, j - 1) == NODE_DONE;    /* Eq. 3 */
    bool after_cache = !c->nodes[j].attention || i == 0 ||
                       *state_at(c, i - 1, j) == NODE_DONE;          /* Eq. 2 */
    return after_own && after_cache;
}

/* Eq. 6: the time of the other lane's nodes that finishing (i, j) makes
 * ready, positive for a CPU node (it feeds the NPU), negative for a
 * delegate node (less CPU work behind it keeps the NPU busy sooner). */
static int64_t contribution(llmc_rt_chunked *c, uint32_t i, uint32_t j)
{
    const uint32_t next[3][2] = {{i, j + 1}, {i + 1, j}, {i + c->lanes, 0}};
    int lane = lane_of(c, j);
    int64_t sum = 0; /* three costs of at most 2^56 */
    *state_at(c, i, j) = NODE_DONE;
    for (int k = 0; k < 3; k++)
        if (next[k][0] < c->n_chunks && next[k][1] < nodes_of(c, next[k][0]) &&
            lane_of(c, next[k][1]) != lane && ready(c, next[k][0], next[k][1]))
            sum += (int64_t)c->nodes[next[k][1]].cost;
    *state_at(c, i, j) = NODE_PENDING;
    return lane == LANE_CPU ? sum : -sum;
}

/* The node `lane` runs next: in order, its first pending node if ready;
 * out of order, the ready one of largest contribution (ties: the earliest). */
static bool pick(llmc_rt_chunked *c, int lane, uint32_t *ci, uint32_t *cj)
{
    bool found = false;
    int64_t best = 0;
    for (uint32_t i = 0; i < c->n_chunks; i++)
        for (uint32_t j = 0; j < nodes_of(c, i); j++) {
            if (lane_of(c, j) != lane || *state_at(c, i, j) != NODE_PENDING)
                continue;
            if (!c->out_of_order)
                return (*ci = i, *cj = j, ready(c, i, j));
            if (!ready(c, i, j))
                continue;
            int64_t score = contribution(c, i, j);
            if (!found || score > best)
                found = true, best = score, *ci = i, *cj = j;
        }
    return found;
}

/* ---- running nodes ---------------------------------------------------------- */

static uint8_t *lane_for(const llmc_rt_chunked *c, uint32_t i)
{
    return c->lane[i % c->lanes];
}

static int64_t position_of(const llmc_rt_chunked *c, uint32_t i)
{
    return c->P0 + (int64_t)i * c->chunk;
}

static void notify(const llmc_rt_chunked *c, uint32_t i, uint32_t j, int end)
{
    if (c->observer) {
        llmc_rt_chunk_event e = event_of(c, i, j, end);
        c->observer(c->observer_ctx, &e);
    }
}

/* A chunk's first node places its tokens (and positions) in its lane. */
static llmc_rt_status begin_node(llmc_rt_chunked *c, uint32_t i, uint32_t j, llmc_rt_error *err)
{
    *state_at(c, i, j) = NODE_RUNNING;
    notify(c, i, j, 0);
    if (j != 0)
        return LLMC_RT_OK;
    return rt_session_feed_inputs(c->s, c->tokens + (uint64_t)i * c->chunk, rt_chunk_rows(c, i),
                                  position_of(c, i), lane_for(c, i), &c->moved, err);
}

/* Chunk i's Logits output, before another chunk takes its lane. */
static llmc_rt_status hand_logits(llmc_rt_chunked *c, uint32_t i, llmc_rt_error *err)
{
    const rt_prepared *pr = rt_state(c->s)->prepared;
    for (uint32_t k = 0; k < rt_plan_of(rt_state(c->s)->plan)->n_outputs; k++) {
        if (pr->outputs[k].role != ROLE_LOGITS)
            continue;
        rt_view v;
        llmc_rt_status st = rt_session_view(c->s, lane_for(c, i), pr->outputs[k].tensor,
                                            rt_chunk_rows(c, i), position_of(c, i), &v, err);
        if (!st)
            c->logits_fn(c->logits_ctx, i * c->chunk, &v);
        return st;
    }
    return LLMC_RT_OK;
}

static llmc_rt_status end_node(llmc_rt_chunked *c, uint32_t i, uint32_t j, uint64_t *left,
                               llmc_rt_error *err)
{
    *state_at(c, i, j) = NODE_DONE;
    (*left)--;
    notify(c, i, j, 1);
    return c->logits_fn && j + 1 == c->n_nodes ? hand_logits(c, i, err) : LLMC_RT_OK;
}

/* On the calling thread at the chunk's own rows (a padded chunk's real ones). */
static llmc_rt_status run_on_cpu(llmc_rt_chunked *c, uint32_t i, uint32_t j, uint64_t *left,
                                 llmc_rt_error *err)
{
    const rt_chunk_node *n = &c->nodes[j];
    llmc_rt_status st = begin_node(c, i, j, err);
    if (!st)
        st = rt_session_run_ops(c->s, n->first_op, n->n_ops, rt_chunk_rows(c, i),
                                position_of(c, i), lane_for(c, i), &c->moved, err);
    if (!st)
        st = end_node(c, i, j, left, err);
    return st;
}

/* Boundary tensor k of subgraph g in chunk i's lane at S = C; an input of
 * a short (last) chunk gets zero rows past its real ones (row form: the
 * first r rows of the tensor at S = C are the tensor at S = r). */
static llmc_rt_status bind(llmc_rt_chunked *c, uint32_t i, const llmc_rt_subgraph *g, uint32_t k,
                           llmc_rt_error *err)
{
    uint32_t t = c->sg_ids[g->tensors - c->sg_tensors + k];
    rt_view full, real;
    llmc_rt_status st = rt_session_view(c->s, lane_for(c, i), t, c->chunk, position_of(c, i),
                                        &full, err);
    if (!st && k < g->n_inputs && rt_chunk_rows(c, i) < c->chunk) {
        st = rt_session_view(c->s, lane_for(c, i), t, rt_chunk_rows(c, i), position_of(c, i),
                             &real, err);
        if (!st)
            memset((uint8_t *)full.data + rt_view_bytes(&real), 0,
                   (size_t)(rt_view_bytes(&full) - rt_view_bytes(&real)));
    }
    c->io[k] = full.data;
    return st;
}

static llmc_rt_status submit(llmc_rt_chunked *c, uint32_t i, uint32_t j, llmc_rt_error *err)
{
    uint32_t g = c->nodes[j].subgraph;
    const llmc_rt_subgraph *sg = &c->subgraphs[g];
    llmc_rt_status st = begin_node(c, i, j, err);
    for (uint32_t k = 0; !st && k < sg->n_inputs + sg->n_outputs; k++)
        st = bind(c, i, sg, k, err);
    if (!st)
        st = c->delegate.execute(c->delegate.ctx, c->graphs[g], c->io, err);
    if (st)
        return rt_prefix(err, st, "chunk %u subgraph %u '%s': ", RT_N(i, g), RT_S(sg->name));
    c->busy = true;
    c->busy_chunk = i;
    c->busy_node = j;
    return LLMC_RT_OK;
}

/* Asks the delegate whether its node finished (block: waits for it). */
static llmc_rt_status collect(llmc_rt_chunked *c, int block, uint64_t *left, llmc_rt_error *err)
{
    int finished = 0;
    llmc_rt_status st = c->delegate.wait(c->delegate.ctx, block, &finished, err);
    if (!st && !finished && block)
        st = rt_fail(err, LLMC_RT_E_DELEGATE, "wait returned before the run finished", NULL, NULL);
    if (st || finished)
        c->busy = false;
    if (st)
        return rt_prefix(err, st, "chunk %u subgraph %u '%s': ",
                         RT_N(c->busy_chunk, c->nodes[c->busy_node].subgraph),
                         RT_S(c->subgraphs[c->nodes[c->busy_node].subgraph].name));
    return finished ? end_node(c, c->busy_chunk, c->busy_node, left, err) : LLMC_RT_OK;
}

/* One step of the loop: hand the delegate a node if it is idle, else run
 * a CPU node, else wait for the delegate. */
static llmc_rt_status step(llmc_rt_chunked *c, uint64_t *left, llmc_rt_error *err)
{
    uint32_t i, j;
    llmc_rt_status st = c->busy ? collect(c, 0, left, err) : LLMC_RT_OK;
    if (!st && c->has_delegate && !c->busy && pick(c, LANE_DELEGATE, &i, &j))
        st = submit(c, i, j, err);
    if (st)
        return st;
    if (pick(c, LANE_CPU, &i, &j)) {
        st = run_on_cpu(c, i, j, left, err);
        return st ? rt_prefix(err, st, "chunk %u node %u: ", RT_N(i, j), NULL) : LLMC_RT_OK;
    }
    if (c->busy)
        return collect(c, 1, left, err);
    return rt_fail(err, LLMC_RT_E_EXEC, "chunked prefill: %u nodes left and none can run",
                   RT_N((int64_t)*left), NULL);
}

static uint64_t reset_states(llmc_rt_chunked *c)
{
    uint64_t left = 0;
    for (uint32_t i = 0; i < c->n_chunks; i++)
        for (uint32_t j = 0; j < c->n_nodes; j++) {
            bool runs = j < nodes_of(c, i);
            *state_at(c, i, j) = runs ? NODE_PENDING : NODE_DONE;
            left += runs;
        }
    return left;
}

static llmc_rt_status run_chunks(llmc_rt_chunked *c, llmc_rt_error *err)
{
    uint64_t left = reset_states(c);
    llmc_rt_status st = LLMC_RT_OK;
    while (!st && left)
        st = step(c, &left, err);
    if (st && c->busy) { /* its buffers are ours: let it finish first */
        int finished;
        c->delegate.wait(c->delegate.ctx, 1, &finished, NULL);
        c->busy = false;
    }
    return st;
}

llmc_rt_status llmc_rt_chunked_prefill(llmc_rt_chunked *c, const int64_t *tokens, uint32_t n,
                                       float *logits, llmc_rt_error *err)
{
    if (!c || !c->s || (!tokens && n))
        return rt_fail(err, LLMC_RT_E_ARG, "chunked prefill: no state or tokens", NULL, NULL);
    llmc_rt_session *s = c->s;
    if (n == 0 || (uint64_t)rt_state(s)->position + n > rt_state(s)->context)
        return rt_fail(err, LLMC_RT_E_BOUNDS, "S=%u P=%u outside 1 <= S, S + P <= context %u",
                       RT_N(n, rt_state(s)->position, rt_state(s)->context), NULL);
    c->tokens = tokens;
    c->n_tokens = n;
    c->n_chunks = (n + c->chunk - 1) / c->chunk;
    c->P0 = rt_state(s)->position;
    c->moved = 0;
    llmc_rt_status st = run_chunks(c, err);
    uint32_t last = c->n_chunks - 1;
    if (!st)
        st = rt_session_take_outputs(s, rt_chunk_rows(c, last), position_of(c, last),
                                     lane_for(c, last), logits, &c->moved, err);
    rt_state(s)->stats.bytes_last = c->moved;
    rt_state(s)->stats.bytes_total += c->moved;
    rt_state(s)->stats.runs++;
    rt_state(s)->last_S = NO_RUN; /* the outputs may sit in another lane */
    if (!st)
        rt_state(s)->position += n;
    return st;
}
