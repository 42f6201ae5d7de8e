/* `llmc compile --npu-export DIR`: every NPU subgraph of a plan compiled
 * with --npu-chunk C as a standalone ONNX model, the form vendor NPU
 * converters take, plus a manifest of how the plan uses them.
 *
 * The plan is opened with the runtime and its chunked prefill initialized
 * with an exporter delegate: its prepare receives each subgraph's
 * description (llmc_rt_subgraph, exactly what an NPU driver gets, shapes at
 * S = C) and writes, atomically:
 *
 *   DIR/<name>.onnx          opset 17, IR 8, float32 inputs and outputs of
 *                            static dims, QDQ form: QuantizeLinear (after a
 *                            Clip to +-127 * scale, llmc's clamp) and
 *                            DequantizeLinear around each MatMul, whose
 *                            weight is an int8 initializer [K, N] with one
 *                            scale per output channel (axis 1); nodes and
 *                            values named after the plan's tensors (values
 *                            the exporter adds: "<plan op name>::<what>")
 *   DIR/<name>.inputs.bin    reference inputs: each input's float32 values,
 *                            inputs concatenated in order (deterministic
 *                            pseudo-random, about N(0, 2^2))
 *   DIR/<name>.outputs.bin   the reference delegate's outputs for them
 *                            (runtime/platform/llmc_ref_delegate.h), likewise
 *
 * then DIR/manifest.json: the chunk, the plan's file
 * name, per subgraph its files, plan op range, inputs and outputs (names,
 * dims), weight bytes, and the schedule: the nodes of a chunk in plan
 * order, each an NPU subgraph or a run of CPU ops.  The same plan gives
 * the same bytes in every file.
 *
 * The files are written into a temporary directory beside DIR
 * (support/out_file.h), renamed to DIR when all are complete; into a DIR
 * that exists they are moved one by one, the old manifest removed first
 * and the new one moved last, so a manifest never describes other files.
 * A failed or killed export leaves DIR as it was. */
#ifndef LLMC_NPU_EXPORT_H
#define LLMC_NPU_EXPORT_H

#include <stdint.h>

#include "support/diag.h"

/* Exports the subgraphs of the plan at plan_path into dir (created,
 * with its parents, if missing); *n_subgraphs (may be NULL) receives their count.  LLMC_E_INPUT
 * or LLMC_E_RUNTIME for a plan that cannot be opened or has no subgraphs,
 * LLMC_E_UNSUPPORTED for an op the export has no ONNX form of (naming the
 * subgraph and the op), LLMC_E_OUTPUT when a file cannot be written. */
int llmc_npu_export(const char *plan_path, const char *dir, uint32_t *n_subgraphs,
                    llmc_error *err);

#endif
