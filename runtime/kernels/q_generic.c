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
static float row_amax(const float *x, ptrdiff_t k)
{
    float amax = 0.0f;
    for (ptrdiff_t c = 0; c < k; c++) {
        float a = fabsf(x[c]);
        amax = a > amax ? a : amax;
    }
    return amax;
}

/* Row e of the tiles: q = x * inv rounded and clamped, the row's scale sx. */
static void quantize_row_with(const float *x, const rt_qact_shape *s, ptrdiff_t e, uint8_t *xq,
                              float inv, float sx)
{
    ptrdiff_t k = (ptrdiff_t)s->k, group = (ptrdiff_t)s->group, groups = (ptrdiff_t)s->kp / group;
    float *scales = (float *)(xq + rt_qact_scales_offset(s));
    int32_t *sums = (int32_t *)(xq + rt_qact_sums_offset(s)) + e * groups;
    scales[e] = sx;
    for (ptrdiff_t g = 0; g < groups; g++)
        sums[g] = 0;
    for (ptrdiff_t c = 0; c < k; c++) {
        int q = inv > 0.0f ? rt_q_value(x[c], inv) : 0;
        xq[rt_qact_index(s, e, c)] = (uint8_t)(int8_t)q;
        sums[c / group] += q;
    }
}

void rt_q_generic_quantize_rows(const float *x, int64_t x_stride, const rt_qact_shape *s,
                                int64_t r0, int64_t r1, float scale, uint8_t *xq)
{
    for (ptrdiff_t e = (ptrdiff_t)r0; e < (ptrdiff_t)r1; e++) {
        const float *row = x + e * (ptrdiff_t)x_stride;
        float amax = scale > 0.0f ? 127.0f * scale : row_amax(row, (ptrdiff_t)s->k);
        float inv = scale > 0.0f ? 1.0f / scale : rt_q_row_inverse(amax);
        float sx = scale > 0.0f ? scale : inv > 0.0f ? amax / 127.0f : 0.0f;
        quantize_row_with(row, s, e, xq, inv, sx);
    }
}


/* Weight value (h, j) of a block, j the position inside the group: tile
 * t = j / lp; bits 4 pairs tiles 2u (low nibble) and 2u + 1 (high). */
static int weight_q(const uint8_t *block, const rt_qweight_shape *ws, int h, ptrdiff_t j)
{
    ptrdiff_t t = j / ws->lp, tile_bytes = (ptrdiff_t)ws->hp * ws->lp;
    ptrdiff_t in_tile = (ptrdiff_t)h * ws->lp + j % ws->lp;
    if (ws->bits == 8)
        return (int8_t)block[t * tile_bytes + in_tile];
    uint8_t b = block[(t / 2) * tile_bytes + in_tile];
    return t % 2 ? b >> 4 : b & 15;
}

/* The exact int32 dot product of activation row e with weight row h over
 * group g (|q| <= 127 and group <= 2^24 keep it below 2^31). */
static int32_t group_dot(const rt_qtile_args *a, ptrdiff_t e, const uint8_t *block, int h,
                         ptrdiff_t g)
{
    int32_t acc = 0;
    ptrdiff_t group = (ptrdiff_t)a->ws.group;
    for (ptrdiff_t j = 0; j < group; j++) {
        int8_t xv = (int8_t)a->xq[rt_qact_index(&a->xs, e, g * group + j)];
        acc += (int32_t)xv * weight_q(block, &a->ws, h, j);
    }
    return acc;
}

void rt_q_generic_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out)
{
    const rt_qweight_shape *ws = &a->ws;
    ptrdiff_t groups = (ptrdiff_t)ws->kp / (ptrdiff_t)ws->group;
    size_t data_bytes = (size_t)rt_qweight_data_bytes(ws);
    const int32_t *sums = (const int32_t *)(a->xq + rt_qact_sums_offset(&a->xs));
    for (int i = 0; i < rows * ws->hp; i++)
        out[i] = 0.0f;
    size_t block_bytes = (size_t)rt_qweight_block_bytes(ws);
    const uint8_t *block = a->w + (size_t)rt_qweight_block_offset(ws, ht, 0);
    for (ptrdiff_t g = 0; g < groups; g++, block += block_bytes) {
        const uint8_t *scales = block + data_bytes, *mins = scales + 2 * ws->hp;
        for (int e = 0; e < rows; e++) {
            ptrdiff_t row = (ptrdiff_t)et * a->xs.ep + e;
            for (int h = 0; h < ws->hp; h++) {
                float v = rt_half_at(scales + 2 * h) * (float)group_dot(a, row, block, h, g);
                if (ws->bits == 4)
                    v += rt_half_at(mins + 2 * h) * (float)sums[row * groups + g];
                out[e * ws->hp + h] += v;
            }
        }
    }
}
