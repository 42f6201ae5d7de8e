/* Evaluation of IR on the runtime's own kernels: codegen to an in-memory
 * plan, then llmc_rt_* runs it.  The passes reach it through the evaluator
 * of their context (llmc_runtime_evaluator), check-onnx and the tests call
 * it directly, so op semantics have one source of truth (the runtime). */
#ifndef LLMC_EVALUATE_H
#define LLMC_EVALUATE_H

#include <stdint.h>

#include "support/diag.h"
#include "ir/evaluator.h"
#include "ir/ir.h"
#include "llmc_rt.h"

/* Compiles `g` and runs it once at (S, P) with `inputs` (one per graph
 * input, in order).  outputs[k] receives graph output k (caller frees each
 * with llmc_eval_tensor_free).  Errors: codegen's (LLMC_E_UNSUPPORTED when
 * an op cannot be lowered), LLMC_E_RUNTIME when the runtime rejects or
 * fails the plan, LLMC_E_NOMEM. */
int llmc_evaluate_graph(const llmc_graph *g, uint32_t S, uint32_t P, uint32_t max_context,
                        const llmc_rt_tensor *inputs, llmc_eval_tensor *outputs, llmc_error *err);

/* The two calls of ir/evaluator.h's interface, and that interface over
 * them: what the CLI hands the passes (llmc_pass_ctx.evaluator). */
int llmc_evaluate_node(const llmc_graph *g, int node, llmc_eval_tensor *outputs, llmc_error *err);
int llmc_evaluate_position_value(const llmc_graph *g, int value, uint32_t S, uint32_t P,
                                 llmc_eval_tensor *out, llmc_error *err);
extern const llmc_evaluator llmc_runtime_evaluator;

#endif
