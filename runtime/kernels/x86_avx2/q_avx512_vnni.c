/* AVX-512 VNNI quantized micro-kernels (built with -mavx2 -mfma -mf16c
 * -mavx512f -mavx512bw -mavx512vl -mavx512vnni; the table is only used
 * after rt_cpu_x86_avx512_vnni_ok()) for the plans of target "avx2": the
 * same tiles (q_x86_tiles.h) and drivers (q_x86_qtile.h), two [HP][LP]
 * tiles per ZMM register and vpdpbusd for the int8 dot product (4 u8 x s8
 * products per 32-bit lane added straight into int32, exact, no int16
 * step).
 *
 * Why: on a core that streams faster than the AVX2 GEMV computes (a Zen 5
 * core reads ~30 GB/s; the AVX2 GEMV of g32 W4 runs at ~43 GB/s from L2,
 * bound by the ~50 instructions it issues per 160-byte block), fewer
 * instructions per weight byte is what lets decode reach the bandwidth.
 * One nibble pair (tiles 2u and 2u + 1, 32 bytes) becomes one ZMM of 64
 * u8 weights in 3 instructions (broadcast load, vpsrlvw by 0 | 4, vpand)
 * against 2 YMM in 3 under AVX2, and one vpdpbusd replaces 2 vpmaddubsw,
 * their int16 adds and the share of a vpmaddwd.
 *
 * Lanes: lane i < 8 of a ZMM holds row i of the first tile, lane 8 + i row
 * i of the second; the activation ZMM repeats the first tile's 4 bytes in
 * lanes 0-7 and the second's in 8-15 (one vpermd of the 32 activation
 * bytes of both tiles), and the two halves are added at the group's end.
 *
 * Bits 8 weights are signed and AVX-512 has no vpsignb, so the kernels
 * multiply the unsigned w + 128 (w ^ 0x80) and subtract 128 * sum(x) per
 * group: the activation tiles carry that sum.  The int32 arithmetic wraps,
 * and the true dot product fits in int32 (group * 127 * 127 < 2^31), so
 * the wrapped result is exact.
 *
 * vpdpbusd adds into its accumulator, a chain of ~5 cycles, so every row
 * keeps two accumulators (even and odd pairs) to have two in flight. */
#include "q_x86_tiles.h"

#define DOT(acc, u, s) _mm512_dpbusd_epi32(acc, u, s)

/* The 64 u8 weights of nibble pair w: [low nibbles | high nibbles]. */
static inline __m512i w4_pair(const uint8_t *w)
{
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    __m512i both = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)w));
    return _mm512_and_si512(_mm512_srlv_epi16(both, shift), _mm512_set1_epi8(15));
}

/* Tiles t and t + 1 of bits 8 at w as u8 w + 128. */
static inline __m512i w8_pair(const uint8_t *w)
{
    return _mm512_xor_si512(_mm512_loadu_si512(w), _mm512_set1_epi8((char)0x80));
}

/* vpermd indices for activation row e: dword e (first tile) in lanes 0-7,
 * dword 4 + e (second tile) in 8-15. */
static inline __m512i row_index(int e)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(e)),
                              _mm256_set1_epi32(4 + e), 1);
}

/* The 32 activation bytes of two consecutive tiles ([EP][LP] each) at p,
 * spread for row `idx`. */
static inline __m512i act_pair(__m256i both_tiles, __m512i idx)
{
    return _mm512_permutexvar_epi32(idx, _mm512_castsi256_si512(both_tiles));
}

static inline __m256i load32(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* Row i's int32: lane i + lane 8 + i. */
static inline __m256i halves_sum(__m512i s)
{
    return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}

/* 128 * sum, in the wrapping int32 arithmetic of the lanes. */
static inline int32_t offset_of(int32_t sum)
{
    return (int32_t)((uint32_t)sum << 7);
}

/* ---- bits 4: weights (0..15) are the unsigned operand ------------------- */

static inline __m256i w4_group_row(const uint8_t *w, const uint8_t *x, int64_t pairs)
{
    const __m512i idx = row_index(0);
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    int64_t u = 0;
    for (; u + 2 <= pairs; u += 2) {
        s0 = DOT(s0, w4_pair(w + u * TILE_BYTES), act_pair(load32(x + 2 * u * ACT_STEP), idx));
        s1 = DOT(s1, w4_pair(w + (u + 1) * TILE_BYTES),
                 act_pair(load32(x + 2 * (u + 1) * ACT_STEP), idx));
    }
    if (u < pairs)
        s0 = DOT(s0, w4_pair(w + u * TILE_BYTES), act_pair(load32(x + 2 * u * ACT_STEP), idx));
    return halves_sum(_mm512_add_epi32(s0, s1));
}

static inline void w4_group_rows(const uint8_t *w, const uint8_t *x, int64_t pairs,
                                 __m256i s32[EP])
{
    const __m512i idx[EP] = {row_index(0), row_index(1), row_index(2), row_index(3)};
    __m512i even[EP], odd[EP];
    EACH_ROW
    for (int e = 0; e < EP; e++)
        even[e] = odd[e] = _mm512_setzero_si512();
    int64_t u = 0;
    for (; u + 2 <= pairs; u += 2) {
        __m512i w0 = w4_pair(w + u * TILE_BYTES), w1 = w4_pair(w + (u + 1) * TILE_BYTES);
        __m256i x0 = load32(x + 2 * u * ACT_STEP), x1 = load32(x + 2 * (u + 1) * ACT_STEP);
        EACH_ROW
        for (int e = 0; e < EP; e++) {
            even[e] = DOT(even[e], w0, act_pair(x0, idx[e]));
            odd[e] = DOT(odd[e], w1, act_pair(x1, idx[e]));
        }
    }
    if (u < pairs) {
        __m512i w0 = w4_pair(w + u * TILE_BYTES);
        __m256i x0 = load32(x + 2 * u * ACT_STEP);
        EACH_ROW
        for (int e = 0; e < EP; e++)
            even[e] = DOT(even[e], w0, act_pair(x0, idx[e]));
    }
    EACH_ROW
    for (int e = 0; e < EP; e++)
        s32[e] = _mm256_add_epi32(s32[e], halves_sum(_mm512_add_epi32(even[e], odd[e])));
}

/* ---- bits 8: u8 w + 128, then 128 * sum(x) off -------------------------- */

/* tiles is even: a group is a multiple of 2 * LP elements. */
static inline __m256i w8_group_row(const uint8_t *w, const uint8_t *x, int64_t tiles,
                                   int32_t sum)
{
    const __m512i idx = row_index(0);
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    int64_t t = 0;
    for (; t + 4 <= tiles; t += 4) {
        s0 = DOT(s0, w8_pair(w + t * TILE_BYTES), act_pair(load32(x + t * ACT_STEP), idx));
        s1 = DOT(s1, w8_pair(w + (t + 2) * TILE_BYTES),
                 act_pair(load32(x + (t + 2) * ACT_STEP), idx));
    }
    if (t < tiles)
        s0 = DOT(s0, w8_pair(w + t * TILE_BYTES), act_pair(load32(x + t * ACT_STEP), idx));
    return _mm256_sub_epi32(halves_sum(_mm512_add_epi32(s0, s1)),
                            _mm256_set1_epi32(offset_of(sum)));
}

static inline void w8_group_rows(const uint8_t *w, const uint8_t *x, int64_t tiles,
                                 const int32_t *sums, int64_t sums_stride, __m256i s32[EP])
{
    const __m512i idx[EP] = {row_index(0), row_index(1), row_index(2), row_index(3)};
    __m512i even[EP], odd[EP];
    EACH_ROW
    for (int e = 0; e < EP; e++)
        even[e] = odd[e] = _mm512_setzero_si512();
    int64_t t = 0;
    for (; t + 4 <= tiles; t += 4) {
        __m512i w0 = w8_pair(w + t * TILE_BYTES), w1 = w8_pair(w + (t + 2) * TILE_BYTES);
        __m256i x0 = load32(x + t * ACT_STEP), x1 = load32(x + (t + 2) * ACT_STEP);
        EACH_ROW
        for (int e = 0; e < EP; e++) {
            even[e] = DOT(even[e], w0, act_pair(x0, idx[e]));
            odd[e] = DOT(odd[e], w1, act_pair(x1, idx[e]));
        }
    }
    if (t < tiles) {
        __m512i w0 = w8_pair(w + t * TILE_BYTES);
        __m256i x0 = load32(x + t * ACT_STEP);
        EACH_ROW
        for (int e = 0; e < EP; e++)
            even[e] = DOT(even[e], w0, act_pair(x0, idx[e]));
    }
    EACH_ROW
    for (int e = 0; e < EP; e++) {
        __m256i dot = halves_sum(_mm512_add_epi32(even[e], odd[e]));
        dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(offset_of(sums[e * sums_stride])));
        s32[e] = _mm256_add_epi32(s32[e], dot);
    }
}

#include "q_x86_qtile.h"

void rt_q_avx512_vnni_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht,
                            float *out)
{
    qtile_x86(a, et, rows, ht, out);
}
