/* AVX2/FMA fp32 weight-panel micro-kernel (kernel_table.h: ftile) for
 * panels of hp = 16 rows; table fields: f_hp = 16, f_ep = 6,
 * ftile = rt_ftile_avx2.  The driver (f_linear.c) hands it [kc][16] panels
 * small enough to stay in L1 while it runs every row block against them.
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
 * rows >= 2 load the running sums into the accumulators and store them
 * back, so a panel continues each sum in c order.
 *
 * rows == 1 (decode GEMV) streams the tile once at memory bandwidth: there
 * is nothing to reuse, so the loop is unrolled over 4 steps of c with 4
 * independent accumulator pairs (8 FMA chains) to hide the FMA latency, and
 * the pairs are added in a fixed order at the end of the panel, then to the
 * running sums. */
#include <immintrin.h>

#include "x86_simd.h"

#define HP 16
#define EP 6

/* acc[e][0..16) += sum over c of x[e][c] * panel[c][0..16), e < rows; rows
 * a constant after inlining and the loops over rows unrolled (gcc -O2 does
 * not unroll them on its own and would keep the accumulators in memory),
 * so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void panel_rows(const float *x, int64_t xs,
                                                             const float *panel, int64_t kc,
                                                             int rows, float *acc)
{
    __m256 lo[EP], hi[EP];
    #pragma GCC unroll 6
    for (int e = 0; e < rows; e++) {
        lo[e] = _mm256_loadu_ps(acc + e * HP);
        hi[e] = _mm256_loadu_ps(acc + e * HP + 8);
    }
    for (int64_t c = 0; c < kc; c++) {
        __m256 w0 = _mm256_loadu_ps(panel + c * HP), w1 = _mm256_loadu_ps(panel + c * HP + 8);
        #pragma GCC unroll 6
        for (int e = 0; e < rows; e++) {
            __m256 b = _mm256_broadcast_ss(x + e * xs + c);
            lo[e] = _mm256_fmadd_ps(b, w0, lo[e]);
            hi[e] = _mm256_fmadd_ps(b, w1, hi[e]);
        }
    }
    #pragma GCC unroll 6
    for (int e = 0; e < rows; e++) {
        _mm256_storeu_ps(acc + e * HP, lo[e]);
        _mm256_storeu_ps(acc + e * HP + 8, hi[e]);
    }
}

/* One row: 4 steps of c per iteration, step c + u into accumulator pair u. */
static void panel_gemv(const float *x, const float *panel, int64_t kc, float *acc)
{
    __m256 lo[4], hi[4];
    #pragma GCC unroll 4
    for (int u = 0; u < 4; u++)
        lo[u] = hi[u] = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 4 <= kc; c += 4)
        #pragma GCC unroll 4
        for (int u = 0; u < 4; u++) {
            __m256 b = _mm256_broadcast_ss(x + c + u);
            const float *wc = panel + (c + u) * HP;
            lo[u] = _mm256_fmadd_ps(b, _mm256_loadu_ps(wc), lo[u]);
            hi[u] = _mm256_fmadd_ps(b, _mm256_loadu_ps(wc + 8), hi[u]);
        }
    for (; c < kc; c++) { /* kc % 4 last steps */
        __m256 b = _mm256_broadcast_ss(x + c);
        lo[0] = _mm256_fmadd_ps(b, _mm256_loadu_ps(panel + c * HP), lo[0]);
        hi[0] = _mm256_fmadd_ps(b, _mm256_loadu_ps(panel + c * HP + 8), hi[0]);
    }
    __m256 s0 = _mm256_add_ps(_mm256_add_ps(lo[0], lo[2]), _mm256_add_ps(lo[1], lo[3]));
    __m256 s1 = _mm256_add_ps(_mm256_add_ps(hi[0], hi[2]), _mm256_add_ps(hi[1], hi[3]));
    _mm256_storeu_ps(acc, _mm256_add_ps(_mm256_loadu_ps(acc), s0));
    _mm256_storeu_ps(acc + 8, _mm256_add_ps(_mm256_loadu_ps(acc + 8), s1));
}

void rt_ftile_avx2(const float *x, int64_t x_stride, const float *panel, int hp, int64_t kc,
                   int rows, float *acc)
{
    (void)hp; /* the driver checked hp == f_hp == 16 */
    switch (rows) {
    case 1: panel_gemv(x, panel, kc, acc); break;
    case 2: panel_rows(x, x_stride, panel, kc, 2, acc); break;
    case 3: panel_rows(x, x_stride, panel, kc, 3, acc); break;
    case 4: panel_rows(x, x_stride, panel, kc, 4, acc); break;
    case 5: panel_rows(x, x_stride, panel, kc, 5, acc); break;
    default: panel_rows(x, x_stride, panel, kc, EP, acc); break;
    }
}
