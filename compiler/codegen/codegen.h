/* IR -> plan: lowering to the closed plan op set, static memory planning,
 * weight segments and FlatBuffer writing (schemas/plan.fbs). */
#ifndef LLMC_CODEGEN_H
#define LLMC_CODEGEN_H

#include <stddef.h>
#include <stdint.h>

#include "support/diag.h"
#include "ir/ir.h"
#include "ir/pass_record.h"
#include "support/progress.h"


typedef struct {
    uint32_t max_context;               /* bound on S + P for arena sizing */
    int n_passes;
    const llmc_pass_record *passes;     /* recorded in the plan for `inspect` */
    uint32_t threads;                   /* for hashing the plan read back; 0 or 1 = this
                                         * thread.  The plan's bytes never depend on it. */
    llmc_progress_fn progress;          /* NULL: no progress reports */
    void *progress_ctx;
    const char *target;                 /* Plan.target; NULL = "generic" */
    uint32_t gemm_min_rows;             /* Plan.gemm_min_rows; 0 = the runtime's default */
    int kv_cache_dtype;                 /* Plan.kv_cache_dtype (llmc_rt_dtype: F32, F16,
                                         * I8); 0 = F32.  Not F32 needs fused caches
                                         * only (no PastKey inputs). */
    const uint8_t *tokenizer;           /* compiled tokenizer (compiler/tokenizer/tokenizer_json.h) for
                                         * Plan.tokenizer, its own last segment; NULL: none */
    size_t tokenizer_size;
} llmc_codegen_options;

/* What the plan holds, for the CLI to print. */
typedef struct {
    uint32_t n_ops;
    uint32_t op_counts[32];             /* indexed by llmc.plan.OpCode */
    uint32_t n_tensors;
    uint64_t arena_bytes;
    uint64_t weight_bytes;
    uint64_t file_bytes;
    uint32_t layers;                    /* decoder layers the op names show */
    uint32_t layer_ops_min, layer_ops_max;  /* plan ops per layer */
    uint32_t n_subgraphs, npu_chunk;    /* NPU chunk subgraphs (--npu-chunk) */
    uint32_t subgraph_ops;              /* ops inside them */
    uint64_t subgraph_weight_bytes;     /* distinct weight segments they read */
} llmc_codegen_stats;

/* Writes the plan to `path` atomically (a temporary file in the same
 * directory, then rename): on failure nothing is left at `path`. */
int llmc_codegen_to_file(const llmc_graph *g, const llmc_codegen_options *opt,
                         const char *path, llmc_codegen_stats *stats, llmc_error *err);

/* Builds the plan in memory: *plan is malloc'ed (64-byte aligned, free()
 * it), *size its length.  Used by constant folding and check-onnx. */
int llmc_codegen_to_memory(const llmc_graph *g, const llmc_codegen_options *opt,
                           uint8_t **plan, size_t *size, llmc_codegen_stats *stats,
                           llmc_error *err);

#endif
