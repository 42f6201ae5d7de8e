/* The quantized micro-kernels of the tables whose int8 dot products are
 * vpdpbusd on YMM registers, over the AVX2 table's tiles and drivers
 * (q_x86_tiles.h, q_x86_qtile.h).  Included by q_avxvnni.c (VEX-encoded,
 * AVX-VNNI) and q_avx512_ymm.c (EVEX-encoded, AVX-512 VNNI with AVX512VL):
 * the same instruction on the same registers, for CPUs that have one
 * encoding and not the other.  The includer defines
 *   dot4(acc, u8, s8): acc + the 4-byte dot products of u8 (unsigned) and
 *                      s8 (signed) per int32 lane, one vpdpbusd;
 *   YMM_NAME(name):    the exported name of each entry point.
 * What the kernels count and why is in q_avxvnni.c's opening comment. */
#ifndef YMM_NAME
#error "define dot4 and YMM_NAME before including q_vnni_ymm.h"
#endif

/* w + 128 of one 8-bit tile at w: the unsigned operand. */
static inline __m256i w8_unsigned(const uint8_t *w)
{
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)w), _mm256_set1_epi8(-128));
}

/* ---- bits 4 -------------------------------------------------------------- */

/* Low and high nibble tiles in two chains (their sum is exact in int32). */
static inline __m256i w4_group_row(const uint8_t *w, const uint8_t *x, int64_t pairs)
{
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int64_t u = 0; u < pairs; u++) {
        __m256i lo, hi;
        w4_nibbles(w + u * TILE_BYTES, &lo, &hi);
        s0 = dot4(s0, lo, bcast4(x + 2 * u * ACT_STEP));
        s1 = dot4(s1, hi, bcast4(x + (2 * u + 1) * ACT_STEP));
    }
    return _mm256_add_epi32(s0, s1);
}

/* The 4 rows share each unpacked pair; 8 chains (low and high per row). */
static inline void w4_group_rows(const uint8_t *w, const uint8_t *x, int64_t pairs,
                                 __m256i s32[EP])
{
    __m256i hi32[EP];
    EACH_ROW
    for (int e = 0; e < EP; e++)
        hi32[e] = _mm256_setzero_si256();
    for (int64_t u = 0; u < pairs; u++) {
        __m256i lo, hi;
        w4_nibbles(w + u * TILE_BYTES, &lo, &hi);
        const uint8_t *xu = x + 2 * u * ACT_STEP;
        EACH_ROW
        for (int e = 0; e < EP; e++) {
            s32[e] = dot4(s32[e], lo, bcast4(xu + e * LP));
            hi32[e] = dot4(hi32[e], hi, bcast4(xu + ACT_STEP + e * LP));
        }
    }
    EACH_ROW
    for (int e = 0; e < EP; e++)
        s32[e] = _mm256_add_epi32(s32[e], hi32[e]);
}

/* One activation row by two W row tiles, each activation word broadcast
 * once for both. */
static inline void w4_group_row_pair(const uint8_t *wa, const uint8_t *wb, const uint8_t *x,
                                     int64_t pairs, __m256i *sa, __m256i *sb)
{
    __m256i a_hi = _mm256_setzero_si256(), b_hi = _mm256_setzero_si256();
    for (int64_t u = 0; u < pairs; u++) {
        __m256i la, ha, lb, hb;
        w4_nibbles(wa + u * TILE_BYTES, &la, &ha);
        w4_nibbles(wb + u * TILE_BYTES, &lb, &hb);
        __m256i xl = bcast4(x + 2 * u * ACT_STEP), xh = bcast4(x + (2 * u + 1) * ACT_STEP);
        *sa = dot4(*sa, la, xl);
        *sb = dot4(*sb, lb, xl);
        a_hi = dot4(a_hi, ha, xh);
        b_hi = dot4(b_hi, hb, xh);
    }
    *sa = _mm256_add_epi32(*sa, a_hi);
    *sb = _mm256_add_epi32(*sb, b_hi);
}

/* The 4 rows by two W row tiles: 8 chains, each row's two activation
 * words broadcast once for both tiles. */
static inline void w4_group_rows_pair(const uint8_t *wa, const uint8_t *wb, const uint8_t *x,
                                      int64_t pairs, __m256i sa[EP], __m256i sb[EP])
{
    for (int64_t u = 0; u < pairs; u++) {
        __m256i la, ha, lb, hb;
        w4_nibbles(wa + u * TILE_BYTES, &la, &ha);
        w4_nibbles(wb + u * TILE_BYTES, &lb, &hb);
        const uint8_t *xu = x + 2 * u * ACT_STEP;
        EACH_ROW
        for (int e = 0; e < EP; e++) {
            __m256i xl = bcast4(xu + e * LP), xh = bcast4(xu + ACT_STEP + e * LP);
            sa[e] = dot4(dot4(sa[e], la, xl), ha, xh);
            sb[e] = dot4(dot4(sb[e], lb, xl), hb, xh);
        }
    }
}

/* ---- bits 8 -------------------------------------------------------------- */

/* 128 * sum: what w + 128 adds to a group's products with sum(q_x) = sum. */
static inline __m256i w8_offset(int32_t sum)
{
    return _mm256_set1_epi32(sum * 128);
}

/* Two chains, so consecutive tiles' products do not wait on each other. */
static inline __m256i w8_group_row(const uint8_t *w, const uint8_t *x, int64_t tiles,
                                   int32_t sum)
{
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    int64_t t = 0;
    for (; t + 2 <= tiles; t += 2) {
        s0 = dot4(s0, w8_unsigned(w + t * TILE_BYTES), bcast4(x + t * ACT_STEP));
        s1 = dot4(s1, w8_unsigned(w + (t + 1) * TILE_BYTES), bcast4(x + (t + 1) * ACT_STEP));
    }
    if (t < tiles)
        s0 = dot4(s0, w8_unsigned(w + t * TILE_BYTES), bcast4(x + t * ACT_STEP));
    return _mm256_sub_epi32(_mm256_add_epi32(s0, s1), w8_offset(sum));
}

static inline void w8_group_rows(const uint8_t *w, const uint8_t *x, int64_t tiles,
                                 const int32_t *sums, int64_t sums_stride, __m256i s32[EP])
{
    __m256i dot[EP];
    EACH_ROW
    for (int e = 0; e < EP; e++)
        dot[e] = _mm256_setzero_si256();
    for (int64_t t = 0; t < tiles; t++) {
        __m256i wt = w8_unsigned(w + t * TILE_BYTES);
        EACH_ROW
        for (int e = 0; e < EP; e++)
            dot[e] = dot4(dot[e], wt, bcast4(x + t * ACT_STEP + e * LP));
    }
    EACH_ROW
    for (int e = 0; e < EP; e++)
        s32[e] = _mm256_add_epi32(s32[e], _mm256_sub_epi32(dot[e],
                                                           w8_offset(sums[e * sums_stride])));
}

static inline void w8_group_row_pair(const uint8_t *wa, const uint8_t *wb, const uint8_t *x,
                                     int64_t tiles, int32_t sum, __m256i *sa, __m256i *sb)
{
    __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
    for (int64_t t = 0; t < tiles; t++) {
        __m256i xt = bcast4(x + t * ACT_STEP);
        a = dot4(a, w8_unsigned(wa + t * TILE_BYTES), xt);
        b = dot4(b, w8_unsigned(wb + t * TILE_BYTES), xt);
    }
    *sa = _mm256_add_epi32(*sa, _mm256_sub_epi32(a, w8_offset(sum)));
    *sb = _mm256_add_epi32(*sb, _mm256_sub_epi32(b, w8_offset(sum)));
}

/* The 4 rows by two W row tiles, each activation word broadcast once for
 * both: 8 chains, where qtile's 4 (one a row) keep fewer vpdpbusd in
 * flight than 5 cycles of latency at 2 a cycle need, and half the
 * vpbroadcastd per vpdpbusd. */
static inline void w8_group_rows_pair(const uint8_t *wa, const uint8_t *wb, const uint8_t *x,
                                      int64_t tiles, const int32_t *sums, int64_t sums_stride,
                                      __m256i sa[EP], __m256i sb[EP])
{
    __m256i da[EP], db[EP];
    EACH_ROW
    for (int e = 0; e < EP; e++)
        da[e] = db[e] = _mm256_setzero_si256();
    for (int64_t t = 0; t < tiles; t++) {
        __m256i ua = w8_unsigned(wa + t * TILE_BYTES), ub = w8_unsigned(wb + t * TILE_BYTES);
        EACH_ROW
        for (int e = 0; e < EP; e++) {
            __m256i xe = bcast4(x + t * ACT_STEP + e * LP);
            da[e] = dot4(da[e], ua, xe);
            db[e] = dot4(db[e], ub, xe);
        }
    }
    EACH_ROW
    for (int e = 0; e < EP; e++) {
        __m256i offset = w8_offset(sums[e * sums_stride]);
        sa[e] = _mm256_add_epi32(sa[e], _mm256_sub_epi32(da[e], offset));
        sb[e] = _mm256_add_epi32(sb[e], _mm256_sub_epi32(db[e], offset));
    }
}

#define Q_X86_PAIR_PRIMITIVES
#define Q_X86_W8_ROWS_PAIR
#include "q_x86_qtile.h"

void YMM_NAME(qtile)(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out)
{
    qtile_x86(a, et, rows, ht, out);
}

void YMM_NAME(gemv_pair)(const rt_qtile_args *a, int64_t et, int64_t ht, float *out)
{
    gemv_pair_x86(a, et, ht, out);
}

void YMM_NAME(qtile_pair)(const rt_qtile_args *a, int64_t et, int rows, int64_t ht,
                          float *out)
{
    qtile_pair_x86(a, et, rows, ht, out);
}
