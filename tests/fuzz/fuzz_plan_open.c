/* The runtime's verifier and loader (llmc_rt_plan_open) on raw bytes,
 * without and with segment hashing; a plan that opens also has its
 * bindings read. */
#include "fuzz_common.h"
#include "llmc_rt.h"
#include "llmc_rt_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *bytes = fuzz_copy(data, size);
    if (!bytes)
        return 0;
    static const unsigned flags[] = {0, LLMC_RT_VERIFY_HASHES};
    for (size_t f = 0; f < sizeof flags / sizeof *flags; f++) {
        llmc_rt_plan plan;
        llmc_rt_error err;
        if (llmc_rt_plan_open(&plan, bytes, size, flags[f], &err) != LLMC_RT_OK)
            continue;
        llmc_rt_io io;
        for (uint32_t i = 0; i < rt_plan_of(&plan)->n_inputs; i++)
            llmc_rt_plan_io(&plan, 0, i, &io);
        for (uint32_t i = 0; i < rt_plan_of(&plan)->n_outputs; i++)
            llmc_rt_plan_io(&plan, 1, i, &io);
        (void)llmc_rt_session_memory(&plan);
    }
    free(bytes);
    return 0;
}
