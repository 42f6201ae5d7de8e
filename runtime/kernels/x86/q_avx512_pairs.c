/* The QLinear driver's GEMM task over pairs of tiles for the AVX-512 VNNI
 * table (rt_kernels.qlinear_pair_task; built with the AVX-512 flags, used
 * only after rt_cpu_x86_avx512_vnni_ok()): 4 (or 2) activation tiles by W
 * row tiles ht, ht + 1 in one qtile_block call, then the 16 (or 8) x 16
 * outputs.
 *
 * Where the call's 8 rows all exist and its 16 columns are one aligned
 * 64-byte line of each y row, a row's y = out (+ bias) (+ res) is one
 * ZMM, written with a non-temporal store.  A prefill's outputs are far
 * larger than the caches (512 x 9728 floats for Qwen2-0.5B's gate and up
 * projections), so an ordinary store first reads each line from memory
 * and stalls the kernel while it comes: the y and residual loads were ~28%
 * of the 8-row kernel's time (perf), and streaming the lines made a w4a8 pp512
 * 15% faster (interleaved best-of-5 pairs, 581-596 -> 680-688 tok/s).  The next
 * op reads y back from memory, once, at the read bandwidth.  The values
 * are those of rt_qlinear_store_tile bit for bit: the bias, then the
 * residual, in two roundings.  Any other block
 * takes the portable stores.
 *
 * The streamed lines are weakly ordered, so a task ends with an sfence,
 * which waits until they have left the core: once per task, not once per
 * pair of W row tiles (every 5 qtile_block calls of a 512-row prefill),
 * made a w4a8 pp512 1.015-1.028x as fast on one thread and 1.004-1.025x on
 * two (four paired runs each, Intel Xeon family 6 model 167). */
#include "../q_linear_job.h"
#include "x86_simd.h"

#include <immintrin.h>

/* The 16 columns of W row tiles ht, ht + 1 as one aligned line in every
 * row of y, and the block's activation tiles whole. */
static bool streams(const rt_qlinear_job *J, ptrdiff_t et, int tiles, ptrdiff_t ht)
{
    int ep = J->a.xs.ep;
    return rt_qlinear_whole_line(J, ht) && rt_qlinear_tile_rows(J, et + tiles - 1) == ep;
}

/* Row `row` of y, columns j0 .. j0 + 15, from the two 8-output halves. */
static void stream_row(const rt_qlinear_job *J, ptrdiff_t row, ptrdiff_t j0,
                       const float *lo, const float *hi)
{
    /* AVX512F inserts 256 bits as 4 doubles (the 8-float insert is DQ's) */
    __m256d lo8 = _mm256_castps_pd(_mm256_loadu_ps(lo));
    __m256d hi8 = _mm256_castps_pd(_mm256_loadu_ps(hi));
    __m512 out = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(lo8), hi8, 1));
    __m512 v = out;
    ptrdiff_t at = row * J->n_y + j0;
    if (J->bias)
        v = _mm512_add_ps(v, _mm512_loadu_ps(J->bias + j0));
    if (J->res)
        v = _mm512_add_ps(v, _mm512_loadu_ps(J->res + at));
    _mm512_stream_ps(J->y + at, v);
}

/* out holds tiles (et + i, ht + j) at (2 * i + j) * tile. */
static void stream_block(const rt_qlinear_job *J, ptrdiff_t et, int tiles, ptrdiff_t ht,
                         const float *out)
{
    int hp = J->a.ws.hp, ep = J->a.xs.ep, tile = ep * hp;
    ptrdiff_t j0 = ht * hp - J->col0;
    for (int i = 0; i < tiles; i++)
        for (int e = 0; e < ep; e++)
            stream_row(J, (et + i) * ep + e, j0, out + 2 * i * tile + e * hp,
                       out + (2 * i + 1) * tile + e * hp);
}

/* The outputs of one [ep][hp] tile of this table's plans (4 x 8; the
 * QLinear driver checks the plan's tiles against the table's). */
#define TILE_OUT 32

/* Activation tiles et .. et + tiles - 1 by W row tiles ht, ht + 1. */
static void block_tiles(const rt_qlinear_job *J, ptrdiff_t et, int tiles, ptrdiff_t ht)
{
    float out[8 * TILE_OUT];
    int tile = J->a.xs.ep * J->a.ws.hp;
    if (streams(J, et, tiles, ht)) {
        rt_qlinear_prefetch_residual(J, et * J->a.xs.ep, tiles * J->a.xs.ep,
                                     ht * J->a.ws.hp - J->col0);
        J->kt->qtile_block(&J->a, et, tiles, ht, out);
        stream_block(J, et, tiles, ht, out);
        return;
    }
    for (int i = 0; i < tiles; i++)
        for (int j = 0; j < 2; j++)
            rt_qlinear_prefetch_outputs(J, et + i, rt_qlinear_tile_rows(J, et + i), ht + j);
    J->kt->qtile_block(&J->a, et, tiles, ht, out);
    for (int i = 0; i < tiles; i++)
        for (int j = 0; j < 2; j++)
            rt_qlinear_store_tile(J, et + i, rt_qlinear_tile_rows(J, et + i), ht + j,
                                  out + (2 * i + j) * tile);
}

/* Activation tiles [b0, b1) by W row tiles ht, ht + 1: four at a time, then
 * two, where the last of them has a GEMM's rows (a single row is qtile's
 * GEMV, whose bits differ), the rest one by one. */
static void pair_column(const rt_qlinear_job *J, ptrdiff_t b0, ptrdiff_t b1, ptrdiff_t ht)
{
    bool fits = J->a.xs.ep * J->a.ws.hp <= TILE_OUT;
    for (ptrdiff_t et = b0; et < b1;) {
        int tiles = !fits                                                  ? 1
                    : et + 3 < b1 && rt_qlinear_tile_rows(J, et + 3) >= 2 ? 4
                    : et + 1 < b1 && rt_qlinear_tile_rows(J, et + 1) >= 2 ? 2
                                                                          : 1;
        if (tiles > 1) {
            block_tiles(J, et, tiles, ht);
        } else {
            rt_qlinear_one_tile(J, et, ht);
            rt_qlinear_one_tile(J, et, ht + 1);
        }
        et += tiles;
    }
}

void rt_qlinear_pair_task_avx512(const rt_qlinear_job *J, ptrdiff_t ht0, ptrdiff_t ht1)
{
    rt_qlinear_pair_walk(J, ht0, ht1, pair_column);
    _mm_sfence(); /* the streamed lines visible before the task ends */
}
