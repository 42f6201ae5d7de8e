/* Canonical text form of a graph, and its digest.
 *
 * The dump depends only on what the graph computes and how things are named,
 * never on node or value ids: nodes appear in a topological order whose ties
 * are broken by the name of the node's first output (ONNX value names are
 * unique), constants are sorted by name and show a hash of their bytes.
 * Dead nodes and values nothing live reaches are left out.  So the same
 * graph built in another node-array order dumps to the same text, and the
 * digest (recorded per pass in the plan) changes exactly when a pass changed
 * something visible.
 *
 *   input  input_ids int64 [1,S]
 *   const  w float [896,896] bytes=3211264 xxh64=0123456789abcdef
 *   node   MatMul 'mm' (x, w) -> (y)
 *          attrs: perm=[0,2,1,3] alpha=1
 *          y float [1,S,896]
 *   output y float [1,S,896]
 */
#ifndef LLMC_IR_DUMP_H
#define LLMC_IR_DUMP_H

#include <stdint.h>
#include <stdio.h>

#include "ir.h"

/* Writes the canonical dump; 0 on success, -1 on a write error, out of
 * memory or a cycle. */
int llmc_ir_dump(const llmc_graph *g, FILE *out);

/* XXH64 (seed 0) of exactly the text llmc_ir_dump writes; 0 if the dump
 * fails. */
uint64_t llmc_ir_digest(const llmc_graph *g);

/* Writes an affine dim the way the dump does: "64", "S", "P+S", "2*S+1". */
void llmc_ir_format_affine(llmc_affine a, char *buf, size_t size);

#endif
