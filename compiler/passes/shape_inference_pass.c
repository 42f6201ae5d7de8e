/* shape-inference: dtype and symbolic shape of every value, plus the
 * symbolic contents of small integer tensors (paper §III.B).
 *
 * Dims are affine in S (tokens of this call) and P (past length).  Integer
 * tensors of at most LLMC_MAX_SYM_ELEMS elements also carry their contents
 * as affine values, so Shape -> Gather -> Unsqueeze -> Concat -> Reshape
 * chains resolve to targets like [1, S, 16, 2, 64] that constant folding can
 * turn into constants.  Semantics follow the ONNX operator specs for opsets
 * 13..21; anything not representable (a dim S*P, an unknown shape operand)
 * is an LLMC_E_UNSUPPORTED error naming the node, and inconsistent inputs
 * (broadcast or MatMul dims that differ) are LLMC_E_INPUT.
 *
 * Nodes are visited once in topological order; the pass can run again after
 * any rewrite and recomputes everything but graph inputs and constants. */
#include <stdlib.h>

#include "pass.h"
#include "shape_declared.h"
#include "shape_infer.h"
#include "shape_ops.h"

typedef int (*infer_fn)(infer *c);

#define HANDLER(op, min_in, max_in, min_out, max_out, lower, kind, shape) shape,
#define FUSED_HANDLER(op, lower, kind, shape) shape,
static const infer_fn handlers[] = {LLMC_ONNX_OP_LIST(HANDLER) LLMC_FUSED_OP_LIST(FUSED_HANDLER)};
#undef FUSED_HANDLER
#undef HANDLER
_Static_assert(sizeof handlers / sizeof *handlers == LLMC_OP_COUNT, "one shape handler (or NULL) per op");

static int infer_node(infer *c)
{
    infer_fn fn = c->op == LLMC_OP_NONE ? NULL : handlers[c->op];
    if (!fn)
        return infer_fail(c, LLMC_E_UNSUPPORTED, "no shape inference for op %s%s%s", c->n->domain,
                          c->n->domain[0] ? "." : "", c->n->op_type);
    bool needs_input = c->op != LLMC_ONNX_Constant && c->op != LLMC_FUSED_Symbols;
    if (needs_input && !input(c, 0))
        return infer_fail(c, LLMC_E_INPUT, "input 0 is missing");
    for (int k = 0; k < c->n->n_inputs; k++) {
        const llmc_value *v = input(c, k);
        if (v && (v->shape.rank < 0 || v->dtype == LLMC_DT_UNDEFINED))
            return infer_fail(c, LLMC_E_UNSUPPORTED, "input %d '%s' has unknown %s", k, v->name,
                              v->shape.rank < 0 ? "rank" : "type");
    }
    return fn(c);
}

static int check_graph_inputs(const llmc_graph *g, llmc_error *err)
{
    for (int k = 0; k < g->n_inputs; k++) {
        const llmc_value *v = &g->values[g->inputs[k]];
        if (v->shape.rank < 0 || v->dtype == LLMC_DT_UNDEFINED)
            return llmc_fail(err, LLMC_E_UNSUPPORTED, "graph input '%s' has unknown %s", v->name,
                             v->shape.rank < 0 ? "rank" : "type");
    }
    return LLMC_OK;
}

static int run_shape_inference(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    int rc = check_graph_inputs(g, err);
    if (rc)
        return rc;
    for (int v = 0; v < g->n_values; v++)
        llmc_value_fill_const_sym(&g->values[v]);
    int *order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    int cycle = -1;
    if (!order)
        return llmc_fail(err, LLMC_E_NOMEM, "shape inference: out of memory");
    int n = llmc_graph_topo_order(g, order, &cycle);
    if (n < 0)
        rc = cycle >= 0 ? llmc_fail(err, LLMC_E_INPUT, "graph has a cycle through node '%s' (#%d, %s)",
                                    g->nodes[cycle].name, cycle, g->nodes[cycle].op_type)
                        : llmc_fail(err, LLMC_E_NOMEM, "shape inference: out of memory");
    infer c = {.g = g, .max_context = ctx ? ctx->max_context : 0, .err = err};
    for (int i = 0; i < n && rc == LLMC_OK; i++) {
        c.id = order[i];
        c.n = &g->nodes[order[i]];
        c.op = llmc_node_op(c.n);
        rc = infer_node(&c);
    }
    free(order);
    return rc ? rc : llmc_check_declared(g, err);
}

const llmc_pass llmc_pass_shape_inference = {"shape-inference", run_shape_inference};
