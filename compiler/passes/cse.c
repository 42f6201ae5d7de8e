/* cse: common-subexpression elimination (paper 000 §III).
 *
 * First identical constants merge: same dtype, shape and bytes (two equal
 * initializers, or values constant folding produced twice).  Then two live
 * nodes merge when they have the same domain, op type, opset, attributes
 * (values included) and inputs: the later node's outputs are replaced by
 * the earlier one's and the later node is erased.
 *
 * Nodes are visited in topological order, so when a node is hashed its
 * producers were already merged: the duplicated ReduceMean -> Div chains of
 * paper 000 collapse link by link.  Sweeps repeat until one merges nothing.
 * Candidates are found through XXH64 buckets (an open-addressing table keyed
 * by content hashes, never by pointers) and then compared exactly.  Merges
 * go into a value replacement map that readers apply as they are visited
 * and once over the whole graph after each sweep, so a sweep stays linear
 * however many nodes merge.
 *
 * A graph output keeps its name in the plan, so a duplicate whose output is
 * a graph output is kept instead of the earlier node; when both produce
 * graph outputs they stay apart (one name would be lost). */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ir/const_view.h"
#include "pass.h"

/* memcmp of n bytes; empty arrays may be NULL, which memcmp must not get. */
static bool same_bytes(const void *a, const void *b, size_t n)
{
    return n == 0 || memcmp(a, b, n) == 0;
}

/* ---- an open-addressing table of ids keyed by content hash ---- */

typedef bool (*same_fn)(const llmc_graph *g, int a, int b);

typedef struct {
    int *ids;           /* -1 = empty slot */
    uint64_t *hashes;
    size_t mask;
} id_table;

static int table_init(id_table *t, int n)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)n)
        cap *= 2;
    t->ids = malloc(cap * sizeof *t->ids);
    t->hashes = malloc(cap * sizeof *t->hashes);
    t->mask = cap - 1;
    if (!t->ids || !t->hashes)
        return -1;
    memset(t->ids, 0xff, cap * sizeof *t->ids);
    return 0;
}

static void table_free(id_table *t)
{
    free(t->ids);
    free(t->hashes);
}

/* The slot holding an id equal to `id`, or the empty slot where it belongs. */
static size_t table_slot(const id_table *t, const llmc_graph *g, uint64_t hash, int id, same_fn same)
{
    size_t i = (size_t)hash & t->mask;
    while (t->ids[i] >= 0 && !(t->hashes[i] == hash && same(g, t->ids[i], id)))
        i = (i + 1) & t->mask;
    return i;
}

/* ---- the replacement map ---- */

typedef struct {
    llmc_graph *g;
    const llmc_pass_ctx *ctx;
    int *repl;          /* per value: the value that replaces it (itself if none) */
    int nodes_merged, consts_merged;
} cse_state;

static int resolve(const cse_state *c, int v)
{
    while (v >= 0 && c->repl[v] != v)
        v = c->repl[v];
    return v;
}

static void rewrite_inputs(cse_state *c, int node)
{
    llmc_node *n = &c->g->nodes[node];
    for (int k = 0; k < n->n_inputs; k++)
        n->inputs[k] = resolve(c, n->inputs[k]);
}

/* Graph outputs need no rewriting: a replaced value is never one. */
static void rewrite_all_inputs(cse_state *c)
{
    for (int i = 0; i < c->g->n_nodes; i++)
        if (!c->g->nodes[i].dead)
            rewrite_inputs(c, i);
}

/* ---- constants ---- */

static bool mergeable_const(const llmc_value *v)
{
    /* An initializer that is also a graph input may be overridden by the
     * caller; a graph output keeps its own name. */
    if (!v->is_const || v->is_graph_input || v->is_graph_output || v->shape.rank < 0)
        return false;
    for (int i = 0; i < v->shape.rank; i++)
        if (!llmc_aff_is_const(v->shape.dims[i]))
            return false;
    return true;
}

/* The bytes' hash is the one the dumps print, computed once per constant
 * (llmc_const_hash); dtype and shape are mixed in here. */
static uint64_t hash_const(const llmc_value *v)
{
    int64_t header[3 + LLMC_MAX_RANK] = {v->dtype, v->shape.rank};
    for (int i = 0; i < v->shape.rank; i++)
        header[2 + i] = v->shape.dims[i].c;
    header[2 + LLMC_MAX_RANK] = (int64_t)llmc_const_hash(&v->konst);
    return XXH64(header, sizeof header, 0);
}

static bool same_const(const llmc_graph *g, int a, int b)
{
    const llmc_value *x = &g->values[a], *y = &g->values[b];
    return x->dtype == y->dtype && llmc_shape_eq(&x->shape, &y->shape) && llmc_const_equal(&x->konst, &y->konst);
}

/* Every constant equal to a lower-numbered one is replaced by it. */
static int merge_constants(cse_state *c)
{
    llmc_graph *g = c->g;
    id_table t;
    if (table_init(&t, g->n_values)) {
        table_free(&t);
        return -1;
    }
    for (int v = 0; v < g->n_values; v++) {
        if (!mergeable_const(&g->values[v]))
            continue;
        uint64_t h = hash_const(&g->values[v]);
        size_t slot = table_slot(&t, g, h, v, same_const);
        if (t.ids[slot] < 0) {
            t.ids[slot] = v;
            t.hashes[slot] = h;
            continue;
        }
        c->repl[v] = t.ids[slot];
        llmc_graph_drop_const(g, v);
        c->consts_merged++;
    }
    table_free(&t);
    rewrite_all_inputs(c);
    return 0;
}

/* ---- nodes ---- */

static bool same_attr(const llmc_attr *a, const llmc_attr *b)
{
    if (strcmp(a->name, b->name) || a->type != b->type)
        return false;
    switch (a->type) {
    case LLMC_ATTR_FLOAT:
        return same_bytes(&a->f, &b->f, sizeof a->f);   /* bits: NaN == NaN, -0 != 0 */
    case LLMC_ATTR_INT:
        return a->i == b->i;
    case LLMC_ATTR_STRING:
        return strcmp(a->s, b->s) == 0;
    case LLMC_ATTR_FLOATS:
        return a->n_floats == b->n_floats && same_bytes(a->floats, b->floats, sizeof(float) * (size_t)a->n_floats);
    case LLMC_ATTR_INTS:
        return a->n_ints == b->n_ints && same_bytes(a->ints, b->ints, sizeof(int64_t) * (size_t)a->n_ints);
    case LLMC_ATTR_TENSOR:
        return a->t_dtype == b->t_dtype && a->t_rank == b->t_rank &&
               same_bytes(a->t_dims, b->t_dims, sizeof(int64_t) * (size_t)a->t_rank) &&
               a->t_data.nbytes == b->t_data.nbytes &&
               same_bytes(a->t_data.data, b->t_data.data, (size_t)a->t_data.nbytes);
    default:
        return false;   /* graphs and string lists: never proven equal */
    }
}

static uint64_t hash_attr(const llmc_attr *a)
{
    uint64_t h = XXH64(a->name, strlen(a->name), (uint64_t)a->type);
    switch (a->type) {
    case LLMC_ATTR_FLOAT:
        return XXH64(&a->f, sizeof a->f, h);
    case LLMC_ATTR_INT:
        return XXH64(&a->i, sizeof a->i, h);
    case LLMC_ATTR_STRING:
        return XXH64(a->s, strlen(a->s), h);
    case LLMC_ATTR_FLOATS:
        return XXH64(a->floats, sizeof(float) * (size_t)a->n_floats, h);
    case LLMC_ATTR_INTS:
        return XXH64(a->ints, sizeof(int64_t) * (size_t)a->n_ints, h);
    case LLMC_ATTR_TENSOR:
        return h + (uint64_t)a->t_dtype + llmc_const_hash(&a->t_data);
    default:
        return h;
    }
}

/* Random* ops draw new numbers each time; Multinomial and Bernoulli too. */
static bool is_random(const llmc_node *n)
{
    return strncmp(n->op_type, "Random", 6) == 0 || strcmp(n->op_type, "Multinomial") == 0 ||
           strcmp(n->op_type, "Bernoulli") == 0;
}

/* A node that computes all its outputs itself, deterministically. */
static bool mergeable_node(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    if (n->dead || is_random(n))
        return false;
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0 && g->values[n->outputs[k]].producer != node)
            return false;
    return true;
}

static const llmc_attr *find_attr(const llmc_node *n, const char *name)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0)
            return &n->attrs[i];
    return NULL;
}

static bool same_attrs(const llmc_node *a, const llmc_node *b)
{
    if (a->n_attrs != b->n_attrs)
        return false;
    for (int i = 0; i < a->n_attrs; i++) {
        const llmc_attr *other = find_attr(b, a->attrs[i].name);
        if (!other || !same_attr(&a->attrs[i], other))
            return false;
    }
    return true;
}

/* Same computation: op, attributes, inputs, and which outputs exist. */
static bool same_node(const llmc_graph *g, int a, int b)
{
    const llmc_node *x = &g->nodes[a], *y = &g->nodes[b];
    if (strcmp(x->op_type, y->op_type) || strcmp(x->domain, y->domain) || x->opset != y->opset ||
        x->n_inputs != y->n_inputs || x->n_outputs != y->n_outputs ||
        !same_bytes(x->inputs, y->inputs, sizeof(int) * (size_t)x->n_inputs))
        return false;
    for (int k = 0; k < x->n_outputs; k++)
        if ((x->outputs[k] < 0) != (y->outputs[k] < 0))
            return false;
    return same_attrs(x, y);
}

static uint64_t hash_node(const llmc_node *n)
{
    uint64_t h = XXH64(n->op_type, strlen(n->op_type), 0);
    int64_t header[3] = {n->opset, n->n_inputs, n->n_outputs};
    h = XXH64(n->domain, strlen(n->domain), h);
    h = XXH64(header, sizeof header, h);
    h = XXH64(n->inputs, sizeof(int) * (size_t)n->n_inputs, h);
    /* Attribute order does not matter: their hashes are summed. */
    uint64_t attrs = 0;
    for (int i = 0; i < n->n_attrs; i++)
        attrs += hash_attr(&n->attrs[i]);
    return h ^ attrs;
}

static bool has_graph_output(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0 && g->values[n->outputs[k]].is_graph_output)
            return true;
    return false;
}

/* `dup` computes what `kept` computes: dup's readers will read kept's
 * outputs. */
static void merge_node(cse_state *c, int kept, int dup)
{
    const llmc_node *d = &c->g->nodes[dup];
    for (int k = 0; k < d->n_outputs; k++)
        if (d->outputs[k] >= 0)
            c->repl[d->outputs[k]] = c->g->nodes[kept].outputs[k];
    llmc_graph_erase_node(c->g, dup);
    c->nodes_merged++;
}

/* Merges `node` into `first`, an equal node seen before it, or the other
 * way round when only `node` produces a graph output; returns the node that
 * stays. */
static int merge_pair(cse_state *c, int first, int node)
{
    bool first_out = has_graph_output(c->g, first), node_out = has_graph_output(c->g, node);
    if (first_out && node_out) {
        llmc_pass_explain(c->ctx, "cse", c->g, node, "equals '%s' (#%d) but both produce graph outputs",
                          c->g->nodes[first].name, first);
        return first;
    }
    if (node_out) {
        merge_node(c, node, first);
        return node;
    }
    merge_node(c, first, node);
    return first;
}

/* One sweep in topological order over `order` (n live nodes).  When the
 * later node is kept, readers of the erased one that were hashed already
 * sit in the table under their old inputs: no wrong merge can follow (the
 * comparison is exact), and the next sweep finds what this one missed.
 * Returns the number of merges, -1 on OOM. */
static int sweep_nodes(cse_state *c, const int *order, int n)
{
    llmc_graph *g = c->g;
    id_table t;
    int before = c->nodes_merged;
    if (table_init(&t, n)) {
        table_free(&t);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int node = order[i];
        if (!mergeable_node(g, node))
            continue;
        rewrite_inputs(c, node);
        uint64_t h = hash_node(&g->nodes[node]);
        size_t slot = table_slot(&t, g, h, node, same_node);
        t.ids[slot] = t.ids[slot] < 0 ? node : merge_pair(c, t.ids[slot], node);
        t.hashes[slot] = h;
    }
    table_free(&t);
    rewrite_all_inputs(c);
    return c->nodes_merged - before;
}

/* Sweeps until one merges nothing. */
static int merge_nodes(cse_state *c, llmc_error *err)
{
    int *order = malloc(sizeof(int) * ((size_t)c->g->n_nodes + 1));
    int merged = 1;
    while (order && merged > 0) {
        int n = llmc_graph_topo_order(c->g, order, NULL);
        if (n < 0) {
            free(order);
            return llmc_fail(err, LLMC_E_INPUT, "cse: graph has a cycle");
        }
        merged = sweep_nodes(c, order, n);
    }
    bool allocated = order != NULL;
    free(order);
    return allocated && merged == 0 ? LLMC_OK : llmc_fail(err, LLMC_E_NOMEM, "cse: out of memory");
}

static int run_cse(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    cse_state c = {.g = g, .ctx = ctx, .repl = malloc(sizeof(int) * ((size_t)g->n_values + 1))};
    for (int v = 0; c.repl && v < g->n_values; v++)
        c.repl[v] = v;
    if (!c.repl || merge_constants(&c)) {
        free(c.repl);
        return llmc_fail(err, LLMC_E_NOMEM, "cse: out of memory");
    }
    int rc = merge_nodes(&c, err);
    free(c.repl);
    if (!rc)
        llmc_pass_detail(ctx, "%d nodes merged, %d constants merged", c.nodes_merged, c.consts_merged);
    return rc;
}

const llmc_pass llmc_pass_cse = {"cse", run_cse};
