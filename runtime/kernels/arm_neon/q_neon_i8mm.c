/* qtile for target "neon-i8mm": SMMLA (ARMv8.6 i8mm), built with
 * -march=armv8.2-a+i8mm.
 *
 * SMMLA vd.4s, vn.16b, vm.16b multiplies the [2 x 8] int8 matrix in vn
 * (row i = bytes 8i..8i+7) by the [8 x 2] matrix whose columns are the two
 * 8-byte halves of vm, adding the [2 x 2] int32 product to vd as
 * {n0.m0, n0.m1, n1.m0, n1.m1}.  lp = 8 is what one instruction reduces
 * (paper 002 Eq 4), and the format's [hp][lp] tiles fit it with no
 * shuffle: rows are contiguous 8-byte runs, so one 16-byte load of a weight
 * tile is 2 weight rows x 8 k (a ready vm) and one of an activation tile is
 * 2 activation rows x 8 k (a ready vn); bits-4 tile pairs unpack with
 * `& 15` and `>> 4` into the same shape.
 *
 * Tile sizes (Eqs 2-4, Table 2 "ARM i8mm"): a [hp][8] weight tile is hp/2
 * registers, an [ep][8] activation tile ep/2, and each accumulator holds a
 * 2 x 2 block, so ep * hp / 4 of them.  Eq 2 (traffic ~ 1/hp + 1/ep) under
 * Eq 3 (all of it in 32 registers):
 *   hp 8, ep 10: 20 accumulators + 4 weight + 5 activation = 29 <= 32,
 *                traffic 1/8 + 1/10 = 0.225
 *   hp 8, ep 12: 24 + 4 + 6 = 34: too many;  hp 12, ep 8: 24 + 6 + 4 = 34
 *   hp 4, ep 16: 16 + 2 + 8 = 26, traffic 0.3125
 * hp 10, ep 8 ties; hp 8 is the row tile of the other targets and a bits-4
 * tile pair is 64 bytes, 4 loads.
 *
 * rows == 1 (decode): vn = the activation row twice; lanes 0-1 of each
 * product are the dot products (2-3 repeat them).  Half of each SMMLA is
 * wasted, but it is still 4 instructions per 64-byte weight tile, as many
 * as SDOT would need, and decode is bound by reading the weights. */
#include "q_neon_common.h"

#define EP 10
#define LP 8
#define XPAIRS (EP / 2)       /* activation registers: rows 2p, 2p + 1 */
#define WPAIRS (NEON_HP / 2)  /* weight registers: rows 2r, 2r + 1 */

/* acc[p][r] += rows 2p, 2p+1 of the activation tile x times rows 2r, 2r+1
 * of the weight tile w[0..4). */
static inline void smmla_tile(int32x4_t acc[XPAIRS][WPAIRS], const int8x16_t w[WPAIRS],
                              const int8_t *x)
{
#pragma GCC unroll 5
    for (int p = 0; p < XPAIRS; p++) {
        int8x16_t xp = vld1q_s8(x + 16 * p);
#pragma GCC unroll 4
        for (int r = 0; r < WPAIRS; r++)
            acc[p][r] = vmmlaq_s32(acc[p][r], xp, w[r]);
    }
}

/* The same for two k-tiles (a bits-4 pair) at once: row pair p of both
 * activation tiles is loaded together and used 8 times, so 20 accumulators
 * + 8 weight + 2 activation registers are live (30), not 20 + 8 + 5. */
static inline void smmla_tile_pair(int32x4_t acc[XPAIRS][WPAIRS], const int8x16_t w0[WPAIRS],
                                   const int8x16_t w1[WPAIRS], const int8_t *x0,
                                   const int8_t *x1)
{
#pragma GCC unroll 5
    for (int p = 0; p < XPAIRS; p++) {
        int8x16_t xp0 = vld1q_s8(x0 + 16 * p), xp1 = vld1q_s8(x1 + 16 * p);
#pragma GCC unroll 4
        for (int r = 0; r < WPAIRS; r++)
            acc[p][r] = vmmlaq_s32(vmmlaq_s32(acc[p][r], xp0, w0[r]), xp1, w1[r]);
    }
}

/* A bits-8 weight tile as 4 row pairs. */
static inline void load_tile(const int8_t *w, int8x16_t out[WPAIRS])
{
#pragma GCC unroll 4
    for (int r = 0; r < WPAIRS; r++)
        out[r] = vld1q_s8(w + 16 * r);
}

/* The two tiles of a bits-4 pair (64 bytes) as 4 row pairs each. */
static inline void load_nibble_tiles(const int8_t *w, int8x16_t low[WPAIRS],
                                     int8x16_t high[WPAIRS])
{
#pragma GCC unroll 4
    for (int r = 0; r < WPAIRS; r++) {
        uint8x16_t b = vld1q_u8((const uint8_t *)w + 16 * r);
        low[r] = neon_low_nibbles(b);
        high[r] = neon_high_nibbles(b);
    }
}

/* One activation row's features 0-3 (lo) and 4-7 (hi) from the 2 x 2
 * blocks acc[0..4) of its row pair: the first row of the pair is the low
 * 64-bit halves of the blocks, the second the high halves. */
static inline void pair_row(const int32x4_t acc[WPAIRS], int second, int32x4_t *lo,
                            int32x4_t *hi)
{
    int64x2_t b0 = vreinterpretq_s64_s32(acc[0]), b1 = vreinterpretq_s64_s32(acc[1]);
    int64x2_t b2 = vreinterpretq_s64_s32(acc[2]), b3 = vreinterpretq_s64_s32(acc[3]);
    *lo = vreinterpretq_s32_s64(second ? vzip2q_s64(b0, b1) : vzip1q_s64(b0, b1));
    *hi = vreinterpretq_s32_s64(second ? vzip2q_s64(b2, b3) : vzip1q_s64(b2, b3));
}

/* facc[e][h] += group g for activation row e of row pair acc. */
static inline void add_group_row(float *facc, const int32x4_t acc[WPAIRS], int e,
                                 const neon_coefs *c, const neon_qtile *q, int64_t g)
{
    int32x4_t lo, hi;
    pair_row(acc, e & 1, &lo, &hi);
    neon_add_group_row(facc + e * NEON_HP, lo, hi, c, q, g, e);
}

/* facc[e][h] += group g for all 10 rows (rows past the tile's are
 * padding: q = 0, never stored). */
static void gemm_group(const neon_qtile *q, int64_t g, float *facc)
{
    int32x4_t acc[XPAIRS][WPAIRS];
#pragma GCC unroll 5
    for (int p = 0; p < XPAIRS; p++)
#pragma GCC unroll 4
        for (int r = 0; r < WPAIRS; r++)
            acc[p][r] = vdupq_n_s32(0);
    const int8_t *w = (const int8_t *)neon_w_group(q, g);
    int8x16_t w0[WPAIRS], w1[WPAIRS];
    if (q->bits == 8) {
        for (int64_t t = 0; t < q->tiles; t++, w += NEON_HP * LP) {
            load_tile(w, w0);
            smmla_tile(acc, w0, neon_x_tile(q, g, t));
        }
    } else {
        for (int64_t t = 0; t < q->tiles; t += 2, w += NEON_HP * LP) {
            load_nibble_tiles(w, w0, w1);
            smmla_tile_pair(acc, w0, w1, neon_x_tile(q, g, t), neon_x_tile(q, g, t + 1));
        }
    }
    neon_coefs c = neon_coefs_of(q, g);
#pragma GCC unroll 10
    for (int e = 0; e < EP; e++)
        add_group_row(facc, acc[e / 2], e, &c, q, g);
}

/* acc[r] += the activation row (both halves of xx) times rows 2r, 2r+1. */
static inline void smmla_row(int32x4_t acc[WPAIRS], const int8x16_t w[WPAIRS], int8x16_t xx)
{
#pragma GCC unroll 4
    for (int r = 0; r < WPAIRS; r++)
        acc[r] = vmmlaq_s32(acc[r], xx, w[r]);
}

static inline int8x16_t row0_twice(const int8_t *x_tile)
{
    int8x8_t x = vld1_s8(x_tile);
    return vcombine_s8(x, x);
}

/* The same for row 0 alone; two tiles in flight (acc0, acc1). */
static void gemv_group(const neon_qtile *q, int64_t g, float *facc)
{
    int32x4_t acc0[WPAIRS], acc1[WPAIRS];
#pragma GCC unroll 4
    for (int r = 0; r < WPAIRS; r++)
        acc0[r] = acc1[r] = vdupq_n_s32(0);
    const int8_t *w = (const int8_t *)neon_w_group(q, g);
    int8x16_t w0[WPAIRS], w1[WPAIRS];
    for (int64_t t = 0; t < q->tiles; t += 2) {
        if (q->bits == 8) {
            load_tile(w, w0);
            load_tile(w + NEON_HP * LP, w1);
            w += 2 * NEON_HP * LP;
        } else {
            load_nibble_tiles(w, w0, w1);
            w += NEON_HP * LP;
        }
        smmla_row(acc0, w0, row0_twice(neon_x_tile(q, g, t)));
        smmla_row(acc1, w1, row0_twice(neon_x_tile(q, g, t + 1)));
    }
#pragma GCC unroll 4
    for (int r = 0; r < WPAIRS; r++)
        acc0[r] = vaddq_s32(acc0[r], acc1[r]);
    neon_coefs c = neon_coefs_of(q, g);
    add_group_row(facc, acc0, 0, &c, q, g);
}

void rt_neon_i8mm_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out)
{
    neon_qtile_run(a, et, rows, ht, out, gemm_group, gemv_group);
}
