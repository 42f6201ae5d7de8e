/* Parallel-fors that run tasks in other orders than the serial one, for
 * tests that results do not depend on the thread count (header-only, one
 * copy per test program). */
#ifndef LLMC_TEST_PARALLEL_ORDERS_H
#define LLMC_TEST_PARALLEL_ORDERS_H

#include "kernels/kernels.h"
#include "llmc_threads.h"

/* Runs the tasks as `threads` workers interleaved would, last worker first:
 * another order than the serial one. */
static void fake_parallel(void *pool, uint32_t n, llmc_rt_task_fn task, void *ctx)
{
    uint32_t threads = *(const uint32_t *)pool;
    for (uint32_t t = threads; t-- > 0;)
        for (uint32_t i = t; i < n; i += threads)
            task(ctx, i);
}

/* Parallel-for i < PARALLELS: fake 1, 2, 3 threads, then a real pool of 2. */
enum { PARALLELS = 4 };
static uint32_t fake_threads[3] = {1, 2, 3};

static rt_parallel parallel_number(int i)
{
    if (i < 3)
        return (rt_parallel){fake_parallel, &fake_threads[i]};
    return (rt_parallel){llmc_threads_parallel, llmc_threads_create(2)};
}

static void parallel_done(rt_parallel *par)
{
    if (par->fn == llmc_threads_parallel)
        llmc_threads_destroy(par->pool);
}

#endif
