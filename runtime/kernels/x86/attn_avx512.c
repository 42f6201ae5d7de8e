/* AVX-512 inner loops of the Attention kernel (ref_attention.c) for the
 * table "avx2" plans run on an AVX-512 CPU (table_avx2.c): two query rows'
 * scores over the same keys (attn_scores_pair), both rows' softmax weights
 * (attn_exp_pair) and two rows' weighted sums of the same V rows
 * (attn_accumulate_pair).
 * Built with the AVX-512 flags; chosen only after
 * rt_cpu_x86_avx512_vnni_ok().  Every value has the bits attn_avx2.c's
 * loops give it, so the two tables agree.
 *
 * Each score has the bits of attn_avx2.c's: a key's 8-lane accumulator
 * (lane j: the products of columns 8i + j, i in order, one FMA each),
 * then the same hadd tree.  Here the low 8 lanes of a ZMM are row a's
 * accumulator of a key and the high 8 row b's, against the key's 8 columns
 * broadcast to both halves (vbroadcastf64x4: a load, no shuffle), so one
 * FMA does two rows' work and one key load serves both; the tree runs on
 * both halves at once (hadd as the shuffle_ps pair and add it is within
 * each 128-bit lane).  Per key and row: d / 16 FMAs and under 1.5 tree
 * instructions, against d / 8 and about 2.3 for a row alone.
 *
 * Float16 and int8 rows widen 8 values per load (vcvtph2ps; vpmovsxbd +
 * vcvtdq2ps) as attn_avx2.c's loops do, and an int8 key's sum is
 * multiplied by its row's scale after the tree.  A pass of several row
 * pairs widens its key block once instead (attn_widen_rows) and runs the
 * float32 loops on it. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn_x86.h"
#include "tensor_traits.h"
#include "x86_simd.h"

#define INLINE static inline __attribute__((always_inline))

/* 8 floats in both halves (AVX512F broadcasts 256 bits as 4 doubles). */
static inline __m512 both_halves(__m256 v)
{
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(v)));
}

/* 8 floats at a in the low half, 8 at b in the high one. */
static inline __m512 join8(const float *a, const float *b)
{
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(
                                                   _mm256_loadu_ps(a))),
                                               _mm256_castps_pd(_mm256_loadu_ps(b)), 1));
}

/* The lanes `live` of 8 floats at a (low half) and at b (high half), the
 * other lanes 0 (nothing past them is read). */
static inline __m512 join8_first(const float *a, const float *b, __mmask8 live)
{
    return _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_maskz_loadu_ps(live, a))),
        _mm256_castps_pd(_mm256_maskz_loadu_ps(live, b)), 1));
}

static inline void split8(__m512 v, float *a, float *b)
{
    _mm256_storeu_ps(a, _mm512_castps512_ps256(v));
    _mm256_storeu_ps(b, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

/* [p_a[t] x 8 | p_b[t] x 8]: both rows' weights of key t. */
static inline __m512 pair_weights(const float *pa, const float *pb, int64_t t)
{
    return _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_broadcast_ss(pa + t))),
        _mm256_castps_pd(_mm256_broadcast_ss(pb + t)), 1));
}

/* The 8 values of a key row from element i on, as floats in both halves. */
INLINE __m512 key8(const uint8_t *row, int64_t i, int kind)
{
    if (kind == ROW_F16) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(row + 2 * i));
        return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(h));
    }
    if (kind == ROW_I8) {
        __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(row + i));
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_unpacklo_epi64(b, b)));
    }
    return both_halves(_mm256_loadu_ps((const float *)(const void *)row + i));
}

/* The last n < 8 values of a key row from element i on, the other lanes 0
 * (copied out, so nothing past the row is read). */
INLINE __m512 key_tail(const uint8_t *row, int64_t i, int64_t n, int kind)
{
    uint8_t buf[32] = {0};
    memcpy(buf, row + i * elem_bytes[kind], (size_t)(n * elem_bytes[kind]));
    return key8(buf, 0, kind);
}

/* hadd (vhaddps) within each 128-bit lane: [x1 + x0, x3 + x2, y1 + y0, y3 + y2]. */
static inline __m512 hadd(__m512 x, __m512 y)
{
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0xDD), _mm512_shuffle_ps(x, y, 0x88));
}

/* attn_avx2.c's sum_each on both halves: lanes 0-7 the 8 keys' scores of
 * row a, lanes 8-15 row b's. */
INLINE __m512 sum_each2(const __m512 *a)
{
    __m512 s0 = hadd(hadd(a[0], a[1]), hadd(a[2], a[3]));
    __m512 s1 = hadd(hadd(a[4], a[5]), hadd(a[6], a[7]));
    /* 128-bit lanes of s0: row a's low and high sums of keys 0-3, then row
     * b's; the AVX2 tree adds the low to the high */
    __m512 lo = _mm512_shuffle_f32x4(s0, s1, 0x88), hi = _mm512_shuffle_f32x4(s0, s1, 0xDD);
    /* lanes: a 0-3, b 0-3, a 4-7, b 4-7 */
    return _mm512_shuffle_f32x4(_mm512_add_ps(lo, hi), _mm512_add_ps(lo, hi), 0xD8);
}

/* The two rows' 8 scores of key rows kr into sa, sb (count of them kept),
 * a line of pf's K range prefetched per step of 8 columns. */
INLINE void score_eight(const __m512 *q2, int64_t d, const uint8_t *const *kr, int kind,
                        float *sa, float *sb, int64_t count, rt_attn_prefetch *pf)
{
    __m512 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        acc[j] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        __m512 qv = q2[i / 8];
        rt_attn_prefetch_line(pf, 0);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[j] = _mm512_fmadd_ps(qv, key8(kr[j], i, kind), acc[j]);
    }
    if (i < d) { /* the last d % 8 columns, the other lanes 0 in q and k */
        __m512 qv = q2[i / 8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[j] = _mm512_fmadd_ps(qv, key_tail(kr[j], i, d - i, kind), acc[j]);
    }
    __m512 s = sum_each2(acc);
    if (kind == ROW_I8) {
        float scale[8];
        uint64_t at = rt_kv_scale_offset(d);
        for (int j = 0; j < 8; j++)
            memcpy(&scale[j], kr[j] + at, sizeof scale[j]);
        s = _mm512_mul_ps(s, both_halves(_mm256_loadu_ps(scale)));
    }
    if (count == 8) {
        split8(s, sa, sb);
        return;
    }
    float out[16];
    _mm512_storeu_ps(out, s);
    memcpy(sa, out, (size_t)count * sizeof *sa);
    memcpy(sb, out + 8, (size_t)count * sizeof *sb);
}

/* q2[c]: row a's columns 8c .. 8c + 7 in the low half, row b's in the high
 * one, past d zero (attn_avx2.c's masked last load). */
static void interleave_rows(const float *qa, const float *qb, int64_t d, __m512 *q2)
{
    for (int64_t i = 0; i < d; i += 8) {
        __mmask8 live = (__mmask8)(d - i >= 8 ? 0xFF : (1u << (d - i)) - 1u);
        q2[i / 8] = join8_first(qa + i, qb + i, live);
    }
}

INLINE void pair_of(const float *qa, const float *qb, const uint8_t *k, uint64_t row_bytes,
                    int64_t nk, int64_t d, float *sa, float *sb, int kind, rt_attn_prefetch *pf)
{
    __m512 q2[RT_ATTN_MAX_HEAD_DIM / 8];
    interleave_rows(qa, qb, d, q2);
    const uint8_t *kr[8];
    rt_attn_prefetch c = rt_attn_prefetch_local(pf);
    int64_t t0 = 0;
    for (; t0 + 8 <= nk; t0 += 8) {
        key_group(k, row_bytes, t0, nk, kr);
        score_eight(q2, d, kr, kind, sa + t0, sb + t0, 8, &c);
    }
    if (t0 < nk) {
        key_group(k, row_bytes, t0, nk, kr);
        score_eight(q2, d, kr, kind, sa + t0, sb + t0, nk - t0, &c);
    }
    if (pf)
        *pf = c;
}

void rt_attn_scores_pair_avx512(const float *qa, const float *qb, const uint8_t *k, int dtype,
                                int64_t nk, int64_t d, float *sa, float *sb,
                                rt_attn_prefetch *pf)
{
    if (dtype == LLMC_RT_F16)
        pair_of(qa, qb, k, (uint64_t)d * 2, nk, d, sa, sb, ROW_F16, pf);
    else if (dtype == LLMC_RT_I8)
        pair_of(qa, qb, k, rt_kv_row_bytes(LLMC_RT_I8, 0, d), nk, d, sa, sb, ROW_I8, pf);
    else
        pair_of(qa, qb, k, (uint64_t)d * 4, nk, d, sa, sb, ROW_F32, pf);
}

/* ---- rt_kernels.attn_accumulate_pair ------------------------------------ */

/* Columns [i, i + 64) of both rows over the nk V rows (v_t = v + t *
 * row_bytes), a line of pf's V range prefetched per key. */
INLINE void pair_64(float *oa, float *ob, const uint8_t *v, uint64_t row_bytes, const float *pa,
                    const float *pb, int64_t nk, int64_t i, int kind, rt_attn_prefetch *pf)
{
    __m512 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        acc[j] = join8(oa + i + 8 * j, ob + i + 8 * j);
    for (int64_t t = 0; t < nk; t++) {
        __m512 pt = pair_weights(pa, pb, t);
        const uint8_t *vt = v + (uint64_t)t * row_bytes;
        rt_attn_prefetch_line(pf, 1);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[j] = _mm512_fmadd_ps(pt, key8(vt, i + 8 * j, kind), acc[j]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        split8(acc[j], oa + i + 8 * j, ob + i + 8 * j);
}

/* The same for the n <= 8 columns from i (the other lanes 0, not stored). */
INLINE void pair_8(float *oa, float *ob, const uint8_t *v, uint64_t row_bytes, const float *pa,
                   const float *pb, int64_t nk, int64_t i, int64_t n, int kind)
{
    __mmask8 live = (__mmask8)(n == 8 ? 0xFF : (1u << n) - 1u);
    __m512 acc = join8_first(oa + i, ob + i, live);
    for (int64_t t = 0; t < nk; t++) {
        __m512 pt = pair_weights(pa, pb, t);
        const uint8_t *vt = v + (uint64_t)t * row_bytes;
        acc = _mm512_fmadd_ps(pt, n == 8 ? key8(vt, i, kind) : key_tail(vt, i, n, kind), acc);
    }
    _mm256_mask_storeu_ps(oa + i, live, _mm512_castps512_ps256(acc));
    _mm256_mask_storeu_ps(ob + i, live,
                          _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));
}

INLINE void accumulate_pair_of(float *oa, float *ob, const uint8_t *v, uint64_t row_bytes,
                               const float *pa, const float *pb, int64_t nk, int64_t d, int kind,
                               rt_attn_prefetch *pf)
{
    rt_attn_prefetch c = rt_attn_prefetch_local(pf);
    int64_t i = 0;
    for (; i + 64 <= d; i += 64)
        pair_64(oa, ob, v, row_bytes, pa, pb, nk, i, kind, &c);
    for (; i < d; i += 8)
        pair_8(oa, ob, v, row_bytes, pa, pb, nk, i, d - i < 8 ? d - i : 8, kind);
    if (pf)
        *pf = c;
}

void rt_attn_accumulate_pair_avx512(float *oa, float *ob, const uint8_t *v, int dtype,
                                    const float *pa, const float *pb, int64_t nk, int64_t d,
                                    rt_attn_prefetch *pf)
{
    if (dtype == LLMC_RT_F16)
        accumulate_pair_of(oa, ob, v, (uint64_t)d * 2, pa, pb, nk, d, ROW_F16, pf);
    else
        accumulate_pair_of(oa, ob, v, (uint64_t)d * 4, pa, pb, nk, d, ROW_F32, pf);
}

/* ---- rt_kernels.attn_exp_pair ------------------------------------------- */

/* attn_avx2.c's exp8 on 16 lanes: the same operations lane by lane (the
 * clamps on the bit patterns, n rounded to nearest, r in two steps, the
 * Taylor polynomial by FMAs, 2^n in the exponent bits, NaN kept), so each
 * value has exp8's bits; the comparisons give masks instead of lanes of
 * ones.  One ZMM instruction does the work of two YMM ones: the pair loops
 * above run on ZMM, and while they do the core issues vector work on two
 * ports instead of three, so row-by-row exp8 took a fifth of a decode
 * step's attention at depth 4096 (perf). */
static inline __m512 exp16(__m512 x)
{
    const __m512i min_bits = _mm512_set1_epi32((int)RT_EXP_MIN_BITS);
    __m512i ux = _mm512_castps_si512(x);
    __m512i lo = _mm512_min_epu32(ux, min_bits);                    /* max(x, -87) */
    __m512 xc = _mm512_castsi512_ps(_mm512_min_epi32(lo, _mm512_set1_epi32(RT_EXP_MAX_BITS)));
    __mmask16 keep = _mm512_cmpeq_epi32_mask(_mm512_max_epu32(ux, min_bits), min_bits);
    __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(ux, _mm512_set1_epi32(0x7FFFFFFF)),
                                            _mm512_set1_epi32(0x7F800000));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(RT_EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(RT_EXP_LN2_HI), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(RT_EXP_LN2_LO), r);
    static const float taylor[] = RT_EXP_TAYLOR;
    __m512 y = _mm512_set1_ps(taylor[0]);
    for (int i = 1; i < 8; i++)
        y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(taylor[i]));
    __m512i two_n = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n),
                                                       _mm512_set1_epi32(127)), 23);
    __m512 res = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_maskz_mov_epi32(keep, two_n)), y);
    return _mm512_mask_mov_ps(res, nan,
                              _mm512_castsi512_ps(_mm512_set1_epi32((int)RT_EXP_NAN_BITS)));
}

void rt_attn_exp_pair_avx512(float *pa, float *pb, int64_t n, float off_a, float off_b)
{
    __m512 off = pair_weights(&off_a, &off_b, 0);
    int64_t t = 0;
    for (; t + 8 <= n; t += 8)
        split8(exp16(_mm512_sub_ps(join8(pa + t, pb + t), off)), pa + t, pb + t);
    if (t == n)
        return;
    __mmask8 live = (__mmask8)((1u << (n - t)) - 1u);
    __m512 e = exp16(_mm512_sub_ps(join8_first(pa + t, pb + t, live), off));
    _mm256_mask_storeu_ps(pa + t, live, _mm512_castps512_ps256(e));
    _mm256_mask_storeu_ps(pb + t, live,
                          _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
}

/* ---- rt_kernels.attn_widen_rows ----------------------------------------- */

/* n stored float16 or int8 rows as floats: 16 values per step (vcvtph2ps;
 * vpmovsxbd + vcvtdq2ps), the last d % 16 masked. */
INLINE void widen_of(const uint8_t *rows, uint64_t row_bytes, int64_t n, int64_t d, float *out,
                     int kind)
{
    for (int64_t t = 0; t < n; t++, rows += row_bytes, out += d)
        for (int64_t i = 0; i < d; i += 16) {
            __mmask16 live = (__mmask16)(d - i >= 16 ? 0xFFFF : (1u << (d - i)) - 1u);
            __m512 x;
            if (kind == ROW_F16)
                x = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(live, rows + 2 * i));
            else
                x = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(live, rows + i)));
            _mm512_mask_storeu_ps(out + i, live, x);
        }
}

void rt_attn_widen_rows_avx512(const uint8_t *rows, int dtype, uint64_t row_bytes, int64_t n,
                               int64_t d, float *out)
{
    if (dtype == LLMC_RT_F16)
        widen_of(rows, row_bytes, n, d, out, ROW_F16);
    else
        widen_of(rows, row_bytes, n, d, out, ROW_I8);
}

/* ---- rt_kernels.attn_block_lanes ---------------------------------------
 *
 * A pass's rows as the 16 lanes of a ZMM (rt_attn_lanes): column i of the
 * queries is one vector, and a key's value enters as an embedded broadcast
 * ({1to16}) of the FMA, so a key block needs no shuffles at all.  A lane's
 * score keeps attn_avx2.c's order: chain j (j < 8) adds the products of
 * columns 8i + j, i in order, and the chains join as ((0+1)+(2+3)) +
 * ((4+5)+(6+7)), the lane sums of its hadd tree.  Three keys at a time are
 * 24 chains, enough to keep both FMA ports busy through the 4-cycle
 * latency, in 24 of the 32 registers.  The weighted sum keeps 16 output
 * columns in registers across the block's keys, one masked FMA per key
 * and column: each lane adds only the keys its row sees, in key order, as
 * attn_accumulate does.  The softmax state (block maximum, offset, sum of
 * the weights) is ref_attention.c's per row, lane by lane, on the lanes
 * that see a key of the block (a row that sees none skips the block).  A
 * row's weights sit at their keys' places in the block where the row
 * loops start them at the row's first key (a window's start inside the
 * block): the sum is still theirs, since the zero weights before it add
 * nothing and block_sum's four partial sums ((0+2)+(1+3), any rotation of
 * them) join by commutative adds; the maximum does not depend on places. */

/* acc + x * (*k in every lane) by an embedded broadcast: around
 * _mm512_set1_ps gcc 12 issued a vbroadcastss per FMA and took the other
 * factor from memory, two loads per FMA where the keys need one. */
static inline __m512 fma_bcast(__m512 acc, __m512 x, const float *k)
{
    __asm__("vfmadd231ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(x), "m"(*k));
    return acc;
}

/* The same in the lanes `live` only (the others keep acc). */
static inline __m512 fma_bcast_mask(__m512 acc, __m512 x, const float *k, __mmask16 live)
{
    __asm__("vfmadd231ps %3%{1to16%}, %2, %0%{%1%}" : "+v"(acc) : "Yk"(live), "v"(x), "m"(*k));
    return acc;
}

/* The keys t0 .. t0 + KEYS - 1 of k (rows of d floats): their scores in s. */
INLINE void score_keys(const rt_attn_lanes *L, const float *k, int64_t d, int keys, __m512 *s)
{
    __m512 acc[3][8];
#pragma GCC unroll 3
    for (int t = 0; t < keys; t++)
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[t][j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 8)
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m512 q = _mm512_loadu_ps(L->q[i + j]);
#pragma GCC unroll 3
            for (int t = 0; t < keys; t++)
                acc[t][j] = fma_bcast(acc[t][j], q, &k[t * d + i + j]);
        }
#pragma GCC unroll 3
    for (int t = 0; t < keys; t++) {
        __m512 *c = acc[t];
        s[t] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c[0], c[1]), _mm512_add_ps(c[2], c[3])),
                             _mm512_add_ps(_mm512_add_ps(c[4], c[5]), _mm512_add_ps(c[6], c[7])));
    }
}

/* Lanes whose rows see key position t. */
static inline __mmask16 sees(__m512i lo, __m512i n, int64_t t)
{
    __m512i at = _mm512_set1_epi32((int)t);
    return _mm512_cmple_epi32_mask(lo, at) & _mm512_cmpgt_epi32_mask(n, at);
}

/* s[t]: the scores of key t0 + t (times its scale), -inf where a lane does
 * not see it and past nk; vis[t]: the lanes that see it.  Returns the
 * lanes that see any. */
INLINE __mmask16 block_scores_lanes(const rt_attn_lanes *L, const float *k, const float *scale,
                                    int64_t t0, int64_t nk, __m512 s[RT_ATTN_KEY_BLOCK],
                                    __mmask16 vis[RT_ATTN_KEY_BLOCK])
{
    const __m512 none = _mm512_set1_ps(-INFINITY);
    __m512i lo = _mm512_loadu_si512(L->lo), n = _mm512_loadu_si512(L->n);
    int64_t d = L->d, t = 0;
    for (; t + 3 <= nk; t += 3)
        score_keys(L, k + t * d, d, 3, s + t);
    if (nk - t == 2)
        score_keys(L, k + t * d, d, 2, s + t);
    else if (nk - t == 1)
        score_keys(L, k + t * d, d, 1, s + t);
    __mmask16 any = 0;
    for (t = 0; t < RT_ATTN_KEY_BLOCK; t++) {
        vis[t] = t < nk ? sees(lo, n, t0 + t) : 0;
        any |= vis[t];
        if (t < nk && scale)
            s[t] = _mm512_mul_ps(s[t], _mm512_set1_ps(scale[t]));
        s[t] = _mm512_mask_blend_ps(vis[t], none, s[t]);
    }
    return any;
}

/* ref_attention.c's block_offset for the lanes `live`: the running maximum
 * from the block's (4 running maxima, joined (0,1), (2,3)), then the
 * offset, and where it moved, the row's sum and output scaled by exp(old
 * - new). */
static void offset_lanes(rt_attn_lanes *L, const __m512 s[RT_ATTN_KEY_BLOCK], __mmask16 live)
{
    __m512 m[4] = {s[0], s[1], s[2], s[3]};
    for (int t = 4; t < RT_ATTN_KEY_BLOCK; t++)
        m[t % 4] = _mm512_max_ps(s[t], m[t % 4]);
    __m512 bm = _mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3]));
    __m512 mx = _mm512_loadu_ps(L->mx), phi = _mm512_loadu_ps(L->phi);
    __m512 off = _mm512_loadu_ps(L->off);
    mx = _mm512_mask_max_ps(mx, live, bm, mx);
    __mmask16 unified = _mm512_cmp_ps_mask(mx, _mm512_add_ps(phi, _mm512_set1_ps(
                                                                      RT_ATTN_EXP_HEADROOM)),
                                           _CMP_LT_OQ);
    __m512 next = _mm512_mask_blend_ps(unified, mx, phi);
    __mmask16 moved = live & _mm512_cmp_ps_mask(next, off, _CMP_NEQ_UQ);
    _mm512_storeu_ps(L->mx, mx);
    float moved_to[RT_ATTN_LANES];
    _mm512_storeu_ps(moved_to, next);
    for (int r = 0; moved; r++, moved >>= 1) { /* rare: the exact fallback */
        if (!(moved & 1))
            continue;
        float f = expf(L->off[r] - moved_to[r]);
        L->l[r] *= f;
        for (int64_t i = 0; i < L->d; i++)
            L->o[i][r] *= f;
        L->off[r] = moved_to[r];
    }
}

/* The columns c .. c + W - 1 of every row's sum over the block's keys. */
INLINE void accumulate_lanes(rt_attn_lanes *L, const float *v, const __m512 p[RT_ATTN_KEY_BLOCK],
                             const __mmask16 vis[RT_ATTN_KEY_BLOCK], int64_t nk, int64_t c,
                             int width)
{
    __m512 acc[16];
    int64_t d = L->d;
#pragma GCC unroll 16
    for (int j = 0; j < width; j++)
        acc[j] = _mm512_loadu_ps(L->o[c + j]);
    for (int64_t t = 0; t < nk; t++) {
        const float *vt = v + t * d + c;
#pragma GCC unroll 16
        for (int j = 0; j < width; j++)
            acc[j] = fma_bcast_mask(acc[j], p[t], &vt[j], vis[t]);
    }
#pragma GCC unroll 16
    for (int j = 0; j < width; j++)
        _mm512_storeu_ps(L->o[c + j], acc[j]);
}

void rt_attn_block_lanes_avx512(rt_attn_lanes *L, const float *k, const float *v,
                                const float *scale, int64_t t0, int64_t nk)
{
    __m512 s[RT_ATTN_KEY_BLOCK];
    __mmask16 vis[RT_ATTN_KEY_BLOCK];
    __mmask16 live = block_scores_lanes(L, k, scale, t0, nk, s, vis);
    if (!live)
        return;
    offset_lanes(L, s, live);
    /* the weights exp(s - offset) and their sum, 4 lanes of keys joined
     * (0, 2), (1, 3) as block_sum does */
    __m512 off = _mm512_loadu_ps(L->off), sum[4];
    for (int j = 0; j < 4; j++)
        sum[j] = _mm512_setzero_ps();
    for (int t = 0; t < RT_ATTN_KEY_BLOCK; t++) {
        s[t] = exp16(_mm512_sub_ps(s[t], off));
        sum[t % 4] = _mm512_add_ps(sum[t % 4], s[t]);
    }
    __m512 l = _mm512_loadu_ps(L->l);
    __m512 total = _mm512_add_ps(_mm512_add_ps(sum[0], sum[2]), _mm512_add_ps(sum[1], sum[3]));
    _mm512_storeu_ps(L->l, _mm512_mask_add_ps(l, live, l, total));
    int64_t c = 0;
    for (; c + 16 <= L->d; c += 16)
        accumulate_lanes(L, v, s, vis, nk, c, 16);
    if (c < L->d)
        accumulate_lanes(L, v, s, vis, nk, c, 8);
}
