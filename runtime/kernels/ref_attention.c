/* Fused Attention: [RMSNorm per head or over the whole row,] RoPE on q and the new k, append to the chunked KV cache,
 * causal softmax(scale q.K) V per head, fp32, tiled and split so that both
 * prefill and decode keep every thread busy without materializing scores.
 *
 * Work unit: one kv head g with a block of query rows that read its K/V
 * (the group = heads / kv_heads query heads of g, for qpos consecutive
 * positions: as many rows as a pass holds), over a range of key
 * positions.  A pass walks the keys in blocks of KEY_BLOCK positions inside
 * one cache chunk; each block of K and V is loaded once and used by every
 * query row of the pass while it is in L1 (GQA reuse), so a prefill reads
 * the cache from L2 or memory once per PASS_ROWS query rows, and a row
 * only keeps its output row, a few floats of softmax state and one block
 * of scores (never [heads, S, P+S] scores).  Where the table has a lanes
 * loop (x86-64 AVX-512), the pass's rows go through it 16 at a time, one
 * row per vector lane.
 *
 * Softmax offset (FlashDecoding++ §3, "unified max"): exp(s - phi) / sum
 * exp(s - phi) is the softmax for any phi, so each row uses one offset phi
 * fixed before any key is visited: the larger score of its first and its
 * newest key, computed the same way by every task that handles the row.
 * Partial results over disjoint key ranges then share phi and combine by
 * plain sums, with no running-max rescaling inside a range either.  phi is
 * one of the row's own scores, so the largest term is >= exp(0) = 1 and
 * the lower end of the safe range (precision loss when every score is far
 * below phi) cannot be reached; the upper end can: once a score exceeds
 * phi + EXP_HEADROOM (exp(32) = 8e13, which leaves room for 2^30 keys times
 * values of 1e10 below FLT_MAX), that row falls back to the exact online
 * softmax (offset = running max, accumulations rescaled by exp(old - new)
 * when it grows), and the combine rescales each partial by exp(offset_j -
 * max offset).  Which path a row takes depends on its data only.
 *
 * Decode (few units, long context): the key positions are also split into
 * ranges of split_keys (from the shapes only), one task per (unit, range);
 * the partial outputs of ranges >= 1 go to a scratch array on this
 * function's stack (SCRATCH_FLOATS bounds it; longer contexts get longer
 * ranges), range 0 accumulates in o, and the caller combines them in range
 * order after the parallel-for.  Prefill has enough units and does not
 * split.  Either way the result is bitwise the same for any thread count.
 *
 * The two inner loops (scores of a row against a block of keys, and the
 * weighted sum of V rows into the output row) are the kernel table's when
 * it has them (k_attention_kernels; x86/attn_avx2.c), else the
 * portable ones here; the softmax bookkeeping is shared.
 *
 * Cache dtypes (Plan.kv_cache_dtype, tensor_traits.h rt_kv_row_bytes): the
 * S new rows are converted as they are appended (float16 rounded to nearest
 * even; int8 keys quantized per row with their scale), and the loops read
 * the stored rows as they are (the portable ones widen 4 rows at a time
 * into a stack buffer, the AVX2 ones 8 values per load, the AVX-512 rows
 * loops each value once for a whole row group; a pass of several groups
 * widens a key block once for all of them), so no step converts the
 * cache.  Each dtype's storing and portable loops come with
 * the op resolver's KV cache entry (llmc_rt_kv_Float32, ...): a firmware
 * whose plan caches float32 links neither conversion.
 *
 * Index arithmetic is pointer-wide (ptrdiff_t: 32 bits on a Cortex-M, where
 * int64 costs register pairs and libgcc divisions): q, k, v, o, the cos and
 * sin tables and the cache chunks all lie in memory, so every count,
 * position and index below fits (check_views proves the shapes in int64
 * first; the session bounds P + S by the context its pool holds). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernel_table.h"
#include "rt_div64.h"
#include "rt_msg.h"
#include "tensor_traits.h"

void k_rope_row(const float *x, float *y, int64_t d, int64_t rotary_dim, const float *cos,
                const float *sin)
{
    ptrdiff_t n = (ptrdiff_t)d, r = (ptrdiff_t)rotary_dim, h = r / 2;
    for (ptrdiff_t i = 0; i < r; i++) {
        float rot = i < h ? -x[i + h] : x[i - h];
        y[i] = x[i] * cos[i] + rot * sin[i];
    }
    for (ptrdiff_t i = r; i < n; i++)
        y[i] = x[i];
}

static bool dims_are(const rt_view *t, int64_t d0, int64_t d1, int64_t d2)
{
    return t->dtype == LLMC_RT_F32 && t->rank == 3 && t->dims[0] == d0 && t->dims[1] == d1 &&
           t->dims[2] == d2;
}

static llmc_rt_status check_views(const rt_attention_attrs *a, const rt_view *q,
                                  const rt_view *k, const rt_view *v, const rt_view *cos,
                                  const rt_view *sin, int64_t P, const rt_view *o,
                                  llmc_rt_error *err)
{
    int64_t S = q->rank == 3 ? q->dims[1] : 0;
    if (a->heads < 1 || a->kv_heads < 1 || rt_umod64((uint64_t)a->heads, (uint64_t)a->kv_heads) ||
        a->head_dim < 1 || a->head_dim > RT_ATTN_MAX_HEAD_DIM || a->rotary_dim < 0 ||
        a->rotary_dim % 2 || a->rotary_dim > a->head_dim || a->window < 0 ||
        !(a->softcap >= 0.0f && a->softcap <= FLT_MAX))
        return rt_fail(err, LLMC_RT_E_EXEC, "heads %d, kv_heads %d, head_dim %d, rotary_dim "
                       "%d, window %d or softcap are inconsistent",
                       RT_N(a->heads, a->kv_heads, a->head_dim, a->rotary_dim, a->window), NULL);
    if (!dims_are(q, 1, S, a->heads * a->head_dim) || !dims_are(o, 1, S, a->heads * a->head_dim) ||
        !dims_are(k, 1, S, a->kv_heads * a->head_dim) ||
        !dims_are(v, 1, S, a->kv_heads * a->head_dim))
        return rt_fail(err, LLMC_RT_E_EXEC, "q, o must be float [1, S, %d] and k, v float "
                       "[1, S, %d]", RT_N(a->heads * a->head_dim, a->kv_heads * a->head_dim),
                       NULL);
    if (a->rotary_dim == 0)
        return LLMC_RT_OK;
    if (!cos || !sin || cos->dtype != LLMC_RT_F32 || sin->dtype != LLMC_RT_F32 ||
        cos->rank != 2 || !k_same_dims(cos, sin) || cos->dims[0] < P + S ||
        cos->dims[1] != a->rotary_dim)
        return rt_fail(err, LLMC_RT_E_EXEC, "cos and sin must be float [>= P+S = %d, "
                       "rotary_dim %d]", RT_N(P + S, a->rotary_dim), NULL);
    return LLMC_RT_OK;
}

/* The loops of one cache dtype (an op resolver's KV cache entry sets them):
 * converting the new K and V rows as they are stored, and the portable
 * scores and weighted sums over stored float16 or int8 rows (NULL: not
 * this dtype's; float32 rows take block_scores and add_weighted_rows). */
struct llmc_rt_kv_loops {
    int dtype; /* the cache dtype they are for */
    void (*store_k)(const float *x, ptrdiff_t D, uint8_t *row);
    void (*store_v)(const float *x, ptrdiff_t D, uint8_t *row);
    void (*scores_f16)(const float *q, const uint16_t *k, int64_t nk, int64_t d, float *scores);
    void (*scores_i8)(const float *q, const uint8_t *k, int64_t nk, int64_t d, float *scores);
    void (*accumulate_f16)(float *o, const uint16_t *v, const float *p, int64_t nk, int64_t d);
};

/* The attrs pointer-wide, the cache (what appending a row needs) and its loops. */
typedef struct {
    ptrdiff_t H, G, D, rot; /* heads, kv_heads, head_dim, rotary_dim */
    float scale;
    const float *q_norm, *k_norm; /* RMSNorm weights, NULL without */
    ptrdiff_t q_span, k_span;     /* their lengths: D, or the whole row's H * D, G * D */
    float epsilon;
    ptrdiff_t window; /* 0: none */
    float softcap;    /* 0: none */
    const rt_kv_cache *cache;
    ptrdiff_t chunk;        /* cache->chunk */
    struct llmc_rt_kv_loops loops;
    size_t row_bytes[2];    /* of a K and a V row (rt_kv_row_bytes) */
} attn_shape;

/* Row of kv head g at position t: K (which = 0) or V (which = 1). */
static uint8_t *cache_row(const attn_shape *a, int which, ptrdiff_t g, ptrdiff_t t)
{
    const rt_kv_cache *c = a->cache;
    uint8_t *chunk = c->pool + c->slot[t / a->chunk] * (size_t)c->slot_bytes;
    size_t plane = (size_t)(a->G * a->chunk) * a->row_bytes[0];
    return chunk + (size_t)which * plane + (size_t)(g * a->chunk + t % a->chunk) * a->row_bytes[which];
}

/* An int8 K row: values round(x * 127 / max|x|), then the scale max|x| /
 * 127.  A row holding inf or NaN stores zeros and a NaN scale (its scores
 * are NaN, as a float cache's may be). */
static void store_row_i8(const float *x, ptrdiff_t D, uint8_t *row)
{
    float amax = 0.0f;
    bool finite = true;
    for (ptrdiff_t i = 0; i < D; i++) {
        float m = fabsf(x[i]);
        finite = finite && m <= FLT_MAX;
        amax = m > amax ? m : amax;
    }
    float inv = finite && amax > 0.0f ? 127.0f / amax : 0.0f, scale = finite ? amax / 127.0f : NAN;
    for (ptrdiff_t i = 0; i < D; i++) {
        long q = finite ? lrintf(x[i] * inv) : 0;
        row[i] = (uint8_t)(int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
    }
    size_t at = (size_t)rt_kv_scale_offset(D);
    memset(row + D, 0, at - (size_t)D);
    memcpy(row + at, &scale, sizeof scale);
}

/* The D floats x as a float16 row, and as a float32 one. */
static void store_row_f16(const float *x, ptrdiff_t D, uint8_t *row)
{
    for (ptrdiff_t i = 0; i < D; i++) {
        uint16_t h = rt_float_to_half(x[i]);
        memcpy(row + 2 * i, &h, sizeof h);
    }
}

static void store_row_f32(const float *x, ptrdiff_t D, uint8_t *row)
{
    memcpy(row, x, (size_t)D * sizeof *x);
}

/* Head h of the row x (of D-float heads): RMS-normalized into buf with
 * the weight w [span] when there is one, else x's head itself.  The norm
 * runs over the span that holds the head: the head alone (span D, Qwen3)
 * or the whole row (span heads * D, OLMo2); y = x * inv * w, inv the
 * RMSNorm op's (rt_rms_row_inv: the same bits as every table's row). */
static const float *norm_head(const attn_shape *a, const float *x, ptrdiff_t h, const float *w,
                              ptrdiff_t span, float *buf)
{
    ptrdiff_t at = h * a->D;
    if (!w)
        return x + at;
    float inv = rt_rms_row_inv(x + at / span * span, span, a->epsilon, (float)span);
    for (ptrdiff_t j = 0; j < a->D; j++)
        buf[j] = x[at + j] * inv * w[at % span + j];
    return buf;
}

/* The S new rows, converted to the cache's dtype once, as they go in. */
static void append_rows(const attn_shape *a, const rt_view *k, const rt_view *v,
                        const rt_view *cos, const rt_view *sin, ptrdiff_t S, ptrdiff_t P)
{
    ptrdiff_t D = a->D, width = a->G * D, rot = a->rot;
    float rotated[RT_ATTN_MAX_HEAD_DIM], normed[RT_ATTN_MAX_HEAD_DIM];
    for (ptrdiff_t s = 0; s < S; s++)
        for (ptrdiff_t g = 0; g < a->G; g++) {
            const float *ks = norm_head(a, (const float *)k->data + s * width, g, a->k_norm, a->k_span,
                                        normed);
            const float *vs = (const float *)v->data + s * width + g * D;
            if (rot) {
                k_rope_row(ks, rotated, D, rot, (const float *)cos->data + (P + s) * rot,
                           (const float *)sin->data + (P + s) * rot);
                ks = rotated;
            }
            a->loops.store_k(ks, D, cache_row(a, 0, g, P + s));
            a->loops.store_v(vs, D, cache_row(a, 1, g, P + s));
        }
}


/* Keys per block: 32 rows of K and of V are 16 KiB at head_dim 64, so a
 * block stays in L1 while every query row of the pass uses it. */
#define KEY_BLOCK RT_ATTN_KEY_BLOCK
/* Query rows per pass, and the floats of their rotated queries (on the
 * task's stack): 64 rows of head_dim <= 128, fewer rows beyond.  Each key
 * block read from L2 or memory serves them all: against passes of 16 rows,
 * the attention of 512 new rows at depth 3584 (Qwen2-0.5B's heads, 2
 * threads, Intel Xeon family 6 model 207) took 0.86-0.90 of the time with
 * the AVX-512 lanes loop and 0.94 with the AVX2 row loops. */
#define PASS_ROWS 64
#define PASS_FLOATS 8192
/* Decode splits the keys when there are fewer units than SPLIT_UNITS, into
 * ranges of at least SPLIT_MIN_KEYS (~7 rows x 256 keys x 64 x 2 = 230k
 * multiply-adds a task), keeping the partials in SCRATCH_FLOATS (16 KiB). */
#define SPLIT_UNITS 8
#define SPLIT_MIN_KEYS 256
#define SCRATCH_FLOATS 4096
#define EXP_HEADROOM RT_ATTN_EXP_HEADROOM
/* Under PARALLEL_MIN_MACS multiply-adds in all, the tasks run on this
 * thread (waking workers would cost more); the same tasks, so the same bits. */
#define PARALLEL_MIN_MACS (1 << 15)

typedef struct {
    const attn_shape *a;
    const rt_view *q, *cos, *sin;
    ptrdiff_t S, P, group;
    ptrdiff_t qpos, unit_rows, pass_rows; /* query positions / rows of a unit; rows of a pass */
    ptrdiff_t qblocks, splits, split_keys;
    ptrdiff_t key0;   /* first key any row sees, rounded down to a KEY_BLOCK multiple */
    /* the inner loops for the cache's rows: the table's (rt_kernels) or
     * the portable ones */
    void (*scores)(const float *q, const float *k, int64_t nk, int64_t d, float *scores);
    void (*accumulate)(float *o, const float *v, const float *p, int64_t nk, int64_t d);
    void (*scores_f16)(const float *q, const uint16_t *k, int64_t nk, int64_t d, float *scores);
    void (*scores_i8)(const float *q, const uint8_t *k, int64_t nk, int64_t d, float *scores);
    void (*accumulate_f16)(float *o, const uint16_t *v, const float *p, int64_t nk, int64_t d);
    void (*exp)(float *p, int64_t n, float off);
    float *o;
    float *stats;     /* splits > 1: [unit][row][split] (l, offset) */
    float *partial;   /* splits > 1: [unit][row][split - 1][head_dim] */
#if defined(__x86_64__)
    /* up to RT_ATTN_GROUP_ROWS rows' scores at once, each with the bits of
     * the loop above for the cache's dtype, and their weighted sums of the
     * same V rows, each the bits of accumulate (_f16), and two rows'
     * weights at once, each the bits of exp (NULL, all three: row by row) */
    void (*scores_rows)(const rt_attn_rows_q *q, int nr, const uint8_t *k, int dtype, int64_t nk,
                        int64_t d, float *s, rt_attn_prefetch *pf);
    void (*rows_queries)(const float *const *q, int nr, int64_t d, rt_attn_rows_q *out);
    void (*accumulate_rows)(float *const *o, const float *p, int nr, const uint8_t *v, int dtype,
                            int64_t nk, int64_t d, rt_attn_prefetch *pf);
    void (*exp_pair)(float *pa, float *pb, int64_t n, float off_a, float off_b);
    /* stored float16 / int8 rows as floats (NULL: the rows loops read the
     * stored rows) */
    void (*widen)(const uint8_t *rows, int dtype, uint64_t row_bytes, int64_t n, int64_t d,
                  float *out);
    /* every row of a pass over a key block at once (NULL: the rows loops) */
    void (*block_lanes)(rt_attn_lanes *L, const float *k, const float *v, const float *scale,
                        int64_t t0, int64_t nk);
#endif
} attention_job;

/* Softmax state of one query row over one key range. */
typedef struct {
    const float *q;   /* rotated, scaled */
    float *o;         /* output accumulator [head_dim] */
    ptrdiff_t lo, n;    /* keys visible: positions [lo, n) */
    float phi, off, l, mx;
} row_state;

static ptrdiff_t min_idx(ptrdiff_t a, ptrdiff_t b)
{
    return a < b ? a : b;
}

/* Position s and query head h of row u of a unit. */
static void unit_row(const attention_job *J, ptrdiff_t unit, ptrdiff_t u, ptrdiff_t *s, ptrdiff_t *h)
{
    ptrdiff_t g = unit / J->qblocks, qb = unit % J->qblocks;
    *s = qb * J->qpos + u / J->group;
    *h = g * J->group + u % J->group;
}

/* scores[t] = q . K[t] for the nk rows of one block (row stride D). */
static void block_scores(const float *q, const float *k, int64_t n_keys, int64_t head_dim, float *scores)
{
    ptrdiff_t nk = (ptrdiff_t)n_keys, D = (ptrdiff_t)head_dim;
    for (ptrdiff_t t = 0; t < nk; t += 4)
        k_dot_rows(q, k + t * D, D, (int)min_idx(4, nk - t), scores + t);
}

/* o[i] += p[t] * v_t[i] for the nk keys t of a block in key order, i < D
 * (o never aliases v).  16 columns at a time stay in registers across all
 * the keys: 4 SSE vectors (2 AVX), loaded and stored once per block. */
#define COLS 16

static void add_weighted_rows(float *restrict o, const float *restrict v, const float *p,
                              int64_t n_keys, int64_t head_dim)
{
    ptrdiff_t nk = (ptrdiff_t)n_keys, D = (ptrdiff_t)head_dim;
    ptrdiff_t i = 0;
    for (; i + COLS <= D; i += COLS) {
        float acc[COLS];
#pragma GCC unroll 16
        for (int l = 0; l < COLS; l++)
            acc[l] = o[i + l];
        for (ptrdiff_t t = 0; t < nk; t++) {
            const float *vt = v + t * D + i;
            float pt = p[t];
#pragma GCC unroll 16
            for (int l = 0; l < COLS; l++)
                acc[l] += pt * vt[l];
        }
#pragma GCC unroll 16
        for (int l = 0; l < COLS; l++)
            o[i + l] = acc[l];
    }
    for (; i < D; i++) {
        float acc = o[i];
        for (ptrdiff_t t = 0; t < nk; t++)
            acc += p[t] * v[t * D + i];
        o[i] = acc;
    }
}

/* The portable loops widen up to 4 stored rows (k_dot_rows' count) at a
 * time into RT_ATTN_MAX_HEAD_DIM floats on the stack (fewer rows when
 * head_dim > 256). */
#define CONVERT_ROWS 4

static ptrdiff_t rows_per_convert(ptrdiff_t D)
{
    return min_idx(CONVERT_ROWS, RT_ATTN_MAX_HEAD_DIM / D);
}

static void f16_rows_to_float(const uint16_t *rows, int n, ptrdiff_t D, float *out)
{
    for (ptrdiff_t i = 0; i < n * D; i++)
        out[i] = rt_half_to_float(rows[i]);
}

/* Portable float16 scores: 4 rows converted, then the float dot products. */
static void f16_scores(const float *q, const uint16_t *k, int64_t n_keys, int64_t head_dim, float *scores)
{
    ptrdiff_t nk = (ptrdiff_t)n_keys, D = (ptrdiff_t)head_dim;
    float rows[RT_ATTN_MAX_HEAD_DIM];
    for (ptrdiff_t t = 0, per = rows_per_convert(D); t < nk; t += per) {
        int n = (int)min_idx(per, nk - t);
        f16_rows_to_float(k + t * D, n, D, rows);
        k_dot_rows(q, rows, D, n, scores + t);
    }
}

/* Portable int8 scores: scale * (q . the row's int8 values as floats). */
static void i8_scores(const float *q, const uint8_t *k, int64_t n_keys, int64_t head_dim, float *scores)
{
    ptrdiff_t nk = (ptrdiff_t)n_keys, D = (ptrdiff_t)head_dim;
    float rows[RT_ATTN_MAX_HEAD_DIM];
    size_t row_bytes = rt_kv_row_bytes(LLMC_RT_I8, 0, D), at = rt_kv_scale_offset(D);
    for (ptrdiff_t t = 0, per = rows_per_convert(D); t < nk; t += per) {
        int n = (int)min_idx(per, nk - t);
        for (int j = 0; j < n; j++)
            for (ptrdiff_t i = 0; i < D; i++)
                rows[j * D + i] = (float)(int8_t)k[(size_t)(t + j) * row_bytes + (size_t)i];
        k_dot_rows(q, rows, D, n, scores + t);
        for (int j = 0; j < n; j++) {
            float scale;
            memcpy(&scale, k + (size_t)(t + j) * row_bytes + at, sizeof scale);
            scores[t + j] *= scale;
        }
    }
}

/* Portable float16 weighted sum: 4 rows converted at a time, added in key
 * order (the float loop's bits for the converted values). */
static void f16_accumulate(float *o, const uint16_t *v, const float *p, int64_t n_keys, int64_t head_dim)
{
    ptrdiff_t nk = (ptrdiff_t)n_keys, D = (ptrdiff_t)head_dim;
    float rows[RT_ATTN_MAX_HEAD_DIM];
    for (ptrdiff_t t = 0, per = rows_per_convert(D); t < nk; t += per) {
        int n = (int)min_idx(per, nk - t);
        f16_rows_to_float(v + t * D, n, D, rows);
        add_weighted_rows(o, rows, p + t, n, D);
    }
}

/* scores[t] = q . K[t] for the nk K rows at k (stored rows of the cache). */
static void score_rows(const attention_job *J, const float *q, const uint8_t *k, ptrdiff_t nk,
                       float *scores)
{
    ptrdiff_t D = J->a->D;
    if (J->a->cache->dtype == LLMC_RT_F16)
        J->scores_f16(q, (const uint16_t *)(const void *)k, nk, D, scores);
    else if (J->a->cache->dtype == LLMC_RT_I8)
        J->scores_i8(q, k, nk, D, scores);
    else
        J->scores(q, (const float *)(const void *)k, nk, D, scores);
}

/* o += p[t] V[t] for the nk V rows at v. */
static void accumulate_rows(const attention_job *J, float *o, const uint8_t *v, const float *p,
                            ptrdiff_t nk)
{
    ptrdiff_t D = J->a->D;
    if (rt_kv_row_dtype(J->a->cache->dtype, 1) == LLMC_RT_F16)
        J->accumulate_f16(o, (const uint16_t *)(const void *)v, p, nk, D);
    else
        J->accumulate(o, (const float *)(const void *)v, p, nk, D);
}

static void add_row(float *restrict o, const float *restrict v, float p, ptrdiff_t D)
{
    add_weighted_rows(o, v, &p, 1, D);
}

static void scale_row(float *o, float f, ptrdiff_t D)
{
    for (ptrdiff_t i = 0; i < D; i++)
        o[i] *= f;
}

static void divide_row(float *o, float l, ptrdiff_t D)
{
    for (ptrdiff_t i = 0; i < D; i++)
        o[i] /= l;
}

/* p[t] = exp(p[t] - off) for t < n (KEY_BLOCK here), |error| < 2 ulp, as
 * one loop gcc -O2 vectorizes (libm's expf is a call per score, a third of
 * the prefill time).  Range reduction x = n ln2 + r, |r| <= ln2 / 2, with
 * ln2 in two parts (the high one has 15 bits, so n * hi is exact); exp(r)
 * by its Taylor polynomial of degree 7 (truncation < 2e-9 relative); 2^n
 * built in the exponent bits.  Arguments below -87 give 0, above 88 are
 * taken as 88, NaN gives NaN: all decided on the bit patterns (unsigned
 * order of negative floats, signed order of positive ones), since a float
 * comparison keeps gcc from vectorizing under -ftrapping-math, and the
 * clamps keep the conversion of n to int defined for any input.  The
 * callers never pass more than EXP_HEADROOM except NaN or inf scores. */

static void exp_block(float *p, int64_t n, float off)
{
    for (ptrdiff_t t = 0; t < (ptrdiff_t)n; t++) { /* n <= KEY_BLOCK */
        float x = p[t] - off, xc, res;
        uint32_t ux;
        memcpy(&ux, &x, sizeof ux);
        uint32_t lo = ux < RT_EXP_MIN_BITS ? ux : RT_EXP_MIN_BITS; /* max(x, -87) */
        int32_t uc = (int32_t)lo < RT_EXP_MAX_BITS ? (int32_t)lo : RT_EXP_MAX_BITS; /* min(, 88) */
        uint32_t keep = 0u - (uint32_t)(ux <= RT_EXP_MIN_BITS); /* all ones unless x < -87 */
        uint32_t nan = 0u - (uint32_t)((ux & 0x7FFFFFFFu) > 0x7F800000u);
        memcpy(&xc, &uc, sizeof xc);
        float n = xc * RT_EXP_LOG2E + 12582912.0f - 12582912.0f; /* round to integer */
        float r = xc - n * RT_EXP_LN2_HI - n * RT_EXP_LN2_LO;
        float y = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 +
                  r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
        uint32_t two_n = (uint32_t)((int32_t)n + 127) << 23 & keep, bits;
        memcpy(&res, &two_n, sizeof res);
        res *= y;
        memcpy(&bits, &res, sizeof bits);
        bits = (bits & ~nan) | (RT_EXP_NAN_BITS & nan);
        memcpy(&p[t], &bits, sizeof bits);
    }
}

/* The largest of the KEY_BLOCK scores: 4 independent running maxima. */
static float block_max(const float *p)
{
    float m[4] = {p[0], p[1], p[2], p[3]};
    for (int t = 4; t < KEY_BLOCK; t += 4)
        for (int l = 0; l < 4; l++)
            m[l] = p[t + l] > m[l] ? p[t + l] : m[l];
    float a = m[0] > m[1] ? m[0] : m[1], b = m[2] > m[3] ? m[2] : m[3];
    return a > b ? a : b;
}

/* The sum of the KEY_BLOCK terms: 4 lanes (vectorized), added in a fixed order. */
static float block_sum(const float *p)
{
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int t = 0; t < KEY_BLOCK; t += 4)
        for (int l = 0; l < 4; l++)
            s[l] += p[t + l];
    return (s[0] + s[2]) + (s[1] + s[3]);
}

/* Gemma 2's soft-cap: s = c * tanh(s / c), tanh(x) = 1 - 2 / (exp(2x) + 1)
 * (expf is linked anyway; tanhf would be one more libm function on a
 * device; saturates to +-c, NaN stays NaN).  c == 0: no cap. */
static void cap_scores(float *p, ptrdiff_t n, float c)
{
    for (ptrdiff_t t = 0; c > 0.0f && t < n; t++)
        p[t] = c * (1.0f - 2.0f / (expf(2.0f * p[t] / c) + 1.0f));
}

/* Scores of q against the nk K rows at k, soft-capped. */
static void capped_scores(const attention_job *J, const float *q, const uint8_t *k, ptrdiff_t nk,
                          float *p)
{
    score_rows(J, q, k, nk, p);
    cap_scores(p, nk, J->a->softcap);
}

/* One row's offset for a block whose capped scores p[0..nk) holds (the
 * rest of p padded with -inf, whose weights are 0). */
static inline __attribute__((always_inline)) void block_offset(const attention_job *J,
                                                                row_state *r, ptrdiff_t nk,
                                                                float p[KEY_BLOCK])
{
    for (ptrdiff_t t = nk; t < KEY_BLOCK; t++)
        p[t] = -INFINITY;
    float bm = block_max(p);
    r->mx = bm > r->mx ? bm : r->mx;
    /* the unified offset while the scores stay below phi + EXP_HEADROOM,
     * else the running max (exact fallback); never decreases */
    float off = r->mx < r->phi + EXP_HEADROOM ? r->phi : r->mx;
    if (off != r->off) {
        float f = expf(r->off - off);
        r->l *= f;
        scale_row(r->o, f, J->a->D);
        r->off = off;
    }
}

/* One row's softmax state over nk keys of a block whose capped scores
 * p[0..nk) holds; p becomes their weights exp(score - offset). */
static inline __attribute__((always_inline)) void softmax_block(const attention_job *J,
                                                                 row_state *r, ptrdiff_t nk,
                                                                 float p[KEY_BLOCK])
{
    block_offset(J, r, nk, p);
    J->exp(p, KEY_BLOCK, r->off);
    r->l += block_sum(p);
}

/* One row over nk keys of a block (V rows v) whose capped scores p[0..nk)
 * holds. */
static inline __attribute__((always_inline)) void attend_scored(const attention_job *J,
                                                                 row_state *r, const uint8_t *v,
                                                                 ptrdiff_t nk, float p[KEY_BLOCK])
{
    softmax_block(J, r, nk, p);
    accumulate_rows(J, r->o, v, p, nk);
}

/* One row over keys [b0, b0 + nk) of a block (K rows k, V rows v). */
static void attend_block(const attention_job *J, row_state *r, const uint8_t *k,
                         const uint8_t *v, ptrdiff_t nk)
{
    float p[KEY_BLOCK];
    capped_scores(J, r->q, k, nk, p);
    attend_scored(J, r, v, nk, p);
}

#if defined(__x86_64__)
/* Only x86-64's tables have the rows loops: elsewhere (the Cortex-M core's
 * .text budget, firmware.md) the driver has no group path. */

/* The K and V rows of kv head g at the positions [t0, t1) of one key block,
 * which lies inside one cache chunk: its rows are contiguous, so a row is
 * found without cache_row's division. */
typedef struct {
    const uint8_t *k, *v; /* the rows of position t0 */
    ptrdiff_t t0, t1;
} key_block;

static key_block block_at(const attn_shape *a, ptrdiff_t g, ptrdiff_t t0, ptrdiff_t t1)
{
    key_block b = {cache_row(a, 0, g, t0), cache_row(a, 1, g, t0), t0, t1};
    return b;
}

/* Row t of the block: K (which = 0) or V (which = 1). */
static const uint8_t *block_row(const attn_shape *a, const key_block *b, int which, ptrdiff_t t)
{
    return (which ? b->v : b->k) + (size_t)(t - b->t0) * a->row_bytes[which];
}

/* The K and V rows the rows loops read for a key block: the stored ones,
 * or the block widened to float32 once for all the row groups of a pass
 * (rt_kernels.attn_widen_rows).  Widened int8 keys leave their scales in
 * the stored rows, and each score is multiplied by its row's scale as the
 * int8 loops do after the sum. */
typedef struct {
    const uint8_t *k, *v;       /* the rows of the block's first position */
    int k_dtype, v_dtype;       /* LLMC_RT_F32 once widened */
    size_t k_bytes, v_bytes;    /* row strides */
    bool scaled;                /* widened int8 keys: scores times the stored scales */
} loop_rows;

/* Keys per block times head_dim floats that a pass widens on its stack
 * (2 x 16 KiB): blocks of head_dim <= 128. */
#define WIDEN_FLOATS (KEY_BLOCK * 128)

/* The block's rows as the rows loops (or the lanes loop) read them:
 * widened into kf and vf where `wide` asks for it (the lanes loop, which
 * reads float32 rows; a pass of more than one row group, which reads the
 * block more than once), the table can, and the cache stores float16 or
 * int8; else the stored rows. */
static loop_rows loop_rows_for(const attention_job *J, const key_block *blk, bool wide,
                               float *kf, float *vf)
{
    const attn_shape *a = J->a;
    int dtype = a->cache->dtype;
    loop_rows w = {blk->k, blk->v, dtype, rt_kv_row_dtype(dtype, 1), a->row_bytes[0],
                   a->row_bytes[1], false};
    ptrdiff_t n = blk->t1 - blk->t0;
    if (!wide || !J->widen || dtype == LLMC_RT_F32 || n * a->D > WIDEN_FLOATS)
        return w;
    J->widen(blk->k, dtype, a->row_bytes[0], n, a->D, kf);
    J->widen(blk->v, w.v_dtype, a->row_bytes[1], n, a->D, vf);
    loop_rows wide_rows = {(const uint8_t *)kf, (const uint8_t *)vf, LLMC_RT_F32, LLMC_RT_F32,
                           (size_t)a->D * sizeof(float), (size_t)a->D * sizeof(float),
                           dtype == LLMC_RT_I8};
    return wide_rows;
}

/* The scales of the nk stored int8 key rows from `rows` (a block's, from
 * some position on). */
static void key_scales(const attn_shape *a, const uint8_t *rows, ptrdiff_t nk, float *scale)
{
    size_t at = (size_t)rt_kv_scale_offset(a->D);
    for (ptrdiff_t i = 0; i < nk; i++)
        memcpy(&scale[i], rows + (size_t)i * a->row_bytes[0] + at, sizeof scale[i]);
}

/* The weights of the n rows of a group over the same keys (the scores
 * in s[i], padded to KEY_BLOCK), two rows at a time; an odd count's last
 * row as a pair with itself, whose 16-lane loop took 0.97x the compute
 * time of the decode step's attention at depth 4096 against the table's
 * 8-lane attn_exp (the same bits). */
static void group_weights(const attention_job *J, row_state *const *r, float (*s)[KEY_BLOCK],
                          int n)
{
    for (int i = 0; i < n; i += 2) {
        int b = i + 1 < n ? i + 1 : i;
        J->exp_pair(s[i], s[b], KEY_BLOCK, r[i]->off, r[b]->off);
    }
}

/* The queries a pass of one row group keeps in the table's layout from
 * key block to key block (a decode step's GQA group sees every key of a
 * block), and the rows they are of. */
typedef struct {
    rt_attn_rows_q *q; /* NULL: a pass of several groups, which holds none */
    const row_state *of[RT_ATTN_GROUP_ROWS];
    int n;
} group_queries;

/* The n rows r's scores of the nk key rows k (stored as `dtype`) into s,
 * from the queries g holds where they are these rows', else laid out
 * again (into g, or into this call's frame when g holds none: the frame
 * is gone before the weighted sums run, where a task's stack is deepest). */
static __attribute__((noinline)) void group_scores(const attention_job *J, group_queries *g,
                                                   row_state *const *r, int n,
                                                   const uint8_t *k, int dtype, ptrdiff_t nk,
                                                   float *s, rt_attn_prefetch *pf)
{
    rt_attn_rows_q own;
    rt_attn_rows_q *q = g->q ? g->q : &own;
    bool held = g->q && g->n == n;
    for (int i = 0; held && i < n; i++)
        held = g->of[i] == r[i];
    if (!held) {
        const float *rows[RT_ATTN_GROUP_ROWS];
        for (int i = 0; i < n; i++)
            rows[i] = r[i]->q, g->of[i] = r[i];
        g->n = n;
        J->rows_queries(rows, n, J->a->D, q);
    }
    J->scores_rows(q, n, k, dtype, nk, J->a->D, s, pf);
}

/* The rows of a group (up to RT_ATTN_GROUP_ROWS) over the keys [k0, k1)
 * each sees of the key block blk (its rows w for the rows loops): their
 * scores in one sweep over the keys any of them sees (a score's bits do
 * not depend on the keys scored with it), then, where they all see the
 * same keys (a decode step's GQA group), their sums in one sweep over the
 * V rows; the loops step pf.  Rows that see no key of the block skip it. */
static void attend_block_rows(const attention_job *J, row_state *rows, int nr,
                              const key_block *blk, const loop_rows *w, group_queries *gq,
                              rt_attn_prefetch *pf)
{
    ptrdiff_t b0 = blk->t0, b1 = blk->t1, D = J->a->D, lo = b1, hi = b0;
    ptrdiff_t k0[RT_ATTN_GROUP_ROWS], k1[RT_ATTN_GROUP_ROWS];
    float s[RT_ATTN_GROUP_ROWS][KEY_BLOCK];
    row_state *r[RT_ATTN_GROUP_ROWS];
    int n = 0;
    for (int i = 0; i < nr; i++) {
        ptrdiff_t a0 = rows[i].lo > b0 ? rows[i].lo : b0, a1 = min_idx(b1, rows[i].n);
        if (a1 <= a0)
            continue;
        k0[n] = a0, k1[n] = a1, r[n] = &rows[i];
        lo = min_idx(lo, a0);
        hi = a1 > hi ? a1 : hi;
        n++;
    }
    if (!n)
        return;
    group_scores(J, gq, r, n, w->k + (size_t)(lo - b0) * w->k_bytes, w->k_dtype, hi - lo, s[0],
                 pf);
    float scale[KEY_BLOCK];
    if (w->scaled)
        key_scales(J->a, block_row(J->a, blk, 0, lo), hi - lo, scale);
    bool same = true;
    for (int i = 0; i < n; i++) {
        for (ptrdiff_t t = 0; w->scaled && t < hi - lo; t++)
            s[i][t] *= scale[t];
        cap_scores(s[i], hi - lo, J->a->softcap);
        same &= k0[i] == lo && k1[i] == hi;
    }
    if (!same) {
        for (int i = 0; i < n; i++) {
            float p[KEY_BLOCK];
            memcpy(p, s[i] + (k0[i] - lo), (size_t)(k1[i] - k0[i]) * sizeof *p);
            attend_scored(J, r[i], block_row(J->a, blk, 1, k0[i]), k1[i] - k0[i], p);
        }
        return;
    }
    float *o[RT_ATTN_GROUP_ROWS];
    for (int i = 0; i < n; i++) {
        block_offset(J, r[i], hi - lo, s[i]);
        o[i] = r[i]->o;
    }
    group_weights(J, r, s, n);
    for (int i = 0; i < n; i++)
        r[i]->l += block_sum(s[i]);
    J->accumulate_rows(o, s[0], n, w->v + (size_t)(lo - b0) * w->v_bytes, w->v_dtype, hi - lo, D,
                       pf);
}
#endif

/* The query row u of a unit into r (rotated and scaled into qbuf). */
static void start_row(const attention_job *J, ptrdiff_t unit, ptrdiff_t u, ptrdiff_t split,
                      float *qbuf, row_state *r)
{
    const attn_shape *a = J->a;
    ptrdiff_t D = a->D, rot = a->rot, s, h;
    float normed[RT_ATTN_MAX_HEAD_DIM];
    unit_row(J, unit, u, &s, &h);
    const float *qs = norm_head(a, (const float *)J->q->data + s * a->H * D, h, a->q_norm, a->q_span,
                                normed);
    ptrdiff_t pos = J->P + s;
    if (rot)
        k_rope_row(qs, qbuf, D, rot, (const float *)J->cos->data + pos * rot,
                   (const float *)J->sin->data + pos * rot);
    else
        memcpy(qbuf, qs, (size_t)D * sizeof *qbuf);
    for (ptrdiff_t i = 0; i < D; i++)
        qbuf[i] *= a->scale;
    r->q = qbuf;
    r->n = pos + 1;
    r->lo = rt_window_low((uint32_t)a->window, (uint32_t)pos);
    r->o = split == 0 ? J->o + (s * a->H + h) * D
                      : J->partial + ((unit * J->unit_rows + u) * (J->splits - 1) + split - 1) * D;
    memset(r->o, 0, (size_t)D * sizeof *r->o);
    ptrdiff_t g = h / J->group;
    float first, last;
    capped_scores(J, qbuf, cache_row(a, 0, g, r->lo), 1, &first);
    capped_scores(J, qbuf, cache_row(a, 0, g, pos), 1, &last);
    r->phi = r->off = first > last ? first : last;
    r->l = 0.0f;
    r->mx = -INFINITY;
}

#if defined(__x86_64__)
/* Key blocks ahead of the pass whose K and V rows it prefetches.  Decode at
 * depth reads the cache from memory once (one sweep of a row group over
 * each block), in blocks of 8 KiB of K and 8 KiB of V
 * (float32, head_dim 64) on different pages, and computes between them, so
 * the hardware prefetchers stay behind.  Only decode-like calls prefetch
 * (one query block per kv head, so each key block is read by one pass): in
 * a prefill the passes of the query blocks before have just read the same
 * keys, and the prefetches cost instructions only (0.97x the time without
 * them at S 512, at depth 0 and 3584).
 *
 * A pass with the rows loops hands them a cursor over the block's lines
 * (prefetch_cursor), a K and a V line per step of their work, and
 * prefetches what they leave after the block; a pass of single-row loops
 * (the AVX2 and AVX-VNNI tables) takes the cursor's lines in equal shares,
 * one before each row (prefetch_lines): 0.76-0.83x the attention time of
 * the whole block prefetched before the first row (Intel Xeon family 6
 * model 167, `--isa avx2`, float32 and float16 caches at depth 4096).
 * Issued at once, the 256 lines of a
 * float32 block wait for the core's ~16 line fill buffers, and the core
 * stalls until they drain: 24 layers' caches at depth 4096 (2 MiB pages,
 * two threads, Intel Xeon family 6 model 207) took about the compute time
 * of the calls (every chunk on one slot) plus the time a plain read of
 * the bytes takes, and 1.19x the paced time (no prefetch at all: 1.46x).
 * The lines go K and V in turn: the scores take all of a block's K lines
 * before the sums start, and a cursor that gave the score loop K lines
 * only and the sum loop V lines only took 1.05x the time (median of 12
 * alternations).  Lines at half that rate (the rest after the block), to
 * L2 only (prefetcht1, prefetcht2) and 4 blocks ahead all measured within
 * 5 %. */
#define PREFETCH_BLOCKS 2

/* The K and V rows of kv head g at positions [t, t + KEY_BLOCK) (below
 * end) as a cursor a pass steps while it computes (rt_attn_prefetch), only
 * t's chunk: the rows of a block straddling a chunk's end past it are left
 * to the hardware prefetchers. */
static rt_attn_prefetch prefetch_cursor(const attn_shape *a, ptrdiff_t g, ptrdiff_t t,
                                        ptrdiff_t end)
{
    rt_attn_prefetch pf = {{NULL, NULL}, {NULL, NULL}};
    ptrdiff_t stop = min_idx(min_idx(t + KEY_BLOCK, (t / a->chunk + 1) * a->chunk), end);
    for (int which = 0; which < 2 && stop > t; which++) {
        const char *p = (const char *)cache_row(a, which, g, t);
        pf.next[which] = p - ((uintptr_t)p & 63u); /* the first row's line */
        pf.end[which] = p + (size_t)(stop - t) * a->row_bytes[which];
    }
    return pf;
}

/* The cursor's next `lines` K lines and `lines` V lines, in turn. */
static inline __attribute__((always_inline)) void prefetch_lines(rt_attn_prefetch *pf,
                                                                 ptrdiff_t lines)
{
    for (ptrdiff_t i = 0; i < lines; i++) {
        rt_attn_prefetch_line(pf, 0);
        rt_attn_prefetch_line(pf, 1);
    }
}

/* Lines of the cursor's longer range per pass of `nr` single-row loops. */
static ptrdiff_t lines_per_row(const rt_attn_prefetch *pf, int nr)
{
    ptrdiff_t most = 0;
    for (int which = 0; which < 2; which++) {
        ptrdiff_t left = pf->end[which] > pf->next[which] ? pf->end[which] - pf->next[which] : 0;
        most = (left + 63) / 64 > most ? (left + 63) / 64 : most;
    }
    return (most + nr - 1) / nr;
}

/* The lines a cursor has left after a block's rows (more lines than the
 * rows loops took steps: float16 and int8 rows, a head_dim not a multiple
 * of 32, a short block). */
static inline __attribute__((always_inline)) void prefetch_rest(const rt_attn_prefetch *pf)
{
    for (int which = 0; which < 2; which++)
        for (const char *p = pf->next[which]; p < pf->end[which]; p += 64)
            __builtin_prefetch(p);
}
#endif

/* The key blocks: on the KEY_BLOCK grid from the split's first key t0 (a
 * row's bits do not depend on which rows share its pass), the first one
 * holding key lo, each cut at the chunk's end and at `end`. */
static ptrdiff_t first_block(ptrdiff_t lo, ptrdiff_t t0)
{
    ptrdiff_t start = lo / KEY_BLOCK * KEY_BLOCK;
    return start > t0 ? start : t0;
}

static ptrdiff_t block_end(const attn_shape *a, ptrdiff_t b0, ptrdiff_t end)
{
    return min_idx(min_idx(b0 + KEY_BLOCK, (b0 / a->chunk + 1) * a->chunk), end);
}

/* Rows u0 .. u0 + nr - 1 of a unit after the keys of their split: the
 * outputs divided by the sums, or (split keys) the sums and offsets kept
 * for combine_row. */
static void finish_rows(const attention_job *J, ptrdiff_t unit, ptrdiff_t split, ptrdiff_t u0,
                        const row_state *rows, int nr)
{
    for (int i = 0; i < nr; i++) {
        if (J->splits == 1) {
            divide_row(rows[i].o, rows[i].l, J->a->D);
            continue;
        }
        float *st = J->stats + ((unit * J->unit_rows + u0 + i) * J->splits + split) * 2;
        st[0] = rows[i].l;
        st[1] = rows[i].off;
    }
}

#if defined(__x86_64__)
/* Units of more rows than LANES_MIN_ROWS take the lanes loop: with fewer
 * (a decode step's GQA group, 1..8 rows) most of its 16 lanes would idle
 * and the rows loops do less work. */
#define LANES_MIN_ROWS 8

/* The first key block of the unit's rows in the split [t0, t1) and the
 * end of their keys, and whether they can take the table's lanes loop: no
 * soft-cap, head_dim a multiple of 8 within the lanes, float32 rows (the
 * cache's, or a block widened once for the unit). */
static bool lanes_fit(const attention_job *J, ptrdiff_t unit, ptrdiff_t used, ptrdiff_t t0,
                      ptrdiff_t t1, ptrdiff_t *first, ptrdiff_t *end)
{
    const attn_shape *a = J->a;
    if (!J->block_lanes || used <= LANES_MIN_ROWS || a->D % 8 || a->D > RT_ATTN_LANES_DIM ||
        a->softcap > 0.0f || J->P + J->S > INT32_MAX)
        return false;
    if (a->cache->dtype == LLMC_RT_F32 && a->row_bytes[0] != (size_t)a->D * sizeof(float))
        return false;
    /* rows are in position order: the first sees the lowest keys, the last
     * the most */
    ptrdiff_t s0, s1, h;
    unit_row(J, unit, 0, &s0, &h);
    unit_row(J, unit, used - 1, &s1, &h);
    ptrdiff_t lo = rt_window_low((uint32_t)a->window, (uint32_t)(J->P + s0));
    *first = first_block(lo, t0);
    *end = min_idx(J->P + s1 + 1, t1);
    return true;
}

/* Rows just started (start_row: outputs 0) into the lanes of L (the lanes
 * past them see no key). */
static void rows_to_lanes(const row_state *rows, int nr, ptrdiff_t D, rt_attn_lanes *L)
{
    memset(L->q, 0, sizeof L->q[0] * (size_t)D);
    memset(L->o, 0, sizeof L->o[0] * (size_t)D);
    for (int r = 0; r < RT_ATTN_LANES; r++) {
        bool row = r < nr;
        for (ptrdiff_t i = 0; row && i < D; i++)
            L->q[i][r] = rows[r].q[i];
        L->phi[r] = row ? rows[r].phi : 0.0f;
        L->off[r] = row ? rows[r].off : 0.0f;
        L->l[r] = row ? rows[r].l : 0.0f;
        L->mx[r] = row ? rows[r].mx : -INFINITY;
        L->lo[r] = row ? (int32_t)rows[r].lo : 0;
        L->n[r] = row ? (int32_t)rows[r].n : 0;
    }
    L->d = D;
}

static void lanes_to_rows(const rt_attn_lanes *L, int nr, ptrdiff_t D, row_state *rows)
{
    for (int r = 0; r < nr; r++) {
        for (ptrdiff_t i = 0; i < D; i++)
            rows[r].o[i] = L->o[i][r];
        rows[r].off = L->off[r];
        rows[r].l = L->l[r];
        rows[r].mx = L->mx[r];
    }
}

/* All the rows of a unit (one pass) over the keys [t0, t1) of one split as
 * groups of 16 lanes, each key block (widened once) run through every
 * group while it is in L1.  False (nothing done) where the unit does not
 * fit the lanes loop. */
static bool attend_lanes(const attention_job *J, ptrdiff_t unit, ptrdiff_t split, ptrdiff_t used,
                         ptrdiff_t t0, ptrdiff_t t1)
{
    const attn_shape *a = J->a;
    ptrdiff_t D = a->D, g = unit / J->qblocks, b0, end;
    if (used > J->pass_rows || !lanes_fit(J, unit, used, t0, t1, &b0, &end))
        return false;
    rt_attn_lanes L[PASS_ROWS / RT_ATTN_LANES] __attribute__((aligned(64))); /* a column a line */
    row_state rows[PASS_ROWS];
    float qbuf[RT_ATTN_LANES * RT_ATTN_LANES_DIM], kf[WIDEN_FLOATS], vf[WIDEN_FLOATS];
    int groups = (int)((used + RT_ATTN_LANES - 1) / RT_ATTN_LANES);
    for (int i = 0; i < groups; i++) {
        int nr = (int)min_idx(RT_ATTN_LANES, used - i * RT_ATTN_LANES);
        for (int r = 0; r < nr; r++)
            start_row(J, unit, i * RT_ATTN_LANES + r, split, qbuf + r * D,
                      &rows[i * RT_ATTN_LANES + r]);
        rows_to_lanes(rows + i * RT_ATTN_LANES, nr, D, &L[i]);
    }
    while (b0 < end) {
        ptrdiff_t b1 = block_end(a, b0, end);
        key_block blk = block_at(a, g, b0, b1);
        loop_rows w = loop_rows_for(J, &blk, true, kf, vf);
        float scale[KEY_BLOCK];
        if (w.scaled)
            key_scales(a, blk.k, b1 - b0, scale);
        for (int i = 0; i < groups; i++)
            J->block_lanes(&L[i], (const float *)(const void *)w.k,
                           (const float *)(const void *)w.v, w.scaled ? scale : NULL, b0, b1 - b0);
        b0 = b1;
    }
    for (int i = 0; i < groups; i++) {
        int nr = (int)min_idx(RT_ATTN_LANES, used - i * RT_ATTN_LANES);
        lanes_to_rows(&L[i], nr, D, rows + i * RT_ATTN_LANES);
    }
    finish_rows(J, unit, split, 0, rows, (int)used);
    return true;
}
#endif

/* Rows [u0, u1) of a unit over the keys [t0, t1) of one split. */
static void attend_pass(const attention_job *J, ptrdiff_t unit, ptrdiff_t split, ptrdiff_t u0,
                        ptrdiff_t u1, ptrdiff_t t0, ptrdiff_t t1)
{
    const attn_shape *a = J->a;
    ptrdiff_t D = a->D, end = t0, lo = t1, g = unit / J->qblocks;
    float qbuf[PASS_FLOATS];
    row_state rows[PASS_ROWS];
#if defined(__x86_64__)
    /* a pass of one row group reads the stored rows (loop_rows_for), so
     * the widening buffer of K holds the group's queries instead */
    union {
        float f[WIDEN_FLOATS];
        rt_attn_rows_q q;
    } kf;
    float vf[WIDEN_FLOATS];
    bool grouped = J->scores_rows && D <= RT_ATTN_ROWS_DIM;
    group_queries gq;
    gq.q = u1 - u0 <= RT_ATTN_GROUP_ROWS ? &kf.q : NULL;
    gq.n = 0;
#else
    const bool grouped = false;
#endif
    int nr = 0;
    for (ptrdiff_t u = u0; u < u1; u++, nr++) {
        start_row(J, unit, u, split, qbuf + nr * D, &rows[nr]);
        end = rows[nr].n > end ? rows[nr].n : end;
        lo = min_idx(rows[nr].lo, lo);
    }
    end = min_idx(end, t1);
    /* a row reads only its visible keys */
    for (ptrdiff_t b0 = first_block(lo, t0); b0 < end;) {
        ptrdiff_t b1 = block_end(a, b0, end);
#if defined(__x86_64__)
        key_block blk = block_at(a, g, b0, b1);
        rt_attn_prefetch pf = {{NULL, NULL}, {NULL, NULL}};
        bool paced = J->qblocks == 1;
        if (paced)
            pf = prefetch_cursor(a, g, b0 + PREFETCH_BLOCKS * KEY_BLOCK, end);
        ptrdiff_t share = paced && !grouped && nr ? lines_per_row(&pf, nr) : 0;
        loop_rows w = loop_rows_for(J, &blk, nr > RT_ATTN_GROUP_ROWS, kf.f, vf);
        for (int i = 0; grouped && i < nr; i += RT_ATTN_GROUP_ROWS)
            attend_block_rows(J, rows + i, (int)min_idx(RT_ATTN_GROUP_ROWS, nr - i), &blk, &w, &gq,
                              paced ? &pf : NULL);
#endif
        for (int i = 0; !grouped && i < nr; i++) {
            ptrdiff_t k0 = rows[i].lo > b0 ? rows[i].lo : b0, k1 = min_idx(b1, rows[i].n);
#if defined(__x86_64__)
            prefetch_lines(&pf, share);
#endif
            if (k1 > k0)
                attend_block(J, &rows[i], cache_row(a, 0, g, k0), cache_row(a, 1, g, k0), k1 - k0);
        }
#if defined(__x86_64__)
        if (paced)
            prefetch_rest(&pf);
#endif
        b0 = b1;
    }
    finish_rows(J, unit, split, u0, rows, nr);
}

/* Query rows of a unit that exist (the last query block may be short). */
static ptrdiff_t unit_rows_used(const attention_job *J, ptrdiff_t unit)
{
    ptrdiff_t first = unit % J->qblocks * J->qpos;
    return min_idx(J->unit_rows, (J->S - first) * J->group);
}

/* Task i: unit i / splits over key range i % splits, PASS rows at a time. */
static void attention_task(void *ctx, uint32_t i)
{
    const attention_job *J = ctx;
    ptrdiff_t unit = i / J->splits, split = i % J->splits;
    ptrdiff_t t0 = J->key0 + split * J->split_keys;
    ptrdiff_t t1 = min_idx(t0 + J->split_keys, J->P + J->S);
    ptrdiff_t used = unit_rows_used(J, unit);
#if defined(__x86_64__)
    if (attend_lanes(J, unit, split, used, t0, t1))
        return;
#endif
    for (ptrdiff_t u = 0; u < used; u += J->pass_rows)
        attend_pass(J, unit, split, u, min_idx(u + J->pass_rows, used), t0, t1);
}

/* o = sum_j o_j exp(off_j - M) / sum_j l_j exp(off_j - M) over the splits
 * j in order (M the largest offset of a split that saw keys); with the
 * unified offset every factor is 1 and the partials just add. */
static void combine_row(const attention_job *J, ptrdiff_t unit, ptrdiff_t u, float *o)
{
    ptrdiff_t D = J->a->D, n = J->splits;
    const float *st = J->stats + (unit * J->unit_rows + u) * n * 2;
    const float *part = J->partial + (unit * J->unit_rows + u) * (n - 1) * D;
    float M = -INFINITY, L = 0.0f;
    for (ptrdiff_t j = 0; j < n; j++)
        if (st[2 * j] > 0.0f && st[2 * j + 1] > M)
            M = st[2 * j + 1];
    for (ptrdiff_t j = 0; j < n; j++) {
        float l = st[2 * j], f = st[2 * j + 1] == M ? 1.0f : expf(st[2 * j + 1] - M);
        if (!(l > 0.0f)) /* no key of this range was visible (or all underflowed) */
            continue;
        if (j == 0 && f != 1.0f)
            scale_row(o, f, D);
        else if (j > 0)
            add_row(o, part + (j - 1) * D, f, D);
        L += l * f;
    }
    divide_row(o, L, D);
}

static void combine_splits(const attention_job *J)
{
    const attn_shape *a = J->a;
    for (ptrdiff_t unit = 0; unit < a->G * J->qblocks; unit++)
        for (ptrdiff_t u = 0; u < unit_rows_used(J, unit); u++) {
            ptrdiff_t s, h;
            unit_row(J, unit, u, &s, &h);
            combine_row(J, unit, u, J->o + (s * a->H + h) * a->D);
        }
}

/* Units, rows per pass and the key split, from the shapes only. */
static void plan_work(attention_job *J)
{
    const attn_shape *a = J->a;
    ptrdiff_t D = a->D, first = rt_window_low((uint32_t)a->window, (uint32_t)J->P);
    J->key0 = first / KEY_BLOCK * KEY_BLOCK;
    ptrdiff_t keys = J->P + J->S - J->key0;
    J->pass_rows = min_idx(PASS_ROWS, PASS_FLOATS / D);
    J->qpos = min_idx(J->S, J->pass_rows / J->group > 1 ? J->pass_rows / J->group : 1);
    J->unit_rows = J->qpos * J->group;
    J->qblocks = (J->S + J->qpos - 1) / J->qpos;
    ptrdiff_t units = a->G * J->qblocks, rows = units * J->unit_rows;
    /* rows * (2 * splits + D * (splits - 1)) <= SCRATCH_FLOATS */
    ptrdiff_t fit = (SCRATCH_FLOATS / rows + D) / (D + 2);
    ptrdiff_t want = (keys + SPLIT_MIN_KEYS - 1) / SPLIT_MIN_KEYS;
    J->splits = units < SPLIT_UNITS ? min_idx(want, fit) : 1;
    if (J->splits < 2) {
        J->splits = 1;
        J->split_keys = keys;
        return;
    }
    /* whole key blocks per range; rounding up may leave fewer ranges */
    ptrdiff_t per = (keys + J->splits - 1) / J->splits;
    J->split_keys = (per + KEY_BLOCK - 1) / KEY_BLOCK * KEY_BLOCK;
    J->splits = (keys + J->split_keys - 1) / J->split_keys;
}

/* The table's inner loops where it has them. */
static void use_table_loops(attention_job *J, const rt_kernels *kt)
{
    if (!kt)
        return;
    if (kt->attn_scores)
        J->scores = kt->attn_scores;
    if (kt->attn_accumulate)
        J->accumulate = kt->attn_accumulate;
    if (kt->attn_scores_f16)
        J->scores_f16 = kt->attn_scores_f16;
    if (kt->attn_scores_i8)
        J->scores_i8 = kt->attn_scores_i8;
    if (kt->attn_accumulate_f16)
        J->accumulate_f16 = kt->attn_accumulate_f16;
    if (kt->attn_exp)
        J->exp = kt->attn_exp;
#if defined(__x86_64__)
    if (kt->attn_scores && kt->attn_scores_f16 && kt->attn_scores_i8 && kt->attn_accumulate &&
        kt->attn_accumulate_f16 && kt->attn_exp && kt->attn_scores_rows &&
        kt->attn_rows_queries && kt->attn_accumulate_rows && kt->attn_exp_pair) {
        J->scores_rows = kt->attn_scores_rows;
        J->rows_queries = kt->attn_rows_queries;
        J->accumulate_rows = kt->attn_accumulate_rows;
        J->exp_pair = kt->attn_exp_pair;
        J->widen = kt->attn_widen_rows;
    }
    if (J->scores_rows && J->widen)
        J->block_lanes = kt->attn_block_lanes;
#endif
}

/* The op resolver's KV cache entries: each cache dtype's loops, stored
 * field by field (an initialized struct would be one constant in .rodata
 * that links every dtype's loops). */
static void set_loops(struct llmc_rt_kv_loops *l, int dtype,
                      void (*store_k)(const float *, ptrdiff_t, uint8_t *),
                      void (*store_v)(const float *, ptrdiff_t, uint8_t *))
{
    l->dtype = dtype;
    l->store_k = store_k;
    l->store_v = store_v;
}

void llmc_rt_kv_Float32(struct llmc_rt_kv_loops *loops)
{
    set_loops(loops, LLMC_RT_F32, store_row_f32, store_row_f32);
}

void llmc_rt_kv_Float16(struct llmc_rt_kv_loops *loops)
{
    set_loops(loops, LLMC_RT_F16, store_row_f16, store_row_f16);
    loops->scores_f16 = f16_scores;
    loops->accumulate_f16 = f16_accumulate;
}

void llmc_rt_kv_Int8(struct llmc_rt_kv_loops *loops)
{
    set_loops(loops, LLMC_RT_I8, store_row_i8, store_row_f16);
    loops->scores_i8 = i8_scores;
    loops->accumulate_f16 = f16_accumulate;
}

llmc_rt_status k_attention_loops(const rt_kernels *kt, llmc_rt_kv_fn kv,
                                 const rt_attention_attrs *a, const rt_view *q, const rt_view *k,
                                 const rt_view *v, const rt_view *cos, const rt_view *sin,
                                 const rt_kv_cache *cache, int64_t P, rt_view *o,
                                 const rt_parallel *par, llmc_rt_error *err)
{
    llmc_rt_status st = check_views(a, q, k, v, cos, sin, P, o, err);
    if (st)
        return st;
    attn_shape sh = {(ptrdiff_t)a->heads, (ptrdiff_t)a->kv_heads, (ptrdiff_t)a->head_dim,
                     (ptrdiff_t)a->rotary_dim, a->scale, a->q_norm ? a->q_norm->data : NULL,
                     a->k_norm ? a->k_norm->data : NULL, a->q_norm ? (ptrdiff_t)a->q_norm->dims[0] : 0,
                     a->k_norm ? (ptrdiff_t)a->k_norm->dims[0] : 0, a->epsilon,
                     (ptrdiff_t)(a->window > P + q->dims[1] ? 0 : a->window), /* wider: none */
                     a->softcap, cache, (ptrdiff_t)cache->chunk, {-1, NULL, NULL, NULL, NULL, NULL}, {0, 0}};
    if (kv)
        kv(&sh.loops);
    sh.row_bytes[0] = (size_t)rt_kv_row_bytes(cache->dtype, 0, a->head_dim);
    sh.row_bytes[1] = (size_t)rt_kv_row_bytes(cache->dtype, 1, a->head_dim);
    if (sh.loops.dtype != cache->dtype)
        return rt_fail(err, LLMC_RT_E_EXEC, "KV cache dtype %d without its loops (the op "
                       "resolver's entry is for dtype %d)", RT_N(cache->dtype, sh.loops.dtype),
                       NULL);
    ptrdiff_t S = (ptrdiff_t)q->dims[1];
    /* causal: row s reads positions <= P + s, so all new rows can go in first */
    append_rows(&sh, k, v, cos, sin, S, (ptrdiff_t)P);
    if (S == 0)
        return LLMC_RT_OK;
    float scratch[SCRATCH_FLOATS];
    attention_job J = {&sh, q, cos, sin, S, (ptrdiff_t)P, sh.H / sh.G, 0, 0, 0, 0, 0, 0, 0,
                       block_scores, add_weighted_rows, sh.loops.scores_f16, sh.loops.scores_i8,
                       sh.loops.accumulate_f16, exp_block, o->data, scratch, NULL,
#if defined(__x86_64__)
                       NULL, NULL, NULL, NULL, NULL, NULL
#endif
    };
    use_table_loops(&J, kt);
    plan_work(&J);
    J.partial = scratch + sh.G * J.qblocks * J.unit_rows * J.splits * 2;
    int64_t tasks = (int64_t)sh.G * J.qblocks * J.splits;
    if (tasks > UINT32_MAX)
        return rt_fail(err, LLMC_RT_E_EXEC, "Attention over %d query rows is too large",
                       RT_N(S), NULL);
    /* 2 D multiply-adds per cached position per (row, head) */
    bool small = 2 * (int64_t)S * (P + S) * a->heads * a->head_dim < PARALLEL_MIN_MACS;
    rt_parallel_for(small ? NULL : par, (uint32_t)tasks, attention_task, &J);
    if (J.splits > 1)
        combine_splits(&J);
    return LLMC_RT_OK;
}

llmc_rt_status k_attention_kernels(const rt_kernels *kt, const rt_attention_attrs *a,
                                   const rt_view *q, const rt_view *k, const rt_view *v,
                                   const rt_view *cos, const rt_view *sin,
                                   const rt_kv_cache *cache, int64_t P, rt_view *o,
                                   const rt_parallel *par, llmc_rt_error *err)
{
#define EVERY_CACHE_(Name) llmc_rt_kv_##Name,
    static const llmc_rt_kv_fn every_cache[LLMC_RT_KV_COUNT] = {LLMC_RT_KV_CACHES(EVERY_CACHE_)};
    int index = rt_kv_cache_index(cache->dtype);
    if (index < 0)
        return rt_fail(err, LLMC_RT_E_EXEC, "KV cache dtype %d is not Float32, Float16 or Int8",
                       RT_N(cache->dtype), NULL);
    return k_attention_loops(kt, every_cache[index], a, q, k, v, cos, sin, cache, P, o, par,
                             err);
}

llmc_rt_status k_attention(const rt_attention_attrs *a, const rt_view *q, const rt_view *k,
                           const rt_view *v, const rt_view *cos, const rt_view *sin,
                           const rt_kv_cache *cache, int64_t P, rt_view *o,
                           const rt_parallel *par, llmc_rt_error *err)
{
    return k_attention_kernels(NULL, a, q, k, v, cos, sin, cache, P, o, par, err);
}
