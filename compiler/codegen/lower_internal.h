/* Shared by lower.c (driver, compute ops) and lower_layout.c (ops that
 * become Copy regions). */
#ifndef LLMC_LOWER_INTERNAL_H
#define LLMC_LOWER_INTERNAL_H

#include "plan_model.h"

typedef struct {
    const llmc_graph *g;
    cg_plan *p;
    llmc_error *err;
    int32_t *tensor_of;     /* graph value id -> plan tensor, -1 = not yet */
    int node;               /* the node being lowered, for messages */
    const rt_target_info *target;   /* tile sizes of packed layouts */
} lower_ctx;

static inline const llmc_node *cur_node(const lower_ctx *L) { return &L->g->nodes[L->node]; }

/* Value id of input/output k of the current node, -1 if absent. */
int node_in(const lower_ctx *L, int k);
int node_out(const lower_ctx *L, int k);
const llmc_value *node_in_value(const lower_ctx *L, int k);

/* "node 'name' (#id, Op): value 'v': <msg>" (value < 0: no value part). */
int lower_fail(lower_ctx *L, int code, int value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Plan tensor read by input k (constants become Weight tensors). */
int lower_input(lower_ctx *L, int k, uint32_t *t);
/* New Arena tensor for output k. */
int lower_output(lower_ctx *L, int k, uint32_t *t);
/* New Arena tensor for an intermediate result inside one node's lowering. */
int lower_temp(lower_ctx *L, const char *suffix, int dtype, int rank, const llmc_affine *dims,
               uint32_t *t);

/* Appends a tensor named name + suffix (Arena unless the caller fills the
 * weight fields). */
int lower_new_tensor(lower_ctx *L, const char *name, const char *suffix, int dtype, int rank,
                     const llmc_affine *dims, uint32_t *t);
/* Tensor t becomes a Weight over malloc'ed `data`, which the plan owns. */
void lower_own_weight(lower_ctx *L, uint32_t t, void *data, uint64_t nbytes);

/* lower_linear_weights.c: W [K, N] of a Linear as the Weight the target
 * runs: quantized tiles (the node's quant_bits), fp32 tiles (targets with
 * f_hp), else dense [N, K]. */
int lower_linear_weight(lower_ctx *L, int wv, uint32_t *t);
/* The table E [V, H] of an embedding Gather as a packed Weight [V, H]:
 * bits 16 Half, 8 or 4 QWeightTiles in groups of `group`, 32 FWeightTiles
 * (the target's fp32 tiles: a tied LM head's format). */
int lower_embedding_table(lower_ctx *L, int ev, int bits, int64_t group, uint32_t *t);
int lower_quantize_rows(lower_ctx *L, int unused);
int lower_shadow_linear(lower_ctx *L, int unused);

/* Appends an op named after the current node.  The pointer is valid until
 * the next lower_emit. */
cg_op *lower_emit(lower_ctx *L, int code);
int op_add_input(lower_ctx *L, cg_op *op, uint32_t t);
int op_add_output(lower_ctx *L, cg_op *op, uint32_t t);
/* A region from src to dst covering all of dst with the identity mapping
 * (src axis k for dst axis k, step 1) when ranks match, starts at 0. */
cg_region *op_add_region(lower_ctx *L, cg_op *op, uint32_t src, uint32_t dst);

/* Small int operand k (constant or fully symbolic) as Affine values;
 * *n = 0 when the optional input is absent. */
int lower_ints(lower_ctx *L, int k, llmc_affine *out, int max, int *n);
/* Like lower_ints (max <= LLMC_MAX_RANK), but no element may depend on S or P. */
int lower_const_ints(lower_ctx *L, int k, int64_t *out, int max, int *n);
/* Normalizes a possibly negative axis against `rank`. */
int lower_axis(lower_ctx *L, int64_t axis, int rank, int32_t *out);

static inline llmc_affine aff_add(llmc_affine a, llmc_affine b)
{
    llmc_affine r = {a.c + b.c, a.s + b.s, a.p + b.p};
    return r;
}

int lower_transpose(lower_ctx *L, int unused);
int lower_slice(lower_ctx *L, int unused);
int lower_concat(lower_ctx *L, int unused);
int lower_split(lower_ctx *L, int unused);
int lower_expand(lower_ctx *L, int unused);
/* Gather whose indices are a small constant: regions; else a Gather op. */
int lower_gather(lower_ctx *L, int unused);
/* Copy with one region swapping the two axes of a matrix into a new temp. */
int lower_transpose_2d(lower_ctx *L, uint32_t src, const char *suffix, uint32_t *out);

#endif
