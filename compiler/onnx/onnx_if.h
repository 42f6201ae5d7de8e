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
 * Refused, naming the node (and the output): a condition computed from
 * data, or a graph input when not exactly one branch reads the past;
 * branches whose output counts, element types or declared shapes differ;
 * a subgraph inside the inlined branch; branch inputs.
 *
 * Inlining moves the branch's nodes to the If's place in the node list and
 * its initializers and value_info to the graph: names the branch reads
 * from the outer scope (hoisted initializers, graph inputs, earlier nodes'
 * outputs) resolve in the graph as they stand.  A branch output named
 * differently from the If's output is copied by an Identity node. */
#ifndef LLMC_ONNX_IF_H
#define LLMC_ONNX_IF_H

#include "onnx_import_priv.h"

/* The op this file takes (listed by `llmc ops` with the ONNX ops). */
#define LLMC_ONNX_IF_OP "If"

/* Inlines every If node of `gp` (a graph of an unpacked model, changed in
 * place); `path` names the model in errors.  report->inlined_if describes
 * what was done. */
int llmc_onnx_inline_ifs(Onnx__GraphProto *gp, const char *path, llmc_import_report *report,
                         llmc_error *err);

#endif
