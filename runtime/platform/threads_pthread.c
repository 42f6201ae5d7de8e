/* A pthread pool for the runtime's parallel-for hook (llmc_threads.h).
 *
 * One job at a time.  The caller publishes (task, ctx, n_tasks) under a
 * sequence counter (a seqlock: odd while the fields change, then the next
 * even value), runs tasks itself and waits for the rest.
 *
 * The task indices are cut into one contiguous range per thread (the
 * caller's first, then each worker's).  A thread runs its own range from
 * the front, in order, then takes tasks from the back of the others'
 * ranges, so an owner's run is never broken while a thief evens the
 * threads out.  The runtime numbers a job's tasks in memory order (a
 * Linear's weight rows), so each thread streams its share as one run:
 * handed out one at a time from a shared counter, the two threads' tasks
 * alternated through the weights, and a decode step's GEMV read 7-16 %
 * less a thread while in its tasks than when each thread had half of
 * every Linear (make bench-kernels, Intel Xeon family 6 model 167); the
 * whole decode step ran about 1.05x as fast with the ranges.
 * What is left of a range is one word, job id << 32 | front << 16 | back:
 * a claim is a compare-and-swap that only succeeds while the word still
 * belongs to the claimer's job, so a worker that wakes late (after its
 * job ended, or several jobs later) can never run an index of the wrong
 * job; a call of more than RANGE_MAX tasks a thread runs in rounds.  A
 * thread adds the tasks it ran to `finished` once it finds none left; the
 * caller returns once all n_tasks have finished.  It never waits for a
 * worker that is still asleep or descheduled (on a busy machine the
 * caller may simply do every task).
 *
 * Decode runs ~100 small jobs per token (a few microseconds each), so the
 * hand-off takes no lock: workers poll the sequence counter, and the caller
 * `finished`, SPIN times before they block on a condition variable, and
 * the other side only takes the mutex to signal when someone is blocked
 * (a sleeper count and a waiting flag, each written before its owner's
 * last check of the other side's word: sequentially consistent, so one of
 * the two always sees the other).  A worker that found the mutex held by a
 * caller publishing a job would otherwise sleep in the kernel for tens of
 * microseconds per job.
 *
 * A job started by llmc_threads_start runs on the workers alone while the
 * caller goes on; such a job is long (a whole NPU subgraph), so neither
 * side polls for its end or for the next job: they block at once, as the
 * job's `spin` says. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "llmc_threads.h"

/* Polls before blocking: 2^14 pauses are roughly 50-500 microseconds
 * (a pause is 10-140 cycles depending on the x86 generation), longer than
 * the gap between two ops of a decode step. */
#ifndef LLMC_THREADS_SPIN
#define LLMC_THREADS_SPIN (1u << 14)
#endif
#define SPIN ((uint32_t)(LLMC_THREADS_SPIN))

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Words written by different threads live on cache lines of their own. */
#define LINE 64

/* What is left of one thread's range: job id << 32 | front << 16 | back,
 * front and back counted from the range's first index (the owner takes
 * the front, others the back, one compare-and-swap of the word each). */
typedef struct {
    _Alignas(LINE) atomic_uint_fast64_t left;
} range_word;

/* Tasks a range holds at most; a call of more than this per thread runs
 * in rounds. */
#define RANGE_MAX 0xffffu

typedef struct {
    llmc_threads *pool;
    uint32_t slot; /* its range: 1 + its number among the workers */
} worker_arg;

struct llmc_threads {
    pthread_mutex_t mu;
    pthread_cond_t wake;          /* workers: a new job or quit */
    pthread_cond_t done;          /* caller: every task of the job finished */
    pthread_t *workers;
    uint32_t n_workers, started;
    bool quit;                    /* under mu */
    /* the caller's side */
    _Alignas(LINE) atomic_uint_fast64_t seq;  /* 2 * jobs published; odd: publishing */
    _Atomic(llmc_rt_task_fn) task;            /* the current job (seqlock fields) */
    _Atomic(void *) ctx;
    atomic_uint_fast32_t base;                /* the round's first task index */
    atomic_uint_fast32_t n_tasks;             /* the round's tasks */
    atomic_uint_fast32_t spin;                /* polls before blocking, after this job */
    atomic_uint_fast32_t caller_waiting;      /* blocked on done */
    atomic_uint_fast32_t sleepers;            /* workers blocked on wake */
    uint32_t started_tasks;                   /* n_tasks of a llmc_threads_start job not yet
                                                 reported finished, else 0 */
    range_word *ranges;                       /* n_workers + 1: thread r's range */
    worker_arg *args;                         /* n_workers */
    _Alignas(LINE) atomic_uint_fast32_t finished; /* tasks of the current job that returned */
};

typedef struct {
    llmc_rt_task_fn task;
    void *ctx;
    uint32_t base, n_tasks, id;
    uint32_t spin; /* SPIN, or 0 for a job of llmc_threads_start */
} job;

/* The claim word's job id: the low 32 bits of the job's number. */
static uint32_t job_id(uint_fast64_t seq)
{
    return (uint32_t)(seq >> 1);
}

/* Range r of job j's tasks starts at base + range_start(r): an even cut
 * of n_tasks into one range per thread. */
static uint32_t range_start(const llmc_threads *t, const job *j, uint32_t r)
{
    return (uint32_t)((uint64_t)j->n_tasks * r / (t->n_workers + 1));
}

/* Claims and runs what is left of range r of job j (nothing once the job
 * is over), from the front (its owner) or from the back (a thread whose
 * own range is done: it leaves the owner's run of tasks unbroken); returns
 * how many it ran. */
static uint32_t run_range(llmc_threads *t, const job *j, uint32_t r, bool from_back)
{
    atomic_uint_fast64_t *left = &t->ranges[r].left;
    uint32_t first = j->base + range_start(t, j, r), ran = 0;
    uint_fast64_t v = atomic_load_explicit(left, memory_order_relaxed);
    for (;;) {
        uint32_t front = (uint32_t)(v >> 16) & RANGE_MAX, back = (uint32_t)v & RANGE_MAX;
        if ((uint32_t)(v >> 32) != j->id || front >= back)
            return ran;
        uint_fast64_t claimed = from_back ? v - 1 : v + (1u << 16);
        if (!atomic_compare_exchange_weak_explicit(left, &v, claimed, memory_order_relaxed,
                                                   memory_order_relaxed))
            continue; /* v now holds the current word */
        j->task(j->ctx, first + (from_back ? back - 1 : front));
        ran++;
        v = atomic_load_explicit(left, memory_order_relaxed);
    }
}

/* Runs the thread of range `slot`'s share of job j: its own range, then
 * what is left of the others'. */
static void run_tasks(llmc_threads *t, const job *j, uint32_t slot)
{
    uint32_t slots = t->n_workers + 1, ran = 0;
    for (uint32_t k = 0; k < slots; k++)
        ran += run_range(t, j, (slot + k) % slots, k > 0);
    /* the tasks' writes happen before the caller sees the count */
    if (ran && atomic_fetch_add(&t->finished, ran) + ran == j->n_tasks &&
        atomic_load(&t->caller_waiting)) {
        pthread_mutex_lock(&t->mu);
        pthread_cond_signal(&t->done);
        pthread_mutex_unlock(&t->mu);
    }
}

/* Polls `spin` times, then sleeps, until seq moves past `seen` (true) or
 * quit (false). */
static bool wait_for_job(llmc_threads *t, uint_fast64_t seen, uint32_t spin)
{
    for (uint32_t k = 0; k < spin; k++) {
        if (atomic_load_explicit(&t->seq, memory_order_relaxed) != seen)
            return true;
        cpu_relax();
    }
    pthread_mutex_lock(&t->mu);
    atomic_fetch_add(&t->sleepers, 1);
    while (!t->quit && atomic_load(&t->seq) == seen)
        pthread_cond_wait(&t->wake, &t->mu);
    atomic_fetch_sub(&t->sleepers, 1);
    bool quit = t->quit;
    pthread_mutex_unlock(&t->mu);
    return !quit;
}

/* The published job and its seq, read consistently (retries while the
 * caller writes). */
static job read_job(llmc_threads *t, uint_fast64_t *seq)
{
    for (;;) {
        uint_fast64_t s = atomic_load_explicit(&t->seq, memory_order_acquire);
        job j = {atomic_load_explicit(&t->task, memory_order_relaxed),
                 atomic_load_explicit(&t->ctx, memory_order_relaxed),
                 (uint32_t)atomic_load_explicit(&t->base, memory_order_relaxed),
                 (uint32_t)atomic_load_explicit(&t->n_tasks, memory_order_relaxed), job_id(s),
                 (uint32_t)atomic_load_explicit(&t->spin, memory_order_relaxed)};
        atomic_thread_fence(memory_order_acquire);
        if (!(s & 1) && atomic_load_explicit(&t->seq, memory_order_relaxed) == s) {
            *seq = s;
            return j;
        }
        cpu_relax();
    }
}

static void *worker_main(void *arg)
{
    const worker_arg *w = arg;
    llmc_threads *t = w->pool;
    uint_fast64_t seen = 0;
    uint32_t spin = SPIN;
    while (wait_for_job(t, seen, spin)) {
        job j = read_job(t, &seen);
        run_tasks(t, &j, w->slot);
        spin = j.spin;
    }
    return NULL;
}

/* Stack for a worker: the runtime's tasks use up to LLMC_RT_TASK_STACK
 * (llmc_rt.h), and some C libraries give threads less by default (musl:
 * 128 KiB); a larger default is kept. */
static bool start_worker(worker_arg *w, pthread_t *th)
{
    pthread_attr_t attr;
    size_t size = 0;
    if (pthread_attr_init(&attr))
        return false;
    if (!pthread_attr_getstacksize(&attr, &size) && size < 2 * LLMC_RT_TASK_STACK)
        pthread_attr_setstacksize(&attr, 2 * LLMC_RT_TASK_STACK);
    bool ok = !pthread_create(th, &attr, worker_main, w);
    pthread_attr_destroy(&attr);
    return ok;
}

llmc_threads *llmc_threads_create(uint32_t n_threads)
{
    if (n_threads == 0)
        return NULL;
    /* the struct's cache-line alignment (calloc only promises 16) */
    size_t size = (sizeof(llmc_threads) + LINE - 1) / LINE * LINE;
    llmc_threads *t = aligned_alloc(LINE, size);
    if (!t)
        return NULL;
    memset(t, 0, size);
    t->n_workers = n_threads - 1;
    atomic_init(&t->seq, 0);
    atomic_init(&t->task, NULL);
    atomic_init(&t->ctx, NULL);
    atomic_init(&t->base, 0);
    atomic_init(&t->n_tasks, 0);
    atomic_init(&t->spin, SPIN);
    atomic_init(&t->caller_waiting, 0);
    atomic_init(&t->sleepers, 0);
    atomic_init(&t->finished, 0);
    uint32_t many = t->n_workers ? t->n_workers : 1;
    t->workers = calloc(many, sizeof *t->workers);
    t->args = calloc(many, sizeof *t->args);
    t->ranges = aligned_alloc(LINE, (size_t)n_threads * sizeof *t->ranges);
    if (!t->workers || !t->args || !t->ranges || pthread_mutex_init(&t->mu, NULL)) {
        free(t->workers);
        free(t->args);
        free(t->ranges);
        free(t);
        return NULL;
    }
    for (uint32_t r = 0; r < n_threads; r++)
        atomic_init(&t->ranges[r].left, 0);
    pthread_cond_init(&t->wake, NULL);
    pthread_cond_init(&t->done, NULL);
    for (; t->started < t->n_workers; t->started++) {
        t->args[t->started] = (worker_arg){t, t->started + 1};
        if (!start_worker(&t->args[t->started], &t->workers[t->started])) {
            llmc_threads_destroy(t);
            return NULL;
        }
    }
    return t;
}

void llmc_threads_destroy(llmc_threads *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->quit = true;
    pthread_cond_broadcast(&t->wake);
    pthread_mutex_unlock(&t->mu);
    for (uint32_t i = 0; i < t->started; i++)
        pthread_join(t->workers[i], NULL);
    pthread_cond_destroy(&t->wake);
    pthread_cond_destroy(&t->done);
    pthread_mutex_destroy(&t->mu);
    free(t->workers);
    free(t->args);
    free(t->ranges);
    free(t);
}

uint32_t llmc_threads_count(const llmc_threads *t)
{
    return t ? t->n_workers + 1 : 0;
}

/* Writes job j's fields between two seq steps (odd, then even); n_tasks > 0
 * is claimable from the second step on. */
static void publish(llmc_threads *t, const job *j, uint_fast64_t seq)
{
    atomic_store_explicit(&t->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&t->task, j->task, memory_order_relaxed);
    atomic_store_explicit(&t->ctx, j->ctx, memory_order_relaxed);
    atomic_store_explicit(&t->base, j->base, memory_order_relaxed);
    atomic_store_explicit(&t->n_tasks, j->n_tasks, memory_order_relaxed);
    atomic_store_explicit(&t->spin, j->spin, memory_order_relaxed);
    atomic_store_explicit(&t->finished, 0, memory_order_relaxed);
    for (uint32_t r = 0; r <= t->n_workers; r++)
        atomic_store_explicit(&t->ranges[r].left,
                              (uint_fast64_t)j->id << 32 |
                                  (range_start(t, j, r + 1) - range_start(t, j, r)),
                              memory_order_relaxed);
    /* seq_cst: ordered before the read of sleepers (see the header) */
    atomic_store(&t->seq, seq + 2);
    if (atomic_load(&t->sleepers)) {
        pthread_mutex_lock(&t->mu);
        pthread_cond_broadcast(&t->wake);
        pthread_mutex_unlock(&t->mu);
    }
}

/* Polls `spin` times, then sleeps, until all n_tasks of the current job
 * have finished. */
static void wait_for_tasks(llmc_threads *t, uint32_t n_tasks, uint32_t spin)
{
    for (uint32_t k = 0; k < spin; k++) {
        if (atomic_load_explicit(&t->finished, memory_order_acquire) == n_tasks)
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->caller_waiting, 1);
    while (atomic_load(&t->finished) < n_tasks)
        pthread_cond_wait(&t->done, &t->mu);
    atomic_store(&t->caller_waiting, 0);
    pthread_mutex_unlock(&t->mu);
}

/* Tasks a round may hold: RANGE_MAX for each thread. */
static uint32_t round_tasks(const llmc_threads *t)
{
    uint64_t most = (uint64_t)RANGE_MAX * (t->n_workers + 1);
    return most < UINT32_MAX ? (uint32_t)most : UINT32_MAX;
}

/* Publishes tasks [base, base + n) as a job, runs the caller's range and
 * what it can take of the others', and waits for the rest. */
static void run_round(llmc_threads *t, uint32_t base, uint32_t n, llmc_rt_task_fn task,
                      void *ctx)
{
    /* only this thread writes seq */
    uint_fast64_t seq = atomic_load_explicit(&t->seq, memory_order_relaxed);
    job j = {task, ctx, base, n, job_id(seq + 2), SPIN};
    publish(t, &j, seq);
    run_tasks(t, &j, 0);
    wait_for_tasks(t, n, SPIN);
}

void llmc_threads_parallel(void *pool, uint32_t n_tasks, llmc_rt_task_fn task, void *ctx)
{
    llmc_threads *t = pool;
    if (!t || t->n_workers == 0 || n_tasks < 2) {
        for (uint32_t i = 0; i < n_tasks; i++)
            task(ctx, i);
        return;
    }
    uint32_t most = round_tasks(t);
    for (uint32_t base = 0; base < n_tasks; base += most)
        run_round(t, base, n_tasks - base < most ? n_tasks - base : most, task, ctx);
}

void llmc_threads_start(llmc_threads *t, uint32_t n_tasks, llmc_rt_task_fn task, void *ctx)
{
    if (t->n_workers == 0 || n_tasks == 0) {
        for (uint32_t i = 0; i < n_tasks; i++)
            task(ctx, i);
        return;
    }
    if (n_tasks > round_tasks(t)) { /* too many for one round: run them now */
        llmc_threads_parallel(t, n_tasks, task, ctx);
        return;
    }
    uint_fast64_t seq = atomic_load_explicit(&t->seq, memory_order_relaxed);
    job j = {task, ctx, 0, n_tasks, job_id(seq + 2), 0};
    publish(t, &j, seq);
    t->started_tasks = n_tasks;
}

int llmc_threads_finished(llmc_threads *t, int block)
{
    uint32_t n = t->started_tasks;
    if (n && block)
        wait_for_tasks(t, n, 0);
    if (n && atomic_load_explicit(&t->finished, memory_order_acquire) != n)
        return 0;
    t->started_tasks = 0;
    return 1;
}
