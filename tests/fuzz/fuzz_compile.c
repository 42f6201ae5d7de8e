/* The whole compiler on models that import: the pass pipeline (shape
 * inference, constant folding through the runtime's kernels, dead code),
 * then lowering, memory planning and the plan, built in memory.  The plan
 * is then opened by the runtime's verifier: whatever the compiler writes
 * must verify. */
#include <stdio.h>

#include "codegen/codegen.h"
#include "fuzz_common.h"
#include "llmc_rt.h"
#include "onnx/onnx_import.h"
#include "passes/pipeline.h"

/* Small, so arenas sized for S + P <= max_context stay small. */
#define FUZZ_MAX_CONTEXT 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llmc_graph g;
    llmc_error err = {0};
    if (llmc_import_onnx_memory(data, size, fuzz_model_path(), NULL, &g, &err) != LLMC_OK)
        return 0;
    llmc_pass_ctx ctx = {.max_context = FUZZ_MAX_CONTEXT};
    llmc_pass_record records[LLMC_PIPELINE_MAX_PASSES];
    int n_records = 0;
    int rc = llmc_pipeline_run(&g, &ctx, NULL, records, &n_records, &err);
    if (rc == LLMC_OK) {
        llmc_codegen_options co = {.max_context = FUZZ_MAX_CONTEXT, .n_passes = n_records,
                                   .passes = records};
        uint8_t *plan = NULL;
        size_t plan_size = 0;
        llmc_codegen_stats stats;
        if (llmc_codegen_to_memory(&g, &co, &plan, &plan_size, &stats, &err) == LLMC_OK) {
            llmc_rt_plan p;
            llmc_rt_error rt_err;
            if (llmc_rt_plan_open(&p, plan, plan_size, LLMC_RT_VERIFY_HASHES, &rt_err) != LLMC_RT_OK) {
                fprintf(stderr, "fuzz_compile: the compiler wrote a plan the runtime rejects: %s\n",
                        rt_err.msg);
                abort();
            }
        }
        free(plan);
    }
    llmc_graph_free(&g);
    return 0;
}
