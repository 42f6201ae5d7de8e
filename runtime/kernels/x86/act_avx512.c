/* AVX-512 SwiGLU for the table "avx2" plans run on an AVX-512 CPU
 * (table_avx2.c): act_avx2.c's loop on 16 lanes, the same operations lane
 * by lane (the comparisons give masks instead of lanes of ones), so each
 * value has rt_swiglu_avx2's bits.  Built with the AVX-512 flags; chosen
 * only after rt_cpu_x86_avx512_vnni_ok().
 *
 * Why: the AVX2 loop is bound by its ~40 vector instructions per 8 values
 * (the divide included), not by memory: ~1.0 ns a value in L1 and ~1.2 ns
 * over a prefill's [512, 4864] operands (Intel Xeon family 6 model 207),
 * about 5 % of a w4a8 pp512. */
#include <immintrin.h>

#include "act_x86.h"
#include "x86_simd.h"

/* act_avx2.c's exp_nonpositive on 16 lanes. */
static inline __m512 exp_nonpositive16(__m512 t)
{
    const __m512 lowest = _mm512_set1_ps(SILU_EXP_LOWEST);
    __mmask16 underflow = _mm512_cmp_ps_mask(t, lowest, _CMP_LT_OQ);
    t = _mm512_max_ps(t, lowest);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(SILU_EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SILU_EXP_LN2_HI), t);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SILU_EXP_LN2_LO), r);
    static const float poly[SILU_EXP_POLY_TERMS] = SILU_EXP_POLY;
    __m512 p = _mm512_set1_ps(poly[0]);
    for (int i = 1; i < SILU_EXP_POLY_TERMS; i++)
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(poly[i]));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i n_int = _mm512_cvtps_epi32(n), n1 = _mm512_srai_epi32(n_int, 1);
    __m512i n2 = _mm512_sub_epi32(n_int, n1), bias = _mm512_set1_epi32(127);
    __m512 f1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
    __m512 f2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
    return _mm512_maskz_mov_ps((__mmask16)~underflow, _mm512_mul_ps(_mm512_mul_ps(p, f1), f2));
}

static inline __m512 swiglu16(__m512 x, __m512 up)
{
    /* exp(-|x|); the sign bit set as an integer (vorps needs AVX512DQ) */
    __m512 e = exp_nonpositive16(_mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
    __mmask16 non_negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
    __m512 num = _mm512_mask_blend_ps(non_negative, _mm512_mul_ps(x, e), x);
    return _mm512_mul_ps(_mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), up);
}

void rt_swiglu_avx512(const float *gate, const float *up, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, swiglu16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
    if (i < n) { /* the last n % 16 lanes, the others neither read nor stored */
        __mmask16 live = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(y + i, live, swiglu16(_mm512_maskz_loadu_ps(live, gate + i),
                                                    _mm512_maskz_loadu_ps(live, up + i)));
    }
}
