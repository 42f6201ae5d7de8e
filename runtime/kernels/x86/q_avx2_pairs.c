/* The QLinear driver's walks over pairs of W row tiles for the AVX2 and
 * AVX-VNNI tables: the GEMM's (rt_kernels.qlinear_pair_task): activation
 * tile et by W row tiles ht and ht + 1 in one qtile_pair call of the table
 * (each activation word broadcast once for both), then the 4 x 16 outputs;
 * and the decode GEMV's (rt_kernels.qlinear_gemv_pair).
 *
 * As in q_avx512_pairs.c: where the tile's rows all exist and the 16
 * columns are one aligned 64-byte line of each y row, a row's y = out
 * (+ bias) (+ res) goes out as two non-temporal YMM stores that fill the
 * line, so no store waits for the line to be read from memory first.  The
 * values are rt_qlinear_store_tile's bit for bit (the bias, then the
 * residual); any other tile takes the portable stores.  A task ends with
 * one sfence for the streamed lines (why once per task: q_avx512_pairs.c). */
#include "../q_linear_job.h"
#include "x86_simd.h"

#include <immintrin.h>

/* Both W row tiles' columns one aligned line in every row of y, and
 * activation tile et whole. */
static bool streams(const rt_qlinear_job *J, ptrdiff_t et, ptrdiff_t ht)
{
    return rt_qlinear_whole_line(J, ht) && rt_qlinear_tile_rows(J, et) == J->a.xs.ep;
}

/* 8 values of row `row` from column j (an output half of the line). */
static __m256 row_values(const rt_qlinear_job *J, ptrdiff_t row, ptrdiff_t j, const float *out)
{
    __m256 v = _mm256_loadu_ps(out);
    if (J->bias)
        v = _mm256_add_ps(v, _mm256_loadu_ps(J->bias + j));
    if (J->res)
        v = _mm256_add_ps(v, _mm256_loadu_ps(J->res + row * J->n_y + j));
    return v;
}

/* A table's kernels for two W row tiles at once. */
typedef void qtile_pair_fn(const rt_qtile_args *a, int64_t et, int rows, int64_t ht,
                           float *out);
typedef void gemv_pair_fn(const rt_qtile_args *a, int64_t et, int64_t ht, float *out);

static inline __attribute__((always_inline)) void two_tiles(const rt_qlinear_job *J,
                                                            ptrdiff_t et, ptrdiff_t ht,
                                                            qtile_pair_fn *pair)
{
    float out[2 * RT_QTILE_MAX_OUT];
    int hp = J->a.ws.hp, ep = J->a.xs.ep, rows = rt_qlinear_tile_rows(J, et);
    bool stream = streams(J, et, ht);
    if (!stream) {
        rt_qlinear_prefetch_outputs(J, et, rows, ht);
        rt_qlinear_prefetch_outputs(J, et, rows, ht + 1);
    } else {
        rt_qlinear_prefetch_residual(J, et * ep, ep, ht * hp - J->col0);
    }
    pair(&J->a, et, rows, ht, out);
    if (!stream) {
        rt_qlinear_store_tile(J, et, rows, ht, out);
        rt_qlinear_store_tile(J, et, rows, ht + 1, out + ep * hp);
        return;
    }
    ptrdiff_t j0 = ht * hp - J->col0;
    for (int e = 0; e < ep; e++) {
        ptrdiff_t row = et * ep + e;
        float *y = J->y + row * J->n_y + j0;
        _mm256_stream_ps(y, row_values(J, row, j0, out + e * hp));
        _mm256_stream_ps(y + 8, row_values(J, row, j0 + 8, out + (ep + e) * hp));
    }
}

/* Activation tiles [b0, b1) by W row tiles ht, ht + 1. */
static inline __attribute__((always_inline)) void pair_column(const rt_qlinear_job *J,
                                                              ptrdiff_t b0, ptrdiff_t b1,
                                                              ptrdiff_t ht, qtile_pair_fn *pair)
{
    for (ptrdiff_t et = b0; et < b1; et++)
        two_tiles(J, et, ht, pair);
}

/* A table's GEMM task: the walk with pair_column on the table's
 * qtile_pair, then one sfence, so the streamed lines are visible before
 * the task ends. */
#define PAIR_TASK(name, qtile_pair)                                                            \
    static void column_##name(const rt_qlinear_job *J, ptrdiff_t b0, ptrdiff_t b1,           \
                              ptrdiff_t ht)                                                   \
    {                                                                                          \
        pair_column(J, b0, b1, ht, qtile_pair);                                                \
    }                                                                                          \
    void rt_qlinear_pair_task_##name(const rt_qlinear_job *J, ptrdiff_t ht0, ptrdiff_t ht1)  \
    {                                                                                          \
        rt_qlinear_pair_walk(J, ht0, ht1, column_##name);                                      \
        _mm_sfence();                                                                          \
    }

/* rows == 1, W row tiles ht and ht + 1 in one kernel call. */
static inline __attribute__((always_inline)) void gemv_pair(const rt_qlinear_job *J, ptrdiff_t ht,
                                                            gemv_pair_fn *pair)
{
    float out[2 * RT_QTILE_MAX_OUT];
    rt_qlinear_prefetch_outputs(J, 0, 1, ht);
    pair(&J->a, 0, ht, out);
    rt_qlinear_store_tile(J, 0, 1, ht, out);
    rt_qlinear_store_tile(J, 0, 1, ht + 1, out + J->a.ws.hp);
}

PAIR_TASK(avx2, rt_q_avx2_qtile_pair)

void rt_qlinear_gemv_pair_avx2(const rt_qlinear_job *J, ptrdiff_t ht)
{
    gemv_pair(J, ht, rt_q_avx2_gemv_pair);
}

PAIR_TASK(avxvnni, rt_q_avxvnni_qtile_pair)

void rt_qlinear_gemv_pair_avxvnni(const rt_qlinear_job *J, ptrdiff_t ht)
{
    gemv_pair(J, ht, rt_q_avxvnni_gemv_pair);
}

PAIR_TASK(avx512ymm, rt_q_avx512ymm_qtile_pair)

void rt_qlinear_gemv_pair_avx512ymm(const rt_qlinear_job *J, ptrdiff_t ht)
{
    gemv_pair(J, ht, rt_q_avx512ymm_gemv_pair);
}
