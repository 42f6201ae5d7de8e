/* The reference delegate (llmc_ref_delegate.h): an NPU driver's behaviour
 * in portable C.  prepare builds a graph (ref_prepare.c); execute hands its
 * run (ref_kernels.c) to the delegate's worker and returns; wait reports it.
 *
 * The worker is an llmc_threads pool of its own with one worker thread,
 * driven by llmc_threads_start / llmc_threads_finished: the caller runs
 * none of the job and goes on with the CPU lane's ops, which use the
 * session's pool meanwhile (a pool takes one job at a time).  `job` is the
 * run in flight, from execute until wait reports it finished. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llmc_ref_delegate.h"
#include "llmc_threads.h"
#include "ref_graph.h"

/* The caller and one worker. */
#define REF_POOL_THREADS 2u

struct llmc_ref_delegate {
    llmc_threads *pool;
    ref_graph *job;                        /* in flight, until wait reports it */
    uint64_t job_start_ns, job_end_ns;     /* written by the worker during the job */
    uint64_t start_ns, end_ns;             /* of the last finished job */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The worker's task: the job, stamped. */
static void run_job(void *ctx, uint32_t task)
{
    llmc_ref_delegate *d = ctx;
    (void)task;
    d->job_start_ns = now_ns();
    ref_graph_run(d->job);
    d->job_end_ns = now_ns();
}

static llmc_rt_status ref_prepare(void *ctx, const llmc_rt_subgraph *sg, void **graph,
                                  llmc_rt_error *err)
{
    (void)ctx;
    ref_graph *g = NULL;
    llmc_rt_status st = ref_graph_build(sg, &g, err);
    *graph = g;
    return st;
}

static llmc_rt_status ref_execute(void *ctx, void *graph, void *const *io, llmc_rt_error *err)
{
    llmc_ref_delegate *d = ctx;
    ref_graph *g = graph;
    if (!g || (g->n_io && !io))
        return ref_fail(err, LLMC_RT_E_ARG, "reference delegate: execute without a graph or "
                        "buffers");
    for (uint32_t t = 0; t < g->n_io; t++)
        if (!io[t] && g->tensors[t].count)
            return ref_fail(err, LLMC_RT_E_ARG, "subgraph %u '%s': no buffer for tensor %u",
                            g->index, g->name, t);
    if (d->job)
        return ref_fail(err, LLMC_RT_E_DELEGATE, "subgraph %u '%s': busy: the previous "
                        "execution was not waited for", g->index, g->name);
    memcpy(g->io, io, g->n_io * sizeof *g->io);
    d->job = g;
    llmc_threads_start(d->pool, 1, run_job, d);
    return LLMC_RT_OK;
}

/* Whether the job in flight finished (block: once it has); a finished one
 * is reported once, its stamps kept. */
static bool job_finished(llmc_ref_delegate *d, int block)
{
    if (!d->job)
        return true;
    if (!llmc_threads_finished(d->pool, block))
        return false;
    d->start_ns = d->job_start_ns;
    d->end_ns = d->job_end_ns;
    d->job = NULL;
    return true;
}

/* With none in flight, wait reports finished at once.  A prepared graph
 * cannot fail, so every job's result is LLMC_RT_OK. */
static llmc_rt_status ref_wait(void *ctx, int block, int *finished, llmc_rt_error *err)
{
    (void)err;
    bool over = job_finished(ctx, block);
    if (finished)
        *finished = over;
    return LLMC_RT_OK;
}

/* A graph still running finishes before it is freed; wait still reports
 * it, and execute refuses another job until then. */
static void ref_release(void *ctx, void *graph)
{
    llmc_ref_delegate *d = ctx;
    if (graph && d->job == graph)
        llmc_threads_finished(d->pool, 1);
    ref_graph_free(graph);
}

llmc_ref_delegate *llmc_ref_delegate_create(void)
{
    llmc_ref_delegate *d = calloc(1, sizeof *d);
    if (d && !(d->pool = llmc_threads_create(REF_POOL_THREADS))) {
        free(d);
        return NULL;
    }
    return d;
}

void llmc_ref_delegate_destroy(llmc_ref_delegate *d)
{
    if (!d)
        return;
    if (d->job)
        llmc_threads_finished(d->pool, 1);
    llmc_threads_destroy(d->pool);
    free(d);
}

void llmc_ref_delegate_table(llmc_ref_delegate *d, llmc_rt_delegate *out)
{
    out->ctx = d;
    out->prepare = ref_prepare;
    out->execute = ref_execute;
    out->wait = ref_wait;
    out->release = ref_release;
}

void llmc_ref_delegate_last_run(const llmc_ref_delegate *d, uint64_t *start_ns,
                                uint64_t *end_ns)
{
    *start_ns = d->start_ns;
    *end_ns = d->end_ns;
}
