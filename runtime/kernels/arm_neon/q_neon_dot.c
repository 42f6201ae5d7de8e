/* qtile for target "neon-dot": SDOT (ARMv8.2 dotprod), built with
 * -march=armv8.2-a+dotprod.
 *
 * Tile sizes (paper 002 Eqs 2-4, Table 2 "ARM i8sdot"): lp is what one
 * instruction reduces (Eq 4): SDOT vd.4s, vn.16b, vm.4b[i] adds to each
 * int32 lane of vd the dot product of 4 int8 of vn with the 4 int8 of
 * lane i of vm, so lp = 4.  One [hp][lp] weight tile is then hp/4 registers
 * (each lane one row), one [ep][lp] activation tile ep/4 registers (each
 * lane one row, picked by the lane index), and the int32 accumulators
 * ep * hp / 4 registers.  Eq 2 (memory traffic ~ 1/hp + 1/ep) under Eq 3
 * (all of it in the 32 NEON registers):
 *   hp 8, ep 12: 24 accumulators + 2 weight + 3 activation = 29 <= 32,
 *                traffic 1/8 + 1/12 = 0.208
 *   hp 8, ep 16: 32 accumulators alone: too many
 *   hp 16, ep 6: 24 + 4 + 2 = 30, traffic 0.229;  hp 4, ep 24: 24 + 1 + 6
 *                = 31, traffic 0.292
 * hp 12, ep 8 ties with hp 8, ep 12; hp 8 keeps a bits-4 tile pair at 32
 * bytes (two loads, `& 15` and `>> 4` give both tiles).
 *
 * rows == 1 (decode) is a GEMV of its own: one activation row against the
 * weight tiles, two tiles in flight for independent SDOT chains. */
#include "q_neon_common.h"

#define EP 12
#define LP 4
#define ACCS (EP * NEON_HP / 4)   /* int32x4 accumulators: acc[2e], acc[2e + 1] */

/* acc[2i], acc[2i + 1] += weight rows 0-3 (w_lo) and 4-7 (w_hi) dotted
 * with activation row i (lane i of x4), for the 4 rows of x4. */
static inline void sdot_rows4(int32x4_t *acc, int8x16_t w_lo, int8x16_t w_hi, int8x16_t x4)
{
    acc[0] = vdotq_laneq_s32(acc[0], w_lo, x4, 0);
    acc[1] = vdotq_laneq_s32(acc[1], w_hi, x4, 0);
    acc[2] = vdotq_laneq_s32(acc[2], w_lo, x4, 1);
    acc[3] = vdotq_laneq_s32(acc[3], w_hi, x4, 1);
    acc[4] = vdotq_laneq_s32(acc[4], w_lo, x4, 2);
    acc[5] = vdotq_laneq_s32(acc[5], w_hi, x4, 2);
    acc[6] = vdotq_laneq_s32(acc[6], w_lo, x4, 3);
    acc[7] = vdotq_laneq_s32(acc[7], w_hi, x4, 3);
}

/* One [8][4] weight tile by one [12][4] activation tile. */
static inline void sdot_tile(int32x4_t *acc, int8x16_t w_lo, int8x16_t w_hi, const int8_t *x)
{
    sdot_rows4(acc, w_lo, w_hi, vld1q_s8(x));
    sdot_rows4(acc + 8, w_lo, w_hi, vld1q_s8(x + 16));
    sdot_rows4(acc + 16, w_lo, w_hi, vld1q_s8(x + 32));
}

/* facc[e][h] += group g of the format's sum for all 12 rows (rows past
 * the tile's are padding: q = 0, never stored). */
static void gemm_group(const neon_qtile *q, int64_t g, float *facc)
{
    int32x4_t acc[ACCS];
#pragma GCC unroll 24
    for (int i = 0; i < ACCS; i++)
        acc[i] = vdupq_n_s32(0);
    const int8_t *w = (const int8_t *)neon_w_group(q, g);
    if (q->bits == 8) {
        for (int64_t t = 0; t < q->tiles; t++, w += NEON_HP * LP)
            sdot_tile(acc, vld1q_s8(w), vld1q_s8(w + 16), neon_x_tile(q, g, t));
    } else {
        for (int64_t t = 0; t < q->tiles; t += 2, w += NEON_HP * LP) {
            uint8x16_t lo = vld1q_u8((const uint8_t *)w), hi = vld1q_u8((const uint8_t *)w + 16);
            sdot_tile(acc, neon_low_nibbles(lo), neon_low_nibbles(hi), neon_x_tile(q, g, t));
            sdot_tile(acc, neon_high_nibbles(lo), neon_high_nibbles(hi),
                      neon_x_tile(q, g, t + 1));
        }
    }
    neon_coefs c = neon_coefs_of(q, g);
#pragma GCC unroll 12
    for (int e = 0; e < EP; e++)
        neon_add_group_row(facc + e * NEON_HP, acc[2 * e], acc[2 * e + 1], &c, q, g, e);
}

/* The same for row 0 alone: lane 0 of each activation tile. */
static void gemv_group(const neon_qtile *q, int64_t g, float *facc)
{
    int32x4_t lo0 = vdupq_n_s32(0), hi0 = lo0, lo1 = lo0, hi1 = lo0;
    const int8_t *w = (const int8_t *)neon_w_group(q, g);
    for (int64_t t = 0; t < q->tiles; t += 2) {
        int8x16_t x0 = vld1q_s8(neon_x_tile(q, g, t)), x1 = vld1q_s8(neon_x_tile(q, g, t + 1));
        int8x16_t w0lo, w0hi, w1lo, w1hi;
        if (q->bits == 8) {
            w0lo = vld1q_s8(w), w0hi = vld1q_s8(w + 16);
            w1lo = vld1q_s8(w + 32), w1hi = vld1q_s8(w + 48);
            w += 2 * NEON_HP * LP;
        } else {
            uint8x16_t lo = vld1q_u8((const uint8_t *)w), hi = vld1q_u8((const uint8_t *)w + 16);
            w0lo = neon_low_nibbles(lo), w0hi = neon_low_nibbles(hi);
            w1lo = neon_high_nibbles(lo), w1hi = neon_high_nibbles(hi);
            w += NEON_HP * LP;
        }
        lo0 = vdotq_laneq_s32(lo0, w0lo, x0, 0);
        hi0 = vdotq_laneq_s32(hi0, w0hi, x0, 0);
        lo1 = vdotq_laneq_s32(lo1, w1lo, x1, 0);
        hi1 = vdotq_laneq_s32(hi1, w1hi, x1, 0);
    }
    neon_coefs c = neon_coefs_of(q, g);
    neon_add_group_row(facc, vaddq_s32(lo0, lo1), vaddq_s32(hi0, hi1), &c, q, g, 0);
}

void rt_neon_dot_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out)
{
    neon_qtile_run(a, et, rows, ht, out, gemm_group, gemv_group);
}
