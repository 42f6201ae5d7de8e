/* Evaluation on the runtime's kernels (see evaluate.h). */
#include "evaluate.h"

#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"

void llmc_eval_tensor_free(llmc_eval_tensor *t)
{
    free(t->data);
    memset(t, 0, sizeof *t);
}

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
    for (uint32_t k = 0; rc == LLMC_OK && k < p.n_outputs; k++)
        rc = copy_output(&s, k, &outputs[k], err);
    for (uint32_t k = 0; rc != LLMC_OK && k < p.n_outputs; k++)
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
    if (src->is_const) {
        dst->is_const = true;
        dst->konst = (llmc_const){src->konst.data, src->konst.nbytes, false};
    }
    return id;
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
