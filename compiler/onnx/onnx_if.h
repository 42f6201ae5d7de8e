/* ONNX If nodes, inlined on the protobuf side before the graph is imported.
 *
 * optimum's merged decoders (decoder_model_merged.onnx) hold one If whose
 * then/else branches are the decoder with past and without past, selected
 * by a bool graph input (use_cache_branch).  llmc's runtime owns the KV
 * cache and always runs the with-past computation (with a past of length
 * 0 at the first step), so for a plan the condition is a constant: the
 * branch that reads the past key/value graph inputs (found by structure,
 * not by the condition's name) replaces the If, and the condition input
 * leaves the graph.  An If on a constant condition (an initializer or a
 * Constant node) inlines the branch the constant selects.
 *
 * An If on a condition computed in the graph (onnxruntime-genai's LongRoPE
 * caches: Greater(total_sequence_length, original_max_position_embeddings))
 * keeps both branches: their nodes move before the If, which loses its
 * branch attributes and reads [condition, then outputs..., else outputs...]
 * (the op list's If).  Shape inference decides the condition over the
 * plan's bounds and gives the If the selected branch's shapes, or refuses
 * the node; constant folding then rewires its readers to that branch and
 * dead-code drops the other (docs/passes.md).
 *
 * Refused, naming the node (and the output): a graph input condition when
 * not exactly one branch reads the past;
 * branches whose output counts, element types or declared shapes differ;
 * a subgraph inside an inlined branch; branch inputs; a name both kept
 * branches define.  Kept branches may differ in output shapes.
 *
 * Inlining moves the branch's nodes to the If's place in the node list and
 * its initializers and value_info to the graph: names the branch reads
 * from the outer scope (hoisted initializers, graph inputs, earlier nodes'
 * outputs) resolve in the graph as they stand.  A branch output named
 * differently from the If's output is copied by an Identity node. */
#ifndef LLMC_ONNX_IF_H
#define LLMC_ONNX_IF_H

#include "onnx_import_priv.h"

/* Inlines every If node of `gp` (a graph of an unpacked model, changed in
 * place); `path` names the model in errors.  report->inlined_if describes
 * what was done. */
int llmc_onnx_inline_ifs(Onnx__GraphProto *gp, const char *path, llmc_import_report *report,
                         llmc_error *err);

#endif
