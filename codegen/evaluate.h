/* Evaluation of IR on the runtime's own kernels: codegen to an in-memory
 * plan, then llmc_rt_* runs it.  Constant folding and check-onnx both use
 * this, so op semantics have one source of truth (the runtime). */
#ifndef LLMC_EVALUATE_H
#define LLMC_EVALUATE_H

#include <stdint.h>

#include "support/diag.h"
#include "ir/ir.h"
#include "llmc_rt.h"

/* One result: dims evaluated at the run's (S, P), bytes malloc'ed. */
typedef struct {
    int dtype;
    llmc_shape shape;       /* constant dims */
    void *data;
    uint64_t nbytes;
} llmc_eval_tensor;

void llmc_eval_tensor_free(llmc_eval_tensor *t);

/* Compiles `g` and runs it once at (S, P) with `inputs` (one per graph
 * input, in order).  outputs[k] receives graph output k (caller frees each
 * with llmc_eval_tensor_free).  Errors: codegen's (LLMC_E_UNSUPPORTED when
 * an op cannot be lowered), LLMC_E_RUNTIME when the runtime rejects or
 * fails the plan, LLMC_E_NOMEM. */
int llmc_evaluate_graph(const llmc_graph *g, uint32_t S, uint32_t P, uint32_t max_context,
                        const llmc_rt_tensor *inputs, llmc_eval_tensor *outputs, llmc_error *err);

/* Evaluates node `node` of `g`, whose present inputs are all constants, on
 * a one-node graph of its own.  outputs[k] receives node output k (empty,
 * data NULL, for omitted outputs). */
int llmc_evaluate_node(const llmc_graph *g, int node, llmc_eval_tensor *outputs, llmc_error *err);

/* Evaluates value `value` of `g` at (S, P) as a function of the call
 * position alone: its ancestor subgraph runs with the role inputs bound by
 * the LLM contract (position_ids = P .. P+S-1 along the last axis,
 * attention_mask = all ones).  If the value depends on any other graph
 * input (input_ids, past_key_values, ...), returns LLMC_E_UNSUPPORTED with a
 * message naming it; evaluation errors as llmc_evaluate_graph.  The caller
 * frees *out with llmc_eval_tensor_free. */
int llmc_evaluate_position_value(const llmc_graph *g, int value, uint32_t S, uint32_t P,
                                 llmc_eval_tensor *out, llmc_error *err);

#endif
