/* Canonical text dump of the IR and its XXH64 digest (see ir_dump.h). */
#include "ir_dump.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "const_view.h"

/* ---- canonical node order ---- */

/* A node's sort key: the name of its first output it still defines (unique
 * in ONNX), else its node name. */
static const char *node_key(const llmc_graph *g, int i)
{
    const llmc_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_outputs; k++) {
        int v = n->outputs[k];
        if (v >= 0 && g->values[v].producer == i)
            return g->values[v].name;
    }
    return n->name;
}

static bool key_less(const llmc_graph *g, int a, int b)
{
    int c = strcmp(node_key(g, a), node_key(g, b));
    return c < 0 || (c == 0 && a < b);
}

static void heap_push(const llmc_graph *g, int *h, int *n, int v)
{
    int i = (*n)++;
    while (i > 0 && key_less(g, v, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static int heap_pop(const llmc_graph *g, int *h, int *n)
{
    int top = h[0], last = h[--*n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && key_less(g, h[c + 1], h[c]))
            c++;
        if (!key_less(g, h[c], last))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static bool defined_by_live_node(const llmc_graph *g, int v)
{
    return v >= 0 && g->values[v].producer >= 0 && !g->nodes[g->values[v].producer].dead;
}

/* Consumers of every value as CSR arrays (start has n_values + 1 entries). */
static int build_consumers(const llmc_graph *g, int **start_out, int **node_out)
{
    int *start = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!start)
        return -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; !g->nodes[i].dead && k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0)
                start[g->nodes[i].inputs[k] + 1]++;
    for (int v = 0; v < g->n_values; v++)
        start[v + 1] += start[v];
    int *node = malloc(sizeof(int) * ((size_t)start[g->n_values] + 1));
    int *fill = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!node || !fill) {
        free(start);
        free(node);
        free(fill);
        return -1;
    }
    memcpy(fill, start, sizeof(int) * ((size_t)g->n_values + 1));
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; !g->nodes[i].dead && k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0)
                node[fill[g->nodes[i].inputs[k]]++] = i;
    free(fill);
    *start_out = start;
    *node_out = node;
    return 0;
}

/* Kahn's algorithm popping the smallest key: an order that depends on the
 * topology and the names only.  Returns the count, -1 on OOM or a cycle. */
static int canonical_order(const llmc_graph *g, int *order)
{
    int *start, *consumer;
    if (build_consumers(g, &start, &consumer))
        return -1;
    int *indeg = calloc((size_t)g->n_nodes + 1, sizeof(int));
    int *heap = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    int count = 0, live = 0, hn = 0;
    for (int i = 0; indeg && heap && i < g->n_nodes; i++) {
        if (g->nodes[i].dead)
            continue;
        live++;
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            indeg[i] += defined_by_live_node(g, g->nodes[i].inputs[k]);
        if (indeg[i] == 0)
            heap_push(g, heap, &hn, i);
    }
    while (hn > 0) {
        int i = heap_pop(g, heap, &hn);
        order[count++] = i;
        for (int k = 0; k < g->nodes[i].n_outputs; k++) {
            int v = g->nodes[i].outputs[k];
            if (v < 0 || g->values[v].producer != i)
                continue;
            for (int c = start[v]; c < start[v + 1]; c++)
                if (--indeg[consumer[c]] == 0)
                    heap_push(g, heap, &hn, consumer[c]);
        }
    }
    bool ok = indeg && heap && count == live;
    free(indeg);
    free(heap);
    free(start);
    free(consumer);
    return ok ? count : -1;
}

/* ---- printing pieces ---- */

static void append_term(char *buf, size_t size, size_t *len, int64_t coef, const char *sym)
{
    if (coef == 0)
        return;
    const char *sign = coef < 0 ? "-" : (*len ? "+" : "");
    uint64_t mag = coef < 0 ? (uint64_t)0 - (uint64_t)coef : (uint64_t)coef;
    int w;
    if (!sym[0])
        w = snprintf(buf + *len, size - *len, "%s%" PRIu64, sign, mag);
    else if (mag == 1)
        w = snprintf(buf + *len, size - *len, "%s%s", sign, sym);
    else
        w = snprintf(buf + *len, size - *len, "%s%" PRIu64 "*%s", sign, mag, sym);
    if (w > 0)
        *len = *len + (size_t)w < size ? *len + (size_t)w : size - 1;
}

void llmc_ir_format_affine(llmc_affine a, char *buf, size_t size)
{
    size_t len = 0;
    if (!size)
        return;
    buf[0] = 0;
    append_term(buf, size, &len, a.p, "P");
    append_term(buf, size, &len, a.s, "S");
    append_term(buf, size, &len, a.c, "");
    if (len == 0)
        snprintf(buf, size, "0");
}

static void print_affines(FILE *out, const llmc_affine *a, int n)
{
    char buf[96];
    fputc('[', out);
    for (int i = 0; i < n; i++) {
        llmc_ir_format_affine(a[i], buf, sizeof buf);
        fprintf(out, "%s%s", i ? "," : "", buf);
    }
    fputc(']', out);
}

static void print_shape(FILE *out, const llmc_shape *s)
{
    if (s->rank < 0)
        fputs("?", out);
    else
        print_affines(out, s->dims, s->rank);
}

static void print_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void print_attr_value(FILE *out, const llmc_attr *a)
{
    switch (a->type) {
    case LLMC_ATTR_FLOAT:
        fprintf(out, "%.9g", (double)a->f);
        break;
    case LLMC_ATTR_INT:
        fprintf(out, "%" PRId64, a->i);
        break;
    case LLMC_ATTR_STRING:
        print_string(out, a->s ? a->s : "");
        break;
    case LLMC_ATTR_FLOATS:
        fputc('[', out);
        for (int i = 0; i < a->n_floats; i++)
            fprintf(out, "%s%.9g", i ? "," : "", (double)a->floats[i]);
        fputc(']', out);
        break;
    case LLMC_ATTR_INTS:
        fputc('[', out);
        for (int i = 0; i < a->n_ints; i++)
            fprintf(out, "%s%" PRId64, i ? "," : "", a->ints[i]);
        fputc(']', out);
        break;
    case LLMC_ATTR_TENSOR:
        fprintf(out, "tensor(%s,[", llmc_dtype_name(a->t_dtype));
        for (int i = 0; i < a->t_rank; i++)
            fprintf(out, "%s%" PRId64, i ? "," : "", a->t_dims[i]);
        fprintf(out, "],bytes=%" PRIu64 ",xxh64=%016" PRIx64 ")", a->t_data.nbytes,
                llmc_const_hash(&a->t_data));
        break;
    default:
        fprintf(out, "<attribute type %d>", a->type);
        break;
    }
}

static int attr_by_name(const void *a, const void *b)
{
    return strcmp((*(const llmc_attr *const *)a)->name, (*(const llmc_attr *const *)b)->name);
}

static int print_attrs(FILE *out, const llmc_node *n)
{
    if (n->n_attrs == 0)
        return 0;
    const llmc_attr **sorted = malloc(sizeof *sorted * (size_t)n->n_attrs);
    if (!sorted)
        return -1;
    for (int i = 0; i < n->n_attrs; i++)
        sorted[i] = &n->attrs[i];
    qsort(sorted, (size_t)n->n_attrs, sizeof *sorted, attr_by_name);
    fputs("  attrs:", out);
    for (int i = 0; i < n->n_attrs; i++) {
        fprintf(out, " %s=", sorted[i]->name);
        print_attr_value(out, sorted[i]);
    }
    fputc('\n', out);
    free(sorted);
    return 0;
}

static void print_value_type(FILE *out, const llmc_value *v)
{
    fprintf(out, "%s %s ", v->name, llmc_dtype_name(v->dtype));
    print_shape(out, &v->shape);
}

/* "-" for an omitted operand and for an output the node no longer defines
 * (constant folding took it over). */
static void print_operands(FILE *out, const llmc_graph *g, const int *ids, int n, int producer)
{
    fputc('(', out);
    for (int k = 0; k < n; k++) {
        int v = ids[k];
        bool shown = v >= 0 && (producer < 0 || g->values[v].producer == producer);
        fprintf(out, "%s%s", k ? ", " : "", shown ? g->values[v].name : "-");
    }
    fputc(')', out);
}

static int print_node(FILE *out, const llmc_graph *g, int i)
{
    const llmc_node *n = &g->nodes[i];
    fprintf(out, "node   %s%s%s ", n->domain, n->domain[0] ? "." : "", n->op_type);
    if (n->opset != g->opset)
        fprintf(out, "opset=%d ", n->opset);
    print_string(out, n->name);
    fputc(' ', out);
    print_operands(out, g, n->inputs, n->n_inputs, -1);
    fputs(" -> ", out);
    print_operands(out, g, n->outputs, n->n_outputs, i);
    fputc('\n', out);
    if (print_attrs(out, n))
        return -1;
    for (int k = 0; k < n->n_outputs; k++) {
        const llmc_value *v = n->outputs[k] >= 0 ? &g->values[n->outputs[k]] : NULL;
        if (!v || v->producer != i || (v->dtype == LLMC_DT_UNDEFINED && v->shape.rank < 0))
            continue;
        fputs("  out  ", out);
        print_value_type(out, v);
        if (v->n_sym > 0) {
            fputs(" sym=", out);
            print_affines(out, v->sym, v->n_sym);
        }
        fputc('\n', out);
    }
    return 0;
}

/* ---- constants ---- */

static int value_by_name(const void *a, const void *b, void *g)
{
    const llmc_value *vals = ((const llmc_graph *)g)->values;
    return strcmp(vals[*(const int *)a].name, vals[*(const int *)b].name);
}

/* Constants read by a live node or exposed as graph outputs, sorted by name. */
static int used_constants(const llmc_graph *g, int **out_ids)
{
    bool *used = calloc((size_t)g->n_values + 1, sizeof(bool));
    int *ids = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!used || !ids) {
        free(used);
        free(ids);
        return -1;
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; !g->nodes[i].dead && k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0)
                used[g->nodes[i].inputs[k]] = true;
    for (int k = 0; k < g->n_outputs; k++)
        used[g->outputs[k]] = true;
    int n = 0;
    for (int v = 0; v < g->n_values; v++)
        if (used[v] && g->values[v].is_const && !g->values[v].is_graph_input)
            ids[n++] = v;
    qsort_r(ids, (size_t)n, sizeof(int), value_by_name, (void *)g);
    free(used);
    *out_ids = ids;
    return n;
}

static void print_const(FILE *out, const llmc_value *v)
{
    fputs("const  ", out);
    print_value_type(out, v);
    fprintf(out, " bytes=%" PRIu64 " xxh64=%016" PRIx64 "\n", v->konst.nbytes, llmc_const_hash(&v->konst));
}

int llmc_ir_dump(const llmc_graph *g, FILE *out)
{
    int *order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    int *consts = NULL;
    int n_order = order ? canonical_order(g, order) : -1;
    int n_consts = n_order >= 0 ? used_constants(g, &consts) : -1;
    int rc = n_consts < 0 ? -1 : 0;
    if (rc == 0) {
        fprintf(out, "opset  %d\n", g->opset);
        for (int k = 0; k < g->n_inputs; k++) {
            fputs("input  ", out);
            print_value_type(out, &g->values[g->inputs[k]]);
            fputc('\n', out);
        }
        for (int k = 0; k < n_consts; k++)
            print_const(out, &g->values[consts[k]]);
        for (int k = 0; k < n_order && rc == 0; k++)
            rc = print_node(out, g, order[k]);
        for (int k = 0; k < g->n_outputs; k++) {
            fputs("output ", out);
            print_value_type(out, &g->values[g->outputs[k]]);
            fputc('\n', out);
        }
    }
    free(order);
    free(consts);
    return rc == 0 && !ferror(out) ? 0 : -1;
}

uint64_t llmc_ir_digest(const llmc_graph *g)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return 0;
    int rc = llmc_ir_dump(g, mem);
    rc |= fclose(mem);
    uint64_t h = rc == 0 ? XXH64(text, len, 0) : 0;
    free(text);
    return h;
}
