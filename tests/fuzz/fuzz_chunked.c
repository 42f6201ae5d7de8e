/* Chunked prefill of plans with NPU subgraphs (runtime/chunked_plan.c,
 * chunked_run.c), the CPU running the subgraphs chunk by chunk: the
 * subgraph tables' verification and description, the chunk schedule's
 * sizes and nodes, a short prefill.  Input as fuzz_chunked.h says. */
#include "fuzz_chunked.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_chunked_input(data, size, NULL);
    return 0;
}
