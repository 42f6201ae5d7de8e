/* AVX2/FMA fp32 weight-tile micro-kernel (kernel_table.h: ftile) for tiles
 * of hp = 16 rows; table fields: f_hp = 16, f_ep = 6, ftile = rt_ftile_avx2.
 *
 * Tile size from the register budget (paper 002 Eqs 2-4).  A step c of the
 * reduction loads the tile's 16 weights [c][0..16) as hp/8 = 2 YMM vectors
 * and broadcasts x[e][c] for each of the ep rows; every row keeps its 16
 * sums in 2 YMM accumulators.  Eq 3 counts ep + hp + ep*hp registers (in
 * vectors: ep broadcasts, 2 weight vectors, 2*ep accumulators); here the
 * broadcasts are consumed one at a time, so one register serves them all:
 *     2*ep + 2 + 1 <= 16 YMM  ->  ep <= 6.5  ->  ep = 6: 12 + 2 + 1 = 15.
 * Eq 2's memory traffic per multiply-add, (ep + hp) / (ep * hp), is then
 * 22/96 floats: 8 loads (2 vectors + 6 broadcasts) feed 12 FMAs, so the
 * loop is bound by the two FMA pipes (6 cycles per step), not the two load
 * ports (4 cycles), and 12 independent accumulators cover the FMA latency
 * (4-5 cycles x 2 pipes).  hp = 24, ep = 4 would need 12 + 3 + 1 = 16 with
 * no register left, and more bytes of x per FMA.  lp (Eq 4) is 1: a step is
 * one element of the reduction, no horizontal sums.
 *
 * rows == 1 (decode GEMV) streams the tile once at memory bandwidth: there
 * is nothing to reuse, so the loop is unrolled over 4 steps of c with 4
 * independent accumulator pairs (8 FMA chains) to hide the FMA latency, and
 * the pairs are added in a fixed order at the end. */
#include <immintrin.h>

#include "x86_avx2.h"

#define HP 16
#define EP 6

/* out[e][0..16) = sum over c of x[e][c] * tile[c][0..16), e < rows; rows a
 * constant after inlining and the loops over rows unrolled (gcc -O2 does
 * not unroll them on its own and would keep the accumulators in memory),
 * so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void tile_rows(const float *x, int64_t xs,
                                                            const float *tile, int64_t k,
                                                            int rows, float *out)
{
    __m256 lo[EP], hi[EP];
    #pragma GCC unroll 6
    for (int e = 0; e < rows; e++)
        lo[e] = hi[e] = _mm256_setzero_ps();
    for (int64_t c = 0; c < k; c++) {
        __m256 w0 = _mm256_loadu_ps(tile + c * HP), w1 = _mm256_loadu_ps(tile + c * HP + 8);
        #pragma GCC unroll 6
        for (int e = 0; e < rows; e++) {
            __m256 b = _mm256_broadcast_ss(x + e * xs + c);
            lo[e] = _mm256_fmadd_ps(b, w0, lo[e]);
            hi[e] = _mm256_fmadd_ps(b, w1, hi[e]);
        }
    }
    #pragma GCC unroll 6
    for (int e = 0; e < rows; e++) {
        _mm256_storeu_ps(out + e * HP, lo[e]);
        _mm256_storeu_ps(out + e * HP + 8, hi[e]);
    }
}

/* One row: 4 steps of c per iteration, step c + u into accumulator pair u. */
static void tile_gemv(const float *x, const float *tile, int64_t k, float *out)
{
    __m256 lo[4], hi[4];
    #pragma GCC unroll 4
    for (int u = 0; u < 4; u++)
        lo[u] = hi[u] = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 4 <= k; c += 4)
        #pragma GCC unroll 4
        for (int u = 0; u < 4; u++) {
            __m256 b = _mm256_broadcast_ss(x + c + u);
            const float *wc = tile + (c + u) * HP;
            lo[u] = _mm256_fmadd_ps(b, _mm256_loadu_ps(wc), lo[u]);
            hi[u] = _mm256_fmadd_ps(b, _mm256_loadu_ps(wc + 8), hi[u]);
        }
    for (; c < k; c++) { /* k % 4 last steps */
        __m256 b = _mm256_broadcast_ss(x + c);
        lo[0] = _mm256_fmadd_ps(b, _mm256_loadu_ps(tile + c * HP), lo[0]);
        hi[0] = _mm256_fmadd_ps(b, _mm256_loadu_ps(tile + c * HP + 8), hi[0]);
    }
    __m256 s0 = _mm256_add_ps(_mm256_add_ps(lo[0], lo[2]), _mm256_add_ps(lo[1], lo[3]));
    __m256 s1 = _mm256_add_ps(_mm256_add_ps(hi[0], hi[2]), _mm256_add_ps(hi[1], hi[3]));
    _mm256_storeu_ps(out, s0);
    _mm256_storeu_ps(out + 8, s1);
}

void rt_ftile_avx2(const rt_ftile_args *a, int64_t e0, int rows, int64_t ht, float *out)
{
    int64_t k = a->ws.k, xs = a->x_stride;
    const float *x = a->x + e0 * xs, *tile = a->w + ht * k * HP;
    switch (rows) {
    case 1: tile_gemv(x, tile, k, out); break;
    case 2: tile_rows(x, xs, tile, k, 2, out); break;
    case 3: tile_rows(x, xs, tile, k, 3, out); break;
    case 4: tile_rows(x, xs, tile, k, 4, out); break;
    case 5: tile_rows(x, xs, tile, k, 5, out); break;
    default: tile_rows(x, xs, tile, k, EP, out); break;
    }
}
