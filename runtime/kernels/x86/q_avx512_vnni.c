/* AVX-512 VNNI quantized micro-kernels (built with -mavx2 -mfma -mf16c
 * -mavx512f -mavx512bw -mavx512vl -mavx512vnni; the table is only used
 * after rt_cpu_x86_avx512_vnni_ok()) for the plans of target "avx2": the
 * same tiles (q_x86_tiles.h) and drivers (q_x86_qtile.h), two [HP][LP]
 * tiles per ZMM register and vpdpbusd for the int8 dot product (4 u8 x s8
 * products per 32-bit lane added straight into int32, exact, no int16
 * step).
 *
 * Why: on a core that streams faster than the AVX2 GEMV computes (a Zen 5
 * core reads ~30 GB/s; the AVX2 GEMV of g32 W4 runs at ~43 GB/s from L2,
 * bound by the ~50 instructions it issues per 160-byte block), fewer
 * instructions per weight byte is what lets decode reach the bandwidth.
 * One nibble pair (tiles 2u and 2u + 1, 32 bytes) becomes one ZMM of 64
 * u8 weights in 3 instructions (broadcast load, vpsrlvw by 0 | 4, vpand)
 * against 2 YMM in 3 under AVX2, and one vpdpbusd replaces 2 vpmaddubsw,
 * their int16 adds and the share of a vpmaddwd.
 *
 * Lanes: lane i < 8 of a ZMM holds row i of the first tile, lane 8 + i row
 * i of the second; the activation ZMM repeats the first tile's 4 bytes in
 * lanes 0-7 and the second's in 8-15 (one vpermd of the 32 activation
 * bytes of both tiles), and the two halves are added at the group's end.
 *
 * Bits 8 weights are signed and AVX-512 has no vpsignb, so the kernels
 * multiply the unsigned w + 128 (w ^ 0x80: 0 for a Float32-coefficient
 * block's -128, exact like every other w) and subtract 128 * sum(x) per
 * group: the activation tiles carry that sum.  The int32 arithmetic wraps,
 * and the true dot product fits in int32 (group * 127 * 127 < 2^31), so
 * the wrapped result is exact.
 *
 * vpdpbusd adds into its accumulator, a chain of ~5 cycles, so every row
 * keeps two accumulators (even and odd pairs) to have two in flight. */
#include "q_x86_tiles.h"

#define DOT(acc, u, s) _mm512_dpbusd_epi32(acc, u, s)

/* The 64 u8 weights of nibble pair w: [low nibbles | high nibbles]. */
static inline __m512i w4_pair(const uint8_t *w)
{
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    __m512i both = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)w));
    return _mm512_and_si512(_mm512_srlv_epi16(both, shift), _mm512_set1_epi8(15));
}

/* Tiles t and t + 1 of bits 8 at w as u8 w + 128. */
static inline __m512i w8_pair(const uint8_t *w)
{
    return _mm512_xor_si512(_mm512_loadu_si512(w), _mm512_set1_epi8((char)0x80));
}

/* vpermd indices for activation row e: dword e (first tile) in lanes 0-7,
 * dword 4 + e (second tile) in 8-15. */
static inline __m512i row_index(int e)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(e)),
                              _mm256_set1_epi32(4 + e), 1);
}

/* The 32 activation bytes of two consecutive tiles ([EP][LP] each) at p,
 * spread for row `idx`. */
static inline __m512i act_pair(__m256i both_tiles, __m512i idx)
{
    return _mm512_permutexvar_epi32(idx, _mm512_castsi256_si512(both_tiles));
}

static inline __m256i load32(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* Row i's int32: lane i + lane 8 + i. */
static inline __m256i halves_sum(__m512i s)
{
    return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}

/* 128 * sum, in the wrapping int32 arithmetic of the lanes. */
static inline int32_t offset_of(int32_t sum)
{
    return (int32_t)((uint32_t)sum << 7);
}

/* ---- bits 4: weights (0..15) are the unsigned operand ------------------- */

static inline __m256i w4_group_row(const uint8_t *w, const uint8_t *x, int64_t pairs)
{
    const __m512i idx = row_index(0);
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    int64_t u = 0;
    for (; u + 2 <= pairs; u += 2) {
        s0 = DOT(s0, w4_pair(w + u * TILE_BYTES), act_pair(load32(x + 2 * u * ACT_STEP), idx));
        s1 = DOT(s1, w4_pair(w + (u + 1) * TILE_BYTES),
                 act_pair(load32(x + 2 * (u + 1) * ACT_STEP), idx));
    }
    if (u < pairs)
        s0 = DOT(s0, w4_pair(w + u * TILE_BYTES), act_pair(load32(x + 2 * u * ACT_STEP), idx));
    return halves_sum(_mm512_add_epi32(s0, s1));
}

static inline void w4_group_rows(const uint8_t *w, const uint8_t *x, int64_t pairs,
                                 __m256i s32[EP])
{
    const __m512i idx[EP] = {row_index(0), row_index(1), row_index(2), row_index(3)};
    __m512i even[EP], odd[EP];
    EACH_ROW
    for (int e = 0; e < EP; e++)
        even[e] = odd[e] = _mm512_setzero_si512();
    int64_t u = 0;
    for (; u + 2 <= pairs; u += 2) {
        __m512i w0 = w4_pair(w + u * TILE_BYTES), w1 = w4_pair(w + (u + 1) * TILE_BYTES);
        __m256i x0 = load32(x + 2 * u * ACT_STEP), x1 = load32(x + 2 * (u + 1) * ACT_STEP);
        EACH_ROW
        for (int e = 0; e < EP; e++) {
            even[e] = DOT(even[e], w0, act_pair(x0, idx[e]));
            odd[e] = DOT(odd[e], w1, act_pair(x1, idx[e]));
        }
    }
    if (u < pairs) {
        __m512i w0 = w4_pair(w + u * TILE_BYTES);
        __m256i x0 = load32(x + 2 * u * ACT_STEP);
        EACH_ROW
        for (int e = 0; e < EP; e++)
            even[e] = DOT(even[e], w0, act_pair(x0, idx[e]));
    }
    EACH_ROW
    for (int e = 0; e < EP; e++)
        s32[e] = _mm256_add_epi32(s32[e], halves_sum(_mm512_add_epi32(even[e], odd[e])));
}

/* ---- bits 8: u8 w + 128, then 128 * sum(x) off -------------------------- */

/* tiles is even: a group is a multiple of 2 * LP elements. */
static inline __m256i w8_group_row(const uint8_t *w, const uint8_t *x, int64_t tiles,
                                   int32_t sum)
{
    const __m512i idx = row_index(0);
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    int64_t t = 0;
    for (; t + 4 <= tiles; t += 4) {
        s0 = DOT(s0, w8_pair(w + t * TILE_BYTES), act_pair(load32(x + t * ACT_STEP), idx));
        s1 = DOT(s1, w8_pair(w + (t + 2) * TILE_BYTES),
                 act_pair(load32(x + (t + 2) * ACT_STEP), idx));
    }
    if (t < tiles)
        s0 = DOT(s0, w8_pair(w + t * TILE_BYTES), act_pair(load32(x + t * ACT_STEP), idx));
    return _mm256_sub_epi32(halves_sum(_mm512_add_epi32(s0, s1)),
                            _mm256_set1_epi32(offset_of(sum)));
}

static inline void w8_group_rows(const uint8_t *w, const uint8_t *x, int64_t tiles,
                                 const int32_t *sums, int64_t sums_stride, __m256i s32[EP])
{
    const __m512i idx[EP] = {row_index(0), row_index(1), row_index(2), row_index(3)};
    __m512i even[EP], odd[EP];
    EACH_ROW
    for (int e = 0; e < EP; e++)
        even[e] = odd[e] = _mm512_setzero_si512();
    int64_t t = 0;
    for (; t + 4 <= tiles; t += 4) {
        __m512i w0 = w8_pair(w + t * TILE_BYTES), w1 = w8_pair(w + (t + 2) * TILE_BYTES);
        __m256i x0 = load32(x + t * ACT_STEP), x1 = load32(x + (t + 2) * ACT_STEP);
        EACH_ROW
        for (int e = 0; e < EP; e++) {
            even[e] = DOT(even[e], w0, act_pair(x0, idx[e]));
            odd[e] = DOT(odd[e], w1, act_pair(x1, idx[e]));
        }
    }
    if (t < tiles) {
        __m512i w0 = w8_pair(w + t * TILE_BYTES);
        __m256i x0 = load32(x + t * ACT_STEP);
        EACH_ROW
        for (int e = 0; e < EP; e++)
            even[e] = DOT(even[e], w0, act_pair(x0, idx[e]));
    }
    EACH_ROW
    for (int e = 0; e < EP; e++) {
        __m256i dot = halves_sum(_mm512_add_epi32(even[e], odd[e]));
        dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(offset_of(sums[e * sums_stride])));
        s32[e] = _mm256_add_epi32(s32[e], dot);
    }
}

#include "q_x86_qtile.h"

void rt_q_avx512_vnni_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht,
                            float *out)
{
    qtile_x86(a, et, rows, ht, out);
}

/* ---- rt_kernels.qtile_block: 8 or 16 activation rows by 16 W rows -------
 *
 * Activation tiles et .. et + tiles - 1 (rows r = 4i + e) by W row tiles
 * ht, ht + 1: lane h < 8 of a row's ZMM is output h of tile ht, lane 8 + h
 * output h of tile ht + 1.  One vpbroadcastd of a row's 4 activation bytes
 * then feeds 16 outputs with no permute and no halves to add, and each
 * 64-byte weight register serves every row of the block: ROWS vpdpbusd per
 * weight load instead of qtile's 4 vpdpbusd and 4 vpermd per pair.
 *
 * Counted per group of bits 4 (objdump of the 16-row loop): 32 vpdpbusd per
 * nibble pair against 4 instructions that unpack it (vinserti64x4, 2 vpandd,
 * vpsrlw), and per group end 2 x ROWS float steps (vcvtdq2ps, vmulps, the
 * FMAs of the min and of the activation scale: 4 per row) plus ~6 for the
 * coefficients.  On the two ports vpdpbusd issues to, 16 rows at g64 are
 * 256 vpdpbusd in 256 + 32 + 64 + 6 slots: at most 71 % of the peak, where
 * 8 rows are bound at 62 % (128 in 206: the nibbles unpacked for half as
 * many rows, and 8 vpaddd that join the even and odd chains).
 *
 * Chains: vpdpbusd adds into its accumulator (~5 cycles), so at 2 a cycle
 * ~10 must be in flight.  16 rows are 16 chains; 8 rows keep two per row
 * (low and high nibbles) and add them at the group's end.  Registers (Paper
 * 002 Eq 3 with AVX-512's 32): 16 int32 accumulators + 2 weight registers +
 * the nibble mask and the coefficients; the 16 rows' float sums live in
 * memory (a load and a store per row and group, off the vector ports).
 *
 * The float steps per group are qtile's (group_floats: scale x dot, an FMA
 * of min x activation sum, an FMA of the activation scale), lane by lane,
 * so the outputs are its bits. */
#define MAX_ROWS (4 * EP)
#define EACH_ROW16 _Pragma("GCC unroll 16")

/* 32 bytes at a in lanes 0-7, 32 at b in lanes 8-15.  The first half by
 * vbroadcasti64x4 (EVEX: straight into any of the 32 registers; a VEX
 * vmovdqu needs one of the low 16, which the 16-row kernel's accumulators
 * hold, and gcc copied the loaded half and an accumulator through spare
 * registers on every step). */
static inline __m512i join32(const uint8_t *a, const uint8_t *b)
{
    return _mm512_inserti64x4(_mm512_broadcast_i64x4(load32(a)), load32(b), 1);
}

/* 8 float16 at a and 8 at b as 16 floats. */
static inline __m512 join_halves(const uint8_t *a, const uint8_t *b)
{
    __m128i lo = _mm_loadu_si128((const __m128i *)a), hi = _mm_loadu_si128((const __m128i *)b);
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

/* 8 floats at a and 8 at b (AVX512F inserts 256 bits as 4 doubles). */
static inline __m512 join_floats(const uint8_t *a, const uint8_t *b)
{
    __m256d lo = _mm256_castps_pd(_mm256_loadu_ps((const float *)a));
    __m256d hi = _mm256_castps_pd(_mm256_loadu_ps((const float *)b));
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(lo), hi, 1));
}

/* acc + the products of u8 w by the 4 s8 activation bytes at p, in every
 * lane: vpdpbusd with the bytes as an embedded broadcast ({1to16}).  Not
 * the intrinsic: gcc 12 neither folds a _mm512_set1_epi32 of memory into
 * the instruction nor keeps the accumulator in place (it copied each of
 * the 8 accumulators to a spare register and back every step). */
static inline __m512i dot_bcast(__m512i acc, __m512i w, const uint8_t *p)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0"
            : "+v"(acc)
            : "v"(w), "m"(*(const uint8_t(*)[4])(const void *)p));
    return acc;
}

/* A zero register by the zeroing idiom, which the core resolves at rename
 * with no execution port.  Asm, because gcc zeroes one register and copies
 * it to each of the 16 accumulators with vmovdqa64, 15 instructions per
 * group on the ports vpdpbusd needs. */
static inline __m512i zeroed(void)
{
    __m512i z;
    __asm__ volatile("vpxord %0, %0, %0" : "=v"(z));
    return z;
}

/* Row r's 4 bytes of activation tile step t (x[i]: tile et + i). */
static inline const uint8_t *act_row(const uint8_t *const x[4], int r, int64_t t)
{
    return x[r / EP] + t * ACT_STEP + (r % EP) * LP;
}

/* One group, bits 4: `pairs` nibble pairs of both row tiles (wa, wb). */
INLINE void w4_group_block(const uint8_t *wa, const uint8_t *wb, const uint8_t *const x[4],
                           int64_t pairs, int rows, __m512i s32[MAX_ROWS])
{
    const __m512i nibble = _mm512_set1_epi8(15);
    __m512i odd[MAX_ROWS];
    EACH_ROW16
    for (int r = 0; r < rows; r++) {
        s32[r] = zeroed();
        if (rows < MAX_ROWS)
            odd[r] = zeroed();
    }
    /* do/while, pairs >= 1 (rt_qdepth_ok): around a loop that might not
     * run, gcc copied every accumulator into other registers and back */
    int64_t u = 0;
    do {
        __m512i raw = join32(wa + u * TILE_BYTES, wb + u * TILE_BYTES);
        __m512i lo = _mm512_and_si512(raw, nibble);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble);
        EACH_ROW16
        for (int r = 0; r < rows; r++)
            s32[r] = dot_bcast(s32[r], lo, act_row(x, r, 2 * u));
        EACH_ROW16
        for (int r = 0; r < rows; r++) {
            if (rows == MAX_ROWS) /* 16 chains in flight without a second one */
                s32[r] = dot_bcast(s32[r], hi, act_row(x, r, 2 * u + 1));
            else
                odd[r] = dot_bcast(odd[r], hi, act_row(x, r, 2 * u + 1));
        }
    } while (++u < pairs);
    if (rows < MAX_ROWS) {
        EACH_ROW16
        for (int r = 0; r < rows; r++)
            s32[r] = _mm512_add_epi32(s32[r], odd[r]);
    }
}

/* One group, bits 8 (tiles even): u8 w + 128, then 128 * sum off
 * (start[r]: -128 * the group's activation sum of row r). */
INLINE void w8_group_block(const uint8_t *wa, const uint8_t *wb, const uint8_t *const x[4],
                           int64_t tiles, const int32_t *start, int64_t stride, int rows,
                           __m512i s32[MAX_ROWS])
{
    EACH_ROW16
    for (int r = 0; r < rows; r++)
        s32[r] = _mm512_set1_epi32(start[r * stride]);
    int64_t t = 0;
    do { /* tiles >= 2 (rt_qdepth_ok); do/while as above */
        __m512i w = _mm512_xor_si512(join32(wa + t * TILE_BYTES, wb + t * TILE_BYTES),
                                     _mm512_set1_epi8((char)0x80));
        EACH_ROW16
        for (int r = 0; r < rows; r++)
            s32[r] = dot_bcast(s32[r], w, act_row(x, r, t));
    } while (++t < tiles);
}

/* Per chunk of SUM_CHUNK groups, the rows' activation scales, and their
 * sums in the form the group steps use them: bits 4 as floats (vcvtdq2ps
 * rounds as the (float) cast does) for the min term's FMA, bits 8 as -128
 * * sum (the wrapping int32 of offset_of) to start the accumulators from;
 * one vector load per row and chunk instead of scalar ones per row and
 * group. */
#define SUM_CHUNK 16

typedef struct {
    union {
        float f[MAX_ROWS][SUM_CHUNK];
        int32_t start[MAX_ROWS][SUM_CHUNK];
    } sum;
    int32_t raw[MAX_ROWS][SUM_CHUNK]; /* the sums as they are (Float32 coefficients) */
    float sx[MAX_ROWS][SUM_CHUNK];
} chunk_sums;

INLINE void convert_sums(const operands *o, int64_t g0, int64_t n, int rows, int bits,
                         rt_qcoef coef, chunk_sums *c)
{
    __mmask16 live = (__mmask16)((1u << n) - 1u);
    EACH_ROW16
    for (int r = 0; r < rows; r++) {
        __m512i v = _mm512_maskz_loadu_epi32(live, o->sums + r * o->groups + g0);
        _mm512_storeu_ps(c->sx[r], _mm512_maskz_loadu_ps(live, o->sx + r * o->groups + g0));
        if (coef == RT_QCOEF_FLOAT)
            _mm512_storeu_si512(c->raw[r], v);
        if (bits == 4)
            _mm512_storeu_ps(c->sum.f[r], _mm512_cvtepi32_ps(v));
        else
            _mm512_storeu_si512(c->sum.start[r], _mm512_sub_epi32(_mm512_setzero_si512(),
                                                                  _mm512_slli_epi32(v, 7)));
    }
}

/* Row r's 16 outputs into its two [EP][HP] tiles of out. */
static inline void store_row16(float *out, int r, __m512 v)
{
    float *tile = out + 2 * (r / EP) * (EP * HP) + (r % EP) * HP;
    _mm256_storeu_ps(tile, _mm512_castps512_ps256(v));
    __m256d high = _mm512_extractf64x4_pd(_mm512_castps_pd(v), 1);
    _mm256_storeu_ps(tile + EP * HP, _mm256_castpd_ps(high));
}

/* The coefficients of group g for both row tiles, as 16 lanes. */
typedef struct {
    __m512 scale, min;
    __m512i zero;
} group_coefs;

INLINE group_coefs coefs_of(const uint8_t *wa, const uint8_t *wb, const operands *o, int bits,
                            rt_qcoef coef)
{
    bool half = coef == RT_QCOEF_HALF;
    group_coefs k;
    k.scale = half ? join_halves(wa + o->data, wb + o->data) : join_floats(wa + o->data, wb + o->data);
    k.min = half && bits == 4 ? join_halves(wa + o->data + 2 * HP, wb + o->data + 2 * HP)
                              : _mm512_setzero_ps();
    k.zero = half ? _mm512_setzero_si512()
                  : _mm512_cvttps_epi32(join_floats(wa + o->data + 4 * HP, wb + o->data + 4 * HP));
    return k;
}

/* group_floats' steps (q_x86_qtile.h), lane by lane, for every row. */
INLINE void block_floats(__m512 acc[MAX_ROWS], __m512i s32[MAX_ROWS], const group_coefs *k,
                         const chunk_sums *c, int64_t i, int rows, int bits, rt_qcoef coef)
{
    EACH_ROW16
    for (int r = 0; r < rows; r++) {
        if (coef == RT_QCOEF_FLOAT)
            s32[r] = _mm512_sub_epi32(s32[r], _mm512_mullo_epi32(
                                                  k->zero, _mm512_set1_epi32(c->raw[r][i])));
        __m512 t = _mm512_mul_ps(k->scale, _mm512_cvtepi32_ps(s32[r]));
        if (coef == RT_QCOEF_HALF && bits == 4)
            t = _mm512_fmadd_ps(k->min, _mm512_set1_ps(c->sum.f[r][i]), t);
        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(c->sx[r][i]), t, acc[r]);
    }
}

INLINE void gemm_block(const rt_qtile_args *a, int64_t et, int64_t ht, float *out, int tiles,
                       int bits, rt_qcoef coef)
{
    const int rows = tiles * EP;
    operands o = operands_of(a, et, ht);
    const uint8_t *wa = o.w, *wb = a->w + rt_qweight_block_offset(&a->ws, ht + 1, 0);
    uint64_t tile_bytes = (uint64_t)a->xs.kp * EP;
    const uint8_t *x[4] = {o.x, o.x + tile_bytes, o.x + 2 * tile_bytes, o.x + 3 * tile_bytes};
    __m512 acc[MAX_ROWS];
    EACH_ROW16
    for (int r = 0; r < rows; r++)
        acc[r] = _mm512_setzero_ps();
    chunk_sums c;
    for (int64_t g = 0; g < o.groups; g++) {
        int64_t i = g % SUM_CHUNK;
        if (!i) /* o.sums, o.sx: row r, group g at [r * groups + g] */
            convert_sums(&o, g, o.groups - g < SUM_CHUNK ? o.groups - g : SUM_CHUNK, rows, bits,
                         coef, &c);
        __m512i s32[MAX_ROWS];
        if (bits == 4)
            w4_group_block(wa, wb, x, o.pairs, rows, s32);
        else
            w8_group_block(wa, wb, x, o.tiles, &c.sum.start[0][i], SUM_CHUNK, rows, s32);
        group_coefs k = coefs_of(wa, wb, &o, bits, coef);
        block_floats(acc, s32, &k, &c, i, rows, bits, coef);
        wa += o.block;
        wb += o.block;
        for (int t = 0; t < tiles; t++)
            x[t] += o.x_step;
    }
    EACH_ROW16
    for (int r = 0; r < rows; r++)
        store_row16(out, r, acc[r]);
}

/* Both block sizes for a's bits and coefficient type, each a constant. */
INLINE void gemm_tiles(const rt_qtile_args *a, int64_t et, int64_t ht, float *out, int tiles,
                       int bits, rt_qcoef coef)
{
    if (tiles == 4)
        gemm_block(a, et, ht, out, 4, bits, coef);
    else
        gemm_block(a, et, ht, out, 2, bits, coef);
}

void rt_q_avx512_vnni_qtile_block(const rt_qtile_args *a, int64_t et, int tiles, int64_t ht,
                                  float *out)
{
    if (!x86_tiles(a)) {
        int ep = a->xs.ep, tile = ep * a->ws.hp;
        for (int i = 0; i < tiles; i++)
            for (int j = 0; j < 2; j++)
                rt_q_generic_qtile(a, et + i, ep, ht + j, out + (2 * i + j) * tile);
        return;
    }
    BY_BITS_COEF(a, gemm_tiles, a, et, ht, out, tiles);
}
