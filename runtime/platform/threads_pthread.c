/* A pthread pool for the runtime's parallel-for hook (llmc_threads.h).
 *
 * One job at a time.  The caller publishes (task, ctx, n_tasks) and a new
 * generation under the mutex, wakes the workers and runs tasks itself.  A
 * task index is claimed from `next`, which holds (generation << 32 | index):
 * a claim is a compare-and-swap that only succeeds while the word still
 * belongs to the claimer's job, so a worker that wakes late (after its job
 * ended, or several jobs later) can never run an index of the wrong job.
 * Each finished task bumps `finished`; the caller returns once all n_tasks
 * have finished.  It never waits for a worker that is still asleep or
 * descheduled (on a busy machine the caller may simply do every task).
 *
 * Decode runs ~35 small jobs per token, so sleeping between them costs a
 * wake-up (tens of microseconds) per job: workers poll for the next
 * generation, and the caller for the last finished task, SPIN times before
 * they block on the condition variables. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

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

struct llmc_threads {
    pthread_mutex_t mu;
    pthread_cond_t wake;          /* workers: a new generation or quit */
    pthread_cond_t done;          /* caller: every task of the job finished */
    pthread_t *workers;
    uint32_t n_workers, started;
    atomic_uint_fast32_t generation; /* jobs published so far (wraps); written under mu */
    bool quit;
    /* the current job, written under mu */
    llmc_rt_task_fn task;
    void *ctx;
    uint32_t n_tasks;
    atomic_uint_fast64_t next;    /* generation << 32 | next index to claim */
    atomic_uint_fast32_t finished; /* tasks of the current job that returned */
};

typedef struct {
    llmc_rt_task_fn task;
    void *ctx;
    uint32_t n_tasks, generation;
} job;

/* Claims and runs indices of job j until none is left (or the job is over). */
static void run_tasks(llmc_threads *t, const job *j)
{
    uint_fast64_t v = atomic_load_explicit(&t->next, memory_order_relaxed);
    for (;;) {
        if ((uint32_t)(v >> 32) != j->generation || (uint32_t)v >= j->n_tasks)
            return;
        if (!atomic_compare_exchange_weak_explicit(&t->next, &v, v + 1, memory_order_relaxed,
                                                   memory_order_relaxed))
            continue; /* v now holds the current word */
        j->task(j->ctx, (uint32_t)v);
        /* release: the task's writes happen before the caller sees the count */
        if (atomic_fetch_add_explicit(&t->finished, 1, memory_order_acq_rel) + 1 == j->n_tasks) {
            pthread_mutex_lock(&t->mu);
            pthread_cond_signal(&t->done);
            pthread_mutex_unlock(&t->mu);
        }
        v = atomic_load_explicit(&t->next, memory_order_relaxed);
    }
}

static void *worker_main(void *arg)
{
    llmc_threads *t = arg;
    uint32_t seen = 0;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        pthread_mutex_unlock(&t->mu);
        for (uint32_t k = 0; k < SPIN && atomic_load_explicit(&t->generation,
                                                              memory_order_relaxed) == seen; k++)
            cpu_relax();
        pthread_mutex_lock(&t->mu);
        while (!t->quit && atomic_load_explicit(&t->generation, memory_order_relaxed) == seen)
            pthread_cond_wait(&t->wake, &t->mu);
        if (t->quit)
            break;
        seen = (uint32_t)atomic_load_explicit(&t->generation, memory_order_relaxed);
        job j = {t->task, t->ctx, t->n_tasks, seen};
        pthread_mutex_unlock(&t->mu);
        run_tasks(t, &j);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

llmc_threads *llmc_threads_create(uint32_t n_threads)
{
    if (n_threads == 0)
        return NULL;
    llmc_threads *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->n_workers = n_threads - 1;
    atomic_init(&t->next, 0);
    atomic_init(&t->finished, 0);
    atomic_init(&t->generation, 0);
    t->workers = calloc(t->n_workers ? t->n_workers : 1, sizeof *t->workers);
    if (!t->workers || pthread_mutex_init(&t->mu, NULL)) {
        free(t->workers);
        free(t);
        return NULL;
    }
    pthread_cond_init(&t->wake, NULL);
    pthread_cond_init(&t->done, NULL);
    for (; t->started < t->n_workers; t->started++)
        if (pthread_create(&t->workers[t->started], NULL, worker_main, t)) {
            llmc_threads_destroy(t);
            return NULL;
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
    free(t);
}

uint32_t llmc_threads_count(const llmc_threads *t)
{
    return t ? t->n_workers + 1 : 0;
}

void llmc_threads_parallel(void *pool, uint32_t n_tasks, llmc_rt_task_fn task, void *ctx)
{
    llmc_threads *t = pool;
    if (!t || t->n_workers == 0 || n_tasks < 2) {
        for (uint32_t i = 0; i < n_tasks; i++)
            task(ctx, i);
        return;
    }
    pthread_mutex_lock(&t->mu);
    uint32_t gen = (uint32_t)atomic_load_explicit(&t->generation, memory_order_relaxed) + 1;
    if (gen == 0) /* 0 is what a new worker has seen: skip it on wrap */
        gen = 1;
    job j = {task, ctx, n_tasks, gen};
    t->task = task;
    t->ctx = ctx;
    t->n_tasks = n_tasks;
    atomic_store_explicit(&t->finished, 0, memory_order_relaxed);
    atomic_store_explicit(&t->next, (uint_fast64_t)gen << 32, memory_order_relaxed);
    /* release: a polling worker that sees gen also sees the job above */
    atomic_store_explicit(&t->generation, gen, memory_order_release);
    pthread_cond_broadcast(&t->wake);
    pthread_mutex_unlock(&t->mu);
    run_tasks(t, &j);
    for (uint32_t k = 0; k < SPIN && atomic_load_explicit(&t->finished, memory_order_acquire) <
                                         n_tasks; k++)
        cpu_relax();
    pthread_mutex_lock(&t->mu);
    while (atomic_load_explicit(&t->finished, memory_order_acquire) < n_tasks)
        pthread_cond_wait(&t->done, &t->mu);
    pthread_mutex_unlock(&t->mu);
}
