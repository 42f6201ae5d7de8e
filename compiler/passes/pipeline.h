/* The pass pipeline: one ordered table (pipeline.c) run over the imported
 * graph, recording the live node count and the IR digest after each pass. */
#ifndef LLMC_PIPELINE_H
#define LLMC_PIPELINE_H

#include <stdbool.h>

#include "support/diag.h"
#include "ir/ir.h"
#include "ir/pass_record.h"
#include "pass.h"
#include "pass_list.h"
#include "support/progress.h"

/* Upper bound on the pipeline length: size of the records array. */
#define LLMC_PIPELINE_MAX_PASSES 32

/* Number of passes in the table (what *n_records will be on success). */
int llmc_pipeline_length(void);

/* Runs every pass in order.  After each one, records[i] gets its name, the
 * live node count and llmc_ir_digest(); with dump_dir set (created if
 * missing), the canonical dump goes to dump_dir/00-import.txt before the
 * first pass and dump_dir/NN-<pass>.txt after pass NN (01, 02, ...).
 * `records` holds LLMC_PIPELINE_MAX_PASSES entries; *n_records counts the
 * passes that completed, also on failure. */
int llmc_pipeline_run(llmc_graph *g, const llmc_pass_ctx *ctx, const char *dump_dir,
                      llmc_pass_record *records, int *n_records, llmc_error *err);

/* Where llmc_pipeline_run_dumps writes. */
typedef struct {
    const char *dir;        /* NULL: no dumps */
    bool dot;               /* also dir/NN-<pass>.dot, the Graphviz picture of
                             * ir_dot.h beside each NN-<pass>.txt */
    llmc_progress_fn progress;  /* NULL, or told (pass name, i, n) before pass i */
    void *progress_ctx;
} llmc_pipeline_dumps;

/* llmc_pipeline_run with the dumps of `dumps`.  The pictures mark which
 * pass created each node: the pipeline records the node count after every
 * pass, and a pass's new nodes are the ids between its count and the one
 * before (ir_dot.h). */
int llmc_pipeline_run_dumps(llmc_graph *g, const llmc_pass_ctx *ctx, const llmc_pipeline_dumps *dumps,
                            llmc_pass_record *records, int *n_records, llmc_error *err);

#endif
