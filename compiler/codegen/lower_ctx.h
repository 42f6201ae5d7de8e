/* The lowering context (lower_ctx.c) under every per-op lowerer: the node
 * being lowered, its operands as plan tensors, emitted ops, messages. */
#ifndef LLMC_LOWER_CTX_H
#define LLMC_LOWER_CTX_H

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
int lower_out_of_memory(lower_ctx *L);

/* The plan tensor of graph value v: a new Arena tensor recorded as v's. */
int lower_tensor_from_value(lower_ctx *L, int v, uint32_t *t);
/* v's plan tensor: the one made when v was computed, or for a constant a
 * new Weight tensor on first use. */
int lower_tensor_of_value(lower_ctx *L, int v, uint32_t *t);
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
/* Makes value v a Weight tensor over `data` (which the plan does not own). */
int lower_weight_tensor(lower_ctx *L, int v, const void *data, uint64_t nbytes, uint32_t *t);
/* Tensor t becomes a Weight over malloc'ed `data`, which the plan owns. */
void lower_own_weight(lower_ctx *L, uint32_t t, void *data, uint64_t nbytes);
/* A float scalar Weight the lowering makes up (Gemm's alpha and beta). */
int lower_scalar_weight(lower_ctx *L, const char *suffix, float value, uint32_t *t);

/* Appends an op named after the current node.  The pointer is valid until
 * the next lower_emit. */
cg_op *lower_emit(lower_ctx *L, int code);
/* The same under another name (graph outputs copied out of a constant). */
cg_op *lower_emit_named(lower_ctx *L, int code, const char *name);
/* One op reading node inputs 0..n_inputs-1 into output 0. */
int lower_emit_simple(lower_ctx *L, int code, int kind, int n_inputs);
/* One op of two given inputs into `out` (chains inside one node). */
int lower_emit_to(lower_ctx *L, int code, int kind, uint32_t a, uint32_t b, uint32_t out);
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

/* Element count of a shape whose dims are all constants. */
static inline uint64_t const_elems(const llmc_shape *s)
{
    uint64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= (uint64_t)s->dims[i].c;
    return n;
}

/* Are all dims constant and non-negative? */
static inline bool shape_is_const(const llmc_shape *s)
{
    for (int i = 0; i < s->rank; i++)
        if (!llmc_aff_is_const(s->dims[i]) || s->dims[i].c < 0)
            return false;
    return s->rank >= 0;
}

static inline llmc_affine aff_add(llmc_affine a, llmc_affine b)
{
    llmc_affine r = {a.c + b.c, a.s + b.s, a.p + b.p};
    return r;
}

#endif
