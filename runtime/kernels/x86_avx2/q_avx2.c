/* AVX2 quantized micro-kernels (built with -mavx2 -mfma -mf16c; the table
 * is only used after rt_cpu_x86_avx2_ok()).
 *
 * Tile sizes (paper 002 Eqs 2-4).  Eq 4: lp is what one instruction
 * reduces along l per output.  The int8 dot product here is vpmaddubsw
 * (u8 x s8, adjacent pairs summed to s16) then vpmaddwd against ones (s16
 * pairs summed to s32): 4 consecutive l per 32-bit lane, so lp = 4, and a
 * 256-bit register of 8 lanes holds one [hp = 8][lp = 4] weight tile.
 * Eq 3, counted in YMM registers: ep broadcast activations (vpbroadcastd
 * of 4 bytes per row) + hp/8 weight tiles + ep * hp/8 accumulators <= 16.
 * Eq 2 wants ep and hp both large (memory accesses ~ 1/hp + 1/ep per
 * multiply-add).  ep = 4, hp = 8: 4 + 1 + 4 = 9, which leaves room for what
 * the int8 scheme needs besides: the low/high nibble tiles (bits 4) or
 * |w| (bits 8), the 0x0f mask, the ones of vpmaddwd and the int16 partial
 * sums of bits 4 (4 more).  The next steps do not fit: hp = 16 doubles the
 * weight tiles and accumulators (4 + 2 + 8 = 14, plus 8 int16 sums, the
 * nibble registers and constants: > 16, spills), and ep = 8 gives
 * 8 + 1 + 8 = 17 before any temporary.  AVX-512's 32 registers are what let
 * paper 002's Table 2 go to hp = 64 there.
 *
 * Formats: quant_format.h.  The kernels assume hp 8, lp 4, ep 4 (the
 * driver checks the table's sizes) and hand any other shape to the
 * portable kernel. */
#include <immintrin.h>
#include <string.h>

#include "../q_generic.h"
#include "x86_avx2.h"

#define HP 8
#define LP 4
#define EP 4
#define TILE_BYTES (HP * LP) /* one weight tile: 32 bytes, one YMM */
#define ACT_STEP (EP * LP)   /* bytes between a row's consecutive activation tiles */
/* Loops over the EP rows are unrolled so that their per-row vectors are
 * registers, not stack arrays (gcc -O2 keeps the loop otherwise). */
#define EACH_ROW _Pragma("GCC unroll 4")

/* The 4 activation bytes at p in every 32-bit lane (vpbroadcastd). */
static inline __m256i bcast4(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

static inline __m256 load_halves(const uint8_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline int32_t hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* Where activation tile et and row tile ht start, and the strides per group. */
typedef struct {
    const uint8_t *w;       /* row tile ht's block of group 0 */
    const uint8_t *x;       /* activation tile et's first [EP][LP] tile */
    const int32_t *sums;    /* group sums of the tile's first row */
    int64_t groups;         /* kp / group */
    int64_t pairs, tiles;   /* per group: nibble pairs (bits 4), [HP][LP] tiles */
    uint64_t block, data;   /* bytes of a block and of its q values */
    uint64_t x_step;        /* activation bytes per group */
} operands;

static operands operands_of(const rt_qtile_args *a, int64_t et, int64_t ht)
{
    const rt_qweight_shape *ws = &a->ws;
    operands o;
    o.w = a->w + rt_qweight_block_offset(ws, ht, 0);
    o.x = a->xq + (uint64_t)et * (uint64_t)(a->xs.kp * EP);
    o.groups = ws->kp / ws->group;
    o.sums = (const int32_t *)(a->xq + rt_qact_sums_offset(&a->xs)) + et * EP * o.groups;
    o.tiles = ws->group / LP;
    o.pairs = o.tiles / 2;
    o.block = rt_qweight_block_bytes(ws);
    o.data = (uint64_t)ws->group * HP * (uint64_t)ws->bits / 8u;
    o.x_step = (uint64_t)o.tiles * ACT_STEP;
    return o;
}

/* ---- bits 4 ---------------------------------------------------------------
 * Weights are the unsigned operand of vpmaddubsw (q in 0..15), activations
 * the signed one (|x| <= 127): one product pair is at most 2 * 15 * 127 =
 * 3810, so up to 8 vpmaddubsw results can be added in int16 before one
 * vpmaddwd widens them (8 * 3810 = 30480 < 32767).  One "pair" below is the
 * 32 bytes holding tiles 2u (low nibbles) and 2u + 1 (high nibbles): 2
 * vpmaddubsw each, so a chunk of up to 4 pairs (32 elements) is widened
 * once. */
#define W4_CHUNK_PAIRS 4

/* One nibble pair at w by activation row x (its tile 2u): int16 sums. */
static inline __m256i w4_pair_row(const uint8_t *w, const uint8_t *x)
{
    const __m256i nibble = _mm256_set1_epi8(15);
    __m256i raw = _mm256_loadu_si256((const __m256i *)w);
    __m256i lo = _mm256_and_si256(raw, nibble);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble);
    return _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(x)),
                            _mm256_maddubs_epi16(hi, bcast4(x + ACT_STEP)));
}

/* The exact int32 products of one group for activation row x, 8 weight
 * rows: whole chunks of 4 pairs written out (two independent int16 chains,
 * no loop counter), then what is left of the group. */
static inline __m256i w4_group_row(const uint8_t *w, const uint8_t *x, int64_t pairs)
{
    const __m256i ones = _mm256_set1_epi16(1);
    const int64_t step = 2 * ACT_STEP; /* activation bytes per pair */
    __m256i s32 = _mm256_setzero_si256();
    int64_t u = 0;
    for (; u + W4_CHUNK_PAIRS <= pairs; u += W4_CHUNK_PAIRS) {
        const uint8_t *wu = w + u * TILE_BYTES, *xu = x + u * step;
        __m256i a = _mm256_add_epi16(w4_pair_row(wu, xu),
                                     w4_pair_row(wu + TILE_BYTES, xu + step));
        __m256i b = _mm256_add_epi16(w4_pair_row(wu + 2 * TILE_BYTES, xu + 2 * step),
                                     w4_pair_row(wu + 3 * TILE_BYTES, xu + 3 * step));
        s32 = _mm256_add_epi32(s32, _mm256_madd_epi16(_mm256_add_epi16(a, b), ones));
    }
    if (u < pairs) {
        __m256i s16 = _mm256_setzero_si256();
        for (; u < pairs; u++)
            s16 = _mm256_add_epi16(s16, w4_pair_row(w + u * TILE_BYTES, x + u * step));
        s32 = _mm256_add_epi32(s32, _mm256_madd_epi16(s16, ones));
    }
    return s32;
}

/* Bytes ahead of the weight stream that the decode GEMV prefetches (about
 * fifty blocks of g32 W4; a quarter of a 32 KiB L1D).  Measured against a
 * plain read of the same bytes, one core: on a Zen 1/3 machine none
 * 82-90%, 1 KiB 89-98%, 2 KiB and 4 KiB 95-105% (the hardware prefetcher
 * alone keeps too few lines in flight while the kernel computes between
 * loads); on a Zen 5 machine, whose core streams faster, 2 KiB gave 24-30
 * GB/s and 8 KiB 35-37 GB/s (make bench-kernels, interleaved runs), and
 * the whole model's decode +20% on one thread. */
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 8192
#endif

static void prefetch_block(const uint8_t *p, uint64_t bytes)
{
    for (uint64_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)(p + PREFETCH_AHEAD + o), _MM_HINT_T0);
}

/* rows == 1 (decode): one activation row against row tile ht, every group. */
static void w4_gemv(const rt_qtile_args *a, int64_t et, int64_t ht, float *out)
{
    operands o = operands_of(a, et, ht);
    const uint8_t *w = o.w, *x = o.x;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t g = 0; g < o.groups; g++, w += o.block, x += o.x_step) {
        prefetch_block(w, o.block);
        __m256 dot = _mm256_cvtepi32_ps(w4_group_row(w, x, o.pairs));
        acc = _mm256_fmadd_ps(load_halves(w + o.data), dot, acc);
        acc = _mm256_fmadd_ps(load_halves(w + o.data + 2 * HP),
                              _mm256_set1_ps((float)o.sums[g]), acc);
    }
    _mm256_storeu_ps(out, acc);
}

/* rows 2..4: the 4 rows of activation tile et share each unpacked weight
 * tile (padding rows are zero and cost nothing but the multiply-adds). */
static void w4_gemm(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out)
{
    const __m256i nibble = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    operands o = operands_of(a, et, ht);
    const uint8_t *w = o.w, *x = o.x;
    int64_t pairs = o.pairs;
    __m256 acc[EP] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                      _mm256_setzero_ps()};
    for (int64_t g = 0; g < o.groups; g++, w += o.block, x += o.x_step) {
        __m256i s32[EP] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                           _mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int64_t u0 = 0; u0 < pairs; u0 += W4_CHUNK_PAIRS) {
            __m256i s16[EP] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                               _mm256_setzero_si256(), _mm256_setzero_si256()};
            int64_t u1 = u0 + W4_CHUNK_PAIRS < pairs ? u0 + W4_CHUNK_PAIRS : pairs;
            for (int64_t u = u0; u < u1; u++) {
                __m256i raw = _mm256_loadu_si256((const __m256i *)(w + u * TILE_BYTES));
                __m256i lo = _mm256_and_si256(raw, nibble);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble);
                const uint8_t *xu = x + 2 * u * ACT_STEP;
                EACH_ROW
                for (int e = 0; e < EP; e++) {
                    __m256i p0 = _mm256_maddubs_epi16(lo, bcast4(xu + e * LP));
                    __m256i p1 = _mm256_maddubs_epi16(hi, bcast4(xu + ACT_STEP + e * LP));
                    s16[e] = _mm256_add_epi16(s16[e], _mm256_add_epi16(p0, p1));
                }
            }
            EACH_ROW
            for (int e = 0; e < EP; e++)
                s32[e] = _mm256_add_epi32(s32[e], _mm256_madd_epi16(s16[e], ones));
        }
        __m256 scale = load_halves(w + o.data), min = load_halves(w + o.data + 2 * HP);
        EACH_ROW
        for (int e = 0; e < EP; e++) {
            acc[e] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(s32[e]), acc[e]);
            acc[e] = _mm256_fmadd_ps(min, _mm256_set1_ps((float)o.sums[e * o.groups + g]),
                                     acc[e]);
        }
    }
    for (int e = 0; e < rows; e++)
        _mm256_storeu_ps(out + e * HP, acc[e]);
}

/* ---- bits 8 ---------------------------------------------------------------
 * Both operands are signed, so the sign trick: |w| is the unsigned operand
 * and x takes w's sign (vpsignb; 0 where w is 0).  |x|, |w| <= 127, so a
 * product pair is at most 2 * 127 * 127 = 32258 < 32767: no saturation, but
 * no room to add two vpmaddubsw results in int16 either, so each is
 * widened by vpmaddwd at once. */

static inline __m256i w8_tile_row(__m256i w, __m256i abs_w, const uint8_t *x)
{
    __m256i signed_x = _mm256_sign_epi8(bcast4(x), w);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w, signed_x), _mm256_set1_epi16(1));
}

static void w8_gemv(const rt_qtile_args *a, int64_t et, int64_t ht, float *out)
{
    operands o = operands_of(a, et, ht);
    const uint8_t *w = o.w, *x = o.x;
    int64_t tiles = o.tiles;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t g = 0; g < o.groups; g++, w += o.block, x += o.x_step) {
        prefetch_block(w, o.block);
        /* two chains, so consecutive tiles' adds do not wait on each other */
        __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
        int64_t t = 0;
        for (; t + 2 <= tiles; t += 2) {
            __m256i w0 = _mm256_loadu_si256((const __m256i *)(w + t * TILE_BYTES));
            __m256i w1 = _mm256_loadu_si256((const __m256i *)(w + (t + 1) * TILE_BYTES));
            s0 = _mm256_add_epi32(s0, w8_tile_row(w0, _mm256_abs_epi8(w0), x + t * ACT_STEP));
            s1 = _mm256_add_epi32(s1, w8_tile_row(w1, _mm256_abs_epi8(w1),
                                                  x + (t + 1) * ACT_STEP));
        }
        if (t < tiles) {
            __m256i w0 = _mm256_loadu_si256((const __m256i *)(w + t * TILE_BYTES));
            s0 = _mm256_add_epi32(s0, w8_tile_row(w0, _mm256_abs_epi8(w0), x + t * ACT_STEP));
        }
        __m256 dot = _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1));
        acc = _mm256_fmadd_ps(load_halves(w + o.data), dot, acc);
    }
    _mm256_storeu_ps(out, acc);
}

static void w8_gemm(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out)
{
    operands o = operands_of(a, et, ht);
    const uint8_t *w = o.w, *x = o.x;
    __m256 acc[EP] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                      _mm256_setzero_ps()};
    for (int64_t g = 0; g < o.groups; g++, w += o.block, x += o.x_step) {
        __m256i s32[EP] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                           _mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int64_t t = 0; t < o.tiles; t++) {
            __m256i wt = _mm256_loadu_si256((const __m256i *)(w + t * TILE_BYTES));
            __m256i abs_w = _mm256_abs_epi8(wt);
            EACH_ROW
            for (int e = 0; e < EP; e++)
                s32[e] = _mm256_add_epi32(s32[e],
                                          w8_tile_row(wt, abs_w, x + t * ACT_STEP + e * LP));
        }
        __m256 scale = load_halves(w + o.data);
        EACH_ROW
        for (int e = 0; e < EP; e++)
            acc[e] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(s32[e]), acc[e]);
    }
    for (int e = 0; e < rows; e++)
        _mm256_storeu_ps(out + e * HP, acc[e]);
}

void rt_q_avx2_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out)
{
    if (a->ws.hp != HP || a->ws.lp != LP || a->xs.ep != EP || a->xs.lp != LP) {
        rt_q_generic_qtile(a, et, rows, ht, out);
        return;
    }
    if (a->ws.bits == 4) {
        if (rows == 1)
            w4_gemv(a, et, ht, out);
        else
            w4_gemm(a, et, rows, ht, out);
    } else if (rows == 1)
        w8_gemv(a, et, ht, out);
    else
        w8_gemm(a, et, rows, ht, out);
}

/* ---- quantize_rows --------------------------------------------------------
 * The same rules as the portable kernel (q_generic.h), so the bytes are
 * identical: amax by max (exact in any order; vmaxps(|x|, m) keeps m when
 * |x| is NaN, like the scalar comparison), the row's inverse from
 * rt_q_row_inverse, then vmulps, vminps/vmaxps clamps (NaN -> 127) and
 * vcvtps2dq, which rounds half to even like lrintf in the default mode. */

static float row_amax(const float *x, int64_t k)
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
    const float *x[EP];      /* the rows */
    float inv[EP];           /* their inverses (0: the row is all zeros) */
    int32_t *sums[EP];       /* their group sums */
    uint8_t *tiles;          /* the row tile's first activation tile */
    const rt_qact_shape *s;
} quant_rows;

/* Columns [c0, c1) of row e one by one (a row alone, or k's tail). */
static void quantize_scalar(const quant_rows *R, int e, int64_t c0, int64_t c1)
{
    for (int64_t c = c0; c < c1; c++) {
        int q = R->inv[e] > 0.0f ? rt_q_value(R->x[e][c], R->inv[e]) : 0;
        R->tiles[c / LP * ACT_STEP + e * LP + c % LP] = (uint8_t)(int8_t)q;
        R->sums[e][c / R->s->group] += q;
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

/* Row e (or all 4 rows with e < 0) over every group; a row whose inverse
 * is 0 goes through the scalar path (it writes zeros). */
static void quantize_groups(const quant_rows *R, int e)
{
    const rt_qact_shape *s = R->s;
    for (int64_t g = 0; g * s->group < s->k; g++) {
        int64_t c0 = g * s->group, c1 = c0 + s->group < s->k ? c0 + s->group : s->k;
        int64_t c8 = c0 + (c1 - c0) / 8 * 8;
        __m256i sum[EP] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                           _mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int64_t c = c0; c < c8; c += 8) {
            if (e < 0)
                quantize_4rows8(R, c, sum);
            else
                quantize_1row8(R, e, c, &sum[0]);
        }
        for (int r = e < 0 ? 0 : e; r < (e < 0 ? EP : e + 1); r++) {
            R->sums[r][g] = hsum_epi32(sum[e < 0 ? r : 0]);
            quantize_scalar(R, r, c8, c1);
        }
    }
}

void rt_q_avx2_quantize_rows(const float *x, int64_t x_stride, const rt_qact_shape *s,
                             int64_t r0, int64_t r1, uint8_t *xq)
{
    if (s->ep != EP || s->lp != LP || s->group % 8) {
        rt_q_generic_quantize_rows(x, x_stride, s, r0, r1, xq);
        return;
    }
    int64_t groups = s->kp / s->group;
    float *scales = (float *)(xq + rt_qact_scales_offset(s));
    int32_t *sums = (int32_t *)(xq + rt_qact_sums_offset(s));
    while (r0 < r1) {
        int64_t et = r0 / EP;
        bool whole = r0 % EP == 0 && r1 - r0 >= EP;
        int n = whole ? EP : 1;
        quant_rows R = {{0}, {0}, {0}, xq + (uint64_t)et * (uint64_t)(s->kp * EP), s};
        bool any_zero = false;
        for (int e = 0; e < n; e++) {
            int64_t row = r0 + e;
            float amax = row_amax(x + row * x_stride, s->k);
            R.x[e] = x + row * x_stride;
            R.inv[e] = rt_q_row_inverse(amax);
            R.sums[e] = sums + row * groups;
            scales[row] = R.inv[e] > 0.0f ? amax / 127.0f : 0.0f;
            any_zero |= R.inv[e] == 0.0f;
            for (int64_t g = 0; g < groups; g++)
                R.sums[e][g] = 0;
        }
        if (whole && !any_zero) {
            quantize_groups(&R, -1);
        } else {
            /* one row at a time, at its place in the tile */
            for (int e = 0; e < n; e++) {
                quant_rows one = R;
                int row_in_tile = (int)((r0 + e) % EP);
                one.x[row_in_tile] = R.x[e];
                one.inv[row_in_tile] = R.inv[e];
                one.sums[row_in_tile] = R.sums[e];
                if (R.inv[e] > 0.0f)
                    quantize_groups(&one, row_in_tile);
                else
                    quantize_scalar(&one, row_in_tile, 0, s->k);
            }
        }
        r0 += n;
    }
}
