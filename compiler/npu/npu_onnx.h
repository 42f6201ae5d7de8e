/* The ONNX graph builder of the NPU export (npu_export.h): one subgraph's
 * model as protobuf-c's generated structs (onnx/onnx.pb-c.h), every struct,
 * string and array of it in one arena freed at once after packing.  Values
 * are named after the plan's tensors; a value the export adds for an op is
 * "<plan op name>::<what>", and a node is named after its first output
 * (one writer per value: names are unique and lead back to the plan op). */
#ifndef LLMC_NPU_ONNX_H
#define LLMC_NPU_ONNX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "support/diag.h"
#include "llmc_rt.h"
#include "onnx/onnx.pb-c.h"

typedef struct pb_block pb_block;

typedef struct {
    pb_block *blocks;
    unsigned char *at;
    size_t left;
} pb_arena;

typedef struct {
    int rank;
    int64_t dims[LLMC_RT_MAX_RANK];
} npx_shape;

/* One subgraph's ONNX graph being built.  Allocation failures set `failed`
 * (every helper then does nothing and returns NULL); the op loop reports it. */
typedef struct {
    pb_arena mem;
    bool failed;
    const llmc_rt_subgraph *sg;
    uint32_t op;                   /* the op being exported: names, messages */
    llmc_error *err;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    const char **weight_value;     /* per tensor: its value once it is an initializer
                                      (a Linear's W: dequantized, [K, N]) */
    const char **act_scale;        /* per tensor: int8 activations' scale value */
    const char **act_zero;         /* ... and zero point value */
    uint64_t weight_bytes;         /* bytes of the initializers holding weights */
} onnx_graph;

static inline const char *npx_text_of(const char *s)
{
    return s ? s : "";
}

static inline const llmc_rt_sg_tensor *npx_desc(const onnx_graph *g, uint32_t t)
{
    return &g->sg->tensors[t];
}

static inline npx_shape npx_shape_of(const llmc_rt_sg_tensor *d)
{
    npx_shape s = {d->rank, {0}};
    memcpy(s.dims, d->dims, (size_t)d->rank * sizeof s.dims[0]);
    return s;
}

static inline bool npx_same_shape(const npx_shape *a, const npx_shape *b)
{
    return a->rank == b->rank && !memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]);
}

static inline int64_t npx_elements(const npx_shape *s)
{
    int64_t n = 1;
    for (int a = 0; a < s->rank; a++)
        n *= s->dims[a];
    return n;
}

static inline int64_t npx_last_dim(const npx_shape *s)
{
    return s->rank ? s->dims[s->rank - 1] : 1;
}

/* ---- the arena and the strings (NULL once `failed`) ---- */
void *npx_graph_alloc(onnx_graph *g, size_t n);
char *npx_graph_printf(onnx_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *npx_graph_strdup(onnx_graph *g, const char *s);
/* Frees every block of the arena. */
void npx_arena_free(pb_arena *a);

/* ---- names ---- */
/* Tensor t's value name: the plan's name of it. */
const char *npx_tensor_name(onnx_graph *g, uint32_t t);
/* A value the export adds for the current op: "<plan op name>::<what>". */
const char *npx_op_value(onnx_graph *g, const char *what);

/* ---- nodes ---- */
Onnx__NodeProto *npx_add_node(onnx_graph *g, const char *op_type, size_t n_in,
                              const char *const *in, size_t n_out, const char *const *out);
Onnx__NodeProto *npx_node1(onnx_graph *g, const char *op_type, const char *a, const char *y);
Onnx__NodeProto *npx_node2(onnx_graph *g, const char *op_type, const char *a, const char *b,
                           const char *y);
Onnx__NodeProto *npx_node3(onnx_graph *g, const char *op_type, const char *a, const char *b,
                           const char *c, const char *y);
/* The node's (only) output renamed: the last node of a chain writes the
 * plan tensor itself. */
void npx_rename_output(onnx_graph *g, Onnx__NodeProto *node, const char *name);
void npx_attr_int(onnx_graph *g, Onnx__NodeProto *node, const char *name, int64_t v);
void npx_attr_float(onnx_graph *g, Onnx__NodeProto *node, const char *name, float v);
void npx_attr_ints(onnx_graph *g, Onnx__NodeProto *node, const char *name, const int64_t *v,
                   size_t n);

/* ---- initializers and values ---- */
/* An initializer holding `size` raw little-endian bytes (not copied: they
 * live in the arena or in the plan, both alive until the model is packed). */
void npx_add_init(onnx_graph *g, const char *name, int32_t dtype, const npx_shape *s,
                  const void *bytes, size_t size);
/* Scalar and vector constants of the current op, named npx_op_value(what). */
const char *npx_const_f32(onnx_graph *g, const char *what, float v);
const char *npx_const_i8_zero(onnx_graph *g, const char *what);
const char *npx_const_i64s(onnx_graph *g, const char *what, const int64_t *v, int n);
/* Tensor t as an op input: a float32 weight becomes an initializer with
 * its name (once), anything else is the value of its name. */
const char *npx_value_of(onnx_graph *g, uint32_t t);
/* `value` (of shape have) with shape want: itself, or a Reshape's output. */
const char *npx_as_shape(onnx_graph *g, const char *value, const npx_shape *have,
                         const npx_shape *want, const char *what);
/* The float32 value infos of tensors [first, first + n) (graph inputs or
 * outputs). */
Onnx__ValueInfoProto **npx_value_infos(onnx_graph *g, uint32_t first, uint32_t n);

#endif
