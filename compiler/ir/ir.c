/* Graph IR storage and the rewriting API (see ir.h). */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "const_view.h"

size_t llmc_dtype_size(int dtype)
{
    switch (dtype) {
    case LLMC_DT_FLOAT: case LLMC_DT_INT32: case LLMC_DT_UINT32: return 4;
    case LLMC_DT_UINT8: case LLMC_DT_INT8: case LLMC_DT_BOOL: return 1;
    case LLMC_DT_UINT16: case LLMC_DT_INT16: case LLMC_DT_FLOAT16: case LLMC_DT_BFLOAT16: return 2;
    case LLMC_DT_INT64: case LLMC_DT_DOUBLE: case LLMC_DT_UINT64: return 8;
    default: return 0;
    }
}

const char *llmc_dtype_name(int dtype)
{
    switch (dtype) {
    case LLMC_DT_FLOAT: return "float";
    case LLMC_DT_UINT8: return "uint8";
    case LLMC_DT_INT8: return "int8";
    case LLMC_DT_UINT16: return "uint16";
    case LLMC_DT_INT16: return "int16";
    case LLMC_DT_INT32: return "int32";
    case LLMC_DT_INT64: return "int64";
    case LLMC_DT_STRING: return "string";
    case LLMC_DT_BOOL: return "bool";
    case LLMC_DT_FLOAT16: return "float16";
    case LLMC_DT_DOUBLE: return "double";
    case LLMC_DT_UINT32: return "uint32";
    case LLMC_DT_UINT64: return "uint64";
    case LLMC_DT_BFLOAT16: return "bfloat16";
    case LLMC_DT_FLOAT8E4M3FN: return "float8e4m3fn";
    case LLMC_DT_FLOAT8E4M3FNUZ: return "float8e4m3fnuz";
    case LLMC_DT_FLOAT8E5M2: return "float8e5m2";
    case LLMC_DT_FLOAT8E5M2FNUZ: return "float8e5m2fnuz";
    case LLMC_DT_UINT4: return "uint4";
    case LLMC_DT_INT4: return "int4";
    default: return "undefined";
    }
}

void llmc_graph_init(llmc_graph *g)
{
    memset(g, 0, sizeof *g);
}

static void attr_free(llmc_attr *a)
{
    free(a->name);
    free(a->s);
    free(a->floats);
    free(a->ints);
    llmc_const_release(&a->t_data);
}

static void node_free(llmc_node *n)
{
    free(n->name);
    free(n->op_type);
    free(n->domain);
    free(n->inputs);
    free(n->outputs);
    for (int i = 0; i < n->n_attrs; i++)
        attr_free(&n->attrs[i]);
    free(n->attrs);
}

void llmc_graph_free(llmc_graph *g)
{
    for (int i = 0; i < g->n_values; i++) {
        free(g->values[i].name);
        llmc_const_release(&g->values[i].konst);
    }
    for (int i = 0; i < g->n_nodes; i++)
        node_free(&g->nodes[i]);
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    if (g->import_free)
        g->import_free(g->import_state);
    memset(g, 0, sizeof *g);
}

static char *dup_str(const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Grows an array of `elem` bytes to hold at least `need` elements. */
static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p)
        return -1;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    *arr = p;
    *cap = ncap;
    return 0;
}

int llmc_graph_add_value(llmc_graph *g, const char *name, int dtype)
{
    if (grow((void **)&g->values, &g->cap_values, g->n_values + 1, sizeof *g->values))
        return -1;
    llmc_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = dup_str(name);
    if (!v->name)
        return -1;
    v->dtype = dtype;
    v->shape.rank = -1;
    v->declared.rank = -1;
    v->producer = -1;
    return g->n_values++;
}

int llmc_graph_find_value(const llmc_graph *g, const char *name)
{
    for (int i = 0; i < g->n_values; i++)
        if (strcmp(g->values[i].name, name) == 0)
            return i;
    return -1;
}

static int *dup_ids(const int *ids, int n)
{
    int *d = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (d && n > 0)
        memcpy(d, ids, sizeof(int) * (size_t)n);
    return d;
}

int llmc_graph_add_node(llmc_graph *g, const char *op_type, const char *name,
                        const int *inputs, int n_inputs, const int *outputs, int n_outputs)
{
    if (grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes))
        return -1;
    int id = g->n_nodes;
    llmc_node *n = &g->nodes[id];
    memset(n, 0, sizeof *n);
    n->op_type = dup_str(op_type);
    n->name = dup_str(name);
    n->domain = dup_str("");
    n->opset = g->opset;
    n->inputs = dup_ids(inputs, n_inputs);
    n->outputs = dup_ids(outputs, n_outputs);
    if (!n->op_type || !n->name || !n->domain || !n->inputs || !n->outputs) {
        node_free(n);
        return -1;
    }
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    for (int i = 0; i < n_outputs; i++)
        if (outputs[i] >= 0)
            g->values[outputs[i]].producer = id;
    g->n_nodes++;
    return id;
}

static int copy_array(void **dst, const void *src, size_t bytes)
{
    *dst = NULL;
    if (!bytes)
        return 0;
    *dst = malloc(bytes);
    if (!*dst)
        return -1;
    memcpy(*dst, src, bytes);
    return 0;
}

int llmc_node_add_attr(llmc_graph *g, int node, const llmc_attr *attr)
{
    llmc_node *n = &g->nodes[node];
    llmc_attr *arr = realloc(n->attrs, sizeof *arr * (size_t)(n->n_attrs + 1));
    if (!arr)
        return -1;
    n->attrs = arr;
    llmc_attr *a = &arr[n->n_attrs];
    *a = *attr;
    a->name = dup_str(attr->name);
    a->s = attr->s ? dup_str(attr->s) : NULL;
    int bad = !a->name || (attr->s && !a->s);
    bad |= copy_array((void **)&a->floats, attr->floats, sizeof(float) * (size_t)attr->n_floats);
    bad |= copy_array((void **)&a->ints, attr->ints, sizeof(int64_t) * (size_t)attr->n_ints);
    a->t_data.owned = attr->t_data.nbytes > 0;
    a->t_data.file_backed = false;
    a->t_data.view = NULL;
    a->t_data.data = NULL;
    if (a->t_data.owned) {
        const void *bytes = llmc_const_bytes(&attr->t_data);
        bad |= !bytes || copy_array((void **)&a->t_data.data, bytes, attr->t_data.nbytes);
    }
    if (bad) {
        attr_free(a);
        return -1;
    }
    n->n_attrs++;
    return 0;
}

int llmc_graph_add_llmc_node(llmc_graph *g, const char *op_type, const char *name,
                             const int *inputs, int n_inputs, const int *outputs, int n_outputs)
{
    int id = llmc_graph_add_node(g, op_type, name, inputs, n_inputs, outputs, n_outputs);
    if (id < 0)
        return -1;
    char *domain = dup_str("llmc");
    if (!domain) {
        llmc_graph_erase_node(g, id);
        return -1;
    }
    free(g->nodes[id].domain);
    g->nodes[id].domain = domain;
    g->nodes[id].opset = 1;
    return id;
}

int llmc_node_set_int(llmc_graph *g, int node, const char *name, int64_t value)
{
    llmc_attr a = {.name = (char *)name, .type = LLMC_ATTR_INT, .i = value};
    return llmc_node_add_attr(g, node, &a);
}

int llmc_node_set_float(llmc_graph *g, int node, const char *name, float value)
{
    llmc_attr a = {.name = (char *)name, .type = LLMC_ATTR_FLOAT, .f = value};
    return llmc_node_add_attr(g, node, &a);
}

int llmc_node_set_ints(llmc_graph *g, int node, const char *name, const int64_t *values, int n)
{
    llmc_attr a = {.name = (char *)name, .type = LLMC_ATTR_INTS, .n_ints = n, .ints = (int64_t *)values};
    return llmc_node_add_attr(g, node, &a);
}

void llmc_graph_replace_value(llmc_graph *g, int old_value, int new_value)
{
    for (int i = 0; i < g->n_nodes; i++) {
        llmc_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] == old_value)
                n->inputs[k] = new_value;
    }
    for (int k = 0; k < g->n_outputs; k++) {
        if (g->outputs[k] != old_value)
            continue;
        /* The graph output keeps its ONNX name: the new value takes it over,
         * unless the new value is itself an input/output with its own name. */
        g->outputs[k] = new_value;
        g->values[old_value].is_graph_output = false;
        g->values[new_value].is_graph_output = true;
    }
}

void llmc_graph_erase_node(llmc_graph *g, int node)
{
    llmc_node *n = &g->nodes[node];
    n->dead = true;
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0 && g->values[n->outputs[k]].producer == node)
            g->values[n->outputs[k]].producer = -1;
}

int llmc_graph_set_const(llmc_graph *g, int value, int dtype, const llmc_shape *shape,
                         const void *data, uint64_t nbytes)
{
    llmc_value *v = &g->values[value];
    void *copy = malloc(nbytes ? nbytes : 1);
    if (!copy)
        return -1;
    if (nbytes)
        memcpy(copy, data, nbytes);
    llmc_const_release(&v->konst);
    v->is_const = true;
    v->konst.data = copy;
    v->konst.nbytes = nbytes;
    v->konst.owned = true;
    v->dtype = dtype;
    v->shape = *shape;
    v->producer = -1;
    return 0;
}

int llmc_graph_set_const_view(llmc_graph *g, int value, const llmc_shape *shape, llmc_view *view)
{
    if (!view || shape->rank != 2 || !llmc_aff_eq(shape->dims[0], llmc_aff_const(llmc_view_rows(view))) ||
        !llmc_aff_eq(shape->dims[1], llmc_aff_const(llmc_view_cols(view)))) {
        llmc_view_unref(view);
        return -1;
    }
    llmc_value *v = &g->values[value];
    llmc_const_release(&v->konst);
    v->is_const = true;
    v->konst.view = view;
    v->konst.nbytes = sizeof(float) * (uint64_t)llmc_view_rows(view) * (uint64_t)llmc_view_cols(view);
    v->dtype = LLMC_DT_FLOAT;
    v->shape = *shape;
    v->producer = -1;
    return 0;
}

const llmc_attr *llmc_node_attr(const llmc_graph *g, int node, const char *name)
{
    const llmc_node *n = &g->nodes[node];
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0)
            return &n->attrs[i];
    return NULL;
}

int64_t llmc_node_attr_int(const llmc_graph *g, int node, const char *name, int64_t dflt)
{
    const llmc_attr *a = llmc_node_attr(g, node, name);
    return a && a->type == LLMC_ATTR_INT ? a->i : dflt;
}

float llmc_node_attr_float(const llmc_graph *g, int node, const char *name, float dflt)
{
    const llmc_attr *a = llmc_node_attr(g, node, name);
    return a && a->type == LLMC_ATTR_FLOAT ? a->f : dflt;
}

int llmc_graph_live_nodes(const llmc_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += !g->nodes[i].dead;
    return n;
}

/* Min-heap of node ids: Kahn's algorithm pops the lowest ready id, which
 * makes the order independent of anything but the graph itself. */
static void heap_push(int *h, int *n, int v)
{
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static int heap_pop(int *h, int *n)
{
    int top = h[0], last = h[--*n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (last <= h[c])
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

/* CSR lists of consumers per value, over live nodes. */
typedef struct {
    int *start;   /* n_values + 1 */
    int *node;
} consumer_index;

static int consumers_build(const llmc_graph *g, consumer_index *ci)
{
    ci->start = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!ci->start)
        return -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead)
            for (int k = 0; k < g->nodes[i].n_inputs; k++)
                if (g->nodes[i].inputs[k] >= 0)
                    ci->start[g->nodes[i].inputs[k] + 1]++;
    for (int v = 0; v < g->n_values; v++)
        ci->start[v + 1] += ci->start[v];
    ci->node = malloc(sizeof(int) * (size_t)(ci->start[g->n_values] + 1));
    int *fill = malloc(sizeof(int) * (size_t)(g->n_values + 1));
    if (!ci->node || !fill) {
        free(ci->start);
        free(ci->node);
        free(fill);
        return -1;
    }
    memcpy(fill, ci->start, sizeof(int) * (size_t)(g->n_values + 1));
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead)
            for (int k = 0; k < g->nodes[i].n_inputs; k++)
                if (g->nodes[i].inputs[k] >= 0)
                    ci->node[fill[g->nodes[i].inputs[k]]++] = i;
    free(fill);
    return 0;
}

/* Number of live inputs of node `i` produced by a live node (with
 * multiplicity, matching how consumers_build counts edges). */
static int pending_inputs(const llmc_graph *g, int i)
{
    int pending = 0;
    const llmc_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k];
        if (v >= 0 && g->values[v].producer >= 0 && !g->nodes[g->values[v].producer].dead)
            pending++;
    }
    return pending;
}

int llmc_graph_topo_order(const llmc_graph *g, int *order, int *cycle_node)
{
    consumer_index ci;
    if (consumers_build(g, &ci))
        return -1;
    int *indeg = calloc((size_t)g->n_nodes + 1, sizeof(int));
    int *heap = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    int count = 0, live = 0, hn = 0;
    if (!indeg || !heap)
        goto out;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead)
            continue;
        live++;
        indeg[i] = pending_inputs(g, i);
        if (indeg[i] == 0)
            heap_push(heap, &hn, i);
    }
    while (hn > 0) {
        int i = heap_pop(heap, &hn);
        order[count++] = i;
        const llmc_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_outputs; k++) {
            int v = n->outputs[k];
            if (v < 0 || g->values[v].producer != i)
                continue;
            for (int c = ci.start[v]; c < ci.start[v + 1]; c++)
                if (--indeg[ci.node[c]] == 0)
                    heap_push(heap, &hn, ci.node[c]);
        }
    }
    if (count < live && cycle_node) {
        *cycle_node = -1;
        for (int i = 0; i < g->n_nodes && *cycle_node < 0; i++)
            if (!g->nodes[i].dead && indeg[i] > 0)
                *cycle_node = i;
    }
out:
    free(indeg);
    free(heap);
    free(ci.start);
    free(ci.node);
    return count < live ? -1 : count;
}

int llmc_graph_use_count(const llmc_graph *g, int value)
{
    int uses = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead)
            continue;
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            uses += g->nodes[i].inputs[k] == value;
    }
    for (int k = 0; k < g->n_outputs; k++)
        uses += g->outputs[k] == value;
    return uses;
}

char *llmc_graph_unique_name(const llmc_graph *g, const char *base, const char *suffix)
{
    size_t size = strlen(base) + strlen(suffix) + 24;
    char *name = malloc(size);
    for (int i = 0; name; i++) {
        if (i == 0)
            snprintf(name, size, "%s%s", base, suffix);
        else
            snprintf(name, size, "%s%s%d", base, suffix, i);
        if (llmc_graph_find_value(g, name) < 0)
            break;
    }
    return name;
}

void llmc_graph_drop_const(llmc_graph *g, int value)
{
    llmc_value *v = &g->values[value];
    llmc_const_release(&v->konst);
    v->is_const = false;
    v->n_sym = 0;
}

/* rows x cols of a float32 constant of rank 2 with constant dims. */
static bool float_matrix(const llmc_value *v, int64_t *rows, int64_t *cols)
{
    if (!v->is_const || v->dtype != LLMC_DT_FLOAT || v->shape.rank != 2 || !llmc_aff_is_const(v->shape.dims[0]) ||
        !llmc_aff_is_const(v->shape.dims[1]))
        return false;
    *rows = v->shape.dims[0].c;
    *cols = v->shape.dims[1].c;
    return true;
}

llmc_view *llmc_graph_const_view(llmc_graph *g, int v)
{
    int64_t rows, cols;
    if (v < 0 || !float_matrix(&g->values[v], &rows, &cols))
        return NULL;
    llmc_const *k = &g->values[v].konst;
    if (k->view || !k->owned)
        return llmc_const_share_view(k, rows, cols);
    if ((uint64_t)rows * (uint64_t)cols * sizeof(float) != k->nbytes)
        return NULL;
    llmc_view *leaf = llmc_view_dense(k->data, rows, cols, (void *)k->data, false);
    if (!leaf)
        return NULL;
    k->owned = false;   /* the leaf owns the bytes now; k keeps reading them */
    k->view = leaf;
    return llmc_view_ref(leaf);
}

int llmc_const_read_rows(const llmc_value *v, int64_t r0, int64_t r1, float *out)
{
    const llmc_const *k = &v->konst;
    if (!v->is_const || v->dtype != LLMC_DT_FLOAT)
        return -1;
    int64_t cols = k->view ? llmc_view_cols(k->view) : v->shape.rank > 0 ? v->shape.dims[v->shape.rank - 1].c : 1;
    int64_t rows = cols > 0 ? (int64_t)(k->nbytes / sizeof(float) / (uint64_t)cols) : 0;
    if (r0 < 0 || r0 > r1 || r1 > rows)
        return -1;
    return llmc_const_read(k, sizeof(float) * (uint64_t)(r0 * cols), out, sizeof(float) * (uint64_t)((r1 - r0) * cols));
}
