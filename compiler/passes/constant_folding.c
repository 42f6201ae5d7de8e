/* constant-folding (paper §III.C): precomputes what does not depend on the
 * call, and lets dead-code remove Shape -> Gather -> Concat chains.
 *
 * Repeated until nothing changes, with shape inference refreshed first:
 *  (a) a value whose symbolic contents are all constants becomes a constant;
 *  (b) a Reshape whose target is known symbolically gets a constant target:
 *      one symbolic dim becomes -1 (the paper's (1,-1,16,2,64)); with more,
 *      those equal to the input dim at the same axis become 0 first;
 *  (c) a value whose contents are known but symbolic (e.g. [P, P+S]) and
 *      that something other than another foldable shape computation reads
 *      is produced by an llmc.Symbols node instead (INTS "values" = c, s, p
 *      per element, INTS "shape" = its dims), which codegen lowers to the
 *      plan's Symbols op;
 *  (d) a node whose inputs are all constants is evaluated on the runtime's
 *      kernels (the context's evaluator) when each output is at most 16 MiB and either
 *      at most 4x the bytes of its inputs (so an Expand of a scalar to a
 *      big tensor stays an Expand) or at most 256 bytes, however small its
 *      inputs (ConstantOfShape of an empty shape, transformers'
 *      `torch.full([], x)`, makes a 4-byte scalar from 0 input bytes);
 *      Constant nodes become constants directly;
 *  (e) an If (the importer's form, both branches inlined: onnx/onnx_if.h)
 *      whose condition shape inference decided (a comparison of symbolic
 *      lengths folded over the plan's bounds) is replaced by the selected
 *      branch's outputs: its readers read them, and dead-code drops the
 *      other branch.
 * Folded values keep their names and ids: the old producer merely stops
 * defining them and dead-code erases it. */
#include <stdlib.h>
#include <string.h>

#include "fusion_match.h"
#include "pass.h"
#include "pass_list.h"
#include "shape_inference.h"
#include "symbolic.h"

#define FOLD_MAX_OUTPUT_BYTES (16u << 20)
#define FOLD_MAX_GROWTH 4
#define FOLD_ALWAYS_BYTES 256u

typedef struct {
    llmc_graph *g;
    const llmc_pass_ctx *ctx;
    llmc_error *err;
    bool *not_evaluable;    /* per node: evaluation was tried and declined */
    int n_tracked;          /* entries in not_evaluable */
    bool changed;
} folder;

static void explain(const folder *f, int node, const char *why)
{
    const llmc_node *n = &f->g->nodes[node];
    if (f->ctx && f->ctx->explain && f->ctx->log)
        fprintf(f->ctx->log, "constant-folding: node '%s' (#%d, %s) not folded: %s\n", n->name, node,
                n->op_type, why);
}

static bool defines(const llmc_graph *g, int node, int v)
{
    return v >= 0 && g->values[v].producer == node;
}

static bool is_symbols_node(const llmc_node *n)
{
    return strcmp(n->domain, "llmc") == 0 && strcmp(n->op_type, "Symbols") == 0;
}

static bool is_default_domain(const llmc_node *n)
{
    return n->domain[0] == 0 || strcmp(n->domain, "ai.onnx") == 0;
}

/* ---- (a) fully known contents ---- */

static bool sym_all_const(const llmc_value *v)
{
    int64_t numel;
    if (v->n_sym <= 0 || !llmc_shape_numel_const(&v->shape, &numel) || numel != v->n_sym)
        return false;
    for (int i = 0; i < v->n_sym; i++)
        if (!llmc_aff_is_const(v->sym[i]))
            return false;
    return true;
}

static int fold_known_value(folder *f, int v)
{
    llmc_value *val = &f->g->values[v];
    union {
        int64_t i64[LLMC_MAX_SYM_ELEMS];
        int32_t i32[LLMC_MAX_SYM_ELEMS];
        uint8_t u8[LLMC_MAX_SYM_ELEMS];
    } bytes;
    size_t elem = llmc_dtype_size(val->dtype);
    if (val->is_const || !sym_all_const(val))
        return LLMC_OK;
    for (int i = 0; i < val->n_sym; i++) {
        if (val->dtype == LLMC_DT_INT64)
            bytes.i64[i] = val->sym[i].c;
        else if (val->dtype == LLMC_DT_INT32)
            bytes.i32[i] = (int32_t)val->sym[i].c;
        else
            bytes.u8[i] = val->sym[i].c != 0;
    }
    llmc_shape shape = val->shape;
    if (llmc_graph_set_const(f->g, v, val->dtype, &shape, &bytes, elem * (size_t)val->n_sym))
        return llmc_fail(f->err, LLMC_E_NOMEM, "constant-folding: out of memory");
    f->changed = true;
    return LLMC_OK;
}

/* ---- (b) Reshape targets ---- */

static int count_symbolic(const llmc_affine *t, int n, int *last, bool *has_minus_one)
{
    int count = 0;
    *has_minus_one = false;
    for (int i = 0; i < n; i++) {
        if (!llmc_aff_is_const(t[i])) {
            count++;
            *last = i;
        }
        *has_minus_one |= llmc_aff_eq(t[i], llmc_aff_const(-1));
    }
    return count;
}

/* Rewrites symbolic target dims to 0 / -1; false when some must stay. */
static bool constant_target(const llmc_shape *in, bool allowzero, llmc_affine *t, int n)
{
    int last = -1;
    bool minus_one;
    if (count_symbolic(t, n, &last, &minus_one) > 1) {
        for (int i = 0; i < n && !allowzero; i++)
            if (!llmc_aff_is_const(t[i]) && i < in->rank && llmc_aff_eq(t[i], in->dims[i]))
                t[i] = llmc_aff_const(0);
    }
    int left = count_symbolic(t, n, &last, &minus_one);
    if (left == 1 && !minus_one)
        t[last] = llmc_aff_const(-1);
    return left == 0 || (left == 1 && !minus_one);
}

static int fold_reshape_target(folder *f, int node)
{
    llmc_graph *g = f->g;
    const llmc_node *n = &g->nodes[node];
    llmc_affine t[LLMC_MAX_SYM_ELEMS];
    int64_t ints[LLMC_MAX_SYM_ELEMS];
    int target = n->n_inputs > 1 ? n->inputs[1] : -1;
    int out = n->n_outputs > 0 ? n->outputs[0] : -1;
    if (strcmp(n->op_type, "Reshape") || !is_default_domain(n) || target < 0 || g->values[target].is_const ||
        !defines(g, node, out))
        return LLMC_OK;
    int cnt = llmc_value_ints(g, target, t, LLMC_MAX_SYM_ELEMS);
    const llmc_shape *in = &g->values[n->inputs[0]].shape;
    bool allowzero = n->opset >= 14 && llmc_node_attr_int(g, node, "allowzero", 0) != 0;
    llmc_shape check;
    char why[512];
    if (cnt <= 0 || !constant_target(in, allowzero, t, cnt) ||
        llmc_reshape_shape(in, t, cnt, allowzero, &check, why, sizeof why) != LLMC_OK ||
        !llmc_shape_eq(&check, &g->values[out].shape))
        return LLMC_OK;   /* (c) gives the target to a Symbols node instead */
    for (int i = 0; i < cnt; i++)
        ints[i] = t[i].c;
    char *name = llmc_graph_unique_name(g, g->values[target].name, ".const");
    int v = name ? llmc_graph_add_value(g, name, LLMC_DT_INT64) : -1;
    llmc_shape shape = {.rank = 1, .dims = {llmc_aff_const(cnt)}};
    free(name);
    if (v < 0 || llmc_graph_set_const(g, v, LLMC_DT_INT64, &shape, ints, sizeof ints[0] * (size_t)cnt))
        return llmc_fail(f->err, LLMC_E_NOMEM, "constant-folding: out of memory");
    g->nodes[node].inputs[1] = v;
    f->changed = true;
    return LLMC_OK;
}

/* ---- (d) evaluation of constant nodes ---- */

static uint64_t value_bytes(const llmc_value *v)
{
    int64_t numel;
    if (!llmc_shape_numel_const(&v->shape, &numel))
        return UINT64_MAX;
    return (uint64_t)numel * llmc_dtype_size(v->dtype);
}

static bool inputs_all_const(const llmc_graph *g, const llmc_node *n, uint64_t *bytes)
{
    int present = 0;
    *bytes = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        if (n->inputs[k] < 0)
            continue;
        const llmc_value *v = &g->values[n->inputs[k]];
        /* An initializer listed as a graph input may be overridden. */
        if (!v->is_const || v->is_graph_input)
            return false;
        present++;
        *bytes += v->konst.nbytes;
    }
    return present > 0;
}

/* True when node `node` may be evaluated; says why not otherwise. */
static bool worth_evaluating(const folder *f, int node)
{
    const llmc_graph *g = f->g;
    const llmc_node *n = &g->nodes[node];
    uint64_t in_bytes;
    bool pending = false;
    if (!is_default_domain(n) || f->not_evaluable[node] || !inputs_all_const(g, n, &in_bytes))
        return false;
    /* a weight's DequantizeLinear stays: linear fusion keeps the file's
     * quantization (quant_canonical.c left only those) */
    if (strcmp(n->op_type, "DequantizeLinear") == 0)
        return false;
    for (int k = 0; k < n->n_outputs; k++) {
        int v = n->outputs[k];
        if (!defines(g, node, v))
            continue;
        uint64_t b = value_bytes(&g->values[v]);
        if (b > FOLD_MAX_OUTPUT_BYTES || (b > FOLD_ALWAYS_BYTES && b > FOLD_MAX_GROWTH * in_bytes)) {
            explain(f, node, "output larger than 16 MiB, or larger than 256 bytes and 4x its inputs");
            return false;
        }
        pending = true;
    }
    return pending;
}

static int store_result(folder *f, int node, int v, const llmc_eval_tensor *r)
{
    llmc_value *val = &f->g->values[v];
    if (r->dtype != val->dtype || !llmc_shape_eq(&r->shape, &val->shape))
        return llmc_fail(f->err, LLMC_E_INTERNAL,
                         "node '%s' (#%d, %s): evaluated output '%s' disagrees with shape inference",
                         f->g->nodes[node].name, node, f->g->nodes[node].op_type, val->name);
    llmc_shape shape = r->shape;
    if (llmc_graph_set_const(f->g, v, r->dtype, &shape, r->data, r->nbytes))
        return llmc_fail(f->err, LLMC_E_NOMEM, "constant-folding: out of memory");
    return LLMC_OK;
}

static int evaluate_node(folder *f, int node)
{
    const llmc_node *n = &f->g->nodes[node];
    const llmc_evaluator *ev = llmc_pass_evaluator(f->ctx, "constant-folding", f->err);
    if (!ev)
        return LLMC_E_INTERNAL;
    llmc_eval_tensor *res = calloc((size_t)n->n_outputs + 1, sizeof *res);
    llmc_error local = {0};
    if (!res)
        return llmc_fail(f->err, LLMC_E_NOMEM, "constant-folding: out of memory");
    int rc = ev->node(f->g, node, res, &local);
    if (rc == LLMC_E_UNSUPPORTED) {
        /* Not lowerable on its own (e.g. a dtype the runtime lacks): codegen
         * decides about the node in the real graph. */
        f->not_evaluable[node] = true;
        explain(f, node, local.msg);
        rc = LLMC_OK;
    } else if (rc) {
        rc = llmc_fail(f->err, rc, "node '%s' (#%d, %s): constant folding: %s", n->name, node, n->op_type,
                       local.msg);
    } else {
        for (int k = 0; k < n->n_outputs && !rc; k++)
            if (defines(f->g, node, n->outputs[k]))
                rc = store_result(f, node, n->outputs[k], &res[k]);
        f->changed = true;
    }
    for (int k = 0; k < n->n_outputs; k++)
        llmc_eval_tensor_free(&res[k]);
    free(res);
    return rc;
}

/* Constant node: the attribute's bytes, shape and dtype as inferred. */
static int fold_constant_node(folder *f, int node)
{
    const llmc_node *n = &f->g->nodes[node];
    int v = n->n_outputs > 0 ? n->outputs[0] : -1;
    if (n->n_attrs != 1 || !defines(f->g, node, v))
        return LLMC_OK;
    const llmc_attr *a = &n->attrs[0];
    const void *data = a->t_data.data;
    uint64_t nbytes = a->t_data.nbytes;
    if (a->type == LLMC_ATTR_FLOAT || a->type == LLMC_ATTR_INT) {
        data = a->type == LLMC_ATTR_FLOAT ? (const void *)&a->f : (const void *)&a->i;
        nbytes = a->type == LLMC_ATTR_FLOAT ? sizeof a->f : sizeof a->i;
    } else if (a->type == LLMC_ATTR_FLOATS || a->type == LLMC_ATTR_INTS) {
        data = a->type == LLMC_ATTR_FLOATS ? (const void *)a->floats : (const void *)a->ints;
        nbytes = a->type == LLMC_ATTR_FLOATS ? sizeof(float) * (size_t)a->n_floats
                                             : sizeof(int64_t) * (size_t)a->n_ints;
    }
    llmc_value *val = &f->g->values[v];
    if (nbytes != value_bytes(val))
        return llmc_fail(f->err, LLMC_E_INPUT, "node '%s' (#%d, Constant): %llu bytes for %s %s",
                         n->name, node, (unsigned long long)nbytes, llmc_dtype_name(val->dtype), val->name);
    llmc_shape shape = val->shape;
    if (llmc_graph_set_const(f->g, v, val->dtype, &shape, data, nbytes))
        return llmc_fail(f->err, LLMC_E_NOMEM, "constant-folding: out of memory");
    f->changed = true;
    return LLMC_OK;
}

/* ---- (e) If ---- */

static int fold_if(folder *f, int node)
{
    llmc_graph *g = f->g;
    const llmc_node *n = &g->nodes[node];
    llmc_affine cond;
    /* Shape inference refuses an undecided condition before this runs. */
    if (llmc_value_ints(g, n->inputs[0], &cond, 1) != 1 || !llmc_aff_is_const(cond))
        return LLMC_OK;
    int k = n->n_outputs, from = cond.c ? 1 : 1 + k;
    for (int j = 0; j < k; j++)
        if (defines(g, node, n->outputs[j]) && g->values[n->outputs[j]].is_graph_output)
            return LLMC_OK;     /* its name binds a role: lowering refuses it */
    for (int j = 0; j < k; j++)
        if (n->outputs[j] >= 0)
            llmc_graph_replace_value(g, n->outputs[j], n->inputs[from + j]);
    llmc_graph_erase_node(g, node);
    f->changed = true;
    return LLMC_OK;
}

static int fold_node(folder *f, int node)
{
    const llmc_node *n = &f->g->nodes[node];
    int rc = LLMC_OK;
    if (is_symbols_node(n))
        return LLMC_OK;
    if (llmc_is_onnx_op(n, "If"))
        return fold_if(f, node);
    if (is_default_domain(n) && strcmp(n->op_type, "Constant") == 0)
        return fold_constant_node(f, node);
    for (int k = 0; k < n->n_outputs && !rc; k++)
        if (defines(f->g, node, n->outputs[k]))
            rc = fold_known_value(f, n->outputs[k]);
    if (!rc && worth_evaluating(f, node))
        rc = evaluate_node(f, node);
    return rc ? rc : fold_reshape_target(f, node);
}

/* ---- (c) symbolic contents -> llmc.Symbols ---- */

/* A consumer that is itself a foldable shape computation: every output it
 * defines has known contents, so it is replaced in turn and stops reading. */
static bool absorbs(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    bool any = false;
    for (int k = 0; k < n->n_outputs; k++) {
        int v = n->outputs[k];
        if (!defines(g, node, v))
            continue;
        if (g->values[v].n_sym <= 0 || g->values[v].dtype != LLMC_DT_INT64)
            return false;
        any = true;
    }
    return any && !is_symbols_node(n);
}

static bool defines_any(const llmc_graph *g, int node)
{
    for (int k = 0; k < g->nodes[node].n_outputs; k++)
        if (defines(g, node, g->nodes[node].outputs[k]))
            return true;
    return false;
}

/* Marks values read by something that will stay: a graph output or a
 * consumer that does not absorb them.  A node that defines nothing any more
 * (folded away, waiting for dead-code) reads nothing. */
static bool *values_needing_symbols(const llmc_graph *g)
{
    bool *need = calloc((size_t)g->n_values + 1, sizeof(bool));
    if (!need)
        return NULL;
    for (int k = 0; k < g->n_outputs; k++)
        need[g->outputs[k]] = true;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead || absorbs(g, i) || !defines_any(g, i))
            continue;
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0)
                need[g->nodes[i].inputs[k]] = true;
    }
    return need;
}

static int make_symbols_node(folder *f, int v)
{
    llmc_graph *g = f->g;
    const llmc_value *val = &g->values[v];
    int64_t values[3 * LLMC_MAX_SYM_ELEMS], dims[LLMC_MAX_RANK];
    for (int i = 0; i < val->n_sym; i++) {
        values[3 * i] = val->sym[i].c;
        values[3 * i + 1] = val->sym[i].s;
        values[3 * i + 2] = val->sym[i].p;
    }
    for (int i = 0; i < val->shape.rank; i++)
        dims[i] = val->shape.dims[i].c;
    char *name = llmc_graph_unique_name(g, val->name, "/Symbols");
    int node = name ? llmc_graph_add_llmc_node(g, "Symbols", name, NULL, 0, &v, 1) : -1;
    free(name);
    if (node < 0 || llmc_node_set_ints(g, node, "values", values, 3 * g->values[v].n_sym) ||
        llmc_node_set_ints(g, node, "shape", dims, g->values[v].shape.rank))
        return llmc_fail(f->err, LLMC_E_NOMEM, "constant-folding: out of memory");
    f->changed = true;
    return LLMC_OK;
}

static int replace_symbolic_values(folder *f)
{
    llmc_graph *g = f->g;
    bool *need = values_needing_symbols(g);
    int rc = need ? LLMC_OK : llmc_fail(f->err, LLMC_E_NOMEM, "constant-folding: out of memory");
    for (int v = 0; need && v < g->n_values && !rc; v++) {
        const llmc_value *val = &g->values[v];
        int p = val->producer;
        /* Only int64: that is what the plan's Symbols op produces. */
        if (need[v] && p >= 0 && !g->nodes[p].dead && !is_symbols_node(&g->nodes[p]) && val->n_sym > 0 &&
            val->dtype == LLMC_DT_INT64 && !val->is_const)
            rc = make_symbols_node(f, v);
    }
    free(need);
    return rc;
}

/* ---- driver ---- */

static int sweep(folder *f)
{
    llmc_graph *g = f->g;
    int *order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    if (!order)
        return llmc_fail(f->err, LLMC_E_NOMEM, "constant-folding: out of memory");
    int n = llmc_graph_topo_order(g, order, NULL), rc = LLMC_OK;
    if (n < 0)
        rc = llmc_fail(f->err, LLMC_E_INPUT, "constant-folding: graph has a cycle");
    /* Topological order: a chain of constant nodes folds in one sweep. */
    for (int i = 0; i < n && !rc; i++)
        if (!g->nodes[order[i]].dead)
            rc = fold_node(f, order[i]);
    free(order);
    return rc ? rc : replace_symbolic_values(f);
}

/* Grows not_evaluable with the node array (sweeps add Symbols nodes). */
static int track_nodes(folder *f)
{
    bool *grown = realloc(f->not_evaluable, sizeof(bool) * ((size_t)f->g->n_nodes + 1));
    if (!grown)
        return llmc_fail(f->err, LLMC_E_NOMEM, "constant-folding: out of memory");
    memset(grown + f->n_tracked, 0, sizeof(bool) * (size_t)(f->g->n_nodes + 1 - f->n_tracked));
    f->not_evaluable = grown;
    f->n_tracked = f->g->n_nodes;
    return LLMC_OK;
}

static int run_constant_folding(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    folder f = {.g = g, .ctx = ctx, .err = err};
    int rc;
    do {
        f.changed = false;
        rc = track_nodes(&f);
        if (!rc)
            rc = llmc_pass_shape_inference.run(g, ctx, err);
        if (!rc)
            rc = sweep(&f);
    } while (!rc && f.changed);
    free(f.not_evaluable);
    return rc;
}

const llmc_pass llmc_pass_constant_folding = {"constant-folding", run_constant_folding};
