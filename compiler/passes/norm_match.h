/* The part LayerNorm and RMSNorm exports share, matched from its Sqrt:
 *
 *     Mul(num / Sqrt(ReduceMean(sq(d), last axis, keepdims) + eps), scale)
 *
 * where sq(d) is Pow(d, 2) or Mul(d, d), the division is Div(num, sqrt),
 * or Mul(num, Reciprocal(sqrt)) / Mul(num, Div(1, sqrt)) (torch.rsqrt), and
 * scale is a float constant [D], D the last dim of d.  For RMSNorm num is
 * d; for LayerNorm both are x - mean(x) (one Sub, or two equal ones). */
#ifndef LLMC_NORM_MATCH_H
#define LLMC_NORM_MATCH_H

#include <stdbool.h>

#include "fusion_match.h"

typedef struct {
    int squared;        /* d: the value squared for the variance */
    int numerator;      /* num: the value divided by the root */
    float epsilon;
    int scale;          /* constant [D] */
    int root;           /* the Mul by scale */
} llmc_norm_parts;

/* Matches from node `sqrt_node` (a Sqrt), collecting it and the rest into
 * m; on failure the reason is recorded in m and parts->squared is -1 unless
 * the square was reached.  Does not check that the match is closed. */
bool llmc_match_norm(llmc_match *m, int sqrt_node, llmc_norm_parts *parts);
/* v (identity Casts stepped over) is Sub(a, mean) with mean a ReduceMean:
 * LayerNorm's centering, which RMSNorm fusion leaves alone. */
bool llmc_is_centered(const llmc_graph *g, int v);
/* Node `node` is a ReduceMean over only the last axis of its input, with
 * keepdims; records the reason when not. */
bool llmc_reduces_last_axis(llmc_match *m, int node);

#endif
