/* AVX2 quantized micro-kernels (built with -mavx2 -mfma -mf16c; the table
 * is only used after rt_cpu_x86_avx2_ok()): the int8 dot product is
 * vpmaddubsw (u8 x s8, adjacent pairs summed to s16) then vpmaddwd against
 * ones (s16 pairs summed to s32).  Tiles: q_x86_tiles.h; the drivers around
 * these group primitives: q_x86_qtile.h. */
#include "q_x86_tiles.h"

/* ---- bits 4 ---------------------------------------------------------------
 * Weights are the unsigned operand of vpmaddubsw (q in 0..15), activations
 * the signed one (|x| <= 127): one product pair is at most 2 * 15 * 127 =
 * 3810, so up to 8 vpmaddubsw results can be added in int16 before one
 * vpmaddwd widens them (8 * 3810 = 30480 < 32767).  One "pair" below is the
 * 32 bytes holding tiles 2u (low nibbles) and 2u + 1 (high nibbles): 2
 * vpmaddubsw each, so a chunk of up to 4 pairs (32 elements) is widened
 * once. */
#define W4_CHUNK_PAIRS 4

/* One nibble pair at w by the activation words xl (its tile 2u) and xh
 * (tile 2u + 1), broadcast: int16 sums. */
static inline __m256i w4_pair_words(const uint8_t *w, __m256i xl, __m256i xh)
{
    __m256i lo, hi;
    w4_nibbles(w, &lo, &hi);
    return _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh));
}

/* One nibble pair at w by activation row x (its tile 2u): int16 sums. */
static inline __m256i w4_pair_row(const uint8_t *w, const uint8_t *x)
{
    return w4_pair_words(w, bcast4(x), bcast4(x + ACT_STEP));
}

/* Whole chunks of 4 pairs written out (two independent int16 chains, no
 * loop counter), then what is left of the group. */
static inline __m256i w4_group_row(const uint8_t *w, const uint8_t *x, int64_t pairs)
{
    const __m256i ones = _mm256_set1_epi16(1);
    const int64_t step = 2 * ACT_STEP; /* activation bytes per pair */
    __m256i s32 = _mm256_setzero_si256();
    int64_t u = 0;
    for (; u + W4_CHUNK_PAIRS <= pairs; u += W4_CHUNK_PAIRS) {
        const uint8_t *wu = w + u * TILE_BYTES, *xu = x + u * step;
        __m256i a = _mm256_add_epi16(w4_pair_row(wu, xu),
                                     w4_pair_row(wu + TILE_BYTES, xu + step));
        __m256i b = _mm256_add_epi16(w4_pair_row(wu + 2 * TILE_BYTES, xu + 2 * step),
                                     w4_pair_row(wu + 3 * TILE_BYTES, xu + 3 * step));
        s32 = _mm256_add_epi32(s32, _mm256_madd_epi16(_mm256_add_epi16(a, b), ones));
    }
    if (u < pairs) {
        __m256i s16 = _mm256_setzero_si256();
        for (; u < pairs; u++)
            s16 = _mm256_add_epi16(s16, w4_pair_row(w + u * TILE_BYTES, x + u * step));
        s32 = _mm256_add_epi32(s32, _mm256_madd_epi16(s16, ones));
    }
    return s32;
}

/* The 4 rows share each unpacked pair, in chunks of 4 pairs per widening. */
static inline void w4_group_rows(const uint8_t *w, const uint8_t *x, int64_t pairs,
                                 __m256i s32[EP])
{
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t u0 = 0; u0 < pairs; u0 += W4_CHUNK_PAIRS) {
        __m256i s16[EP] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                           _mm256_setzero_si256(), _mm256_setzero_si256()};
        int64_t u1 = u0 + W4_CHUNK_PAIRS < pairs ? u0 + W4_CHUNK_PAIRS : pairs;
        for (int64_t u = u0; u < u1; u++) {
            __m256i lo, hi;
            w4_nibbles(w + u * TILE_BYTES, &lo, &hi);
            const uint8_t *xu = x + 2 * u * ACT_STEP;
            EACH_ROW
            for (int e = 0; e < EP; e++) {
                __m256i p0 = _mm256_maddubs_epi16(lo, bcast4(xu + e * LP));
                __m256i p1 = _mm256_maddubs_epi16(hi, bcast4(xu + ACT_STEP + e * LP));
                s16[e] = _mm256_add_epi16(s16[e], _mm256_add_epi16(p0, p1));
            }
        }
        EACH_ROW
        for (int e = 0; e < EP; e++)
            s32[e] = _mm256_add_epi32(s32[e], _mm256_madd_epi16(s16[e], ones));
    }
}

/* One activation row of a nibble pair for two W row tiles: a += la * xl +
 * ha * xh and b += lb * xl + hb * xh in int16, xl the 4 bytes at p (tile
 * 2u) and xh those at p + ACT_STEP (tile 2u + 1), each broadcast once for
 * both tiles.  Written out because gcc 12 reassociates the intrinsics'
 * adds, schedules the products ahead and then has no register left for
 * the sums: 60 instructions a nibble pair with 5 sums spilled to the stack
 * and reloaded, where these are 40 with all 8 in registers (objdump). */
static inline void w4_row_both(__m256i *a, __m256i *b, __m256i la, __m256i ha, __m256i lb,
                               __m256i hb, const uint8_t *p)
{
    __m256i x, t;
    __asm__("vpbroadcastd %[xl], %[x]\n\t"
            "vpmaddubsw %[x], %[la], %[t]\n\t"
            "vpaddw %[t], %[a], %[a]\n\t"
            "vpmaddubsw %[x], %[lb], %[t]\n\t"
            "vpaddw %[t], %[b], %[b]\n\t"
            "vpbroadcastd %[xh], %[x]\n\t"
            "vpmaddubsw %[x], %[ha], %[t]\n\t"
            "vpaddw %[t], %[a], %[a]\n\t"
            "vpmaddubsw %[x], %[hb], %[t]\n\t"
            "vpaddw %[t], %[b], %[b]"
            : [a] "+x"(*a), [b] "+x"(*b), [x] "=&x"(x), [t] "=&x"(t)
            : [la] "x"(la), [ha] "x"(ha), [lb] "x"(lb), [hb] "x"(hb),
              [xl] "m"(*(const uint8_t(*)[4])(const void *)p),
              [xh] "m"(*(const uint8_t(*)[4])(const void *)(p + ACT_STEP)));
}

/* w4_group_rows for two W row tiles (a prefill GEMM's 4 x 16 outputs):
 * each activation word is broadcast once for both tiles, which halves the
 * vpbroadcastd per vpmaddubsw.  Per nibble pair: 2 loads, 2 vpsrlw, 4
 * vpand, then per row 2 vpbroadcastd, 4 vpmaddubsw and 4 vpaddw: 48 vector
 * instructions per 16 vpmaddubsw, 52 with the loop's (3.25 each), against
 * 36 per 8 (4.5, gcc's register copies included) one tile at a time.  In
 * the inner loop: 4 nibble tiles, the mask, 8 int16 sums, a broadcast and a
 * product, 15 YMM registers; the int32 sums sa, sb are touched once a
 * chunk. */
static inline void w4_group_rows_pair(const uint8_t *wa, const uint8_t *wb, const uint8_t *x,
                                      int64_t pairs, __m256i sa[EP], __m256i sb[EP])
{
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t u0 = 0; u0 < pairs; u0 += W4_CHUNK_PAIRS) {
        __m256i a16[EP], b16[EP];
        EACH_ROW
        for (int e = 0; e < EP; e++)
            a16[e] = b16[e] = _mm256_setzero_si256();
        int64_t u1 = u0 + W4_CHUNK_PAIRS < pairs ? u0 + W4_CHUNK_PAIRS : pairs;
        for (int64_t u = u0; u < u1; u++) {
            __m256i la, ha, lb, hb;
            w4_nibbles(wa + u * TILE_BYTES, &la, &ha);
            w4_nibbles(wb + u * TILE_BYTES, &lb, &hb);
            EACH_ROW
            for (int e = 0; e < EP; e++)
                w4_row_both(&a16[e], &b16[e], la, ha, lb, hb, x + 2 * u * ACT_STEP + e * LP);
        }
        EACH_ROW
        for (int e = 0; e < EP; e++) {
            sa[e] = _mm256_add_epi32(sa[e], _mm256_madd_epi16(a16[e], ones));
            sb[e] = _mm256_add_epi32(sb[e], _mm256_madd_epi16(b16[e], ones));
        }
    }
}

/* ---- bits 8 ---------------------------------------------------------------
 * Both operands are signed, so the sign trick: |w| is the unsigned operand
 * and x takes w's sign (vpsignb; 0 where w is 0).  A Float32-coefficient
 * block's w may be -128: vpabsb gives 0x80, which the unsigned operand
 * reads as 128, and -x fits int8 as |x| <= 127.  So a product pair is at
 * most 2 * 128 * 127 = 32512 < 32767: no saturation, but no room to add
 * two vpmaddubsw results in int16 either, so each is widened by vpmaddwd at
 * once. */

static inline __m256i w8_tile_row(__m256i w, __m256i abs_w, const uint8_t *x)
{
    __m256i signed_x = _mm256_sign_epi8(bcast4(x), w);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w, signed_x), _mm256_set1_epi16(1));
}

/* Two chains, so consecutive tiles' adds do not wait on each other (the
 * sign trick needs no activation sum). */
static inline __m256i w8_group_row(const uint8_t *w, const uint8_t *x, int64_t tiles,
                                   int32_t sum)
{
    (void)sum;
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    int64_t t = 0;
    for (; t + 2 <= tiles; t += 2) {
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(w + t * TILE_BYTES));
        __m256i w1 = _mm256_loadu_si256((const __m256i *)(w + (t + 1) * TILE_BYTES));
        s0 = _mm256_add_epi32(s0, w8_tile_row(w0, _mm256_abs_epi8(w0), x + t * ACT_STEP));
        s1 = _mm256_add_epi32(s1, w8_tile_row(w1, _mm256_abs_epi8(w1), x + (t + 1) * ACT_STEP));
    }
    if (t < tiles) {
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(w + t * TILE_BYTES));
        s0 = _mm256_add_epi32(s0, w8_tile_row(w0, _mm256_abs_epi8(w0), x + t * ACT_STEP));
    }
    return _mm256_add_epi32(s0, s1);
}

static inline void w8_group_rows(const uint8_t *w, const uint8_t *x, int64_t tiles,
                                 const int32_t *sums, int64_t sums_stride, __m256i s32[EP])
{
    (void)sums;
    (void)sums_stride;
    for (int64_t t = 0; t < tiles; t++) {
        __m256i wt = _mm256_loadu_si256((const __m256i *)(w + t * TILE_BYTES));
        __m256i abs_w = _mm256_abs_epi8(wt);
        EACH_ROW
        for (int e = 0; e < EP; e++)
            s32[e] = _mm256_add_epi32(s32[e], w8_tile_row(wt, abs_w, x + t * ACT_STEP + e * LP));
    }
}

/* The sign trick of w8_group_row for two W row tiles, each activation
 * word broadcast once for both. */
static inline void w8_group_row_pair(const uint8_t *wa, const uint8_t *wb, const uint8_t *x,
                                     int64_t tiles, int32_t sum, __m256i *sa, __m256i *sb)
{
    (void)sum;
    for (int64_t t = 0; t < tiles; t++) {
        __m256i xt = bcast4(x + t * ACT_STEP);
        __m256i at = _mm256_loadu_si256((const __m256i *)(wa + t * TILE_BYTES));
        __m256i bt = _mm256_loadu_si256((const __m256i *)(wb + t * TILE_BYTES));
        *sa = _mm256_add_epi32(*sa, _mm256_madd_epi16(_mm256_maddubs_epi16(
                                        _mm256_abs_epi8(at), _mm256_sign_epi8(xt, at)),
                                    _mm256_set1_epi16(1)));
        *sb = _mm256_add_epi32(*sb, _mm256_madd_epi16(_mm256_maddubs_epi16(
                                        _mm256_abs_epi8(bt), _mm256_sign_epi8(xt, bt)),
                                    _mm256_set1_epi16(1)));
    }
}

/* Pair u of the row tiles at wa and wb by activation row x, each
 * activation word broadcast once for both: int16 sums added to *a, *b. */
INLINE void w4_pair_both(const uint8_t *wa, const uint8_t *wb, const uint8_t *x, int64_t u,
                         __m256i *a, __m256i *b)
{
    __m256i xl = bcast4(x + 2 * u * ACT_STEP), xh = bcast4(x + (2 * u + 1) * ACT_STEP);
    *a = _mm256_add_epi16(*a, w4_pair_words(wa + u * TILE_BYTES, xl, xh));
    *b = _mm256_add_epi16(*b, w4_pair_words(wb + u * TILE_BYTES, xl, xh));
}

/* w4_group_row for two W row tiles: whole chunks of 4 pairs written out,
 * then what is left of the group; the int32 products added to *sa, *sb.
 * A chunk (256 weight bytes) is 86 instructions in gcc 12's loop (objdump):
 * 8 loads, 8 vpbroadcastd, 8 vpsrlw, 16 vpand, 16 vpmaddubsw, 14 vpaddw,
 * 2 vpmaddwd, 2 vpaddd, 6 register copies and spills, 6 scalar; 10.75 per
 * 32 weight bytes, against 12.25 one tile at a time (2 vpbroadcastd per 32
 * bytes instead of 1).  The qtile calls of [896, 896] g64, weights in L2,
 * one thread, AMD EPYC (Zen 1): 11.7 GB/s against 10.2.  For scale:
 * activation words as memory operands instead of broadcasts (one tile)
 * measured 11.6, and no nibble unpack at all 13.1; the multiplies alone
 * take 4.5 cycles of the one vector multiply pipe per 32 bytes (18 GB/s
 * at 2.53 GHz).  docs/benchmarks.md, Zen 1, has the variants measured. */
INLINE void w4_group_row_pair(const uint8_t *wa, const uint8_t *wb, const uint8_t *x,
                              int64_t pairs, __m256i *sa, __m256i *sb)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i a = _mm256_setzero_si256(), b = a;
    int64_t u = 0;
    for (; u + W4_CHUNK_PAIRS <= pairs; u += W4_CHUNK_PAIRS) {
        a = b = _mm256_setzero_si256();
        w4_pair_both(wa, wb, x, u, &a, &b);
        w4_pair_both(wa, wb, x, u + 1, &a, &b);
        w4_pair_both(wa, wb, x, u + 2, &a, &b);
        w4_pair_both(wa, wb, x, u + 3, &a, &b);
        *sa = _mm256_add_epi32(*sa, _mm256_madd_epi16(a, ones));
        *sb = _mm256_add_epi32(*sb, _mm256_madd_epi16(b, ones));
    }
    if (u < pairs) {
        a = b = _mm256_setzero_si256();
        for (; u < pairs; u++)
            w4_pair_both(wa, wb, x, u, &a, &b);
        *sa = _mm256_add_epi32(*sa, _mm256_madd_epi16(a, ones));
        *sb = _mm256_add_epi32(*sb, _mm256_madd_epi16(b, ones));
    }
}

#define Q_X86_PAIR_PRIMITIVES
#include "q_x86_qtile.h"

void rt_q_avx2_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out)
{
    qtile_x86(a, et, rows, ht, out);
}

void rt_q_avx2_gemv_pair(const rt_qtile_args *a, int64_t et, int64_t ht, float *out)
{
    gemv_pair_x86(a, et, ht, out);
}

void rt_q_avx2_qtile_pair(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out)
{
    qtile_pair_x86(a, et, rows, ht, out);
}
