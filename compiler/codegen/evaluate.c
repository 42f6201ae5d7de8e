/* Evaluation on the runtime's kernels (see evaluate.h). */
#include "evaluate.h"

#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/const_view.h"
#include "ir/io_roles.h"
#include "llmc_rt_internal.h"

static int rt_error(llmc_error *err, const char *step, const llmc_rt_error *e)
{
    return llmc_fail(err, LLMC_E_RUNTIME, "evaluation: %s: %s", step, e->msg[0] ? e->msg : llmc_rt_status_text(e->code));
}

static int copy_output(const llmc_rt_session *s, uint32_t k, llmc_eval_tensor *out, llmc_error *err)
{
    llmc_rt_tensor t;
    llmc_rt_error e = {0};
    if (llmc_rt_session_output(s, k, &t, &e))
        return rt_error(err, "reading an output", &e);
    uint64_t n = llmc_dtype_size(t.dtype);
    out->dtype = t.dtype;
    out->shape.rank = t.rank;
    for (int i = 0; i < t.rank; i++) {
        out->shape.dims[i] = llmc_aff_const(t.dims[i]);
        n *= (uint64_t)t.dims[i];
    }
    out->nbytes = n;
    out->data = malloc(n ? n : 1);
    if (!out->data)
        return llmc_fail(err, LLMC_E_NOMEM, "evaluation: out of memory for a %llu-byte output",
                         (unsigned long long)n);
    if (n)
        memcpy(out->data, t.data, n);
    return LLMC_OK;
}

/* Opens the plan, runs it and copies every output out of the arena. */
static int run_plan(const uint8_t *plan, size_t size, uint32_t S, uint32_t P, const llmc_rt_tensor *inputs,
                    llmc_eval_tensor *outputs, llmc_error *err)
{
    llmc_rt_plan p;
    llmc_rt_session s;
    llmc_rt_error e = {0};
    if (llmc_rt_plan_open(&p, plan, size, 0, &e))
        return rt_error(err, "opening the plan", &e);
    size_t bytes = llmc_rt_session_memory(&p);
    void *memory = malloc(bytes ? bytes : 1);
    if (!memory)
        return llmc_fail(err, LLMC_E_NOMEM, "evaluation: out of memory for %zu bytes of arena", bytes);
    int rc = LLMC_OK;
    if (llmc_rt_session_init(&s, &p, memory, bytes, &e))
        rc = rt_error(err, "initializing a session", &e);
    else if (llmc_rt_session_run(&s, S, P, inputs, &e))
        rc = rt_error(err, "running", &e);
    for (uint32_t k = 0; rc == LLMC_OK && k < rt_plan_of(&p)->n_outputs; k++)
        rc = copy_output(&s, k, &outputs[k], err);
    for (uint32_t k = 0; rc != LLMC_OK && k < rt_plan_of(&p)->n_outputs; k++)
        llmc_eval_tensor_free(&outputs[k]);
    free(memory);
    return rc;
}

int llmc_evaluate_graph(const llmc_graph *g, uint32_t S, uint32_t P, uint32_t max_context,
                        const llmc_rt_tensor *inputs, llmc_eval_tensor *outputs, llmc_error *err)
{
    llmc_codegen_options opt = {.max_context = max_context};
    uint8_t *plan = NULL;
    size_t size = 0;
    for (int k = 0; k < g->n_outputs; k++)
        memset(&outputs[k], 0, sizeof outputs[k]);
    int rc = llmc_codegen_to_memory(g, &opt, &plan, &size, NULL, err);
    if (!rc)
        rc = run_plan(plan, size, S, P, inputs, outputs, err);
    free(plan);
    return rc;
}

/* A value of `sub` standing for value `v` of `g`; constants share g's bytes
 * (the one-node graph never outlives this call). */
static int mirror_value(llmc_graph *sub, const llmc_graph *g, int v)
{
    const llmc_value *src = &g->values[v];
    int id = llmc_graph_add_value(sub, src->name, src->dtype);
    if (id < 0)
        return -1;
    llmc_value *dst = &sub->values[id];
    dst->shape = src->shape;
    /* codegen reads symbolic contents (e.g. Slice bounds [P]) */
    dst->n_sym = src->n_sym;
    memcpy(dst->sym, src->sym, sizeof dst->sym);
    if (src->is_const) {
        dst->is_const = true;
        dst->konst = (llmc_const){.data = src->konst.data, .nbytes = src->konst.nbytes,
                                  .view = llmc_view_ref(src->konst.view)};
    }
    return id;
}

/* Appends to `sub` a copy of node `n` of `g` reading `ins`, writing `outs`
 * (ids in `sub`); -1 on OOM. */
static int copy_node(llmc_graph *sub, const llmc_node *n, const int *ins, const int *outs)
{
    int id = llmc_graph_add_node(sub, n->op_type, n->name, ins, n->n_inputs, outs, n->n_outputs);
    if (id < 0)
        return -1;
    sub->nodes[id].opset = n->opset;
    free(sub->nodes[id].domain);
    sub->nodes[id].domain = strdup(n->domain);
    if (!sub->nodes[id].domain)
        return -1;
    for (int a = 0; a < n->n_attrs; a++)
        if (llmc_node_add_attr(sub, id, &n->attrs[a]))
            return -1;
    return 0;
}

/* Builds `sub`: the constant inputs, a copy of the node, its outputs as
 * the graph outputs in node order. */
static int build_one_node_graph(llmc_graph *sub, const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    int ins[n->n_inputs + 1], outs[n->n_outputs + 1];
    llmc_graph_init(sub);
    sub->opset = g->opset;
    sub->outputs = malloc(sizeof(int) * ((size_t)n->n_outputs + 1));
    if (!sub->outputs)
        return -1;
    for (int k = 0; k < n->n_inputs; k++) {
        ins[k] = -1;
        for (int j = 0; j < k; j++)          /* Mul(x, x) reads one value */
            if (n->inputs[j] == n->inputs[k])
                ins[k] = ins[j];
        if (ins[k] < 0 && n->inputs[k] >= 0 && (ins[k] = mirror_value(sub, g, n->inputs[k])) < 0)
            return -1;
    }
    for (int k = 0; k < n->n_outputs; k++) {
        outs[k] = n->outputs[k] < 0 ? -1 : mirror_value(sub, g, n->outputs[k]);
        if (n->outputs[k] >= 0 && outs[k] < 0)
            return -1;
        if (outs[k] >= 0) {
            sub->values[outs[k]].is_graph_output = true;
            sub->outputs[sub->n_outputs++] = outs[k];
        }
    }
    return copy_node(sub, n, ins, outs);
}

int llmc_evaluate_node(const llmc_graph *g, int node, llmc_eval_tensor *outputs, llmc_error *err)
{
    const llmc_node *n = &g->nodes[node];
    llmc_graph sub;
    llmc_eval_tensor results[n->n_outputs + 1];
    int rc = LLMC_OK;
    if (build_one_node_graph(&sub, g, node))
        rc = llmc_fail(err, LLMC_E_NOMEM, "evaluation: out of memory");
    /* The one-node graph has constant shapes: S = P = 0 is a valid call. */
    if (!rc)
        rc = llmc_evaluate_graph(&sub, 0, 0, 1, NULL, results, err);
    for (int k = 0, r = 0; k < n->n_outputs; k++) {
        memset(&outputs[k], 0, sizeof outputs[k]);
        if (!rc && n->outputs[k] >= 0)
            outputs[k] = results[r++];
    }
    llmc_graph_free(&sub);
    return rc;
}

/* ---- one value as a function of the call position ---- */

/* The ancestors of one value, mirrored into a graph of their own. */
typedef struct {
    const llmc_graph *g;
    llmc_graph sub;
    int *map;               /* g value id -> sub value id, -1 if not mirrored */
    bool *needed;           /* per g node: an ancestor of the value */
    int *stack;             /* values still to visit */
    int n_stack;
} ancestry;

/* Visits the ancestors of `root`: mirrors every value, marks every node.
 * A graph input other than position_ids / attention_mask makes the value
 * depend on more than the position: LLMC_E_UNSUPPORTED naming it. */
static int collect_ancestors(ancestry *a, int root, llmc_error *err)
{
    const llmc_graph *g = a->g;
    a->stack[a->n_stack++] = root;
    while (a->n_stack > 0) {
        int v = a->stack[--a->n_stack];
        if (a->map[v] >= 0)
            continue;
        const llmc_value *val = &g->values[v];
        int layer;
        int role = val->is_graph_input ? llmc_io_role(val->name, 0, &layer) : -1;
        if (val->is_graph_input && !val->is_const && role != LLMC_ROLE_POSITION_IDS &&
            role != LLMC_ROLE_ATTENTION_MASK)
            return llmc_fail(err, LLMC_E_UNSUPPORTED, "depends on graph input '%s'", val->name);
        if (!val->is_graph_input && !val->is_const && val->producer < 0)
            return llmc_fail(err, LLMC_E_UNSUPPORTED, "value '%s' has no producer", val->name);
        if ((a->map[v] = mirror_value(&a->sub, g, v)) < 0)
            return llmc_fail(err, LLMC_E_NOMEM, "evaluation: out of memory");
        if (val->is_graph_input && !val->is_const) {
            a->sub.values[a->map[v]].is_graph_input = true;
            a->sub.inputs[a->sub.n_inputs++] = a->map[v];
        }
        if (val->is_const || val->is_graph_input || a->needed[val->producer])
            continue;
        const llmc_node *n = &g->nodes[val->producer];
        a->needed[val->producer] = true;
        for (int k = 0; k < n->n_outputs; k++)   /* siblings of a multi-output node */
            if (n->outputs[k] >= 0 && n->outputs[k] != v)
                a->stack[a->n_stack++] = n->outputs[k];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0)
                a->stack[a->n_stack++] = n->inputs[k];
    }
    return LLMC_OK;
}

/* Copies the marked nodes into `sub` in topological order. */
static int copy_needed_nodes(ancestry *a, llmc_error *err)
{
    const llmc_graph *g = a->g;
    int *order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    int cycle, n_order = order ? llmc_graph_topo_order(g, order, &cycle) : -1;
    int rc = order ? LLMC_OK : llmc_fail(err, LLMC_E_NOMEM, "evaluation: out of memory");
    if (!rc && n_order < 0)
        rc = llmc_fail(err, LLMC_E_INTERNAL, "evaluation: the graph has a cycle");
    for (int i = 0; !rc && i < n_order; i++) {
        const llmc_node *n = &g->nodes[order[i]];
        if (!a->needed[order[i]])
            continue;
        int ins[n->n_inputs + 1], outs[n->n_outputs + 1];
        for (int k = 0; k < n->n_inputs; k++)
            ins[k] = n->inputs[k] < 0 ? -1 : a->map[n->inputs[k]];
        for (int k = 0; k < n->n_outputs; k++)
            outs[k] = n->outputs[k] < 0 ? -1 : a->map[n->outputs[k]];
        if (copy_node(&a->sub, n, ins, outs))
            rc = llmc_fail(err, LLMC_E_NOMEM, "evaluation: out of memory");
    }
    free(order);
    return rc;
}

/* position_ids = P .. P+S-1 along the last axis; attention_mask = ones. */
static int64_t role_element(int role, int64_t i, int64_t last_dim, uint32_t P)
{
    return role == LLMC_ROLE_POSITION_IDS ? (int64_t)P + i % last_dim : 1;
}

/* The bound contents of role input `v` of `sub` at (S, P), malloc'ed. */
static int bind_role_input(const llmc_graph *sub, int v, uint32_t S, uint32_t P, llmc_rt_tensor *t,
                           llmc_error *err)
{
    const llmc_value *val = &sub->values[v];
    int layer, role = llmc_io_role(val->name, 0, &layer);
    int64_t n = 1;
    t->dtype = val->dtype;
    t->rank = val->shape.rank;
    for (int i = 0; i < t->rank; i++) {
        llmc_affine d = val->shape.dims[i];
        t->dims[i] = d.c + d.s * (int64_t)S + d.p * (int64_t)P;
        n *= t->dims[i];
    }
    int64_t last = t->rank > 0 && t->dims[t->rank - 1] > 0 ? t->dims[t->rank - 1] : 1;
    if (val->dtype != LLMC_DT_INT64 && val->dtype != LLMC_DT_INT32 && val->dtype != LLMC_DT_FLOAT)
        return llmc_fail(err, LLMC_E_UNSUPPORTED, "input '%s' has dtype %s", val->name,
                         llmc_dtype_name(val->dtype));
    t->data = malloc((size_t)(n > 0 ? n : 1) * llmc_dtype_size(val->dtype));
    if (!t->data)
        return llmc_fail(err, LLMC_E_NOMEM, "evaluation: out of memory");
    for (int64_t i = 0; i < n; i++) {
        int64_t x = role_element(role, i, last, P);
        if (val->dtype == LLMC_DT_INT64)
            ((int64_t *)t->data)[i] = x;
        else if (val->dtype == LLMC_DT_INT32)
            ((int32_t *)t->data)[i] = (int32_t)x;
        else
            ((float *)t->data)[i] = (float)x;
    }
    return LLMC_OK;
}

static int run_ancestry(ancestry *a, uint32_t S, uint32_t P, llmc_eval_tensor *out, llmc_error *err)
{
    int n_in = a->sub.n_inputs;
    llmc_rt_tensor inputs[n_in + 1];
    int rc = LLMC_OK, bound = 0;
    for (; !rc && bound < n_in; bound++)
        rc = bind_role_input(&a->sub, a->sub.inputs[bound], S, P, &inputs[bound], err);
    if (!rc)
        rc = llmc_evaluate_graph(&a->sub, S, P, S + P, inputs, out, err);
    for (int i = 0; i < bound; i++)
        free(inputs[i].data);
    return rc;
}

/* Node inputs plus outputs over the graph: a bound on stack pushes. */
static size_t count_edges(const llmc_graph *g)
{
    size_t n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += (size_t)g->nodes[i].n_inputs + (size_t)g->nodes[i].n_outputs;
    return n;
}

int llmc_evaluate_position_value(const llmc_graph *g, int value, uint32_t S, uint32_t P,
                                 llmc_eval_tensor *out, llmc_error *err)
{
    ancestry a = {.g = g};
    size_t nv = (size_t)g->n_values + 1;
    llmc_graph_init(&a.sub);
    a.sub.opset = g->opset;
    a.map = malloc(sizeof(int) * nv);
    a.needed = calloc((size_t)g->n_nodes + 1, sizeof(bool));
    /* pushes: the root, then per visited node its inputs and outputs */
    a.stack = malloc(sizeof(int) * (nv + count_edges(g)));
    a.sub.inputs = malloc(sizeof(int) * ((size_t)g->n_inputs + 1));
    a.sub.outputs = malloc(sizeof(int));
    memset(out, 0, sizeof *out);
    int rc = LLMC_OK;
    if (!a.map || !a.needed || !a.stack || !a.sub.inputs || !a.sub.outputs)
        rc = llmc_fail(err, LLMC_E_NOMEM, "evaluation: out of memory");
    for (size_t i = 0; !rc && i < nv; i++)
        a.map[i] = -1;
    if (!rc && !(rc = collect_ancestors(&a, value, err)) && !(rc = copy_needed_nodes(&a, err))) {
        a.sub.values[a.map[value]].is_graph_output = true;
        a.sub.outputs[a.sub.n_outputs++] = a.map[value];
        rc = run_ancestry(&a, S, P, out, err);
    }
    free(a.map);
    free(a.needed);
    free(a.stack);
    llmc_graph_free(&a.sub);
    return rc;
}

const llmc_evaluator llmc_runtime_evaluator = {
    .node = llmc_evaluate_node,
    .position_value = llmc_evaluate_position_value,
};
