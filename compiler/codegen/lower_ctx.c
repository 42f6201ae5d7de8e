/* The lowering context: messages, the tensors of graph values, emitted ops
 * and their operands.  Every per-op lowerer builds on these; nothing here
 * knows an op. */
#include "lower_ctx.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "segment_writer.h"

/* ---- messages ---- */

int lower_fail(lower_ctx *L, int code, int value, const char *fmt, ...)
{
    char where[512] = "", what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (L->node >= 0)
        snprintf(where, sizeof where, "node '%s' (#%d, %s): ", cur_node(L)->name, L->node,
                 cur_node(L)->op_type);
    if (value >= 0)
        return llmc_fail(L->err, code, "%svalue '%s': %s", where, L->g->values[value].name, what);
    return llmc_fail(L->err, code, "%s%s", where, what);
}

int lower_out_of_memory(lower_ctx *L)
{
    return llmc_fail(L->err, LLMC_E_NOMEM, "out of memory while lowering");
}

int node_in(const lower_ctx *L, int k)
{
    const llmc_node *n = cur_node(L);
    return k < n->n_inputs ? n->inputs[k] : -1;
}

int node_out(const lower_ctx *L, int k)
{
    const llmc_node *n = cur_node(L);
    return k < n->n_outputs ? n->outputs[k] : -1;
}

const llmc_value *node_in_value(const lower_ctx *L, int k)
{
    return &L->g->values[node_in(L, k)];
}

/* ---- tensors ---- */

static bool plan_dtype(int dtype)
{
    return dtype == LLMC_DT_FLOAT || dtype == LLMC_DT_UINT8 || dtype == LLMC_DT_INT8 ||
           dtype == LLMC_DT_INT32 || dtype == LLMC_DT_INT64 || dtype == LLMC_DT_BOOL;
}

static char *dup_cat(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *s = malloc(na + nb + 1);
    if (s) {
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
    }
    return s;
}

/* Appends a tensor (Arena unless the caller fills the weight fields). */
int lower_new_tensor(lower_ctx *L, const char *name, const char *suffix, int dtype, int rank,
                      const llmc_affine *dims, uint32_t *t)
{
    cg_plan *p = L->p;
    if (p->n_tensors == p->cap_tensors) {
        int cap = p->cap_tensors ? 2 * p->cap_tensors : 64;
        cg_tensor *arr = realloc(p->tensors, sizeof *arr * (size_t)cap);
        if (!arr)
            return lower_out_of_memory(L);
        p->tensors = arr;
        p->cap_tensors = cap;
    }
    cg_tensor *x = &p->tensors[p->n_tensors];
    memset(x, 0, sizeof *x);
    x->name = dup_cat(name, suffix);
    if (!x->name)
        return lower_out_of_memory(L);
    x->dtype = dtype;
    x->rank = rank;
    if (rank > 0)
        memcpy(x->dims, dims, sizeof *dims * (size_t)rank);
    *t = (uint32_t)p->n_tensors++;
    return LLMC_OK;
}

/* Checks what every tensor made from a graph value needs: a plan dtype and
 * a known shape. */
static int check_value(lower_ctx *L, int v)
{
    const llmc_value *val = &L->g->values[v];
    if (!plan_dtype(val->dtype))
        return lower_fail(L, LLMC_E_UNSUPPORTED, v, "dtype %s is not supported by the plan",
                          llmc_dtype_name(val->dtype));
    if (val->shape.rank < 0)
        return lower_fail(L, LLMC_E_UNSUPPORTED, v, "shape is unknown");
    return LLMC_OK;
}

int lower_tensor_from_value(lower_ctx *L, int v, uint32_t *t)
{
    const llmc_value *val = &L->g->values[v];
    int rc = check_value(L, v);
    if (!rc)
        rc = lower_new_tensor(L, val->name, "", val->dtype, val->shape.rank, val->shape.dims, t);
    if (!rc)
        L->tensor_of[v] = (int32_t)*t;
    return rc;
}

int lower_weight_tensor(lower_ctx *L, int v, const void *data, uint64_t nbytes, uint32_t *t)
{
    const llmc_value *val = &L->g->values[v];
    int rc = lower_tensor_from_value(L, v, t);
    if (rc)
        return rc;
    if (!shape_is_const(&val->shape) ||
        const_elems(&val->shape) * llmc_dtype_size(val->dtype) != nbytes)
        return lower_fail(L, LLMC_E_UNSUPPORTED, v,
                          "constant holds %llu bytes, which does not match its shape",
                          (unsigned long long)nbytes);
    cg_tensor *x = &L->p->tensors[*t];
    x->is_weight = true;
    x->data = data;
    x->nbytes = nbytes;
    x->segment = L->p->n_segments++;
    return LLMC_OK;
}

int lower_tensor_of_value(lower_ctx *L, int v, uint32_t *t)
{
    if (L->tensor_of[v] >= 0) {
        *t = (uint32_t)L->tensor_of[v];
        return LLMC_OK;
    }
    const llmc_value *val = &L->g->values[v];
    if (!val->is_const)
        return lower_fail(L, LLMC_E_INTERNAL, v, "read before it is computed");
    int rc = lower_weight_tensor(L, v, val->konst.data, val->konst.nbytes, t);
    if (!rc && cg_weight_share_const(&L->p->tensors[*t], val))   /* lazy bytes: segment_writer.h */
        rc = lower_out_of_memory(L);
    return rc;
}

int lower_input(lower_ctx *L, int k, uint32_t *t)
{
    int v = node_in(L, k);
    if (v < 0)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "input %d is missing", k);
    return lower_tensor_of_value(L, v, t);
}

int lower_output(lower_ctx *L, int k, uint32_t *t)
{
    int v = node_out(L, k);
    if (v < 0)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "output %d is missing", k);
    if (L->tensor_of[v] >= 0)
        return lower_fail(L, LLMC_E_INTERNAL, v, "computed twice");
    return lower_tensor_from_value(L, v, t);
}

int lower_temp(lower_ctx *L, const char *suffix, int dtype, int rank, const llmc_affine *dims,
               uint32_t *t)
{
    int v = node_out(L, 0);
    const char *base = v >= 0 ? L->g->values[v].name : cur_node(L)->name;
    return lower_new_tensor(L, base, suffix, dtype, rank, dims, t);
}

/* Tensor t becomes a Weight over malloc'ed `data`, which the plan owns. */
void lower_own_weight(lower_ctx *L, uint32_t t, void *data, uint64_t nbytes)
{
    cg_tensor *x = &L->p->tensors[t];
    x->is_weight = true;
    x->owned = data;
    x->data = data;
    x->nbytes = nbytes;
    x->segment = L->p->n_segments++;
}

int lower_scalar_weight(lower_ctx *L, const char *suffix, float value, uint32_t *t)
{
    float *data = malloc(sizeof *data);
    if (!data)
        return lower_out_of_memory(L);
    *data = value;
    int rc = lower_temp(L, suffix, LLMC_DT_FLOAT, 0, NULL, t);
    if (rc) {
        free(data);
        return rc;
    }
    lower_own_weight(L, *t, data, sizeof *data);
    return LLMC_OK;
}

/* ---- ops ---- */

cg_op *lower_emit_named(lower_ctx *L, int code, const char *name)
{
    cg_plan *p = L->p;
    if (p->n_ops == p->cap_ops) {
        int cap = p->cap_ops ? 2 * p->cap_ops : 64;
        cg_op *arr = realloc(p->ops, sizeof *arr * (size_t)cap);
        if (!arr) {
            lower_out_of_memory(L);
            return NULL;
        }
        p->ops = arr;
        p->cap_ops = cap;
    }
    cg_op *op = &p->ops[p->n_ops];
    memset(op, 0, sizeof *op);
    op->name = dup_cat(name, "");
    if (!op->name) {
        lower_out_of_memory(L);
        return NULL;
    }
    op->code = code;
    op->keepdims = true;
    p->n_ops++;
    return op;
}

cg_op *lower_emit(lower_ctx *L, int code)
{
    const llmc_node *n = cur_node(L);
    return lower_emit_named(L, code, n->name[0] ? n->name : n->op_type);
}

static int push_index(lower_ctx *L, uint32_t **arr, int *n, uint32_t t)
{
    uint32_t *a = realloc(*arr, sizeof *a * (size_t)(*n + 1));
    if (!a)
        return lower_out_of_memory(L);
    a[(*n)++] = t;
    *arr = a;
    return LLMC_OK;
}

int op_add_input(lower_ctx *L, cg_op *op, uint32_t t)
{
    for (int i = 0; i < op->n_inputs; i++)
        if (op->inputs[i] == t && op->code == LLMC_RT_OP_Copy)
            return LLMC_OK;   /* a Copy lists each source once */
    return push_index(L, &op->inputs, &op->n_inputs, t);
}

int op_add_output(lower_ctx *L, cg_op *op, uint32_t t)
{
    return push_index(L, &op->outputs, &op->n_outputs, t);
}

cg_region *op_add_region(lower_ctx *L, cg_op *op, uint32_t src, uint32_t dst)
{
    cg_region *arr = realloc(op->regions, sizeof *arr * (size_t)(op->n_regions + 1));
    if (!arr) {
        lower_out_of_memory(L);
        return NULL;
    }
    op->regions = arr;
    cg_region *r = &arr[op->n_regions++];
    memset(r, 0, sizeof *r);
    const cg_tensor *s = &L->p->tensors[src], *d = &L->p->tensors[dst];
    r->src = src;
    r->dst = dst;
    r->src_rank = s->rank;
    r->dst_rank = d->rank;
    for (int k = 0; k < d->rank; k++) {
        r->size[k] = d->dims[k];
        r->src_axis[k] = (int8_t)(k < s->rank && s->rank == d->rank ? k : -1);
        r->src_step[k] = 1;
    }
    return r;
}

int lower_emit_simple(lower_ctx *L, int code, int kind, int n_inputs)
{
    uint32_t in[3], out;
    for (int k = 0; k < n_inputs; k++) {
        int rc = lower_input(L, k, &in[k]);
        if (rc)
            return rc;
    }
    int rc = lower_output(L, 0, &out);
    if (rc)
        return rc;
    cg_op *op = lower_emit(L, code);
    if (!op)
        return L->err->code;
    op->kind = (uint8_t)kind;
    for (int k = 0; k < n_inputs && !rc; k++)
        rc = op_add_input(L, op, in[k]);
    return rc ? rc : op_add_output(L, op, out);
}

int lower_emit_to(lower_ctx *L, int code, int kind, uint32_t a, uint32_t b, uint32_t out)
{
    cg_op *op = lower_emit(L, code);
    if (!op)
        return L->err->code;
    op->kind = (uint8_t)kind;
    int rc = op_add_input(L, op, a);
    if (!rc)
        rc = op_add_input(L, op, b);
    return rc ? rc : op_add_output(L, op, out);
}

/* ---- operand helpers ---- */

int lower_axis(lower_ctx *L, int64_t axis, int rank, int32_t *out)
{
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "axis %lld is out of range for rank %d",
                          (long long)axis, rank);
    *out = (int32_t)a;
    return LLMC_OK;
}

static int64_t read_int(const void *data, int dtype, uint64_t i)
{
    if (dtype == LLMC_DT_INT32)
        return ((const int32_t *)data)[i];
    return ((const int64_t *)data)[i];
}

int lower_ints(lower_ctx *L, int k, llmc_affine *out, int max, int *n)
{
    int v = node_in(L, k);
    *n = 0;
    if (v < 0)
        return LLMC_OK;
    const llmc_value *val = &L->g->values[v];
    if (shape_is_const(&val->shape) && const_elems(&val->shape) == 0)
        return LLMC_OK;   /* empty: its contents do not matter */
    if (val->is_const && (val->dtype == LLMC_DT_INT64 || val->dtype == LLMC_DT_INT32)) {
        uint64_t count = val->konst.nbytes / llmc_dtype_size(val->dtype);
        if (count > (uint64_t)max)
            return lower_fail(L, LLMC_E_UNSUPPORTED, v, "has %llu elements, at most %d expected",
                              (unsigned long long)count, max);
        for (uint64_t i = 0; i < count; i++)
            out[i] = llmc_aff_const(read_int(val->konst.data, val->dtype, i));
        *n = (int)count;
        return LLMC_OK;
    }
    if (val->n_sym > 0 && shape_is_const(&val->shape) &&
        const_elems(&val->shape) == (uint64_t)val->n_sym && val->n_sym <= max) {
        memcpy(out, val->sym, sizeof *out * (size_t)val->n_sym);
        *n = val->n_sym;
        return LLMC_OK;
    }
    return lower_fail(L, LLMC_E_UNSUPPORTED, v, "must be a constant or known symbolically");
}

int lower_const_ints(lower_ctx *L, int k, int64_t *out, int max, int *n)
{
    llmc_affine a[LLMC_MAX_RANK];
    if (max > LLMC_MAX_RANK)
        max = LLMC_MAX_RANK;
    int rc = lower_ints(L, k, a, max, n);
    for (int i = 0; i < *n && !rc; i++) {
        if (!llmc_aff_is_const(a[i]))
            return lower_fail(L, LLMC_E_UNSUPPORTED, node_in(L, k), "must not depend on S or P");
        out[i] = a[i].c;
    }
    return rc;
}
