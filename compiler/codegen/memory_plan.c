/* Static memory planning: every Arena tensor gets a byte range of one
 * arena, sized for the worst case within the bounds, and tensors alive at
 * the same time never share bytes.
 *
 * Offsets come from a greedy planner in the spirit of TFLite Micro's
 * GreedyMemoryPlanner: tensors are placed largest first, each into the
 * smallest gap left between the already placed tensors whose lifetimes
 * overlap its own (or above them all).  Placing large tensors first keeps
 * the small ones from fragmenting the space the large ones need. */
#include <stdlib.h>
#include <string.h>

#include "plan_model.h"

#define ARENA_ALIGN 64

static uint64_t round_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

static int fail_tensor(llmc_error *err, const cg_tensor *t, const char *what)
{
    return llmc_fail(err, LLMC_E_UNSUPPORTED, "tensor '%s': %s", t->name, what);
}

/* Bytes at (S, P) through the runtime's traits (tensor_traits.h), or -1 if
 * a dim is negative there, -2 on overflow or a layout the dims cannot have. */
static int64_t bytes_at(const cg_tensor *t, int64_t S, int64_t P)
{
    int64_t dims[LLMC_MAX_RANK];
    uint64_t bytes;
    for (int k = 0; k < t->rank; k++) {
        dims[k] = t->dims[k].c + t->dims[k].s * S + t->dims[k].p * P;
        if (dims[k] < 0)
            return -1;
    }
    rt_tensor_format f = cg_tensor_format(t);
    if (!rt_tensor_bytes(&f, t->rank, dims, &bytes) || bytes > (uint64_t)INT64_MAX)
        return -2;
    return (int64_t)bytes;
}

/* With every S and P coefficient >= 0 each dim grows with S and with P, and
 * so do the bytes of every layout, so they peak on the line S + P =
 * max_context; walk it (only the end points when the tensor depends on just
 * one of the symbols). */
static int worst_case_bytes(const cg_tensor *t, uint32_t max_context, int64_t *out,
                            llmc_error *err)
{
    bool uses_s = false, uses_p = false;
    for (int k = 0; k < t->rank; k++) {
        if (t->dims[k].s < 0 || t->dims[k].p < 0)
            return fail_tensor(err, t, "a dim shrinks as S or P grows");
        uses_s |= t->dims[k].s != 0;
        uses_p |= t->dims[k].p != 0;
    }
    if ((uses_s || uses_p) && max_context == 0)
        return fail_tensor(err, t, "depends on S or P but max_context is 0");
    int64_t first = uses_p ? 1 : max_context, last = uses_s ? max_context : 1;
    if (!uses_s && !uses_p)
        first = last = 0;
    int64_t worst = bytes_at(t, first ? 1 : 0, 0);   /* the smallest point must be valid too */
    for (int64_t S = first; S <= last && worst >= 0; S++) {
        int64_t n = bytes_at(t, S, S ? max_context - S : 0);
        worst = n < 0 ? n : n > worst ? n : worst;
    }
    if (worst == -1)
        return fail_tensor(err, t, "a dim is negative within the bounds");
    if (worst == -2)
        return fail_tensor(err, t, "its byte size overflows 64 bits within S + P <= max_context");
    *out = worst;
    return LLMC_OK;
}

static int size_tensors(cg_plan *p, uint32_t max_context, llmc_error *err)
{
    for (int i = 0; i < p->n_tensors; i++) {
        cg_tensor *t = &p->tensors[i];
        if (t->is_weight)
            continue;
        int64_t bytes = 0;
        int rc = worst_case_bytes(t, max_context, &bytes, err);
        if (rc)
            return rc;
        if ((uint64_t)bytes > UINT64_MAX - ARENA_ALIGN)
            return fail_tensor(err, t, "its byte size overflows 64 bits");
        t->max_bytes = round_up((uint64_t)bytes, ARENA_ALIGN);
    }
    return LLMC_OK;
}

static void touch(cg_tensor *t, int op)
{
    if (op < t->first_op)
        t->first_op = op;
    if (op > t->last_op)
        t->last_op = op;
}

/* Lifetime = [first op that touches it, last op that touches it]; graph
 * inputs exist before op 0 (-1), graph outputs until after the last (n_ops). */
static void compute_lifetimes(cg_plan *p)
{
    for (int i = 0; i < p->n_tensors; i++) {
        p->tensors[i].first_op = p->n_ops;
        p->tensors[i].last_op = -1;
    }
    for (int i = 0; i < p->n_inputs; i++)
        touch(&p->tensors[p->inputs[i].tensor], -1);
    for (int i = 0; i < p->n_outputs; i++)
        touch(&p->tensors[p->outputs[i].tensor], p->n_ops);
    for (int o = 0; o < p->n_ops; o++) {
        const cg_op *op = &p->ops[o];
        for (int k = 0; k < op->n_inputs; k++)
            touch(&p->tensors[op->inputs[k]], o);
        for (int k = 0; k < op->n_outputs; k++)
            touch(&p->tensors[op->outputs[k]], o);
        for (int k = 0; k < op->n_regions; k++)
            touch(&p->tensors[op->regions[k].src], o);
    }
}

/* Sorting context: qsort has no user pointer, so keys carry what they need. */
typedef struct {
    uint64_t bytes;
    int first_op;
    int index;
} place_key;

static int by_size_then_birth(const void *pa, const void *pb)
{
    const place_key *a = pa, *b = pb;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->first_op != b->first_op)
        return a->first_op < b->first_op ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

typedef struct {
    uint64_t begin, end;
} span;

static int by_begin(const void *pa, const void *pb)
{
    const span *a = pa, *b = pb;
    return (a->begin > b->begin) - (a->begin < b->begin);
}

/* Best fit: the smallest gap between `busy` spans (sorted) that holds
 * `bytes`; if none does, just above the highest one. */
static uint64_t best_fit(const span *busy, int n, uint64_t bytes)
{
    uint64_t cursor = 0, best = UINT64_MAX, best_gap = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        if (busy[i].begin > cursor) {
            uint64_t gap = busy[i].begin - cursor;
            if (gap >= bytes && gap < best_gap) {
                best_gap = gap;
                best = cursor;
            }
        }
        if (busy[i].end > cursor)
            cursor = busy[i].end;
    }
    return best != UINT64_MAX ? best : cursor;
}

static bool needs_bytes(const cg_tensor *t)
{
    return !t->is_weight && t->max_bytes > 0;
}

/* For every step (op index + 1, so that -1 and n_ops fit), the tensors
 * alive during it, as CSR lists.  Finding a tensor's neighbours in time
 * through this index instead of testing every placed tensor keeps the
 * planner near-linear on long graphs. */
typedef struct {
    int *start;   /* n_ops + 3 */
    int *tensor;
} live_index;

static int live_index_build(const cg_plan *p, live_index *li)
{
    int steps = p->n_ops + 2;
    li->start = calloc((size_t)steps + 1, sizeof *li->start);
    if (!li->start)
        return -1;
    for (int i = 0; i < p->n_tensors; i++)
        if (needs_bytes(&p->tensors[i]))
            for (int s = p->tensors[i].first_op + 1; s <= p->tensors[i].last_op + 1; s++)
                li->start[s + 1]++;
    for (int s = 0; s < steps; s++)
        li->start[s + 1] += li->start[s];
    int *fill = malloc(sizeof *fill * (size_t)steps);
    li->tensor = malloc(sizeof *li->tensor * (size_t)(li->start[steps] + 1));
    if (!fill || !li->tensor) {
        free(fill);
        return -1;
    }
    memcpy(fill, li->start, sizeof *fill * (size_t)steps);
    for (int i = 0; i < p->n_tensors; i++)
        if (needs_bytes(&p->tensors[i]))
            for (int s = p->tensors[i].first_op + 1; s <= p->tensors[i].last_op + 1; s++)
                li->tensor[fill[s]++] = i;
    free(fill);
    return 0;
}

/* Byte spans of the placed tensors alive at some step of t's lifetime,
 * each once (seen[j] == stamp marks j as collected), sorted by offset. */
static int collect_busy(const cg_plan *p, const live_index *li, const cg_tensor *t,
                        const bool *placed, int *seen, int stamp, span *busy)
{
    int n = 0;
    for (int s = t->first_op + 1; s <= t->last_op + 1; s++)
        for (int e = li->start[s]; e < li->start[s + 1]; e++) {
            int j = li->tensor[e];
            if (!placed[j] || seen[j] == stamp)
                continue;
            seen[j] = stamp;
            const cg_tensor *o = &p->tensors[j];
            busy[n++] = (span){o->arena_offset, o->arena_offset + o->max_bytes};
        }
    qsort(busy, (size_t)n, sizeof *busy, by_begin);
    return n;
}

static int assign_offsets(cg_plan *p, llmc_error *err)
{
    size_t n = (size_t)p->n_tensors + 1;
    place_key *keys = malloc(sizeof *keys * n);
    span *busy = malloc(sizeof *busy * n);
    bool *placed = calloc(n, sizeof *placed);
    int *seen = malloc(sizeof *seen * n);
    live_index li = {0};
    int rc = LLMC_OK;
    if (!keys || !busy || !placed || !seen || live_index_build(p, &li)) {
        rc = llmc_fail(err, LLMC_E_NOMEM, "out of memory while planning the arena");
        goto out;
    }
    int n_keys = 0;
    for (int i = 0; i < p->n_tensors; i++) {
        cg_tensor *t = &p->tensors[i];
        t->arena_offset = 0;
        seen[i] = -1;
        if (needs_bytes(t))
            keys[n_keys++] = (place_key){t->max_bytes, t->first_op, i};
    }
    qsort(keys, (size_t)n_keys, sizeof *keys, by_size_then_birth);
    p->arena_size = 0;
    for (int k = 0; k < n_keys; k++) {
        cg_tensor *t = &p->tensors[keys[k].index];
        int n_busy = collect_busy(p, &li, t, placed, seen, k, busy);
        t->arena_offset = best_fit(busy, n_busy, t->max_bytes);
        if (t->arena_offset + t->max_bytes > p->arena_size)
            p->arena_size = t->arena_offset + t->max_bytes;
        placed[keys[k].index] = true;
    }
out:
    free(keys);
    free(busy);
    free(placed);
    free(seen);
    free(li.start);
    free(li.tensor);
    return rc;
}

int cg_memory_plan(cg_plan *p, uint32_t max_context, llmc_error *err)
{
    int rc = size_tensors(p, max_context, err);
    if (rc)
        return rc;
    compute_lifetimes(p);
    return assign_offsets(p, err);
}
