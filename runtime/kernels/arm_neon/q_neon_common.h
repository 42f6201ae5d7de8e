/* Internal: what the SDOT and SMMLA qtile kernels share: where one call's
 * operands are, and the per-group dequantization of quant_format.h
 *   out[e][h] += sx[e] * (scale[h] * acc[e][h] + min[h] * sums[e])   Float16
 *                (min: bits 4)
 *   out[e][h] += sx[e] * (scale[h] * (acc[e][h] - zero[h] * sums[e])) Float32
 *                (the bracket in int32: exact, quant_format.h)
 * done in that order, without fused multiply-adds, so each output is the
 * plain fp32 evaluation of the format's formula over the exact int32 acc
 * (the portable kernel's bits).  SDOT and SMMLA multiply signed bytes, so
 * a Float32 block's bits-8 q of -128 is exact as any other.
 * Both targets have hp = 8: a row of 8 outputs is two float32x4. */
#ifndef LLMC_RT_Q_NEON_COMMON_H
#define LLMC_RT_Q_NEON_COMMON_H

#include <arm_neon.h>

#include "../q_generic.h"
#include "q_neon.h"

#define NEON_HP 8

/* One qtile call: activation row tile et by weight row tile ht. */
typedef struct {
    const int8_t *x;        /* row tile et; k-tile t at x + t * ep * lp */
    const int32_t *sums;    /* sums of row et * ep: [ep rows][groups] */
    const float *sx;        /* scales of row et * ep: [ep rows][groups] */
    const uint8_t *block;   /* block (ht, 0); group g at block + g * block_bytes */
    uint64_t block_bytes;
    uint64_t data_bytes;    /* the q values of one block; then scales, mins */
    int64_t groups;
    int64_t tiles;          /* k-tiles (lp elements) per group */
    int bits;
    rt_qcoef coef;
    int ep, lp;
} neon_qtile;

static inline neon_qtile neon_qtile_at(const rt_qtile_args *a, int64_t et, int64_t ht)
{
    const rt_qact_shape *xs = &a->xs;
    const rt_qweight_shape *ws = &a->ws;
    neon_qtile q;
    q.groups = ws->kp / ws->group;
    q.tiles = ws->group / ws->lp;
    q.ep = xs->ep;
    q.lp = xs->lp;
    q.bits = ws->bits;
    q.coef = ws->coef;
    q.x = (const int8_t *)a->xq + (uint64_t)et * (uint64_t)xs->ep * (uint64_t)xs->kp;
    q.sums = (const int32_t *)(a->xq + rt_qact_sums_offset(xs)) +
             (uint64_t)et * (uint64_t)xs->ep * (uint64_t)q.groups;
    q.sx = (const float *)(const void *)(a->xq + rt_qact_scales_offset(xs)) +
           (uint64_t)et * (uint64_t)xs->ep * (uint64_t)q.groups;
    q.block = a->w + rt_qweight_block_offset(ws, ht, 0);
    q.block_bytes = rt_qweight_block_bytes(ws);
    q.data_bytes = rt_qweight_data_bytes(ws);
    return q;
}

/* The k-tile t of group g: activations and weight q values. */
static inline const int8_t *neon_x_tile(const neon_qtile *q, int64_t g, int64_t t)
{
    return q->x + (uint64_t)(g * q->tiles + t) * (uint64_t)(q->ep * q->lp);
}

static inline const uint8_t *neon_w_group(const neon_qtile *q, int64_t g)
{
    return q->block + (uint64_t)g * q->block_bytes;
}

/* Group g's scales, and mins as floats (0 for Float16 bits 8: unused) or
 * zero points as int32 (Float32). */
typedef struct {
    float32x4_t scale_lo, scale_hi, min_lo, min_hi;
    int32x4_t zero_lo, zero_hi;
} neon_coefs;

static inline void neon_halves_to_floats(const uint8_t *p, float32x4_t *lo, float32x4_t *hi)
{
    float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(p));
    *lo = vcvt_f32_f16(vget_low_f16(h));
    *hi = vcvt_high_f32_f16(h);
}

static inline neon_coefs neon_coefs_of(const neon_qtile *q, int64_t g)
{
    const uint8_t *coefs = neon_w_group(q, g) + q->data_bytes;
    neon_coefs c;
    c.min_lo = c.min_hi = vdupq_n_f32(0.0f);
    c.zero_lo = c.zero_hi = vdupq_n_s32(0);
    if (q->coef == RT_QCOEF_FLOAT) {
        const float *f = (const float *)(const void *)coefs;
        c.scale_lo = vld1q_f32(f);
        c.scale_hi = vld1q_f32(f + 4);
        c.zero_lo = vcvtq_s32_f32(vld1q_f32(f + NEON_HP));
        c.zero_hi = vcvtq_s32_f32(vld1q_f32(f + NEON_HP + 4));
        return c;
    }
    neon_halves_to_floats(coefs, &c.scale_lo, &c.scale_hi);
    if (q->bits == 4)
        neon_halves_to_floats(coefs + 2 * NEON_HP, &c.min_lo, &c.min_hi);
    return c;
}

/* o + sx * the group term of 4 outputs (the formula above). */
static inline float32x4_t neon_dequant(float32x4_t o, int32x4_t acc, float32x4_t scale,
                                       float32x4_t min, int32x4_t zero, int32_t sum,
                                       float32x4_t sx, const neon_qtile *q)
{
    if (q->coef == RT_QCOEF_FLOAT)
        acc = vmlsq_s32(acc, zero, vdupq_n_s32(sum));
    float32x4_t t = vmulq_f32(scale, vcvtq_f32_s32(acc));
    if (q->coef == RT_QCOEF_HALF && q->bits == 4)
        t = vaddq_f32(t, vmulq_f32(min, vdupq_n_f32((float)sum)));
    return vaddq_f32(o, vmulq_f32(sx, t));
}

/* o[0..8) += one output row's group g, from its int32 acc for features
 * 0-3 and 4-7; e is the row within the tile (for its sum and scale). */
static inline void neon_add_group_row(float *o, int32x4_t acc_lo, int32x4_t acc_hi,
                                      const neon_coefs *c, const neon_qtile *q, int64_t g,
                                      int e)
{
    int32_t sum = q->sums[e * q->groups + g];
    float32x4_t sx = vdupq_n_f32(q->sx[e * q->groups + g]);
    vst1q_f32(o, neon_dequant(vld1q_f32(o), acc_lo, c->scale_lo, c->min_lo, c->zero_lo, sum, sx,
                              q));
    vst1q_f32(o + 4, neon_dequant(vld1q_f32(o + 4), acc_hi, c->scale_hi, c->min_hi, c->zero_hi,
                                  sum, sx, q));
}

/* facc[e][h] += group g's terms: all ep rows of the tile, or row 0. */
typedef void (*neon_group_fn)(const neon_qtile *q, int64_t g, float *facc);

#define NEON_MAX_EP 12

/* A target's qtile entry: its group kernels over the groups, then the
 * rows that exist to out. */
static inline void neon_qtile_run(const rt_qtile_args *a, int64_t et, int rows, int64_t ht,
                                  float *out, neon_group_fn gemm_group,
                                  neon_group_fn gemv_group)
{
    neon_qtile q = neon_qtile_at(a, et, ht);
    float facc[NEON_MAX_EP * NEON_HP] = {0};
    neon_group_fn group = rows == 1 ? gemv_group : gemm_group;
    for (int64_t g = 0; g < q.groups; g++)
        group(&q, g, facc);
    for (int i = 0; i < rows * NEON_HP; i += 4)
        vst1q_f32(out + i, vld1q_f32(facc + i));
}

/* Bits 4: one 8-row block of two packed tiles (2u low nibbles, 2u + 1 high
 * nibbles, quant_format.h) as the signed bytes SDOT/SMMLA take: q <= 15
 * is the same value as int8. */
static inline int8x16_t neon_low_nibbles(uint8x16_t b)
{
    return vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(15)));
}

static inline int8x16_t neon_high_nibbles(uint8x16_t b)
{
    return vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
}

#endif
