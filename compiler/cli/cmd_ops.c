/* llmc ops: the ONNX operators the compiler claims, one per line (If,
 * inlined at import, after the ones the IR holds), then
 * ONNX Runtime's contrib ops it imports (as "Name" in the default domain,
 * "domain.Name" in another), then the llmc-domain ops its passes produce,
 * as "llmc.Name". */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "codegen/plan_model.h"
#include "onnx/contrib_ops.h"
#include "onnx/onnx_ops.h"
#include "plan_format.h"

/* "Enum Name value" for every entry of the plan's enum lists
 * (runtime/plan_enums.h); tests/t_plan_schema.sh compares with plan.fbs. */
static void print_plan_enums(void)
{
#define PRINT_ENTRY(s, name, value, ...) printf("%s %s %d\n", enum_name, #name, value);
#define PRINT_LIST(enum, LIST)                  \
    {                                           \
        const char *enum_name = #enum;          \
        LIST(PRINT_ENTRY)                       \
    }
    LLMC_PLAN_ENUM_LISTS(PRINT_LIST)
#undef PRINT_LIST
#undef PRINT_ENTRY
}

/* "Table field id" for every field of the plan's tables (runtime/plan_format.h);
 * tests/t_plan_schema.sh compares with plan.fbs. */
static void print_plan_fields(void)
{
#define PRINT_FIELD(s, name) printf("%s %s %d\n", table, #name, id++);
#define PRINT_TABLE(tbl, LIST)       \
    {                                \
        const char *table = #tbl;    \
        int id = 0;                  \
        LIST(PRINT_FIELD)            \
    }
    LLMC_PLAN_TABLE_LISTS(PRINT_TABLE)
#undef PRINT_TABLE
#undef PRINT_FIELD
}

int llmc_cmd_ops(int argc, char **argv)
{
    if (llmc_cli_wants_help(argc, argv)) {
        printf("usage: llmc ops [--plan-enums | --plan-fields]\n\nPrints the ONNX operators (default domain, opsets %d..%d) llmc compiles,\n"
               "one per line, then ONNX Runtime's contrib ops it imports (domain.Name outside\n"
               "the default domain), then the fused ops of the llmc domain that its passes\n"
               "produce "
               "and codegen lowers (llmc.Name, compiler/ir/llmc_ops.h).\n"
               "With --plan-enums: every enum of the plan format as \"Enum Name value\"\n"
               "(runtime/plan_enums.h, the source of the C tables).\n"
               "With --plan-fields: every field of the plan's tables as \"Table name id\"\n"
               "(runtime/plan_format.h, the ids the reader and the writer use).\n",
               LLMC_MIN_OPSET, LLMC_MAX_OPSET);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--plan-enums") == 0) {
        print_plan_enums();
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--plan-fields") == 0) {
        print_plan_fields();
        return 0;
    }
    if (argc > 1)
        return llmc_cli_usage("ops", "unexpected argument '%s'", argv[1]);
#define PRINT_OP(name, ...) puts(#name);
    LLMC_ONNX_OP_LIST(PRINT_OP)
#undef PRINT_OP
    for (int i = 0; llmc_contrib_op_at(i); i++) {
        const llmc_contrib_op_info *c = llmc_contrib_op_at(i);
        printf("%s%s%s\n", c->domain, c->domain[0] ? "." : "", c->name);
    }
    for (int i = 0; cg_llmc_op(i); i++)
        printf("llmc.%s\n", cg_llmc_op(i));
    return 0;
}
