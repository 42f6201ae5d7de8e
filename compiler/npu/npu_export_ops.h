/* The op exporters of the NPU export (npu_export.h): each plan op of a
 * subgraph as ONNX opset 17 nodes in QDQ form (the formulas of
 * ir/llmc_ops.h, the ops of the reference delegate,
 * runtime/platform/ref_prepare.c), and the model of a subgraph. */
#ifndef LLMC_NPU_EXPORT_OPS_H
#define LLMC_NPU_EXPORT_OPS_H

#include "npu_onnx.h"

#define ONNX_OPSET 17
#define ONNX_IR_VERSION 8

/* Ranks and dims in range, no empty dim; inputs and outputs float32 and no
 * weights (LLMC_E_UNSUPPORTED naming the subgraph and the tensor). */
int npx_check_tensors(const llmc_rt_subgraph *sg, llmc_error *err);
/* The graph of every op of g->sg, its inputs and outputs, wrapped in
 * *model (LLMC_E_UNSUPPORTED naming the op it has no ONNX form of). */
int npx_build_model(onnx_graph *g, const char *plan_name, Onnx__ModelProto *model);

#endif
