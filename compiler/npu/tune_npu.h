/* llmc tune PLAN --npu (tune_npu.c): every chunk node's time, measured
 * through the delegate, written into the plan's npu_costs. */
#ifndef LLMC_TUNE_NPU_H
#define LLMC_TUNE_NPU_H

#include <stdint.h>

#include "support/diag.h"
#include "llmc_rt.h"

typedef struct {
    int delegate;           /* LLMC_NPU_REF or LLMC_NPU_CPU */
    uint32_t rows;          /* tokens per prefill (at most max_context) */
    uint32_t repeats;       /* prefills timed */
} llmc_tune_npu_options;

int llmc_tune_npu(const char *path, const llmc_rt_plan *plan, const llmc_tune_npu_options *o,
                  llmc_error *err);

#endif
