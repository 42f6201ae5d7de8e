/* The reader of ONNX backend test-case tensors (test_data_set_N/input_K.pb) that
 * `llmc check-onnx` uses, on raw bytes. */
#include "fuzz_common.h"
#include "onnx/onnx_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llmc_tensor_file t;
    llmc_error err = {0};
    if (llmc_read_tensor_pb_memory(data, size, "fuzz.pb", &t, &err) == LLMC_OK)
        llmc_tensor_file_free(&t);
    return 0;
}
