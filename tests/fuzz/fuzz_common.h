/* Shared by the libFuzzer targets in tests/fuzz/ (see fuzz.mk).
 *
 * Each target is one LLVMFuzzerTestOneInput over raw bytes; anything the
 * code under test may do with hostile input (refuse it with an error) is
 * fine, anything the sanitizers report (crash, out-of-bounds access, leak,
 * undefined behaviour) or a hang is a finding. */
#ifndef LLMC_FUZZ_COMMON_H
#define LLMC_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Working memory a target may give one plan (arena + KV store): plans that
 * need more are skipped, so a fuzzed arena_size cannot exhaust the host. */
#define FUZZ_MAX_SESSION_BYTES ((size_t)64 << 20)

/* A private heap copy of the input: exactly `size` bytes (so ASan sees a
 * read one past the end) and malloc-aligned (16 bytes, as the runtime's
 * 8-byte rule needs).  Never NULL for size 0.  free() it. */
static inline uint8_t *fuzz_copy(const uint8_t *data, size_t size)
{
    uint8_t *p = malloc(size ? size : 1);
    if (p && size)
        memcpy(p, data, size);
    return p;
}

/* The input of the plan-running targets: plan bytes followed by an 8-byte
 * little-endian seed.  Returns a fuzz_copy() of the plan bytes (free() it)
 * and sets *plan_size and *seed; NULL when the input is shorter than the
 * seed or out of memory. */
#define FUZZ_SEED_BYTES 8
static inline uint8_t *fuzz_plan_and_seed(const uint8_t *data, size_t size, size_t *plan_size,
                                          uint64_t *seed)
{
    if (size < FUZZ_SEED_BYTES)
        return NULL;
    *plan_size = size - FUZZ_SEED_BYTES;
    *seed = 0;
    for (int i = 0; i < FUZZ_SEED_BYTES; i++)
        *seed |= (uint64_t)data[*plan_size + i] << (8 * i);
    return fuzz_copy(data, *plan_size);
}

/* splitmix64: the targets' source of token ids and input values. */
static inline uint64_t fuzz_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* An empty private folder, created once, that the ONNX targets pass as the
 * model's folder: external data is looked up there (and nowhere else, as
 * the importer refuses paths that leave it), and it holds nothing.  Removed
 * at exit. */
const char *fuzz_model_path(void);

#endif
