/* The node builders the expanders share (contrib_expand.h); the dispatch
 * over LLMC_CONTRIB_OP_LIST is contrib_dispatch.c. */
#include "contrib_expand.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contrib_ops.h"

static const llmc_node *node_of(const llmc_expand *e)
{
    return &e->g->nodes[e->node];
}

/* "'model.onnx': node 'n' (com.microsoft::Op)" */
static void describe(const llmc_expand *e, char *buf, size_t size)
{
    const llmc_node *n = node_of(e);
    snprintf(buf, size, "'%.300s': node '%.200s' (%s%s%s)", e->path, n->name, n->domain,
             n->domain[0] ? "::" : "", n->op_type);
}

static int vfail(llmc_expand *e, int code, const char *what, const char *fmt, va_list ap)
{
    char node[640], msg[2048];
    describe(e, node, sizeof node);
    vsnprintf(msg, sizeof msg, fmt, ap);
    return llmc_fail(e->err, code, "%s%s: %s", node, what, msg);
}

int ex_fail(llmc_expand *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(e, code, "", fmt, ap);
    va_end(ap);
    return rc;
}

int ex_fail_input(llmc_expand *e, int code, int i, const char *fmt, ...)
{
    char what[320];
    int v = ex_input(e, i);
    snprintf(what, sizeof what, " input %d '%.200s'", i, v >= 0 ? e->g->values[v].name : "");
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(e, code, what, fmt, ap);
    va_end(ap);
    return rc;
}

int ex_input(const llmc_expand *e, int i)
{
    const llmc_node *n = node_of(e);
    return i < n->n_inputs ? n->inputs[i] : -1;
}

int ex_output(const llmc_expand *e, int i)
{
    const llmc_node *n = node_of(e);
    return i < n->n_outputs ? n->outputs[i] : -1;
}

int ex_refuse_read_output(llmc_expand *e, int i, const char *what)
{
    int v = ex_output(e, i);
    if (v < 0 || llmc_graph_use_count(e->g, v) == 0)
        return LLMC_OK;
    return ex_fail(e, LLMC_E_UNSUPPORTED, "output %d '%.200s' (%s) is read, and llmc does not compute it",
                   i, e->g->values[v].name, what);
}

static int oom(llmc_expand *e)
{
    return ex_fail(e, LLMC_E_NOMEM, "out of memory");
}

/* A fresh value named "<node>/<what>", -1 on OOM (err set). */
static int new_value(llmc_expand *e, const char *what, int dtype)
{
    char suffix[96];
    snprintf(suffix, sizeof suffix, "/%s_%d", what, e->added);
    const char *base = node_of(e)->name[0] ? node_of(e)->name : node_of(e)->op_type;
    char *name = llmc_graph_unique_name(e->g, base, suffix);
    int id = name ? llmc_graph_add_value(e->g, name, dtype) : -1;
    free(name);
    return id < 0 ? (oom(e), -1) : id;
}

int ex_const(llmc_expand *e, int dtype, const llmc_shape *shape, const void *data, uint64_t bytes)
{
    int id = new_value(e, "const", dtype);
    e->added++;
    if (id >= 0 && llmc_graph_set_const(e->g, id, dtype, shape, data, bytes))
        return oom(e), -1;
    return id;
}

int ex_const_float(llmc_expand *e, float v)
{
    llmc_shape scalar = {.rank = 0};
    return ex_const(e, LLMC_DT_FLOAT, &scalar, &v, sizeof v);
}

int ex_const_int(llmc_expand *e, int64_t v)
{
    llmc_shape scalar = {.rank = 0};
    return ex_const(e, LLMC_DT_INT64, &scalar, &v, sizeof v);
}

int ex_const_ints(llmc_expand *e, const int64_t *v, int n)
{
    llmc_shape vec = {.rank = 1, .dims = {llmc_aff_const(n)}};
    return ex_const(e, LLMC_DT_INT64, &vec, v, sizeof *v * (uint64_t)n);
}

static int add_node(llmc_expand *e, const char *op, const int *ins, int n_ins, const int *outs, int n_outs)
{
    char suffix[96];
    snprintf(suffix, sizeof suffix, "/%s_%d", op, e->added++);
    char *name = llmc_graph_unique_name(e->g, node_of(e)->name, suffix);
    int id = name ? llmc_graph_add_node(e->g, op, name, ins, n_ins, outs, n_outs) : -1;
    free(name);
    if (id < 0)
        return oom(e), -1;
    e->g->nodes[id].opset = LLMC_EXPAND_OPSET;
    return id;
}

int ex_node(llmc_expand *e, const char *op, const int *ins, int n_ins, int dtype, int *outs, int n_outputs)
{
    for (int i = 0; i < n_outputs; i++)
        if ((outs[i] = new_value(e, op, dtype)) < 0)
            return -1;
    return add_node(e, op, ins, n_ins, outs, n_outputs);
}

int ex_node1(llmc_expand *e, const char *op, const int *ins, int n_ins, int dtype)
{
    int out;
    return ex_node(e, op, ins, n_ins, dtype, &out, 1) < 0 ? -1 : out;
}

int ex_node_into(llmc_expand *e, const char *op, const int *ins, int n_ins, int out)
{
    return add_node(e, op, ins, n_ins, &out, 1);
}

int ex_set_int(llmc_expand *e, int node, const char *name, int64_t v)
{
    return llmc_node_set_int(e->g, node, name, v) ? oom(e), -1 : 0;
}

int ex_set_float(llmc_expand *e, int node, const char *name, float v)
{
    return llmc_node_set_float(e->g, node, name, v) ? oom(e), -1 : 0;
}

int ex_set_ints(llmc_expand *e, int node, const char *name, const int64_t *v, int n)
{
    return llmc_node_set_ints(e->g, node, name, v, n) ? oom(e), -1 : 0;
}
