/* Internal: one kernel table per plan target.
 *
 * The portable C table (table_generic.c) is always built: it runs plans for
 * target "generic" and is the oracle every other table is tested against.
 * A SIMD table lives in its own directory (x86/, arm_neon/) and is
 * compiled only where its ISA is: no #if inside a kernel.  plan_open picks
 * the table from Plan.target (rt_kernels_for_target) and refuses a target
 * this build or this CPU cannot run.
 *
 * The entries are micro-kernels over the formats of quant_format.h; the
 * drivers that validate operands, split work into tasks along row tiles of
 * W (paper 002 §5.2) and add bias and residual are portable and shared, so a
 * target only writes the inner loops.  Every entry computes exactly the
 * same bits for a given input whatever task it runs in, so results do not
 * depend on the thread count. */
#ifndef LLMC_RT_KERNEL_TABLE_H
#define LLMC_RT_KERNEL_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "quant_format.h"

/* A quantized matrix product: activation tiles (QuantizeRows) by weight
 * blocks.  xs.kp == ws.kp, xs.group == ws.group, xs.lp == ws.lp. */
typedef struct {
    const uint8_t *xq;
    rt_qact_shape xs;
    const uint8_t *w;
    rt_qweight_shape ws;
    uint32_t prefetch;      /* bytes ahead of the weight stream the one-row
                               GEMV prefetches (Plan.gemv_prefetch); 0: none */
} rt_qtile_args;

/* Where the two-tile decode GEMV (rt_kernels.qlinear_gemv_pair) prefetches:
 * each of W row tiles ht and ht + 1 `ahead` bytes further along its own
 * stream, the tiles of the pairs the driver calls next (ht + 2 and ht + 3,
 * ...) being each stream's continuation.  A target past its tile's end
 * moves on by one tile: left in place, tile ht's last targets land in
 * ht + 1, which the call reads already, and the head of ht + 3 is never
 * prefetched (1.15x decode tok/s from memory, w4a8, AVX2 table on an Intel
 * Xeon, docs/benchmarks.md). */
typedef struct {
    uint64_t reach; /* ahead + the bytes of the tile walked so far */
    uint64_t skip;  /* what the targets move on by: whole tiles */
    uint64_t edge;  /* the reach at which they move on once more */
    uint64_t tile;  /* bytes of a row tile */
} rt_pair_prefetch;

static inline rt_pair_prefetch rt_pair_prefetch_start(uint64_t ahead, uint64_t tile)
{
    uint64_t skip = ahead / tile * tile;
    rt_pair_prefetch p = {ahead, skip, skip + tile, tile};
    return p;
}

/* The next block's skip: its targets are at block + skip + ahead in each
 * tile of the pair.  block <= tile, so a step crosses one edge at most. */
static inline uint64_t rt_pair_prefetch_next(rt_pair_prefetch *p, uint64_t block)
{
    if (p->reach >= p->edge) {
        p->skip += p->tile;
        p->edge += p->tile;
    }
    p->reach += block;
    return p->skip;
}

/* The QLinear driver's state (q_linear_job.h). */
typedef struct rt_qlinear_job rt_qlinear_job;

/* Attention's key blocks (ref_attention.c walks the keys KEY_BLOCK at a
 * time), and the offset headroom of its unified-max softmax: a row keeps
 * its offset phi while its scores stay below phi + RT_ATTN_EXP_HEADROOM. */
#define RT_ATTN_KEY_BLOCK 32
#define RT_ATTN_EXP_HEADROOM 32.0f

/* The most query rows one call of the rows loops takes (a GQA group of a
 * decode step: 1..8 in the families served), and the largest head_dim
 * they take (Gemma's 256). */
#define RT_ATTN_GROUP_ROWS 8
#define RT_ATTN_ROWS_DIM 256

/* A group's query rows as the table's attn_scores_rows reads them (its
 * own layout, written by attn_rows_queries): a decode step's group keeps
 * one for all its key blocks. */
typedef struct {
    float f[RT_ATTN_GROUP_ROWS * RT_ATTN_ROWS_DIM];
} __attribute__((aligned(64))) rt_attn_rows_q;

/* The query rows of an attention pass as the lanes of 16-float vectors
 * (rt_kernels.attn_block_lanes): lane r is row r, and each query and
 * output column is one vector over the rows, so a key's value reaches
 * every row by one broadcast and the softmax state of all rows moves in
 * one instruction.  Rows past the pass's are lanes with no visible key. */
#define RT_ATTN_LANES 16
#define RT_ATTN_LANES_DIM 128
typedef struct {
    float q[RT_ATTN_LANES_DIM][RT_ATTN_LANES]; /* column i of every row's query */
    float o[RT_ATTN_LANES_DIM][RT_ATTN_LANES]; /* the rows' weighted sums, by column */
    float phi[RT_ATTN_LANES], off[RT_ATTN_LANES], l[RT_ATTN_LANES], mx[RT_ATTN_LANES];
    int32_t lo[RT_ATTN_LANES], n[RT_ATTN_LANES]; /* row r sees the keys [lo, n) */
    int64_t d;                                   /* head_dim, a multiple of 8 */
} rt_attn_lanes;

/* Cache lines the rows loops (attn_scores_rows, attn_accumulate_rows)
 * prefetch while they compute: the score loop a K and a V line per step
 * of 8 columns over 4 keys, the weighted-sum loop a V and a K line per key
 * and 32 columns, each range until it is done (a float32 block's lines in
 * all, K and V taken in turn).  A decode step at depth reads the KV cache
 * from memory once, and a core keeps only ~16 L1 misses in flight: the
 * lines of a whole key block prefetched at once fill them and stall the
 * core until they drain, so the block's compute and its memory time add
 * up; a line or two per step keeps misses in flight while the loops
 * compute (ref_attention.c, prefetch_cursor). */
typedef struct {
    const char *next[2], *end[2]; /* the K and V lines still to prefetch */
} rt_attn_prefetch;

/* A loop's own copy of the cursor pf (NULL: one with nothing to fetch),
 * kept in registers and stored back at the loop's end: stepped through
 * the pointer, each step's store and reload chained the keys' work. */
static inline rt_attn_prefetch rt_attn_prefetch_local(const rt_attn_prefetch *pf)
{
    rt_attn_prefetch none = {{NULL, NULL}, {NULL, NULL}};
    return pf ? *pf : none;
}

/* The next line of the cursor's K (w 0) or V (w 1) range, if any. */
static inline void rt_attn_prefetch_line(rt_attn_prefetch *pf, int w)
{
    if (pf->next[w] < pf->end[w]) {
        __builtin_prefetch(pf->next[w]);
        pf->next[w] += 64;
    }
}

typedef struct rt_kernels {
    const char *target;     /* the Plan.target this table runs */
    int q_hp, q_lp, q_ep;   /* tile sizes of this target's quantized plans */
    int f_hp, f_ep;         /* fp32 weight tile rows; rows per fp32 GEMM call
                               (f_hp 0: fp32 weights stay dense [n, k]) */
    /* Rows [r0, r1) of x [m, k] (row stride x_stride floats; r1 <= m) into
     * the activation tiles xq: their int8 values, (row, group) scales and
     * group sums; scale 0: each (row, group) by its abs-max, scale > 0
     * (normal): that static scale for every one, q = x * (1 / scale)
     * clamped to +-127.  Padding rows and columns are the driver's. */
    void (*quantize_rows)(const float *x, int64_t x_stride, const rt_qact_shape *s,
                          int64_t r0, int64_t r1, float scale, uint8_t *xq);
    /* out[e * hp + h] for e < rows (1 <= rows <= ep: the rows of activation
     * tile et that exist) and h < hp (row tile ht of W): z of
     * quant_format.h, the sum over groups of sx times the group term, for
     * either coefficient dtype (Float16, Float32) and bits 4 or 8.  rows ==
     * 1 is the decode GEMV and may take a path of its own. */
    void (*qtile)(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out);
    /* The GEMM of activation tiles et .. et + tiles - 1 (tiles 2 or 4, all
     * their ep rows) by W row tiles ht, ht + 1 in one call: out holds the
     * [ep][hp] tiles (et + i, ht + j) at (2 * i + j) * ep * hp, each with
     * the bits qtile gives it for rows >= 2.  For ISAs whose registers hold
     * more than one tile's outputs (NULL: the driver calls qtile). */
    void (*qtile_block)(const rt_qtile_args *a, int64_t et, int tiles, int64_t ht, float *out);
    /* The QLinear driver's GEMM task over W row tiles [ht0, ht1): the
     * walk of rt_qlinear_pair_walk (q_linear_job.h) with a column of the
     * table's own for each pair of W row tiles, with qtile_block where the
     * table has one and stores of its own (x86: whole output lines
     * streamed, made visible once at the task's end), the outputs' bits
     * those of qtile per tile and the portable stores (NULL: qtile per
     * tile; a table with qtile_block needs it).  In the table rather than
     * the driver, so that a build whose tables have none (the Cortex-M
     * core) links none of it. */
    void (*qlinear_pair_task)(const rt_qlinear_job *J, ptrdiff_t ht0, ptrdiff_t ht1);
    /* acc[e * hp + h] += sum over c < kc of x[e * x_stride + c] *
     * panel[c * hp + h] for e < rows (1 <= rows <= f_ep), h < hp (hp ==
     * f_hp): rows of x against one [kc][hp] micro-panel of fp32 weights (a
     * slice of an FWeightTiles row tile, or weight blocks dequantized to
     * that layout).  rows >= 2 adds every product into acc in c order, so a
     * reduction split into consecutive panels gives the bits of one call;
     * rows == 1 (the decode GEMV) may sum a panel in an order of its own. */
    void (*ftile)(const float *x, int64_t x_stride, const float *panel, int hp, int64_t kc,
                  int rows, float *acc);
    /* Attention's inner loops (ref_attention.c; NULL: its portable ones).
     * scores[t] = q . k_t for t < nk, key rows k_t = k + t * d; a score's
     * bits depend on q and k_t only, not on nk or the key's place. */
    void (*attn_scores)(const float *q, const float *k, int64_t nk, int64_t d, float *scores);
    /* o[i] += p[t] * v_t[i] for i < d, t < nk in key order, v_t = v + t * d. */
    void (*attn_accumulate)(float *o, const float *v, const float *p, int64_t nk, int64_t d);
    /* The same over the rows of float16 and int8 caches (tensor_traits.h
     * rt_kv_row_bytes), read as stored (NULL: the portable loops):
     * float16 K rows k + t * d, int8 K rows of rt_kv_row_bytes(I8, 0, d)
     * bytes (score = scale * (q . int8 values)), float16 V rows v + t * d. */
    void (*attn_scores_f16)(const float *q, const uint16_t *k, int64_t nk, int64_t d,
                            float *scores);
    void (*attn_scores_i8)(const float *q, const uint8_t *k, int64_t nk, int64_t d,
                           float *scores);
    void (*attn_accumulate_f16)(float *o, const uint16_t *v, const float *p, int64_t nk,
                                int64_t d);
    /* p[t] = exp(p[t] - off) for t < n, within 2 ulp; as the portable loop
     * of ref_attention.c (NULL: that loop), differences below -87 give 0,
     * above 88 are taken as 88, NaN stays NaN. */
    void (*attn_exp)(float *p, int64_t n, float off);
    /* y[i] = silu(gate[i]) * up[i] for i < n (SwiGLU; NULL: the portable
     * loop of ref_elementwise.c, rt_swiglu_generic).  Within a few ulp of
     * the portable one; NaN and infinities as it has them. */
    void (*swiglu)(const float *gate, const float *up, float *y, int64_t n);
    /* The f32-dequant prefill path's weight conversion (q_dequant.c; NULL:
     * rt_dequant_block_generic): steps [i0, i1) of the group that weight
     * block `block` holds (ws->hp rows), out[(i - i0) * stride + r] the
     * weight dequantized as rt_qweight_value does (Float16: scale[r] * q +
     * min[r], min 0 for bits 8, a product then a sum; Float32: (float)(q -
     * zero[r]) * scale[r]), so the floats are the portable loop's bit for
     * bit. */
    void (*dequant_block)(const uint8_t *block, const rt_qweight_shape *ws, int64_t i0,
                          int64_t i1, float *out, int64_t stride);
    /* One RMSNorm row (NULL: rt_rmsnorm_row_generic): y[j] = x[j] * inv *
     * scale[j], a product then a product, inv = 1 / sqrt(sum of squares /
     * fd + epsilon), the sum in RT_RMS_LANES interleaved compensated lanes
     * finished by rt_rms_inv: bit for bit the portable row. */
    void (*rmsnorm_row)(const float *x, const float *scale, float *y, int64_t n,
                        float epsilon, float fd);
    /* The QLinear driver's decode GEMV (m == 1) of W row tiles ht and
     * ht + 1, each activation word loaded once for both, stored with the
     * portable stores, each output's bits qtile's (NULL: qtile per tile).
     * The AVX2 pair made the 8-bit decode GEMV 6-10 % faster and the 4-bit
     * one's in-L2 rate 14 %.  In the table, as qlinear_pair_task, so
     * that a build whose tables have none links none of it. */
    void (*qlinear_gemv_pair)(const rt_qlinear_job *J, ptrdiff_t ht);
    /* Up to RT_ATTN_GROUP_ROWS query rows' scores over the same nk keys in
     * one sweep (NULL: attn_scores and its float16 and int8 siblings row
     * by row): s[r * RT_ATTN_KEY_BLOCK + t] = q[r] . k_t, r < nr, t < nk
     * <= RT_ATTN_KEY_BLOCK, the rows q[0..nr) as attn_rows_queries wrote
     * them, for key rows as stored in a cache of dtype `dtype`
     * (LLMC_RT_F32, F16, I8; the rows of attn_scores, _f16 and _i8),
     * head_dim d <= RT_ATTN_ROWS_DIM, each score the bits the table's
     * single-row loop gives it, prefetching pf's lines (NULL: none).  Only
     * in a table that has all three, with attn_rows_queries. */
    void (*attn_scores_rows)(const rt_attn_rows_q *q, int nr, const uint8_t *k, int dtype,
                             int64_t nk, int64_t d, float *s, rt_attn_prefetch *pf);
    /* The nr <= RT_ATTN_GROUP_ROWS query rows q[r] (head_dim d) into the
     * layout attn_scores_rows reads. */
    void (*attn_rows_queries)(const float *const *q, int nr, int64_t d, rt_attn_rows_q *out);
    /* Up to RT_ATTN_GROUP_ROWS rows' o[r] += p[r * RT_ATTN_KEY_BLOCK + t]
     * v_t over the same nk <= RT_ATTN_KEY_BLOCK V rows (NULL:
     * attn_accumulate row by row), V rows of dtype `dtype` (LLMC_RT_F32 or
     * F16, rt_kv_row_dtype of the cache's V), each element the bits of the
     * table's attn_accumulate (_f16), prefetching pf's lines (NULL: none).
     * Only in a table that has both.  (The weights at one stride: one
     * register addresses every row's, where a pointer per row took 7 of
     * the 15 and pushed the cursor onto the stack.) */
    void (*attn_accumulate_rows)(float *const *o, const float *p, int nr, const uint8_t *v,
                                 int dtype, int64_t nk, int64_t d, rt_attn_prefetch *pf);
    /* Two rows' softmax weights at once: pa[t] = exp(pa[t] - off_a), pb[t]
     * = exp(pb[t] - off_b) for t < n, each the bits of the table's
     * attn_exp (NULL: attn_exp row by row).  Only in a table that has
     * attn_exp. */
    void (*attn_exp_pair)(float *pa, float *pb, int64_t n, float off_a, float off_b);
    /* ftile for two weight panels of the same steps at once (row tiles ht
     * and ht + 1 of an FWeightTiles W): x's rows against panel_a into
     * acc_a and against panel_b into acc_b, each acc the bits ftile gives
     * it for the same rows (NULL: ftile per panel).  For ISAs whose
     * registers hold more than one panel's sums: with one panel the ep
     * FMA chains of a step are too few to keep the FMA units busy.  The
     * fp32 Linear driver uses it on x86-64 only (the Cortex-M core's
     * .text budget). */
    void (*ftile_pair)(const float *x, int64_t x_stride, const float *panel_a,
                       const float *panel_b, int hp, int64_t kc, int rows, float *acc_a,
                       float *acc_b);
    /* n stored cache rows (row_bytes apart) of dtype `dtype` (LLMC_RT_F16,
     * or LLMC_RT_I8 whose values only, not their scale) as n rows of d
     * floats at out (NULL: none).  Every conversion is exact, so attention
     * over the widened rows (float32 loops, an int8 score times its row's
     * scale) has the bits of the loops over the stored rows; the pass
     * widens a key block once for all its query rows instead of once per
     * group of them.  x86-64 only, with the rows loops. */
    void (*attn_widen_rows)(const uint8_t *rows, int dtype, uint64_t row_bytes, int64_t n,
                            int64_t d, float *out);
    /* Every row of a pass over one block of float32 key rows k and value
     * rows v (d floats each, positions t0 .. t0 + nk - 1, nk <=
     * RT_ATTN_KEY_BLOCK; scale: NULL, or each key's int8 scale, a score's
     * factor after its sum), the rows' softmax state and sums in L
     * updated as ref_attention.c's row loops update one row's: each lane
     * the bits the table's attn_scores, attn_exp and attn_accumulate give
     * that row, over the keys it sees (NULL: the rows loops), also a row
     * whose first visible key lies inside the block.  x86-64 only, with
     * the rows loops. */
    void (*attn_block_lanes)(rt_attn_lanes *L, const float *k, const float *v,
                             const float *scale, int64_t t0, int64_t nk);
    /* The instruction set of the kernels, for reports: the target's name,
     * or more where a faster table runs the target's plans. */
    const char *isa;
} rt_kernels;

/* The bit patterns of attn_exp's clamps and of the NaN it returns, shared
 * by the portable loop and every table's (decided on bits: unsigned order
 * of negative floats, signed order of positive ones). */
#define RT_EXP_MIN_BITS 0xC2AE0000u /* -87.0f */
#define RT_EXP_MAX_BITS 0x42B00000  /* 88.0f */
#define RT_EXP_NAN_BITS 0x7FC00000u
/* Its range reduction, shared likewise: x = n ln2 + r, n = round(x log2(e)),
 * ln2 in two parts (the high one has 15 bits, so n * hi is exact); and the
 * SIMD tables' Taylor coefficients of exp(r), degree 7, highest first (for
 * Horner's rule by FMAs). */
#define RT_EXP_LOG2E 1.44269504f
#define RT_EXP_LN2_HI 0.693145751953125f
#define RT_EXP_LN2_LO 1.428606765330187e-6f
#define RT_EXP_TAYLOR {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}

/* q_dequant.c: rt_kernels.dequant_block's portable loop. */
void rt_dequant_block_generic(const uint8_t *block, const rt_qweight_shape *ws, int64_t i0,
                              int64_t i1, float *out, int64_t stride);

/* The portable table (always present). */
extern const rt_kernels rt_kernels_generic;

/* The table for a plan target, or NULL with LLMC_RT_E_TARGET in err when
 * the target is unknown, not built into this runtime, or needs CPU features
 * this CPU lacks (the message names which). */
const rt_kernels *rt_kernels_for_target(const char *target, llmc_rt_error *err);
/* The table of `target` whose isa is `isa` (the target's own table, or the
 * faster one rt_kernels_for_target picks on this CPU), for runs that
 * compare them; NULL with LLMC_RT_E_TARGET naming the ones there are. */
const rt_kernels *rt_kernels_for_isa(const char *target, const char *isa, llmc_rt_error *err);
/* Whether a target has more than one table in this build (x86-64: "avx2"
 * plans run on up to four).  Elsewhere Plan.decode_isa and prefill_isa have
 * nothing to choose from: the verifier skips them, which keeps the
 * Cortex-M core's .text in its budget (firmware.md). */
#if defined(__x86_64__)
#define RT_KERNELS_TUNABLE 1
#else
#define RT_KERNELS_TUNABLE 0
#endif
/* The table a plan tuned to `isa` (Plan.decode_isa or prefill_isa, a KISA_*
 * of `target`) runs on this CPU: that one where the CPU runs it, else
 * `fastest` (rt_kernels_for_target's; also for KISA_FASTEST). */
const rt_kernels *rt_kernels_tuned(const char *target, const rt_kernels *fastest, uint32_t isa);

/* Bytes ahead of its weight stream that the one-row GEMV prefetches on
 * this CPU where the plan does not say (Plan.gemv_prefetch 0); 0 where the
 * kernels do not prefetch (the x86-64 ones do).  A plan's value is a
 * multiple of 64 up to RT_GEMV_PREFETCH_MAX. */
uint32_t rt_gemv_prefetch_default(void);
#define RT_GEMV_PREFETCH_MAX 65536u

/* RMSNorm rows (ref_layernorm.c).  The square of element j of a row goes
 * to lane j % RT_RMS_LANES of a compensated sum (k_fsum): independent
 * chains, which a SIMD table keeps one per vector lane.  rt_rms_inv takes
 * the lanes after the whole steps of RT_RMS_LANES elements before j, adds
 * the squares of [j, n) to their lanes, then the lanes in order, and
 * returns 1 / sqrt(sum / fd + epsilon). */
#define RT_RMS_LANES 8
static inline float rt_rms_inv(k_fsum lane[RT_RMS_LANES], const float *x, ptrdiff_t j,
                               ptrdiff_t n, float epsilon, float fd)
{
    k_fsum total = {0, 0};
    for (int l = 0; j < n; j++, l++)
        k_fsum_add(&lane[l], x[j] * x[j]);
    for (int l = 0; l < RT_RMS_LANES; l++) {
        k_fsum_add(&total, lane[l].sum);
        k_fsum_add(&total, lane[l].c);
    }
    return 1.0f / k_sqrtf(k_fsum_value(&total) / fd + epsilon);
}
/* rt_rms_inv from a SIMD row's lanes: sums[l] and cs[l] of lane l. */
static inline float rt_rms_inv_split(const float sums[RT_RMS_LANES],
                                     const float cs[RT_RMS_LANES], const float *x, ptrdiff_t j,
                                     ptrdiff_t n, float epsilon, float fd)
{
    k_fsum lane[RT_RMS_LANES];
    for (int l = 0; l < RT_RMS_LANES; l++) {
        lane[l].sum = sums[l];
        lane[l].c = cs[l];
    }
    return rt_rms_inv(lane, x, j, n, epsilon, fd);
}
/* The portable row's inv of the n floats x (the fused Attention's head
 * norms use it too), and the portable row. */
float rt_rms_row_inv(const float *x, int64_t n, float epsilon, float fd);
void rt_rmsnorm_row_generic(const float *x, const float *scale, float *y, int64_t n,
                            float epsilon, float fd);

/* The portable SwiGLU loop (ref_elementwise.c): silu(gate) * up with
 * libm's expf, the same bits as the Binary op's scalar path. */
void rt_swiglu_generic(const float *gate, const float *up, float *y, int64_t n);

/* The portable fp32 tile micro-kernel (f_generic.c): any hp, the oracle of
 * the SIMD ones; the generic table keeps f_hp = 0 (dense weights,
 * k_linear) but carries it for tests. */
void rt_ftile_generic(const float *x, int64_t x_stride, const float *panel, int hp, int64_t kc,
                      int rows, float *acc);

#endif
