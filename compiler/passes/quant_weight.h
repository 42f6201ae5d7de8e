/* Weights and embedding tables dequantized from a pre-quantized file, in
 * the canonical forms quant_canonical.c leaves: DequantizeLinear of
 * constants Wq (uint8 or int8, one value per byte) with a scale and a zero
 * point of the same shape, blocked along the reduction axis:
 *   weight  axis 0: Wq [K, N], scale [G, N], block_size B, G = ceil(K / B)
 *           (a MatMul's B: one scale per B rows of a column)
 *   table   axis 1: Wq [V, H], scale [V, G], G = ceil(H / B) (an
 *           embedding Gather's data: one scale per B columns of a row) */
#ifndef LLMC_QUANT_WEIGHT_H
#define LLMC_QUANT_WEIGHT_H

#include "ir/ir.h"
#include "ir/llmc_ops.h"

/* The canonical DequantizeLinear along `axis` (0 weight, 1 table)
 * producing v, or -1. */
static inline int llmc_quant_dequantize_of(const llmc_graph *g, int v, int axis)
{
    int p = v >= 0 ? g->values[v].producer : -1;
    if (p < 0 || g->nodes[p].dead || !llmc_is_onnx_op(&g->nodes[p], "DequantizeLinear") || g->nodes[p].n_inputs != 3)
        return -1;
    for (int k = 0; k < 3; k++)
        if (g->nodes[p].inputs[k] < 0 || !g->values[g->nodes[p].inputs[k]].is_const)
            return -1;
    const llmc_value *w = &g->values[g->nodes[p].inputs[0]], *s = &g->values[g->nodes[p].inputs[1]];
    bool canonical = w->shape.rank == 2 && s->shape.rank == 2 && llmc_node_attr_int(g, p, "block_size", 0) > 0 &&
                     llmc_node_attr_int(g, p, "axis", 1) == axis;
    return canonical ? p : -1;
}

/* A file-quantized MatMul weight [K, N] / embedding table [V, H]. */
static inline int llmc_quant_weight(const llmc_graph *g, int v)
{
    return llmc_quant_dequantize_of(g, v, 0);
}

static inline int llmc_quant_table(const llmc_graph *g, int v)
{
    return llmc_quant_dequantize_of(g, v, 1);
}

/* Its Wq / scale / zero point value (input k of the DequantizeLinear). */
static inline int llmc_quant_weight_input(const llmc_graph *g, int dq, int k)
{
    return g->nodes[dq].inputs[k];
}

/* The tile format that holds the file's values exactly: 4 for uint8
 * values and zero points within 0..15 (stored as they are: w = scale * q +
 * min, min = -scale * zp), 8 when every q - zp lies in -127..127 (llmc's
 * int8 tiles are symmetric), 0 when neither; -1 on OOM. */
int llmc_quant_weight_bits(const llmc_graph *g, int dq);

/* The float32 values (q - zero_point) * scale, as ONNX Runtime computes
 * them, into out (all of Wq's elements, row-major); 0, or -1 on OOM. */
int llmc_quant_weight_dequantize(const llmc_graph *g, int dq, float *out);

#endif
