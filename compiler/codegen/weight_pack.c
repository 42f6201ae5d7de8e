/* Weight packing (weight_pack.h): quantization of one row tile into the
 * block layout of runtime/quant_format.h, the same layout from a file's
 * quantized values (binary16 or float32 coefficients), and the fp32 tile
 * layout. */
#include <math.h>
#include <string.h>

#include "weight_pack.h"

#define HALF_MAX_BITS 0x7bffu /* 65504 */

/* The half one step toward +inf (up) or -inf from h (finite h). */
static uint16_t half_step(uint16_t h, int up)
{
    bool negative = h & 0x8000u;
    if ((h & 0x7fffu) == 0) /* +0 or -0 */
        return up ? 0x0001u : 0x8001u;
    if ((h & 0x7fffu) == HALF_MAX_BITS && negative != !up)
        return h;           /* stays at the largest finite magnitude */
    return (uint16_t)(negative == !up ? h + 1 : h - 1);
}

/* Finite half nearest to v, then stepped until it is <= v (up = 0) or >= v
 * (up = 1); magnitudes beyond 65504 stay at 65504. */
static uint16_t half_toward(double v, int up)
{
    uint16_t h = rt_float_to_half((float)v);
    if ((h & 0x7fffu) >= 0x7c00u)
        h = (uint16_t)((h & 0x8000u) | HALF_MAX_BITS);
    for (int i = 0; i < 4; i++) {
        double f = rt_half_to_float(h);
        if (up ? f >= v : f <= v)
            break;
        h = half_step(h, up);
    }
    return h;
}

static uint16_t half_nearest(double v)
{
    uint16_t h = rt_float_to_half((float)v);
    return (h & 0x7fffu) >= 0x7c00u ? (uint16_t)((h & 0x8000u) | HALF_MAX_BITS) : h;
}

/* round(v) clamped to [lo, hi]; NaN gives lo. */
static int round_clamped(double v, int lo, int hi)
{
    if (!(v >= lo))
        return lo;
    return v >= hi ? hi : (int)lrint(v);
}

static void put_half(uint8_t *p, uint16_t h)
{
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* Where value (r, j) of a block goes (j inside the group): its byte, and
 * for bits 4 whether it is the high nibble. */
static uint8_t *value_byte(uint8_t *block, const rt_qweight_shape *s, int r, int64_t j,
                           int *high)
{
    int64_t t = j / s->lp, tile_bytes = (int64_t)s->hp * s->lp;
    int64_t at = (int64_t)r * s->lp + j % s->lp;
    *high = s->bits == 4 && t % 2;
    return block + (s->bits == 4 ? t / 2 : t) * tile_bytes + at;
}

/* Stores value q (a nibble or an int8's byte) at (r, j) of a block. */
static void put_value(uint8_t *block, const rt_qweight_shape *s, int r, int64_t j, int q)
{
    int high;
    uint8_t *b = value_byte(block, s, r, j, &high);
    if (s->bits == 8)
        *b = (uint8_t)q;
    else
        *b = (uint8_t)(high ? (*b & 0x0f) | q << 4 : (*b & 0xf0) | q);
}

/* Row r's values of group g: w[0, len), len <= group (the rest padding). */
static void pack_row_group(const float *w, int64_t len, const rt_qweight_shape *s, int r,
                           uint8_t *block)
{
    uint8_t *scales = block + rt_qweight_data_bytes(s);
    double lo = 0, hi = 0, amax = 0;
    for (int64_t j = 0; j < len; j++) {
        double v = w[j];
        lo = j == 0 || v < lo ? v : lo;
        hi = j == 0 || v > hi ? v : hi;
        amax = fabs(v) > amax ? fabs(v) : amax;
    }
    double scale, min = 0;
    if (s->bits == 8) {
        uint16_t h = half_nearest(amax / 127.0);
        put_half(scales + 2 * r, h);
        scale = rt_half_to_float(h);
    } else {
        uint16_t min_h = half_toward(lo, 0);
        min = rt_half_to_float(min_h);
        uint16_t scale_h = half_toward((hi - min) / 15.0, 1);
        if (min + 15.0 * rt_half_to_float(scale_h) < hi)
            scale_h = half_step(scale_h, 1);
        scale = rt_half_to_float(scale_h);
        put_half(scales + 2 * r, scale_h);
        put_half(scales + 2 * s->hp + 2 * r, min_h);
    }
    for (int64_t j = 0; j < len; j++) {
        int q = 0;
        if (scale > 0)
            q = s->bits == 8 ? round_clamped(w[j] / scale, -127, 127)
                             : round_clamped((w[j] - min) / scale, 0, 15);
        put_value(block, s, r, j, s->bits == 8 ? (uint8_t)(int8_t)q : q);
    }
}

void cg_qpack_row_tile(const float *rows, int64_t row_stride, int64_t n_rows,
                       const rt_qweight_shape *s, uint8_t *out)
{
    uint64_t block_bytes = rt_qweight_block_bytes(s);
    int64_t groups = s->kp / s->group;
    /* padding (rows, columns, scales, mins) is all zero bytes */
    memset(out, 0, (size_t)rt_qweight_tile_bytes(s));
    for (int64_t g = 0; g < groups; g++) {
        int64_t c0 = g * s->group, len = s->k - c0 < s->group ? s->k - c0 : s->group;
        for (int r = 0; r < n_rows && r < s->hp; r++)
            pack_row_group(rows + r * row_stride + c0, len, s, r, out + g * block_bytes);
    }
}

/* Coefficient c of a block's row r, in the tensor's coef dtype: binary16
 * bits little-endian (exact for the values the quantize passes let through),
 * or the float32 as it is. */
static void put_coef(uint8_t *coef, const rt_qweight_shape *s, int c, int r, float v)
{
    if (s->coef == RT_QCOEF_HALF)
        put_half(coef + 2 * (c * s->hp + r), rt_float_to_half(v));
    else
        memcpy(coef + 4 * (c * s->hp + r), &v, sizeof v);
}

void cg_qpack_row_tile_values(const uint8_t *q, const float *scale, const float *second, int64_t n_rows,
                              const rt_qweight_shape *s, uint8_t *out)
{
    uint64_t block_bytes = rt_qweight_block_bytes(s);
    int64_t groups = s->kp / s->group;
    bool has_second = s->coef == RT_QCOEF_FLOAT || s->bits == 4;
    memset(out, 0, (size_t)rt_qweight_tile_bytes(s));
    for (int64_t g = 0; g < groups; g++) {
        uint8_t *block = out + g * block_bytes, *coef = block + rt_qweight_data_bytes(s);
        int64_t c0 = g * s->group, len = s->k - c0 < s->group ? s->k - c0 : s->group;
        for (int r = 0; r < n_rows && r < s->hp; r++) {
            put_coef(coef, s, 0, r, scale[r * groups + g]);
            if (has_second)
                put_coef(coef, s, 1, r, second[r * groups + g]);
            for (int64_t j = 0; j < len; j++)
                put_value(block, s, r, j, q[r * s->k + c0 + j] & (s->bits == 4 ? 0x0f : 0xff));
        }
    }
}

void cg_fpack_row_tile(const float *rows, int64_t row_stride, int64_t n_rows,
                       const rt_ftile_shape *s, float *out)
{
    for (int64_t c = 0; c < s->k; c++)
        for (int r = 0; r < s->hp; r++)
            out[c * s->hp + r] = r < n_rows ? rows[r * row_stride + c] : 0.0f;
}
