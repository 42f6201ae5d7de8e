/* Internals shared by the ONNX importer's files: onnx_import.c (graph),
 * onnx_dims.c (input/output dims), onnx_tensor.c (TensorProto decoding),
 * external_data.c (file mappings). */
#ifndef LLMC_ONNX_IMPORT_PRIV_H
#define LLMC_ONNX_IMPORT_PRIV_H

#include <stdint.h>

#include "support/diag.h"
#include "support/file_map.h"
#include "ir/ir.h"
#include "onnx/onnx.pb-c.h"
#include "onnx_import.h"

/* Names in messages are cut so that one long name cannot fill the message. */
#define LLMC_NAME_FMT "'%.300s'"


/* External data files of one model, each mapped once. */
typedef struct llmc_ext_file llmc_ext_file;
typedef struct {
    char *model_dir;            /* realpath of the folder holding the .onnx */
    llmc_ext_file *files;
} llmc_ext_cache;

int llmc_ext_cache_init(llmc_ext_cache *c, const char *model_path, llmc_error *err);
void llmc_ext_cache_free(llmc_ext_cache *c);
/* Points *data at the `nbytes` of external data tensor `t` (described as
 * `what` in errors) inside the mapping of its file. */
int llmc_ext_data(llmc_ext_cache *c, const Onnx__TensorProto *t, const char *what,
                  uint64_t nbytes, const void **data, llmc_error *err);

/* A decoded TensorProto.  data.owned: the caller must free data.data. */
typedef struct {
    int dtype;
    int rank;
    int64_t dims[LLMC_MAX_RANK];
    llmc_const data;
} llmc_onnx_tensor;

/* Decodes dtype, shape and data; `what` ("initializer 'w'") names the tensor
 * in errors.  ext == NULL refuses external data. */
int llmc_onnx_tensor_decode(const Onnx__TensorProto *t, const char *what, llmc_ext_cache *ext,
                            llmc_onnx_tensor *out, llmc_error *err);

/* float16 and bfloat16 (the 16-bit float types llmc widens) */
bool llmc_dtype_is_float16(int dtype);
/* A decoded float16/bfloat16 tensor becomes float32, exactly, in a new
 * owned buffer (an owned source buffer is freed; a borrowed one is the
 * caller's to release).  Other dtypes are left alone. */
int llmc_onnx_tensor_widen(llmc_onnx_tensor *t, const char *what, llmc_error *err);

/* Element count of a shape; negative dims and 64-bit overflow are errors. */
int llmc_shape_elements(const int64_t *dims, int rank, const char *what, uint64_t *count,
                        llmc_error *err);

/* ---- onnx_dims.c ---- */

/* NULL unless the value is a tensor. */
const Onnx__TypeProto__Tensor *llmc_onnx_tensor_type(const Onnx__ValueInfoProto *vi);

/* dim_param name (borrowed from the model) -> affine dim. */
typedef struct {
    const char *name;
    llmc_affine value;
} llmc_dim_symbol;

typedef struct {
    llmc_dim_symbol *syms;
    int n, cap;
} llmc_dim_table;

/* Binds the --dim options, then the roles of the graph inputs (those that
 * are not initializers) of graph gp. */
int llmc_dim_table_build(llmc_dim_table *t, const llmc_import_options *opt, const Onnx__GraphProto *gp,
                         const Onnx__ValueInfoProto *const *inputs, size_t n_inputs, llmc_error *err);
void llmc_dim_table_free(llmc_dim_table *t);
/* A graph input's shape: every dim fixed or bound, else an error. */
int llmc_input_shape(const llmc_dim_table *t, const Onnx__ValueInfoProto *vi, llmc_shape *shape,
                     llmc_error *err);
/* A graph output's shape when every dim is known, else rank -1 (shape
 * inference computes it). */
int llmc_output_shape(const llmc_dim_table *t, const Onnx__ValueInfoProto *vi, llmc_shape *shape,
                      llmc_error *err);

#endif
