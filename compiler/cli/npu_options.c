/* The NPU prefill options of llmc run, eval and bench (npu_options.h). */
#include "npu_options.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cli.h"

const char llmc_npu_help[] =
    "  --delegate D        prefill in the plan's NPU chunks (llmc compile --npu-chunk):\n"
    "                      ref: subgraphs on the reference delegate (an NPU stand-in on a\n"
    "                      thread of its own), the rest on the CPU, overlapped; cpu: all\n"
    "                      on the calling thread, chunk by chunk\n"
    "  --lanes N           chunks in flight, each with its own arena copy (default 2, <= 8)\n"
    "  --in-order          each lane takes its nodes in chunk order (default: out of order,\n"
    "                      paper 003 Eq. 6)\n"
    "  --trace FILE.json   Chrome trace-event file of every node of the prefill, a row per\n"
    "                      lane (open it in Perfetto)\n";

int llmc_npu_parse_option(const char *cmd, int argc, char **argv, int *i, llmc_npu_options *o)
{
    const char *arg = argv[*i];
    bool has_value = *i + 1 < argc;
    if (!strcmp(arg, "--in-order")) {
        o->in_order = true;
        return 0;
    }
    if (!has_value || (strcmp(arg, "--delegate") && strcmp(arg, "--lanes") && strcmp(arg, "--trace")))
        return 1;
    const char *v = argv[++*i];
    if (!strcmp(arg, "--trace")) {
        o->trace = v;
    } else if (!strcmp(arg, "--lanes")) {
        int64_t n = llmc_cli_parse_count(v);
        if (n < 1 || n > 8)
            return llmc_cli_usage(cmd, "--lanes wants 1 to 8, got '%s'", v);
        o->lanes = (uint32_t)n;
    } else {
        o->mode = !strcmp(v, "ref") ? LLMC_NPU_REF : !strcmp(v, "cpu") ? LLMC_NPU_CPU : LLMC_NPU_OFF;
        if (o->mode == LLMC_NPU_OFF)
            return llmc_cli_usage(cmd, "--delegate wants ref or cpu, got '%s'", v);
    }
    return 0;
}
