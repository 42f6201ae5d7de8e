/* Constant scalar factors on projection outputs and embedding rows folded
 * into the weights (linear-fusion's first step, scale_fold.c). */
#ifndef LLMC_SCALE_FOLD_H
#define LLMC_SCALE_FOLD_H

#include "pass.h"

/* A llmc_fusion_visit: Mul/Div of node `node` folded into the constant it
 * scales (1), or left (0); -1 on OOM. */
int llmc_scale_fold_visit(llmc_graph *g, const llmc_pass_ctx *ctx, int node);

#endif
