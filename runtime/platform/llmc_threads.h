/* Optional platform file (threads_pthread.c, built into libllmcrt_threads.a,
 * never into libllmcrt.a): a pthread pool that implements the runtime's
 * parallel-for hook.
 *
 *   llmc_threads *pool = llmc_threads_create(4);   // the caller + 3 workers
 *   llmc_rt_session_set_parallel(&session, llmc_threads_parallel, pool);
 *   ... llmc_rt_session_feed ...
 *   llmc_threads_destroy(pool);
 *
 * Between calls workers poll a few hundred microseconds (a call is handed
 * over without a lock), then sleep on a condition variable; the calling thread
 * runs tasks too.  Each thread takes a contiguous range of the task
 * indices in order, then tasks left at the end of the others' ranges, so
 * which thread runs which task varies but each runs once.  One call at a
 * time per pool: a task must not call llmc_threads_parallel on its own
 * pool, and two threads must not share a pool at once. */
#ifndef LLMC_THREADS_H
#define LLMC_THREADS_H

#include <stdint.h>

#include "llmc_rt.h"

typedef struct llmc_threads llmc_threads;

/* A pool of n_threads threads counting the caller (n_threads - 1 workers;
 * 1 = no workers, everything runs on the caller).  NULL if n_threads is 0
 * or out of memory / threads. */
llmc_threads *llmc_threads_create(uint32_t n_threads);
/* Stops and joins the workers and frees the pool (NULL is fine). */
void llmc_threads_destroy(llmc_threads *pool);
/* n_threads the pool was created with. */
uint32_t llmc_threads_count(const llmc_threads *pool);
/* llmc_rt_parallel_fn: task(ctx, i) once for every i in [0, n_tasks);
 * returns when all have returned.  pool is an llmc_threads * (NULL = run
 * them in order on the caller). */
void llmc_threads_parallel(void *pool, uint32_t n_tasks, llmc_rt_task_fn task, void *ctx);

/* The same tasks in the background: llmc_threads_start hands them to the
 * workers and returns at once, the caller running none (a pool without
 * workers, or a call of more than 65535 tasks a thread, runs them all
 * before it returns).  llmc_threads_finished reports
 * whether they all have returned (block: once they have; 1 when none was
 * started).  Until it reports 1 the pool takes no other call; destroy
 * first waits for them with block = 1 (it may drop tasks not yet begun). */
void llmc_threads_start(llmc_threads *pool, uint32_t n_tasks, llmc_rt_task_fn task, void *ctx);
int llmc_threads_finished(llmc_threads *pool, int block);

#endif
