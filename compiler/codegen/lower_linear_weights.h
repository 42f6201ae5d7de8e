/* Weights in the packed layouts the target runs (lower_linear_weights.c). */
#ifndef LLMC_LOWER_LINEAR_WEIGHTS_H
#define LLMC_LOWER_LINEAR_WEIGHTS_H

#include "lower_ctx.h"

/* W [K, N] of a Linear as the Weight the target runs: quantized tiles (the
 * node's quant_bits; a file's W with the coefficients its quant_coef
 * names), fp32 tiles (targets with f_hp), else dense [N, K]. */
int lower_linear_weight(lower_ctx *L, int wv, uint32_t *t);
/* The DequantizeLinear in canonical form (passes/quant_canonical.c) that
 * produces W, whose q values, scales and zero points the Linear packs as
 * they are; -1 when W is a float constant. */
int lower_file_dequantize(const llmc_graph *g, int wv);
/* The table E [V, H] of an embedding Gather as a packed Weight [V, H]:
 * bits 16 Half, 8 or 4 QWeightTiles in groups of `group`, 32 FWeightTiles
 * (the target's fp32 tiles: a tied LM head's format); a file's table with
 * the coefficients the Gather's embed_coef names. */
int lower_embedding_table(lower_ctx *L, int ev, int bits, int64_t group, uint32_t *t);

#endif
