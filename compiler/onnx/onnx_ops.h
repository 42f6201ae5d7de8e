/* The ONNX operators llmc compiles (default domain, opsets 13..17).
 * `llmc ops` prints this list; the importer rejects everything else; the
 * lowering in codegen/ handles every entry. */
#ifndef LLMC_ONNX_OPS_H
#define LLMC_ONNX_OPS_H

#include <stdbool.h>

#define LLMC_MIN_OPSET 13
#define LLMC_MAX_OPSET 17

/* X(op, min inputs, max inputs, min outputs, max outputs), as the ONNX
 * operator schemas of opsets 13..17 state them (N: variadic).  Inputs
 * count empty names (an omitted optional input before a present one). */
#define LLMC_ONNX_N 0x7fffffff
#define LLMC_ONNX_OP_LIST(X)                                                         \
    /* elementwise */                                                                \
    X(Add, 2, 2, 1, 1) X(Sub, 2, 2, 1, 1) X(Mul, 2, 2, 1, 1) X(Div, 2, 2, 1, 1)      \
    X(Pow, 2, 2, 1, 1) X(Max, 1, LLMC_ONNX_N, 1, 1) X(Min, 1, LLMC_ONNX_N, 1, 1)     \
    X(Equal, 2, 2, 1, 1) X(Less, 2, 2, 1, 1) X(Greater, 2, 2, 1, 1)                  \
    X(LessOrEqual, 2, 2, 1, 1) X(GreaterOrEqual, 2, 2, 1, 1) X(And, 2, 2, 1, 1)      \
    X(Or, 2, 2, 1, 1) X(Xor, 2, 2, 1, 1)                                             \
    X(Neg, 1, 1, 1, 1) X(Abs, 1, 1, 1, 1) X(Sqrt, 1, 1, 1, 1) X(Exp, 1, 1, 1, 1)     \
    X(Log, 1, 1, 1, 1) X(Erf, 1, 1, 1, 1) X(Tanh, 1, 1, 1, 1) X(Sigmoid, 1, 1, 1, 1) \
    X(Reciprocal, 1, 1, 1, 1) X(Relu, 1, 1, 1, 1) X(Sin, 1, 1, 1, 1)                 \
    X(Cos, 1, 1, 1, 1) X(Not, 1, 1, 1, 1) X(Floor, 1, 1, 1, 1) X(Ceil, 1, 1, 1, 1)   \
    X(Where, 3, 3, 1, 1) X(Cast, 1, 1, 1, 1)                                         \
    /* compute */                                                                    \
    X(MatMul, 2, 2, 1, 1) X(Gemm, 2, 3, 1, 1) X(ReduceMean, 1, 1, 1, 1)              \
    X(ReduceSum, 1, 2, 1, 1) X(ReduceMax, 1, 1, 1, 1) X(ReduceMin, 1, 1, 1, 1)       \
    X(ReduceProd, 1, 1, 1, 1) X(Softmax, 1, 1, 1, 1)                                 \
    X(LayerNormalization, 2, 3, 1, 3) X(Gather, 2, 2, 1, 1)                          \
    /* layout: lowered to strided copies */                                          \
    X(Transpose, 1, 1, 1, 1) X(Slice, 3, 5, 1, 1) X(Concat, 1, LLMC_ONNX_N, 1, 1)    \
    X(Split, 1, 2, 1, LLMC_ONNX_N) X(Expand, 2, 2, 1, 1) X(Reshape, 2, 2, 1, 1)      \
    X(Flatten, 1, 1, 1, 1) X(Squeeze, 1, 2, 1, 1) X(Unsqueeze, 2, 2, 1, 1)           \
    X(Identity, 1, 1, 1, 1)                                                          \
    /* shapes and constants */                                                       \
    X(Shape, 1, 1, 1, 1) X(Constant, 0, 0, 1, 1) X(ConstantOfShape, 1, 1, 1, 1)      \
    X(Range, 3, 3, 1, 1)                                                             \
    /* index-dependent */                                                            \
    X(Trilu, 1, 2, 1, 1) X(ScatterND, 3, 3, 1, 1) X(CumSum, 2, 2, 1, 1)

typedef struct {
    const char *name;
    int min_inputs, max_inputs, min_outputs, max_outputs;
} llmc_onnx_op_info;

/* The entry of `op_type`, or NULL if llmc does not compile it. */
const llmc_onnx_op_info *llmc_onnx_op_find(const char *op_type);
bool llmc_onnx_op_supported(const char *op_type);

#endif
