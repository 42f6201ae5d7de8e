/* Weights and embedding tables dequantized from a pre-quantized file, in
 * the canonical forms of ir/quant_form.h: which, their bits, their values. */
#ifndef LLMC_QUANT_WEIGHT_H
#define LLMC_QUANT_WEIGHT_H

#include "ir/quant_form.h"

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
