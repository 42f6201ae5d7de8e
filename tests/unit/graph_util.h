/* Hand-building graphs in unit tests: inputs, constants, nodes, outputs. */
#ifndef LLMC_TEST_GRAPH_UTIL_H
#define LLMC_TEST_GRAPH_UTIL_H

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

#define AFF(c_, s_, p_) ((llmc_affine){(c_), (s_), (p_)})
#define K(c_) AFF((c_), 0, 0)
#define SYM_S AFF(0, 1, 0)
#define SYM_P AFF(0, 0, 1)

static inline llmc_shape shape_of(int rank, const llmc_affine *dims)
{
    llmc_shape s = {.rank = rank};
    for (int i = 0; i < rank; i++)
        s.dims[i] = dims[i];
    return s;
}
#define SHAPE(...) shape_of((int)(sizeof((llmc_affine[]){__VA_ARGS__}) / sizeof(llmc_affine)), \
                            (llmc_affine[]){__VA_ARGS__})
#define SCALAR ((llmc_shape){.rank = 0})

static inline void push_id(int **arr, int *n, int v)
{
    *arr = realloc(*arr, sizeof(int) * (size_t)(*n + 1));
    (*arr)[(*n)++] = v;
}

static inline int g_input(llmc_graph *g, const char *name, int dtype, llmc_shape s)
{
    int v = llmc_graph_add_value(g, name, dtype);
    g->values[v].shape = s;
    g->values[v].is_graph_input = true;
    push_id(&g->inputs, &g->n_inputs, v);
    return v;
}

static inline void g_output(llmc_graph *g, int v)
{
    g->values[v].is_graph_output = true;
    push_id(&g->outputs, &g->n_outputs, v);
}

static inline int g_const(llmc_graph *g, const char *name, int dtype, llmc_shape s, const void *data)
{
    int v = llmc_graph_add_value(g, name, dtype);
    uint64_t n = llmc_dtype_size(dtype);
    for (int i = 0; i < s.rank; i++)
        n *= (uint64_t)s.dims[i].c;
    llmc_graph_set_const(g, v, dtype, &s, data, n);
    return v;
}

/* 1-D int64 constant */
#define CI64(g, name, ...)                                                                       \
    g_const((g), (name), LLMC_DT_INT64,                                                          \
            SHAPE(K((int64_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))),            \
            (int64_t[]){__VA_ARGS__})
static inline int g_scalar_i64(llmc_graph *g, const char *name, int64_t x)
{
    return g_const(g, name, LLMC_DT_INT64, SCALAR, &x);
}

/* A node with n_in inputs and one new output value `out`; returns the node
 * id, *out_value gets the value. */
static inline int g_node(llmc_graph *g, const char *op, const char *out, int *out_value, int n_in, ...)
{
    int ins[16];
    va_list ap;
    va_start(ap, n_in);
    for (int i = 0; i < n_in; i++)
        ins[i] = va_arg(ap, int);
    va_end(ap);
    int v = llmc_graph_add_value(g, out, LLMC_DT_UNDEFINED);
    if (out_value)
        *out_value = v;
    return llmc_graph_add_node(g, op, out, ins, n_in, &v, 1);
}

/* Output value of a one-output node. */
#define OP(g, op, out, ...)                                                                      \
    op_value((g), g_node((g), (op), (out), NULL,                                                 \
                         (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), __VA_ARGS__))
static inline int op_value(llmc_graph *g, int node)
{
    return g->nodes[node].outputs[0];
}

static inline void attr_int(llmc_graph *g, int node, const char *name, int64_t i)
{
    llmc_attr a = {.name = (char *)name, .type = LLMC_ATTR_INT, .i = i};
    llmc_node_add_attr(g, node, &a);
}

static inline void attr_float(llmc_graph *g, int node, const char *name, float f)
{
    llmc_attr a = {.name = (char *)name, .type = LLMC_ATTR_FLOAT, .f = f};
    llmc_node_add_attr(g, node, &a);
}

static inline void attr_ints(llmc_graph *g, int node, const char *name, int n, const int64_t *ints)
{
    llmc_attr a = {.name = (char *)name, .type = LLMC_ATTR_INTS, .n_ints = n, .ints = (int64_t *)ints};
    llmc_node_add_attr(g, node, &a);
}
#define ATTR_INTS(g, node, name, ...)                                                            \
    attr_ints((g), (node), (name), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),    \
              (int64_t[]){__VA_ARGS__})

/* Node producing value v. */
static inline int producer_of(const llmc_graph *g, int v)
{
    return g->values[v].producer;
}

static inline int shape_eq(llmc_shape a, llmc_shape b)
{
    if (a.rank != b.rank)
        return 0;
    for (int i = 0; i < a.rank; i++)
        if (!llmc_aff_eq(a.dims[i], b.dims[i]))
            return 0;
    return 1;
}

static inline int count_op(const llmc_graph *g, const char *op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += !g->nodes[i].dead && strcmp(g->nodes[i].op_type, op) == 0;
    return n;
}

#endif
