/* Evaluating IR: what constant folding and the fusions that compare a
 * subgraph's values (RoPE tables, attention masks) ask of whoever runs
 * graphs.  The passes are handed an evaluator in their context
 * (llmc_pass_ctx.evaluator) instead of calling codegen: compiler/codegen/evaluate.h's
 * llmc_runtime_evaluator lowers the graph and runs it on the runtime's own
 * kernels, so op semantics have one source of truth. */
#ifndef LLMC_EVALUATOR_H
#define LLMC_EVALUATOR_H

#include <stdint.h>

#include "support/diag.h"
#include "ir.h"

/* One result: dims evaluated at the run's (S, P), bytes malloc'ed. */
typedef struct {
    int dtype;
    llmc_shape shape;       /* constant dims */
    void *data;
    uint64_t nbytes;
} llmc_eval_tensor;

void llmc_eval_tensor_free(llmc_eval_tensor *t);

typedef struct {
    /* Evaluates node `node` of `g`, whose present inputs are all constants,
     * on a one-node graph of its own.  outputs[k] receives node output k
     * (empty, data NULL, for omitted outputs). */
    int (*node)(const llmc_graph *g, int node, llmc_eval_tensor *outputs, llmc_error *err);
    /* Evaluates value `value` of `g` at (S, P) as a function of the call
     * position alone: its ancestor subgraph runs with the role inputs bound
     * by the LLM contract (position_ids = P .. P+S-1 along the last axis,
     * attention_mask = all ones).  If the value depends on any other graph
     * input (input_ids, past_key_values, ...), LLMC_E_UNSUPPORTED with a
     * message naming it.  The caller frees *out with llmc_eval_tensor_free. */
    int (*position_value)(const llmc_graph *g, int value, uint32_t S, uint32_t P,
                          llmc_eval_tensor *out, llmc_error *err);
} llmc_evaluator;

#endif
