/* Internal: the byte formats of quantized Linear operands.  The compiler
 * (compiler/codegen/weight_pack.c) writes weight tiles, the QuantizeRows op writes
 * activation tiles at run time, and every target's kernels read both.
 *
 * Weights: W [n, k] (one row per output feature), quantized per row and per
 * group of `group` consecutive reduction elements (group divides kp).
 *   kp = k rounded up to group (zero padding), np = n rounded up to hp.
 *   The tensor is np/hp * kp/group blocks in that order (row tile outer),
 *   one block = the hp rows of a row tile over one group:
 *     data    group/lp tiles of [hp][lp] values, tile t = elements
 *             [t*lp, t*lp + lp) of the group for the hp rows
 *               bits 8: int8 q in [-127, 127], tile t at byte t*hp*lp,
 *                       value (r, l) at byte t*hp*lp + r*lp + l
 *               bits 4: uint4 q in [0, 15]; tiles 2u and 2u+1 share the hp*lp
 *                       bytes at u*hp*lp: byte r*lp + l holds (r, l) of tile
 *                       2u in its low nibble and of tile 2u+1 in its high
 *                       nibble, so `& 15` and `>> 4` unpack two whole tiles
 *                       with no shuffle (paper 000 §IV.D)
 *     coefficients, by the tensor's coef dtype (plan.fbs Tensor.coef):
 *       Float16 (the packer's own quantization, and files whose values it
 *       holds exactly):
 *         scales  hp IEEE binary16, one per row
 *         mins    bits 4 only: hp binary16, one per row
 *         Dequantized: w = scale * q (bits 8, symmetric, q in [-127, 127]),
 *         w = scale * q + min (bits 4, asymmetric: min = -scale * zero_point)
 *       Float32 (a pre-quantized file's float32 scales and zero points,
 *       taken as they are; bits 8 values may be -128):
 *         scales  hp float32, one per row
 *         zeros   hp float32, one per row, integers (bits 4: 0..15,
 *                 bits 8: -128..127; a uint8 file's q and zero point are
 *                 both stored minus 128)
 *         Dequantized: w = (float)(q - zero) * scale, a difference of
 *         integers then one product: ONNX DequantizeLinear's bits.
 *   Padding rows and columns have q = 0 and every coefficient 0.
 *
 * Activations: x [m, k] float rows quantized by QuantizeRows, per (row,
 * group) abs-max, group the weights' (ONNX Runtime's MatMulNBits
 * accuracy level 4 quantizes A per block of K the same way): sx = amax /
 * 127, q = round-to-nearest-even(x * (127 / amax)) (0 when amax is 0), and
 * per (row, group) the int32 sum of q, which lets the bits-4 kernels add
 * min * sum(q) once per group instead of subtracting a zero point in the
 * inner loop (paper 000 §V.C).  A static scale (calibrated per tensor):
 * every (row, group) has sx = scale, q clamped to [-127, 127].
 *   mp = m rounded up to ep; kp as for the weights it feeds; G = kp / group.
 *     data    [mp/ep][kp/lp][ep][lp] int8 at offset 0 (padding q = 0);
 *             one row tile is contiguous so the GEMM streams it
 *     scales  [mp][G] float32 at align64(mp * kp)         (padding rows 0)
 *     sums    [mp][G] int32 at align64(scales + 4 * mp * G)
 *
 * A Linear over them: for output row e and feature h, with acc(e, h, G)
 * the exact int32 dot product of group G's q values,
 *   z[e][h] = sum over groups G of sx[e][G] * c(e, h, G),
 *   c = scale[h][G] * acc + min[h][G] * sums[e][G]     Float16, bits 4
 *   c = scale[h][G] * acc                              Float16, bits 8
 *   c = scale[h][G] * (acc - zero[h][G] * sums[e][G])  Float32 (the
 *       bracket exact in int32: |q - zero| <= 255 and |x q| <= 127, so
 *       it fits while 255 * 127 * group < 2^31: RT_QCOEF_FLOAT_MAX_GROUP). */
/* fp32 weight tiles (plans for SIMD targets): W [n, k] as np/hp row tiles,
 * each [k][hp] floats: value (r, c) of row tile ht at float index
 * (ht * k + c) * hp + r; padding rows 0.  One step of c reads hp
 * consecutive floats, so a GEMM broadcasts x[e][c] and multiply-adds whole
 * vectors of features (no horizontal sums). */
#ifndef LLMC_RT_QUANT_FORMAT_H
#define LLMC_RT_QUANT_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan_enums.h"
#include "rt_div64.h"

/* The sizes of the layouts' values and coefficients (plan_enums.h's layout
 * columns) as RT_<LAYOUT>_VALUE_BITS and RT_<LAYOUT>_COEF_BYTES; every byte
 * size below is computed from them, and they must be the C types the
 * kernels read. */
#define RT_LAYOUT_SIZES_(s, n, v, value_bits, coef_bytes) \
    RT_##s##_VALUE_BITS = value_bits, RT_##s##_COEF_BYTES = coef_bytes,
enum { LLMC_PLAN_LAYOUTS(RT_LAYOUT_SIZES_) };
#undef RT_LAYOUT_SIZES_
LLMC_STATIC_ASSERT(qweight_coef_is_half, RT_QWEIGHT_COEF_BYTES == sizeof(uint16_t));
LLMC_STATIC_ASSERT(qact_values_are_int8, RT_QACT_VALUE_BITS == 8 * sizeof(int8_t));
LLMC_STATIC_ASSERT(qact_coef_is_float_and_int32,
                   RT_QACT_COEF_BYTES == sizeof(float) && RT_QACT_COEF_BYTES == sizeof(int32_t));
LLMC_STATIC_ASSERT(fweight_values_are_float, RT_FWEIGHT_VALUE_BITS == 8 * sizeof(float));
LLMC_STATIC_ASSERT(half_values_are_binary16, RT_HALF_VALUE_BITS == 8 * sizeof(uint16_t));

/* A weight block's coefficients: their bytes each (plan.fbs Tensor.coef
 * Float16 or Float32). */
typedef enum { RT_QCOEF_HALF = 2, RT_QCOEF_FLOAT = 4 } rt_qcoef;

typedef struct {
    int bits;              /* 8 or 4 */
    int hp, lp;            /* tile: hp rows by lp reduction elements */
    int64_t n, k, group;   /* logical W [n, k]; group divides kp */
    int64_t np, kp;        /* n rounded up to hp, k rounded up to group */
    rt_qcoef coef;         /* scales (and mins) binary16, or scales and zeros float32 */
} rt_qweight_shape;

typedef struct {
    int ep, lp;            /* tile: ep rows by lp reduction elements */
    int64_t m, k, group;   /* logical x [m, k] */
    int64_t mp, kp;        /* m rounded up to ep, k rounded up to group */
} rt_qact_shape;

/* x rounded up to a multiple of a, for x >= 0 and a >= 1. */
static inline int64_t rt_qround_up(int64_t x, int64_t a)
{
    return (int64_t)(rt_udiv64((uint64_t)(x + a - 1), (uint64_t)a) * (uint64_t)a);
}

static inline uint64_t rt_qalign64(uint64_t v)
{
    return (v + 63) & ~(uint64_t)63;
}

/* What every tile format asks of its shape: rows per tile in [1, 64] and
 * two logical dims in [0, 2^40]. */
static inline bool rt_qtile_dims_ok(int rows, int64_t a, int64_t b)
{
    return rows >= 1 && rows <= 64 && a >= 0 && b >= 0 && a <= ((int64_t)1 << 40) &&
           b <= ((int64_t)1 << 40);
}

/* What the quantized formats ask of the reduction: lp a power of two in
 * [1, 64], group a positive multiple of 2 * lp (nibble tiles come in pairs;
 * a power of two, so the low bits tell). */
static inline bool rt_qdepth_ok(int lp, int64_t group)
{
    return lp >= 1 && lp <= 64 && !(lp & (lp - 1)) && group >= 2 * lp && !(group & (2 * lp - 1));
}

typedef struct {
    int hp;                /* rows per tile */
    int64_t n, k, np;      /* logical W [n, k]; np = n rounded up to hp */
} rt_ftile_shape;

static inline bool rt_ftile_shape_init(rt_ftile_shape *s, int hp, int64_t n, int64_t k)
{
    if (!rt_qtile_dims_ok(hp, n, k))
        return false;
    s->hp = hp;
    s->n = n;
    s->k = k;
    s->np = rt_qround_up(n, hp);
    return true;
}

/* Bytes of one row tile ([k][hp] floats) and of the tensor. */
static inline uint64_t rt_ftile_tile_bytes(const rt_ftile_shape *s)
{
    return RT_FWEIGHT_VALUE_BITS / 8u * (uint64_t)s->hp * (uint64_t)s->k;
}

static inline uint64_t rt_ftile_bytes(const rt_ftile_shape *s)
{
    return RT_FWEIGHT_VALUE_BITS / 8u * (uint64_t)s->np * (uint64_t)s->k;
}

/* Bytes of a weight block's q values: where its scales start. */
static inline uint64_t rt_qweight_data_bytes(const rt_qweight_shape *s)
{
    return (uint64_t)s->hp * (uint64_t)s->group * (uint64_t)s->bits / 8u;
}

/* Bytes of one weight block (hp rows over one group). */
static inline uint64_t rt_qweight_block_bytes(const rt_qweight_shape *s)
{
    unsigned per_row = s->coef == RT_QCOEF_FLOAT || s->bits == 4 ? 2u : 1u;
    return rt_qweight_data_bytes(s) + (uint64_t)s->coef * (uint64_t)s->hp * per_row;
}

/* Bytes of one row tile: its kp / group blocks. */
static inline uint64_t rt_qweight_tile_bytes(const rt_qweight_shape *s)
{
    return rt_udiv64((uint64_t)s->kp, (uint64_t)s->group) * rt_qweight_block_bytes(s);
}

static inline uint64_t rt_qweight_bytes(const rt_qweight_shape *s)
{
    return rt_udiv64((uint64_t)s->np, (uint64_t)s->hp) * rt_qweight_tile_bytes(s);
}

/* The block of row tile ht over group g.  Kernels and the packer ask for
 * blocks in memory, so a row tile's group count fits size_t (a native
 * division on 32-bit targets too). */
static inline uint64_t rt_qweight_block_offset(const rt_qweight_shape *s, int64_t ht,
                                               int64_t g)
{
    size_t groups = (size_t)s->kp / (size_t)s->group;
    return ((uint64_t)ht * groups + (uint64_t)g) * rt_qweight_block_bytes(s);
}

/* The activation tiles' scales (and sums): one per (row, group). */
static inline uint64_t rt_qact_coefs(const rt_qact_shape *s)
{
    return (uint64_t)s->mp * rt_udiv64((uint64_t)s->kp, (uint64_t)s->group);
}

static inline uint64_t rt_qact_scales_offset(const rt_qact_shape *s)
{
    return rt_qalign64(RT_QACT_VALUE_BITS / 8u * (uint64_t)s->mp * (uint64_t)s->kp);
}

static inline uint64_t rt_qact_sums_offset(const rt_qact_shape *s)
{
    return rt_qalign64(rt_qact_scales_offset(s) + RT_QACT_COEF_BYTES * rt_qact_coefs(s));
}

static inline uint64_t rt_qact_bytes(const rt_qact_shape *s)
{
    uint64_t coefs = RT_QACT_COEF_BYTES * rt_qact_coefs(s);
    return rt_qalign64(rt_qact_scales_offset(s) + coefs) + coefs;
}

/* Largest group of Float32 coefficients: where the kernels' exact int32
 * bracket (acc - zero * sum) still fits. */
#define RT_QCOEF_FLOAT_MAX_GROUP 65536

/* Fills the derived fields; false if the parameters are not a valid format
 * (bits 4/8, hp, lp, ep in [1, 64], lp a power of two, group a positive
 * multiple of 2 * lp, n, k, m >= 0, coef half or float, a float coef's
 * group at most RT_QCOEF_FLOAT_MAX_GROUP).  Out of line in tensor_traits.c:
 * the size checks and the kernels' shape checks share one copy. */
bool rt_qweight_shape_init_coef(rt_qweight_shape *s, int bits, int hp, int lp, int64_t n,
                                int64_t k, int64_t group, rt_qcoef coef);

/* The binary16-coefficient format (the packer's own quantization). */
static inline bool rt_qweight_shape_init(rt_qweight_shape *s, int bits, int hp, int lp,
                                         int64_t n, int64_t k, int64_t group)
{
    return rt_qweight_shape_init_coef(s, bits, hp, lp, n, k, group, RT_QCOEF_HALF);
}

bool rt_qact_shape_init(rt_qact_shape *s, int ep, int lp, int64_t m, int64_t k, int64_t group);

/* IEEE binary16 <-> binary32, exact for every half (round to nearest even
 * the other way); portable C, no F16C needed. */
static inline float rt_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31u, man = h & 1023u;
    if (!exp) { /* zero or subnormal: man * 2^-24, exact */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    union { uint32_t u; float f; } v = {sign | man << 13 |
                                        (exp == 31 ? 0x7f800000u : (exp + 112u) << 23)};
    return v.f;
}

/* The binary16 stored little-endian at p (scales, mins, Half rows). */
static inline float rt_half_at(const uint8_t *p)
{
    return rt_half_to_float((uint16_t)(p[0] | p[1] << 8));
}

/* The float32 stored little-endian at p (Float32 weight coefficients). */
static inline float rt_float_at(const uint8_t *p)
{
    union { uint32_t u; float f; } v = {(uint32_t)p[0] | (uint32_t)p[1] << 8 |
                                        (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24};
    return v.f;
}

/* q of row h, element j of a block's group: tile t = j / lp; bits 4 pairs
 * tiles 2u (low nibble) and 2u + 1 (high). */
static inline int rt_qweight_q(const uint8_t *block, const rt_qweight_shape *s, int h, size_t j)
{
    size_t lp = (size_t)s->lp, t = j / lp, tile_bytes = (size_t)s->hp * lp;
    size_t in_tile = (size_t)h * lp + j % lp;
    if (s->bits == 8)
        return (int8_t)block[t * tile_bytes + in_tile];
    uint8_t b = block[(t / 2) * tile_bytes + in_tile];
    return t % 2 ? b >> 4 : b & 15;
}

static inline uint16_t rt_float_to_half(float f)
{
    union { float f; uint32_t u; } v = {f};
    uint32_t sign = (v.u >> 16) & 0x8000u, abs = v.u & 0x7fffffffu;
    if (abs >= 0x7f800000u) /* inf, nan */
        return (uint16_t)(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    if (abs >= 0x477ff000u) /* rounds to >= 65520: overflow */
        return (uint16_t)(sign | 0x7c00u);
    if (abs < 0x38800000u) { /* below 2^-14: subnormal half (or zero) */
        if (abs < 0x33000000u) /* below 2^-25: rounds to zero */
            return (uint16_t)sign;
        uint32_t man = (abs & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(abs >> 23); /* 14 .. 24 */
        uint32_t half = man >> shift, rest = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((abs >> 13) - (112u << 10)), rest = abs & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
        half++;
    return (uint16_t)(sign | half);
}

#endif
