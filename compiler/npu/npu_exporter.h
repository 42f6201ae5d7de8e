/* The exporter delegate of the NPU export (npu_export.h): the runtime's
 * chunked prefill prepares every subgraph through it, and its prepare
 * writes that subgraph's files (<name>.onnx, <name>.inputs.bin and
 * <name>.outputs.bin, the reference delegate's outputs); nothing runs
 * through it. */
#ifndef LLMC_NPU_EXPORTER_H
#define LLMC_NPU_EXPORTER_H

#include "npu_onnx.h"

typedef struct {
    const llmc_rt_subgraph *sg;    /* in the chunked prefill's memory */
    uint64_t weight_bytes;         /* its .onnx's weight initializers */
    bool released;
} export_entry;

typedef struct {
    const char *dir, *plan_name;
    llmc_rt_delegate ref;          /* the reference delegate's table */
    export_entry **entries;        /* by subgraph index */
    uint32_t n_entries;
    llmc_error *err;
    int rc;                        /* the first failure, detailed in err */
} exporter;

/* The delegate table whose functions export through ex (ctx = ex); ex->ref
 * is the reference delegate's table, the rest as above. */
void npx_exporter_table(exporter *ex, llmc_rt_delegate *out);
/* "dir/name" + suffix, malloc'ed (NULL: out of memory). */
char *npx_path_join(const char *dir, const char *name, const char *suffix);

#endif
