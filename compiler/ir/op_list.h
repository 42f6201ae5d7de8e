/* The ops llmc compiles, one row each: the ONNX operators of the default
 * domain (opsets 13..21) and the llmc-domain fused ops (llmc_ops.h).
 *
 * Each row carries every per-op fact the compiler needs, so adding an op
 * is one row: the importer's arity check reads the counts, compiler/codegen/lower.c
 * builds its dispatch from the lowering columns and passes/ builds the
 * shape-inference dispatch from the last column.  A node's op is resolved
 * once by name (llmc_node_op) and dispatched by its llmc_op id.
 *
 * LLMC_ONNX_OP_LIST: X(op, min inputs, max inputs, min outputs, max outputs,
 *                      lowerer, kind, shape handler)
 *   counts    as the ONNX operator schemas of opsets 13..21 state them, the
 *             widest over those versions (LLMC_ONNX_N: variadic; the shape
 *             handler refuses an input the node's own opset does not have);
 *             inputs count empty names (an omitted optional input before a
 *             present one);
 *   lowerer   the codegen function that turns the node into plan ops, and
 *   kind      its argument (a compiler/codegen/plan_model.h op kind, or 0);
 *   shape     the shape-inference function (compiler/passes/shape_ops.h).
 * `llmc ops` prints the op names in this order. */
#ifndef LLMC_OP_LIST_H
#define LLMC_OP_LIST_H

#include "llmc_ops.h"

#define LLMC_ONNX_N 0x7fffffff
#define LLMC_ONNX_OP_LIST(X)                                                                   \
    /* elementwise */                                                                          \
    X(Add, 2, 2, 1, 1, lower_binary, LLMC_RT_BINARY_Add, infer_binary)                                 \
    X(Sub, 2, 2, 1, 1, lower_binary, LLMC_RT_BINARY_Sub, infer_binary)                                 \
    X(Mul, 2, 2, 1, 1, lower_binary, LLMC_RT_BINARY_Mul, infer_binary)                                 \
    X(Div, 2, 2, 1, 1, lower_binary, LLMC_RT_BINARY_Div, infer_binary)                                 \
    X(Pow, 2, 2, 1, 1, lower_binary, LLMC_RT_BINARY_Pow, infer_binary)                                 \
    X(Max, 1, LLMC_ONNX_N, 1, 1, lower_binary, LLMC_RT_BINARY_Max, infer_binary)                       \
    X(Min, 1, LLMC_ONNX_N, 1, 1, lower_binary, LLMC_RT_BINARY_Min, infer_binary)                       \
    X(Equal, 2, 2, 1, 1, lower_binary, LLMC_RT_BINARY_Equal, infer_binary)                             \
    X(Less, 2, 2, 1, 1, lower_binary, LLMC_RT_BINARY_Less, infer_binary)                               \
    X(Greater, 2, 2, 1, 1, lower_binary, LLMC_RT_BINARY_Greater, infer_binary)                         \
    X(LessOrEqual, 2, 2, 1, 1, lower_binary, LLMC_RT_BINARY_LessOrEqual, infer_binary)               \
    X(GreaterOrEqual, 2, 2, 1, 1, lower_binary, LLMC_RT_BINARY_GreaterOrEqual, infer_binary)         \
    X(And, 2, 2, 1, 1, lower_binary, LLMC_RT_BINARY_And, infer_binary)                                 \
    X(Or, 2, 2, 1, 1, lower_binary, LLMC_RT_BINARY_Or, infer_binary)                                   \
    X(Xor, 2, 2, 1, 1, lower_binary, LLMC_RT_BINARY_Xor, infer_binary)                                 \
    X(Neg, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Neg, infer_unary)                                    \
    X(Abs, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Abs, infer_unary)                                    \
    X(Sqrt, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Sqrt, infer_unary)                                  \
    X(Exp, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Exp, infer_unary)                                    \
    X(Log, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Log, infer_unary)                                    \
    X(Erf, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Erf, infer_unary)                                    \
    X(Tanh, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Tanh, infer_unary)                                  \
    X(Sigmoid, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Sigmoid, infer_unary)                            \
    X(Reciprocal, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Reciprocal, infer_unary)                      \
    X(Relu, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Relu, infer_unary)                                  \
    X(Sin, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Sin, infer_unary)                                    \
    X(Cos, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Cos, infer_unary)                                    \
    X(Not, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Not, infer_unary)                                    \
    X(Floor, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Floor, infer_unary)                                \
    X(Ceil, 1, 1, 1, 1, lower_unary, LLMC_RT_UNARY_Ceil, infer_unary)                                  \
    X(Gelu, 1, 1, 1, 1, lower_onnx_gelu, 0, infer_unary)                                        \
    X(Where, 3, 3, 1, 1, lower_where, 0, infer_where)                                           \
    X(Cast, 1, 1, 1, 1, lower_cast, 0, infer_cast)                                              \
    /* compute */                                                                              \
    X(MatMul, 2, 2, 1, 1, lower_matmul, 0, infer_matmul)                                        \
    X(Gemm, 2, 3, 1, 1, lower_gemm, 0, infer_gemm)                                              \
    X(ReduceMean, 1, 2, 1, 1, lower_reduce, REDUCE_MEAN, infer_reduce)                         \
    X(ReduceSum, 1, 2, 1, 1, lower_reduce, REDUCE_SUM, infer_reduce)                           \
    X(ReduceMax, 1, 2, 1, 1, lower_reduce, REDUCE_MAX, infer_reduce)                           \
    X(ReduceMin, 1, 2, 1, 1, lower_reduce, REDUCE_MIN, infer_reduce)                           \
    X(ReduceProd, 1, 2, 1, 1, lower_reduce, REDUCE_PROD, infer_reduce)                         \
    X(Softmax, 1, 1, 1, 1, lower_softmax, 0, infer_softmax)                                     \
    X(LayerNormalization, 2, 3, 1, 3, lower_layernorm, 0, infer_layer_norm)                     \
    X(Gather, 2, 2, 1, 1, lower_gather, 0, infer_gather)                                        \
    /* layout: lowered to strided copies */                                                    \
    X(Transpose, 1, 1, 1, 1, lower_transpose, 0, infer_transpose)                               \
    X(Slice, 3, 5, 1, 1, lower_slice, 0, infer_slice)                                           \
    X(Concat, 1, LLMC_ONNX_N, 1, 1, lower_concat, 0, infer_concat)                              \
    X(Split, 1, 2, 1, LLMC_ONNX_N, lower_split, 0, infer_split)                                 \
    X(Expand, 2, 2, 1, 1, lower_expand, 0, infer_expand)                                        \
    X(Reshape, 2, 2, 1, 1, lower_reshape, 0, infer_reshape)                                     \
    X(Flatten, 1, 1, 1, 1, lower_reshape, 0, infer_flatten)                                     \
    X(Squeeze, 1, 2, 1, 1, lower_reshape, 0, infer_squeeze)                                     \
    X(Unsqueeze, 2, 2, 1, 1, lower_reshape, 0, infer_unsqueeze)                                 \
    X(Identity, 1, 1, 1, 1, lower_reshape, 0, infer_unary)                                      \
    /* If: the importer's form with both branches inlined (onnx/onnx_if.h), \
     * inputs condition, then outputs, else outputs; constant folding     \
     * replaces it by the branch shape inference selects */                \
    X(If, 3, LLMC_ONNX_N, 1, LLMC_ONNX_N, lower_if, 0, infer_if)                                \
    /* shapes and constants */                                                                 \
    X(Shape, 1, 1, 1, 1, lower_shape, 0, infer_shape)                                           \
    X(Constant, 0, 0, 1, 1, lower_constant, 0, infer_constant)                                  \
    X(ConstantOfShape, 1, 1, 1, 1, lower_constant_of_shape, 0, infer_constant_of_shape)         \
    X(Range, 3, 3, 1, 1, lower_range, 0, infer_range)                                           \
    /* index-dependent */                                                                      \
    X(Trilu, 1, 2, 1, 1, lower_trilu, 0, infer_trilu)                                           \
    X(ScatterND, 3, 3, 1, 1, lower_scatter_nd, 0, infer_scatter_nd)                             \
    X(CumSum, 2, 2, 1, 1, lower_cumsum, 0, infer_cumsum)                                     \
    /* quantization: DequantizeLinear of a constant integer weight read by a      \
     * Linear is packed with it (lower_linear_weights.c); every other use is      \
     * rewritten into float ops by the quant-canonical pass */                     \
    X(DequantizeLinear, 2, 3, 1, 1, lower_dequantize_linear, 0, infer_dequantize_linear)     \
    X(QuantizeLinear, 2, 3, 1, 1, lower_quant_rewritten, 0, infer_quantize_linear)           \
    X(DynamicQuantizeLinear, 1, 1, 3, 3, lower_quant_rewritten, 0, infer_dynamic_quantize_linear) \
    X(MatMulInteger, 2, 4, 1, 1, lower_quant_rewritten, 0, infer_matmul_integer)

#define LLMC_OP_ID_ONNX_(op, ...) LLMC_ONNX_##op,
#define LLMC_OP_ID_FUSED_(op, ...) LLMC_FUSED_##op,
#define LLMC_OP_COUNT_ONE_(...) +1

/* A resolved op: the ONNX rows first, then the llmc-domain rows. */
typedef enum {
    LLMC_OP_NONE = -1,      /* another domain, or an op llmc does not compile */
    LLMC_ONNX_OP_LIST(LLMC_OP_ID_ONNX_)
    LLMC_FUSED_OP_LIST(LLMC_OP_ID_FUSED_)
    LLMC_OP_COUNT
} llmc_op;

enum { LLMC_ONNX_OP_COUNT = 0 LLMC_ONNX_OP_LIST(LLMC_OP_COUNT_ONE_) };
enum { LLMC_FUSED_OP_COUNT = 0 LLMC_FUSED_OP_LIST(LLMC_OP_COUNT_ONE_) };

/* The op `op_type` of `domain` ("" or "ai.onnx": ONNX, LLMC_DOMAIN: the
 * fused ops), or LLMC_OP_NONE. */
llmc_op llmc_op_of(const char *domain, const char *op_type);

static inline llmc_op llmc_node_op(const llmc_node *n)
{
    return llmc_op_of(n->domain, n->op_type);
}

/* The op_type of `op` (without its domain); NULL for LLMC_OP_NONE. */
const char *llmc_op_name(llmc_op op);

#endif
