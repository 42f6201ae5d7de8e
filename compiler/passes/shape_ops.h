/* The shape handlers, one for each shape handler named in the op list
 * (ir/op_list.h): each sets the dtype, shape and, for small integer
 * tensors, the contents of the outputs of node c->n from its inputs. */
#ifndef LLMC_SHAPE_OPS_H
#define LLMC_SHAPE_OPS_H

#include "shape_infer.h"

/* shape_ops_elementwise.c */
int infer_binary(infer *c);
int infer_unary(infer *c);
int infer_where(infer *c);
int infer_cast(infer *c);
/* Comparison `op` (Equal, Less, Greater, LessOrEqual, GreaterOrEqual) of
 * a and b when the bounds of `max_context` decide it: true, *value its
 * result; false when it takes both values or `op` is no comparison. */
bool infer_compare_decided(llmc_op op, llmc_affine a, llmc_affine b, uint32_t max_context, bool *value);

/* shape_ops_if.c */
int infer_if(infer *c);

/* shape_ops_compute.c */
int infer_matmul(infer *c);
/* MatMul's output shape of inputs 0 and 1 (numpy rules), for MatMulInteger too. */
int infer_matmul_shape(const infer *c, llmc_shape *out);
int infer_gemm(infer *c);
int infer_reduce(infer *c);
int infer_softmax(infer *c);
int infer_layer_norm(infer *c);
int infer_gather(infer *c);

/* shape_ops_layout.c */
int infer_transpose(infer *c);
int infer_slice(infer *c);
int infer_concat(infer *c);
int infer_split(infer *c);
int infer_expand(infer *c);

/* shape_ops_reshape.c */
int infer_reshape(infer *c);
int infer_flatten(infer *c);
int infer_squeeze(infer *c);
int infer_unsqueeze(infer *c);

/* shape_ops_constant.c */
int infer_shape(infer *c);
int infer_constant(infer *c);
int infer_constant_of_shape(infer *c);
int infer_range(infer *c);
int infer_symbols(infer *c);

/* shape_ops_indexed.c */
int infer_trilu(infer *c);
int infer_scatter_nd(infer *c);
int infer_cumsum(infer *c);

/* shape_ops_quant.c */
int infer_dequantize_linear(infer *c);
int infer_quantize_linear(infer *c);
int infer_dynamic_quantize_linear(infer *c);
int infer_matmul_integer(infer *c);

#endif
