/* Graphviz picture of the IR: what a pass left behind and what it created.
 *
 * One digraph per call.  Live nodes are boxes labelled with their op type,
 * a shortened node name with the node id (the "#ID" --explain prints), the
 * key attributes of fused ops and the pass that created the node; llmc-domain
 * (fused) ops are filled, nodes created by the pass the picture follows have
 * a bold red border.  Edges are values, labelled dtype and shape as in the
 * canonical dump ("float [1,S,64]").  Graph inputs and outputs are distinct
 * shapes.  Constants are not drawn: a model has one per weight, norm scale
 * and table (hundreds in a real one), and as boxes they would double the
 * node count and bury the data flow in fan-in arrows; each consumer's label
 * counts its constant operands instead ("+2 const").  Nodes whose name
 * carries a decoder layer (layer_name.h) sit in `subgraph cluster_layer_N`.
 *
 * The text depends only on the graph (node ids included, which the same
 * input always reproduces): same input, same bytes. */
#ifndef LLMC_IR_DOT_H
#define LLMC_IR_DOT_H

#include <stdio.h>

#include "ir.h"

/* Which stage created each node.  Stage 0 is the importer, stage k >= 1 the
 * k-th pass.  Passes only ever append nodes (llmc_graph_add_node is the only
 * place n_nodes grows; erased nodes stay in the array, marked dead), so the
 * nodes stage k created are the ids in [end[k-1], end[k]). */
typedef struct {
    int n_stages;               /* stages run so far; the picture follows the last */
    const int *end;             /* end[k]: g->n_nodes after stage k */
    const char *const *name;    /* name[k]: "import", then each pass's name */
} llmc_dot_origin;

/* Writes the picture of `g` after stage origin->n_stages - 1; 0 on success,
 * -1 on a write error, out of memory or a cycle. */
int llmc_ir_dot(const llmc_graph *g, const llmc_dot_origin *origin, FILE *out);

#endif
