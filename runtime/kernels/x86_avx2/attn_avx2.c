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
 * a masked tail, so o is loaded and stored once per block. */
#include <immintrin.h>

#include "x86_avx2.h"

/* The first n (0..8) lanes. */
static __m256i first_lanes(int64_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
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

/* scores[j] = q . k_j for the 8 key rows kr (d floats each). */
static __m256 score_eight(const float *q, const float *const *kr, int64_t d)
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
            acc[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr[j] + i), acc[j]);
    }
    if (i < d) { /* the last d % 8 columns, the other lanes 0 */
        __m256i m = first_lanes(d - i);
        __m256 qv = _mm256_maskload_ps(q + i, m);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[j] = _mm256_fmadd_ps(qv, _mm256_maskload_ps(kr[j] + i, m), acc[j]);
    }
    return sum_each(acc);
}

void rt_attn_scores_avx2(const float *q, const float *k, int64_t nk, int64_t d, float *scores)
{
    for (int64_t t0 = 0; t0 < nk; t0 += 8) {
        const float *kr[8];
        for (int j = 0; j < 8; j++) /* keys past nk repeat the first of the group */
            kr[j] = k + (t0 + j < nk ? t0 + j : t0) * d;
        __m256 s = score_eight(q, kr, d);
        if (nk - t0 >= 8) {
            _mm256_storeu_ps(scores + t0, s);
            continue;
        }
        float tail[8];
        _mm256_storeu_ps(tail, s);
        for (int64_t j = 0; t0 + j < nk; j++)
            scores[t0 + j] = tail[j];
    }
}

/* o[0..64) += p[t] * v_t[0..64) for t < nk (v_t at v + t * d). */
static void accumulate_64(float *o, const float *v, const float *p, int64_t nk, int64_t d)
{
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        acc[j] = _mm256_loadu_ps(o + 8 * j);
    for (int64_t t = 0; t < nk; t++) {
        __m256 pt = _mm256_broadcast_ss(p + t);
        const float *vt = v + t * d;
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[j] = _mm256_fmadd_ps(pt, _mm256_loadu_ps(vt + 8 * j), acc[j]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        _mm256_storeu_ps(o + 8 * j, acc[j]);
}

/* The same for the columns of mask m (a whole 8 when m is all ones). */
static void accumulate_8(float *o, const float *v, const float *p, int64_t nk, int64_t d,
                         __m256i m)
{
    __m256 acc = _mm256_maskload_ps(o, m);
    for (int64_t t = 0; t < nk; t++)
        acc = _mm256_fmadd_ps(_mm256_broadcast_ss(p + t), _mm256_maskload_ps(v + t * d, m), acc);
    _mm256_maskstore_ps(o, m, acc);
}

void rt_attn_accumulate_avx2(float *o, const float *v, const float *p, int64_t nk, int64_t d)
{
    int64_t i = 0;
    for (; i + 64 <= d; i += 64)
        accumulate_64(o + i, v + i, p, nk, d);
    for (; i < d; i += 8)
        accumulate_8(o + i, v + i, p, nk, d, first_lanes(d - i < 8 ? d - i : 8));
}
