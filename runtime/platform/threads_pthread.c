/* A pthread pool for the runtime's parallel-for hook (llmc_threads.h).
 *
 * One job at a time: the caller publishes (task, ctx, n_tasks) under the
 * mutex, bumps `generation` and wakes every worker; each worker, and the
 * caller, then takes task indices from the atomic counter `next` until it
 * passes n_tasks; the caller waits until every worker has left the job
 * (`busy` = 0) before returning, so the job's ctx may live on its stack. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "llmc_threads.h"

struct llmc_threads {
    pthread_mutex_t mu;
    pthread_cond_t wake;          /* workers: a new generation or quit */
    pthread_cond_t done;          /* caller: busy reached 0 */
    pthread_t *workers;
    uint32_t n_workers, started;
    uint64_t generation;          /* jobs published so far */
    bool quit;
    uint32_t busy;                /* workers still inside the current job */
    /* the current job */
    llmc_rt_task_fn task;
    void *ctx;
    uint32_t n_tasks;
    atomic_uint_fast64_t next;    /* next task index to hand out */
};

static void run_tasks(llmc_threads *t, llmc_rt_task_fn task, void *ctx, uint32_t n)
{
    for (;;) {
        uint_fast64_t i = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed);
        if (i >= n)
            return;
        task(ctx, (uint32_t)i);
    }
}

static void *worker_main(void *arg)
{
    llmc_threads *t = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->quit && t->generation == seen)
            pthread_cond_wait(&t->wake, &t->mu);
        if (t->quit)
            break;
        seen = t->generation;
        llmc_rt_task_fn task = t->task;
        void *ctx = t->ctx;
        uint32_t n = t->n_tasks;
        pthread_mutex_unlock(&t->mu);
        run_tasks(t, task, ctx, n);
        pthread_mutex_lock(&t->mu);
        if (--t->busy == 0)
            pthread_cond_signal(&t->done);
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
    t->task = task;
    t->ctx = ctx;
    t->n_tasks = n_tasks;
    atomic_store_explicit(&t->next, 0, memory_order_relaxed);
    t->busy = t->n_workers;
    t->generation++;
    pthread_cond_broadcast(&t->wake);
    pthread_mutex_unlock(&t->mu);
    run_tasks(t, task, ctx, n_tasks);
    pthread_mutex_lock(&t->mu);
    while (t->busy)
        pthread_cond_wait(&t->done, &t->mu);
    pthread_mutex_unlock(&t->mu);
}
