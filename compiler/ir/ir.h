/* llmc graph IR: the one representation every pass reads and rewrites.
 *
 * A graph is two arrays with integer ids: values (tensors) and nodes
 * (operators).  Node order in the array is NOT meaningful; passes that need
 * an order call llmc_graph_topo_order(), which is deterministic (Kahn's
 * algorithm, ties broken by the lower node id) and iterative, so a 100k-node
 * chain does not recurse.
 *
 * Dimensions are affine in two run-time symbols:
 *     S = tokens fed in this call (sequence length),
 *     P = tokens already in the KV cache (past length),
 * so a dim is c + s*S + p*P.  Batch is bound to 1 at compile time.  Any
 * other dim_param must be bound with `--dim NAME=VALUE` or it is an error.
 */
#ifndef LLMC_IR_H
#define LLMC_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "const_view.h"

#define LLMC_MAX_RANK 8
/* Shape inference tracks the symbolic contents of int64/int32 tensors up to
 * this many elements (Shape -> Gather -> Concat chains). */
#define LLMC_MAX_SYM_ELEMS 16

/* Element types use ONNX TensorProto.DataType numbering. */
typedef enum {
    LLMC_DT_UNDEFINED = 0,
    LLMC_DT_FLOAT = 1,
    LLMC_DT_UINT8 = 2,
    LLMC_DT_INT8 = 3,
    LLMC_DT_UINT16 = 4,
    LLMC_DT_INT16 = 5,
    LLMC_DT_INT32 = 6,
    LLMC_DT_INT64 = 7,
    LLMC_DT_STRING = 8,
    LLMC_DT_BOOL = 9,
    LLMC_DT_FLOAT16 = 10,
    LLMC_DT_DOUBLE = 11,
    LLMC_DT_UINT32 = 12,
    LLMC_DT_UINT64 = 13,
    LLMC_DT_BFLOAT16 = 16,
    /* opset 19 (Cast, Constant, Reshape ...) and 21 (int4, uint4): named in
     * messages, never computed */
    LLMC_DT_FLOAT8E4M3FN = 17,
    LLMC_DT_FLOAT8E4M3FNUZ = 18,
    LLMC_DT_FLOAT8E5M2 = 19,
    LLMC_DT_FLOAT8E5M2FNUZ = 20,
    LLMC_DT_UINT4 = 21,
    LLMC_DT_INT4 = 22,
} llmc_dtype;

size_t llmc_dtype_size(int dtype);        /* 0 for unsupported/strings */
const char *llmc_dtype_name(int dtype);   /* "float", "int64", ... */

/* c + s*S + p*P */
typedef struct {
    int64_t c, s, p;
} llmc_affine;

static inline llmc_affine llmc_aff_const(int64_t c) { llmc_affine a = {c, 0, 0}; return a; }
static inline bool llmc_aff_is_const(llmc_affine a) { return a.s == 0 && a.p == 0; }
static inline bool llmc_aff_eq(llmc_affine a, llmc_affine b) { return a.c == b.c && a.s == b.s && a.p == b.p; }

typedef struct {
    int rank;                           /* -1: unknown */
    llmc_affine dims[LLMC_MAX_RANK];
} llmc_shape;

static inline bool llmc_shape_eq(const llmc_shape *a, const llmc_shape *b)
{
    if (a->rank < 0 || a->rank != b->rank)   /* an unknown shape equals nothing */
        return false;
    for (int i = 0; i < a->rank; i++)
        if (!llmc_aff_eq(a->dims[i], b->dims[i]))
            return false;
    return true;
}


typedef struct {
    char *name;
    int dtype;                          /* llmc_dtype */
    llmc_shape shape;                   /* rank -1 until shape inference */
    llmc_shape declared;                /* what the ONNX file states (graph output or
                                         * value_info), rank -1 if nothing fully
                                         * known; shape inference checks it */
    int declared_dtype;                 /* the element type the file states there,
                                         * LLMC_DT_UNDEFINED if none; checked too */
    int producer;                       /* node id, -1 for inputs/constants */
    bool is_graph_input;
    bool is_graph_output;
    bool is_const;                      /* initializer or folded value */
    llmc_const konst;                   /* valid when is_const */
    /* Symbolic contents of a small integer tensor, filled by shape
     * inference (n_sym = element count, 0 = unknown). */
    int n_sym;
    llmc_affine sym[LLMC_MAX_SYM_ELEMS];
} llmc_value;

typedef enum {
    LLMC_ATTR_FLOAT = 1,
    LLMC_ATTR_INT = 2,
    LLMC_ATTR_STRING = 3,
    LLMC_ATTR_TENSOR = 4,
    LLMC_ATTR_GRAPH = 5,
    LLMC_ATTR_FLOATS = 6,
    LLMC_ATTR_INTS = 7,
    LLMC_ATTR_STRINGS = 8,
} llmc_attr_type;

typedef struct {
    char *name;
    int type;                           /* llmc_attr_type */
    float f;
    int64_t i;
    char *s;                            /* STRING */
    int n_floats;
    float *floats;
    int n_ints;
    int64_t *ints;
    /* TENSOR (Constant.value, ConstantOfShape.value): */
    int t_dtype;
    int t_rank;
    int64_t t_dims[LLMC_MAX_RANK];
    llmc_const t_data;
} llmc_attr;

typedef struct {
    char *name;                         /* ONNX node name ("" if none) */
    char *op_type;
    char *domain;                       /* "" for the default domain */
    int opset;                          /* opset version of its domain */
    int n_inputs;
    int *inputs;                        /* value ids; -1 = omitted optional */
    int n_outputs;
    int *outputs;
    int n_attrs;
    llmc_attr *attrs;
    bool dead;                          /* erased; skipped everywhere */
} llmc_node;

typedef struct {
    int n_values, cap_values;
    llmc_value *values;
    int n_nodes, cap_nodes;
    llmc_node *nodes;
    int n_inputs;
    int *inputs;                        /* graph inputs (value ids), in ONNX order */
    int n_outputs;
    int *outputs;                       /* graph outputs (value ids), in ONNX order */
    int opset;                          /* default-domain opset import */
    uint64_t source_hash;               /* xxHash64 of the .onnx file bytes */
    /* Resources the importer keeps alive for llmc_const pointers (mmaps,
     * the unpacked protobuf).  Released by llmc_graph_free(). */
    void *import_state;
    void (*import_free)(void *import_state);
} llmc_graph;

/* ---- construction and the rewriting API ---- */
void llmc_graph_init(llmc_graph *g);
void llmc_graph_free(llmc_graph *g);
int llmc_graph_add_value(llmc_graph *g, const char *name, int dtype);   /* returns id, -1 on OOM */
int llmc_graph_find_value(const llmc_graph *g, const char *name);       /* -1 if absent */
/* A value name not yet used: base + suffix, else base + suffix + N (N = 1,
 * 2, ...); malloc'ed, NULL on OOM. */
char *llmc_graph_unique_name(const llmc_graph *g, const char *base, const char *suffix);
/* Insert a node; copies the input/output id arrays; sets producer of outputs. */
int llmc_graph_add_node(llmc_graph *g, const char *op_type, const char *name,
                        const int *inputs, int n_inputs, const int *outputs, int n_outputs);
int llmc_node_add_attr(llmc_graph *g, int node, const llmc_attr *attr); /* deep copy */
/* A node of the "llmc" domain (compiler/ir/llmc_ops.h), opset 1; -1 on OOM. */
int llmc_graph_add_llmc_node(llmc_graph *g, const char *op_type, const char *name,
                             const int *inputs, int n_inputs, const int *outputs, int n_outputs);
/* Scalar and list attributes; 0 on success, -1 on OOM. */
int llmc_node_set_int(llmc_graph *g, int node, const char *name, int64_t value);
int llmc_node_set_float(llmc_graph *g, int node, const char *name, float value);
int llmc_node_set_ints(llmc_graph *g, int node, const char *name, const int64_t *values, int n);
/* Every use of `old_value` (node inputs and graph outputs) now reads `new_value`. */
void llmc_graph_replace_value(llmc_graph *g, int old_value, int new_value);
void llmc_graph_erase_node(llmc_graph *g, int node);
/* Turn a value into a constant that owns a copy of `data` (nbytes); its
 * producer, if any, no longer defines it (the node may become dead). */
int llmc_graph_set_const(llmc_graph *g, int value, int dtype, const llmc_shape *shape,
                         const void *data, uint64_t nbytes);
/* The same with a lazy float32 matrix (shape [rows, cols] of the view):
 * takes over the caller's reference, also on failure. */
int llmc_graph_set_const_view(llmc_graph *g, int value, const llmc_shape *shape, llmc_view *view);
/* The IR has no value deletion (ids stay stable), so a constant nobody
 * reads any more is dropped by releasing its bytes and clearing is_const:
 * nothing lists it, codegen and the dump skip it. */
void llmc_graph_drop_const(llmc_graph *g, int value);

/* ---- queries ---- */
const llmc_attr *llmc_node_attr(const llmc_graph *g, int node, const char *name);
int64_t llmc_node_attr_int(const llmc_graph *g, int node, const char *name, int64_t dflt);
float llmc_node_attr_float(const llmc_graph *g, int node, const char *name, float dflt);
int llmc_graph_live_nodes(const llmc_graph *g);
/* Fills `order` (n_nodes capacity) with live node ids in a deterministic
 * topological order; returns the count, or -1 on a cycle (then *cycle_node
 * names one node on it). */
int llmc_graph_topo_order(const llmc_graph *g, int *order, int *cycle_node);
/* Number of live consumers of a value (graph outputs count as one each). */
int llmc_graph_use_count(const llmc_graph *g, int value);

/* ---- lazy constants of the graph (const_view.h has the views) ---- */

/* Value v (a float32 constant of rank 2) as a view, for a pass building a
 * lazy constant from it: bytes v owns move into the view's leaf, which v
 * then shares, so dropping v later cannot free bytes the view reads.
 * A new reference, NULL on OOM or for another kind of value. */
llmc_view *llmc_graph_const_view(llmc_graph *g, int v);

/* Rows [r0, r1) of value v, a float32 constant seen as a matrix [rows,
 * cols] with cols its last dim (a lazy one: its view's dims), into out.
 * 0, or -1 if v is not a float32 constant or the rows are out of range. */
int llmc_const_read_rows(const llmc_value *v, int64_t r0, int64_t r1, float *out);

#endif
