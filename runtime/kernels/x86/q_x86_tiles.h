/* Internal: the tiles of the x86 quantized kernels (q_avx2.c, q_avx512_vnni.c,
 * q_avx2_quantize.c) and the helpers they share.
 *
 * Tile sizes (paper 002 Eqs 2-4).  Eq 4: lp is what one instruction
 * reduces along l per output.  The int8 dot product here is vpmaddubsw
 * (u8 x s8, adjacent pairs summed to s16) then vpmaddwd against ones (s16
 * pairs summed to s32): 4 consecutive l per 32-bit lane, so lp = 4, and a
 * 256-bit register of 8 lanes holds one [hp = 8][lp = 4] weight tile.
 * Eq 3, counted in YMM registers: ep broadcast activations (vpbroadcastd
 * of 4 bytes per row) + hp/8 weight tiles + ep * hp/8 accumulators <= 16.
 * Eq 2 wants ep and hp both large (memory accesses ~ 1/hp + 1/ep per
 * multiply-add).  ep = 4, hp = 8: 4 + 1 + 4 = 9, which leaves room for what
 * the int8 scheme needs besides: the low/high nibble tiles (bits 4) or
 * |w| (bits 8), the 0x0f mask, the ones of vpmaddwd and the int16 partial
 * sums of bits 4 (4 more).  The next steps do not fit: hp = 16 doubles the
 * weight tiles and accumulators (4 + 2 + 8 = 14, plus 8 int16 sums, the
 * nibble registers and constants: > 16, spills), and ep = 8 gives
 * 8 + 1 + 8 = 17 before any temporary.  (Bits 4 does run two hp = 8 tiles
 * at once, q_avx2.c's qtile_pair: only the 8 int16 sums stay in registers
 * across the inner loop, the int32 ones are touched once per 4 pairs.)
 * AVX-512's 32 registers are what let paper 002's Table 2 go to hp = 64
 * there.
 *
 * AVX-512 VNNI's vpdpbusd (q_avx512_vnni.c) reduces the same 4 consecutive
 * l per 32-bit lane, so its kernels read the same tiles, two to a ZMM.
 *
 * Formats: quant_format.h.  The kernels assume hp 8, lp 4, ep 4 (the
 * driver checks the table's sizes) and hand any other shape to the
 * portable kernel. */
#ifndef LLMC_RT_Q_X86_TILES_H
#define LLMC_RT_Q_X86_TILES_H

#include <immintrin.h>
#include <string.h>

#include "../q_generic.h"
#include "x86_simd.h"

#define HP 8
#define LP 4
#define EP 4
#define TILE_BYTES (HP * LP) /* one weight tile: 32 bytes, one YMM */
#define ACT_STEP (EP * LP)   /* bytes between a row's consecutive activation tiles */
/* Loops over the EP rows are unrolled so that their per-row vectors are
 * registers, not stack arrays (gcc -O2 keeps the loop otherwise). */
#define EACH_ROW _Pragma("GCC unroll 4")

#define INLINE static inline __attribute__((always_inline))

/* The 4 activation bytes at p in every 32-bit lane (vpbroadcastd). */
static inline __m256i bcast4(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

static inline __m256 load_halves(const uint8_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* The 32 bytes of nibble pair u at w as its two [HP][LP] tiles: 2u from
 * the low nibbles, 2u + 1 from the high ones (quant_format.h). */
static inline void w4_nibbles(const uint8_t *w, __m256i *lo, __m256i *hi)
{
    const __m256i nibble = _mm256_set1_epi8(15);
    __m256i raw = _mm256_loadu_si256((const __m256i *)w);
    *lo = _mm256_and_si256(raw, nibble);
    *hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble);
}

static inline int32_t hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

#endif
