/* The ONNX operators llmc compiles (default domain, opsets 13..21): the
 * rows of LLMC_ONNX_OP_LIST (ir/op_list.h).  `llmc ops` prints them; the
 * importer rejects everything else and checks each node's input and output
 * counts against its row. */
#ifndef LLMC_ONNX_OPS_H
#define LLMC_ONNX_OPS_H

#include <stdbool.h>

#include "ir/op_list.h"

#define LLMC_MIN_OPSET 13
#define LLMC_MAX_OPSET 21

typedef struct {
    const char *name;
    int min_inputs, max_inputs, min_outputs, max_outputs;
} llmc_onnx_op_info;

/* The entry of `op_type`, or NULL if llmc does not compile it. */
const llmc_onnx_op_info *llmc_onnx_op_find(const char *op_type);
bool llmc_onnx_op_supported(const char *op_type);

#endif
