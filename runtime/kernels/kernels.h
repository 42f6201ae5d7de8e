/* Internal: reference fp32 kernels in portable C.
 *
 * A kernel gets dense row-major views (llmc_rt_tensor: dtype, rank, dims,
 * data) whose dims the interpreter evaluated at this call's (S, P) and
 * checked against the tensors' reserved bytes, so every element inside the
 * dims of a view is addressable.  Kernels check how the views relate
 * (broadcasting, matmul shapes, axes, dtypes) and fail with LLMC_RT_E_EXEC
 * plus a message (the caller prefixes the op); they never touch memory
 * outside the views and never allocate.  Inputs are only read. */
#ifndef LLMC_RT_KERNELS_H
#define LLMC_RT_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "llmc_rt_internal.h"
#include "quant_format.h"
#include "tensor_traits.h"

#define RT_R LLMC_RT_MAX_RANK

typedef llmc_rt_tensor rt_view;

struct rt_kernels; /* kernel_table.h: a target's micro-kernels */

/* The session's parallel-for (llmc_rt.h); a NULL pointer or fn = serial. */
typedef struct {
    llmc_rt_parallel_fn fn;
    void *pool;
} rt_parallel;

/* ref_common.c: task(ctx, i) for every i in [0, n), through par when it has
 * a fn and n > 1, else in order on this thread.  Kernels pick n from the
 * shapes alone, so the result never depends on the thread count. */
void rt_parallel_for(const rt_parallel *par, uint32_t n, llmc_rt_task_fn task, void *ctx);

/* One kernel call's tasks: task(ctx, i) for i in [0, n). */
typedef struct {
    llmc_rt_task_fn task;
    void *ctx;
    uint32_t n;
    bool small; /* too little work to wake workers for */
} rt_job;

/* Jobs a kernel runs as one parallel-for (a Linear's outputs: q, k and v). */
#define RT_JOBS_MAX 4

/* ref_common.c: the tasks of jobs[0..n_jobs) as one parallel-for, job
 * after job (on this thread when every job is small): one hand-out and one
 * join for all of them, where a decode step would otherwise wait for the
 * last task of each (the k and v projections of Qwen2-0.5B are 64 KB each,
 * a few microseconds).  Each task is the same call as alone, so the bits
 * do not change.  Returns false (running nothing) when the tasks add up
 * past UINT32_MAX. */
bool rt_parallel_for_jobs(const rt_parallel *par, const rt_job *jobs, uint32_t n_jobs);

/* Prepares the job of one output y of a kernel over consecutive columns
 * (y's from col0) in the caller's job struct number slot < RT_JOBS_MAX. */
typedef llmc_rt_status (*rt_output_job_fn)(void *ctx, uint32_t slot, int64_t col0, rt_view *y,
                                           rt_job *job, llmc_rt_error *err);

/* ref_common.c: the outputs ys[0..n_ys), ys[0] from column col0 and each
 * next one after the last's columns, RT_JOBS_MAX at a time, each group's
 * jobs (from job_for) as one parallel-for.  A residual (residual true)
 * needs a single output.  An error names its output when there are
 * several. */
llmc_rt_status rt_run_outputs(const rt_parallel *par, rt_view *ys, uint32_t n_ys, int64_t col0,
                              bool residual, rt_output_job_fn job_for, void *ctx,
                              llmc_rt_error *err);

/* Which dtypes each op accepts; the verifier asks these at plan open. */
bool k_unary_supports(int kind, int x_dtype, int y_dtype);
bool k_binary_supports(int kind, int a_dtype, int b_dtype, int y_dtype);
bool k_cast_supports(int x_dtype, int y_dtype);
bool k_reduce_supports(int kind, int x_dtype, int y_dtype);

/* ref_elementwise.c: Unary of `kind` (validated against the dtypes);
 * float32 through f32_loop, the kind's llmc_rt_unary_<Name> (the op
 * resolver's entry), other dtypes through the integer path. */
llmc_rt_status k_unary(llmc_rt_unary_fn f32_loop, int kind, const rt_view *x, rt_view *y,
                       llmc_rt_error *err);
/* Binary: true when `kind` on a and b of these dtypes runs the kind's
 * float32 loop (LLMC_PLAN_BINARY_F32_KINDS, both operands float32), false
 * when it takes the any-dtype path. */
bool k_binary_f32_loop(int kind, int a_dtype, int b_dtype);
/* An op's Binary loops (the op resolver's entries): the one its dtypes
 * take (k_binary_f32_loop) must be set; LLMC_RT_E_RESOLVER otherwise. */
typedef struct {
    llmc_rt_binary_fn f32;           /* llmc_rt_binary_<Kind> */
    llmc_rt_binary_any_fn any_dtype; /* llmc_rt_binary_any_dtype */
} k_binary_loops;
/* Binary of `kind` (validated against the dtypes) with broadcasting, a row
 * at a time through loops. */
llmc_rt_status k_binary(int kind, const k_binary_loops *loops, const rt_view *a,
                        const rt_view *b, rt_view *y, llmc_rt_error *err);
/* k_binary, with the target's loops and tasks on par for the cases that
 * have them (SwiGLU of float32 operands of one shape); kt NULL: portable. */
llmc_rt_status k_binary_kernels(const struct rt_kernels *kt, int kind,
                                const k_binary_loops *loops, const rt_view *a,
                                const rt_view *b, rt_view *y, const rt_parallel *par,
                                llmc_rt_error *err);
llmc_rt_status k_where(const rt_view *cond, const rt_view *x, const rt_view *other,
                       rt_view *y, llmc_rt_error *err);
llmc_rt_status k_cast(const rt_view *x, rt_view *y, llmc_rt_error *err);

/* ref_matmul.c */
llmc_rt_status k_matmul(const rt_view *a, const rt_view *b, rt_view *y, const rt_parallel *par,
                        llmc_rt_error *err);

/* ref_reduce.c: axes non-negative and distinct; none = every axis. */
llmc_rt_status k_reduce(int kind, const rt_view *x, const int *axes, int n_axes,
                        bool keepdims, rt_view *y, llmc_rt_error *err);

/* ref_softmax.c */
llmc_rt_status k_softmax(const rt_view *x, int axis, rt_view *y, llmc_rt_error *err);

/* ref_layernorm.c: bias may be NULL.  stats is required; each of its views
 * that is not NULL (float32, x's dims with 1 over [axis, rank)) receives one
 * value per normalized row. */
typedef struct {
    rt_view *mean;
    rt_view *inv_std_dev;   /* 1 / sqrt(variance + epsilon) */
} rt_layernorm_stats;

llmc_rt_status k_layernorm(const rt_view *x, const rt_view *scale, const rt_view *bias,
                           int axis, float epsilon, rt_view *y, const rt_layernorm_stats *stats,
                           llmc_rt_error *err);

/* ref_layernorm.c: over the last axis; scale is [D], D = x's last dim; rows
 * in parallel tasks (each row's bits do not depend on the split), each by
 * kt's rmsnorm_row (kt NULL: the portable row; the same bits); residual
 * NULL or y's dims, added to the normalized rows (post-norm layers). */
llmc_rt_status k_rmsnorm(const struct rt_kernels *kt, const rt_view *x, const rt_view *scale,
                         const rt_view *residual, float epsilon, rt_view *y, const rt_parallel *par,
                         llmc_rt_error *err);

/* ref_linear.c: y = x W^T + bias + residual for the output columns
 * [col0, col0 + y's last dim) of z; x [..., K], W [N, K], bias [N] or NULL,
 * residual NULL or y's dims (it is added to y's columns as they are). */
llmc_rt_status k_linear(const rt_view *x, const rt_view *w, const rt_view *bias,
                        const rt_view *residual, int64_t col0, rt_view *y,
                        const rt_parallel *par, llmc_rt_error *err);
/* ref_linear.c: out[r] = x . w_r for the rows r < rows (1..4) of w (row
 * stride k); out[r] has the same bits whatever the other rows are. */
void k_dot_rows(const float *x, const float *w, int64_t k, int rows, float *out);

/* ref_rope.c: rotate-half RoPE; x [..., S, D], token s at position P + s;
 * cos, sin [rows >= P + S, rotary_dim]. */
llmc_rt_status k_rope(const rt_view *x, const rt_view *cos, const rt_view *sin,
                      int64_t rotary_dim, int64_t P, rt_view *y, llmc_rt_error *err);

/* ref_gather.c */
llmc_rt_status k_gather(const rt_view *data, const rt_view *indices, int axis, rt_view *y,
                        llmc_rt_error *err);
/* Rows `indices` of a packed weight data [N, K] in format f (QWeightTiles,
 * FWeightTiles or Half), dequantized: y [indices dims..., K] float32. */
llmc_rt_status k_gather_rows(const rt_tensor_format *f, const rt_view *data,
                             const rt_view *indices, rt_view *y, llmc_rt_error *err);

/* ref_trilu.c: x [..., N, M] -> y (x's dtype and dims); k NULL or one int64
 * (the diagonal offset; 0 when NULL); upper keeps j - i >= k, lower j - i <= k. */
llmc_rt_status k_trilu(const rt_view *x, const rt_view *k, bool upper, rt_view *y,
                       llmc_rt_error *err);

/* ref_scatter_nd.c: kind is the plan's ScatterReduction; indices int64
 * [..., q]; an index outside [-dim, dim) fails before anything is written. */
bool k_scatter_nd_supports(int kind, int dtype);
llmc_rt_status k_scatter_nd(int kind, const rt_view *data, const rt_view *indices,
                            const rt_view *updates, rt_view *y, llmc_rt_error *err);

/* ref_cumsum.c: kind bit 0 exclusive, bit 1 reverse; axis non-negative. */
bool k_cumsum_supports(int dtype);
llmc_rt_status k_cumsum(const rt_view *x, int axis, int kind, rt_view *y, llmc_rt_error *err);

/* ref_copy.c: one Region of a Copy op with its Affines evaluated.  Arrays
 * are indexed by destination axis except src_start (by source axis). */
typedef struct {
    int64_t dst_start[RT_R];
    int64_t size[RT_R];
    int64_t src_start[RT_R];
    int src_axis[RT_R];
    int64_t src_step[RT_R];
} rt_region;

llmc_rt_status k_copy_region(const rt_region *g, const rt_view *src, rt_view *dst,
                             llmc_rt_error *err);
llmc_rt_status k_reshape(const rt_view *x, rt_view *y, llmc_rt_error *err);

/* ref_fill.c */
/* Fill: value_bits is the plan's IEEE binary64 value (Op.value), converted
 * to the output's dtype with integer operations only (k_f64_to_f32,
 * k_f64_to_i64): the device path does no double arithmetic. */
llmc_rt_status k_fill(uint64_t value_bits, rt_view *y, llmc_rt_error *err);
llmc_rt_status k_range(const rt_view *start, const rt_view *limit, const rt_view *delta,
                       rt_view *y, llmc_rt_error *err);

/* ref_attention.c: the fused Attention op (compiler/ir/llmc_ops.h) over a
 * chunked KV cache.  A cache chunk holds kv_chunk positions of every kv
 * head, K then V, each [kv_heads, kv_chunk] rows of the cache's dtype
 * (tensor_traits.h rt_kv_row_bytes: float32, float16, or int8 K rows with
 * a scale and float16 V rows), so a head's rows are contiguous inside a
 * chunk; chunk c (positions c*kv_chunk ..) lives at pool + slot[c] *
 * slot_bytes.  The session makes sure chunks covering positions [0, P + S)
 * exist before the call.  New rows are converted as they are appended;
 * the inner loops read the stored rows directly. */
/* head_dim bound: at least 2 query rows of a pass fit the kernel's 8 KiB
 * stack buffer (it also keeps a 16 KiB scratch for split decode partials,
 * and one row of this many floats to rotate or widen float16/int8 rows). */
#define RT_ATTN_MAX_HEAD_DIM 1024

typedef struct {
    uint8_t *pool;          /* chunk slots */
    const uint32_t *slot;   /* slot of chunk c, for c < ceil((P + S) / chunk) */
    uint64_t slot_bytes;    /* >= chunk * rt_kv_position_bytes(dtype, ...), 64-aligned */
    int64_t chunk;          /* positions per chunk (Plan.kv_chunk) */
    int dtype;              /* Plan.kv_cache_dtype: LLMC_RT_F32, F16 or I8 */
} rt_kv_cache;

typedef struct {
    int64_t heads, kv_heads, head_dim, rotary_dim;
    float scale;
    /* RMSNorm weights, both or neither (NULL): float [head_dim] each
     * normalizes every head alone (Qwen3), [heads*head_dim] and
     * [kv_heads*head_dim] the whole q and k rows (OLMo2); the plan
     * verifier proves their dims, the kernel trusts them */
    const rt_view *q_norm, *k_norm;
    float epsilon;
    /* Mistral's and Gemma 2's options: query position i sees key position
     * j when 0 <= i - j < window (0: every j <= i); softcap c > 0 turns
     * each score s = scale * q . k into c * tanh(s / c) (0: none) */
    int64_t window;
    float softcap;
} rt_attention_attrs;

/* q [1, S, heads*head_dim], k, v [1, S, kv_heads*head_dim]; cos, sin
 * [rows >= P + S, rotary_dim] or NULL when rotary_dim is 0.  With
 * a->q_norm and a->k_norm, each q and new k head row (or whole row) is
 * RMS-normalized first (the RMSNorm op's bits).  Appends the
 * new (normalized, rotated) K and V rows at positions P .. P+S-1, then
 * writes o.  With a->window, only the chunks holding positions
 * [P - window + 1, P + S) are read: older ones may have been reused. */
llmc_rt_status k_attention(const rt_attention_attrs *a, const rt_view *q, const rt_view *k,
                           const rt_view *v, const rt_view *cos, const rt_view *sin,
                           const rt_kv_cache *cache, int64_t P, rt_view *o,
                           const rt_parallel *par, llmc_rt_error *err);
/* The same with a target's inner loops (kt->attn_scores, attn_accumulate;
 * the portable ones when kt or they are NULL, as k_attention). */
llmc_rt_status k_attention_kernels(const struct rt_kernels *kt, const rt_attention_attrs *a,
                                   const rt_view *q, const rt_view *k, const rt_view *v,
                                   const rt_view *cos, const rt_view *sin,
                                   const rt_kv_cache *cache, int64_t P, rt_view *o,
                                   const rt_parallel *par, llmc_rt_error *err);
/* The same with the cache loops that `kv` sets (an op resolver's KV cache
 * entry, llmc_rt_kv_<Name>: k_attention_kernels takes cache->dtype's, so a
 * session links only its plan's); LLMC_RT_E_EXEC when they are not the
 * loops of cache->dtype. */
llmc_rt_status k_attention_loops(const struct rt_kernels *kt, llmc_rt_kv_fn kv,
                                 const rt_attention_attrs *a, const rt_view *q, const rt_view *k,
                                 const rt_view *v, const rt_view *cos, const rt_view *sin,
                                 const rt_kv_cache *cache, int64_t P, rt_view *o,
                                 const rt_parallel *par, llmc_rt_error *err);
/* Rotate-half RoPE of one row x[0, d) into y (no aliasing) with the table
 * rows cos, sin [rotary_dim]; columns >= rotary_dim are copied. */
void k_rope_row(const float *x, float *y, int64_t d, int64_t rotary_dim, const float *cos,
                const float *sin);

/* ref_common.c: shared helpers */
int64_t k_count(const rt_view *t);  /* element count (1 for a scalar) */
size_t k_dtype_size(int dtype);     /* 0 if unsupported */
void k_strides(const rt_view *t, int64_t *strides); /* row-major, in elements */
bool k_same_dims(const rt_view *a, const rt_view *b);
/* An odometer over the row-major index space dims[0..n): the element
 * offsets of up to K_WALK_OPS operands (a stride per axis each; 0 where an
 * operand is broadcast) kept current with additions only.  Walking never
 * divides: a Cortex-M has no 64-bit divide, and a / and % per element would
 * each be a libgcc call. */
#define K_WALK_OPS 3
typedef struct {
    int n, n_ops;
    int64_t idx[RT_R], dims[RT_R];
    int64_t strides[K_WALK_OPS][RT_R];
    int64_t off[K_WALK_OPS];
} k_walk;
/* At index 0 (every off[k] = 0); strides[k] points at n strides. */
void k_walk_init(k_walk *w, int n, const int64_t *dims, int n_ops,
                 const int64_t *const *strides);
/* To the next index in row-major order (from the last one back to 0). */
void k_walk_next(k_walk *w);
/* "[2, 3, 4]" style dims into buf, for messages. */
const char *k_dims_text(const rt_view *t, char *buf, size_t cap);
/* Numeric element i as int64 / as float, and stores that convert to the
 * view's dtype (integers wrap like a C cast to the narrower type; floats
 * truncate toward zero, saturating, NaN -> 0).  Integer dtypes keep integer
 * arithmetic: as_float is only for float32 operands and results. */
int64_t k_load_i(const rt_view *t, int64_t i);
float k_load_f(const rt_view *t, int64_t i);
void k_store_i(rt_view *t, int64_t i, int64_t v);
void k_store_f(rt_view *t, int64_t i, float v);
int64_t k_f2i(float v);
/* int64 to float rounded to nearest even, the bits of a C conversion, with
 * one FPU instruction in int32's range and integer operations beyond it (no
 * libgcc int64 -> float helper). */
float k_i64_to_f32(int64_t v);
/* IEEE binary64 bits to float (round to nearest even, as a C conversion)
 * and to int64 (truncated toward zero, saturating, NaN -> 0), by integer
 * operations: no double arithmetic, no libgcc soft-double call. */
float k_f64_to_f32(uint64_t bits);
int64_t k_f64_to_i64(uint64_t bits);

/* Neumaier's compensated sum in float: the rounding error of n additions
 * stays about one ulp of the result instead of growing with n, so rows of
 * LayerNorm, RMSNorm, Softmax and ReduceSum/Mean in float agree with the
 * double sums they replaced to within the tests' tolerances (a Cortex-M4F
 * has a single-precision FPU only). */
typedef struct {
    float sum, c;
} k_fsum;
static inline void k_fsum_add(k_fsum *s, float v)
{
    float t = s->sum + v;
    if ((s->sum < 0 ? -s->sum : s->sum) >= (v < 0 ? -v : v))
        s->c += (s->sum - t) + v;
    else
        s->c += (v - t) + s->sum;
    s->sum = t;
}
static inline float k_fsum_value(const k_fsum *s)
{
    /* an infinite or NaN sum stays what plain addition made it */
    return s->sum - s->sum == 0 ? s->sum + s->c : s->sum;
}

/* sqrtf as GCC's builtin: -ffreestanding (firmware builds) turns builtins
 * off, and a plain sqrtf() is then a call into libm's errno wrapper; with
 * -fno-math-errno the builtin is one FPU instruction (the same value). */
#ifdef __GNUC__
#define k_sqrtf(x) __builtin_sqrtf(x)
#else
#define k_sqrtf(x) sqrtf(x)
#endif

/* ---- quantized Linear (q_linear.c) ----------------------------------------
 * The portable drivers over a target's kernel table (kernel_table.h) and
 * the formats of quant_format.h.  They validate the views and shapes, split
 * the work into tasks chosen from the shapes alone (bitwise the same result
 * for any thread count) and call the table's micro-kernels. */

/* Largest ep * hp a driver's stack tile holds (every table's is far below:
 * AVX2 4 * 8, NEON sdot 12 * 8). */
#define RT_QTILE_MAX_OUT 1024

/* Byte of activation element (e, c) in the data of quant_format.h:
 * [mp/ep][kp/lp][ep][lp].  Pointer-wide (32-bit on a Cortex-M): the tiles
 * lie in memory. */
static inline size_t rt_qact_index(const rt_qact_shape *s, ptrdiff_t e, ptrdiff_t c)
{
    ptrdiff_t ep = s->ep, lp = s->lp;
    size_t tile = (size_t)(e / ep) * (size_t)((ptrdiff_t)s->kp / lp) + (size_t)(c / lp);
    return (tile * (size_t)ep + (size_t)(e % ep)) * (size_t)lp + (size_t)(c % lp);
}

/* Quantizes x float32 [..., k] (m = the product of the leading dims) into
 * the activation tiles of s (s->m == m, s->k == k, s->ep and s->lp the
 * table's).  xq is uint8 or int8 with x's dims: the logical shape, not the
 * byte count; its data must hold rt_qact_bytes(s) bytes (the plan sizes
 * packed activations with rt_qact_bytes), all of which are written,
 * padding rows and columns zero.  scale 0: each (row, group) by its
 * abs-max (the table's kernel); scale > 0 (normal and finite: the
 * verifier's check of the plan): one static scale for every (row, group)
 * (calibrated per-tensor activations, as an NPU runs them), values beyond
 * 127 * scale clamped.
 * Tasks: blocks of activation row tiles. */
llmc_rt_status k_quantize_rows(const struct rt_kernels *kt, const rt_view *x,
                               const rt_qact_shape *s, float scale, rt_view *xq,
                               const rt_parallel *par, llmc_rt_error *err);

/* ShadowLinear (q_shadow.c): z_j = y_j + the outliers' exact part, for x
 * float32 [..., k] quantized with the static scale (|x / scale| > 127 are
 * outliers), W int8 tiles of ws (the Linear's own), y_j / z_j float32
 * [..., n_j] with the Linear's columns in order (sum n_j = n), n_out <=
 * RT_SHADOW_OUTPUTS; z_j may be y_j's bytes.  Tasks: ranges of W's row
 * tiles, bitwise the same for any split. */
#define RT_SHADOW_OUTPUTS 3
/* hot (NULL: none) float32 [H, N + 1]: row i = channel c_i, then W[n, c_i]
 * for every n, the CPU's copy of the columns where outliers gather (paper
 * 003 §3.3, hot channels); an outlier in another channel reads W. */
llmc_rt_status k_shadow_linear(const rt_view *x, const uint8_t *w, const rt_qweight_shape *ws,
                               float scale, const rt_view *hot, const rt_view *ys, rt_view *zs,
                               uint32_t n_out, const rt_parallel *par, llmc_rt_error *err);

/* y float32 [..., n_y] = the columns [col0, col0 + n_y) of z = x W^T, plus
 * bias [n] (the columns col0.. of it) and residual (NULL or y's dims), for
 * xq from k_quantize_rows (dims [..., k], shape xs) and W the packed weight
 * blocks of ws (rt_qweight_bytes(ws) bytes at w).  col0 need not be a
 * multiple of hp.  y is each of the n_ys outputs ys[j] in turn, which take
 * consecutive columns (ys[0] from col0, ys[j + 1] after ys[j]'s), up to
 * RT_JOBS_MAX of them in one parallel-for; a residual needs n_ys == 1.
 * Tasks are blocks of row tiles of W (paper 002 §5.2).
 * m < gemm_min_rows takes the GEMV path (paper 001 §5: tasks of ~32 KiB of
 * weights, the last ones smaller, in memory order, for a pool that gives
 * each thread a contiguous range of them), else the GEMM path (tasks of
 * ~32 KiB of weights that stay in L2 while blocks of activation tiles pass
 * over them).  Either way each activation tile goes to qtile with its real
 * row count (m = 1: rows = 1, the kernels' decode GEMV), so both paths make
 * the same calls and give the same bits; qtile cannot address one row of a
 * tile other than the first, so for 1 < m < gemm_min_rows the paths differ
 * only in task size and blocking.  gemv_prefetch: bytes ahead of the
 * weight stream the one-row GEMV prefetches (rt_qtile_args.prefetch). */
llmc_rt_status k_qlinear(const struct rt_kernels *kt, const rt_view *xq,
                         const rt_qact_shape *xs, const void *w, const rt_qweight_shape *ws,
                         const rt_view *bias, const rt_view *residual, int64_t col0, rt_view *ys,
                         uint32_t n_ys, int64_t gemm_min_rows, uint32_t gemv_prefetch,
                         const rt_parallel *par, llmc_rt_error *err);
/* k_qlinear's operand checks (table, tile shapes, views), shared by its
 * fp32 prefill path. */
llmc_rt_status k_qlinear_check(const struct rt_kernels *kt, const rt_view *xq,
                               const rt_qact_shape *xs, const void *w, const rt_qweight_shape *ws,
                               const rt_view *bias, const rt_view *residual, int64_t col0,
                               const rt_view *y, llmc_rt_error *err);

/* q_dequant.c: k_qlinear's contract (any row count) on the target's fp32
 * micro-kernel: weight blocks dequantized to fp32 panels, the activation
 * tiles' int8 values times their (row, group) scales as fp32, y = sum +
 * bias + residual; the
 * int8 path's result up to fp32 rounding, bitwise the same for any thread
 * count (Plan.prefill_kernel f32-dequant).  k_qlinear_dequant_runs: the
 * table has fp32 tiles that hold whole weight row tiles of ws. */
bool k_qlinear_dequant_runs(const struct rt_kernels *kt, const rt_qweight_shape *ws);
llmc_rt_status k_qlinear_dequant(const struct rt_kernels *kt, const rt_view *xq,
                                 const rt_qact_shape *xs, const void *w,
                                 const rt_qweight_shape *ws, const rt_view *bias,
                                 const rt_view *residual, int64_t col0, rt_view *y,
                                 const rt_parallel *par, llmc_rt_error *err);

/* ---- fp32 weight tiles (f_linear.c) --------------------------------------- */
/* k_linear's contract over W packed as fp32 row tiles (quant_format.h,
 * rt_ftile_shape; ws->hp must be kt->f_hp): y = x W^T + bias + residual for
 * the columns [col0, col0 + y's last dim) of z, col0 any value; x [..., K]
 * with K = ws->k, bias [ws->n] or NULL, residual NULL or y's dims.  y is
 * each of the n_ys outputs ys[j] in turn, on consecutive columns as in
 * k_qlinear, up to RT_JOBS_MAX of them in one parallel-for.  Tasks are
 * groups of whole row tiles sized from the shapes only, so the result is
 * bitwise the same for any thread count. */
llmc_rt_status k_linear_tiles(const struct rt_kernels *kt, const rt_view *x, const float *w,
                              const rt_ftile_shape *ws, const rt_view *bias,
                              const rt_view *residual, int64_t col0, rt_view *ys,
                              uint32_t n_ys, const rt_parallel *par, llmc_rt_error *err);

#endif
