/* Arithmetic on affine dims c + s*S + p*P and on the polynomials that
 * products of dims (element counts) become, for shape inference and
 * constant folding.
 *
 * Bounds: the plan's contract is 1 <= S, 0 <= P, S + P <= max_context, so a
 * linear expression takes its extremes at the vertices (S,P) = (1,0),
 * (M,0), (1,M-1) of that triangle (M = max_context).  With M unknown (0)
 * only the side of (1,0) that non-negative/non-positive coefficients allow
 * is known. */
#ifndef LLMC_SYMBOLIC_H
#define LLMC_SYMBOLIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

/* All return false on int64 overflow. */
bool llmc_aff_add(llmc_affine a, llmc_affine b, llmc_affine *r);
bool llmc_aff_sub(llmc_affine a, llmc_affine b, llmc_affine *r);
bool llmc_aff_scale(llmc_affine a, int64_t k, llmc_affine *r);
/* a / k when k divides the coefficients of S and P; the constant part is
 * rounded toward zero (ONNX integer Div), which is exact when k divides it
 * too or when a is provably non-negative.  False otherwise. */
bool llmc_aff_div(llmc_affine a, int64_t k, uint32_t max_context, llmc_affine *r);

/* Lowest / highest value over the bounds above; false when unbounded. */
bool llmc_aff_min(llmc_affine a, uint32_t max_context, int64_t *lo);
bool llmc_aff_max(llmc_affine a, uint32_t max_context, int64_t *hi);
/* a >= b (a > b) for every (S, P) within the bounds. */
bool llmc_aff_provably_ge(llmc_affine a, llmc_affine b, uint32_t max_context);
bool llmc_aff_provably_gt(llmc_affine a, llmc_affine b, uint32_t max_context);

/* Polynomial in S and P: sum of c[i][j] * S^i * P^j.  Products of up to
 * LLMC_MAX_RANK dims fit. */
#define LLMC_POLY_DEG (LLMC_MAX_RANK + 1)
typedef struct {
    int64_t c[LLMC_POLY_DEG][LLMC_POLY_DEG];
} llmc_poly;

void llmc_poly_const(llmc_poly *p, int64_t c);
bool llmc_poly_mul_aff(llmc_poly *p, llmc_affine a);
bool llmc_poly_eq(const llmc_poly *a, const llmc_poly *b);
bool llmc_poly_is_const(const llmc_poly *p);   /* no S or P in it */
/* Exact division num / den; false when den does not divide num. */
bool llmc_poly_div(const llmc_poly *num, const llmc_poly *den, llmc_poly *q);
/* The polynomial as an affine dim; false when it has a term of degree 2+. */
bool llmc_poly_to_affine(const llmc_poly *p, llmc_affine *a);
/* "S*P", "2*S^2+3", ... for messages. */
void llmc_poly_format(const llmc_poly *p, char *buf, size_t size);

/* Product of dims [from, to) of a shape; false on overflow. */
bool llmc_shape_product(const llmc_shape *s, int from, int to, llmc_poly *p);
/* True when every dim is a constant; *numel gets the element count. */
bool llmc_shape_numel_const(const llmc_shape *s, int64_t *numel);
/* "[1,S,896]" */
void llmc_shape_format(const llmc_shape *s, char *buf, size_t size);

#endif
