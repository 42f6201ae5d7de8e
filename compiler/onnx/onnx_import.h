/* ONNX model -> llmc graph IR.
 *
 * The .onnx file is mapped read-only, hashed (XXH64, seed 0, into
 * g->source_hash) and unpacked with protobuf-c.  Constants are not copied:
 * raw_data initializers point into the unpacked message and external data
 * into read-only mappings of the weight files; the graph keeps both alive
 * (g->import_state) until llmc_graph_free().  Only initializers stored in
 * the typed fields (float_data, int32_data, ...) get owned buffers.
 *
 * Graph-input dims: dim_value, or a dim_param bound by an explicit
 * `--dim NAME=VALUE` or recognized from the input names (see io_roles.h):
 * axis 0 of any LLM input is the batch (bound to 1), input_ids/position_ids
 * axis 1 is S, past key/value axis 2 is P, attention_mask axis 1 is S when
 * it shares input_ids' dim_param and P+S otherwise.  Other dim_params are
 * an error.
 *
 * Errors name the file, the node (its name and "#i", its index in the ONNX
 * node list), the op, the tensor and the offsets involved.  On failure the
 * graph is left empty (llmc_graph_free() on it is harmless). */
#ifndef LLMC_ONNX_IMPORT_H
#define LLMC_ONNX_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "support/diag.h"
#include "ir/ir.h"

typedef struct {
    const char *name;
    int64_t value;
} llmc_dim_binding;

/* What the importer widened: llmc computes in float32, so float16 and
 * bfloat16 constants become float32 (exactly), graph inputs, outputs and
 * value_info declared float16/bfloat16 become float32, and a Cast to
 * float16/bfloat16 becomes a Cast to float32 (an identity on float input).
 * `const_bytes` is the float32 memory the widened constants took (twice
 * their 16-bit size); the 16-bit bytes in the protobuf message are freed
 * as each constant is widened, external data pages stay mapped. */
typedef struct {
    uint32_t consts[2];                 /* [0] float16, [1] bfloat16: initializers, Constant
                                         * values and tensor attributes */
    uint32_t inputs[2], outputs[2];     /* graph inputs / outputs declared 16-bit */
    uint32_t value_infos[2];            /* value_info entries declared 16-bit */
    uint32_t casts[2];                  /* Cast(to = float16 / bfloat16) nodes */
    uint64_t const_bytes;
    char inlined_if[512];               /* the If nodes inlined and why (onnx_if.h), "" if none */
} llmc_import_report;

typedef struct {
    int n_dims;
    const llmc_dim_binding *dims;       /* --dim NAME=VALUE */
    llmc_import_report *report;         /* filled when not NULL */
} llmc_import_options;

/* One line (no newline) describing `r`, e.g. "import: 12 float16 tensors
 * widened to float32 (...)"; "" when nothing was widened. */
void llmc_import_report_line(const llmc_import_report *r, char *buf, size_t size);

/* Exact 16-bit float -> float32 conversions (subnormals, inf, NaN kept). */
float llmc_half_to_float(uint16_t h);
float llmc_bfloat16_to_float(uint16_t b);

/* `opt` may be NULL (no bindings).  Returns LLMC_OK or the error code. */
int llmc_import_onnx(const char *path, const llmc_import_options *opt, llmc_graph *g, llmc_error *err);

/* The same on a serialized model already in memory (`size` bytes, needed
 * only during the call).  `path` names the model in messages, and its
 * folder is where external data files are looked up (and must stay): it
 * need not exist as a file, but its folder must. */
int llmc_import_onnx_memory(const void *bytes, size_t size, const char *path,
                            const llmc_import_options *opt, llmc_graph *g, llmc_error *err);

/* Reads one serialized TensorProto file (ONNX backend test case
 * input_N.pb/output_N.pb): dtype, dims, and a malloc'ed copy of the data in
 * little-endian row-major order (NULL when the tensor is empty). */
typedef struct {
    char *name;
    int dtype;
    int rank;
    int64_t dims[LLMC_MAX_RANK];
    void *data;
    uint64_t nbytes;
} llmc_tensor_file;

int llmc_read_tensor_pb(const char *path, llmc_tensor_file *t, llmc_error *err);
/* The same on a serialized TensorProto in memory; `name` names it in
 * messages. */
int llmc_read_tensor_pb_memory(const void *bytes, size_t size, const char *name, llmc_tensor_file *t,
                               llmc_error *err);
void llmc_tensor_file_free(llmc_tensor_file *t);

#endif
