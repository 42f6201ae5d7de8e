/* Inlining ONNX If nodes (see onnx_if.h). */
#include "onnx_if.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/io_roles.h"

/* One If node being inlined. */
typedef struct {
    Onnx__GraphProto *gp;
    const char *path;
    llmc_error *err;
    size_t idx;                         /* the If's index in gp->node */
    Onnx__NodeProto *node;
    Onnx__GraphProto *branch[2];        /* then_branch, else_branch */
} if_ctx;

static const char *const branch_names[2] = {"then_branch", "else_branch"};

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

static bool same(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* "'model.onnx': node 'optimum::if' (#0, If): <message>" */
static int if_fail(const if_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int if_fail(const if_ctx *c, int code, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return llmc_fail(c->err, code, "'%.300s': node " LLMC_NAME_FMT " (#%zu, If): %s", c->path,
                     or_empty(c->node->name), c->idx, msg);
}

static int oom(const if_ctx *c)
{
    return if_fail(c, LLMC_E_NOMEM, "out of memory inlining the branch");
}

static bool is_if(const Onnx__NodeProto *n)
{
    bool default_domain = !n->domain || !*n->domain || strcmp(n->domain, "ai.onnx") == 0;
    return default_domain && same(n->op_type, "If");
}

/* An If still holding its branches: the importer's form of an If whose
 * branches are both inlined (ONNX If, no attributes, 1 + 2k inputs) is done. */
static bool pending_if(const Onnx__NodeProto *n)
{
    return is_if(n) && (n->n_attribute > 0 || n->n_input <= 1);
}

static bool has_subgraph(const Onnx__NodeProto *n, const char **attr)
{
    for (size_t k = 0; k < n->n_attribute; k++) {
        const Onnx__AttributeProto *a = n->attribute[k];
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH ||
            a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS || a->g || a->n_graphs) {
            *attr = or_empty(a->name);
            return true;
        }
    }
    return false;
}

static int find_branches(if_ctx *c)
{
    for (size_t k = 0; k < c->node->n_attribute; k++) {
        const Onnx__AttributeProto *a = c->node->attribute[k];
        for (int b = 0; b < 2; b++)
            if (same(a->name, branch_names[b]))
                c->branch[b] = a->g;
    }
    for (int b = 0; b < 2; b++)
        if (!c->branch[b])
            return if_fail(c, LLMC_E_INPUT, "it has no %s graph", branch_names[b]);
    if (c->node->n_input != 1 || !*c->node->input[0])
        return if_fail(c, LLMC_E_INPUT, "it has %zu inputs; If takes one, the condition", c->node->n_input);
    return LLMC_OK;
}

/* ---- the branches' outputs must agree ---- */

/* A tensor's type: "float[batch,4]", "float[?]" (a dim with no value),
 * "float" (no shape). */
static const char *describe_type(const Onnx__ValueInfoProto *vi, char *buf, size_t size)
{
    const Onnx__TypeProto__Tensor *tt = llmc_onnx_tensor_type(vi);
    size_t used = (size_t)snprintf(buf, size, "%s", llmc_dtype_name(tt->elem_type));
    for (size_t i = 0; tt->shape && i < tt->shape->n_dim && used < size; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        const char *open = i ? "," : "[";
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            used += (size_t)snprintf(buf + used, size - used, "%s%lld", open, (long long)d->dim_value);
        else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            used += (size_t)snprintf(buf + used, size - used, "%s%.60s", open, d->dim_param);
        else
            used += (size_t)snprintf(buf + used, size - used, "%s?", open);
    }
    if (tt->shape && used < size)
        snprintf(buf + used, size - used, "%s", tt->shape->n_dim ? "]" : "[]");
    return buf;
}

static bool same_dim(const Onnx__TensorShapeProto__Dimension *a, const Onnx__TensorShapeProto__Dimension *b)
{
    if (a->value_case != b->value_case)
        return false;
    if (a->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
        return a->dim_value == b->dim_value;
    return a->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ||
           same(a->dim_param, b->dim_param);
}

static bool same_shape(const Onnx__TensorShapeProto *a, const Onnx__TensorShapeProto *b)
{
    if (!a || !b)
        return !a && !b;
    if (a->n_dim != b->n_dim)
        return false;
    for (size_t i = 0; i < a->n_dim; i++)
        if (!same_dim(a->dim[i], b->dim[i]))
            return false;
    return true;
}

static int check_output(const if_ctx *c, size_t k, bool shapes)
{
    const Onnx__ValueInfoProto *o[2] = {c->branch[0]->output[k], c->branch[1]->output[k]};
    const Onnx__TypeProto__Tensor *t[2] = {llmc_onnx_tensor_type(o[0]), llmc_onnx_tensor_type(o[1])};
    for (int b = 0; b < 2; b++)
        if (!t[b])
            return if_fail(c, LLMC_E_UNSUPPORTED, "output %zu " LLMC_NAME_FMT " of %s is not a tensor", k,
                           or_empty(c->node->output[k]), branch_names[b]);
    const char *what = NULL;
    if (t[0]->elem_type != t[1]->elem_type)
        what = "element types";
    else if (shapes && !same_shape(t[0]->shape, t[1]->shape))
        what = "shapes";
    if (!what)
        return LLMC_OK;
    char a[256], b[256];
    return if_fail(c, LLMC_E_UNSUPPORTED,
                   "an If with branch outputs of different %s: output %zu " LLMC_NAME_FMT
                   " is %s in then_branch and %s in else_branch",
                   what, k, or_empty(c->node->output[k]), describe_type(o[0], a, sizeof a),
                   describe_type(o[1], b, sizeof b));
}

/* Output counts and element types agree; shapes too unless both branches
 * are kept (`shapes` false: the condition, decided later, picks one). */
static int check_outputs(const if_ctx *c, bool shapes)
{
    size_t n_then = c->branch[0]->n_output, n_else = c->branch[1]->n_output;
    if (n_then != n_else || n_then != c->node->n_output)
        return if_fail(c, LLMC_E_UNSUPPORTED,
                       "branches with different output counts: then_branch has %zu, else_branch %zu "
                       "and the If %zu",
                       n_then, n_else, c->node->n_output);
    for (size_t k = 0; k < n_then; k++) {
        for (int b = 0; b < 2; b++)
            if (!c->branch[b]->output[k]->name || !*c->branch[b]->output[k]->name)
                return if_fail(c, LLMC_E_INPUT, "output %zu of %s has no name", k, branch_names[b]);
        int rc = check_output(c, k, shapes);
        if (rc)
            return rc;
    }
    return LLMC_OK;
}

/* ---- which branch: a constant condition, or the branch reading the past ---- */

static const Onnx__TensorProto *initializer_named(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_initializer; i++)
        if (same(g->initializer[i]->name, name))
            return g->initializer[i];
    return NULL;
}

static const Onnx__ValueInfoProto *input_named(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_input; i++)
        if (same(g->input[i]->name, name))
            return g->input[i];
    return NULL;
}

/* The node of `g` writing `name`, or NULL. */
static const Onnx__NodeProto *producer(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t k = 0; k < g->node[i]->n_output; k++)
            if (same(g->node[i]->output[k], name))
                return g->node[i];
    return NULL;
}

/* The tensor of a Constant node's `value` attribute, or NULL. */
static const Onnx__TensorProto *constant_value(const Onnx__NodeProto *n)
{
    if (!n || !same(n->op_type, "Constant"))
        return NULL;
    for (size_t k = 0; k < n->n_attribute; k++)
        if (same(n->attribute[k]->name, "value"))
            return n->attribute[k]->t;
    return NULL;
}

static int constant_condition(const if_ctx *c, const Onnx__TensorProto *t, bool *value)
{
    char what[512];
    snprintf(what, sizeof what, "the condition " LLMC_NAME_FMT, c->node->input[0]);
    llmc_onnx_tensor v;
    int rc = llmc_onnx_tensor_decode(t, what, NULL, &v, c->err);
    if (rc)
        return rc;
    bool one = v.dtype == LLMC_DT_BOOL && v.data.nbytes == 1;
    *value = one && *(const uint8_t *)v.data.data;
    if (v.data.owned)
        free((void *)v.data.data);
    if (!one)
        return if_fail(c, LLMC_E_UNSUPPORTED, "%s is a constant but not one bool", what);
    return LLMC_OK;
}

static bool is_past_input(const Onnx__GraphProto *gp, const char *name)
{
    int layer, role = llmc_io_role(name, 0, &layer);
    return (role == LLMC_ROLE_PAST_KEY || role == LLMC_ROLE_PAST_VALUE) && input_named(gp, name) &&
           !initializer_named(gp, name);
}

/* Does the branch read a past key/value graph input (in a node, or as an
 * output)? */
static bool reads_past(const Onnx__GraphProto *gp, const Onnx__GraphProto *b)
{
    for (size_t i = 0; i < b->n_node; i++)
        for (size_t k = 0; k < b->node[i]->n_input; k++)
            if (is_past_input(gp, b->node[i]->input[k]))
                return true;
    for (size_t k = 0; k < b->n_output; k++)
        if (is_past_input(gp, b->output[k]->name))
            return true;
    return false;
}

/* A bool scalar, or a bool of shape [1] (optimum's use_cache_branch). */
static bool is_bool_scalar(const Onnx__ValueInfoProto *vi)
{
    const Onnx__TypeProto__Tensor *tt = llmc_onnx_tensor_type(vi);
    if (!tt || tt->elem_type != LLMC_DT_BOOL || !tt->shape)
        return false;
    const Onnx__TensorShapeProto *s = tt->shape;
    return s->n_dim == 0 || (s->n_dim == 1 && s->dim[0]->value_case ==
                             ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && s->dim[0]->dim_value == 1);
}

/* The condition is a graph input: the branch that reads the past key/values. */
static int input_condition(const if_ctx *c, const Onnx__ValueInfoProto *vi, int *chosen, char *why, size_t size)
{
    const char *cond = c->node->input[0];
    if (!is_bool_scalar(vi))
        return if_fail(c, LLMC_E_UNSUPPORTED, "the condition, graph input " LLMC_NAME_FMT ", is not a bool scalar",
                       cond);
    bool past[2] = {reads_past(c->gp, c->branch[0]), reads_past(c->gp, c->branch[1])};
    if (past[0] == past[1])
        return if_fail(c, LLMC_E_UNSUPPORTED,
                       "the condition is graph input " LLMC_NAME_FMT " and %s branch reads the past key/values: "
                       "llmc inlines an If on a constant, or on an input that selects the branch reading the past "
                       "(optimum's use_cache_branch)",
                       cond, past[0] ? "each" : "neither");
    *chosen = past[0] ? 0 : 1;
    snprintf(why, size, "reads the past key/values; " LLMC_NAME_FMT " is constant for a plan whose runtime owns "
             "the KV cache, graph input dropped", cond);
    return LLMC_OK;
}

/* choose_branch's answer for a condition computed in the graph. */
#define BOTH_BRANCHES (-1)

static int choose_branch(const if_ctx *c, int *chosen, char *why, size_t size)
{
    const char *cond = c->node->input[0];
    const Onnx__TensorProto *t = initializer_named(c->gp, cond);
    const Onnx__NodeProto *p = t ? NULL : producer(c->gp, cond);
    if (!t)
        t = constant_value(p);
    if (t) {
        bool value;
        int rc = constant_condition(c, t, &value);
        if (rc)
            return rc;
        *chosen = value ? 0 : 1;
        snprintf(why, size, "the condition " LLMC_NAME_FMT " is the constant %s", cond, value ? "true" : "false");
        return LLMC_OK;
    }
    const Onnx__ValueInfoProto *vi = input_named(c->gp, cond);
    if (vi)
        return input_condition(c, vi, chosen, why, size);
    if (p) {
        *chosen = BOTH_BRANCHES;
        snprintf(why, size, "the condition " LLMC_NAME_FMT " is computed by node " LLMC_NAME_FMT " (%.100s): "
                 "shape inference decides it over the plan's bounds", cond, or_empty(p->name), or_empty(p->op_type));
        return LLMC_OK;
    }
    return if_fail(c, LLMC_E_INPUT, "the condition " LLMC_NAME_FMT " is not defined by any node, input or "
                   "initializer", cond);
}

/* ---- the inlined branch ---- */

static int check_branch(const if_ctx *c, int b)
{
    const Onnx__GraphProto *g = c->branch[b];
    if (g->n_input)
        return if_fail(c, LLMC_E_INPUT, "%s has %zu inputs; If branches take none", branch_names[b], g->n_input);
    if (g->n_sparse_initializer)
        return if_fail(c, LLMC_E_UNSUPPORTED, "%s has sparse initializers, which llmc does not support",
                       branch_names[b]);
    for (size_t i = 0; i < g->n_node; i++) {
        const char *attr;
        if (has_subgraph(g->node[i], &attr))
            return if_fail(c, LLMC_E_UNSUPPORTED,
                           "%s node " LLMC_NAME_FMT " (%.100s) has a subgraph attribute " LLMC_NAME_FMT
                           ": nested subgraphs are not supported",
                           branch_names[b], or_empty(g->node[i]->name), or_empty(g->node[i]->op_type), attr);
    }
    return LLMC_OK;
}

static char **one_name(const char *s)
{
    char **names = malloc(sizeof *names);
    if (names && !(names[0] = strdup(s))) {
        free(names);
        names = NULL;
    }
    return names;
}

/* Identity(from) -> to, named "<if>/output_k"; NULL on OOM. */
static Onnx__NodeProto *identity(const if_ctx *c, const char *from, const char *to, size_t k)
{
    Onnx__NodeProto *n = malloc(sizeof *n);
    if (!n)
        return NULL;
    onnx__node_proto__init(n);
    char name[400];
    snprintf(name, sizeof name, "%.300s/output_%zu", or_empty(c->node->name), k);
    n->op_type = strdup("Identity");
    n->name = strdup(name);
    n->input = one_name(from);
    n->n_input = n->input != NULL;
    n->output = one_name(to);
    n->n_output = n->output != NULL;
    if (n->op_type && n->name && n->n_input && n->n_output)
        return n;
    onnx__node_proto__free_unpacked(n, NULL);
    return NULL;
}

/* Appends `n` pointers from `*from` to the array `*to` (of `*count`), and
 * leaves `*from` empty: the branch gives its messages to the graph. */
static bool move_items(void ***to, size_t *count, void ***from, size_t *n)
{
    if (!*n)
        return true;
    void **grown = realloc(*to, sizeof *grown * (*count + *n));
    if (!grown)
        return false;
    memcpy(grown + *count, *from, sizeof *grown * *n);
    *to = grown;
    *count += *n;
    free(*from);
    *from = NULL;
    *n = 0;
    return true;
}

/* The If's outputs the branch writes under another name: Identity copies. */
static int output_copies(const if_ctx *c, const Onnx__GraphProto *b, Onnx__NodeProto **copies, size_t *n)
{
    *n = 0;
    for (size_t k = 0; k < b->n_output; k++) {
        const char *out = c->node->output[k];
        if (!*out || same(out, b->output[k]->name))
            continue;
        if (!(copies[*n] = identity(c, b->output[k]->name, out, k)))
            return oom(c);
        ++*n;
    }
    return LLMC_OK;
}

/* ---- both branches kept ---- */

static bool defined_by(const Onnx__GraphProto *b, const char *name)
{
    if (initializer_named(b, name))
        return true;
    return producer(b, name) != NULL;
}

/* The branches' own names (node outputs, initializers) must differ, as
 * both land in the graph. */
static int check_disjoint(const if_ctx *c)
{
    const Onnx__GraphProto *a = c->branch[0], *b = c->branch[1];
    for (size_t i = 0; i < a->n_node; i++)
        for (size_t k = 0; k < a->node[i]->n_output; k++)
            if (*a->node[i]->output[k] && defined_by(b, a->node[i]->output[k]))
                return if_fail(c, LLMC_E_UNSUPPORTED, "both branches define " LLMC_NAME_FMT
                               ": llmc keeps both branches of an If on a computed condition", a->node[i]->output[k]);
    for (size_t i = 0; i < a->n_initializer; i++)
        if (defined_by(b, a->initializer[i]->name))
            return if_fail(c, LLMC_E_UNSUPPORTED, "both branches define " LLMC_NAME_FMT
                           ": llmc keeps both branches of an If on a computed condition", a->initializer[i]->name);
    return LLMC_OK;
}

/* The If without its branches reads its condition, then_branch's outputs
 * and else_branch's outputs (the importer's If, op_list.h). */
static int rewrite_inputs(if_ctx *c)
{
    size_t k = c->node->n_output, n = 1 + 2 * k;
    char **inputs = calloc(n, sizeof *inputs);
    if (!inputs)
        return oom(c);
    inputs[0] = c->node->input[0];
    for (size_t j = 0; j < k; j++)
        for (int b = 0; b < 2; b++)
            if (!(inputs[1 + (size_t)b * k + j] = strdup(c->branch[b]->output[j]->name))) {
                for (size_t i = 1; i < n; i++)
                    free(inputs[i]);
                free(inputs);
                return oom(c);
            }
    free(c->node->input);
    c->node->input = inputs;
    c->node->n_input = n;
    for (size_t a = 0; a < c->node->n_attribute; a++)
        onnx__attribute_proto__free_unpacked(c->node->attribute[a], NULL);
    free(c->node->attribute);
    c->node->attribute = NULL;
    c->node->n_attribute = 0;
    return LLMC_OK;
}

/* Both branches' nodes go before the If, which stays to select between
 * their outputs once shape inference knows the condition. */
static int splice_both(if_ctx *c)
{
    Onnx__GraphProto *gp = c->gp, *b0 = c->branch[0], *b1 = c->branch[1];
    size_t added = b0->n_node + b1->n_node;
    Onnx__NodeProto **nodes = malloc(sizeof *nodes * (gp->n_node + added));
    if (!nodes)
        return oom(c);
    for (int b = 0; b < 2; b++)
        if (!move_items((void ***)&gp->initializer, &gp->n_initializer, (void ***)&c->branch[b]->initializer,
                        &c->branch[b]->n_initializer) ||
            !move_items((void ***)&gp->value_info, &gp->n_value_info, (void ***)&c->branch[b]->value_info,
                        &c->branch[b]->n_value_info)) {
            free(nodes);
            return oom(c);
        }
    memcpy(nodes, gp->node, sizeof *nodes * c->idx);
    memcpy(nodes + c->idx, b0->node, sizeof *nodes * b0->n_node);
    memcpy(nodes + c->idx + b0->n_node, b1->node, sizeof *nodes * b1->n_node);
    memcpy(nodes + c->idx + added, gp->node + c->idx, sizeof *nodes * (gp->n_node - c->idx));
    for (int b = 0; b < 2; b++) {
        free(c->branch[b]->node);
        c->branch[b]->node = NULL;
        c->branch[b]->n_node = 0;
    }
    free(gp->node);
    gp->node = nodes;
    gp->n_node += added;
    return rewrite_inputs(c);     /* frees the branches with the attributes */
}

static int keep_both(if_ctx *c, llmc_import_report *r, const char *why)
{
    int rc = LLMC_OK;
    for (int b = 0; b < 2 && !rc; b++)
        rc = check_branch(c, b);
    if (!rc)
        rc = check_disjoint(c);
    if (!rc)
        rc = splice_both(c);
    if (!rc && !r->inlined_if[0])
        snprintf(r->inlined_if, sizeof r->inlined_if, "import: If '%.100s': both branches inlined (%.360s)",
                 or_empty(c->node->name), why);
    return rc;
}

/* ---- one branch kept ---- */

/* The branch's nodes (then the output copies) take the If's place in the
 * node list; the If, out of the list, is the caller's to free. */
static int splice(if_ctx *c, int chosen)
{
    Onnx__GraphProto *b = c->branch[chosen];
    Onnx__NodeProto **copies = malloc(sizeof *copies * (b->n_output + 1));
    size_t n_copies = 0, tail = c->gp->n_node - c->idx - 1, added = b->n_node;
    int rc = copies ? output_copies(c, b, copies, &n_copies) : oom(c);
    Onnx__NodeProto **nodes = rc ? NULL : malloc(sizeof *nodes * (c->gp->n_node + added + n_copies));
    if (!rc && (!nodes || !move_items((void ***)&c->gp->initializer, &c->gp->n_initializer,
                                      (void ***)&b->initializer, &b->n_initializer) ||
                !move_items((void ***)&c->gp->value_info, &c->gp->n_value_info, (void ***)&b->value_info,
                            &b->n_value_info)))
        rc = oom(c);
    if (rc) {
        for (size_t i = 0; i < n_copies; i++)
            onnx__node_proto__free_unpacked(copies[i], NULL);
        free(copies);
        free(nodes);
        return rc;
    }
    memcpy(nodes, c->gp->node, sizeof *nodes * c->idx);
    memcpy(nodes + c->idx, b->node, sizeof *nodes * added);
    memcpy(nodes + c->idx + added, copies, sizeof *nodes * n_copies);
    memcpy(nodes + c->idx + added + n_copies, c->gp->node + c->idx + 1, sizeof *nodes * tail);
    free(b->node);
    b->node = NULL;
    b->n_node = 0;
    free(c->gp->node);
    c->gp->node = nodes;
    c->gp->n_node += added + n_copies - 1;
    free(copies);
    return LLMC_OK;
}

/* ---- the condition input ---- */

/* Drops graph input `cond` once no node reads it; a node other than an If
 * reading it keeps the plan from treating it as a constant. */
static int drop_condition(if_ctx *c, const char *cond)
{
    Onnx__GraphProto *gp = c->gp;
    for (size_t i = 0; i < gp->n_node; i++)
        for (size_t k = 0; k < gp->node[i]->n_input; k++) {
            if (!same(gp->node[i]->input[k], cond))
                continue;
            if (is_if(gp->node[i]) && k == 0)
                return LLMC_OK;     /* dropped with the last If it selects */
            return if_fail(c, LLMC_E_UNSUPPORTED,
                           "its condition, graph input " LLMC_NAME_FMT ", is also read by node " LLMC_NAME_FMT
                           " (%.100s): llmc's runtime does not feed it",
                           cond, or_empty(gp->node[i]->name), or_empty(gp->node[i]->op_type));
        }
    for (size_t i = 0; i < gp->n_input; i++)
        if (same(gp->input[i]->name, cond)) {
            onnx__value_info_proto__free_unpacked(gp->input[i], NULL);
            memmove(gp->input + i, gp->input + i + 1, sizeof *gp->input * (gp->n_input - i - 1));
            gp->n_input--;
            break;
        }
    return LLMC_OK;
}

/* ---- each If ---- */

static void note(llmc_import_report *r, const if_ctx *c, int chosen, const char *why)
{
    snprintf(r->inlined_if, sizeof r->inlined_if, "import: If '%.100s': branch %s inlined (%.360s)",
             or_empty(c->node->name), branch_names[chosen], why);
}

static int inline_if(if_ctx *c, llmc_import_report *r)
{
    int chosen = 0;
    char why[512], cond[400];
    int rc = find_branches(c);
    if (!rc)
        rc = check_outputs(c, false);
    if (!rc)
        rc = choose_branch(c, &chosen, why, sizeof why);
    if (!rc && chosen == BOTH_BRANCHES)
        return keep_both(c, r, why);
    if (!rc)
        rc = check_outputs(c, true);
    if (!rc)
        rc = check_branch(c, chosen);
    if (!rc)
        rc = splice(c, chosen);
    if (rc)
        return rc;
    /* The If is out of the node list: freed once messages need it no more. */
    snprintf(cond, sizeof cond, "%s", c->node->input[0]);
    if (!initializer_named(c->gp, cond) && input_named(c->gp, cond))
        rc = drop_condition(c, cond);
    if (!rc && !r->inlined_if[0])
        note(r, c, chosen, why);
    onnx__node_proto__free_unpacked(c->node, NULL);
    return rc;
}

/* The nodes of an inlined branch hold no subgraph (check_branch), so the
 * scan goes on at the If's place, over the branch's nodes. */
int llmc_onnx_inline_ifs(Onnx__GraphProto *gp, const char *path, llmc_import_report *report, llmc_error *err)
{
    unsigned inlined = 0;
    report->inlined_if[0] = 0;
    for (size_t i = 0; i < gp->n_node; i++) {
        while (i < gp->n_node && pending_if(gp->node[i])) {
            if_ctx c = {.gp = gp, .path = path, .err = err, .idx = i, .node = gp->node[i]};
            int rc = inline_if(&c, report);
            if (rc)
                return rc;
            inlined++;
        }
    }
    if (inlined > 1) {
        size_t used = strlen(report->inlined_if);
        snprintf(report->inlined_if + used, sizeof report->inlined_if - used, "; %u more If nodes inlined",
                 inlined - 1);
    }
    return LLMC_OK;
}
