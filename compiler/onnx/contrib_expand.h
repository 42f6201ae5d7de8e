/* Expanding a contrib node (contrib_ops.h) into default-domain ONNX nodes.
 *
 * An expander gets the node's id in the imported graph and builds the
 * replacement with the calls below; the node's outputs keep their value ids
 * (and the names the rest of the graph reads), so only the node itself
 * goes.  Every error names the node, its op and, where one input is at
 * fault, that input. */
#ifndef LLMC_CONTRIB_EXPAND_H
#define LLMC_CONTRIB_EXPAND_H

#include <stdint.h>

#include "ir/ir.h"
#include "support/diag.h"

typedef struct {
    llmc_graph *g;
    const char *path;       /* the model file, for messages */
    int node;               /* the contrib node being expanded */
    int added;              /* nodes added so far (unique names) */
    llmc_error *err;
} llmc_expand;

/* Expands every contrib node of g (run by the importer once the graph is
 * read).  `path` names the file in errors. */
int llmc_expand_contrib(llmc_graph *g, const char *path, llmc_error *err);

/* ---- for expanders ---- */

/* Input i / output i of the node, -1 if absent or omitted. */
int ex_input(const llmc_expand *e, int i);
int ex_output(const llmc_expand *e, int i);
/* Fails with "'model.onnx': node 'n' (domain::Op): <message>" (LLMC_E_UNSUPPORTED for a
 * construct llmc does not compile, LLMC_E_INPUT for a malformed one). */
int ex_fail(llmc_expand *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Fails naming input i ("input 2 'scales'") before the message. */
int ex_fail_input(llmc_expand *e, int code, int i, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Output i must have no reader: the expansion does not compute it. */
int ex_refuse_read_output(llmc_expand *e, int i, const char *what);

/* A new constant owning a copy of data, of any dtype and shape, or a
 * float32 scalar, an int64 scalar, an int64 vector; its value id, -1 on
 * OOM (err set). */
int ex_const(llmc_expand *e, int dtype, const llmc_shape *shape, const void *data, uint64_t bytes);
int ex_const_float(llmc_expand *e, float v);
int ex_const_int(llmc_expand *e, int64_t v);
int ex_const_ints(llmc_expand *e, const int64_t *v, int n);
/* A new default-domain node at opset LLMC_EXPAND_OPSET writing fresh
 * values of dtype `dtype` (n_outputs of them, ids into outs): returns its
 * node id, -1 on OOM (err set).  ex_node1 returns the one output's id. */
int ex_node(llmc_expand *e, const char *op, const int *ins, int n_ins, int dtype, int *outs,
            int n_outputs);
int ex_node1(llmc_expand *e, const char *op, const int *ins, int n_ins, int dtype);
/* The same writing the existing value `out` (one of the node's outputs). */
int ex_node_into(llmc_expand *e, const char *op, const int *ins, int n_ins, int out);
/* Attributes on a node ex_node made; 0, or -1 on OOM (err set). */
int ex_set_int(llmc_expand *e, int node, const char *name, int64_t v);
int ex_set_float(llmc_expand *e, int node, const char *name, float v);
int ex_set_ints(llmc_expand *e, int node, const char *name, const int64_t *v, int n);

/* The expanders (one row each in LLMC_CONTRIB_OP_LIST). */
int expand_simplified_layer_norm(llmc_expand *e);
int expand_skip_simplified_layer_norm(llmc_expand *e);
int expand_skip_layer_norm(llmc_expand *e);
int expand_fast_gelu(llmc_expand *e);
int expand_rotary_embedding(llmc_expand *e);
int expand_group_query_attention(llmc_expand *e);
int expand_matmul_nbits(llmc_expand *e);
int expand_gather_block_quantized(llmc_expand *e);

#endif
