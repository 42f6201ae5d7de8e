/* llmc runtime: calls for the llmc tools and tests only (profilers,
 * calibration, plan listings, kernel comparisons).  Not installed: an
 * application needs llmc_rt.h, and firmware that trims its kernels
 * llmc_rt_resolver.h. */
#ifndef LLMC_RT_INTERNAL_H
#define LLMC_RT_INTERNAL_H

#include "llmc_rt_resolver.h"

/* An op, for tools (profilers, listings). */
typedef struct {
    int code;                         /* its OpCode: LLMC_RT_OP_Linear, ...
                                         (llmc_rt_op_name prints it) */
    const char *name;                 /* its name; points into the plan */
    int weight_dtype;                 /* Linear: W's dtype (llmc_rt_dtype); else 0 */
    int weight_layout;                /* Linear: W's llmc.plan.Layout; else 0 */
} llmc_rt_op_info;

llmc_rt_status llmc_rt_plan_op(const llmc_rt_plan *plan, uint32_t index, llmc_rt_op_info *op);

/* Runs the plan with the kernels of `isa` (an ISA of its target this CPU
 * runs, e.g. the plain "avx2" table on an AVX-512 machine, to compare
 * them) instead of the fastest; LLMC_RT_E_TARGET names the ones there are.
 * Call before session init. */
llmc_rt_status llmc_rt_plan_use_kernels(llmc_rt_plan *plan, const char *isa,
                                        llmc_rt_error *err);

/* Profiling.  The runtime has no clock.  An observer installed on a
 * session is called on the calling thread right before (end = 0) and right after (end = 1)
 * every op of every run and feed, even one that fails; the caller's
 * callback reads its own clock.  op_index is the op's plan index
 * (llmc_rt_plan_op names it). */
typedef void (*llmc_rt_op_observer)(void *ctx, uint32_t op_index, int end);

/* Installs fn(ctx, op_index, end) as the session's op observer; fn NULL =
 * none.  Call after init (init clears it). */
void llmc_rt_session_set_observer(llmc_rt_session *s, llmc_rt_op_observer fn, void *ctx);

/* For an observer (calibration, debugging): input `slot` of op `op_index`
 * as the call of S new tokens after P past ones sizes it, and its tensor's
 * name (points into the plan).  Called from the observer before the op
 * runs (end = 0), the bytes are what the call's earlier ops wrote. */
llmc_rt_status llmc_rt_session_op_input(const llmc_rt_session *s, uint32_t op_index,
                                        uint32_t slot, uint32_t S, uint32_t P,
                                        llmc_rt_tensor *out, const char **name,
                                        llmc_rt_error *err);

/* XXH64 (seed 0), the hash the plan uses for weight segments. */
uint64_t llmc_rt_xxh64(const void *data, size_t len, uint64_t seed);

#endif
