/* The per-op lowerers, one for each lowerer named in the op list
 * (ir/op_list.h): each turns the current node of `L` into plan ops.  `kind`
 * is the row's kind column (a BINARY_, UNARY_ or REDUCE_ value, else 0). */
#ifndef LLMC_LOWER_OPS_H
#define LLMC_LOWER_OPS_H

#include "lower_ctx.h"

/* lower_compute.c */
int lower_unary(lower_ctx *L, int kind);
int lower_cast(lower_ctx *L, int kind);
int lower_where(lower_ctx *L, int kind);
int lower_matmul(lower_ctx *L, int kind);
int lower_range(lower_ctx *L, int kind);
int lower_if(lower_ctx *L, int kind);
int lower_reshape(lower_ctx *L, int kind);
int lower_binary(lower_ctx *L, int kind);
int lower_gemm(lower_ctx *L, int kind);
int lower_reduce(lower_ctx *L, int kind);
int lower_softmax(lower_ctx *L, int kind);
int lower_layernorm(lower_ctx *L, int kind);
int lower_trilu(lower_ctx *L, int kind);
int lower_scatter_nd(lower_ctx *L, int kind);
int lower_cumsum(lower_ctx *L, int kind);

/* lower_layout.c: Copy regions */
int lower_transpose(lower_ctx *L, int kind);
int lower_slice(lower_ctx *L, int kind);
int lower_concat(lower_ctx *L, int kind);
int lower_split(lower_ctx *L, int kind);
int lower_expand(lower_ctx *L, int kind);
/* Gather whose indices are a small constant: regions; else a Gather op. */
int lower_gather(lower_ctx *L, int kind);

/* lower_constant.c */
int lower_shape(lower_ctx *L, int kind);
int lower_symbols(lower_ctx *L, int kind);
int lower_constant(lower_ctx *L, int kind);
int lower_constant_of_shape(lower_ctx *L, int kind);

/* lower_fused.c */
int lower_gelu(lower_ctx *L, int kind);
int lower_onnx_gelu(lower_ctx *L, int kind);
int lower_rmsnorm(lower_ctx *L, int kind);
int lower_rope(lower_ctx *L, int kind);
int lower_linear(lower_ctx *L, int kind);
int lower_attention(lower_ctx *L, int kind);

/* lower_linear_weights.c */
int lower_quantize_rows(lower_ctx *L, int kind);
int lower_shadow_linear(lower_ctx *L, int kind);
int lower_dequantize_linear(lower_ctx *L, int kind);
int lower_quant_rewritten(lower_ctx *L, int kind);

#endif
