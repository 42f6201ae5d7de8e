/* Chunked prefill for the CLI (npu_prefill.h). */
#include "npu_prefill.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llmc_ref_delegate.h"
#include "support/out_file.h"

#define DEFAULT_LANES 2

typedef struct {
    uint32_t chunk, node, subgraph, prefill, first_op, n_ops;
    int lane;
    uint64_t start_ns, end_ns;
} trace_event;

struct llmc_npu {
    llmc_npu_options opt;
    llmc_rt_chunked *chunked;
    void *memory;
    llmc_ref_delegate *ref;
    llmc_rt_delegate table;
    uint64_t started[2];       /* per lane: the running node's start */
    trace_event *events;
    size_t n_events, cap_events;
    uint32_t prefills;
    uint64_t t0;               /* the first prefill's start */
    size_t first_event;        /* the last prefill's first event */
    llmc_npu_figures last;
    bool out_of_memory;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void record(llmc_npu *n, const llmc_rt_chunk_event *e, uint64_t start, uint64_t end)
{
    if (n->n_events == n->cap_events) {
        size_t cap = n->cap_events ? 2 * n->cap_events : 1024;
        trace_event *grown = realloc(n->events, cap * sizeof *grown);
        if (!grown) {
            n->out_of_memory = true;
            return;
        }
        n->events = grown;
        n->cap_events = cap;
    }
    n->events[n->n_events++] = (trace_event){e->chunk,    e->node,  e->subgraph, n->prefills,
                                             e->first_op, e->n_ops, e->lane,     start, end};
}

/* Node starts and ends; the reference delegate's own clock for its nodes
 * (the runtime sees their end only when it next asks). */
static void observe(void *ctx, const llmc_rt_chunk_event *e)
{
    llmc_npu *n = ctx;
    uint64_t t = now_ns();
    if (!e->end) {
        n->started[e->lane] = t;
        return;
    }
    uint64_t start = n->started[e->lane], end = t;
    if (e->lane == 1 && n->ref)
        llmc_ref_delegate_last_run(n->ref, &start, &end);
    record(n, e, start, end);
}

int llmc_npu_start(llmc_npu **out, llmc_rt_session *s, const llmc_npu_options *o,
                   llmc_error *err)
{
    llmc_npu *n = calloc(1, sizeof *n);
    if (!n)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    n->opt = *o;
    uint32_t lanes = o->lanes ? o->lanes : DEFAULT_LANES;
    llmc_rt_stats stats = {0};
    llmc_rt_session_stats(s, &stats); /* the session's context bounds the chunks */
    size_t size = llmc_rt_chunked_memory(llmc_rt_session_plan(s), stats.context, lanes);
    llmc_rt_error rt = {0};
    int rc = LLMC_OK;
    if (size == SIZE_MAX)
        rc = llmc_fail(err, LLMC_E_USAGE, "--delegate: the plan has no NPU subgraphs (compile it "
                       "with --npu-chunk C), or their chunk is longer than the context of %u "
                       "tokens", stats.context);
    else if (!(n->memory = malloc(size)))
        rc = llmc_fail(err, LLMC_E_NOMEM, "cannot allocate %zu bytes for chunked prefill", size);
    else if (o->mode == LLMC_NPU_REF && !(n->ref = llmc_ref_delegate_create()))
        rc = llmc_fail(err, LLMC_E_NOMEM, "cannot start the reference delegate");
    if (!rc && n->ref)
        llmc_ref_delegate_table(n->ref, &n->table);
    if (!rc && llmc_rt_chunked_init(&n->chunked, s, n->ref ? &n->table : NULL, lanes, n->memory,
                                    size, &rt))
        rc = llmc_fail(err, LLMC_E_RUNTIME, "chunked prefill: %s", rt.msg);
    if (rc) {
        llmc_npu_stop(n, NULL);
        return rc;
    }
    llmc_rt_chunked_set_schedule(n->chunked, !o->in_order, NULL);
    llmc_rt_chunked_set_observer(n->chunked, observe, n);
    *out = n;
    return LLMC_OK;
}

static void sum_figures(llmc_npu *n, uint64_t start, uint64_t end, uint32_t count)
{
    llmc_npu_figures *f = &n->last;
    memset(f, 0, sizeof *f);
    f->wall_ns = (double)(end - start);
    uint64_t first = UINT64_MAX, last = 0;
    for (size_t k = n->first_event; k < n->n_events; k++) {
        const trace_event *e = &n->events[k];
        if (e->lane == 1) {
            f->busy_ns += (double)(e->end_ns - e->start_ns);
            first = e->start_ns < first ? e->start_ns : first;
            last = e->end_ns > last ? e->end_ns : last;
            f->delegate_nodes++;
        } else {
            f->cpu_nodes++;
        }
    }
    f->span_ns = last > first ? (double)(last - first) : 0;
    f->tokens = count;
}

int llmc_npu_prefill(llmc_npu *n, const int64_t *tokens, uint32_t count, float *logits,
                     llmc_error *err)
{
    llmc_rt_error rt = {0};
    uint64_t start = now_ns();
    if (!n->prefills)
        n->t0 = start;
    n->first_event = n->n_events;
    llmc_rt_status st = llmc_rt_chunked_prefill(n->chunked, tokens, count, logits, &rt);
    uint64_t end = now_ns();
    sum_figures(n, start, end, count);
    n->prefills++;
    if (st)
        return llmc_fail(err, LLMC_E_RUNTIME, "chunked prefill: %s", rt.msg);
    if (n->out_of_memory)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory recording the trace");
    return LLMC_OK;
}

void llmc_npu_last(const llmc_npu *n, llmc_npu_figures *f)
{
    *f = n->last;
}

void llmc_npu_set_logits(llmc_npu *n, llmc_rt_chunk_logits_fn fn, void *ctx)
{
    llmc_rt_chunked_set_logits(n->chunked, fn, ctx);
}

uint32_t llmc_npu_nodes(const llmc_npu *n)
{
    return llmc_rt_chunked_nodes(n->chunked);
}

const llmc_rt_chunked *llmc_npu_chunked(const llmc_npu *n)
{
    return n->chunked;
}

int llmc_npu_forget(llmc_npu *n)
{
    n->n_events = 0;
    n->first_event = 0;
    return LLMC_OK;
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int llmc_npu_node_medians(const llmc_npu *n, uint64_t *ns)
{
    uint64_t *t = malloc(sizeof *t * (n->n_events + 1));
    if (!t)
        return -1;
    for (uint32_t j = 0; j < llmc_npu_nodes(n); j++) {
        size_t m = 0;
        for (size_t k = 0; k < n->n_events; k++)
            if (n->events[k].node == j)
                t[m++] = n->events[k].end_ns - n->events[k].start_ns;
        qsort(t, m, sizeof *t, by_u64);
        ns[j] = m ? t[m / 2] : 0;
    }
    free(t);
    return 0;
}

/* Chrome trace-event JSON: complete events ("ph":"X", microseconds), one
 * thread row per lane. */
static int write_trace(const llmc_npu *n, FILE *f)
{
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
               "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"CPU\"}},\n"
               "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":2,\"args\":{\"name\":\"delegate\"}}");
    for (size_t k = 0; k < n->n_events; k++) {
        const trace_event *e = &n->events[k];
        double ts = (double)(e->start_ns - n->t0) / 1e3, dur = (double)(e->end_ns - e->start_ns) / 1e3;
        char name[48];
        if (e->lane == 1)
            snprintf(name, sizeof name, "c%u npu%u", e->chunk, e->subgraph);
        else
            snprintf(name, sizeof name, "c%u cpu node %u", e->chunk, e->node);
        fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
                   "\"pid\":1,\"tid\":%d,\"args\":{\"prefill\":%u,\"chunk\":%u,\"node\":%u,"
                   "\"first_op\":%u,\"n_ops\":%u}}",
                name, e->lane ? "delegate" : "cpu", ts, dur, e->lane + 1, e->prefill, e->chunk,
                e->node, e->first_op, e->n_ops);
    }
    fprintf(f, "\n]}\n");
    return ferror(f) ? -1 : 0;
}

int llmc_npu_stop(llmc_npu *n, llmc_error *err)
{
    if (!n)
        return LLMC_OK;
    int rc = LLMC_OK;
    if (n->opt.trace && n->prefills) {
        llmc_output out;
        FILE *f = llmc_out_create(n->opt.trace, &out, err);
        rc = f ? LLMC_OK : LLMC_E_OUTPUT;
        if (f && write_trace(n, f))
            rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", n->opt.trace, strerror(errno));
        if (f)
            rc = llmc_out_finish(&out, rc, err);
    }
    llmc_rt_chunked_release(n->chunked);
    llmc_ref_delegate_destroy(n->ref);
    free(n->memory);
    free(n->events);
    free(n);
    return rc;
}
