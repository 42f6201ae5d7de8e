/* llmc compile --npu-export DIR (npu_export.h).
 *
 * Three parts:
 *   - an ONNX graph builder over protobuf-c's generated structs
 *     (onnx/onnx.pb-c.h), every struct, string and array of one model in
 *     one arena freed at once after packing;
 *   - the op exporters: each plan op of a subgraph as ONNX opset 17 nodes
 *     in QDQ form (the formulas of compiler/llmc_ops.h, the op subset of the
 *     reference delegate, runtime/platform/ref_delegate.c);
 *   - the exporter delegate the runtime's chunked prefill prepares every
 *     subgraph through, which writes the files, and the manifest. */
#include "npu_export.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/file_map.h"
#include "support/out_file.h"
#include "support/version.h"
#include "llmc_ref_delegate.h"
#include "llmc_rt_internal.h"
#include "onnx/onnx.pb-c.h"

#define ONNX_OPSET 17
#define ONNX_IR_VERSION 8
#define MANIFEST_FILE "manifest.json"
/* Reference inputs: about N(0, 1) (twelve uniforms summed, minus 6, exact
 * arithmetic: the same values on every machine), times INPUT_SCALE. */
#define INPUT_SCALE 2.0
#define INPUT_SEED 0x6c6c6d632d6e7075ull /* "llmc-npu" */
/* A tensor's elements: far beyond any chunk, far below overflow. */
#define MAX_ELEMS ((int64_t)1 << 40)
#define ARENA_BLOCK ((size_t)64 << 10)

#define NPX_LAYOUT_(s, Name, v) NPX_LAYOUT_##s = v,
enum { LLMC_PLAN_LAYOUTS(NPX_LAYOUT_) };


/* Plan kinds whose ONNX op has the same name and meaning; NULL: none. */
static const char *const binary_onnx_ops[LLMC_RT_BINARY_COUNT] = {
    [LLMC_RT_BINARY_Add] = "Add", [LLMC_RT_BINARY_Sub] = "Sub", [LLMC_RT_BINARY_Mul] = "Mul",
    [LLMC_RT_BINARY_Div] = "Div", [LLMC_RT_BINARY_Max] = "Max", [LLMC_RT_BINARY_Min] = "Min"};
static const char *const unary_onnx_ops[LLMC_RT_UNARY_COUNT] = {
    [LLMC_RT_UNARY_Identity] = "Identity", [LLMC_RT_UNARY_Neg] = "Neg",
    [LLMC_RT_UNARY_Abs] = "Abs",           [LLMC_RT_UNARY_Sqrt] = "Sqrt",
    [LLMC_RT_UNARY_Exp] = "Exp",           [LLMC_RT_UNARY_Tanh] = "Tanh",
    [LLMC_RT_UNARY_Sigmoid] = "Sigmoid",   [LLMC_RT_UNARY_Relu] = "Relu"};

static const char *text_of(const char *s)
{
    return s ? s : "";
}

/* ---- the arena ------------------------------------------------------------ */

typedef struct pb_block {
    struct pb_block *next;
    max_align_t data[];
} pb_block;

typedef struct {
    pb_block *blocks;
    unsigned char *at;
    size_t left;
} pb_arena;

static void *arena_alloc(pb_arena *a, size_t n)
{
    const size_t align = _Alignof(max_align_t);
    if (n > SIZE_MAX / 2)
        return NULL;
    n = n ? (n + align - 1) / align * align : align;
    if (n > a->left) {
        size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        pb_block *b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->next = a->blocks;
        a->blocks = b;
        a->at = (unsigned char *)b->data;
        a->left = cap;
    }
    void *p = a->at;
    a->at += n;
    a->left -= n;
    memset(p, 0, n);
    return p;
}

static void arena_free(pb_arena *a)
{
    while (a->blocks) {
        pb_block *next = a->blocks->next;
        free(a->blocks);
        a->blocks = next;
    }
    a->at = NULL;
    a->left = 0;
}

/* ---- the graph builder ---------------------------------------------------- */

typedef struct {
    int rank;
    int64_t dims[LLMC_RT_MAX_RANK];
} shape;

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

static void *graph_alloc(onnx_graph *g, size_t n)
{
    void *p = g->failed ? NULL : arena_alloc(&g->mem, n);
    g->failed = g->failed || !p;
    return p;
}

static char *graph_printf(onnx_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *graph_printf(onnx_graph *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? graph_alloc(g, (size_t)n + 1) : NULL;
    if (s) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return s;
}

static char *graph_strdup(onnx_graph *g, const char *s)
{
    return s ? graph_printf(g, "%s", s) : NULL;
}

/* A copy of list[0, n) with room for `cap` entries (arena arrays grow by
 * copying; the old ones stay in the arena). */
static void **grown_list(onnx_graph *g, void **list, size_t n, size_t cap)
{
    void **grown = graph_alloc(g, cap * sizeof *grown);
    if (grown && n)
        memcpy(grown, list, n * sizeof *grown);
    return grown;
}

static void push_node(onnx_graph *g, Onnx__NodeProto *node)
{
    if (!node)
        return;
    if (g->n_nodes == g->cap_nodes) {
        size_t cap = g->cap_nodes ? 2 * g->cap_nodes : 32;
        void **grown = grown_list(g, (void **)g->nodes, g->n_nodes, cap);
        if (!grown)
            return;
        g->nodes = (Onnx__NodeProto **)grown;
        g->cap_nodes = cap;
    }
    g->nodes[g->n_nodes++] = node;
}

static void push_init(onnx_graph *g, Onnx__TensorProto *t)
{
    if (!t)
        return;
    if (g->n_inits == g->cap_inits) {
        size_t cap = g->cap_inits ? 2 * g->cap_inits : 32;
        void **grown = grown_list(g, (void **)g->inits, g->n_inits, cap);
        if (!grown)
            return;
        g->inits = (Onnx__TensorProto **)grown;
        g->cap_inits = cap;
    }
    g->inits[g->n_inits++] = t;
}

static const llmc_rt_sg_tensor *desc(const onnx_graph *g, uint32_t t)
{
    return &g->sg->tensors[t];
}

static shape shape_of(const llmc_rt_sg_tensor *d)
{
    shape s = {d->rank, {0}};
    memcpy(s.dims, d->dims, (size_t)d->rank * sizeof s.dims[0]);
    return s;
}

static bool same_shape(const shape *a, const shape *b)
{
    return a->rank == b->rank && !memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]);
}

static int64_t elements(const shape *s)
{
    int64_t n = 1;
    for (int a = 0; a < s->rank; a++)
        n *= s->dims[a];
    return n;
}

static int64_t last_dim(const shape *s)
{
    return s->rank ? s->dims[s->rank - 1] : 1;
}

/* Tensor t's value name: the plan's name of it. */
static const char *tensor_name(onnx_graph *g, uint32_t t)
{
    const char *name = desc(g, t)->name;
    return name && *name ? name : graph_printf(g, "%s::tensor%u", g->sg->name, t);
}

/* A value the export adds for the current op: "<plan op name>::<what>". */
static const char *op_value(onnx_graph *g, const char *what)
{
    const char *op = g->sg->ops[g->op].name;
    return op && *op ? graph_printf(g, "%s::%s", op, what)
                     : graph_printf(g, "%s::op%u::%s", g->sg->name, g->op, what);
}

/* A node named after its first output (one writer per value: names are
 * unique and lead back to the plan op). */
static Onnx__NodeProto *add_node(onnx_graph *g, const char *op_type, size_t n_in,
                                 const char *const *in, size_t n_out, const char *const *out)
{
    Onnx__NodeProto *node = graph_alloc(g, sizeof *node);
    char **ins = graph_alloc(g, (n_in + 1) * sizeof *ins);
    char **outs = graph_alloc(g, (n_out + 1) * sizeof *outs);
    if (!node || !ins || !outs)
        return NULL;
    *node = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    for (size_t i = 0; i < n_in; i++)
        ins[i] = graph_strdup(g, in[i]);
    for (size_t i = 0; i < n_out; i++)
        outs[i] = graph_strdup(g, out[i]);
    node->n_input = n_in;
    node->input = ins;
    node->n_output = n_out;
    node->output = outs;
    node->op_type = graph_strdup(g, op_type);
    node->name = graph_strdup(g, out[0]);
    push_node(g, node);
    return g->failed ? NULL : node;
}

static Onnx__NodeProto *node1(onnx_graph *g, const char *op_type, const char *a, const char *y)
{
    return add_node(g, op_type, 1, (const char *const[]){a}, 1, (const char *const[]){y});
}

static Onnx__NodeProto *node2(onnx_graph *g, const char *op_type, const char *a, const char *b,
                              const char *y)
{
    return add_node(g, op_type, 2, (const char *const[]){a, b}, 1, (const char *const[]){y});
}

static Onnx__NodeProto *node3(onnx_graph *g, const char *op_type, const char *a, const char *b,
                              const char *c, const char *y)
{
    return add_node(g, op_type, 3, (const char *const[]){a, b, c}, 1, (const char *const[]){y});
}

/* The node's (only) output renamed: the last node of a chain writes the
 * plan tensor itself. */
static void rename_output(onnx_graph *g, Onnx__NodeProto *node, const char *name)
{
    if (node) {
        node->output[0] = graph_strdup(g, name);
        node->name = node->output[0];
    }
}

static Onnx__AttributeProto *add_attr(onnx_graph *g, Onnx__NodeProto *node, const char *name,
                                      Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = node ? graph_alloc(g, sizeof *a) : NULL;
    void **list = a ? grown_list(g, (void **)node->attribute, node->n_attribute,
                                 node->n_attribute + 1)
                    : NULL;
    if (!list)
        return NULL;
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = graph_strdup(g, name);
    a->has_type = 1;
    a->type = type;
    list[node->n_attribute] = a;
    node->attribute = (Onnx__AttributeProto **)list;
    node->n_attribute++;
    return a;
}

static void attr_int(onnx_graph *g, Onnx__NodeProto *node, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = add_attr(g, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) {
        a->has_i = 1;
        a->i = v;
    }
}

static void attr_float(onnx_graph *g, Onnx__NodeProto *node, const char *name, float v)
{
    Onnx__AttributeProto *a = add_attr(g, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) {
        a->has_f = 1;
        a->f = v;
    }
}

static void attr_ints(onnx_graph *g, Onnx__NodeProto *node, const char *name, const int64_t *v,
                      size_t n)
{
    Onnx__AttributeProto *a = add_attr(g, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *ints = a ? graph_alloc(g, n * sizeof *ints) : NULL;
    if (ints) {
        memcpy(ints, v, n * sizeof *ints);
        a->n_ints = n;
        a->ints = ints;
    }
}

/* An initializer holding `size` raw little-endian bytes (not copied: they
 * live in the arena or in the plan, both alive until the model is packed). */
static void add_init(onnx_graph *g, const char *name, int32_t dtype, const shape *s,
                     const void *bytes, size_t size)
{
    Onnx__TensorProto *t = graph_alloc(g, sizeof *t);
    int64_t *dims = graph_alloc(g, (size_t)(s->rank + 1) * sizeof *dims);
    if (!t || !dims)
        return;
    *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    memcpy(dims, s->dims, (size_t)s->rank * sizeof *dims);
    t->n_dims = (size_t)s->rank;
    t->dims = dims;
    t->has_data_type = 1;
    t->data_type = dtype;
    t->name = graph_strdup(g, name);
    t->has_raw_data = 1;
    t->raw_data.len = size;
    t->raw_data.data = (uint8_t *)(uintptr_t)bytes; /* only read by pack */
    push_init(g, t);
}

static const char *const_f32(onnx_graph *g, const char *what, float v)
{
    const char *name = op_value(g, what);
    float *value = graph_alloc(g, sizeof *value);
    shape scalar = {0, {0}};
    if (value) {
        *value = v;
        add_init(g, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &scalar, value, sizeof *value);
    }
    return name;
}

static const char *const_i8_zero(onnx_graph *g, const char *what)
{
    const char *name = op_value(g, what);
    int8_t *value = graph_alloc(g, 1);
    shape scalar = {0, {0}};
    if (value)
        add_init(g, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, &scalar, value, 1);
    return name;
}

static const char *const_i64s(onnx_graph *g, const char *what, const int64_t *v, int n)
{
    const char *name = op_value(g, what);
    int64_t *values = graph_alloc(g, (size_t)n * sizeof *values);
    shape vector = {1, {n}};
    if (values) {
        memcpy(values, v, (size_t)n * sizeof *values);
        add_init(g, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, &vector, values,
                 (size_t)n * sizeof *values);
    }
    return name;
}

/* Tensor t as an op input: a float32 weight becomes an initializer with
 * its name (once; checked by check_weight_operands), anything else is the
 * value of its name. */
static const char *value_of(onnx_graph *g, uint32_t t)
{
    const llmc_rt_sg_tensor *d = desc(g, t);
    if (!d->weight || g->weight_value[t])
        return d->weight ? g->weight_value[t] : tensor_name(g, t);
    shape s = shape_of(d);
    size_t bytes = (size_t)elements(&s) * 4u;
    const char *name = tensor_name(g, t);
    add_init(g, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &s, d->weight, bytes);
    g->weight_bytes += bytes;
    g->weight_value[t] = name;
    return name;
}

/* `value` (of shape have) with shape want: itself, or a Reshape's output. */
static const char *as_shape(onnx_graph *g, const char *value, const shape *have,
                            const shape *want, const char *what)
{
    if (same_shape(have, want))
        return value;
    const char *out = op_value(g, what);
    char shape_what[64];
    snprintf(shape_what, sizeof shape_what, "%s_shape", what);
    node2(g, "Reshape", value, const_i64s(g, shape_what, want->dims, want->rank), out);
    return out;
}

/* ---- op exporters ---------------------------------------------------------- */

static int refuse(onnx_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(onnx_graph *g, const char *fmt, ...)
{
    const llmc_rt_sg_op *op = &g->sg->ops[g->op];
    const char *code = llmc_rt_op_name(op->code);
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return llmc_fail(g->err, LLMC_E_UNSUPPORTED, "--npu-export: subgraph %u '%s': op %u (%s '%s'): %s",
                     g->sg->index, text_of(g->sg->name), g->op, code, text_of(op->name), why);
}

static bool is_f32_dense(const llmc_rt_sg_tensor *d)
{
    return d->dtype == LLMC_RT_F32 && d->layout == NPX_LAYOUT_DENSE;
}

static int check_counts(onnx_graph *g, const llmc_rt_sg_op *op, uint32_t min_in, uint32_t max_in,
                        uint32_t max_out)
{
    if (op->n_inputs < min_in || op->n_inputs > max_in || op->n_outputs > max_out)
        return refuse(g, "%u inputs and %u outputs, expected %u to %u inputs and at most %u "
                      "outputs", op->n_inputs, op->n_outputs, min_in, max_in, max_out);
    return LLMC_OK;
}

/* Operands in range; every weight read (but a Linear's W) float32 and
 * whole; outputs float32 (but QuantizeRows') and neither weights nor
 * subgraph inputs. */
static int check_operands(onnx_graph *g, const llmc_rt_sg_op *op)
{
    if (!op->n_outputs || op->n_inputs > LLMC_RT_SG_OP_IO || op->n_outputs > LLMC_RT_SG_OP_IO)
        return refuse(g, "%u inputs and %u outputs", op->n_inputs, op->n_outputs);
    for (uint32_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
        uint32_t t = i < op->n_inputs ? op->inputs[i] : op->outputs[i - op->n_inputs];
        if (t >= g->sg->n_tensors)
            return refuse(g, "operand %u is tensor %u of %u", i, t, g->sg->n_tensors);
    }
    for (uint32_t i = 0; i < op->n_inputs; i++) {
        const llmc_rt_sg_tensor *d = desc(g, op->inputs[i]);
        shape s = shape_of(d);
        bool w = op->code == LLMC_RT_OP_Linear && i == 1;
        if (d->weight && !w && (!is_f32_dense(d) || d->bytes < (uint64_t)elements(&s) * 4u))
            return refuse(g, "weight '%s' is not a whole float32 Dense tensor", d->name);
    }
    for (uint32_t i = 0; i < op->n_outputs; i++) {
        uint32_t t = op->outputs[i];
        bool quantized = op->code == LLMC_RT_OP_QuantizeRows;
        if (desc(g, t)->weight || t < g->sg->n_inputs ||
            (!quantized && !is_f32_dense(desc(g, t))))
            return refuse(g, "output '%s' is a weight, a subgraph input or not float32",
                          desc(g, t)->name);
    }
    return LLMC_OK;
}

/* QuantizeRows, static scale s: Clip to +-127 s (llmc clamps to +-127,
 * ONNX saturates to [-128, 127]), then QuantizeLinear(s, zero point 0). */
static int export_quantize(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_counts(g, op, 1, 1, 1);
    if (rc)
        return rc;
    uint32_t x = op->inputs[0], y = op->outputs[0];
    float s = op->scale;
    if (!(s > 0.0f) || !isfinite(s))
        return refuse(g, "scale %g: only a static per-tensor scale > 0 (--calibrate) has a "
                      "QuantizeLinear form", (double)s);
    if (!is_f32_dense(desc(g, x)) || desc(g, y)->dtype != LLMC_RT_I8)
        return refuse(g, "needs float32 '%s' into int8 '%s'", desc(g, x)->name, desc(g, y)->name);
    if (y < g->sg->n_inputs + g->sg->n_outputs)
        return refuse(g, "its int8 output '%s' crosses the subgraph's boundary", desc(g, y)->name);
    const char *lo = const_f32(g, "clip_min", -127.0f * s);
    const char *hi = const_f32(g, "clip_max", 127.0f * s);
    const char *scale = const_f32(g, "scale", s), *zero = const_i8_zero(g, "zero_point");
    const char *clipped = op_value(g, "clipped");
    node3(g, "Clip", value_of(g, x), lo, hi, clipped);
    node3(g, "QuantizeLinear", clipped, scale, zero, tensor_name(g, y));
    g->act_scale[y] = scale;
    g->act_zero[y] = zero;
    return LLMC_OK;
}

/* W [N, K] (Int8 QWeightTiles, one scale per output channel) as MatMul's
 * [K, N]: an int8 initializer with W's name, its scales and zero points
 * [N] along axis 1, and the DequantizeLinear making it float (once per W). */
static int weight_kn(onnx_graph *g, uint32_t w, int64_t x_cols, const char **value)
{
    const llmc_rt_sg_tensor *d = desc(g, w);
    if (d->dtype != LLMC_RT_I8 || d->layout != NPX_LAYOUT_QWEIGHT || !d->weight || d->rank != 2)
        return refuse(g, "W '%s' is not an Int8 QWeightTiles weight [N, K]", d->name);
    int64_t n = d->dims[0], k = d->dims[1];
    if (k != x_cols)
        return refuse(g, "W '%s' is [%lld, %lld] but x has %lld columns", d->name, (long long)n,
                      (long long)k, (long long)x_cols);
    if (g->weight_value[w]) {
        *value = g->weight_value[w];
        return LLMC_OK;
    }
    if ((int64_t)d->group < k)
        return refuse(g, "per-channel weights only: W '%s' has groups of %u < K %lld (compile "
                      "with --group-size 0)", d->name, d->group, (long long)k);
    int8_t *q = graph_alloc(g, (size_t)(n * k)), *row = graph_alloc(g, (size_t)k);
    int8_t *zeros = graph_alloc(g, (size_t)n);
    float *scales = graph_alloc(g, (size_t)n * sizeof *scales);
    for (int64_t r = 0; !g->failed && r < n; r++) {
        llmc_rt_error rt = {0};
        if (llmc_rt_sg_weight_row(d, r, row, &scales[r], &rt))
            return refuse(g, "%s", rt.msg);
        for (int64_t c = 0; c < k; c++)
            q[c * n + r] = row[c];
    }
    if (g->failed)
        return LLMC_OK; /* reported by the op loop */
    const char *wq = tensor_name(g, w);
    const char *ws = graph_printf(g, "%s::scale", wq), *wz = graph_printf(g, "%s::zero_point", wq);
    const char *wf = graph_printf(g, "%s::dequantized", wq);
    shape kn = {2, {k, n}}, channels = {1, {n}};
    add_init(g, wq, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, &kn, q, (size_t)(n * k));
    add_init(g, ws, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &channels, scales, (size_t)n * 4u);
    add_init(g, wz, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, &channels, zeros, (size_t)n);
    attr_int(g, node3(g, "DequantizeLinear", wq, ws, wz, wf), "axis", 1);
    g->weight_bytes += (uint64_t)(n * k) + 5u * (uint64_t)n;
    g->weight_value[w] = wf;
    *value = wf;
    return LLMC_OK;
}

/* z (shape zd, the last node `last` writes it) into the Linear's outputs:
 * renamed when there is one, else split along the last axis; a Reshape
 * where an output's dims are not z's rows. */
static int linear_outputs(onnx_graph *g, const llmc_rt_sg_op *op, Onnx__NodeProto *last,
                          const char *z, const shape *zd)
{
    int64_t rows = elements(zd) / (last_dim(zd) ? last_dim(zd) : 1), cols = 0;
    int64_t split[LLMC_RT_SG_OP_IO];
    for (uint32_t j = 0; j < op->n_outputs; j++) {
        shape y = shape_of(desc(g, op->outputs[j]));
        split[j] = last_dim(&y);
        cols += split[j];
        if (y.rank < 1 || elements(&y) != rows * split[j])
            return refuse(g, "output '%s' does not have x's %lld rows",
                          desc(g, op->outputs[j])->name, (long long)rows);
    }
    if (cols != last_dim(zd))
        return refuse(g, "outputs have %lld columns, W has %lld rows", (long long)cols,
                      (long long)last_dim(zd));
    const char *parts[LLMC_RT_SG_OP_IO];
    shape part[LLMC_RT_SG_OP_IO];
    for (uint32_t j = 0; j < op->n_outputs; j++) {
        shape y = shape_of(desc(g, op->outputs[j]));
        part[j] = *zd;
        part[j].dims[zd->rank - 1] = split[j];
        char what[32];
        snprintf(what, sizeof what, "part%u", j);
        parts[j] = same_shape(&part[j], &y) ? tensor_name(g, op->outputs[j]) : op_value(g, what);
    }
    if (op->n_outputs == 1)
        rename_output(g, last, parts[0]);
    else
        attr_int(g, add_node(g, "Split", 2, (const char *const[]){z,
                             const_i64s(g, "split", split, (int)op->n_outputs)},
                             op->n_outputs, parts), "axis", -1);
    for (uint32_t j = 0; j < op->n_outputs; j++) {
        shape y = shape_of(desc(g, op->outputs[j]));
        if (!same_shape(&part[j], &y)) {
            char what[32];
            snprintf(what, sizeof what, "part%u_shape", j);
            node2(g, "Reshape", parts[j], const_i64s(g, what, y.dims, y.rank),
                  tensor_name(g, op->outputs[j]));
        }
    }
    return LLMC_OK;
}

/* Linear(xq, W[, bias][, residual]): DequantizeLinear(xq) MatMul W
 * (dequantized), + bias, + residual, into the outputs. */
static int export_linear(onnx_graph *g, const llmc_rt_sg_op *op)
{
    if (op->kind < 0 || op->kind > 3)
        return refuse(g, "kind %d (1 bias, 2 residual)", op->kind);
    bool bias = op->kind & 1, residual = op->kind & 2;
    uint32_t n_in = 2u + bias + residual;
    int rc = check_counts(g, op, n_in, n_in, LLMC_RT_SG_OP_IO);
    if (rc)
        return rc;
    uint32_t x = op->inputs[0];
    shape xd = shape_of(desc(g, x));
    if (!g->act_scale[x] || xd.rank < 1)
        return refuse(g, "x '%s' is not the int8 output of a static-scale QuantizeRows of this "
                      "subgraph", desc(g, x)->name);
    const char *w = NULL;
    if ((rc = weight_kn(g, op->inputs[1], last_dim(&xd), &w)) || g->failed)
        return rc;
    shape zd = xd;
    zd.dims[zd.rank - 1] = desc(g, op->inputs[1])->dims[0];
    const char *xf = op_value(g, "x"), *z = op_value(g, "matmul");
    node3(g, "DequantizeLinear", tensor_name(g, x), g->act_scale[x], g->act_zero[x], xf);
    Onnx__NodeProto *last = node2(g, "MatMul", xf, w, z);
    if (bias) {
        const llmc_rt_sg_tensor *b = desc(g, op->inputs[2]);
        shape bd = shape_of(b);
        if (!b->weight || elements(&bd) != last_dim(&zd) || last_dim(&bd) != last_dim(&zd))
            return refuse(g, "bias '%s' must be a float32 weight [%lld]", b->name,
                          (long long)last_dim(&zd));
        const char *zb = op_value(g, "plus_bias");
        last = node2(g, "Add", z, value_of(g, op->inputs[2]), zb);
        z = zb;
    }
    if (residual) {
        uint32_t r = op->inputs[n_in - 1];
        shape rd = shape_of(desc(g, r));
        if (elements(&rd) != elements(&zd) || last_dim(&rd) != last_dim(&zd))
            return refuse(g, "residual '%s' does not have the output's rows and columns",
                          desc(g, r)->name);
        const char *zr = op_value(g, "plus_residual");
        last = node2(g, "Add", z, as_shape(g, value_of(g, r), &rd, &zd, "residual"), zr);
        z = zr;
    }
    return linear_outputs(g, op, last, z, &zd);
}

/* RMSNorm: y = x / sqrt(mean(x^2) + eps) * scale, over the last axis. */
static int export_rmsnorm(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_counts(g, op, 2, 2, 1);
    if (rc)
        return rc;
    const char *x = value_of(g, op->inputs[0]), *scale = value_of(g, op->inputs[1]);
    const char *sq = op_value(g, "square"), *mean = op_value(g, "mean_square");
    const char *eps = const_f32(g, "epsilon", op->epsilon), *var = op_value(g, "plus_epsilon");
    const char *rms = op_value(g, "rms"), *normed = op_value(g, "normalized");
    node2(g, "Mul", x, x, sq);
    Onnx__NodeProto *reduce = node1(g, "ReduceMean", sq, mean);
    attr_ints(g, reduce, "axes", (const int64_t[]){-1}, 1);
    attr_int(g, reduce, "keepdims", 1);
    node2(g, "Add", mean, eps, var);
    node1(g, "Sqrt", var, rms);
    node2(g, "Div", x, rms, normed);
    node2(g, "Mul", normed, scale, tensor_name(g, op->outputs[0]));
    return LLMC_OK;
}

static int export_layernorm(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_counts(g, op, 2, 3, 1);
    if (rc)
        return rc;
    shape x = shape_of(desc(g, op->inputs[0]));
    shape vector = {1, {last_dim(&x)}};
    const char *in[3] = {value_of(g, op->inputs[0])};
    for (uint32_t i = 1; i < op->n_inputs; i++) { /* scale, bias: [D] as ONNX wants them */
        shape w = shape_of(desc(g, op->inputs[i]));
        if (elements(&w) != last_dim(&x) || last_dim(&w) != last_dim(&x))
            return refuse(g, "'%s' must be a float32 weight [%lld]", desc(g, op->inputs[i])->name,
                          (long long)last_dim(&x));
        in[i] = as_shape(g, value_of(g, op->inputs[i]), &w, &vector, i == 1 ? "scale" : "bias");
    }
    const char *y = tensor_name(g, op->outputs[0]);
    Onnx__NodeProto *node = add_node(g, "LayerNormalization", op->n_inputs, in, 1,
                                     (const char *const[]){y});
    attr_int(g, node, "axis", -1);
    attr_float(g, node, "epsilon", op->epsilon);
    return LLMC_OK;
}

/* silu(a) = a * sigmoid(a), into `y`. */
static void silu(onnx_graph *g, const char *a, const char *y)
{
    const char *sig = op_value(g, "sigmoid");
    node1(g, "Sigmoid", a, sig);
    node2(g, "Mul", a, sig, y);
}

/* a `kind` b (b may be a weight of a's trailing dims: ONNX broadcasting);
 * SwiGLU(a, b) = silu(a) * b. */
static int export_binary(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_counts(g, op, 2, 2, 1);
    if (rc)
        return rc;
    const char *a = value_of(g, op->inputs[0]), *b = value_of(g, op->inputs[1]);
    const char *y = tensor_name(g, op->outputs[0]);
    if (op->kind == LLMC_RT_BINARY_SwiGLU) {
        const char *gate = op_value(g, "silu");
        silu(g, a, gate);
        node2(g, "Mul", gate, b, y);
        return LLMC_OK;
    }
    const char *type = op->kind >= 0 && op->kind < LLMC_RT_BINARY_COUNT ? binary_onnx_ops[op->kind]
                                                                        : NULL;
    if (!type)
        return refuse(g, "Binary kind %d has no ONNX form here (Add, Sub, Mul, Div, Max, Min, "
                      "SwiGLU do)", op->kind);
    node2(g, type, a, b, y);
    return LLMC_OK;
}

/* gelu(x) = 0.5 x (1 + erf(x / sqrt 2)); tanh form 0.5 x (1 + tanh(sqrt(2 /
 * pi) (x + 0.044715 x^3))), as runtime/kernels/ref_elementwise.c. */
static void gelu(onnx_graph *g, const char *x, bool tanh_form, const char *y)
{
    const char *inner = op_value(g, "inner"), *curve = op_value(g, "curve");
    if (tanh_form) {
        const char *x2 = op_value(g, "x2"), *x3 = op_value(g, "x3"), *cubic = op_value(g, "cubic");
        const char *sum = op_value(g, "x_plus_cubic");
        node2(g, "Mul", x, x, x2);
        node2(g, "Mul", x2, x, x3);
        node2(g, "Mul", x3, const_f32(g, "cubic_coefficient", 0.044715f), cubic);
        node2(g, "Add", x, cubic, sum);
        node2(g, "Mul", sum, const_f32(g, "sqrt_2_over_pi", 0.79788456080286536f), inner);
        node1(g, "Tanh", inner, curve);
    } else {
        node2(g, "Mul", x, const_f32(g, "one_over_sqrt_2", 0.70710678118654752f), inner);
        node1(g, "Erf", inner, curve);
    }
    const char *one_plus = op_value(g, "one_plus"), *half_x = op_value(g, "half_x");
    node2(g, "Add", curve, const_f32(g, "one", 1.0f), one_plus);
    node2(g, "Mul", x, const_f32(g, "half", 0.5f), half_x);
    node2(g, "Mul", half_x, one_plus, y);
}

static int export_unary(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_counts(g, op, 1, 1, 1);
    if (rc)
        return rc;
    const char *x = value_of(g, op->inputs[0]), *y = tensor_name(g, op->outputs[0]);
    const char *type = op->kind >= 0 && op->kind < LLMC_RT_UNARY_COUNT ? unary_onnx_ops[op->kind]
                                                                       : NULL;
    if (type)
        node1(g, type, x, y);
    else if (op->kind == LLMC_RT_UNARY_Silu)
        silu(g, x, y);
    else if (op->kind == LLMC_RT_UNARY_Gelu || op->kind == LLMC_RT_UNARY_GeluTanh)
        gelu(g, x, op->kind == LLMC_RT_UNARY_GeluTanh, y);
    else
        return refuse(g, "Unary kind %d has no ONNX form here", op->kind);
    return LLMC_OK;
}

static int export_reshape(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_counts(g, op, 1, 1, 1);
    if (rc)
        return rc;
    shape x = shape_of(desc(g, op->inputs[0])), y = shape_of(desc(g, op->outputs[0]));
    if (elements(&x) != elements(&y))
        return refuse(g, "'%s' and '%s' have different sizes", desc(g, op->inputs[0])->name,
                      desc(g, op->outputs[0])->name);
    node2(g, "Reshape", value_of(g, op->inputs[0]), const_i64s(g, "shape", y.dims, y.rank),
          tensor_name(g, op->outputs[0]));
    return LLMC_OK;
}

static int export_op(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_operands(g, op);
    if (rc)
        return rc;
    switch (op->code) {
    case LLMC_RT_OP_QuantizeRows: return export_quantize(g, op);
    case LLMC_RT_OP_Linear: return export_linear(g, op);
    case LLMC_RT_OP_RMSNorm: return export_rmsnorm(g, op);
    case LLMC_RT_OP_LayerNorm:
        return op->n_outputs == 1 ? export_layernorm(g, op)
                                  : refuse(g, "Mean and InvStdDev outputs are not exported");
    case LLMC_RT_OP_Binary: return export_binary(g, op);
    case LLMC_RT_OP_Unary: return export_unary(g, op);
    case LLMC_RT_OP_Reshape: return export_reshape(g, op);
    default: return refuse(g, "no ONNX form for this op (a subgraph holds RMSNorm, LayerNorm, "
                           "QuantizeRows, Linear, Binary, Unary and Reshape only)");
    }
}

/* ---- the model ------------------------------------------------------------- */

/* Ranks and dims in range, no empty dim; inputs and outputs float32 and no
 * weights. */
static int check_tensors(const llmc_rt_subgraph *sg, llmc_error *err)
{
    for (uint32_t t = 0; t < sg->n_tensors; t++) {
        const llmc_rt_sg_tensor *d = &sg->tensors[t];
        bool ok = d->rank >= 0 && d->rank <= LLMC_RT_MAX_RANK;
        int64_t n = 1;
        for (int a = 0; ok && a < d->rank; a++) {
            ok = d->dims[a] >= 1 && d->dims[a] <= MAX_ELEMS / n;
            n *= ok ? d->dims[a] : 1;
        }
        if (!ok)
            return llmc_fail(err, LLMC_E_UNSUPPORTED, "--npu-export: subgraph %u '%s': tensor "
                             "%u '%s': rank %d or its dims out of range", sg->index,
                             text_of(sg->name), t, text_of(d->name), d->rank);
        if (t < sg->n_inputs + sg->n_outputs && (d->weight || !is_f32_dense(d)))
            return llmc_fail(err, LLMC_E_UNSUPPORTED, "--npu-export: subgraph %u '%s': %s '%s' "
                             "is not a float32 Dense tensor", sg->index, text_of(sg->name),
                             t < sg->n_inputs ? "input" : "output", text_of(d->name));
    }
    return LLMC_OK;
}

static Onnx__ValueInfoProto *value_info(onnx_graph *g, uint32_t t)
{
    Onnx__ValueInfoProto *vi = graph_alloc(g, sizeof *vi);
    Onnx__TypeProto *type = graph_alloc(g, sizeof *type);
    Onnx__TypeProto__Tensor *tensor = graph_alloc(g, sizeof *tensor);
    Onnx__TensorShapeProto *sp = graph_alloc(g, sizeof *sp);
    int rank = desc(g, t)->rank;
    Onnx__TensorShapeProto__Dimension **dims = graph_alloc(g, (size_t)(rank + 1) * sizeof *dims);
    for (int a = 0; dims && a < rank; a++) {
        Onnx__TensorShapeProto__Dimension *d = graph_alloc(g, sizeof *d);
        if (!d)
            return NULL;
        *d = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d->dim_value = desc(g, t)->dims[a];
        dims[a] = d;
    }
    if (!vi || !type || !tensor || !sp || !dims)
        return NULL;
    *sp = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    sp->n_dim = (size_t)rank;
    sp->dim = dims;
    *tensor = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    tensor->has_elem_type = 1;
    tensor->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tensor->shape = sp;
    *type = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type->tensor_type = tensor;
    *vi = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    vi->name = graph_strdup(g, tensor_name(g, t));
    vi->type = type;
    return vi;
}

static Onnx__ValueInfoProto **value_infos(onnx_graph *g, uint32_t first, uint32_t n)
{
    Onnx__ValueInfoProto **list = graph_alloc(g, (n + 1) * sizeof *list);
    for (uint32_t i = 0; list && i < n; i++)
        list[i] = value_info(g, first + i);
    return list;
}

/* The graph of every op, its inputs and outputs, wrapped in a model. */
static int build_model(onnx_graph *g, const char *plan_name, Onnx__ModelProto *model)
{
    const llmc_rt_subgraph *sg = g->sg;
    size_t n = sg->n_tensors + 1u;
    g->weight_value = graph_alloc(g, n * sizeof *g->weight_value);
    g->act_scale = graph_alloc(g, n * sizeof *g->act_scale);
    g->act_zero = graph_alloc(g, n * sizeof *g->act_zero);
    int rc = LLMC_OK;
    for (g->op = 0; !rc && !g->failed && g->op < sg->n_ops; g->op++)
        rc = export_op(g, &sg->ops[g->op]);
    Onnx__GraphProto *graph = graph_alloc(g, sizeof *graph);
    Onnx__OperatorSetIdProto *opset = graph_alloc(g, sizeof *opset);
    Onnx__OperatorSetIdProto **opsets = graph_alloc(g, sizeof *opsets);
    if (!rc && !g->failed) {
        *graph = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
        graph->name = graph_strdup(g, sg->name);
        graph->doc_string = graph_printf(g, "llmc plan %s, NPU subgraph %u '%s': %u ops at %u "
                                         "rows (the chunk), weights in QDQ form", plan_name,
                                         sg->index, sg->name, sg->n_ops, sg->rows);
        graph->n_node = g->n_nodes;
        graph->node = g->nodes;
        graph->n_initializer = g->n_inits;
        graph->initializer = g->inits;
        graph->n_input = sg->n_inputs;
        graph->input = value_infos(g, 0, sg->n_inputs);
        graph->n_output = sg->n_outputs;
        graph->output = value_infos(g, sg->n_inputs, sg->n_outputs);
        *opset = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
        opset->domain = graph_strdup(g, "");
        opset->has_version = 1;
        opset->version = ONNX_OPSET;
        opsets[0] = opset;
        model->has_ir_version = 1;
        model->ir_version = ONNX_IR_VERSION;
        model->n_opset_import = 1;
        model->opset_import = opsets;
        model->producer_name = graph_strdup(g, "llmc");
        model->producer_version = graph_strdup(g, LLMC_VERSION);
        model->graph = graph;
    }
    if (!rc && g->failed)
        rc = llmc_fail(g->err, LLMC_E_NOMEM, "--npu-export: subgraph %u '%s': out of memory",
                       sg->index, text_of(sg->name));
    return rc;
}

/* ---- files ------------------------------------------------------------------ */

static char *path_join(const char *dir, const char *name, const char *suffix)
{
    size_t n = strlen(dir) + strlen(name) + strlen(suffix) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s%s", dir, name, suffix);
    return p;
}

/* dir/name+suffix holding bytes[0, size), written atomically. */
static int write_file(const char *dir, const char *name, const char *suffix, const void *bytes,
                      size_t size, llmc_error *err)
{
    char *path = path_join(dir, name, suffix);
    if (!path)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    llmc_output out;
    FILE *f = llmc_out_create(path, &out, err);
    int rc = f ? LLMC_OK : LLMC_E_OUTPUT;
    if (f && size && fwrite(bytes, 1, size, f) != size)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", path, strerror(errno));
    if (f)
        rc = llmc_out_finish(&out, rc, err);
    free(path);
    return rc;
}

/* dir and its missing parents; a usage error when it is not a directory. */
static int make_dir(const char *dir, llmc_error *err)
{
    char *path = malloc(strlen(dir) + 1);
    if (!path)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    strcpy(path, dir);
    int rc = LLMC_OK;
    for (char *p = path + 1; !rc; p++) {
        char c = *p;
        if (c && c != '/')
            continue;
        *p = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            rc = llmc_fail(err, LLMC_E_OUTPUT, "--npu-export: cannot create '%s': %s", path,
                           strerror(errno));
        *p = c;
        if (!c)
            break;
    }
    free(path);
    struct stat st;
    if (!rc && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        rc = llmc_fail(err, LLMC_E_OUTPUT, "--npu-export: '%s' is not a directory", dir);
    return rc;
}

/* ---- the exporter delegate ---------------------------------------------------- */

typedef struct {
    const llmc_rt_subgraph *sg;    /* in the chunked prefill's memory */
    uint64_t weight_bytes;         /* its .onnx's weight initializers */
    bool released;
} export_entry;

typedef struct {
    const char *dir, *plan_name;
    llmc_rt_delegate ref;          /* the reference delegate's table */
    export_entry **entries;        /* by subgraph index */
    uint32_t n_entries;
    llmc_error *err;
    int rc;                        /* the first failure, detailed in err */
} exporter;

/* File names come from the plan: a name that would leave DIR is refused. */
static int check_file_name(const llmc_rt_subgraph *sg, llmc_error *err)
{
    const char *name = text_of(sg->name);
    if (!*name || *name == '.' || strchr(name, '/') || strlen(name) > 200)
        return llmc_fail(err, LLMC_E_UNSUPPORTED, "--npu-export: subgraph %u: its name '%s' is "
                         "not a plain file name", sg->index, name);
    return LLMC_OK;
}

static int write_onnx(const exporter *ex, const llmc_rt_subgraph *sg, export_entry *e)
{
    onnx_graph g = {.sg = sg, .err = ex->err};
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    int rc = build_model(&g, ex->plan_name, &model);
    size_t size = rc ? 0 : onnx__model_proto__get_packed_size(&model);
    uint8_t *bytes = rc ? NULL : malloc(size ? size : 1);
    if (!rc && !bytes)
        rc = llmc_fail(ex->err, LLMC_E_NOMEM, "--npu-export: no memory for %zu bytes of '%s'",
                       size, sg->name);
    if (!rc && onnx__model_proto__pack(&model, bytes) != size)
        rc = llmc_fail(ex->err, LLMC_E_INTERNAL, "--npu-export: '%s': packed size mismatch",
                       sg->name);
    if (!rc)
        rc = write_file(ex->dir, sg->name, ".onnx", bytes, size, ex->err);
    e->weight_bytes = g.weight_bytes;
    free(bytes);
    arena_free(&g.mem);
    return rc;
}

/* xorshift64* (never 0). */
static uint64_t next_random(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

/* About N(0, INPUT_SCALE^2): twelve 24-bit uniforms summed, minus 6. */
static void fill_inputs(uint32_t index, float *x, size_t n)
{
    uint64_t s = INPUT_SEED ^ (0x9E3779B97F4A7C15ull * (index + 1u));
    for (size_t i = 0; i < n; i++) {
        double sum = 0;
        for (int k = 0; k < 12; k++)
            sum += (double)(next_random(&s) >> 40) / (double)(1u << 24);
        x[i] = (float)(INPUT_SCALE * (sum - 6.0));
    }
}

static size_t floats_of(const llmc_rt_sg_tensor *d)
{
    size_t n = 1;
    for (int a = 0; a < d->rank; a++)
        n *= (size_t)d->dims[a];
    return n;
}

/* The reference delegate builds sg, runs it once on io and releases it. */
static int run_reference(const exporter *ex, const llmc_rt_subgraph *sg, void *const *io)
{
    llmc_rt_error rt = {0};
    void *graph = NULL;
    llmc_rt_status st = ex->ref.prepare(ex->ref.ctx, sg, &graph, &rt);
    int finished = 0;
    if (!st)
        st = ex->ref.execute(ex->ref.ctx, graph, io, &rt);
    if (!st)
        st = ex->ref.wait(ex->ref.ctx, 1, &finished, &rt);
    if (graph)
        ex->ref.release(ex->ref.ctx, graph);
    if (st || !finished)
        return llmc_fail(ex->err, LLMC_E_UNSUPPORTED, "--npu-export: subgraph %u '%s': the "
                         "reference delegate: %s", sg->index, text_of(sg->name),
                         st ? rt.msg : "did not finish");
    return LLMC_OK;
}

/* <name>.inputs.bin and <name>.outputs.bin: deterministic inputs and the
 * reference delegate's outputs for them, each side's tensors concatenated
 * in order (one buffer: inputs, then outputs). */
static int write_reference(const exporter *ex, const llmc_rt_subgraph *sg)
{
    uint32_t n_io = sg->n_inputs + sg->n_outputs;
    size_t total = 0, inputs = 0;
    for (uint32_t t = 0; t < n_io; t++) {
        total += floats_of(&sg->tensors[t]);
        inputs = t + 1 == sg->n_inputs ? total : inputs;
    }
    float *buf = calloc(total + 1, sizeof *buf);
    void **io = calloc(n_io + 1u, sizeof *io);
    int rc = buf && io ? LLMC_OK : llmc_fail(ex->err, LLMC_E_NOMEM, "--npu-export: no memory "
                                             "for the reference run of '%s'", sg->name);
    for (size_t t = 0, at = 0; !rc && t < n_io; at += floats_of(&sg->tensors[t]), t++)
        io[t] = buf + at;
    if (!rc) {
        fill_inputs(sg->index, buf, inputs);
        rc = run_reference(ex, sg, io);
    }
    if (!rc)
        rc = write_file(ex->dir, sg->name, ".inputs.bin", buf, inputs * sizeof *buf, ex->err);
    if (!rc)
        rc = write_file(ex->dir, sg->name, ".outputs.bin", buf + inputs,
                        (total - inputs) * sizeof *buf, ex->err);
    free(io);
    free(buf);
    return rc;
}

static int add_entry(exporter *ex, export_entry *e)
{
    uint32_t index = e->sg->index;
    if (index >= ex->n_entries) {
        export_entry **grown = realloc(ex->entries, ((size_t)index + 1) * sizeof *grown);
        if (!grown)
            return llmc_fail(ex->err, LLMC_E_NOMEM, "out of memory");
        memset(grown + ex->n_entries, 0, (index + 1 - ex->n_entries) * sizeof *grown);
        ex->entries = grown;
        ex->n_entries = index + 1;
    }
    free(ex->entries[index]);
    ex->entries[index] = e;
    return LLMC_OK;
}

/* Every file of one subgraph; the graph handle is its entry. */
static llmc_rt_status export_prepare(void *ctx, const llmc_rt_subgraph *sg, void **graph,
                                     llmc_rt_error *rt)
{
    exporter *ex = ctx;
    *graph = NULL;
    export_entry *e = calloc(1, sizeof *e);
    int rc = e ? LLMC_OK : llmc_fail(ex->err, LLMC_E_NOMEM, "out of memory");
    if (!rc) {
        e->sg = sg;
        rc = add_entry(ex, e);
        if (rc)
            free(e);
    }
    if (!rc)
        rc = check_file_name(sg, ex->err);
    if (!rc)
        rc = check_tensors(sg, ex->err);
    if (!rc)
        rc = write_reference(ex, sg);
    if (!rc)
        rc = write_onnx(ex, sg, e);
    if (rc) {
        ex->rc = rc;
        if (rt) {
            rt->code = LLMC_RT_E_DELEGATE;
            snprintf(rt->msg, sizeof rt->msg, "export of subgraph %u failed", sg->index);
        }
        return LLMC_RT_E_DELEGATE;
    }
    *graph = e;
    return LLMC_RT_OK;
}

/* The exporter builds files only: nothing runs through it. */
static llmc_rt_status export_execute(void *ctx, void *graph, void *const *io, llmc_rt_error *err)
{
    (void)ctx;
    (void)io;
    const export_entry *e = graph;
    if (err) {
        err->code = LLMC_RT_E_DELEGATE;
        snprintf(err->msg, sizeof err->msg, "subgraph '%s': the --npu-export delegate writes "
                 "models and runs none", e ? text_of(e->sg->name) : "?");
    }
    return LLMC_RT_E_DELEGATE;
}

/* Nothing is ever in flight. */
static llmc_rt_status export_wait(void *ctx, int block, int *finished, llmc_rt_error *err)
{
    (void)ctx;
    (void)block;
    (void)err;
    if (finished)
        *finished = 1;
    return LLMC_RT_OK;
}

/* The files stay; the entry (owned by the exporter) is marked. */
static void export_release(void *ctx, void *graph)
{
    (void)ctx;
    export_entry *e = graph;
    if (e)
        e->released = true;
}

/* ---- the manifest ----------------------------------------------------------------- */

/* s then suffix as one JSON string. */
static void json_string_with(FILE *f, const char *s, const char *suffix)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)text_of(s); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fprintf(f, "%s\"", suffix);
}

static void json_string(FILE *f, const char *s)
{
    json_string_with(f, s, "");
}

static void json_tensors(FILE *f, const llmc_rt_subgraph *sg, uint32_t first, uint32_t n)
{
    fputc('[', f);
    for (uint32_t i = 0; i < n; i++) {
        const llmc_rt_sg_tensor *d = &sg->tensors[first + i];
        fprintf(f, "%s\n        {\"name\": ", i ? "," : "");
        json_string(f, d->name);
        fprintf(f, ", \"dtype\": \"float32\", \"dims\": [");
        for (int a = 0; a < d->rank; a++)
            fprintf(f, "%s%lld", a ? ", " : "", (long long)d->dims[a]);
        fprintf(f, "]}");
    }
    fprintf(f, "\n      ]");
}

/* The chunked prefill's node of subgraph k (its plan ops). */
static llmc_rt_chunk_event subgraph_node(const llmc_rt_chunked *c, uint32_t k)
{
    llmc_rt_chunk_event e = {0};
    for (uint32_t j = 0; j < llmc_rt_chunked_nodes(c); j++)
        if (llmc_rt_chunked_node(c, j, &e) == LLMC_RT_OK && e.lane == 1 && e.subgraph == k)
            return e;
    memset(&e, 0, sizeof e);
    return e;
}

static void json_subgraph(FILE *f, const exporter *ex, const llmc_rt_chunked *c, uint32_t k)
{
    const export_entry *e = ex->entries[k];
    const char *name = e->sg->name;
    llmc_rt_chunk_event node = subgraph_node(c, k);
    fprintf(f, "%s\n    {\n      \"name\": ", k ? "," : "");
    json_string(f, name);
    fprintf(f, ",\n      \"index\": %u,\n      \"file\": ", k);
    json_string_with(f, name, ".onnx");
    fprintf(f, ",\n      \"first_op\": %u,\n      \"n_ops\": %u,\n      \"rows\": %u,\n"
               "      \"inputs\": ", node.first_op, node.n_ops, e->sg->rows);
    json_tensors(f, e->sg, 0, e->sg->n_inputs);
    fprintf(f, ",\n      \"outputs\": ");
    json_tensors(f, e->sg, e->sg->n_inputs, e->sg->n_outputs);
    fprintf(f, ",\n      \"weights_bytes\": %llu,\n      \"check\": {\"inputs\": ",
            (unsigned long long)e->weight_bytes);
    json_string_with(f, name, ".inputs.bin");
    fprintf(f, ", \"outputs\": ");
    json_string_with(f, name, ".outputs.bin");
    fprintf(f, "}\n    }");
}

static bool is_attention(const llmc_rt_plan *plan, uint32_t op)
{
    llmc_rt_op_info info;
    return llmc_rt_plan_op(plan, op, &info) == LLMC_RT_OK && info.code == LLMC_RT_OP_Attention;
}

/* Nodes every chunk runs: up to the last one holding an Attention op (the
 * rest computes the logits, in the last chunk only). */
static uint32_t body_nodes(const llmc_rt_chunked *c, const llmc_rt_plan *plan)
{
    uint32_t body = 0, n = llmc_rt_chunked_nodes(c);
    for (uint32_t j = 0; j < n; j++) {
        llmc_rt_chunk_event e;
        for (uint32_t i = 0; llmc_rt_chunked_node(c, j, &e) == LLMC_RT_OK && i < e.n_ops; i++)
            body = is_attention(plan, e.first_op + i) ? j + 1 : body;
    }
    return body ? body : n;
}

static void json_node(FILE *f, const exporter *ex, const llmc_rt_plan *plan,
                      const llmc_rt_chunk_event *e, bool last_only)
{
    bool attention = false;
    for (uint32_t i = 0; i < e->n_ops; i++)
        attention = attention || is_attention(plan, e->first_op + i);
    if (e->lane == 1) {
        fprintf(f, "{\"lane\": \"npu\", \"subgraph\": ");
        json_string(f, e->subgraph < ex->n_entries ? ex->entries[e->subgraph]->sg->name : "?");
        fprintf(f, ", \"ops\": [%u, %u]", e->first_op, e->n_ops);
    } else {
        fprintf(f, "{\"lane\": \"cpu\", \"ops\": [%u, %u], \"op_names\": [", e->first_op, e->n_ops);
        for (uint32_t i = 0; i < e->n_ops; i++) {
            llmc_rt_op_info info = {0};
            llmc_rt_plan_op(plan, e->first_op + i, &info);
            fprintf(f, "%s", i ? ", " : "");
            json_string(f, info.name);
        }
        fprintf(f, "]");
    }
    fprintf(f, "%s%s}", attention ? ", \"attention\": true" : "",
            last_only ? ", \"last_chunk_only\": true" : "");
}

static void json_schedule(FILE *f, const exporter *ex, const llmc_rt_chunked *c,
                          const llmc_rt_plan *plan, uint32_t chunk)
{
    uint32_t n = llmc_rt_chunked_nodes(c), body = body_nodes(c, plan);
    fprintf(f, "  \"schedule\": {\n    \"description\": \"A prompt of n tokens runs in ceil(n / "
               "%u) chunks of %u rows, in order; the last chunk is padded to %u rows with zero "
               "rows after its real ones. Each chunk runs the nodes below in this order: an npu "
               "node runs its subgraph's model on the chunk's rows (its inputs written by the "
               "nodes before it, its outputs read by the nodes after it), a cpu node runs the "
               "plan ops [first, first + count) on the CPU. A node waits for the node before it "
               "in its chunk; a node holding an Attention op (attention: true) also waits for "
               "the same node of the previous chunk, whose KV cache rows it reads. The nodes "
               "after the last one holding Attention compute only the logits: they run in the "
               "last chunk only (last_chunk_only: true), so every other chunk runs the first "
               "nodes_per_chunk nodes. Each subgraph is built once for %u rows and shared by "
               "every chunk.\",\n    \"nodes_per_chunk\": %u,\n    \"nodes_last_chunk\": %u,\n"
               "    \"nodes\": [", chunk, chunk, chunk, chunk, body, n);
    for (uint32_t j = 0; j < n; j++) {
        llmc_rt_chunk_event e;
        if (llmc_rt_chunked_node(c, j, &e) != LLMC_RT_OK)
            continue;
        fprintf(f, "%s\n      ", j ? "," : "");
        json_node(f, ex, plan, &e, j >= body);
    }
    fprintf(f, "\n    ]\n  }\n");
}

static int write_manifest(const exporter *ex, const llmc_rt_chunked *c, const llmc_rt_plan *plan,
                          uint32_t chunk)
{
    char *path = path_join(ex->dir, MANIFEST_FILE, "");
    if (!path)
        return llmc_fail(ex->err, LLMC_E_NOMEM, "out of memory");
    llmc_output out;
    FILE *f = llmc_out_create(path, &out, ex->err);
    int rc = f ? LLMC_OK : LLMC_E_OUTPUT;
    if (f) {
        fprintf(f, "{\n  \"format\": \"llmc npu export 1\",\n  \"plan\": ");
        json_string(f, ex->plan_name);
        fprintf(f, ",\n  \"chunk\": %u,\n  \"onnx\": {\"ir_version\": %d, \"opset\": %d, "
                   "\"form\": \"QDQ: Clip and QuantizeLinear (activations, one scale per "
                   "tensor), DequantizeLinear (int8 weights [K, N], one scale per output "
                   "channel, axis 1) around each MatMul\"},\n  \"subgraphs\": [",
                chunk, ONNX_IR_VERSION, ONNX_OPSET);
        for (uint32_t k = 0; k < ex->n_entries; k++)
            json_subgraph(f, ex, c, k);
        fprintf(f, "\n  ],\n");
        json_schedule(f, ex, c, plan, chunk);
        fprintf(f, "}\n");
        if (ferror(f))
            rc = llmc_fail(ex->err, LLMC_E_OUTPUT, "cannot write '%s': %s", path, strerror(errno));
        rc = llmc_out_finish(&out, rc, ex->err);
    }
    free(path);
    return rc;
}

/* ---- the entry point ---------------------------------------------------------- */

typedef struct {
    llmc_mapped_file file;
    llmc_rt_plan plan;
    llmc_rt_session session;
    void *session_memory, *chunked_memory;
    llmc_rt_chunked *chunked;
    llmc_ref_delegate *ref;
    exporter ex;
} export_run;

/* The plan mapped and opened, a session of its max_context on it (the
 * chunk C comes with the subgraphs' descriptions: llmc_rt_subgraph.rows). */
static int open_session(export_run *r, const char *plan_path, llmc_error *err)
{
    llmc_rt_error rt = {0};
    int rc = llmc_open_input(plan_path, false, &r->file, err);
    if (!rc && llmc_rt_plan_open(&r->plan, r->file.map, r->file.size, 0, &rt) != LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "--npu-export: '%s': %s (the export reads the plan "
                       "through this machine's runtime)", plan_path, rt.msg);
    if (!rc && llmc_rt_chunked_memory(&r->plan, r->plan.max_context, 1) == SIZE_MAX)
        rc = llmc_fail(err, LLMC_E_INPUT, "--npu-export: '%s' has no NPU subgraphs (compile "
                       "it with --npu-chunk C)", plan_path);
    size_t size = rc ? 0 : llmc_rt_session_memory(&r->plan);
    if (!rc && !(r->session_memory = aligned_alloc(64, (size + 63) / 64 * 64)))
        rc = llmc_fail(err, LLMC_E_NOMEM, "--npu-export: no memory for a session of %u "
                       "positions", r->plan.max_context);
    if (!rc && llmc_rt_session_init(&r->session, &r->plan, r->session_memory, size, &rt) !=
                   LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "--npu-export: '%s': %s", plan_path, rt.msg);
    return rc;
}

/* Every subgraph prepared through the exporter, then the manifest. */
static int export_all(export_run *r, llmc_error *err)
{
    llmc_rt_delegate table = {&r->ex, export_prepare, export_execute, export_wait,
                              export_release};
    llmc_rt_error rt = {0};
    size_t size = llmc_rt_chunked_memory(&r->plan, r->plan.max_context, 1);
    int rc = LLMC_OK;
    if (size == SIZE_MAX || !(r->chunked_memory = malloc(size)))
        rc = llmc_fail(err, LLMC_E_NOMEM, "--npu-export: no memory for the chunked prefill");
    else if (!(r->ref = llmc_ref_delegate_create()))
        rc = llmc_fail(err, LLMC_E_NOMEM, "--npu-export: cannot start the reference delegate");
    if (!rc) {
        llmc_ref_delegate_table(r->ref, &r->ex.ref);
        if (llmc_rt_chunked_init(&r->chunked, &r->session, &table, 1, r->chunked_memory, size,
                                 &rt) != LLMC_RT_OK)
            rc = r->ex.rc ? r->ex.rc
                          : llmc_fail(err, LLMC_E_RUNTIME, "--npu-export: chunked prefill: %s",
                                      rt.msg);
    }
    for (uint32_t k = 0; !rc && k < r->ex.n_entries; k++)
        if (!r->ex.entries[k])
            rc = llmc_fail(err, LLMC_E_INTERNAL, "--npu-export: subgraph %u was not prepared", k);
    if (!rc)
        rc = write_manifest(&r->ex, r->chunked, &r->plan, r->ex.entries[0]->sg->rows);
    llmc_rt_chunked_release(r->chunked);
    return rc;
}

static void close_run(export_run *r)
{
    llmc_ref_delegate_destroy(r->ref);
    for (uint32_t k = 0; k < r->ex.n_entries; k++)
        free(r->ex.entries[k]);
    free(r->ex.entries);
    free(r->chunked_memory);
    free(r->session_memory);
    llmc_unmap_file(&r->file);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int llmc_npu_export(const char *plan_path, const char *dir, uint32_t *n_subgraphs,
                    llmc_error *err)
{
    export_run r;
    memset(&r, 0, sizeof r);
    r.ex.dir = dir;
    r.ex.plan_name = base_name(plan_path);
    r.ex.err = err;
    int rc = open_session(&r, plan_path, err);
    if (!rc)
        rc = make_dir(dir, err);
    char *manifest = rc ? NULL : path_join(dir, MANIFEST_FILE, "");
    if (!rc && !manifest)
        rc = llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    if (!rc && unlink(manifest) != 0 && errno != ENOENT)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "--npu-export: cannot remove the old '%s': %s",
                       manifest, strerror(errno));
    free(manifest);
    if (!rc)
        rc = export_all(&r, err);
    if (!rc && n_subgraphs)
        *n_subgraphs = r.ex.n_entries;
    close_run(&r);
    return rc;
}
