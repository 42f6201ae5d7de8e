#include "op_list.h"

#include <string.h>

#define OP_NAME(op, ...) #op,
static const char *const op_names[] = {LLMC_ONNX_OP_LIST(OP_NAME) LLMC_FUSED_OP_LIST(OP_NAME)};
#undef OP_NAME
_Static_assert(sizeof op_names / sizeof *op_names == LLMC_OP_COUNT, "one name per op");
_Static_assert(LLMC_ONNX_OP_COUNT + LLMC_FUSED_OP_COUNT == LLMC_OP_COUNT, "op counts add up");

static llmc_op find_name(int first, int end, const char *op_type)
{
    for (int i = first; i < end; i++)
        if (strcmp(op_names[i], op_type) == 0)
            return (llmc_op)i;
    return LLMC_OP_NONE;
}

llmc_op llmc_op_of(const char *domain, const char *op_type)
{
    if (domain[0] == 0 || strcmp(domain, "ai.onnx") == 0)
        return find_name(0, LLMC_ONNX_OP_COUNT, op_type);
    if (strcmp(domain, LLMC_DOMAIN) == 0)
        return find_name(LLMC_ONNX_OP_COUNT, LLMC_OP_COUNT, op_type);
    return LLMC_OP_NONE;
}

const char *llmc_op_name(llmc_op op)
{
    return op >= 0 && op < LLMC_OP_COUNT ? op_names[op] : NULL;
}
