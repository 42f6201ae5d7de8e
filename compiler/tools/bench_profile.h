/* `llmc bench --profile`: time per op (an llmc_rt_op_observer reading
 * CLOCK_MONOTONIC), summed by op code and, for Linear, by W's layout and
 * dtype. */
#ifndef LLMC_BENCH_PROFILE_H
#define LLMC_BENCH_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "llmc_rt_internal.h"

typedef struct {
    char name[48];          /* "RMSNorm", "Linear QWeightTiles Uint4" */
    uint32_t ops;           /* ops of the plan in the group */
} bench_op_group;

typedef struct {
    uint32_t n_ops;
    bench_op_group *groups;
    uint32_t n_groups;
    uint32_t *group_of;     /* per op */
    uint64_t *ns;           /* per op: where the observer adds; NULL: not timing */
    uint64_t begin_ns;      /* when the current op began */
} bench_profile;

/* Groups the plan's ops; -1 when out of memory. */
int bench_profile_init(bench_profile *p, const llmc_rt_plan *plan);
void bench_profile_free(bench_profile *p);

/* The observer: ctx is the bench_profile; adds each op's time to ns[op]
 * while ns is not NULL. */
void bench_profile_observe(void *ctx, uint32_t op_index, int end);

/* One test's profile: op_ns summed over its timed calls, which took
 * `seconds` for `tokens` tokens in all.  A table sorted by time, or with
 * json one object per line. */
void bench_profile_print(const bench_profile *p, const char *test, uint32_t threads,
                         const uint64_t *op_ns, double seconds, uint64_t tokens, bool json);

#endif
