/* AVX2/FMA inner loops of the Attention kernel (ref_attention.c), table
 * fields attn_scores = rt_attn_scores_avx2, attn_accumulate =
 * rt_attn_accumulate_avx2.  With the portable loops (SSE without FMA, a
 * horizontal sum per 4 keys) the kernel takes 1.6-1.8x as long at head_dim
 * 64 (make bench-f32).
 *
 * Scores: 8 keys at a time, one YMM accumulator each over head_dim (8 FMA
 * chains cover the FMA latency; q, one key row and the 8 accumulators are
 * 10 of the 16 registers), then one hadd tree turns the 8 accumulators into
 * the 8 scores.  Every key's sum goes through the same operations whatever
 * its place in the group, so a key scored alone (the unified offset phi)
 * has the bits it gets inside a block.
 *
 * Accumulate: o += p[t] v_t in key order, 64 columns (8 YMM accumulators,
 * 8 independent FMA chains) per sweep over the keys, then 8 at a time, then
 * a masked tail, so o is loaded and stored once per block.
 *
 * Float16 and int8 caches (tensor_traits.h rt_kv_row_bytes): the same
 * loops read the stored rows and widen 8 values per load (F16C vcvtph2ps;
 * int8 by vpmovsxbd + vcvtdq2ps), so no row is converted ahead; an int8
 * key's sum is multiplied by its row's scale after the hadd tree.  The
 * kind of row is a constant argument of always-inlined loops, so each
 * entry point compiles to its own loop without a branch inside. */
#include <immintrin.h>
#include <string.h>

#include "attn_x86.h"
#include "tensor_traits.h"
#include "x86_simd.h"

#define INLINE static inline __attribute__((always_inline))

/* 8 values of a row from element i on, as floats. */
INLINE __m256 load8(const void *row, int64_t i, int kind)
{
    if (kind == ROW_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)));
    if (kind == ROW_I8)
        return _mm256_cvtepi32_ps(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)((const int8_t *)row + i))));
    return _mm256_loadu_ps((const float *)row + i);
}

/* The last n < 8 values of a row from element i on, the other lanes 0
 * (copied out, so nothing past the row is read). */
INLINE __m256 load_tail(const void *row, int64_t i, int64_t n, int kind)
{
    uint8_t buf[32] = {0};
    memcpy(buf, (const uint8_t *)row + i * elem_bytes[kind], (size_t)(n * elem_bytes[kind]));
    return load8(buf, 0, kind);
}

/* The first n (0..8) lanes. */
static __m256i first_lanes(int64_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The n < 8 values of a row from element i on (m = first_lanes(n)), the
 * other lanes 0. */
INLINE __m256 load_part(const void *row, int64_t i, int64_t n, __m256i m, int kind)
{
    if (kind == ROW_F32)
        return _mm256_maskload_ps((const float *)row + i, m);
    return load_tail(row, i, n, kind);
}

/* Lane j = the sum of a[j]'s lanes, ((0+1)+(2+3)) + ((4+5)+(6+7)) for every j. */
static __m256 sum_each(const __m256 *a)
{
    __m256 s0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    __m256 s1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    /* s0: low-half sums of a[0..3] in lanes 0..3, high-half sums in 4..7 */
    return _mm256_add_ps(_mm256_permute2f128_ps(s0, s1, 0x20),
                         _mm256_permute2f128_ps(s0, s1, 0x31));
}

/* scores[j] = q . k_j for the 8 key rows kr (d values each). */
INLINE __m256 score_eight(const float *q, const uint8_t *const *kr, int64_t d, int kind)
{
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        acc[j] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        __m256 qv = _mm256_loadu_ps(q + i);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[j] = _mm256_fmadd_ps(qv, load8(kr[j], i, kind), acc[j]);
    }
    if (i < d) { /* the last d % 8 columns, the other lanes 0 */
        __m256i m = first_lanes(d - i);
        __m256 qv = _mm256_maskload_ps(q + i, m);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[j] = _mm256_fmadd_ps(qv, load_part(kr[j], i, d - i, m, kind), acc[j]);
    }
    __m256 s = sum_each(acc);
    if (kind != ROW_I8)
        return s;
    float scale[8];
    uint64_t at = rt_kv_scale_offset(d);
    for (int j = 0; j < 8; j++)
        memcpy(&scale[j], kr[j] + at, sizeof scale[j]);
    return _mm256_mul_ps(s, _mm256_loadu_ps(scale));
}

/* Scores of nk key rows of row_bytes each. */
INLINE void scores_of(const float *q, const uint8_t *k, uint64_t row_bytes, int64_t nk,
                      int64_t d, float *scores, int kind)
{
    const uint8_t *kr[8];
    int64_t t0 = 0;
    for (; t0 + 8 <= nk; t0 += 8) {
        key_group(k, row_bytes, t0, nk, kr);
        _mm256_storeu_ps(scores + t0, score_eight(q, kr, d, kind));
    }
    if (t0 == nk)
        return;
    key_group(k, row_bytes, t0, nk, kr);
    float tail[8];
    _mm256_storeu_ps(tail, score_eight(q, kr, d, kind));
    for (int64_t j = 0; t0 + j < nk; j++)
        scores[t0 + j] = tail[j];
}

void rt_attn_scores_avx2(const float *q, const float *k, int64_t nk, int64_t d, float *scores)
{
    scores_of(q, (const uint8_t *)k, (uint64_t)d * sizeof *k, nk, d, scores, ROW_F32);
}

void rt_attn_scores_f16_avx2(const float *q, const uint16_t *k, int64_t nk, int64_t d,
                             float *scores)
{
    scores_of(q, (const uint8_t *)k, (uint64_t)d * sizeof *k, nk, d, scores, ROW_F16);
}

void rt_attn_scores_i8_avx2(const float *q, const uint8_t *k, int64_t nk, int64_t d,
                            float *scores)
{
    scores_of(q, k, rt_kv_row_bytes(LLMC_RT_I8, 0, d), nk, d, scores, ROW_I8);
}

/* o[0..64) += p[t] * v_t[0..64) for t < nk (v_t: d values on from v's row t). */
INLINE void accumulate_64(float *o, const uint8_t *v, const float *p, int64_t nk, int64_t d,
                          int kind)
{
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        acc[j] = _mm256_loadu_ps(o + 8 * j);
    for (int64_t t = 0; t < nk; t++) {
        __m256 pt = _mm256_broadcast_ss(p + t);
        const uint8_t *vt = v + t * d * elem_bytes[kind];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[j] = _mm256_fmadd_ps(pt, load8(vt, 8 * j, kind), acc[j]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        _mm256_storeu_ps(o + 8 * j, acc[j]);
}

/* The same for n <= 8 columns (mask m: the first n lanes). */
INLINE void accumulate_8(float *o, const uint8_t *v, const float *p, int64_t nk, int64_t d,
                         int64_t n, int kind)
{
    __m256i m = first_lanes(n);
    __m256 acc = _mm256_maskload_ps(o, m);
    for (int64_t t = 0; t < nk; t++) {
        const uint8_t *vt = v + t * d * elem_bytes[kind];
        __m256 x = n == 8 ? load8(vt, 0, kind) : load_part(vt, 0, n, m, kind);
        acc = _mm256_fmadd_ps(_mm256_broadcast_ss(p + t), x, acc);
    }
    _mm256_maskstore_ps(o, m, acc);
}

INLINE void accumulate_of(float *o, const uint8_t *v, const float *p, int64_t nk, int64_t d,
                          int kind)
{
    int64_t i = 0;
    for (; i + 64 <= d; i += 64)
        accumulate_64(o + i, v + i * elem_bytes[kind], p, nk, d, kind);
    for (; i < d; i += 8)
        accumulate_8(o + i, v + i * elem_bytes[kind], p, nk, d, d - i < 8 ? d - i : 8, kind);
}

void rt_attn_accumulate_avx2(float *o, const float *v, const float *p, int64_t nk, int64_t d)
{
    accumulate_of(o, (const uint8_t *)v, p, nk, d, ROW_F32);
}

void rt_attn_accumulate_f16_avx2(float *o, const uint16_t *v, const float *p, int64_t nk,
                                 int64_t d)
{
    accumulate_of(o, (const uint8_t *)v, p, nk, d, ROW_F16);
}

/* ---- rt_kernels.attn_exp ----------------------------------------------------
 * ref_attention.c's exp_block on 8 lanes: the same range reduction (n =
 * round(x / ln2), r = x - n ln2 with ln2 in two parts), the same degree-7
 * Taylor polynomial of exp(r), here evaluated by FMAs (so the bits may
 * differ from the portable loop by an ulp), 2^n built in the exponent bits,
 * and the same clamps decided on the bit patterns: x below -87 gives 0,
 * above 88 is taken as 88, NaN gives NaN.  In a 512-token prefill the
 * portable loop (4 SSE lanes, no FMA) took as long as the scores. */
static inline __m256 exp8(__m256 x)
{
    const __m256i min_bits = _mm256_set1_epi32((int)RT_EXP_MIN_BITS);
    __m256i ux = _mm256_castps_si256(x);
    __m256i lo = _mm256_min_epu32(ux, min_bits);                    /* max(x, -87) */
    __m256 xc = _mm256_castsi256_ps(_mm256_min_epi32(lo, _mm256_set1_epi32(RT_EXP_MAX_BITS)));
    __m256i keep = _mm256_cmpeq_epi32(_mm256_max_epu32(ux, min_bits), min_bits); /* x >= -87 */
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(ux, _mm256_set1_epi32(0x7FFFFFFF)),
                                     _mm256_set1_epi32(0x7F800000));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(RT_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(RT_EXP_LN2_HI), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(RT_EXP_LN2_LO), r);
    static const float taylor[] = RT_EXP_TAYLOR;
    __m256 y = _mm256_set1_ps(taylor[0]);
    for (int i = 1; i < 8; i++)
        y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(taylor[i]));
    __m256i two_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
                                                       _mm256_set1_epi32(127)), 23);
    __m256 res = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(two_n, keep)), y);
    return _mm256_blendv_ps(res, _mm256_castsi256_ps(_mm256_set1_epi32((int)RT_EXP_NAN_BITS)),
                            _mm256_castsi256_ps(nan));
}

void rt_attn_exp_avx2(float *p, int64_t n, float off)
{
    __m256 o = _mm256_set1_ps(off);
    int64_t t = 0;
    for (; t + 8 <= n; t += 8)
        _mm256_storeu_ps(p + t, exp8(_mm256_sub_ps(_mm256_loadu_ps(p + t), o)));
    if (t < n) {
        __m256i m = first_lanes(n - t);
        _mm256_maskstore_ps(p + t, m, exp8(_mm256_sub_ps(_mm256_maskload_ps(p + t, m), o)));
    }
}
