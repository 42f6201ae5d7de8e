/* rt_kernels.dequant_block for AVX2 tiles (hp 8, lp 4; q_avx2.c): the
 * f32-dequant prefill path's weight conversion, one [8][4] tile per step
 * of four instead of 32 scalar conversions.
 *
 * A tile's 32 bytes hold rows 0-3 in the low 128-bit lane and 4-7 in the
 * high one, 4 steps per row.  vpshufb transposes each lane to step-major
 * ([step][row]), then for step l vpermd brings lane 0's and lane 1's
 * dwords l next to each other: the 8 rows of step l as 8 bytes, widened to
 * int32, converted, then scale * q + min as a multiply and an add (not an
 * FMA; no add for bits 8), or (Float32 coefficients) (float)(q - zero) *
 * scale, so the floats equal the portable loop's (rt_qweight_value). */
#include <immintrin.h>

#include "x86_simd.h"

#define HP 8
#define LP 4

static void dequant_tiles(const uint8_t *block, const rt_qweight_shape *ws, int64_t t0,
                          int64_t t1, float *out, int64_t stride)
{
    const __m256i step_major = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11,
                                                15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3,
                                                7, 11, 15);
    const __m256i nibble = _mm256_set1_epi8(15);
    const uint8_t *coef = block + rt_qweight_data_bytes(ws); /* hp is HP */
    bool half = ws->coef == RT_QCOEF_HALF;
    __m256 scale = half ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)coef))
                        : _mm256_loadu_ps((const float *)coef);
    __m256 min = _mm256_setzero_ps();
    __m256i zero = _mm256_setzero_si256();
    if (half && ws->bits == 4)
        min = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(coef + 2 * HP)));
    if (!half)
        zero = _mm256_cvttps_epi32(_mm256_loadu_ps((const float *)(coef + 4 * HP)));
    for (int64_t t = t0; t < t1; t++) {
        __m256i q;
        if (ws->bits == 8) {
            q = _mm256_loadu_si256((const __m256i *)(block + t * HP * LP));
        } else {
            q = _mm256_loadu_si256((const __m256i *)(block + (t / 2) * HP * LP));
            q = _mm256_and_si256(t & 1 ? _mm256_srli_epi16(q, 4) : q, nibble);
        }
        q = _mm256_shuffle_epi8(q, step_major);
        for (int l = 0; l < LP; l++) {
            __m128i rows = _mm256_castsi256_si128(
                _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(l, l + 4, 0, 0, 0, 0, 0, 0)));
            __m256i wide = ws->bits == 8 ? _mm256_cvtepi8_epi32(rows) : _mm256_cvtepu8_epi32(rows);
            if (!half)
                wide = _mm256_sub_epi32(wide, zero);
            __m256 v = _mm256_mul_ps(scale, _mm256_cvtepi32_ps(wide));
            if (half && ws->bits == 4) /* bits 8 adds nothing: -0 stays -0 as in the portable loop */
                v = _mm256_add_ps(v, min);
            _mm256_storeu_ps(out + ((t - t0) * LP + l) * stride, v);
        }
    }
}

void rt_dequant_block_avx2(const uint8_t *block, const rt_qweight_shape *ws, int64_t i0,
                           int64_t i1, float *out, int64_t stride)
{
    if (ws->hp != HP || ws->lp != LP || i0 % LP) {
        rt_dequant_block_generic(block, ws, i0, i1, out, stride);
        return;
    }
    int64_t whole = i1 / LP * LP; /* steps of whole tiles */
    if (whole > i0)
        dequant_tiles(block, ws, i0 / LP, whole / LP, out, stride);
    if (i1 > whole) /* a partial last tile */
        rt_dequant_block_generic(block, ws, whole, i1, out + (whole - i0) * stride, stride);
}
