/* llmc bench PLAN --speculate K: greedy decoding with and without
 * speculative decoding (llmc_rt_speculate_step) on the same prompts. */
#ifndef LLMC_CLI_BENCH_SPECULATE_H
#define LLMC_CLI_BENCH_SPECULATE_H

#include <stdbool.h>
#include <stdint.h>

#include "support/diag.h"

#define LLMC_BENCH_MAX_PROMPTS 8

typedef struct {
    const char *plan;
    uint32_t k;              /* --speculate: most tokens drafted a step */
    uint32_t n_gen;          /* tokens generated per run */
    uint32_t reps;           /* timed runs per prompt and mode */
    uint32_t threads;
    bool hugepages;
    const char *prompt_files[LLMC_BENCH_MAX_PROMPTS]; /* --prompt-file: texts */
    uint32_t n_prompt_files;
} llmc_bench_spec_args;

/* Prints a row per prompt: plain and speculative tok/s (medians), the
 * speed-up, drafts kept and tokens per step; fails if the two decodings'
 * ids differ. */
int llmc_bench_speculate(const llmc_bench_spec_args *a, llmc_error *err);

#endif
