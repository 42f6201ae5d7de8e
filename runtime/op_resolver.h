/* Internal: which op resolver entries (llmc_rt.h) an op needs.  Session
 * init resolves every op with it, and `llmc inspect --resolver` lists a
 * plan's entries with it, so the two cannot disagree. */
#ifndef LLMC_RT_OP_RESOLVER_H
#define LLMC_RT_OP_RESOLVER_H

#include <stdbool.h>
#include <stdint.h>

#include "llmc_rt_resolver.h"

/* What decides an op's entries: its code and kind, the dtypes and layouts
 * of its first two inputs, the plan's prefill kernel and KV cache dtype. */
typedef struct {
    int code, kind;
    int in_dtype[2];         /* inputs 0 and 1 (Binary's a and b; -1: no such input) */
    int in_layout[2];        /* Gather's table (0), Linear's W (1); Dense without one */
    uint32_t prefill_kernel; /* Plan.prefill_kernel */
    int kv_cache_dtype;      /* Plan.kv_cache_dtype */
} rt_op_key;

/* Indices into llmc_rt_op_resolver's tables; -1: none needed. */
typedef struct {
    int op;     /* the op's code */
    int unary;  /* Unary: its kind (-1 if out of range: the verifier refuses it) */
    int binary; /* Binary of float32 operands: its kind's float32 loop */
    bool binary_any_dtype; /* Binary of other operands (or kinds) */
    int gather; /* Gather: its table's kernel (LLMC_RT_GATHER_*) */
    int linear; /* Linear: W's kernel (LLMC_RT_LINEAR_*) */
    int kv_cache; /* Attention: its cache dtype's loops (LLMC_RT_KV_*; -1 if unknown: the
                     verifier refuses it) */
} rt_op_needs;

rt_op_needs rt_op_needs_of(const rt_op_key *key);

/* session_prepare.c: the prepare steps of the op codes with fields of
 * their own (llmc_rt_op_entry). */
llmc_rt_status rt_prepare_Copy(const struct llmc_rt_op_prep *prep, llmc_rt_error *err);
llmc_rt_status rt_prepare_Symbols(const struct llmc_rt_op_prep *prep, llmc_rt_error *err);
llmc_rt_status rt_prepare_Reduce(const struct llmc_rt_op_prep *prep, llmc_rt_error *err);
llmc_rt_status rt_prepare_Linear(const struct llmc_rt_op_prep *prep, llmc_rt_error *err);
llmc_rt_status rt_prepare_ShadowLinear(const struct llmc_rt_op_prep *prep, llmc_rt_error *err);

/* Names as in plan_enums.h, LLMC_RT_LINEAR_KERNELS and LLMC_RT_KV_CACHES ("?"
 * out of range). */
const char *rt_unary_kind_name(int kind);
const char *rt_binary_kind_name(int kind);
const char *rt_gather_kernel_name(int kernel);
const char *rt_linear_kernel_name(int kernel);
const char *rt_kv_cache_name(int kv_cache);

#endif
