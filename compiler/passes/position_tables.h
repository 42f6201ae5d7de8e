/* The model's position tables: constants whose rows positions index
 * (GPT-2's learned `wpe [positions, hidden]`, precomputed RoPE cos/sin
 * `[positions, rotary_dim]`), so the model computes nothing at a position
 * past their rows.  The CLI takes the default max context from them and
 * refuses a larger one. */
#ifndef LLMC_POSITION_TABLES_H
#define LLMC_POSITION_TABLES_H

#include <stdint.h>

#include "ir/ir.h"

typedef struct {
    int64_t rows;           /* rows of the smallest table; 0: the model has none */
    int table;              /* its value id, -1 when none */
    int gather;             /* the Gather reading it, -1 when none */
} llmc_position_limit;

/* Scans an imported graph for Gathers on axis 0 of a rank-2 float constant
 * (through Casts and Slices) whose indices are computed only from
 * position_ids, attention_mask, constants and shapes (never from input_ids'
 * values: that Gather is the token embedding). */
void llmc_position_tables(const llmc_graph *g, llmc_position_limit *out);

#endif
