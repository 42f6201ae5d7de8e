/* The canonical forms of a pre-quantized file's weights in the IR (made by
 * passes/quant_canonical.c, kept by linear fusion and quantize-embedding,
 * packed by codegen): DequantizeLinear of constants Wq (uint8 or int8, one
 * value per byte) with a scale and a zero point of the same shape, blocked
 * along the reduction axis:
 *   weight  axis 0: Wq [K, N], scale [G, N], block_size B, G = ceil(K / B)
 *           (a MatMul's B: one scale per B rows of a column)
 *   table   axis 1: Wq [V, H], scale [V, G], G = ceil(H / B) (an
 *           embedding Gather's data: one scale per B columns of a row) */
#ifndef LLMC_QUANT_FORM_H
#define LLMC_QUANT_FORM_H

#include "ir.h"
#include "llmc_ops.h"
#include "quant_format.h"

/* The canonical DequantizeLinear producing v along `axis` (0 weight, 1
 * table; -1 either), or -1. */
static inline int llmc_quant_dequantize_of(const llmc_graph *g, int v, int axis)
{
    int p = v >= 0 ? g->values[v].producer : -1;
    if (p < 0 || g->nodes[p].dead || !llmc_is_onnx_op(&g->nodes[p], "DequantizeLinear") || g->nodes[p].n_inputs != 3)
        return -1;
    for (int k = 0; k < 3; k++)
        if (g->nodes[p].inputs[k] < 0 || !g->values[g->nodes[p].inputs[k]].is_const)
            return -1;
    const llmc_value *w = &g->values[g->nodes[p].inputs[0]], *s = &g->values[g->nodes[p].inputs[1]];
    int64_t at = llmc_node_attr_int(g, p, "axis", 1);
    bool canonical = w->shape.rank == 2 && s->shape.rank == 2 && llmc_node_attr_int(g, p, "block_size", 0) > 0 &&
                     (at == 0 || at == 1) && (axis < 0 || at == axis);
    return canonical ? p : -1;
}

/* The binary16 min of a 4-bit group with binary16 coefficients
 * (runtime/quant_format.h: w = scale * q + min): -scale * zero_point. */
static inline uint16_t llmc_quant_half_min(float scale, int zero_point)
{
    return rt_float_to_half(-scale * (float)zero_point);
}

#endif
