/* llmc ops: the ONNX operators the compiler claims, one per line, then the
 * llmc-domain ops its passes produce, as "llmc.Name". */
#include <stdio.h>

#include "cli.h"
#include "codegen/plan_model.h"
#include "onnx_ops.h"

int llmc_cmd_ops(int argc, char **argv)
{
    if (llmc_cli_wants_help(argc, argv)) {
        printf("usage: llmc ops\n\nPrints the ONNX operators (default domain, opsets %d..%d) llmc compiles,\n"
               "one per line, then the fused ops of the llmc domain that its passes produce\n"
               "and codegen lowers (llmc.Name, compiler/llmc_ops.h).\n",
               LLMC_MIN_OPSET, LLMC_MAX_OPSET);
        return 0;
    }
    if (argc > 1)
        return llmc_cli_usage("ops", "unexpected argument '%s'", argv[1]);
#define PRINT_OP(name, ...) puts(#name);
    LLMC_ONNX_OP_LIST(PRINT_OP)
#undef PRINT_OP
    for (int i = 0; cg_llmc_op(i); i++)
        printf("llmc.%s\n", cg_llmc_op(i));
    return 0;
}
