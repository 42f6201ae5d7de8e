/* The ONNX operators llmc compiles (default domain, opsets 13..17).
 * `llmc ops` prints this list; the importer rejects everything else; the
 * lowering in codegen/ handles every entry. */
#ifndef LLMC_ONNX_OPS_H
#define LLMC_ONNX_OPS_H

#include <stdbool.h>

#define LLMC_MIN_OPSET 13
#define LLMC_MAX_OPSET 17

#define LLMC_ONNX_OP_LIST(X)                                                         \
    /* elementwise */                                                                \
    X(Add) X(Sub) X(Mul) X(Div) X(Pow) X(Max) X(Min)                                 \
    X(Equal) X(Less) X(Greater) X(LessOrEqual) X(GreaterOrEqual) X(And) X(Or) X(Xor) \
    X(Neg) X(Abs) X(Sqrt) X(Exp) X(Log) X(Erf) X(Tanh) X(Sigmoid) X(Reciprocal)      \
    X(Relu) X(Sin) X(Cos) X(Not) X(Floor) X(Ceil) X(Where) X(Cast)                   \
    /* compute */                                                                    \
    X(MatMul) X(Gemm) X(ReduceMean) X(ReduceSum) X(ReduceMax) X(ReduceMin)           \
    X(ReduceProd) X(Softmax) X(LayerNormalization) X(Gather)                         \
    /* layout: lowered to strided copies */                                          \
    X(Transpose) X(Slice) X(Concat) X(Split) X(Expand) X(Reshape) X(Flatten)         \
    X(Squeeze) X(Unsqueeze) X(Identity)                                              \
    /* shapes and constants */                                                       \
    X(Shape) X(Constant) X(ConstantOfShape) X(Range)

bool llmc_onnx_op_supported(const char *op_type);

#endif
