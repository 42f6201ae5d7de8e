/* Shared matching and rewriting helpers of the fusion passes (fusion_match.h). */
#include "fusion_match.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/const_view.h"
#include "symbolic.h"

/* Relative tolerance for the constants a pattern must contain (the task's
 * 1e-6: float32 spellings of 1/sqrt(2), sqrt(2/pi) differ in the 8th digit). */
#define CONST_REL_TOL 1e-6

void llmc_match_init(llmc_match *m, llmc_graph *g, const llmc_pass_ctx *ctx, const char *pass)
{
    memset(m, 0, sizeof *m);
    m->g = g;
    m->ctx = ctx;
    m->pass = pass;
    m->why_node = -1;
}

bool llmc_match_reject(llmc_match *m, int node, const char *fmt, ...)
{
    if (m->why[0])
        return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->why, sizeof m->why, fmt, ap);
    va_end(ap);
    m->why_node = node;
    return false;
}

void llmc_match_explain(const llmc_match *m)
{
    if (!m->ctx || !m->ctx->explain || !m->ctx->log || !m->why[0])
        return;
    const llmc_node *n = &m->g->nodes[m->why_node];
    fprintf(m->ctx->log, "%s: node '%s' (#%d, %s) not fused: %s\n", m->pass, n->name, m->why_node, n->op_type,
            m->why);
}

bool llmc_match_add(llmc_match *m, int node)
{
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i] == node)
            return true;
    if (m->n_nodes == LLMC_MATCH_MAX_NODES)
        return false;
    m->nodes[m->n_nodes++] = node;
    return true;
}

/* Cast(to=float) of a float value: a no-op torch leaves around norms. */
static bool is_identity_cast(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    return llmc_is_onnx_op(n, "Cast") && n->n_inputs == 1 && n->n_outputs == 1 &&
           llmc_node_attr_int(g, node, "to", 0) == LLMC_DT_FLOAT && g->values[n->inputs[0]].dtype == LLMC_DT_FLOAT;
}

int llmc_strip_casts(const llmc_graph *g, int v)
{
    for (int p; v >= 0 && (p = g->values[v].producer) >= 0 && is_identity_cast(g, p);)
        v = g->nodes[p].inputs[0];
    return v;
}

bool llmc_match_add_casts(llmc_match *m, int v)
{
    int p;
    for (; v >= 0 && (p = m->g->values[v].producer) >= 0 && is_identity_cast(m->g, p); v = m->g->nodes[p].inputs[0])
        if (!llmc_match_add(m, p))
            return false;
    return true;
}

int llmc_fusion_producer(llmc_match *m, int v, const char *op_type)
{
    const llmc_graph *g = m->g;
    int p, n_before = m->n_nodes;
    while (v >= 0 && (p = g->values[v].producer) >= 0 && is_identity_cast(g, p) && llmc_match_add(m, p))
        v = g->nodes[p].inputs[0];
    if (v >= 0 && (p = g->values[v].producer) >= 0 && llmc_is_onnx_op(&g->nodes[p], op_type) && llmc_match_add(m, p))
        return p;
    m->n_nodes = n_before;   /* Casts stepped over belong to no pattern */
    return -1;
}

int llmc_match_consumer(llmc_match *m, int v, const char *op_type)
{
    const llmc_graph *g = m->g;
    int c, n_before = m->n_nodes;
    while ((c = llmc_match_sole_reader(g, v)) >= 0 && is_identity_cast(g, c) && llmc_match_add(m, c))
        v = g->nodes[c].outputs[0];
    if (c >= 0 && llmc_is_onnx_op(&g->nodes[c], op_type) && llmc_match_add(m, c))
        return c;
    m->n_nodes = n_before;
    return -1;
}

int llmc_other_input(const llmc_graph *g, int node, int v)
{
    const llmc_node *n = &g->nodes[node];
    if (n->n_inputs != 2)
        return -1;
    if (llmc_strip_casts(g, n->inputs[0]) == llmc_strip_casts(g, v))
        return n->inputs[1];
    if (llmc_strip_casts(g, n->inputs[1]) == llmc_strip_casts(g, v))
        return n->inputs[0];
    return -1;
}

/* w rounded to the nearest float16 (ties to even; subnormals below 2^-14,
 * magnitudes past 65504 left as they are: no pattern constant is there). */
static double round_to_f16(double w)
{
    if (w == 0 || !isfinite(w) || fabs(w) > 65504)
        return w;
    int e;
    frexp(w, &e);                                 /* |w| in [2^(e-1), 2^e) */
    double ulp = ldexp(1.0, (e - 1 < -14 ? -14 : e - 1) - 10);   /* 10 mantissa bits */
    return nearbyint(w / ulp) * ulp;
}

bool llmc_value_exact(double x, double want)
{
    return fabs(x - want) <= CONST_REL_TOL * fabs(want);
}

bool llmc_value_near(double x, double want)
{
    return llmc_value_exact(x, want) || llmc_value_exact(x, round_to_f16(want));
}

bool llmc_const_near(const llmc_graph *g, int v, double want)
{
    double x;
    return llmc_match_const_scalar(g, v, &x) && llmc_value_near(x, want);
}

/* Bytes to read, in place or lazily (an empty constant may have neither). */
static bool has_bytes(const llmc_const *k)
{
    return k->data || k->view;
}

bool llmc_const_vector(const llmc_graph *g, int v, llmc_affine len)
{
    if (v < 0)
        return false;
    const llmc_value *val = &g->values[v];
    return val->is_const && has_bytes(&val->konst) && val->dtype == LLMC_DT_FLOAT && val->shape.rank == 1 &&
           llmc_aff_is_const(len) && llmc_aff_eq(val->shape.dims[0], len);
}

static int uses_inside(const llmc_match *m, int v)
{
    int uses = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const llmc_node *n = &m->g->nodes[m->nodes[i]];
        for (int k = 0; k < n->n_inputs; k++)
            uses += n->inputs[k] == v;
    }
    return uses;
}

bool llmc_match_is_closed(llmc_match *m, int root)
{
    const llmc_graph *g = m->g;
    for (int i = 0; i < m->n_nodes; i++) {
        const llmc_node *n = &g->nodes[m->nodes[i]];
        for (int k = 0; m->nodes[i] != root && k < n->n_outputs; k++) {
            int v = n->outputs[k];
            if (v >= 0 && llmc_graph_use_count(g, v) != uses_inside(m, v))
                return llmc_match_reject(m, m->nodes[i], "its output '%s' is also read outside the pattern",
                                         g->values[v].name);
        }
    }
    return true;
}

int llmc_match_replace_outputs(llmc_match *m, int named, const char *op_type, bool onnx, const int *inputs,
                               int n_inputs, const int *outputs, int n_outputs)
{
    llmc_graph *g = m->g;
    char *name = strdup(g->nodes[named].name);
    if (!name)
        return -1;
    for (int i = 0; i < m->n_nodes; i++)
        llmc_graph_erase_node(g, m->nodes[i]);
    int id = onnx ? llmc_graph_add_node(g, op_type, name, inputs, n_inputs, outputs, n_outputs)
                  : llmc_graph_add_llmc_node(g, op_type, name, inputs, n_inputs, outputs, n_outputs);
    free(name);
    return id;
}

int llmc_match_replace(llmc_match *m, int root, const char *op_type, bool onnx, const int *inputs, int n_inputs)
{
    const llmc_node *r = &m->g->nodes[root];
    int n_outputs = r->n_outputs;
    int *outputs = malloc(sizeof(int) * (size_t)n_outputs);
    int id = -1;
    if (outputs) {
        memcpy(outputs, r->outputs, sizeof(int) * (size_t)n_outputs);
        id = llmc_match_replace_outputs(m, root, op_type, onnx, inputs, n_inputs, outputs, n_outputs);
    }
    free(outputs);
    return id;
}

int llmc_add_const(llmc_graph *g, const char *base, const char *suffix, int dtype, const llmc_shape *shape,
                   const void *data, uint64_t nbytes)
{
    char *name = llmc_graph_unique_name(g, base, suffix);
    int v = name ? llmc_graph_add_value(g, name, dtype) : -1;
    free(name);
    return v < 0 || llmc_graph_set_const(g, v, dtype, shape, data, nbytes) ? -1 : v;
}

bool llmc_const_matrix(const llmc_graph *g, int v)
{
    if (v < 0)
        return false;
    const llmc_value *val = &g->values[v];
    return val->is_const && has_bytes(&val->konst) && val->dtype == LLMC_DT_FLOAT && val->shape.rank == 2 &&
           llmc_aff_is_const(val->shape.dims[0]) && llmc_aff_is_const(val->shape.dims[1]);
}

bool llmc_gemm_is_plain(const llmc_graph *g, int node)
{
    return llmc_node_attr_float(g, node, "alpha", 1.0f) == 1.0f &&
           llmc_node_attr_float(g, node, "beta", 1.0f) == 1.0f && llmc_node_attr_int(g, node, "transA", 0) == 0;
}

int llmc_add_const_view(llmc_graph *g, const char *base, const char *suffix, llmc_view *view)
{
    char *name = view ? llmc_graph_unique_name(g, base, suffix) : NULL;
    int v = name ? llmc_graph_add_value(g, name, LLMC_DT_FLOAT) : -1;
    free(name);
    if (v < 0) {
        llmc_view_unref(view);
        return -1;
    }
    llmc_shape shape = {.rank = 2, .dims = {llmc_aff_const(llmc_view_rows(view)), llmc_aff_const(llmc_view_cols(view))}};
    return llmc_graph_set_const_view(g, v, &shape, view) ? -1 : v;
}

int llmc_add_transposed_const(llmc_graph *g, int b)
{
    return llmc_add_const_view(g, g->values[b].name, ".transposed", llmc_view_transpose(llmc_graph_const_view(g, b)));
}

int llmc_gemm_bias(llmc_graph *g, int c, int64_t n)
{
    if (c < 0)
        return -1;
    if (llmc_const_vector(g, c, llmc_aff_const(n)))
        return c;
    if (!llmc_const_matrix(g, c) || g->values[c].shape.dims[0].c != 1 || g->values[c].shape.dims[1].c != n)
        return -2;
    llmc_shape shape = {.rank = 1, .dims = {llmc_aff_const(n)}};
    const void *row = llmc_const_bytes(&g->values[c].konst);
    int v = row || n == 0 ? llmc_add_const(g, g->values[c].name, ".row", LLMC_DT_FLOAT, &shape, row, sizeof(float) * (size_t)n)
                : -1;
    return v < 0 ? -3 : v;
}

int llmc_fusion_walk(llmc_graph *g, const llmc_pass_ctx *ctx, const char *pass, llmc_fusion_visit visit,
                     int *count, llmc_error *err)
{
    int *order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    int cycle = -1, n = order ? llmc_graph_topo_order(g, order, &cycle) : -1, rc = 0;
    *count = 0;
    for (int i = 0; i < n && rc >= 0; i++) {
        if (!g->nodes[order[i]].dead && (rc = visit(g, ctx, order[i])) > 0)
            *count += rc;
    }
    free(order);
    if (!order || rc < 0 || (n < 0 && cycle < 0))
        return llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory", pass);
    if (n < 0)
        return llmc_fail(err, LLMC_E_INPUT, "%s: the graph has a cycle through node '%s' (#%d, %s)", pass,
                         g->nodes[cycle].name, cycle, g->nodes[cycle].op_type);
    return LLMC_OK;
}

int llmc_fusion_walks(llmc_graph *g, const llmc_pass_ctx *ctx, const char *pass, const llmc_fusion_visit *visits,
                      int n, int *counts, llmc_error *err)
{
    int rc = LLMC_OK;
    for (int i = 0; i < n && rc == LLMC_OK; i++)
        rc = llmc_fusion_walk(g, ctx, pass, visits[i], &counts[i], err);
    return rc;
}

bool llmc_const_holds_transpose(const llmc_value *e, const llmc_value *w)
{
    int64_t v = e->shape.dims[0].c, h = e->shape.dims[1].c;
    if (w->shape.dims[0].c != h || w->shape.dims[1].c != v)
        return false;
    llmc_const wt = {.nbytes = w->konst.nbytes,
                     .view = llmc_view_transpose(llmc_const_share_view(&w->konst, h, v))};
    bool same = wt.view && llmc_const_equal(&e->konst, &wt);
    llmc_view_unref(wt.view);
    return same;
}
