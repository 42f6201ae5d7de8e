/* Internal: what the files of the plan verifier share.  llmc_rt_plan_open
 * (verify_plan.c: the header, the tensors, the fused KV caches, the driver)
 * proves the whole plan before anything executes; verify_ops.c checks each
 * op's arity and operands and the ops that compare no dims, verify_ops_dims.c
 * the ops that do (Gather, Linear and the fused ops, Trilu, ScatterND,
 * CumSum), verify_io.c what follows the ops.  The driver makes one call into
 * each file, so that a firmware build (-Os, no LTO) still inlines each
 * file's steps and the core stays within its size budget
 * (tests/t_firmware_core.sh). */
#ifndef LLMC_RT_VERIFY_H
#define LLMC_RT_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "plan_format.h"
#include "rt_msg.h"

/* What the op checks need to know about one of its tensors. */
typedef struct {
    int dtype, rank, kind, layout;
    uint32_t group;
} tensor_meta;

#define MAX_META 5 /* inputs described by tensor_meta: the most any op but Copy takes */

/* What an op's checks see (llmc_rt.h): the op, the meta of its first
 * MAX_META inputs and of its first output. */
struct llmc_rt_op_check {
    fb_reader *r;
    const llmc_rt_plan *p;
    const rt_op_desc *op;
    tensor_meta in[MAX_META], y;
    uint64_t *region_affines; /* Copy's checks add its regions' Affines (rt_add_capped) */
};
typedef const struct llmc_rt_op_check op_check;

/* Pool counts stop growing here: a plan may share one vector among many
 * ops, so the sums can exceed any memory, and no session holds 2^40. */
#define RT_COUNT_CAP ((uint64_t)1 << 40)

static inline uint64_t rt_add_capped(uint64_t total, uint64_t n)
{
    return n >= RT_COUNT_CAP - total ? RT_COUNT_CAP : total + n; /* total <= RT_COUNT_CAP */
}

/* verify_ops.c: the meta of tensor i (verified already); every op's checks,
 * those of the op resolver's entries, which add the Affines of the Copy
 * ops' regions to *region_affines (the session's Affine pool holds them). */
tensor_meta rt_meta_of(fb_reader *r, const llmc_rt_plan *p, uint32_t i);
llmc_rt_status rt_verify_ops(fb_reader *r, const llmc_rt_plan *p, const llmc_rt_op_resolver *ops,
                             uint64_t *region_affines, llmc_rt_error *err);
/* The failures many op checks report. */
llmc_rt_status rt_bad_dtypes(const char *what, llmc_rt_error *err);
llmc_rt_status rt_bad_axis(int64_t axis, int rank, llmc_rt_error *err);

/* verify_io.c: what follows the ops and the fused caches, in this order: the
 * IO bindings, the pass records, the segments, the tokenizer, and the size
 * of the KV store of the unfused caches (p->kv_bytes). */
llmc_rt_status rt_verify_after_ops(fb_reader *r, llmc_rt_plan *p, unsigned flags,
                                   llmc_rt_error *err);

#endif
