/* Graph input/output dims: dim_value, or a dim_param bound to an affine
 * c + s*S + p*P by --dim or by the LLM role of the input (onnx_import.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/io_roles.h"
#include "onnx_import_priv.h"

const Onnx__TypeProto__Tensor *llmc_onnx_tensor_type(const Onnx__ValueInfoProto *vi)
{
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return NULL;
    return vi->type->tensor_type;
}

static const Onnx__TensorShapeProto *value_shape(const Onnx__ValueInfoProto *vi)
{
    const Onnx__TypeProto__Tensor *tt = llmc_onnx_tensor_type(vi);
    return tt ? tt->shape : NULL;
}

/* The dim_param at `axis`, or NULL. */
static const char *dim_param_at(const Onnx__ValueInfoProto *vi, size_t axis)
{
    const Onnx__TensorShapeProto *s = value_shape(vi);
    if (!s || axis >= s->n_dim)
        return NULL;
    const Onnx__TensorShapeProto__Dimension *d = s->dim[axis];
    if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM || !*d->dim_param)
        return NULL;
    return d->dim_param;
}

static const llmc_affine *find_symbol(const llmc_dim_table *t, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->syms[i].name, name) == 0)
            return &t->syms[i].value;
    return NULL;
}

/* The first binding of a name wins: explicit --dim bindings come first. */
static void bind_symbol(llmc_dim_table *t, const char *name, llmc_affine value)
{
    if (!name || find_symbol(t, name) || t->n == t->cap)
        return;
    t->syms[t->n++] = (llmc_dim_symbol){name, value};
}

static int bind_explicit_dims(llmc_dim_table *t, const llmc_import_options *opt, llmc_error *err)
{
    for (int i = 0; opt && i < opt->n_dims; i++) {
        const llmc_dim_binding *b = &opt->dims[i];
        if (b->value < 0)
            return llmc_fail(err, LLMC_E_USAGE, "--dim %s=%" PRId64 ": a dim cannot be negative", b->name,
                             b->value);
        bind_symbol(t, b->name, llmc_aff_const(b->value));
    }
    return LLMC_OK;
}

/* ---- the head size of the cache, for a symbolic last dim ----
 * onnxruntime-genai's builder declares the past and present key/value
 * [batch, kv_heads, past, "kv_cache_dim"] (one export for plain and
 * compressed caches); a plain cache's last dim is the head size, which a
 * GroupQueryAttention node fixes: its query's width over num_heads (over
 * num_heads + 2 kv_num_heads when q, k and v come packed). */

static const Onnx__NodeProto *producer_of(const Onnx__GraphProto *gp, const char *name)
{
    for (size_t i = 0; i < gp->n_node; i++)
        for (size_t k = 0; k < gp->node[i]->n_output; k++)
            if (strcmp(gp->node[i]->output[k], name) == 0)
                return gp->node[i];
    return NULL;
}

static int64_t declared_width(const Onnx__GraphProto *gp, const char *name)
{
    for (size_t i = 0; i < gp->n_value_info; i++) {
        const Onnx__TensorShapeProto *s = value_shape(gp->value_info[i]);
        if (s && s->n_dim > 0 && strcmp(gp->value_info[i]->name, name) == 0) {
            const Onnx__TensorShapeProto__Dimension *d = s->dim[s->n_dim - 1];
            return d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? d->dim_value : -1;
        }
    }
    return -1;
}

static int64_t node_int_attr(const Onnx__NodeProto *n, const char *name, int64_t dflt)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i]->i;
    return dflt;
}

/* The width of tensor `name`: its value_info's last dim, or the N of the
 * MatMulNBits making it, through bias Adds. */
static int64_t tensor_width(const Onnx__GraphProto *gp, const char *name)
{
    for (int hops = 0; hops < 3; hops++) {
        int64_t w = declared_width(gp, name);
        const Onnx__NodeProto *n = w > 0 ? NULL : producer_of(gp, name);
        if (w > 0 || !n)
            return w;
        if (strcmp(n->op_type, "MatMulNBits") == 0)
            return node_int_attr(n, "N", -1);
        if (strcmp(n->op_type, "Add") != 0 || n->n_input != 2)
            return -1;
        name = n->input[0];
    }
    return -1;
}

/* The head size every GroupQueryAttention of gp agrees on, or -1. */
static int64_t gqa_head_size(const Onnx__GraphProto *gp)
{
    int64_t size = -1;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (strcmp(n->op_type, "GroupQueryAttention") != 0 || n->n_input < 3)
            continue;
        int64_t heads = node_int_attr(n, "num_heads", 0), kv = node_int_attr(n, "kv_num_heads", 0);
        int64_t per = *n->input[1] ? heads : heads + 2 * kv, width = tensor_width(gp, n->input[0]);
        if (per <= 0 || width <= 0 || width % per || (size > 0 && size != width / per))
            return -1;
        size = width / per;
    }
    return size;
}

static void bind_role_dims(llmc_dim_table *t, const Onnx__GraphProto *gp, const Onnx__ValueInfoProto *const *inputs,
                           size_t n)
{
    static const llmc_affine batch = {1, 0, 0}, S = {0, 1, 0}, P = {0, 0, 1}, P_plus_S = {0, 1, 1};
    const char *seq_param = NULL;
    int layer;
    for (size_t i = 0; i < n; i++) {
        int role = llmc_io_role(inputs[i]->name, 0, &layer);
        if (role == LLMC_ROLE_GENERIC)
            continue;
        bind_symbol(t, dim_param_at(inputs[i], 0), batch);
        if (role == LLMC_ROLE_INPUT_IDS || role == LLMC_ROLE_POSITION_IDS) {
            bind_symbol(t, dim_param_at(inputs[i], 1), S);
            if (!seq_param)
                seq_param = dim_param_at(inputs[i], 1);
        }
        if (role == LLMC_ROLE_PAST_KEY || role == LLMC_ROLE_PAST_VALUE) {
            bind_symbol(t, dim_param_at(inputs[i], 2), P);
            const char *head = dim_param_at(inputs[i], 3);
            int64_t size = head && !find_symbol(t, head) ? gqa_head_size(gp) : -1;
            if (size > 0)
                bind_symbol(t, head, llmc_aff_const(size));
        }
    }
    /* The mask covers past and new tokens unless it is named like S. */
    for (size_t i = 0; i < n; i++) {
        const char *param = dim_param_at(inputs[i], 1);
        if (llmc_io_role(inputs[i]->name, 0, &layer) == LLMC_ROLE_ATTENTION_MASK && param &&
            !(seq_param && strcmp(param, seq_param) == 0))
            bind_symbol(t, param, P_plus_S);
    }
}

int llmc_dim_table_build(llmc_dim_table *t, const llmc_import_options *opt, const Onnx__GraphProto *gp,
                         const Onnx__ValueInfoProto *const *inputs, size_t n_inputs, llmc_error *err)
{
    t->n = 0;
    t->cap = opt ? opt->n_dims : 0;
    for (size_t i = 0; i < n_inputs; i++) {
        const Onnx__TensorShapeProto *s = value_shape(inputs[i]);
        t->cap += s ? (int)s->n_dim : 0;
    }
    t->syms = malloc(sizeof *t->syms * (size_t)(t->cap + 1));
    if (!t->syms)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory binding dims");
    int rc = bind_explicit_dims(t, opt, err);
    if (!rc)
        bind_role_dims(t, gp, inputs, n_inputs);
    return rc;
}

void llmc_dim_table_free(llmc_dim_table *t)
{
    free(t->syms);
    t->syms = NULL;
    t->n = t->cap = 0;
}

typedef enum { DIM_KNOWN, DIM_UNBOUND, DIM_UNSIZED, DIM_NEGATIVE } dim_status;

static dim_status resolve_dim(const llmc_dim_table *t, const Onnx__TensorShapeProto__Dimension *d,
                              llmc_affine *out)
{
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
        *out = llmc_aff_const(d->dim_value);
        return d->dim_value < 0 ? DIM_NEGATIVE : DIM_KNOWN;
    }
    if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM || !*d->dim_param)
        return DIM_UNSIZED;
    const llmc_affine *a = find_symbol(t, d->dim_param);
    if (!a)
        return DIM_UNBOUND;
    *out = *a;
    return DIM_KNOWN;
}

int llmc_input_shape(const llmc_dim_table *t, const Onnx__ValueInfoProto *vi, llmc_shape *shape, llmc_error *err)
{
    const Onnx__TensorShapeProto *s = value_shape(vi);
    if (!s)
        return llmc_fail(err, LLMC_E_UNSUPPORTED,
                         "input " LLMC_NAME_FMT " has no shape: llmc needs the rank and dims of every input",
                         vi->name);
    if (s->n_dim > LLMC_MAX_RANK)
        return llmc_fail(err, LLMC_E_UNSUPPORTED, "input " LLMC_NAME_FMT " has rank %zu; llmc supports at most %d",
                         vi->name, s->n_dim, LLMC_MAX_RANK);
    shape->rank = (int)s->n_dim;
    for (size_t k = 0; k < s->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *d = s->dim[k];
        switch (resolve_dim(t, d, &shape->dims[k])) {
        case DIM_KNOWN:
            break;
        case DIM_NEGATIVE:
            return llmc_fail(err, LLMC_E_INPUT, "input " LLMC_NAME_FMT " axis %zu has negative size %" PRId64,
                             vi->name, k, d->dim_value);
        case DIM_UNBOUND:
            return llmc_fail(err, LLMC_E_UNSUPPORTED,
                             "input " LLMC_NAME_FMT " axis %zu has symbolic dim '%s': bind it with --dim %s=N",
                             vi->name, k, d->dim_param, d->dim_param);
        case DIM_UNSIZED:
            return llmc_fail(err, LLMC_E_UNSUPPORTED,
                             "input " LLMC_NAME_FMT " axis %zu has neither a size nor a dim name: llmc needs "
                             "every input dim fixed or named", vi->name, k);
        }
    }
    /* The fixed dims alone must have a countable product (S and P are
     * bounded later, by the memory plan). */
    int64_t fixed[LLMC_MAX_RANK];
    int n_fixed = 0;
    for (int k = 0; k < shape->rank; k++)
        if (!shape->dims[k].s && !shape->dims[k].p)
            fixed[n_fixed++] = shape->dims[k].c;
    char what[400];
    snprintf(what, sizeof what, "input " LLMC_NAME_FMT, vi->name);
    uint64_t count;
    return llmc_shape_elements(fixed, n_fixed, what, &count, err);
}

int llmc_output_shape(const llmc_dim_table *t, const Onnx__ValueInfoProto *vi, llmc_shape *shape, llmc_error *err)
{
    const Onnx__TensorShapeProto *s = value_shape(vi);
    shape->rank = -1;
    if (!s || s->n_dim > LLMC_MAX_RANK)
        return LLMC_OK;
    for (size_t k = 0; k < s->n_dim; k++) {
        dim_status st = resolve_dim(t, s->dim[k], &shape->dims[k]);
        if (st == DIM_NEGATIVE)
            return llmc_fail(err, LLMC_E_INPUT, "output " LLMC_NAME_FMT " axis %zu has negative size %" PRId64,
                             vi->name, k, s->dim[k]->dim_value);
        if (st != DIM_KNOWN)
            return LLMC_OK;
    }
    shape->rank = (int)s->n_dim;
    return LLMC_OK;
}
