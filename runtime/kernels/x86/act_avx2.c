/* AVX2 activation and norm loops: rt_kernels.swiglu = rt_swiglu_avx2,
 * rt_kernels.rmsnorm_row = rt_rmsnorm_row_avx2.
 *
 * silu(x) = x * sigmoid(x) as the portable loop writes it (exp of a
 * non-positive argument only, so nothing overflows): with e = exp(-|x|),
 * x / (1 + e) for x >= 0 and x * e / (1 + e) below.  exp is act_x86.h's
 * range reduction and polynomial, with 2^n put in the exponent bits (in
 * two factors, so subnormal results come out as expf's do); arguments
 * below ln(2^-150) give 0 like expf's underflow (so silu(-inf) is -inf * 0
 * = NaN, as in the portable loop).  act_avx512.c has the same loop on 16
 * lanes. */
#include <immintrin.h>

#include "act_x86.h"
#include "x86_simd.h"

/* exp(t) for t <= 0 (NaN: some finite value; the caller's x carries the NaN). */
static inline __m256 exp_nonpositive(__m256 t)
{
    const __m256 lowest = _mm256_set1_ps(SILU_EXP_LOWEST);
    __m256 underflow = _mm256_cmp_ps(t, lowest, _CMP_LT_OQ);
    t = _mm256_max_ps(t, lowest);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(SILU_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SILU_EXP_LN2_HI), t);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SILU_EXP_LN2_LO), r);
    static const float poly[SILU_EXP_POLY_TERMS] = SILU_EXP_POLY;
    __m256 p = _mm256_set1_ps(poly[0]);
    for (int i = 1; i < SILU_EXP_POLY_TERMS; i++)
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(poly[i]));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* n in [-150, 0]: 2^n = 2^n1 * 2^n2, both normal floats; p * 2^n1 is
     * exact, so the result is rounded once */
    __m256i n_int = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(n_int, 1);
    __m256i n2 = _mm256_sub_epi32(n_int, n1), bias = _mm256_set1_epi32(127);
    __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_andnot_ps(underflow, _mm256_mul_ps(_mm256_mul_ps(p, f1), f2));
}

static inline __m256 swiglu8(__m256 x, __m256 up)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 e = exp_nonpositive(_mm256_or_ps(x, sign)); /* exp(-|x|) */
    __m256 non_negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
    __m256 num = _mm256_blendv_ps(_mm256_mul_ps(x, e), x, non_negative);
    return _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), up);
}

void rt_swiglu_avx2(const float *gate, const float *up, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, swiglu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i < n) {
        /* the tail through a zero-padded vector, so it has the same bits */
        float g[8] = {0}, u[8] = {0}, out[8];
        for (int64_t j = i; j < n; j++) {
            g[j - i] = gate[j];
            u[j - i] = up[j];
        }
        _mm256_storeu_ps(out, swiglu8(_mm256_loadu_ps(g), _mm256_loadu_ps(u)));
        for (int64_t j = i; j < n; j++)
            y[j] = out[j - i];
    }
}

/* ---- RMSNorm --------------------------------------------------------------
 * The portable row (ref_layernorm.c) with its RT_RMS_LANES = 8 compensated
 * lanes in the 8 float lanes of a YMM register: each step is k_fsum_add's
 * arithmetic, the branch a blend, so every lane holds the portable lane's
 * bits, and rt_rms_inv finishes both (rt_rms_inv_split).  A row of 896 floats took 2.3 us
 * in L1 with the portable row, 0.6 us with this one; in a Qwen2-0.5B w4a8
 * decode step (`llmc bench --profile`, Zen 3, 2 threads) RMSNorm went
 * 175-219 -> 92-118 us per token.  Fetching the row and its scale ahead
 * made no difference there. */

/* k_fsum_add(lane l, v[l]) for the 8 lanes */
static inline void fsum_add8(__m256 *sum, __m256 *c, __m256 v)
{
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 t = _mm256_add_ps(*sum, v);
    __m256 sum_bigger = _mm256_cmp_ps(_mm256_and_ps(*sum, abs_mask), _mm256_and_ps(v, abs_mask),
                                      _CMP_GE_OQ);
    __m256 if_bigger = _mm256_add_ps(_mm256_sub_ps(*sum, t), v);
    __m256 if_not = _mm256_add_ps(_mm256_sub_ps(v, t), *sum);
    *c = _mm256_add_ps(*c, _mm256_blendv_ps(if_not, if_bigger, sum_bigger));
    *sum = t;
}

void rt_rmsnorm_row_avx2(const float *x, const float *scale, float *y, int64_t n,
                         float epsilon, float fd)
{
    __m256 sum = _mm256_setzero_ps(), c = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + RT_RMS_LANES <= n; j += RT_RMS_LANES) {
        __m256 v = _mm256_loadu_ps(x + j);
        fsum_add8(&sum, &c, _mm256_mul_ps(v, v));
    }
    float sums[RT_RMS_LANES], cs[RT_RMS_LANES];
    _mm256_storeu_ps(sums, sum);
    _mm256_storeu_ps(cs, c);
    float inv = rt_rms_inv_split(sums, cs, x, j, n, epsilon, fd);
    __m256 inv8 = _mm256_set1_ps(inv);
    for (j = 0; j + 8 <= n; j += 8) /* (x * inv) * scale: two roundings, as the portable row */
        _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), inv8),
                                              _mm256_loadu_ps(scale + j)));
    for (; j < n; j++)
        y[j] = x[j] * inv * scale[j];
}
