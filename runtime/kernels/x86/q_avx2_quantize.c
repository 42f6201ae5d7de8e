/* AVX2 QuantizeRows (rt_kernels.quantize_rows of both AVX2 tables
 * (table_avx2.c); built with -mavx2 -mfma -mf16c): float rows into the activation
 * tiles of q_x86_tiles.h. */
#include "q_x86_tiles.h"

/* ---- quantize_rows --------------------------------------------------------
 * The same rules as the portable kernel (q_generic.h), so the bytes are
 * identical: per (row, group) amax by max (exact in any order; vmaxps(|x|,
 * m) keeps m when |x| is NaN, like the scalar comparison), its inverse
 * from rt_q_row_inverse, then vmulps, vminps/vmaxps clamps (NaN -> 127) and
 * vcvtps2dq, which rounds half to even like lrintf in the default mode. */

static float span_amax(const float *x, int64_t k)
{
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 8 <= k; c += 8)
        m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + c), magnitude), m);
    float lanes[8], amax = 0.0f;
    _mm256_storeu_ps(lanes, m);
    for (int l = 0; l < 8; l++)
        amax = lanes[l] > amax ? lanes[l] : amax;
    for (; c < k; c++) {
        float v = x[c] < 0.0f ? -x[c] : x[c];
        amax = v > amax ? v : amax;
    }
    return amax;
}

/* 8 values of one row as int32 q. */
static inline __m256i quantize8(const float *x, __m256 inv)
{
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), inv);
    v = _mm256_min_ps(v, _mm256_set1_ps(127.0f));
    v = _mm256_max_ps(v, _mm256_set1_ps(-127.0f));
    return _mm256_cvtps_epi32(v);
}

typedef struct {
    const float *x[EP];      /* the rows (at their places in the tile) */
    float inv[EP];           /* the current group's inverses (0: it quantizes to zeros) */
    int32_t *sums[EP];       /* their group sums */
    uint8_t *tiles;          /* the row tile's first activation tile */
    const rt_qact_shape *s;
} quant_rows;

/* Columns [c0, c1) of row e one by one (a row alone, or a group's tail). */
static void quantize_scalar(const quant_rows *R, int e, int64_t g, int64_t c0, int64_t c1)
{
    for (int64_t c = c0; c < c1; c++) {
        int q = R->inv[e] > 0.0f ? rt_q_value(R->x[e][c], R->inv[e]) : 0;
        R->tiles[c / LP * ACT_STEP + e * LP + c % LP] = (uint8_t)(int8_t)q;
        R->sums[e][g] += q;
    }
}

/* Columns [c, c + 8) of all 4 rows: packs (row 0..3) x (2 tiles of 4
 * columns) into the 32 contiguous bytes of activation tiles c/4, c/4 + 1. */
static void quantize_4rows8(const quant_rows *R, int64_t c, __m256i *sum)
{
    __m256i q[EP];
    EACH_ROW
    for (int e = 0; e < EP; e++) {
        q[e] = quantize8(R->x[e] + c, _mm256_set1_ps(R->inv[e]));
        sum[e] = _mm256_add_epi32(sum[e], q[e]);
    }
    /* per 128-bit lane: packs_epi32 -> [r0 c0-3, r1 c0-3] (lane 1: c4-7),
     * packs_epi16 -> [r0, r1, r2, r3] x c0-3: exactly one tile per lane */
    __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]),
                                   _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256((__m256i *)(R->tiles + c / LP * ACT_STEP), b);
}

/* Columns [c, c + 8) of row e alone. */
static void quantize_1row8(const quant_rows *R, int e, int64_t c, __m256i *sum)
{
    __m256i q = quantize8(R->x[e] + c, _mm256_set1_ps(R->inv[e]));
    *sum = _mm256_add_epi32(*sum, q);
    __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q, q), _mm256_packs_epi32(q, q));
    int32_t lo = _mm256_extract_epi32(b, 0), hi = _mm256_extract_epi32(b, 4);
    memcpy(R->tiles + c / LP * ACT_STEP + e * LP, &lo, 4);
    memcpy(R->tiles + (c / LP + 1) * ACT_STEP + e * LP, &hi, 4);
}

/* Group g, columns [c0, c1), of rows [e0, e1) of the tile: all 4 rows
 * together when every one has an inverse, else row by row (a row whose
 * inverse is 0 through the scalar path: it writes zeros). */
static void quantize_group(const quant_rows *R, int e0, int e1, int64_t g, int64_t c0,
                           int64_t c1)
{
    int64_t c8 = c0 + (c1 - c0) / 8 * 8;
    bool together = e1 - e0 == EP;
    for (int e = e0; e < e1; e++)
        together &= R->inv[e] > 0.0f;
    __m256i sum[EP] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                       _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int64_t c = c0; together && c < c8; c += 8)
        quantize_4rows8(R, c, sum);
    for (int e = e0; e < e1; e++) {
        for (int64_t c = c0; !together && R->inv[e] > 0.0f && c < c8; c += 8)
            quantize_1row8(R, e, c, &sum[e]);
        R->sums[e][g] = hsum_epi32(sum[e]);
        quantize_scalar(R, e, g, R->inv[e] > 0.0f ? c8 : c0, c1);
    }
}

/* Rows [e0, e1) of the tile (rows[e] their floats, in the tile's places),
 * group by group: each (row, group)'s scale and inverse, then its q. */
static void quantize_tile_rows(quant_rows *R, float *const scales[EP], int e0, int e1,
                               float scale)
{
    const rt_qact_shape *s = R->s;
    for (int64_t g = 0; g * s->group < s->k; g++) {
        int64_t c0 = g * s->group, c1 = c0 + s->group < s->k ? c0 + s->group : s->k;
        for (int e = e0; e < e1; e++) {
            /* a static scale: q = x * (1 / scale), the clamps do the rest */
            float amax = scale > 0.0f ? 0.0f : span_amax(R->x[e] + c0, c1 - c0);
            R->inv[e] = scale > 0.0f ? 1.0f / scale : rt_q_row_inverse(amax);
            scales[e][g] = scale > 0.0f ? scale : R->inv[e] > 0.0f ? amax / 127.0f : 0.0f;
        }
        quantize_group(R, e0, e1, g, c0, c1);
    }
}

void rt_q_avx2_quantize_rows(const float *x, int64_t x_stride, const rt_qact_shape *s,
                             int64_t r0, int64_t r1, float scale, uint8_t *xq)
{
    if (s->ep != EP || s->lp != LP || s->group % 8) {
        rt_q_generic_quantize_rows(x, x_stride, s, r0, r1, scale, xq);
        return;
    }
    int64_t groups = s->kp / s->group;
    float *scales = (float *)(xq + rt_qact_scales_offset(s));
    int32_t *sums = (int32_t *)(xq + rt_qact_sums_offset(s));
    while (r0 < r1) {
        /* the whole tile, or one row at its place in the tile */
        int64_t et = r0 / EP;
        int e0 = (int)(r0 % EP), e1 = e0 == 0 && r1 - r0 >= EP ? EP : e0 + 1;
        quant_rows R = {{0}, {0}, {0}, xq + (uint64_t)et * (uint64_t)(s->kp * EP), s};
        float *row_scales[EP] = {0};
        for (int e = e0; e < e1; e++) {
            int64_t row = et * EP + e;
            R.x[e] = x + row * x_stride;
            R.sums[e] = sums + row * groups;
            row_scales[e] = scales + row * groups;
        }
        quantize_tile_rows(&R, row_scales, e0, e1, scale);
        r0 += e1 - e0;
    }
}
