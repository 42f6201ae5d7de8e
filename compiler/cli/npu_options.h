/* The command-line options that choose chunked NPU prefill (llmc run, eval,
 * bench, tune): --delegate, --lanes, --in-order, --trace. */
#ifndef LLMC_NPU_OPTIONS_H
#define LLMC_NPU_OPTIONS_H

#include "npu/npu_prefill.h"

/* 1 if argv[*i] is not one of the options, 0 when it was taken (with its
 * value: *i advanced), LLMC_E_USAGE when misused. */
int llmc_npu_parse_option(const char *cmd, int argc, char **argv, int *i, llmc_npu_options *o);
/* The help lines of those options. */
extern const char llmc_npu_help[];

#endif
