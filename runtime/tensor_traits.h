/* Internal: the one place that knows how many bytes a tensor takes.
 * Every size check (the verifier's weight and arena proofs, the session's
 * views, the compiler's memory planner and lowering) goes through
 * rt_tensor_bytes, so quantized tiles, their scales and padding are sized
 * the same way everywhere (the compiler links the runtime and uses it too).
 * The parts of a packed tensor (a weight block's values, a block, a row
 * tile) are sized by quant_format.h, from the value and coefficient
 * sizes of plan_enums.h's layout list, for the kernels and the packer. */
#ifndef LLMC_RT_TENSOR_TRAITS_H
#define LLMC_RT_TENSOR_TRAITS_H

#include <stdbool.h>
#include <stdint.h>

#include "quant_format.h"
#include "plan_format.h"

/* Bits per element of a dtype (plan numbering); 0 if unknown. */
static inline int rt_dtype_bits(int dtype)
{
    switch (dtype) {
#define TT_DTYPE_BITS_(s, name, value, bits) case value: return bits;
    LLMC_PLAN_DTYPES(TT_DTYPE_BITS_)
#undef TT_DTYPE_BITS_
    default: return 0;
    }
}

/* Bytes per element of a dtype that can be laid out densely (whole bytes);
 * 0 for unknown dtypes and for Uint4, which only exists packed. */
static inline unsigned rt_dtype_bytes(int dtype)
{
    int bits = rt_dtype_bits(dtype);
    return bits >= 8 ? (unsigned)bits / 8u : 0u;
}

/* Everything besides dims that decides a tensor's bytes. */
typedef struct {
    int dtype, layout;
    uint32_t group;
    int tile_rows, tile_depth;
    int coef; /* QWeightTiles: LLMC_RT_F16 or LLMC_RT_F32 */
} rt_tensor_format;

static inline rt_tensor_format rt_format_of(const rt_tensor_desc *d)
{
    rt_tensor_format f = {d->dtype, d->layout, d->group, d->tile_rows, d->tile_depth, d->coef};
    return f;
}

#define RT_TT_MAX_ELEMS ((int64_t)1 << 50) /* bounds n * k of packed matrices */

/* a * b and a + b into *out; false on int64 overflow (*out is then the
 * wrapped value, which no caller reads). */
bool rt_mul_i64(int64_t a, int64_t b, int64_t *out);
bool rt_add_i64(int64_t a, int64_t b, int64_t *out);

/* tensor_traits.c (out of line: every size check shares one copy):
 * W [n, k] of a QWeightTiles tensor; x [..., k] of a QActTiles tensor (m =
 * the product of the leading dims); W [n, k] of an FWeightTiles tensor.
 * False when the format does not fit the dims (non-negative, as every
 * view's). */
bool rt_qweight_shape_of(const rt_tensor_format *f, int rank, const int64_t *dims,
                         rt_qweight_shape *s);
bool rt_qact_shape_of(const rt_tensor_format *f, int rank, const int64_t *dims, rt_qact_shape *s);
bool rt_ftile_shape_of(const rt_tensor_format *f, int rank, const int64_t *dims, rt_ftile_shape *s);
/* Bytes of a tensor with non-negative dims; false when the format is not
 * valid for them or the size overflows int64 (non-zero dims must fit even
 * if another dim is 0). */
bool rt_tensor_bytes(const rt_tensor_format *f, int rank, const int64_t *dims, uint64_t *bytes);

/* plan_reader.c: evaluates `rank` dims at (S, P) into dims and the byte size
 * of a tensor of format f (rt_tensor_bytes); a dim that overflows or is
 * negative, or a size the format cannot give, fails with `code`. */
llmc_rt_status rt_dims_at(const rt_affine *affines, int rank, const rt_tensor_format *f,
                          int64_t S, int64_t P, int64_t *dims, uint64_t *bytes,
                          llmc_rt_status code, llmc_rt_error *err);
/* ---- KV cache rows (Plan.kv_cache_dtype) --------------------------------
 * A cache chunk holds the K rows of its kv_chunk positions for every kv
 * head, then their V rows ([kv_heads, kv_chunk] rows each, kernels.h).  A
 * row is one position of one kv head:
 *   Float32, Float16: head_dim elements (K and V alike);
 *   Int8 (paper 002 §4: keys are reduced over head_dim, so each new row is
 *     quantized once and never touched again): a K row is head_dim int8
 *     values, padding to 4 bytes, then its float scale (value = q * scale);
 *     V rows are Float16 (the paper's fp8 for values, at 16 bits). */
static inline bool rt_kv_dtype_known(int dtype)
{
    return dtype == LLMC_RT_F32 || dtype == LLMC_RT_F16 || dtype == LLMC_RT_I8;
}

/* The op resolver's LLMC_RT_KV_CACHES entry of a cache dtype; -1 if unknown. */
static inline int rt_kv_cache_index(int dtype)
{
    return dtype == LLMC_RT_F32 ? LLMC_RT_KV_Float32
           : dtype == LLMC_RT_F16 ? LLMC_RT_KV_Float16
           : dtype == LLMC_RT_I8  ? LLMC_RT_KV_Int8
                                  : -1;
}

/* The dtype of K (which = 0) or V (which = 1) rows of a cache. */
static inline int rt_kv_row_dtype(int cache_dtype, int which)
{
    return which && cache_dtype == LLMC_RT_I8 ? LLMC_RT_F16 : cache_dtype;
}

/* Byte offset of an Int8 K row's scale. */
static inline uint64_t rt_kv_scale_offset(int64_t head_dim)
{
    return ((uint64_t)head_dim + 3u) / 4u * 4u;
}

/* Bytes of one K or V row; 0 for a dtype rt_kv_dtype_known refuses.
 * head_dim <= RT_ATTN_MAX_HEAD_DIM (verified), so nothing overflows.  Out
 * of line (tensor_traits.c): the session and the kernel share one copy. */
uint64_t rt_kv_row_bytes(int cache_dtype, int which, int64_t head_dim);

/* Bytes of one position of a cache: K and V rows of every kv head. */
static inline uint64_t rt_kv_position_bytes(int cache_dtype, int64_t kv_heads, int64_t head_dim)
{
    return (rt_kv_row_bytes(cache_dtype, 0, head_dim) + rt_kv_row_bytes(cache_dtype, 1, head_dim)) *
           (uint64_t)kv_heads;
}

/* Chunks of kv_chunk (>= 1) positions that hold `positions` (at most a
 * session's context: 32-bit arithmetic). */
static inline uint32_t rt_kv_chunks(uint32_t positions, uint32_t kv_chunk)
{
    return positions ? (positions - 1) / kv_chunk + 1 : 0;
}

/* The first position a query at `pos` attends to under a sliding window of
 * `window` positions (0: none, every position from 0). */
static inline uint32_t rt_window_low(uint32_t window, uint32_t pos)
{
    return window && pos >= window ? pos - window + 1 : 0;
}

/* Chunks a cache keeps live out of `chunks` (a session's chunks per cache):
 * all without a window, else ceil(window / kv_chunk) + 1, the chunks a
 * query's window can straddle plus the one being appended to. */
static inline uint32_t rt_kv_ring(uint32_t window, uint32_t kv_chunk, uint32_t chunks)
{
    uint32_t ring = window ? rt_kv_chunks(window, kv_chunk) + 1 : chunks;
    return ring < chunks ? ring : chunks;
}

#endif
