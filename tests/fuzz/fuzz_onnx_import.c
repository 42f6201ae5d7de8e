/* The ONNX importer on raw bytes: protobuf parsing, opset and op checks,
 * names, initializers (typed fields, raw_data, external data refused or
 * missing in an empty folder), dims, cycles. */
#include "fuzz_common.h"
#include "onnx/onnx_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llmc_graph g;
    llmc_error err = {0};
    if (llmc_import_onnx_memory(data, size, fuzz_model_path(), NULL, &g, &err) == LLMC_OK)
        llmc_graph_free(&g);
    return 0;
}
