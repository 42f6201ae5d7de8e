/* AVX-512 fp32 weight-panel micro-kernel (kernel_table.h: ftile) of the
 * table "avx2" plans run on an AVX-512 CPU (table_avx2.c): the panels of
 * f_avx2.c (hp = 16 rows), whose 16 weights of a step c are exactly one ZMM
 * vector, so every row keeps one ZMM accumulator instead of two YMM ones
 * and a step issues ep FMAs instead of 2 * ep.  Built with -mavx512f (and
 * the AVX2 flags); chosen only after rt_cpu_x86_avx512_vnni_ok().
 *
 * Each lane does the AVX2 kernel's operations in its order (rows >= 2: one
 * FMA per step c into the running sum; rows == 1: steps c + u into
 * accumulator u of 4, then (0 + 2) + (1 + 3), then the running sum), so the
 * two tables give the same bits (test_rt_ftile).
 *
 * ftile_pair runs two panels (row tiles ht, ht + 1) against the same rows:
 * 2 x ep accumulators.  With one panel a step's ep = 6 FMAs form 6
 * dependent chains, and two FMA units with a latency of 4 need 8 in flight,
 * so one panel is bound at 6 / 8 of the FMA peak before anything else; two
 * panels give 12 chains, and each broadcast activation feeds two FMAs. */
#include <immintrin.h>

#include "x86_simd.h"

#define HP 16
#define EP 6

static inline __attribute__((always_inline)) void panel_rows(const float *x, int64_t xs,
                                                             const float *panel, int64_t kc,
                                                             int rows, float *acc)
{
    __m512 s[EP];
    #pragma GCC unroll 6
    for (int e = 0; e < rows; e++)
        s[e] = _mm512_loadu_ps(acc + e * HP);
    for (int64_t c = 0; c < kc; c++) {
        __m512 w = _mm512_loadu_ps(panel + c * HP);
        #pragma GCC unroll 6
        for (int e = 0; e < rows; e++)
            s[e] = _mm512_fmadd_ps(_mm512_set1_ps(x[e * xs + c]), w, s[e]);
    }
    #pragma GCC unroll 6
    for (int e = 0; e < rows; e++)
        _mm512_storeu_ps(acc + e * HP, s[e]);
}

static void panel_gemv(const float *x, const float *panel, int64_t kc, float *acc)
{
    __m512 s[4];
    #pragma GCC unroll 4
    for (int u = 0; u < 4; u++)
        s[u] = _mm512_setzero_ps();
    int64_t c = 0;
    for (; c + 4 <= kc; c += 4)
        #pragma GCC unroll 4
        for (int u = 0; u < 4; u++)
            s[u] = _mm512_fmadd_ps(_mm512_set1_ps(x[c + u]), _mm512_loadu_ps(panel + (c + u) * HP),
                                   s[u]);
    for (; c < kc; c++) /* kc % 4 last steps */
        s[0] = _mm512_fmadd_ps(_mm512_set1_ps(x[c]), _mm512_loadu_ps(panel + c * HP), s[0]);
    __m512 sum = _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3]));
    _mm512_storeu_ps(acc, _mm512_add_ps(_mm512_loadu_ps(acc), sum));
}

/* panel_rows for two panels: each lane the same FMAs in the same order. */
static inline __attribute__((always_inline)) void pair_rows(const float *x, int64_t xs,
                                                            const float *panel_a,
                                                            const float *panel_b, int64_t kc,
                                                            int rows, float *acc_a, float *acc_b)
{
    __m512 sa[EP], sb[EP];
    #pragma GCC unroll 6
    for (int e = 0; e < rows; e++) {
        sa[e] = _mm512_loadu_ps(acc_a + e * HP);
        sb[e] = _mm512_loadu_ps(acc_b + e * HP);
    }
    for (int64_t c = 0; c < kc; c++) {
        __m512 wa = _mm512_loadu_ps(panel_a + c * HP), wb = _mm512_loadu_ps(panel_b + c * HP);
        #pragma GCC unroll 6
        for (int e = 0; e < rows; e++) {
            __m512 xe = _mm512_set1_ps(x[e * xs + c]);
            sa[e] = _mm512_fmadd_ps(xe, wa, sa[e]);
            sb[e] = _mm512_fmadd_ps(xe, wb, sb[e]);
        }
    }
    #pragma GCC unroll 6
    for (int e = 0; e < rows; e++) {
        _mm512_storeu_ps(acc_a + e * HP, sa[e]);
        _mm512_storeu_ps(acc_b + e * HP, sb[e]);
    }
}

void rt_ftile_pair_avx512(const float *x, int64_t x_stride, const float *panel_a,
                          const float *panel_b, int hp, int64_t kc, int rows, float *acc_a,
                          float *acc_b)
{
    (void)hp; /* the driver checked hp == f_hp == 16 */
    switch (rows) {
    case 1: /* the GEMV's own order, panel by panel */
        panel_gemv(x, panel_a, kc, acc_a);
        panel_gemv(x, panel_b, kc, acc_b);
        break;
    case 2: pair_rows(x, x_stride, panel_a, panel_b, kc, 2, acc_a, acc_b); break;
    case 3: pair_rows(x, x_stride, panel_a, panel_b, kc, 3, acc_a, acc_b); break;
    case 4: pair_rows(x, x_stride, panel_a, panel_b, kc, 4, acc_a, acc_b); break;
    case 5: pair_rows(x, x_stride, panel_a, panel_b, kc, 5, acc_a, acc_b); break;
    default: pair_rows(x, x_stride, panel_a, panel_b, kc, EP, acc_a, acc_b); break;
    }
}

void rt_ftile_avx512(const float *x, int64_t x_stride, const float *panel, int hp, int64_t kc,
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
