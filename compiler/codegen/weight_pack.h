/* Compile-time packing of Linear weights into the tiles of the runtime's
 * kernels (runtime/quant_format.h), one row tile at a time so a
 * weight streams from the model into the plan without a packed copy of the
 * whole matrix in memory. */
#ifndef LLMC_WEIGHT_PACK_H
#define LLMC_WEIGHT_PACK_H

#include <stdint.h>

#include "quant_format.h"

/* Row tile ht of W [n, k] quantized: rows holds its n_rows (<= hp) rows,
 * the first at rows[0], row r at rows[r * row_stride]; rows n_rows..hp-1
 * are padding.  out receives the kp / group blocks of the tile
 * ((kp / group) * rt_qweight_block_bytes(s) bytes), that is the bytes at
 * rt_qweight_block_offset(s, ht, 0) of the packed tensor.
 *   bits 8: per (row, group) scale = amax / 127 rounded to binary16,
 *           q = round(w / scale) in [-127, 127];
 *   bits 4: per (row, group) min rounded DOWN and scale = (max - min) / 15
 *           rounded UP to binary16, so that min + 15 * scale >= max and
 *           every w lies in the grid: q = round((w - min) / scale) in
 *           [0, 15] is within scale / 2 of w, using the stored values. */
void cg_qpack_row_tile(const float *rows, int64_t row_stride, int64_t n_rows,
                       const rt_qweight_shape *s, uint8_t *out);

/* Row tile ht of W [n, k] from values quantized already (a pre-quantized
 * file's), in s's coefficient dtype: row r's value j is q[r * k + j]
 * (bits 4: 0..15, bits 8: an int8 as a byte), its group g's coefficients
 * scale[r * groups + g] and second[r * groups + g] (groups = kp / group):
 *   Float16 (s->coef RT_QCOEF_HALF): the min (bits 4; unused for bits 8),
 *           both written as binary16, so they must be binary16 values;
 *   Float32: the zero point, an integer (w = (q - zero) * scale).
 * Same output layout as cg_qpack_row_tile. */
void cg_qpack_row_tile_values(const uint8_t *q, const float *scale, const float *second, int64_t n_rows,
                              const rt_qweight_shape *s, uint8_t *out);

/* Row tile of W [n, k] in the fp32 tile layout: out[c * hp + r] = row r's
 * column c for c < k (k * hp floats, padding rows 0). */
void cg_fpack_row_tile(const float *rows, int64_t row_stride, int64_t n_rows,
                       const rt_ftile_shape *s, float *out);

#endif
