/* The context shape inference gives each op's shape handler (shape_ops.h):
 * the node, its operands and outputs, and the helpers every handler uses
 * (shape_infer.c).  Errors name the node and its inputs; anything not
 * representable is LLMC_E_UNSUPPORTED, inconsistent inputs LLMC_E_INPUT. */
#ifndef LLMC_SHAPE_INFER_H
#define LLMC_SHAPE_INFER_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/ir_dump.h"
#include "ir/op_list.h"
#include "shape_inference.h"
#include "symbolic.h"

typedef struct {
    llmc_graph *g;
    uint32_t max_context;
    llmc_error *err;
    int id;                 /* the node being inferred */
    const llmc_node *n;
    llmc_op op;             /* its op, resolved once */
} infer;

/* Input k, or NULL when omitted. */
static inline const llmc_value *input(const infer *c, int k)
{
    if (k >= c->n->n_inputs || c->n->inputs[k] < 0)
        return NULL;
    return &c->g->values[c->n->inputs[k]];
}

/* Value id of input k, -1 when absent. */
static inline int input_id(const infer *c, int k)
{
    return k < c->n->n_inputs ? c->n->inputs[k] : -1;
}

/* An output this node defines, or NULL when omitted or folded away. */
static inline llmc_value *output(const infer *c, int k)
{
    if (k >= c->n->n_outputs || c->n->outputs[k] < 0)
        return NULL;
    llmc_value *v = &c->g->values[c->n->outputs[k]];
    return v->producer == c->id ? v : NULL;
}

/* `a` as text in buf, for messages. */
static inline const char *aff_str(llmc_affine a, char buf[96])
{
    llmc_ir_format_affine(a, buf, 96);
    return buf;
}

static inline llmc_shape make_shape(int rank, const llmc_affine *dims)
{
    llmc_shape s;
    s.rank = rank;
    for (int i = 0; i < rank; i++)
        s.dims[i] = dims[i];
    return s;
}

static inline llmc_shape scalar_shape(void)
{
    llmc_shape s = {.rank = 0};
    return s;
}

static inline llmc_shape vector_shape(llmc_affine len)
{
    return make_shape(1, &len);
}

/* "node 'name' (#id, Op): <msg> (inputs: ...)" */
int infer_fail(const infer *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Sets output k's dtype and shape and forgets its contents. */
void infer_set_output(const infer *c, int k, int dtype, const llmc_shape *s);
/* Records the contents of output k when it is a small integer tensor. */
void infer_set_output_sym(const infer *c, int k, const llmc_affine *sym, int n);
/* Output 0 gets the contents of input `from_input`, when they are known. */
void infer_copy_sym(const infer *c, int from_input);

/* An axis attribute/operand in [-rank, rank-1] made non-negative. */
int infer_normalize_axis(const infer *c, int64_t axis, int rank, int *out);
/* Contents of input k, which must be known constants (axes, perm, ...). */
int infer_const_ints(const infer *c, int k, int64_t *vals, int max, int *n, const char *what);
/* Contents of input k, symbolic allowed (shape operands, Slice bounds). */
int infer_known_ints(const infer *c, int k, llmc_affine *vals, int *n, const char *what);
/* LLMC_OK when a == b; else LLMC_E_INPUT (both constant) or
 * LLMC_E_UNSUPPORTED naming `what`. */
int infer_require_equal_dims(const infer *c, llmc_affine a, llmc_affine b, const char *what);

/* numpy multidirectional broadcasting of shapes a and b into r. */
int infer_broadcast_shapes(const infer *c, const llmc_shape *a, const llmc_shape *b, llmc_shape *r);
/* Flat index in `in` of the element that broadcasts to flat index `flat`
 * of `out` (both constant shapes). */
int64_t infer_broadcast_source(const llmc_shape *out, const llmc_shape *in, int64_t flat);

#endif
