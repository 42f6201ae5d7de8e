#include "onnx_ops.h"

#include <string.h>

#define LLMC_OP_NAME(op) #op,
static const char *const supported_ops[] = {LLMC_ONNX_OP_LIST(LLMC_OP_NAME)};
#undef LLMC_OP_NAME

bool llmc_onnx_op_supported(const char *op_type)
{
    for (size_t i = 0; i < sizeof supported_ops / sizeof *supported_ops; i++)
        if (strcmp(op_type, supported_ops[i]) == 0)
            return true;
    return false;
}
