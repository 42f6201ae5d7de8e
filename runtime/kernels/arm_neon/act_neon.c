/* NEON activation and norm loops: rt_kernels.swiglu = rt_neon_swiglu,
 * rt_kernels.rmsnorm_row = rt_neon_rmsnorm_row (plain ARMv8.0 AArch64, both
 * NEON tables).
 *
 * silu(x) = x * sigmoid(x) as the portable loop writes it (exp of a
 * non-positive argument only, so nothing overflows): with e = exp(-|x|),
 * x / (1 + e) for x >= 0 and x * e / (1 + e) below.  exp is the range
 * reduction t = n ln2 + r, |r| <= ln2 / 2, with ln2 in two parts so n *
 * ln2_hi is exact, a degree-6 polynomial for exp(r) (the Cephes expf
 * coefficients, ~1 ulp) and 2^n put into the exponent bits in two factors
 * (so subnormal results round once, as expf's do); arguments below
 * ln(2^-150) give 0 like expf's underflow (so silu(-inf) = -inf * 0 = NaN,
 * as in the portable loop).  The same scheme as the AVX2 table's. */
#include <arm_neon.h>

#include "q_neon.h"

/* exp(t) for t <= 0 (NaN: some value; the caller's x carries the NaN). */
static inline float32x4_t exp_nonpositive(float32x4_t t)
{
    const float32x4_t lowest = vdupq_n_f32(-103.972077f); /* ln(2^-150) */
    uint32x4_t underflow = vcltq_f32(t, lowest);
    t = vmaxq_f32(t, lowest);
    float32x4_t n = vrndnq_f32(vmulq_f32(t, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(t, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), vmulq_f32(p, r), r);
    int32x4_t n_int = vcvtq_s32_f32(n), n1 = vshrq_n_s32(n_int, 1);
    int32x4_t n2 = vsubq_s32(n_int, n1), bias = vdupq_n_s32(127);
    float32x4_t f1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    float32x4_t f2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
    float32x4_t e = vmulq_f32(vmulq_f32(p, f1), f2);
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(e), underflow));
}

static inline float32x4_t swiglu4(float32x4_t x, float32x4_t up)
{
    float32x4_t e = exp_nonpositive(vnegq_f32(vabsq_f32(x))); /* exp(-|x|) */
    uint32x4_t non_negative = vcgeq_f32(x, vdupq_n_f32(0.0f));
    float32x4_t num = vbslq_f32(non_negative, x, vmulq_f32(x, e));
    return vmulq_f32(vdivq_f32(num, vaddq_f32(vdupq_n_f32(1.0f), e)), up);
}

void rt_neon_swiglu(const float *gate, const float *up, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, swiglu4(vld1q_f32(gate + i), vld1q_f32(up + i)));
    if (i < n) {
        /* the tail through a zero-padded vector, so it has the same bits */
        float g[4] = {0}, u[4] = {0}, out[4];
        for (int64_t j = i; j < n; j++) {
            g[j - i] = gate[j];
            u[j - i] = up[j];
        }
        vst1q_f32(out, swiglu4(vld1q_f32(g), vld1q_f32(u)));
        for (int64_t j = i; j < n; j++)
            y[j] = out[j - i];
    }
}

/* ---- RMSNorm --------------------------------------------------------------
 * The portable row (ref_layernorm.c) with its RT_RMS_LANES = 8 compensated
 * lanes in two Q registers (lanes 0-3, 4-7): each step is k_fsum_add's
 * arithmetic, the branch a bit select, so every lane holds the portable
 * lane's bits and rt_rms_inv finishes both (rt_rms_inv_split; the same
 * scheme as the AVX2 row). */

/* k_fsum_add(lane l, v[l]) for 4 lanes */
static inline void fsum_add4(float32x4_t *sum, float32x4_t *c, float32x4_t v)
{
    float32x4_t t = vaddq_f32(*sum, v);
    uint32x4_t sum_bigger = vcgeq_f32(vabsq_f32(*sum), vabsq_f32(v));
    float32x4_t if_bigger = vaddq_f32(vsubq_f32(*sum, t), v);
    float32x4_t if_not = vaddq_f32(vsubq_f32(v, t), *sum);
    *c = vaddq_f32(*c, vbslq_f32(sum_bigger, if_bigger, if_not));
    *sum = t;
}

void rt_neon_rmsnorm_row(const float *x, const float *scale, float *y, int64_t n,
                         float epsilon, float fd)
{
    float32x4_t sum[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, c[2] = {sum[0], sum[0]};
    int64_t j = 0;
    for (; j + RT_RMS_LANES <= n; j += RT_RMS_LANES)
        for (int h = 0; h < 2; h++) {
            float32x4_t v = vld1q_f32(x + j + 4 * h);
            fsum_add4(&sum[h], &c[h], vmulq_f32(v, v));
        }
    float sums[RT_RMS_LANES], cs[RT_RMS_LANES];
    for (int h = 0; h < 2; h++) {
        vst1q_f32(sums + 4 * h, sum[h]);
        vst1q_f32(cs + 4 * h, c[h]);
    }
    float inv = rt_rms_inv_split(sums, cs, x, j, n, epsilon, fd);
    float32x4_t inv4 = vdupq_n_f32(inv);
    for (j = 0; j + 4 <= n; j += 4) /* (x * inv) * scale: two roundings, as the portable row */
        vst1q_f32(y + j, vmulq_f32(vmulq_f32(vld1q_f32(x + j), inv4), vld1q_f32(scale + j)));
    for (; j < n; j++)
        y[j] = x[j] * inv * scale[j];
}
