#include "onnx_ops.h"

#define LLMC_OP_INFO(op, min_in, max_in, min_out, max_out, ...) {#op, min_in, max_in, min_out, max_out},
static const llmc_onnx_op_info supported_ops[] = {LLMC_ONNX_OP_LIST(LLMC_OP_INFO)};
#undef LLMC_OP_INFO
_Static_assert(sizeof supported_ops / sizeof *supported_ops == LLMC_ONNX_OP_COUNT, "one entry per ONNX op");

const llmc_onnx_op_info *llmc_onnx_op_find(const char *op_type)
{
    llmc_op op = llmc_op_of("", op_type);
    return op == LLMC_OP_NONE ? NULL : &supported_ops[op];
}

bool llmc_onnx_op_supported(const char *op_type)
{
    return llmc_onnx_op_find(op_type) != NULL;
}
