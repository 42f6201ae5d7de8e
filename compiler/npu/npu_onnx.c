/* The ONNX graph builder of the NPU export (npu_onnx.h).  Allocation
 * failures set the graph's `failed` (every function then does nothing and
 * returns NULL); the op loop reports it. */
#include "npu_onnx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define ARENA_BLOCK ((size_t)64 << 10)

/* ---- the arena ------------------------------------------------------------ */

struct pb_block {
    struct pb_block *next;
    max_align_t data[];
};

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

void npx_arena_free(pb_arena *a)
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

void *npx_graph_alloc(onnx_graph *g, size_t n)
{
    void *p = g->failed ? NULL : arena_alloc(&g->mem, n);
    g->failed = g->failed || !p;
    return p;
}

char *npx_graph_printf(onnx_graph *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? npx_graph_alloc(g, (size_t)n + 1) : NULL;
    if (s) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return s;
}

char *npx_graph_strdup(onnx_graph *g, const char *s)
{
    return s ? npx_graph_printf(g, "%s", s) : NULL;
}

/* A copy of list[0, n) with room for `cap` entries (arena arrays grow by
 * copying; the old ones stay in the arena). */
static void **grown_list(onnx_graph *g, void **list, size_t n, size_t cap)
{
    void **grown = npx_graph_alloc(g, cap * sizeof *grown);
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

/* Tensor t's value name: the plan's name of it. */
const char *npx_tensor_name(onnx_graph *g, uint32_t t)
{
    const char *name = npx_desc(g, t)->name;
    return name && *name ? name : npx_graph_printf(g, "%s::tensor%u", g->sg->name, t);
}

/* A value the export adds for the current op: "<plan op name>::<what>". */
const char *npx_op_value(onnx_graph *g, const char *what)
{
    const char *op = g->sg->ops[g->op].name;
    return op && *op ? npx_graph_printf(g, "%s::%s", op, what)
                     : npx_graph_printf(g, "%s::op%u::%s", g->sg->name, g->op, what);
}

/* A node named after its first output (one writer per value: names are
 * unique and lead back to the plan op). */
Onnx__NodeProto *npx_add_node(onnx_graph *g, const char *op_type, size_t n_in,
                              const char *const *in, size_t n_out, const char *const *out)
{
    Onnx__NodeProto *node = npx_graph_alloc(g, sizeof *node);
    char **ins = npx_graph_alloc(g, (n_in + 1) * sizeof *ins);
    char **outs = npx_graph_alloc(g, (n_out + 1) * sizeof *outs);
    if (!node || !ins || !outs)
        return NULL;
    *node = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    for (size_t i = 0; i < n_in; i++)
        ins[i] = npx_graph_strdup(g, in[i]);
    for (size_t i = 0; i < n_out; i++)
        outs[i] = npx_graph_strdup(g, out[i]);
    node->n_input = n_in;
    node->input = ins;
    node->n_output = n_out;
    node->output = outs;
    node->op_type = npx_graph_strdup(g, op_type);
    node->name = npx_graph_strdup(g, out[0]);
    push_node(g, node);
    return g->failed ? NULL : node;
}

Onnx__NodeProto *npx_node1(onnx_graph *g, const char *op_type, const char *a, const char *y)
{
    return npx_add_node(g, op_type, 1, (const char *const[]){a}, 1, (const char *const[]){y});
}

Onnx__NodeProto *npx_node2(onnx_graph *g, const char *op_type, const char *a, const char *b,
                           const char *y)
{
    return npx_add_node(g, op_type, 2, (const char *const[]){a, b}, 1, (const char *const[]){y});
}

Onnx__NodeProto *npx_node3(onnx_graph *g, const char *op_type, const char *a, const char *b,
                           const char *c, const char *y)
{
    return npx_add_node(g, op_type, 3, (const char *const[]){a, b, c}, 1, (const char *const[]){y});
}

/* The node's (only) output renamed: the last node of a chain writes the
 * plan tensor itself. */
void npx_rename_output(onnx_graph *g, Onnx__NodeProto *node, const char *name)
{
    if (node) {
        node->output[0] = npx_graph_strdup(g, name);
        node->name = node->output[0];
    }
}

static Onnx__AttributeProto *add_attr(onnx_graph *g, Onnx__NodeProto *node, const char *name,
                                      Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = node ? npx_graph_alloc(g, sizeof *a) : NULL;
    void **list = a ? grown_list(g, (void **)node->attribute, node->n_attribute,
                                 node->n_attribute + 1)
                    : NULL;
    if (!list)
        return NULL;
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = npx_graph_strdup(g, name);
    a->has_type = 1;
    a->type = type;
    list[node->n_attribute] = a;
    node->attribute = (Onnx__AttributeProto **)list;
    node->n_attribute++;
    return a;
}

void npx_attr_int(onnx_graph *g, Onnx__NodeProto *node, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = add_attr(g, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) {
        a->has_i = 1;
        a->i = v;
    }
}

void npx_attr_float(onnx_graph *g, Onnx__NodeProto *node, const char *name, float v)
{
    Onnx__AttributeProto *a = add_attr(g, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) {
        a->has_f = 1;
        a->f = v;
    }
}

void npx_attr_ints(onnx_graph *g, Onnx__NodeProto *node, const char *name, const int64_t *v,
                   size_t n)
{
    Onnx__AttributeProto *a = add_attr(g, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *ints = a ? npx_graph_alloc(g, n * sizeof *ints) : NULL;
    if (ints) {
        memcpy(ints, v, n * sizeof *ints);
        a->n_ints = n;
        a->ints = ints;
    }
}

/* An initializer holding `size` raw little-endian bytes (not copied: they
 * live in the arena or in the plan, both alive until the model is packed). */
void npx_add_init(onnx_graph *g, const char *name, int32_t dtype, const npx_shape *s,
                  const void *bytes, size_t size)
{
    Onnx__TensorProto *t = npx_graph_alloc(g, sizeof *t);
    int64_t *dims = npx_graph_alloc(g, (size_t)(s->rank + 1) * sizeof *dims);
    if (!t || !dims)
        return;
    *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    memcpy(dims, s->dims, (size_t)s->rank * sizeof *dims);
    t->n_dims = (size_t)s->rank;
    t->dims = dims;
    t->has_data_type = 1;
    t->data_type = dtype;
    t->name = npx_graph_strdup(g, name);
    t->has_raw_data = 1;
    t->raw_data.len = size;
    t->raw_data.data = (uint8_t *)(uintptr_t)bytes; /* only read by pack */
    push_init(g, t);
}

const char *npx_const_f32(onnx_graph *g, const char *what, float v)
{
    const char *name = npx_op_value(g, what);
    float *value = npx_graph_alloc(g, sizeof *value);
    npx_shape scalar = {0, {0}};
    if (value) {
        *value = v;
        npx_add_init(g, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &scalar, value, sizeof *value);
    }
    return name;
}

const char *npx_const_i8_zero(onnx_graph *g, const char *what)
{
    const char *name = npx_op_value(g, what);
    int8_t *value = npx_graph_alloc(g, 1);
    npx_shape scalar = {0, {0}};
    if (value)
        npx_add_init(g, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, &scalar, value, 1);
    return name;
}

const char *npx_const_i64s(onnx_graph *g, const char *what, const int64_t *v, int n)
{
    const char *name = npx_op_value(g, what);
    int64_t *values = npx_graph_alloc(g, (size_t)n * sizeof *values);
    npx_shape vector = {1, {n}};
    if (values) {
        memcpy(values, v, (size_t)n * sizeof *values);
        npx_add_init(g, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, &vector, values,
                     (size_t)n * sizeof *values);
    }
    return name;
}

/* Tensor t as an op input: a float32 weight becomes an initializer with
 * its name (once; checked by check_weight_operands), anything else is the
 * value of its name. */
const char *npx_value_of(onnx_graph *g, uint32_t t)
{
    const llmc_rt_sg_tensor *d = npx_desc(g, t);
    if (!d->weight || g->weight_value[t])
        return d->weight ? g->weight_value[t] : npx_tensor_name(g, t);
    npx_shape s = npx_shape_of(d);
    size_t bytes = (size_t)npx_elements(&s) * 4u;
    const char *name = npx_tensor_name(g, t);
    npx_add_init(g, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &s, d->weight, bytes);
    g->weight_bytes += bytes;
    g->weight_value[t] = name;
    return name;
}

/* `value` (of shape have) with shape want: itself, or a Reshape's output. */
const char *npx_as_shape(onnx_graph *g, const char *value, const npx_shape *have,
                         const npx_shape *want, const char *what)
{
    if (npx_same_shape(have, want))
        return value;
    const char *out = npx_op_value(g, what);
    char shape_what[64];
    snprintf(shape_what, sizeof shape_what, "%s_shape", what);
    npx_node2(g, "Reshape", value, npx_const_i64s(g, shape_what, want->dims, want->rank), out);
    return out;
}

/* ---- value infos ------------------------------------------------------------ */

static Onnx__ValueInfoProto *value_info(onnx_graph *g, uint32_t t)
{
    Onnx__ValueInfoProto *vi = npx_graph_alloc(g, sizeof *vi);
    Onnx__TypeProto *type = npx_graph_alloc(g, sizeof *type);
    Onnx__TypeProto__Tensor *tensor = npx_graph_alloc(g, sizeof *tensor);
    Onnx__TensorShapeProto *sp = npx_graph_alloc(g, sizeof *sp);
    int rank = npx_desc(g, t)->rank;
    Onnx__TensorShapeProto__Dimension **dims =
        npx_graph_alloc(g, (size_t)(rank + 1) * sizeof *dims);
    for (int a = 0; dims && a < rank; a++) {
        Onnx__TensorShapeProto__Dimension *d = npx_graph_alloc(g, sizeof *d);
        if (!d)
            return NULL;
        *d = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d->dim_value = npx_desc(g, t)->dims[a];
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
    vi->name = npx_graph_strdup(g, npx_tensor_name(g, t));
    vi->type = type;
    return vi;
}

Onnx__ValueInfoProto **npx_value_infos(onnx_graph *g, uint32_t first, uint32_t n)
{
    Onnx__ValueInfoProto **list = npx_graph_alloc(g, (n + 1) * sizeof *list);
    for (uint32_t i = 0; list && i < n; i++)
        list[i] = value_info(g, first + i);
    return list;
}
