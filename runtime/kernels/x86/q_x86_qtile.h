/* Internal: the drivers of the x86 quantized micro-kernels, shared by the
 * AVX2 file (q_avx2.c: vpmaddubsw + vpmaddwd), the AVX-512 one
 * (q_avx512_vnni.c: vpdpbusd on ZMM registers) and the AVX-VNNI one
 * (q_avxvnni.c: vpdpbusd on YMM).  They differ only in how one group's exact
 * int32 dot products are formed, so each includes this header after
 * defining those four primitives:
 *
 *   __m256i w4_group_row(const uint8_t *w, const uint8_t *x, int64_t pairs)
 *       bits 4: the int32 products of one group (`pairs` nibble pairs of
 *       tiles) of the 8 weight rows at w by the activation row x;
 *   void w4_group_rows(const uint8_t *w, const uint8_t *x, int64_t pairs,
 *                      __m256i s32[EP])
 *       the same for the EP rows of the activation tile at x, added to s32;
 *   __m256i w8_group_row(const uint8_t *w, const uint8_t *x, int64_t tiles,
 *                        int32_t sum)
 *   void w8_group_rows(const uint8_t *w, const uint8_t *x, int64_t tiles,
 *                      const int32_t *sums, int64_t sums_stride, __m256i s32[EP])
 *       bits 8, `tiles` [HP][LP] tiles per group; sum (row e: sums[e *
 *       sums_stride]) is the group's sum of activation q, for kernels that
 *       multiply w + 128 and subtract 128 * sum.  Exact for every int8 w,
 *       -128 included (a Float32-coefficient block's, quant_format.h).
 *
 * The products are exact, so the files give the same int32 values, and
 * the float steps here are the same instructions in the same order: the
 * tables' outputs are bitwise equal (tests/unit/test_rt_quant.c). */
#ifndef LLMC_RT_Q_X86_QTILE_H
#define LLMC_RT_Q_X86_QTILE_H

#include "q_x86_tiles.h"

/* Where activation tile et and row tile ht start, and the strides per group. */
typedef struct {
    const uint8_t *w;       /* row tile ht's block of group 0 */
    const uint8_t *x;       /* activation tile et's first [EP][LP] tile */
    const int32_t *sums;    /* group sums of the tile's first row */
    const float *sx;        /* group scales of the tile's first row (sums' layout) */
    int64_t groups;         /* kp / group */
    int64_t pairs, tiles;   /* per group: nibble pairs (bits 4), [HP][LP] tiles */
    uint64_t block, data;   /* bytes of a block and of its q values */
    uint64_t x_step;        /* activation bytes per group */
} operands;

static inline operands operands_of(const rt_qtile_args *a, int64_t et, int64_t ht)
{
    const rt_qweight_shape *ws = &a->ws;
    operands o;
    o.w = a->w + rt_qweight_block_offset(ws, ht, 0);
    o.x = a->xq + (uint64_t)et * (uint64_t)(a->xs.kp * EP);
    o.groups = ws->kp / ws->group;
    o.sums = (const int32_t *)(a->xq + rt_qact_sums_offset(&a->xs)) + et * EP * o.groups;
    o.sx = (const float *)(a->xq + rt_qact_scales_offset(&a->xs)) + et * EP * o.groups;
    o.tiles = ws->group / LP;
    o.pairs = o.tiles / 2;
    o.block = rt_qweight_block_bytes(ws);
    o.data = rt_qweight_data_bytes(ws); /* hp is HP (x86_tiles) */
    o.x_step = (uint64_t)o.tiles * ACT_STEP;
    return o;
}

/* The lines of a weight block `ahead` bytes past p (a->prefetch: none when
 * 0).  Measured against a plain read of the same bytes, one core: on a Zen
 * 1/3 machine no prefetch 82-90%, 1 KiB ahead 89-98%, 2 KiB and 4 KiB
 * 95-105% (the hardware prefetcher alone keeps too few lines in flight
 * while the kernel computes between loads); how far ahead is best differs
 * by core (rt_gemv_prefetch_default, `llmc tune`).  Always inlined: gcc
 * 12's IPA finds a function whose only statements are prefetches free of
 * side effects and deletes its calls (an out-of-line prefetch_block left
 * the GEMV without a single prefetch instruction). */
INLINE void prefetch_block(const uint8_t *p, uint32_t ahead, uint64_t bytes)
{
    if (!ahead)
        return;
    for (uint64_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)(p + ahead + o), _MM_HINT_T0);
}

/* acc + one row's group term (quant_format.h) for the row tile whose block
 * is at w: c = scale * dot (+ min * sum: Float16 bits 4), or scale * (dot -
 * zero * sum) (Float32, the bracket in int32: exact), then sx * c.  The
 * same instructions in the same order in every x86 table, so their outputs
 * are bitwise equal (coef a constant at each call site). */
INLINE __m256 group_floats(__m256 acc, const uint8_t *w, const operands *o, __m256i dot,
                           int32_t sum, float sx, int bits, rt_qcoef coef)
{
    __m256 c;
    if (coef == RT_QCOEF_FLOAT) {
        __m256i zero = _mm256_cvttps_epi32(_mm256_loadu_ps((const float *)(w + o->data + 4 * HP)));
        dot = _mm256_sub_epi32(dot, _mm256_mullo_epi32(zero, _mm256_set1_epi32(sum)));
        c = _mm256_mul_ps(_mm256_loadu_ps((const float *)(w + o->data)), _mm256_cvtepi32_ps(dot));
    } else {
        c = _mm256_mul_ps(load_halves(w + o->data), _mm256_cvtepi32_ps(dot));
        if (bits == 4)
            c = _mm256_fmadd_ps(load_halves(w + o->data + 2 * HP), _mm256_set1_ps((float)sum), c);
    }
    return _mm256_fmadd_ps(_mm256_set1_ps(sx), c, acc);
}

/* group_floats for the EP rows of an activation tile: acc[e] += row e's
 * term of group g, s32[e] its int32 products with the row tile at w. */
INLINE void rows_floats(__m256 acc[EP], const uint8_t *w, const operands *o,
                        const __m256i s32[EP], int64_t g, int bits, rt_qcoef coef)
{
    EACH_ROW
    for (int e = 0; e < EP; e++)
        acc[e] = group_floats(acc[e], w, o, s32[e], o->sums[e * o->groups + g],
                              o->sx[e * o->groups + g], bits, coef);
}

/* rows == 1 (decode): one activation row against row tile ht, every group
 * (bits a constant: each call site compiles to its own loop). */
INLINE void gemv(const rt_qtile_args *a, int64_t et, int64_t ht, float *out, int bits,
                 rt_qcoef coef)
{
    operands o = operands_of(a, et, ht);
    const uint8_t *w = o.w, *x = o.x;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t g = 0; g < o.groups; g++, w += o.block, x += o.x_step) {
        prefetch_block(w, a->prefetch, o.block);
        __m256i dot = bits == 4 ? w4_group_row(w, x, o.pairs)
                                : w8_group_row(w, x, o.tiles, o.sums[g]);
        acc = group_floats(acc, w, &o, dot, o.sums[g], o.sx[g], bits, coef);
    }
    _mm256_storeu_ps(out, acc);
}

/* rows 2..4: the 4 rows of activation tile et share each unpacked weight
 * tile (padding rows are zero and cost nothing but the multiply-adds). */
INLINE void gemm(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out,
                 int bits, rt_qcoef coef)
{
    operands o = operands_of(a, et, ht);
    const uint8_t *w = o.w, *x = o.x;
    __m256 acc[EP] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                      _mm256_setzero_ps()};
    for (int64_t g = 0; g < o.groups; g++, w += o.block, x += o.x_step) {
        __m256i s32[EP] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                           _mm256_setzero_si256(), _mm256_setzero_si256()};
        if (bits == 4)
            w4_group_rows(w, x, o.pairs, s32);
        else
            w8_group_rows(w, x, o.tiles, o.sums + g, o.groups, s32);
        rows_floats(acc, w, &o, s32, g, bits, coef);
    }
    for (int e = 0; e < rows; e++)
        _mm256_storeu_ps(out + e * HP, acc[e]);
}

/* The tile sizes these kernels are written for (any other shape goes to
 * the portable kernel). */
static inline bool x86_tiles(const rt_qtile_args *a)
{
    return a->ws.hp == HP && a->ws.lp == LP && a->xs.ep == EP && a->xs.lp == LP;
}

/* GEMV for one row, GEMM for more (bits and coef constants: each call site
 * compiles to loops of its own). */
INLINE void qtile_rows(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out,
                       int bits, rt_qcoef coef)
{
    if (rows == 1)
        gemv(a, et, ht, out, bits, coef);
    else
        gemm(a, et, rows, ht, out, bits, coef);
}

/* f(args..., bits, coef) for a's bits and coefficient type, each pair a
 * constant: every call site compiles to loops of its own. */
#define BY_BITS_COEF(a, f, ...)                                                              \
    do {                                                                                     \
        bool half_ = (a)->ws.coef == RT_QCOEF_HALF;                                          \
        if ((a)->ws.bits == 4 && half_)                                                      \
            f(__VA_ARGS__, 4, RT_QCOEF_HALF);                                                \
        else if ((a)->ws.bits == 4)                                                          \
            f(__VA_ARGS__, 4, RT_QCOEF_FLOAT);                                               \
        else if (half_)                                                                      \
            f(__VA_ARGS__, 8, RT_QCOEF_HALF);                                                \
        else                                                                                 \
            f(__VA_ARGS__, 8, RT_QCOEF_FLOAT);                                               \
    } while (0)

/* rt_kernels.qtile over these kernels: GEMV for one row, GEMM for more;
 * other tile sizes go to the portable kernel. */
static inline void qtile_x86(const rt_qtile_args *a, int64_t et, int rows, int64_t ht,
                             float *out)
{
    if (!x86_tiles(a)) {
        rt_q_generic_qtile(a, et, rows, ht, out);
        return;
    }
    BY_BITS_COEF(a, qtile_rows, a, et, rows, ht, out);
}

#ifdef Q_X86_PAIR_PRIMITIVES
/* Two W row tiles at once, for files that also define the pair primitives:
 *
 *   void w4_group_row_pair(const uint8_t *wa, const uint8_t *wb,
 *                          const uint8_t *x, int64_t pairs, __m256i *sa, __m256i *sb)
 *   void w8_group_row_pair(const uint8_t *wa, const uint8_t *wb,
 *                          const uint8_t *x, int64_t tiles, int32_t sum,
 *                          __m256i *sa, __m256i *sb)
 *       one activation row by the row tiles at wa and wb, added to *sa, *sb;
 *   void w4_group_rows_pair(const uint8_t *wa, const uint8_t *wb,
 *                           const uint8_t *x, int64_t pairs, __m256i sa[EP], __m256i sb[EP])
 *       the EP rows of the activation tile at x (bits 4).
 *
 * Each tile's outputs have the bits qtile gives it: the same int32
 * products, then group_floats in the same order. */

/* gemv of row tiles ht and ht + 1 at once (bits and coef constants),
 * prefetching as rt_pair_prefetch says. */
INLINE void gemv_pair(const rt_qtile_args *a, int64_t et, int64_t ht, float *out, int bits,
                      rt_qcoef coef)
{
    operands o = operands_of(a, et, ht);
    uint64_t tile = (uint64_t)o.groups * o.block; /* bytes of a row tile */
    const uint8_t *w = o.w, *x = o.x;
    rt_pair_prefetch pf = rt_pair_prefetch_start(a->prefetch, tile);
    __m256 acc_a = _mm256_setzero_ps(), acc_b = _mm256_setzero_ps();
    for (int64_t g = 0; g < o.groups; g++, w += o.block, x += o.x_step) {
        uint64_t skip = rt_pair_prefetch_next(&pf, o.block);
        prefetch_block(w + skip, a->prefetch, o.block);
        prefetch_block(w + tile + skip, a->prefetch, o.block);
        __m256i dot_a = _mm256_setzero_si256(), dot_b = _mm256_setzero_si256();
        if (bits == 4)
            w4_group_row_pair(w, w + tile, x, o.pairs, &dot_a, &dot_b);
        else
            w8_group_row_pair(w, w + tile, x, o.tiles, o.sums[g], &dot_a, &dot_b);
        acc_a = group_floats(acc_a, w, &o, dot_a, o.sums[g], o.sx[g], bits, coef);
        acc_b = group_floats(acc_b, w + tile, &o, dot_b, o.sums[g], o.sx[g], bits, coef);
    }
    _mm256_storeu_ps(out, acc_a);
    _mm256_storeu_ps(out + HP, acc_b);
}

/* rows == 1 of W row tiles ht and ht + 1: out[0..hp), out[hp..2 hp). */
static inline void gemv_pair_x86(const rt_qtile_args *a, int64_t et, int64_t ht, float *out)
{
    if (!x86_tiles(a)) {
        qtile_x86(a, et, 1, ht, out);
        qtile_x86(a, et, 1, ht + 1, out + a->ws.hp);
        return;
    }
    BY_BITS_COEF(a, gemv_pair, a, et, ht, out);
}

/* gemm of row tiles ht and ht + 1 at once (bits and coef constants): tile
 * ht's rows at out[e * HP], tile ht + 1's at out[(EP + e) * HP].  Bits 8
 * needs the file's w8_group_rows_pair (Q_X86_W8_ROWS_PAIR):
 *
 *   void w8_group_rows_pair(const uint8_t *wa, const uint8_t *wb,
 *                           const uint8_t *x, int64_t tiles, const int32_t *sums,
 *                           int64_t sums_stride, __m256i sa[EP], __m256i sb[EP]) */
INLINE void gemm_pair(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out,
                      int bits, rt_qcoef coef)
{
    operands o = operands_of(a, et, ht);
    uint64_t tile = (uint64_t)o.groups * o.block; /* bytes of a row tile */
    const uint8_t *w = o.w, *x = o.x;
    __m256 acc_a[EP], acc_b[EP];
    EACH_ROW
    for (int e = 0; e < EP; e++)
        acc_a[e] = acc_b[e] = _mm256_setzero_ps();
    for (int64_t g = 0; g < o.groups; g++, w += o.block, x += o.x_step) {
        __m256i sa[EP], sb[EP];
        EACH_ROW
        for (int e = 0; e < EP; e++)
            sa[e] = sb[e] = _mm256_setzero_si256();
#ifdef Q_X86_W8_ROWS_PAIR
        if (bits == 8)
            w8_group_rows_pair(w, w + tile, x, o.tiles, o.sums + g, o.groups, sa, sb);
        else
#endif
            w4_group_rows_pair(w, w + tile, x, o.pairs, sa, sb);
        rows_floats(acc_a, w, &o, sa, g, bits, coef);
        rows_floats(acc_b, w + tile, &o, sb, g, bits, coef);
    }
    for (int e = 0; e < rows; e++) {
        _mm256_storeu_ps(out + e * HP, acc_a[e]);
        _mm256_storeu_ps(out + (EP + e) * HP, acc_b[e]);
    }
}

/* Rows 1..4 of activation tile et by W row tiles ht and ht + 1: tile ht's
 * outputs at out[0..ep * hp), tile ht + 1's after them.  Without
 * Q_X86_W8_ROWS_PAIR bits 8 takes qtile twice: the 8-bit tiles of the AVX2
 * file share a broadcast between two W row tiles at 5.0 instructions per
 * vpmaddubsw instead of 5.5, but gcc 12 copied each of the 8 int32 sums
 * every step (53 instructions a tile pair) and the GEMM ran 10% slower
 * than one tile at a time (make bench-kernels, AMD EPYC Zen 1, runs
 * alternated). */
static inline void qtile_pair_x86(const rt_qtile_args *a, int64_t et, int rows, int64_t ht,
                                  float *out)
{
#ifdef Q_X86_W8_ROWS_PAIR
    bool pairs = true;
#else
    bool pairs = a->ws.bits == 4;
#endif
    if (rows == 1 || !pairs || !x86_tiles(a)) {
        qtile_x86(a, et, rows, ht, out);
        qtile_x86(a, et, rows, ht + 1, out + a->xs.ep * a->ws.hp);
        return;
    }
#ifdef Q_X86_W8_ROWS_PAIR
    BY_BITS_COEF(a, gemm_pair, a, et, rows, ht, out);
#else
    if (a->ws.coef == RT_QCOEF_HALF)
        gemm_pair(a, et, rows, ht, out, 4, RT_QCOEF_HALF);
    else
        gemm_pair(a, et, rows, ht, out, 4, RT_QCOEF_FLOAT);
#endif
}
#endif

#endif
