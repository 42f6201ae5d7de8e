/* The chunked prefill driven by fuzz_chunked (the CPU runs the NPU
 * subgraphs) and fuzz_delegate (the reference delegate prepares and runs
 * them): chunked_common.c. */
#ifndef LLMC_FUZZ_CHUNKED_H
#define LLMC_FUZZ_CHUNKED_H

#include <stddef.h>
#include <stdint.h>

#include "llmc_rt.h"

/* Input: plan bytes followed by an 8-byte little-endian seed (as
 * fuzz_plan_run).  A plan that verifies and has NPU subgraphs has its chunk
 * schedule measured (llmc_rt_chunked_memory, also at contexts and lane
 * counts out of range), a chunked prefill set up on a session of up to 16
 * positions through `delegate` (NULL: the CPU runs the subgraphs) with 1..3
 * lanes, in or out of order, its nodes listed, then a prompt of 1..6 token
 * ids in -1..vocab (one past each end, which the runtime must refuse)
 * prefilled and one token decoded. */
void fuzz_chunked_input(const uint8_t *data, size_t size, const llmc_rt_delegate *delegate);

#endif
