/* NEON inner loops of the Attention kernel (ref_attention.c) over float16
 * and int8 KV caches, plain ARMv8.0 AArch64 (both NEON tables use them):
 * table fields attn_scores_f16, attn_scores_i8, attn_accumulate_f16.
 *
 * The portable loops widen four stored rows into a float buffer and then
 * run the float loops over it; here each row is widened four values per
 * load inside the loop (FCVTL for float16; SXTL twice and SCVTF for int8),
 * so nothing is converted ahead.
 *
 * Scores: one key at a time, four accumulators over 16 columns (four FMA
 * chains against the 4-cycle FMA latency of a Cortex-A class core), summed
 * as (a0 + a1) + (a2 + a3) then across lanes, then the scalar tail: a
 * key's score depends on q and its row only.  An int8 key's sum is then
 * multiplied by its row's scale (tensor_traits.h rt_kv_scale_offset).
 *
 * Accumulate: o += p[t] v_t in key order, 16 columns (four vectors) kept
 * in registers across all the keys, so o is loaded and stored once. */
#include <arm_neon.h>
#include <string.h>

#include "q_neon.h"
#include "quant_format.h"
#include "tensor_traits.h"

static inline float32x4_t load4_f16(const uint16_t *row, int64_t i)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(row + i)));
}

/* 8 int8 values from element i on as two float vectors. */
static inline void load8_i8(const uint8_t *row, int64_t i, float32x4_t *lo, float32x4_t *hi)
{
    int16x8_t w = vmovl_s8(vld1_s8((const int8_t *)row + i));
    *lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(w)));
    *hi = vcvtq_f32_s32(vmovl_s16(vget_high_s16(w)));
}

static float dot_f16(const float *q, const uint16_t *k, int64_t d)
{
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= d; i += 16) {
        a0 = vfmaq_f32(a0, vld1q_f32(q + i), load4_f16(k, i));
        a1 = vfmaq_f32(a1, vld1q_f32(q + i + 4), load4_f16(k, i + 4));
        a2 = vfmaq_f32(a2, vld1q_f32(q + i + 8), load4_f16(k, i + 8));
        a3 = vfmaq_f32(a3, vld1q_f32(q + i + 12), load4_f16(k, i + 12));
    }
    for (; i + 4 <= d; i += 4)
        a0 = vfmaq_f32(a0, vld1q_f32(q + i), load4_f16(k, i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < d; i++)
        s += q[i] * rt_half_to_float(k[i]);
    return s;
}

static float dot_i8(const float *q, const uint8_t *k, int64_t d)
{
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0, lo, hi;
    int64_t i = 0;
    for (; i + 16 <= d; i += 16) {
        load8_i8(k, i, &lo, &hi);
        a0 = vfmaq_f32(a0, vld1q_f32(q + i), lo);
        a1 = vfmaq_f32(a1, vld1q_f32(q + i + 4), hi);
        load8_i8(k, i + 8, &lo, &hi);
        a2 = vfmaq_f32(a2, vld1q_f32(q + i + 8), lo);
        a3 = vfmaq_f32(a3, vld1q_f32(q + i + 12), hi);
    }
    for (; i + 8 <= d; i += 8) {
        load8_i8(k, i, &lo, &hi);
        a0 = vfmaq_f32(a0, vld1q_f32(q + i), lo);
        a1 = vfmaq_f32(a1, vld1q_f32(q + i + 4), hi);
    }
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < d; i++)
        s += q[i] * (float)(int8_t)k[i];
    return s;
}

void rt_neon_attn_scores_f16(const float *q, const uint16_t *k, int64_t nk, int64_t d,
                             float *scores)
{
    for (int64_t t = 0; t < nk; t++)
        scores[t] = dot_f16(q, k + t * d, d);
}

void rt_neon_attn_scores_i8(const float *q, const uint8_t *k, int64_t nk, int64_t d,
                            float *scores)
{
    uint64_t row_bytes = rt_kv_row_bytes(LLMC_RT_I8, 0, d), at = rt_kv_scale_offset(d);
    for (int64_t t = 0; t < nk; t++) {
        const uint8_t *row = k + (uint64_t)t * row_bytes;
        float scale;
        memcpy(&scale, row + at, sizeof scale);
        scores[t] = dot_i8(q, row, d) * scale;
    }
}

void rt_neon_attn_accumulate_f16(float *o, const uint16_t *v, const float *p, int64_t nk,
                                 int64_t d)
{
    int64_t i = 0;
    for (; i + 16 <= d; i += 16) {
        float32x4_t o0 = vld1q_f32(o + i), o1 = vld1q_f32(o + i + 4);
        float32x4_t o2 = vld1q_f32(o + i + 8), o3 = vld1q_f32(o + i + 12);
        for (int64_t t = 0; t < nk; t++) {
            const uint16_t *vt = v + t * d;
            float32x4_t pt = vdupq_n_f32(p[t]);
            o0 = vfmaq_f32(o0, pt, load4_f16(vt, i));
            o1 = vfmaq_f32(o1, pt, load4_f16(vt, i + 4));
            o2 = vfmaq_f32(o2, pt, load4_f16(vt, i + 8));
            o3 = vfmaq_f32(o3, pt, load4_f16(vt, i + 12));
        }
        vst1q_f32(o + i, o0);
        vst1q_f32(o + i + 4, o1);
        vst1q_f32(o + i + 8, o2);
        vst1q_f32(o + i + 12, o3);
    }
    for (; i + 4 <= d; i += 4) {
        float32x4_t acc = vld1q_f32(o + i);
        for (int64_t t = 0; t < nk; t++)
            acc = vfmaq_f32(acc, vdupq_n_f32(p[t]), load4_f16(v + t * d, i));
        vst1q_f32(o + i, acc);
    }
    for (; i < d; i++) {
        float acc = o[i];
        for (int64_t t = 0; t < nk; t++)
            acc += p[t] * rt_half_to_float(v[t * d + i]);
        o[i] = acc;
    }
}
