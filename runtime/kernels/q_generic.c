/* The portable quantized micro-kernels: plain scalar C written straight
 * from quant_format.h, for any hp, lp, ep the formats allow.  They run
 * plans for target "generic" and are the oracle the SIMD tables are tested
 * against, so they favour being obviously right over being fast. */
#include <float.h>
#include <math.h>

#include "q_generic.h"

float rt_q_row_inverse(float amax)
{
    float inv = 127.0f / amax;
    return amax > 0.0f && inv <= FLT_MAX ? inv : 0.0f;
}

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
static float row_amax(const float *x, int64_t k)
{
    float amax = 0.0f;
    for (int64_t c = 0; c < k; c++) {
        float a = fabsf(x[c]);
        amax = a > amax ? a : amax;
    }
    return amax;
}

static void quantize_row(const float *x, const rt_qact_shape *s, int64_t e, uint8_t *xq)
{
    float amax = row_amax(x, s->k), inv = rt_q_row_inverse(amax);
    float *scales = (float *)(xq + rt_qact_scales_offset(s));
    int32_t *sums = (int32_t *)(xq + rt_qact_sums_offset(s)) + e * (s->kp / s->group);
    scales[e] = inv > 0.0f ? amax / 127.0f : 0.0f;
    for (int64_t g = 0; g < s->kp / s->group; g++)
        sums[g] = 0;
    for (int64_t c = 0; c < s->k; c++) {
        int q = inv > 0.0f ? rt_q_value(x[c], inv) : 0;
        xq[rt_qact_index(s, e, c)] = (uint8_t)(int8_t)q;
        sums[c / s->group] += q;
    }
}

void rt_q_generic_quantize_rows(const float *x, int64_t x_stride, const rt_qact_shape *s,
                                int64_t r0, int64_t r1, uint8_t *xq)
{
    for (int64_t e = r0; e < r1; e++)
        quantize_row(x + e * x_stride, s, e, xq);
}

/* Weight value (h, j) of a block, j the position inside the group: tile
 * t = j / lp; bits 4 pairs tiles 2u (low nibble) and 2u + 1 (high). */
static int weight_q(const uint8_t *block, const rt_qweight_shape *ws, int h, int64_t j)
{
    int64_t t = j / ws->lp, tile_bytes = (int64_t)ws->hp * ws->lp;
    int64_t in_tile = (int64_t)h * ws->lp + j % ws->lp;
    if (ws->bits == 8)
        return (int8_t)block[t * tile_bytes + in_tile];
    uint8_t b = block[(t / 2) * tile_bytes + in_tile];
    return t % 2 ? b >> 4 : b & 15;
}

/* The exact int32 dot product of activation row e with weight row h over
 * group g (|q| <= 127 and group <= 2^24 keep it below 2^31). */
static int32_t group_dot(const rt_qtile_args *a, int64_t e, const uint8_t *block, int h,
                         int64_t g)
{
    int32_t acc = 0;
    for (int64_t j = 0; j < a->ws.group; j++) {
        int8_t xv = (int8_t)a->xq[rt_qact_index(&a->xs, e, g * a->ws.group + j)];
        acc += (int32_t)xv * weight_q(block, &a->ws, h, j);
    }
    return acc;
}

void rt_q_generic_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out)
{
    const rt_qweight_shape *ws = &a->ws;
    int64_t groups = ws->kp / ws->group;
    uint64_t data_bytes = (uint64_t)ws->hp * (uint64_t)ws->group * (uint64_t)ws->bits / 8u;
    const int32_t *sums = (const int32_t *)(a->xq + rt_qact_sums_offset(&a->xs));
    for (int i = 0; i < rows * ws->hp; i++)
        out[i] = 0.0f;
    for (int64_t g = 0; g < groups; g++) {
        const uint8_t *block = a->w + rt_qweight_block_offset(ws, ht, g);
        const uint8_t *scales = block + data_bytes, *mins = scales + 2 * ws->hp;
        for (int e = 0; e < rows; e++) {
            int64_t row = et * a->xs.ep + e;
            for (int h = 0; h < ws->hp; h++) {
                float v = rt_half_at(scales + 2 * h) * (float)group_dot(a, row, block, h, g);
                if (ws->bits == 4)
                    v += rt_half_at(mins + 2 * h) * (float)sums[row * groups + g];
                out[e * ws->hp + h] += v;
            }
        }
    }
}
