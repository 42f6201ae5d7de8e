/* Pieces of shape inference that constant folding reuses.  The pass itself
 * is the descriptor llmc_pass_shape_inference (pipeline.h). */
#ifndef LLMC_SHAPE_INFERENCE_H
#define LLMC_SHAPE_INFERENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "support/diag.h"
#include "ir/ir.h"

/* The integer dtypes whose small tensors carry their contents (int64,
 * int32, bool). */
static inline bool llmc_is_int_dtype(int dtype)
{
    return dtype == LLMC_DT_INT64 || dtype == LLMC_DT_INT32 || dtype == LLMC_DT_BOOL;
}

/* Known contents of an integer value: its constant data (int64, int32 or
 * bool, at most `max` elements), its symbolic contents, or nothing when it
 * has no elements.  Returns the element count, or -1 when unknown. */
int llmc_value_ints(const llmc_graph *g, int value, llmc_affine *vals, int max);

/* Sets v's contents (sym, n_sym) from its constant data when v is a
 * small integer constant; else n_sym = 0. */
void llmc_value_fill_const_sym(llmc_value *v);

/* ONNX Reshape: output shape of `in` reshaped to `target` (0 copies the
 * input dim unless allowzero, one -1 is solved from the element count).
 * Returns LLMC_OK, or LLMC_E_INPUT / LLMC_E_UNSUPPORTED with `why` filled. */
int llmc_reshape_shape(const llmc_shape *in, const llmc_affine *target, int n, bool allowzero,
                       llmc_shape *out, char *why, size_t why_size);

/* ONNX Slice (opset 13) of one axis of constant length d with start s, end
 * e and step k != 0: negative indices count from the end, then clamp.
 * *first = the first index taken, *len = how many. */
void llmc_slice_axis_const(int64_t d, int64_t s, int64_t e, int64_t k, int64_t *first, int64_t *len);

#endif
