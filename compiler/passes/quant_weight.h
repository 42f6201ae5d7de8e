/* Weights and embedding tables dequantized from a pre-quantized file, in
 * the canonical forms of ir/quant_form.h: which, their tile format, their
 * values. */
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

/* The QWeightTiles format (runtime/quant_format.h) that holds a file's
 * weight bit for bit:
 *   bits  4 when every value and zero point lies in 0..15, else 8;
 *   coef  16 (binary16 scales, and mins -scale * zero_point for bits 4)
 *         when they give ONNX Runtime's (q - zero_point) * scale exactly:
 *         every scale a binary16, bits 8 every q - zero_point in
 *         -127..127 (stored as it is), bits 4 every element's
 *         scale * q + min equal to it in float32 (bit for bit, a zero's
 *         sign aside: a negative scale's 0 * scale is -0);
 *         else 32: the file's float32 scales and zero points as they are
 *         (a uint8 file's q and zero point stored minus 128). */
typedef struct {
    int bits;   /* 4 or 8 */
    int coef;   /* 16 or 32 */
} llmc_quant_tile_form;

/* The form of DequantizeLinear `dq`'s weight; 0, or -1 when its constants
 * have no bytes. */
int llmc_quant_weight_form(const llmc_graph *g, int dq, llmc_quant_tile_form *form);

/* The float32 values (q - zero_point) * scale, as ONNX Runtime computes
 * them, into out (all of Wq's elements, row-major); 0, or -1 when its
 * constants have no bytes. */
int llmc_quant_weight_dequantize(const llmc_graph *g, int dq, float *out);

#endif
