/* AVX-512 inner loops of the Attention kernel (ref_attention.c) for the
 * table "avx2" plans run on an AVX-512 CPU (table_avx2.c): up to 8 query
 * rows' scores over the same keys (attn_scores_rows: a decode step's GQA
 * group), two rows' softmax weights (attn_exp_pair) and up to 8 rows'
 * weighted sums of the same V rows (attn_accumulate_rows).
 * Built with the AVX-512 flags; chosen only after
 * rt_cpu_x86_avx512_vnni_ok().  Every value has the bits attn_avx2.c's
 * loops give it, so the two tables agree.
 *
 * Each score has the bits of attn_avx2.c's: a key's 8-lane accumulator
 * (lane j: the products of columns 8i + j, i in order, one FMA each),
 * then the same hadd tree.  Here the low 8 lanes of a ZMM are row a's
 * accumulator of a key and the high 8 row b's, against the key's 8 columns
 * broadcast to both halves (vbroadcastf64x4: a load, no shuffle), so one
 * FMA does two rows' work; the tree runs on both halves at once (hadd as
 * the shuffle_ps pair and add it is within each 128-bit lane).  The rows
 * go as up to 4 such pairs (an odd count's last row paired with itself),
 * so one key load serves the whole group: per step of 8 columns over 4
 * keys, 4 key loads, 4 query loads and 16 FMAs for 8 rows, where a loop
 * per pair loaded each key once per pair and an odd row ran the AVX2
 * loop alone.  Per key and row: d / 16 FMAs and under 1.5 tree
 * instructions, against d / 8 and about 2.3 for a row alone.
 *
 * Each weighted sum has the bits of attn_avx2.c's: o += p[t] v_t per
 * element in key order.  Here a row's 16 columns are one ZMM, a key's
 * weight its embedded broadcast, and one V load serves every row: per key
 * and 32 columns of 7 rows, 2 loads and 14 FMAs, none of them on a lane
 * that is not used.
 *
 * Float16 and int8 rows widen 8 values per load (vcvtph2ps; vpmovsxbd +
 * vcvtdq2ps) as attn_avx2.c's loops do, and an int8 key's sum is
 * multiplied by its row's scale after the tree: a group converts each
 * value once.  A pass of several groups widens its key block once instead
 * (attn_widen_rows) and runs the float32 loops on it. */
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

/* The first n (1..8) lanes of v's low half to a and of its high half to b
 * (NULL: not stored); n 8 by plain stores, which later loads of a few of
 * the values can be forwarded from. */
static inline void split8(__m512 v, float *a, float *b, int64_t n)
{
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    if (n == 8) {
        _mm256_storeu_ps(a, lo);
        if (b)
            _mm256_storeu_ps(b, hi);
        return;
    }
    __mmask8 live = (__mmask8)((1u << n) - 1u);
    _mm256_mask_storeu_ps(a, live, lo);
    if (b)
        _mm256_mask_storeu_ps(b, live, hi);
}

/* [p_a[t] x 8 | p_b[t] x 8]: both rows' weights of key t. */
static inline __m512 pair_weights(const float *pa, const float *pb, int64_t t)
{
    return _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_broadcast_ss(pa + t))),
        _mm256_castps_pd(_mm256_broadcast_ss(pb + t)), 1));
}

/* The 8 values of a key row from element i on, as floats in both halves:
 * the load itself repeats them (vbroadcasti128, vpbroadcastq and
 * vbroadcastf64x4 from memory are loads alone), so an int8 key costs a
 * vpmovsxbd and a vcvtdq2ps, where a vpunpcklqdq to repeat its 8 bytes
 * was a third shuffle-port instruction per step. */
INLINE __m512 key8(const uint8_t *row, int64_t i, int kind)
{
    if (kind == ROW_F16) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(row + 2 * i));
        return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(h));
    }
    if (kind == ROW_I8) {
        __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(row + i));
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_broadcastq_epi64(b)));
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

/* hadd (vhaddps) within each 128-bit lane: [x1 + x0, x3 + x2, y1 + y0, y3 + y2]. */
static inline __m512 hadd(__m512 x, __m512 y)
{
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0xDD), _mm512_shuffle_ps(x, y, 0x88));
}

/* The first level of attn_avx2.c's sum_each on both halves of 4 keys'
 * accumulators: in each 128-bit lane, the sums of the low and of the high
 * half of every key's 8 lanes (keys 0-3). */
static inline __m512 tree4(const __m512 *a)
{
    return hadd(hadd(a[0], a[1]), hadd(a[2], a[3]));
}

/* The last level for keys 0-3 (s0) and 4-7 (s1): lanes 0-7 the 8 keys'
 * scores of the pair's row a, lanes 8-15 row b's. */
static inline __m512 join_trees(__m512 s0, __m512 s1)
{
    /* 128-bit lanes of s0: row a's low and high sums of keys 0-3, then row
     * b's; the AVX2 tree adds the low to the high */
    __m512 lo = _mm512_shuffle_f32x4(s0, s1, 0x88), hi = _mm512_shuffle_f32x4(s0, s1, 0xDD);
    /* lanes: a 0-3, b 0-3, a 4-7, b 4-7 */
    return _mm512_shuffle_f32x4(_mm512_add_ps(lo, hi), _mm512_add_ps(lo, hi), 0xD8);
}

/* Query columns the rows loops keep interleaved (rt_attn_rows_q, 8 KiB
 * for 4 pairs): every head_dim of the families served (Gemma's 256 the
 * largest); the driver takes the single-row loops past it. */
#define ROWS_DIM RT_ATTN_ROWS_DIM

/* The stride of the rows' scores and weights. */
#define KB RT_ATTN_KEY_BLOCK

/* acc[p][j] += pair p's query columns of step c times key j's (kv[j]). */
INLINE void step_four(const __m512 (*q2)[ROWS_DIM / 8], int np, int64_t c, const __m512 *kv,
                      __m512 (*acc)[4])
{
#pragma GCC unroll 4
    for (int p = 0; p < np; p++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            acc[p][j] = _mm512_fmadd_ps(q2[p][c], kv[j], acc[p][j]);
}

/* Every pair's accumulators of 4 keys kr over head_dim d, one key load per
 * step of 8 columns for all np pairs, a K and a V line of pf a step, then
 * their first tree level into part[p]. */
INLINE void score_four(const __m512 (*q2)[ROWS_DIM / 8], int np, int64_t d,
                       const uint8_t *const *kr, int kind, __m512 *part, rt_attn_prefetch *pf)
{
    __m512 acc[4][4], kv[4];
#pragma GCC unroll 16
    for (int n = 0; n < 4 * np; n++)
        acc[n / 4][n % 4] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        rt_attn_prefetch_line(pf, 0);
        rt_attn_prefetch_line(pf, 1);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            kv[j] = key8(kr[j], i, kind);
        step_four(q2, np, i / 8, kv, acc);
    }
    if (i < d) { /* the last d % 8 columns, the other lanes 0 in q and k */
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            kv[j] = key_tail(kr[j], i, d - i, kind);
        step_four(q2, np, i / 8, kv, acc);
    }
#pragma GCC unroll 4
    for (int p = 0; p < np; p++)
        part[p] = tree4(acc[p]);
}

/* The nr rows' scores of the 8 key rows kr into row r's s + r KB + t0
 * (count of them kept): row pair p's 8 scores in one ZMM, row a's low, row
 * b's high. */
INLINE void score_eight(const __m512 (*q2)[ROWS_DIM / 8], int np, int nr, int64_t d,
                        const uint8_t *const *kr, int kind, float *s, int64_t t0,
                        int64_t count, rt_attn_prefetch *pf)
{
    __m512 s0[4], s1[4];
    score_four(q2, np, d, kr, kind, s0, pf);
    score_four(q2, np, d, kr + 4, kind, s1, pf);
    __m512 scale = _mm512_set1_ps(1.0f);
    if (kind == ROW_I8) {
        float f[8];
        uint64_t at = rt_kv_scale_offset(d);
        for (int j = 0; j < 8; j++)
            memcpy(&f[j], kr[j] + at, sizeof f[j]);
        scale = both_halves(_mm256_loadu_ps(f));
    }
#pragma GCC unroll 4
    for (int p = 0; p < np; p++) {
        __m512 v = join_trees(s0[p], s1[p]);
        if (kind == ROW_I8)
            v = _mm512_mul_ps(v, scale);
        split8(v, s + 2 * p * KB + t0, 2 * p + 1 < nr ? s + (2 * p + 1) * KB + t0 : NULL, count);
    }
}

/* The layout of rt_attn_rows_q here: q2[p][c], the columns 8c .. 8c + 7
 * of row 2p in the low half and of row 2p + 1 in the high one (an odd
 * count's last row in both), past d zero (attn_avx2.c's masked last
 * load).  Written once for a decode step's group, where writing it for
 * every key block took 3 % of the attention's compute at depth 4096. */
typedef __m512 rows_q2[ROWS_DIM / 8];
LLMC_STATIC_ASSERT(rows_q_holds_4_pairs, sizeof(rt_attn_rows_q) == 4 * sizeof(rows_q2));

void rt_attn_rows_queries_avx512(const float *const *q, int nr, int64_t d, rt_attn_rows_q *out)
{
    rows_q2 *q2 = (rows_q2 *)(void *)out->f;
    for (int p = 0; 2 * p < nr; p++) {
        const float *qb = q[2 * p + 1 < nr ? 2 * p + 1 : 2 * p];
        for (int64_t i = 0; i < d; i += 8) {
            __mmask8 live = (__mmask8)(d - i >= 8 ? 0xFF : (1u << (d - i)) - 1u);
            q2[p][i / 8] = join8_first(q[2 * p] + i, qb + i, live);
        }
    }
}

INLINE void scores_rows_of(const rt_attn_rows_q *q, int nr, const uint8_t *k, uint64_t row_bytes,
                           int64_t nk, int64_t d, float *s, int kind, int np,
                           rt_attn_prefetch *pf)
{
    const rows_q2 *q2 = (const rows_q2 *)(const void *)q->f;
    const uint8_t *kr[8];
    rt_attn_prefetch c = rt_attn_prefetch_local(pf);
    int64_t t0 = 0;
    for (; t0 < nk; t0 += 8) {
        key_group(k, row_bytes, t0, nk, kr);
        score_eight(q2, np, nr, d, kr, kind, s, t0, nk - t0 < 8 ? nk - t0 : 8, &c);
    }
    if (pf)
        *pf = c;
}

/* One loop per pair count (np a constant: the accumulators stay in
 * registers). */
INLINE void scores_rows_kind(const rt_attn_rows_q *q, int nr, const uint8_t *k, uint64_t row_bytes,
                             int64_t nk, int64_t d, float *s, int kind, rt_attn_prefetch *pf)
{
#define PAIRS(np) scores_rows_of(q, nr, k, row_bytes, nk, d, s, kind, np, pf)
    switch ((nr + 1) / 2) {
    case 1: PAIRS(1); break;
    case 2: PAIRS(2); break;
    case 3: PAIRS(3); break;
    default: PAIRS(4); break;
    }
#undef PAIRS
}

void rt_attn_scores_rows_avx512(const rt_attn_rows_q *q, int nr, const uint8_t *k, int dtype,
                                int64_t nk, int64_t d, float *s, rt_attn_prefetch *pf)
{
    if (dtype == LLMC_RT_F16)
        scores_rows_kind(q, nr, k, (uint64_t)d * 2, nk, d, s, ROW_F16, pf);
    else if (dtype == LLMC_RT_I8)
        scores_rows_kind(q, nr, k, rt_kv_row_bytes(LLMC_RT_I8, 0, d), nk, d, s, ROW_I8, pf);
    else
        scores_rows_kind(q, nr, k, (uint64_t)d * 4, nk, d, s, ROW_F32, pf);
}

/* ---- rt_kernels.attn_accumulate_rows ------------------------------------ */

/* 16 values of a V row from element i on as floats, the lanes past
 * `live` 0 (nothing past them is read). */
INLINE __m512 value16(const uint8_t *row, int64_t i, __mmask16 live, int kind)
{
    if (kind == ROW_F16)
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(live, row + 2 * i));
    return _mm512_maskz_loadu_ps(live, (const float *)(const void *)row + i);
}

/* Columns [i, i + 16 cw) of the nr rows over the nk V rows (v_t = v + t *
 * row_bytes; the last 16 masked by `tail`): each row's 16 columns one ZMM,
 * a key's weight of that row its embedded broadcast, each V load shared
 * by all the rows; a V and a K line of pf per key and 32 columns. */
INLINE void accumulate_cols(float *const *o, const float *p, int nr, const uint8_t *v,
                            uint64_t row_bytes, int64_t nk, int64_t i, int cw, __mmask16 tail,
                            int kind, rt_attn_prefetch *pf)
{
    __m512 acc[8][4];
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
        for (int c = 0; c < cw; c++)
            acc[r][c] = _mm512_maskz_loadu_ps(c == cw - 1 ? tail : 0xFFFF, o[r] + i + 16 * c);
    for (int64_t t = 0; t < nk; t++) {
        const uint8_t *vt = v + (uint64_t)t * row_bytes;
        __m512 x[4];
#pragma GCC unroll 4
        for (int c = 0; c < cw; c++) {
            if (c % 2) {
                rt_attn_prefetch_line(pf, 1);
                rt_attn_prefetch_line(pf, 0);
            }
            x[c] = value16(vt, i + 16 * c, c == cw - 1 ? tail : 0xFFFF, kind);
        }
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
            for (int c = 0; c < cw; c++)
                acc[r][c] = fma_bcast(acc[r][c], x[c], p + r * KB + t);
    }
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
        for (int c = 0; c < cw; c++)
            _mm512_mask_storeu_ps(o[r] + i + 16 * c, c == cw - 1 ? tail : 0xFFFF, acc[r][c]);
}

/* The nr rows' sums, 16 cw columns a sweep (cw 4 up to 4 rows, else 2):
 * 8 to 16 FMA chains from 2 rows on (4 cycles of latency on 2 FMA ports),
 * in at most 28 registers; then 32 columns, then the columns left 16 at a
 * time, the last masked. */
INLINE void accumulate_rows_of(float *const *o, const float *p, const uint8_t *v,
                               uint64_t row_bytes, int64_t nk, int64_t d, int kind, int nr,
                               rt_attn_prefetch *pf)
{
    const int cw = nr <= 4 ? 4 : 2;
    rt_attn_prefetch c = rt_attn_prefetch_local(pf);
    int64_t i = 0;
    for (; i + 16 * cw <= d; i += 16 * cw)
        accumulate_cols(o, p, nr, v, row_bytes, nk, i, cw, 0xFFFF, kind, &c);
    if (cw == 4 && i + 32 <= d) {
        accumulate_cols(o, p, nr, v, row_bytes, nk, i, 2, 0xFFFF, kind, &c);
        i += 32;
    }
    for (; i < d; i += 16) {
        __mmask16 live = (__mmask16)(d - i >= 16 ? 0xFFFF : (1u << (d - i)) - 1u);
        accumulate_cols(o, p, nr, v, row_bytes, nk, i, 1, live, kind, &c);
    }
    if (pf)
        *pf = c;
}

/* One loop per row count (nr a constant, as above). */
INLINE void accumulate_rows_kind(float *const *o, const float *p, int nr, const uint8_t *v,
                                 uint64_t row_bytes, int64_t nk, int64_t d, int kind,
                                 rt_attn_prefetch *pf)
{
#define ROWS(n) accumulate_rows_of(o, p, v, row_bytes, nk, d, kind, n, pf)
    switch (nr) {
    case 1: ROWS(1); break;
    case 2: ROWS(2); break;
    case 3: ROWS(3); break;
    case 4: ROWS(4); break;
    case 5: ROWS(5); break;
    case 6: ROWS(6); break;
    case 7: ROWS(7); break;
    default: ROWS(8); break;
    }
#undef ROWS
}

void rt_attn_accumulate_rows_avx512(float *const *o, const float *p, int nr,
                                    const uint8_t *v, int dtype, int64_t nk, int64_t d,
                                    rt_attn_prefetch *pf)
{
    if (dtype == LLMC_RT_F16)
        accumulate_rows_kind(o, p, nr, v, (uint64_t)d * 2, nk, d, ROW_F16, pf);
    else
        accumulate_rows_kind(o, p, nr, v, (uint64_t)d * 4, nk, d, ROW_F32, pf);
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
        split8(exp16(_mm512_sub_ps(join8(pa + t, pb + t), off)), pa + t, pb + t, 8);
    if (t == n)
        return;
    __mmask8 live = (__mmask8)((1u << (n - t)) - 1u);
    split8(exp16(_mm512_sub_ps(join8_first(pa + t, pb + t, live), off)), pa + t, pb + t, n - t);
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
