/* The portable quantized micro-kernels: plain scalar C written straight
 * from quant_format.h, for any hp, lp, ep the formats allow.  They run
 * plans for target "generic" and are the oracle the SIMD tables are tested
 * against, so they favour being obviously right over being fast. */
#include <math.h>

#include "q_generic.h"

/* lrintf rounds half to even in the default rounding mode; the clamps are
 * written so that a NaN product compares false and becomes 127. */
int rt_q_value(float x, float inv)
{
    float v = x * inv;
    v = v < 127.0f ? v : 127.0f;
    v = v > -127.0f ? v : -127.0f;
    return (int)lrintf(v);
}

/* The larger magnitude wins; a NaN |x| never does (comparison false). */
static float row_amax(const float *x, ptrdiff_t k)
{
    float amax = 0.0f;
    for (ptrdiff_t c = 0; c < k; c++) {
        float a = fabsf(x[c]);
        amax = a > amax ? a : amax;
    }
    return amax;
}

/* Row e of the tiles, group by group: q = x * inv rounded and clamped, with
 * inv and sx the group's own (amax / 127 and its inverse) or the static
 * scale's. */
static void quantize_row(const float *x, const rt_qact_shape *s, ptrdiff_t e, float scale,
                         uint8_t *xq)
{
    ptrdiff_t k = (ptrdiff_t)s->k, group = (ptrdiff_t)s->group, groups = (ptrdiff_t)s->kp / group;
    float *scales = (float *)(xq + rt_qact_scales_offset(s)) + e * groups;
    int32_t *sums = (int32_t *)(xq + rt_qact_sums_offset(s)) + e * groups;
    for (ptrdiff_t g = 0, c = 0; g < groups; g++) {
        ptrdiff_t end = (g + 1) * group < k ? (g + 1) * group : k;
        float amax = scale > 0.0f ? 127.0f * scale : row_amax(x + c, end - c);
        float inv = scale > 0.0f ? 1.0f / scale : rt_q_row_inverse(amax);
        scales[g] = scale > 0.0f ? scale : inv > 0.0f ? amax / 127.0f : 0.0f;
        sums[g] = 0;
        for (; c < end; c++) {
            int q = inv > 0.0f ? rt_q_value(x[c], inv) : 0;
            xq[rt_qact_index(s, e, c)] = (uint8_t)(int8_t)q;
            sums[g] += q;
        }
    }
}

void rt_q_generic_quantize_rows(const float *x, int64_t x_stride, const rt_qact_shape *s,
                                int64_t r0, int64_t r1, float scale, uint8_t *xq)
{
    for (ptrdiff_t e = (ptrdiff_t)r0; e < (ptrdiff_t)r1; e++)
        quantize_row(x + e * (ptrdiff_t)x_stride, s, e, scale, xq);
}

/* The exact int32 dot product of activation row e with weight row h over
 * group g (|x q| <= 127, |w q| <= 128 and group <= 2^17 keep it below 2^31). */
static int32_t group_dot(const rt_qtile_args *a, ptrdiff_t e, const uint8_t *block, int h,
                         ptrdiff_t g)
{
    int32_t acc = 0;
    ptrdiff_t group = (ptrdiff_t)a->ws.group;
    for (ptrdiff_t j = 0; j < group; j++) {
        int8_t xv = (int8_t)a->xq[rt_qact_index(&a->xs, e, g * group + j)];
        acc += (int32_t)xv * rt_qweight_q(block, &a->ws, h, (size_t)j);
    }
    return acc;
}

/* Group g's term c of quant_format.h for row h, over the exact acc and the
 * activation group sum. */
static float group_term(const uint8_t *block, const rt_qweight_shape *ws, int h, int32_t acc,
                        int32_t sum)
{
    float scale = rt_qweight_coef(block, ws, h);
    if (ws->coef == RT_QCOEF_FLOAT) /* the bracket exact in int32 (quant_format.h) */
        return scale * (float)(acc - (int32_t)rt_qweight_coef(block, ws, ws->hp + h) * sum);
    float c = scale * (float)acc;
    return ws->bits == 4 ? c + rt_qweight_coef(block, ws, ws->hp + h) * (float)sum : c;
}

void rt_q_generic_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out)
{
    const rt_qweight_shape *ws = &a->ws;
    ptrdiff_t groups = (ptrdiff_t)ws->kp / (ptrdiff_t)ws->group;
    const int32_t *sums = (const int32_t *)(a->xq + rt_qact_sums_offset(&a->xs));
    const float *sx = (const float *)(a->xq + rt_qact_scales_offset(&a->xs));
    for (int i = 0; i < rows * ws->hp; i++)
        out[i] = 0.0f;
    size_t block_bytes = (size_t)rt_qweight_block_bytes(ws);
    const uint8_t *block = a->w + (size_t)rt_qweight_block_offset(ws, ht, 0);
    for (ptrdiff_t g = 0; g < groups; g++, block += block_bytes)
        for (int e = 0; e < rows; e++) {
            ptrdiff_t row = (ptrdiff_t)et * a->xs.ep + e, at = row * groups + g;
            for (int h = 0; h < ws->hp; h++) {
                float c = group_term(block, ws, h, group_dot(a, row, block, h, g), sums[at]);
                out[e * ws->hp + h] += sx[at] * c;
            }
        }
}
