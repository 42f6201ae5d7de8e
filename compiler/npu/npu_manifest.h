/* The manifest of the NPU export (npu_export.h): DIR/manifest.json, the
 * chunk, the plan's file name, per subgraph its files, plan op range,
 * inputs and outputs (names, dims) and weight bytes, and the schedule: the
 * nodes of a chunk in plan order, each an NPU subgraph or a run of CPU
 * ops. */
#ifndef LLMC_NPU_MANIFEST_H
#define LLMC_NPU_MANIFEST_H

#include "npu_exporter.h"

#define MANIFEST_FILE "manifest.json"

/* Writes ex->dir/MANIFEST_FILE atomically for the subgraphs ex exported,
 * with c's nodes of plan and chunk C = chunk. */
int npx_write_manifest(const exporter *ex, const llmc_rt_chunked *c, const llmc_rt_plan *plan,
                       uint32_t chunk);

#endif
