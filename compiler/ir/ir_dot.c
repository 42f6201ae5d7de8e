/* Graphviz picture of the IR (see ir_dot.h). */
#include "ir_dot.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ir_dump.h"
#include "support/layer_name.h"
#include "llmc_ops.h"

#define FUSED_FILL "#a6cee3"
#define NEW_BORDER "#d62728"
/* Node names longer than this keep their tail behind "...". */
#define NAME_MAX_CHARS 40

/* Writes s for a double-quoted DOT string: quotes and backslashes escaped
 * (a bare backslash would start a DOT label escape such as \N or \l),
 * control bytes replaced. */
static void dot_text(FILE *out, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else
            fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, out);
    }
}

/* The stage (ir_dot.h) that created node `id`. */
static int node_stage(const llmc_dot_origin *o, int id)
{
    int k = 0;
    while (k < o->n_stages - 1 && id >= o->end[k])
        k++;
    return k;
}

static int current_stage(const llmc_dot_origin *o)
{
    return o->n_stages - 1;
}

static bool is_new(const llmc_dot_origin *o, int id)
{
    return current_stage(o) > 0 && node_stage(o, id) == current_stage(o);
}

/* ---- node labels ---- */

/* The last two components of the torch module path, after dropping a last
 * component that only repeats the op type ("/model/layers.0/self_attn/
 * q_proj/MatMul" -> "self_attn/q_proj"); the layer is the cluster's. */
static void short_name(const llmc_node *n, char *buf, size_t size)
{
    const char *end = n->name + strlen(n->name);
    while (end > n->name && end[-1] == '/')
        end--;
    const char *last = end;
    while (last > n->name && last[-1] != '/')
        last--;
    if (last > n->name && strncmp(last, n->op_type, strlen(n->op_type)) == 0)
        end = last - 1;
    const char *start = end;
    for (int slashes = 0; start > n->name; start--)
        if (start[-1] == '/' && ++slashes == 2)
            break;
    if (start < end && *start == '/')
        start++;
    size_t len = (size_t)(end - start);
    if (len > NAME_MAX_CHARS) {   /* keep the tail, from a UTF-8 character start */
        start = end - NAME_MAX_CHARS;
        while (start < end && ((unsigned char)*start & 0xC0) == 0x80)
            start++;
        len = (size_t)(end - start);
    }
    snprintf(buf, size, "%s%.*s", start > n->name && start[-1] != '/' ? "..." : "", (int)len, start);
}

/* Integer attributes worth seeing, per llmc op (llmc_ops.h). */
static const struct {
    const char *op;
    const char *attrs[4];
} fused_attrs[] = {
    {"Attention", {"heads", "kv_heads", "head_dim", "rotary_dim"}},
    {"Rope", {"rotary_dim"}},
    {"Gelu", {"tanh"}},
};

static void print_fused_attrs(FILE *out, const llmc_graph *g, int i)
{
    const llmc_node *n = &g->nodes[i];
    if (llmc_is_op(n, "Linear")) {
        fprintf(out, "\\noutputs=%d%s%s", n->n_outputs, n->n_inputs > 2 && n->inputs[2] >= 0 ? " +bias" : "",
                n->n_inputs > 3 && n->inputs[3] >= 0 ? " +residual" : "");
        return;
    }
    for (size_t t = 0; t < sizeof fused_attrs / sizeof fused_attrs[0]; t++) {
        if (!llmc_is_op(n, fused_attrs[t].op))
            continue;
        const char *sep = "\\n";
        for (int a = 0; a < 4 && fused_attrs[t].attrs[a]; a++) {
            const llmc_attr *attr = llmc_node_attr(g, i, fused_attrs[t].attrs[a]);
            if (attr && attr->type == LLMC_ATTR_INT) {
                fprintf(out, "%s%s=%" PRId64, sep, attr->name, attr->i);
                sep = " ";
            }
        }
    }
}

/* A constant operand: not drawn, counted in its consumer's label. */
static bool is_hidden_const(const llmc_graph *g, int v)
{
    const llmc_value *val = &g->values[v];
    return val->is_const && !val->is_graph_input;
}

static int const_operands(const llmc_graph *g, const llmc_node *n)
{
    int count = 0;
    for (int k = 0; k < n->n_inputs; k++)
        count += n->inputs[k] >= 0 && is_hidden_const(g, n->inputs[k]);
    return count;
}

static void print_node(FILE *out, const llmc_graph *g, const llmc_dot_origin *o, int i, const char *indent)
{
    const llmc_node *n = &g->nodes[i];
    char name[NAME_MAX_CHARS + 8];
    short_name(n, name, sizeof name);
    fprintf(out, "%sn%d [label=\"", indent, i);
    dot_text(out, n->op_type);
    fputs("\\n", out);
    dot_text(out, name);
    fprintf(out, " #%d", i);
    print_fused_attrs(out, g, i);
    int consts = const_operands(g, n);
    if (consts)
        fprintf(out, "\\n+%d const", consts);
    int stage = node_stage(o, i);
    if (stage > 0)
        fprintf(out, "\\nby %s", o->name[stage]);
    bool fused = strcmp(n->domain, LLMC_DOMAIN) == 0;
    fprintf(out, "\"%s%s];\n", fused ? ", style=\"rounded,filled\", fillcolor=\"" FUSED_FILL "\"" : "",
            is_new(o, i) ? ", penwidth=3, color=\"" NEW_BORDER "\"" : "");
}

/* ---- values ---- */

static void print_type(FILE *out, const llmc_value *v)
{
    char dim[96];
    fprintf(out, "%s ", llmc_dtype_name(v->dtype));
    if (v->shape.rank < 0) {
        fputc('?', out);
        return;
    }
    fputc('[', out);
    for (int d = 0; d < v->shape.rank; d++) {
        llmc_ir_format_affine(v->shape.dims[d], dim, sizeof dim);
        fprintf(out, "%s%s", d ? "," : "", dim);
    }
    fputc(']', out);
}

/* The DOT id of the box value v comes from into buf: its live producer
 * ("n7") or its graph input ("i0"); false if it has none drawn (a constant). */
static bool value_source(const llmc_graph *g, int v, char *buf, size_t size)
{
    int p = g->values[v].producer;
    if (p >= 0 && !g->nodes[p].dead) {
        snprintf(buf, size, "n%d", p);
        return true;
    }
    for (int k = 0; k < g->n_inputs; k++)
        if (g->inputs[k] == v) {
            snprintf(buf, size, "i%d", k);
            return true;
        }
    return false;
}

static void print_edges(FILE *out, const llmc_graph *g, const int *order, int n_order)
{
    char src[32];
    for (int j = 0; j < n_order; j++) {
        const llmc_node *n = &g->nodes[order[j]];
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0 || !value_source(g, v, src, sizeof src))
                continue;
            fprintf(out, "  %s -> n%d [label=\"", src, order[j]);
            print_type(out, &g->values[v]);
            fputs("\"];\n", out);
        }
    }
    for (int k = 0; k < g->n_outputs; k++)
        if (value_source(g, g->outputs[k], src, sizeof src))
            fprintf(out, "  %s -> o%d;\n", src, k);
}

/* Graph inputs and outputs: name and type, in ONNX order. */
static void print_io(FILE *out, const llmc_graph *g)
{
    for (int k = 0; k < g->n_inputs; k++) {
        fprintf(out, "  i%d [shape=invhouse, label=\"", k);
        dot_text(out, g->values[g->inputs[k]].name);
        fputs("\"];\n", out);
    }
    for (int k = 0; k < g->n_outputs; k++) {
        const llmc_value *v = &g->values[g->outputs[k]];
        fprintf(out, "  o%d [shape=house, label=\"", k);
        dot_text(out, v->name);
        fputs("\\n", out);
        print_type(out, v);
        fputs("\"];\n", out);
    }
}

/* ---- layers ---- */

/* Reorders the topological order stably by decoder layer, nodes of no
 * layer first, so each layer's nodes are contiguous; layer_of[j] is the
 * layer of sorted[j] (-1: none). */
static void sort_by_layer(const llmc_graph *g, const int *order, int n, int *sorted, int *layer_of)
{
    /* Counting sort on layer + 1 (0 .. LLMC_LAYER_TALLY_MAX); start[b] ends
     * up as bucket b's first slot. */
    int start[LLMC_LAYER_TALLY_MAX + 2] = {0};
    for (int j = 0; j < n; j++)
        start[llmc_layer_of_name(g->nodes[order[j]].name) + 2]++;
    for (int b = 1; b < LLMC_LAYER_TALLY_MAX + 2; b++)
        start[b] += start[b - 1];
    for (int j = 0; j < n; j++) {
        int layer = (int)llmc_layer_of_name(g->nodes[order[j]].name);
        layer_of[start[layer + 1]] = layer;
        sorted[start[layer + 1]++] = order[j];
    }
}

static void print_nodes(FILE *out, const llmc_graph *g, const llmc_dot_origin *o, const int *sorted,
                        const int *layer_of, int n)
{
    for (int j = 0; j < n; j++) {
        if (layer_of[j] >= 0 && (j == 0 || layer_of[j - 1] != layer_of[j]))
            fprintf(out, "  subgraph cluster_layer_%d {\n    label=\"layer %d\"; style=rounded; color=gray50;\n",
                    layer_of[j], layer_of[j]);
        print_node(out, g, o, sorted[j], layer_of[j] >= 0 ? "    " : "  ");
        if (layer_of[j] >= 0 && (j == n - 1 || layer_of[j + 1] != layer_of[j]))
            fputs("  }\n", out);
    }
}

/* ---- the digraph ---- */

static void print_header(FILE *out, const llmc_graph *g, const llmc_dot_origin *o, const int *order, int n)
{
    int fused = 0, created = 0;
    for (int j = 0; j < n; j++) {
        fused += strcmp(g->nodes[order[j]].domain, LLMC_DOMAIN) == 0;
        created += is_new(o, order[j]);
    }
    int stage = current_stage(o);
    fprintf(out, "digraph \"%02d-", stage);
    dot_text(out, o->name[stage]);
    fprintf(out, "\" {\n  graph [rankdir=TB, labelloc=t, fontsize=12, label=\"%02d ", stage);
    dot_text(out, o->name[stage]);
    fprintf(out, ": %d live nodes, %d fused (filled)", n, fused);
    if (stage > 0)
        fprintf(out, ", %d created by this pass (red border)", created);
    fputs("\\nconstants are not drawn: +N const counts a node's constant operands\"];\n", out);
    fputs("  node [shape=box, style=rounded, fontsize=10];\n  edge [fontsize=8];\n", out);
}

int llmc_ir_dot(const llmc_graph *g, const llmc_dot_origin *origin, FILE *out)
{
    size_t cap = (size_t)g->n_nodes + 1;
    int *order = malloc(sizeof(int) * cap);
    int *sorted = malloc(sizeof(int) * cap);
    int *layer_of = malloc(sizeof(int) * cap);
    int cycle_node, n = -1;
    if (order && sorted && layer_of)
        n = llmc_graph_topo_order(g, order, &cycle_node);
    if (n >= 0) {
        sort_by_layer(g, order, n, sorted, layer_of);
        print_header(out, g, origin, order, n);
        print_io(out, g);
        print_nodes(out, g, origin, sorted, layer_of, n);
        print_edges(out, g, order, n);
        fputs("}\n", out);
    }
    free(order);
    free(sorted);
    free(layer_of);
    return n >= 0 && !ferror(out) ? 0 : -1;
}
