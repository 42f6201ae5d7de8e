#include "onnx_ops.h"

#include <string.h>

#define LLMC_OP_INFO(op, min_in, max_in, min_out, max_out) {#op, min_in, max_in, min_out, max_out},
static const llmc_onnx_op_info supported_ops[] = {LLMC_ONNX_OP_LIST(LLMC_OP_INFO)};
#undef LLMC_OP_INFO

const llmc_onnx_op_info *llmc_onnx_op_find(const char *op_type)
{
    for (size_t i = 0; i < sizeof supported_ops / sizeof *supported_ops; i++)
        if (strcmp(op_type, supported_ops[i].name) == 0)
            return &supported_ops[i];
    return NULL;
}

bool llmc_onnx_op_supported(const char *op_type)
{
    return llmc_onnx_op_find(op_type) != NULL;
}
