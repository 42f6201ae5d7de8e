/* A Linear's or MatMul's weight dequantized from a pre-quantized file: W
 * produced by DequantizeLinear(Wq [K, N], scale [G, N], zero_point [G, N])
 * of constants with axis 0 and block_size ceil(K / G), the canonical form
 * quant_canonical.c leaves. */
#ifndef LLMC_QUANT_WEIGHT_H
#define LLMC_QUANT_WEIGHT_H

#include "ir/ir.h"
#include "ir/llmc_ops.h"

/* The canonical DequantizeLinear producing v, or -1. */
static inline int llmc_quant_weight(const llmc_graph *g, int v)
{
    int p = v >= 0 ? g->values[v].producer : -1;
    if (p < 0 || g->nodes[p].dead || !llmc_is_onnx_op(&g->nodes[p], "DequantizeLinear") || g->nodes[p].n_inputs != 3)
        return -1;
    for (int k = 0; k < 3; k++)
        if (g->nodes[p].inputs[k] < 0 || !g->values[g->nodes[p].inputs[k]].is_const)
            return -1;
    const llmc_value *w = &g->values[g->nodes[p].inputs[0]], *s = &g->values[g->nodes[p].inputs[1]];
    return w->shape.rank == 2 && s->shape.rank == 2 && llmc_node_attr_int(g, p, "axis", 1) == 0 ? p : -1;
}

/* Its Wq / scale / zero point value (input k of the DequantizeLinear). */
static inline int llmc_quant_weight_input(const llmc_graph *g, int dq, int k)
{
    return g->nodes[dq].inputs[k];
}

/* W [K, N] in float32: scale * (q - zero_point), as ONNX Runtime computes
 * it, into out (K * N floats); 0, or -1 on OOM. */
int llmc_quant_weight_dequantize(const llmc_graph *g, int dq, float *out);

#endif
