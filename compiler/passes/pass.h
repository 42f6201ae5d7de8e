/* One graph pass = one file in passes/ exporting one descriptor; the
 * pipeline (pipeline.c) is one ordered table of them. */
#ifndef LLMC_PASS_H
#define LLMC_PASS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "support/diag.h"
#include "ir/evaluator.h"
#include "ir/ir.h"

typedef struct {
    /* runs subgraphs for constant folding and the fusions that compare
     * values (compiler/codegen/evaluate.h's llmc_runtime_evaluator); a pass that
     * needs it fails with LLMC_E_INTERNAL when it is NULL */
    const llmc_evaluator *evaluator;
    uint32_t max_context;   /* bound on S + P */
    int quant_bits;         /* quantize pass: Linear weight bits, 8 or 4; 0 = float32 */
    int lm_head_bits;       /* bits of the Linear producing a graph output (logits) */
    int64_t quant_group;    /* K elements per weight scale; 0 = one per output channel */
    int embed_bits;         /* quantize-embedding: 32, 16 or 8 (0 = 32) */
    bool logits_last;       /* logits-last: the LM head computes the last position only */
    /* quantize: static per-tensor activation scales (--calibrate); NULL: per row */
    const struct llmc_calibration *calibration;
    /* shadow-outliers: the share of calibrated Linears (most important first) that
     * keep their outliers exact; 0: none */
    double shadow_fraction;
    /* npu-partition: the chunk length C subgraphs are built for (--npu-chunk); 0: none */
    uint32_t npu_chunk;
    bool explain;           /* print why a pattern did not match (to `log`) */
    FILE *log;              /* explanations; may be NULL */
    /* A pass may describe what it did here (NUL-terminated, e.g. "3 merged");
     * the pipeline clears it before each pass and keeps it in the pass table. */
    char *detail;
    size_t detail_size;
} llmc_pass_ctx;

typedef struct {
    const char *name;       /* "shape-inference", "constant-folding", ... */
    int (*run)(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err);
} llmc_pass;

/* With ctx->explain: "PASS: node 'NAME' (#ID, OP) not rewritten: WHY\n" to
 * ctx->log, WHY formatted from fmt. */
void llmc_pass_explain(const llmc_pass_ctx *ctx, const char *pass, const llmc_graph *g, int node,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* ctx's evaluator, or an LLMC_E_INTERNAL error naming `pass` (NULL). */
const llmc_evaluator *llmc_pass_evaluator(const llmc_pass_ctx *ctx, const char *pass, llmc_error *err);
/* Formats what the pass did into ctx->detail (if the caller gave room). */
void llmc_pass_detail(const llmc_pass_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
