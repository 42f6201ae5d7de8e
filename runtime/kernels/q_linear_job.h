/* Internal: the QLinear driver's job (q_linear.c), shared with the GEMM
 * tasks over pairs of W row tiles that a table points at
 * (rt_kernels.qlinear_pair_task: x86/q_avx2_pairs.c and
 * q_avx512_pairs.c), so that a build whose tables have none (the Cortex-M
 * core) links none of them. */
#ifndef LLMC_RT_Q_LINEAR_JOB_H
#define LLMC_RT_Q_LINEAR_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel_table.h"

struct rt_qlinear_job {
    const rt_kernels *kt;
    rt_qtile_args a;
    const float *bias;             /* bias from column col0, or NULL */
    const float *res;              /* residual [m, n_y], or NULL */
    float *y;                      /* [m, n_y] */
    ptrdiff_t m, n_y, col0;
    ptrdiff_t ht0, ht1;              /* W row tiles covering y's columns */
    ptrdiff_t tiles_per_task;        /* W row tiles per task but the tail's */
    ptrdiff_t big_tasks;             /* tasks of tiles_per_task before the tail */
    ptrdiff_t tail_tiles;            /* W row tiles per task of the tail */
    ptrdiff_t block_tiles;           /* activation tiles per cache block */
    ptrdiff_t tile_step;             /* W row tiles per walk step: 2 with qlinear_pair_task */
};

/* The rows of activation tile et that exist (the last one may be short). */
static inline int rt_qlinear_tile_rows(const rt_qlinear_job *J, ptrdiff_t et)
{
    int ep = J->a.xs.ep;
    return J->m - et * ep < ep ? (int)(J->m - et * ep) : ep;
}

/* W row tiles ht, ht + 1 of 8 rows each make one aligned 64-byte line in
 * every row of y: where a walk may write a row's 16 outputs as one line. */
static inline bool rt_qlinear_whole_line(const rt_qlinear_job *J, ptrdiff_t ht)
{
    ptrdiff_t j0 = ht * J->a.ws.hp - J->col0;
    return J->a.ws.hp == 8 && j0 >= 0 && j0 + 16 <= J->n_y && !(J->n_y & 15) && !(j0 & 15) &&
           !((uintptr_t)J->y & 63);
}

/* Asks for the lines of y that tile (et, ht) will write, so that fetching
 * them for the write (rows n_y floats apart: no hardware prefetcher follows
 * them) overlaps the micro-kernel instead of stalling the stores after it
 * (measured: ~7% of a 512-row prefill was those stores).  On x86-64 a
 * decode step's one row asks for its line RT_GEMV_OUTPUT_LEAD row tiles
 * further on: by the time the GEMV reaches a line, its weight stream has
 * pushed the line out of L1, and asked for just before its stores it
 * still cost the 4-bit GEMV 5-8 % of its rate (Intel Xeon family 6 model
 * 167, docs/benchmarks.md; not measured elsewhere, so 0 there).  Always
 * inlined: gcc 12's IPA takes a function of prefetches alone for one
 * without side effects and deletes its calls (q_linear.o had no prefetch
 * instruction). */
#if defined(__x86_64__)
#define RT_GEMV_OUTPUT_LEAD 16
#else
#define RT_GEMV_OUTPUT_LEAD 0
#endif
static inline __attribute__((always_inline)) void rt_qlinear_prefetch_outputs(
    const rt_qlinear_job *J, ptrdiff_t et, int rows, ptrdiff_t ht)
{
    ptrdiff_t j = ht * J->a.ws.hp - J->col0;
    j = j < 0 ? 0 : j;
#if RT_GEMV_OUTPUT_LEAD
    if (J->m == 1) {
        j += RT_GEMV_OUTPUT_LEAD * J->a.ws.hp;
        if (j < J->n_y)
            __builtin_prefetch(J->y + j, 1);
        return;
    }
#endif
    for (int e = 0; e < rows; e++)
        __builtin_prefetch(J->y + (et * J->a.xs.ep + e) * J->n_y + j, 1);
}

/* Asks for the residual's lines that a streamed block of `rows` rows from
 * row r0 will read at columns j0 .. j0 + 15 (one aligned line of each
 * row: rt_qlinear_whole_line), before the micro-kernel runs, so that their
 * loads do not stall the stores after it.  The residual rows are n_y
 * floats apart, which no hardware prefetcher follows, and an earlier op
 * streamed them to memory: in a w4a8 512-row prefill without this, half
 * the samples of the x86 walks' stores sat on those loads (perf
 * cpu-clock, Intel Xeon family 6 model 167).  Always inlined (see
 * rt_qlinear_prefetch_outputs). */
static inline __attribute__((always_inline)) void rt_qlinear_prefetch_residual(
    const rt_qlinear_job *J, ptrdiff_t r0, int rows, ptrdiff_t j0)
{
    if (!J->res)
        return;
    for (int e = 0; e < rows; e++)
        __builtin_prefetch(J->res + (r0 + e) * J->n_y + j0, 0);
}

/* y for rows of activation tile et and W row tile ht from a micro-kernel's
 * out (only the columns y has), with the bias and residual. */
void rt_qlinear_store_tile(const rt_qlinear_job *J, ptrdiff_t et, int rows, ptrdiff_t ht,
                           const float *out);
/* Tile (et, ht) by the table's qtile, stored. */
void rt_qlinear_one_tile(const rt_qlinear_job *J, ptrdiff_t et, ptrdiff_t ht);

/* A walk's step over activation tiles [b0, b1) of a cache block by W row
 * tiles ht, ht + 1. */
typedef void rt_qlinear_column_fn(const rt_qlinear_job *J, ptrdiff_t b0, ptrdiff_t b1,
                                  ptrdiff_t ht);

/* A task's walk over W row tiles [ht0, ht1): for each cache block of
 * J->block_tiles activation tiles, W row tile outer, so a tile (or a pair,
 * by `pair`, where it is not NULL) stays in L1 while the block's
 * activation tiles pass over it; what no pair covers goes by qtile.
 * Inlined into the driver (pair NULL) and into each table's
 * qlinear_pair_task, which calls its column directly. */
static inline __attribute__((always_inline)) void rt_qlinear_pair_walk(
    const rt_qlinear_job *J, ptrdiff_t ht0, ptrdiff_t ht1, rt_qlinear_column_fn *pair)
{
    ptrdiff_t act_tiles = (ptrdiff_t)J->a.xs.mp / J->a.xs.ep;
    for (ptrdiff_t b0 = 0; b0 < act_tiles; b0 += J->block_tiles) {
        ptrdiff_t b1 = b0 + J->block_tiles < act_tiles ? b0 + J->block_tiles : act_tiles;
        ptrdiff_t ht = ht0;
        if (pair)
            for (; ht + 1 < ht1; ht += 2)
                pair(J, b0, b1, ht);
        for (; ht < ht1; ht++)
            for (ptrdiff_t et = b0; et < b1; et++)
                rt_qlinear_one_tile(J, et, ht);
    }
}

#endif
