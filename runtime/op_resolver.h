/* Internal: which op resolver entries (llmc_rt.h) an op needs.  Session
 * init resolves every op with it, and `llmc inspect --resolver` lists a
 * plan's entries with it, so the two cannot disagree. */
#ifndef LLMC_RT_OP_RESOLVER_H
#define LLMC_RT_OP_RESOLVER_H

#include <stdint.h>

#include "llmc_rt.h"

/* Indices into llmc_rt_op_resolver's tables; -1: none needed. */
typedef struct {
    int op;     /* the op's code */
    int unary;  /* Unary: its kind (-1 if out of range: the verifier refuses it) */
    int linear; /* Linear: W's kernel (LLMC_RT_LINEAR_*) */
} rt_op_needs;

/* For an op of `code` and `kind` whose W (Linear's input 1) has layout
 * w_layout, in a plan of prefill kernel prefill_kernel (Plan.prefill_kernel). */
rt_op_needs rt_op_needs_of(int code, int kind, int w_layout, uint32_t prefill_kernel);

/* Names as in plan_enums.h and LLMC_RT_LINEAR_KERNELS ("?" out of range). */
const char *rt_unary_kind_name(int kind);
const char *rt_linear_kernel_name(int kernel);

#endif
