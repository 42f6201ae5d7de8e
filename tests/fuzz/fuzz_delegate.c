/* What an NPU delegate is handed (llmc_rt.h "NPU chunk subgraphs and
 * delegates"): the reference delegate (runtime/platform/ref_delegate.c,
 * ref_prepare.c) prepares every subgraph description of a fuzzed plan (ops,
 * tensors, weights, static scales) and runs the chunks of a short prefill
 * on its own thread.  Input as fuzz_chunked.h says. */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_chunked.h"
#include "llmc_ref_delegate.h"

static llmc_ref_delegate *delegate;

static void destroy(void)
{
    llmc_ref_delegate_destroy(delegate);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static llmc_rt_delegate table;
    if (!delegate) {
        if (!(delegate = llmc_ref_delegate_create())) {
            fprintf(stderr, "fuzz_delegate: cannot start the reference delegate\n");
            abort();
        }
        atexit(destroy);
        llmc_ref_delegate_table(delegate, &table);
    }
    fuzz_chunked_input(data, size, &table);
    return 0;
}
