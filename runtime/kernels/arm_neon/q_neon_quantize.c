/* QuantizeRows for the NEON tables (lp 4 or 8), plain ARMv8.0 NEON so both
 * tables can share it: per (row, group) abs-max, sx = amax / 127, q = round to
 * nearest even of x * (127 / amax) (FCVTNS rounds ties to even whatever
 * the FPCR mode), and per group the int32 sum of q (quant_format.h).  A
 * static scale (calibrated QuantizeRows): sx = scale, q = x * (1 / scale)
 * clamped to +-127 before the rounding, as the portable kernel does.
 *
 * Eight values at a time: every group is a whole number of them (group is
 * a multiple of 2 * lp >= 8), and they are one k-tile (lp 8) or two (lp 4)
 * of the activation row, stored to their places in the [ep][lp] tiles.
 * Only the row's k columns are written: padding rows and columns are the
 * driver's. */
#include <arm_neon.h>

#include "../q_generic.h"
#include "q_neon.h"

static float abs_max(const float *x, int64_t k)
{
    float32x4_t m = vdupq_n_f32(0.0f);
    int64_t c = 0;
    for (; c + 4 <= k; c += 4)
        m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + c)));
    float amax = vmaxvq_f32(m);
    for (; c < k; c++) {
        float a = x[c] < 0.0f ? -x[c] : x[c];
        amax = a > amax ? a : amax;
    }
    return amax;
}

/* x * inv clamped to [-127, 127] (a no-op for a row's own abs-max). */
static float32x4_t scaled(const float *x, float32x4_t inv)
{
    return vmaxq_f32(vminq_f32(vmulq_f32(vld1q_f32(x), inv), vdupq_n_f32(127.0f)),
                     vdupq_n_f32(-127.0f));
}

static int8x8_t quantize8(const float *x, float32x4_t inv)
{
    int32x4_t lo = vcvtnq_s32_f32(scaled(x, inv));
    int32x4_t hi = vcvtnq_s32_f32(scaled(x + 4, inv));
    return vqmovn_s16(vcombine_s16(vqmovn_s32(lo), vqmovn_s32(hi)));
}

/* Where column c of a row goes: dst is the row's place in k-tile 0, tiles
 * are tile_bytes apart. */
typedef struct {
    int8_t *dst;
    int64_t tile_bytes;
    int lp;
} row_place;

static int8_t *column_at(const row_place *p, int64_t c)
{
    return p->dst + (c / p->lp) * p->tile_bytes + c % p->lp;
}

/* Eight quantized columns [c, c + 8). */
static void store8(const row_place *p, int64_t c, int8x8_t q)
{
    if (p->lp == 8) {
        vst1_s8(column_at(p, c), q);
    } else { /* lp 4: two tiles */
        int32x2_t q2 = vreinterpret_s32_s8(q);
        vst1_lane_s32((int32_t *)(void *)column_at(p, c), q2, 0);
        vst1_lane_s32((int32_t *)(void *)column_at(p, c + 4), q2, 1);
    }
}

/* The last n < 8 columns [c, c + n) of the row, zero-extended to 8 for
 * the arithmetic; only n are stored. */
static int8x8_t quantize_tail(const row_place *p, const float *x, int64_t c, int n,
                              float32x4_t inv)
{
    float xs[8] = {0};
    int8_t qs[8];
    for (int i = 0; i < n; i++)
        xs[i] = x[c + i];
    int8x8_t q = quantize8(xs, inv);
    vst1_s8(qs, q);
    for (int i = 0; i < n; i++)
        *column_at(p, c + i) = qs[i];
    return q;
}

/* Columns [c0, c0 + group) of the row, clipped to k; returns their sum. */
static int32_t quantize_group(const row_place *p, const float *x, int64_t c0, int64_t group,
                              int64_t k, float32x4_t inv)
{
    int64_t end = c0 + group < k ? c0 + group : k, c = c0;
    int32x4_t sum = vdupq_n_s32(0);
    for (; c + 8 <= end; c += 8) {
        int8x8_t q = quantize8(x + c, inv);
        store8(p, c, q);
        sum = vpadalq_s16(sum, vmovl_s8(q));
    }
    if (c < end)
        sum = vpadalq_s16(sum, vmovl_s8(quantize_tail(p, x, c, (int)(end - c), inv)));
    return vaddvq_s32(sum);
}

/* Group by group: each one's scale and inverse (rt_q_row_inverse: 0 when
 * 127 / amax overflows, as the portable kernel has it), then its q. */
static void quantize_row(const float *x, const rt_qact_shape *s, int64_t r, float scale,
                         uint8_t *xq)
{
    int64_t groups = s->kp / s->group;
    float *scales = (float *)(void *)(xq + rt_qact_scales_offset(s)) + r * groups;
    int32_t *sums = (int32_t *)(void *)(xq + rt_qact_sums_offset(s)) + r * groups;
    row_place p = {(int8_t *)xq + (r / s->ep) * s->ep * s->kp + (r % s->ep) * s->lp,
                   (int64_t)s->ep * s->lp, s->lp};
    for (int64_t g = 0; g < groups; g++) {
        int64_t c0 = g * s->group, n = s->k - c0 < s->group ? s->k - c0 : s->group;
        float amax = scale > 0.0f ? 0.0f : abs_max(x + c0, n);
        float inv = scale > 0.0f ? 1.0f / scale : rt_q_row_inverse(amax);
        scales[g] = scale > 0.0f ? scale : inv > 0.0f ? amax / 127.0f : 0.0f;
        sums[g] = quantize_group(&p, x, c0, s->group, s->k, vdupq_n_f32(inv));
    }
}

void rt_neon_quantize_rows(const float *x, int64_t x_stride, const rt_qact_shape *s,
                           int64_t r0, int64_t r1, float scale, uint8_t *xq)
{
    for (int64_t r = r0; r < r1; r++)
        quantize_row(x + r * x_stride, s, r, scale, xq);
}
