/* Small helpers the fusion passes share for matching node patterns on
 * values: who produced a value, constant contents, axes. */
#ifndef LLMC_MATCH_H
#define LLMC_MATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "support/diag.h"
#include "ir/ir.h"

/* The default-domain node of type `op` producing value v, or -1. */
int llmc_match_producer(const llmc_graph *g, int v, const char *op);

/* Contents of a constant int64/int32 tensor of at most `max` elements into
 * out[]; *n gets the count.  False if v is not such a constant. */
bool llmc_match_const_ints(const llmc_graph *g, int v, int64_t *out, int max, int *n);

/* The value of a float, double, int64 or int32 constant with exactly one element. */
bool llmc_match_const_scalar(const llmc_graph *g, int v, double *x);

/* Is dim d exactly the symbol S (tokens of this call)? */
bool llmc_match_dim_is_s(llmc_affine d);

/* Reads node `node`'s INT attribute `name` as an axis of a rank-`rank`
 * tensor, negative values counted from the end; -1 if out of range. */
int llmc_match_axis_attr(const llmc_graph *g, int node, const char *name, int64_t dflt, int rank);

/* Does node `node` carry INTS `name` exactly equal to want[0..n)? */
bool llmc_match_ints_attr(const llmc_graph *g, int node, const char *name, const int64_t *want, int n);

/* Slice node `node` on the last axis of its input with step 1 from `start`
 * to `end` (end < 0: through the end of the axis), bounds compared after
 * ONNX's clamping?  *x gets its data input. */
bool llmc_match_slice_last(const llmc_graph *g, int node, int64_t start, int64_t end, int *x);
/* Slice node `node` on the constant last axis of its input with step 1?
 * *start and *end get its bounds after ONNX's clamping, *x its data input. */
bool llmc_match_slice_last_range(const llmc_graph *g, int node, int64_t *start, int64_t *end, int *x);

/* The one live node reading v, or -1 if v has other readers (or none) or
 * is a graph output. */
int llmc_match_sole_reader(const llmc_graph *g, int v);
/* Erases the nodes whose outputs nobody reads, and unread constants:
 * the dead-code pass, run inside a fusion pass after it rewrote. */
int llmc_match_sweep(llmc_graph *g, llmc_error *err);

#endif
