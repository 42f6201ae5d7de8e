/* Copies the other lowerers use (lower_layout.c). */
#ifndef LLMC_LOWER_LAYOUT_H
#define LLMC_LOWER_LAYOUT_H

#include "lower_ctx.h"

/* Copy with one region swapping the two axes of a matrix into a new temp. */
int lower_transpose_2d(lower_ctx *L, uint32_t src, const char *suffix, uint32_t *out);

#endif
