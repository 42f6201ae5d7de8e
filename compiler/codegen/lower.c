/* Lowering: every live ONNX node becomes one or more plan ops (the table at
 * the end of this file); graph inputs and outputs become bound Arena
 * tensors.  Layout ops (regions) are in lower_layout.c. */
#include "lower_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/io_roles.h"
#include "ir/llmc_ops.h"
#include "segment_writer.h"
#include "kernels/kernels.h"

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

static int out_of_memory(lower_ctx *L)
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
            return out_of_memory(L);
        p->tensors = arr;
        p->cap_tensors = cap;
    }
    cg_tensor *x = &p->tensors[p->n_tensors];
    memset(x, 0, sizeof *x);
    x->name = dup_cat(name, suffix);
    if (!x->name)
        return out_of_memory(L);
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

static int tensor_from_value(lower_ctx *L, int v, uint32_t *t)
{
    const llmc_value *val = &L->g->values[v];
    int rc = check_value(L, v);
    if (!rc)
        rc = lower_new_tensor(L, val->name, "", val->dtype, val->shape.rank, val->shape.dims, t);
    if (!rc)
        L->tensor_of[v] = (int32_t)*t;
    return rc;
}

static uint64_t const_elems(const llmc_shape *s)
{
    uint64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= (uint64_t)s->dims[i].c;
    return n;
}

static bool shape_is_const(const llmc_shape *s)
{
    for (int i = 0; i < s->rank; i++)
        if (!llmc_aff_is_const(s->dims[i]) || s->dims[i].c < 0)
            return false;
    return s->rank >= 0;
}

/* Makes value v a Weight tensor over `data`. */
static int weight_tensor(lower_ctx *L, int v, const void *data, uint64_t nbytes, uint32_t *t)
{
    const llmc_value *val = &L->g->values[v];
    int rc = tensor_from_value(L, v, t);
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

static int tensor_of_value(lower_ctx *L, int v, uint32_t *t)
{
    if (L->tensor_of[v] >= 0) {
        *t = (uint32_t)L->tensor_of[v];
        return LLMC_OK;
    }
    const llmc_value *val = &L->g->values[v];
    if (!val->is_const)
        return lower_fail(L, LLMC_E_INTERNAL, v, "read before it is computed");
    int rc = weight_tensor(L, v, val->konst.data, val->konst.nbytes, t);
    if (!rc && cg_weight_share_const(&L->p->tensors[*t], val))   /* lazy bytes: segment_writer.h */
        rc = out_of_memory(L);
    return rc;
}

int lower_input(lower_ctx *L, int k, uint32_t *t)
{
    int v = node_in(L, k);
    if (v < 0)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "input %d is missing", k);
    return tensor_of_value(L, v, t);
}

int lower_output(lower_ctx *L, int k, uint32_t *t)
{
    int v = node_out(L, k);
    if (v < 0)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "output %d is missing", k);
    if (L->tensor_of[v] >= 0)
        return lower_fail(L, LLMC_E_INTERNAL, v, "computed twice");
    return tensor_from_value(L, v, t);
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

/* A float scalar Weight the lowering makes up (Gemm's alpha and beta). */
static int scalar_weight(lower_ctx *L, const char *suffix, float value, uint32_t *t)
{
    float *data = malloc(sizeof *data);
    if (!data)
        return out_of_memory(L);
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

static cg_op *emit_named(lower_ctx *L, int code, const char *name)
{
    cg_plan *p = L->p;
    if (p->n_ops == p->cap_ops) {
        int cap = p->cap_ops ? 2 * p->cap_ops : 64;
        cg_op *arr = realloc(p->ops, sizeof *arr * (size_t)cap);
        if (!arr) {
            out_of_memory(L);
            return NULL;
        }
        p->ops = arr;
        p->cap_ops = cap;
    }
    cg_op *op = &p->ops[p->n_ops];
    memset(op, 0, sizeof *op);
    op->name = dup_cat(name, "");
    if (!op->name) {
        out_of_memory(L);
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
    return emit_named(L, code, n->name[0] ? n->name : n->op_type);
}

static int push_index(lower_ctx *L, uint32_t **arr, int *n, uint32_t t)
{
    uint32_t *a = realloc(*arr, sizeof *a * (size_t)(*n + 1));
    if (!a)
        return out_of_memory(L);
    a[(*n)++] = t;
    *arr = a;
    return LLMC_OK;
}

int op_add_input(lower_ctx *L, cg_op *op, uint32_t t)
{
    for (int i = 0; i < op->n_inputs; i++)
        if (op->inputs[i] == t && op->code == CG_OP_COPY)
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
        out_of_memory(L);
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

/* One op reading node inputs 0..n_inputs-1 into output 0. */
static int emit_simple(lower_ctx *L, int code, int kind, int n_inputs)
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

static int emit_to(lower_ctx *L, int code, int kind, uint32_t a, uint32_t b, uint32_t out)
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

/* ---- elementwise and compute ops ---- */

static int lower_unary(lower_ctx *L, int kind) { return emit_simple(L, CG_OP_UNARY, kind, 1); }
static int lower_cast(lower_ctx *L, int kind) { return emit_simple(L, CG_OP_CAST, kind, 1); }
static int lower_where(lower_ctx *L, int kind) { return emit_simple(L, CG_OP_WHERE, kind, 3); }
static int lower_matmul(lower_ctx *L, int kind) { return emit_simple(L, CG_OP_MATMUL, kind, 2); }
static int lower_range(lower_ctx *L, int kind) { return emit_simple(L, CG_OP_RANGE, kind, 3); }
/* Reshape, Flatten, Squeeze, Unsqueeze, Identity: the output's dims already
 * say everything; the shape/axes operands are not needed at run time. */
static int lower_reshape(lower_ctx *L, int kind) { return emit_simple(L, CG_OP_RESHAPE, kind, 1); }

static int broadcast_dims(lower_ctx *L, const cg_tensor *a, const cg_tensor *b, int *rank,
                          llmc_affine *dims)
{
    *rank = a->rank > b->rank ? a->rank : b->rank;
    for (int k = 0; k < *rank; k++) {
        int ka = k - (*rank - a->rank), kb = k - (*rank - b->rank);
        llmc_affine da = ka >= 0 ? a->dims[ka] : llmc_aff_const(1);
        llmc_affine db = kb >= 0 ? b->dims[kb] : llmc_aff_const(1);
        if (!llmc_aff_eq(da, db) && !llmc_aff_eq(da, llmc_aff_const(1)) &&
            !llmc_aff_eq(db, llmc_aff_const(1)))
            return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "operands do not broadcast");
        dims[k] = llmc_aff_eq(da, llmc_aff_const(1)) ? db : da;
    }
    return LLMC_OK;
}

/* Binary ops; Max and Min are variadic in ONNX: a chain of Binary ops. */
static int lower_binary(lower_ctx *L, int kind)
{
    int n = cur_node(L)->n_inputs;
    if (n == 1)
        return emit_simple(L, CG_OP_RESHAPE, 0, 1);
    if (n == 2)
        return emit_simple(L, CG_OP_BINARY, kind, 2);
    uint32_t acc, next, out;
    int rc = lower_input(L, 0, &acc);
    if (!rc)
        rc = lower_output(L, 0, &out);
    for (int k = 1; k < n && !rc; k++) {
        uint32_t in;
        rc = lower_input(L, k, &in);
        if (rc)
            break;
        next = out;
        if (k < n - 1) {
            int rank;
            llmc_affine dims[LLMC_MAX_RANK];
            const cg_tensor *ta = &L->p->tensors[acc], *tb = &L->p->tensors[in];
            int dtype = ta->dtype;
            rc = broadcast_dims(L, ta, tb, &rank, dims);
            if (!rc)
                rc = lower_temp(L, "/partial", dtype, rank, dims, &next);
        }
        if (!rc)
            rc = emit_to(L, CG_OP_BINARY, kind, acc, in, next);
        acc = next;
    }
    return rc;
}

/* Gemm: Y = alpha * A' @ B' + beta * C, as [Copy transposes] MatMul
 * [Mul alpha] [Mul beta] [Add C]. */
static int lower_gemm(lower_ctx *L, int kind)
{
    (void)kind;
    int node = L->node;
    float alpha = llmc_node_attr_float(L->g, node, "alpha", 1.0f);
    float beta = llmc_node_attr_float(L->g, node, "beta", 1.0f);
    bool has_c = node_in(L, 2) >= 0 && beta != 0.0f;
    uint32_t a, b, y, cur, factor, c;
    int rc = lower_input(L, 0, &a);
    if (!rc)
        rc = lower_input(L, 1, &b);
    if (!rc && llmc_node_attr_int(L->g, node, "transA", 0))
        rc = lower_transpose_2d(L, a, "/transA", &a);
    if (!rc && llmc_node_attr_int(L->g, node, "transB", 0))
        rc = lower_transpose_2d(L, b, "/transB", &b);
    if (!rc)
        rc = lower_output(L, 0, &y);
    if (rc)
        return rc;
    const cg_tensor ty = L->p->tensors[y];   /* a copy: lower_temp may move the array */
    cur = y;
    if (alpha != 1.0f || has_c)
        rc = lower_temp(L, "/matmul", ty.dtype, ty.rank, ty.dims, &cur);
    if (!rc)
        rc = emit_to(L, CG_OP_MATMUL, 0, a, b, cur);
    if (!rc && alpha != 1.0f) {
        uint32_t scaled = y;
        rc = scalar_weight(L, "/alpha", alpha, &factor);
        if (!rc && has_c)
            rc = lower_temp(L, "/scaled", ty.dtype, ty.rank, ty.dims, &scaled);
        if (!rc)
            rc = emit_to(L, CG_OP_BINARY, CG_BIN_MUL, cur, factor, scaled);
        cur = scaled;
    }
    if (rc || !has_c)
        return rc;
    rc = lower_input(L, 2, &c);
    if (!rc && beta != 1.0f) {
        const cg_tensor tc = L->p->tensors[c];
        uint32_t scaled = 0;
        rc = scalar_weight(L, "/beta", beta, &factor);
        if (!rc)
            rc = lower_temp(L, "/beta_c", tc.dtype, tc.rank, tc.dims, &scaled);
        if (!rc)
            rc = emit_to(L, CG_OP_BINARY, CG_BIN_MUL, c, factor, scaled);
        c = scaled;
    }
    return rc ? rc : emit_to(L, CG_OP_BINARY, CG_BIN_ADD, cur, c, y);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Axes from the attribute (opset < 18 except ReduceSum) or from input 1. */
static int reduce_axes(lower_ctx *L, int rank, int32_t *axes, int *n)
{
    const llmc_attr *attr = llmc_node_attr(L->g, L->node, "axes");
    int64_t raw[LLMC_MAX_RANK];
    int rc = LLMC_OK;
    *n = 0;
    if (attr && attr->type == LLMC_ATTR_INTS) {
        if (attr->n_ints > LLMC_MAX_RANK)
            return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "too many axes");
        for (int i = 0; i < attr->n_ints; i++)    /* ints is NULL when axes = [] */
            raw[i] = attr->ints[i];
        *n = attr->n_ints;
    } else {
        rc = lower_const_ints(L, 1, raw, LLMC_MAX_RANK, n);
    }
    for (int i = 0; i < *n && !rc; i++)
        rc = lower_axis(L, raw[i], rank, &axes[i]);
    if (rc)
        return rc;
    qsort(axes, (size_t)*n, sizeof *axes, cmp_i32);
    int unique = 0;
    for (int i = 0; i < *n; i++)
        if (unique == 0 || axes[unique - 1] != axes[i])
            axes[unique++] = axes[i];
    *n = unique;
    return LLMC_OK;
}

static int lower_reduce(lower_ctx *L, int kind)
{
    int rank = node_in_value(L, 0)->shape.rank;
    int32_t axes[LLMC_MAX_RANK];
    int n_axes;
    int rc = reduce_axes(L, rank, axes, &n_axes);
    if (rc)
        return rc;
    if (n_axes == 0) {
        if (llmc_node_attr_int(L->g, L->node, "noop_with_empty_axes", 0))
            return emit_simple(L, CG_OP_RESHAPE, 0, 1);
        for (int k = 0; k < rank; k++)
            axes[n_axes++] = k;
    }
    rc = emit_simple(L, CG_OP_REDUCE, kind, 1);
    if (rc)
        return rc;
    cg_op *op = &L->p->ops[L->p->n_ops - 1];
    memcpy(op->axes, axes, sizeof *axes * (size_t)n_axes);
    op->n_axes = n_axes;
    op->keepdims = llmc_node_attr_int(L->g, L->node, "keepdims", 1) != 0;
    return LLMC_OK;
}

static int lower_softmax(lower_ctx *L, int kind)
{
    int32_t axis = 0;
    int rc = lower_axis(L, llmc_node_attr_int(L->g, L->node, "axis", -1),
                        node_in_value(L, 0)->shape.rank, &axis);
    if (!rc)
        rc = emit_simple(L, CG_OP_SOFTMAX, kind, 1);
    if (!rc)
        L->p->ops[L->p->n_ops - 1].axis = axis;
    return rc;
}

static bool layernorm_stats_used(const lower_ctx *L)
{
    for (int k = 1; k <= 2; k++) {
        int v = node_out(L, k);
        if (v >= 0 && llmc_graph_use_count(L->g, v) > 0)
            return true;
    }
    return false;
}

/* Mean (k = 1) or InvStdDev (k = 2): the node's value when it has one, else
 * a scratch tensor of x's dims with 1 over [axis, rank). */
static int layernorm_stats_output(lower_ctx *L, int k, int32_t axis, uint32_t *t)
{
    if (node_out(L, k) >= 0)
        return lower_output(L, k, t);
    const llmc_shape *x = &node_in_value(L, 0)->shape;
    llmc_affine dims[LLMC_MAX_RANK];
    for (int a = 0; a < x->rank; a++)
        dims[a] = a < axis ? x->dims[a] : llmc_aff_const(1);
    return lower_temp(L, k == 1 ? "/mean" : "/inv_std_dev", LLMC_DT_FLOAT, x->rank, dims, t);
}

/* Outputs y, plus Mean and InvStdDev (both, the plan op has 1 or 3 outputs)
 * when either is used. */
static int lower_layernorm(lower_ctx *L, int kind)
{
    (void)kind;
    int32_t axis = 0;
    uint32_t in[3], out[3];
    int n_in = node_in(L, 2) >= 0 ? 3 : 2, n_out = layernorm_stats_used(L) ? 3 : 1;
    int rc = lower_axis(L, llmc_node_attr_int(L->g, L->node, "axis", -1),
                        node_in_value(L, 0)->shape.rank, &axis);
    for (int k = 0; k < n_in && !rc; k++)
        rc = lower_input(L, k, &in[k]);
    if (!rc)
        rc = lower_output(L, 0, &out[0]);
    for (int k = 1; k < n_out && !rc; k++)
        rc = layernorm_stats_output(L, k, axis, &out[k]);
    if (rc)
        return rc;
    cg_op *op = lower_emit(L, CG_OP_LAYERNORM);
    if (!op)
        return L->err->code;
    op->axis = axis;
    op->epsilon = llmc_node_attr_float(L->g, L->node, "epsilon", 1e-5f);
    for (int k = 0; k < n_in && !rc; k++)
        rc = op_add_input(L, op, in[k]);
    for (int k = 0; k < n_out && !rc; k++)
        rc = op_add_output(L, op, out[k]);
    return rc;
}

/* ---- Trilu, ScatterND, CumSum ---- */

/* Trilu(x[, k]): kind 1 keeps the upper triangle (attribute upper, default
 * 1).  k, constant or computed, stays an operand the kernel reads. */
static int lower_trilu(lower_ctx *L, int kind)
{
    (void)kind;
    bool upper = llmc_node_attr_int(L->g, L->node, "upper", 1) != 0;
    return emit_simple(L, CG_OP_TRILU, upper ? 1 : 0, node_in(L, 1) >= 0 ? 2 : 1);
}

/* ScatterND(data, indices, updates): reduction none (default), add, mul,
 * max or min. */
static int lower_scatter_nd(lower_ctx *L, int kind)
{
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    const llmc_attr *a = llmc_node_attr(L->g, L->node, "reduction");
    const char *reduction = a && a->type == LLMC_ATTR_STRING && a->s ? a->s : "none";
    for (kind = 0; kind < (int)(sizeof names / sizeof *names); kind++)
        if (strcmp(reduction, names[kind]) == 0)
            return emit_simple(L, CG_OP_SCATTER_ND, kind, 3);
    return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "reduction '%.64s' is not supported (none, add, "
                      "mul, max, min)", reduction);
}

/* CumSum(x, axis): the axis must be a compile-time constant; attributes
 * exclusive and reverse become kind bits. */
static int lower_cumsum(lower_ctx *L, int kind)
{
    int64_t axis;
    int32_t norm = 0;
    int n;
    int rc = lower_const_ints(L, 1, &axis, 1, &n);
    if (!rc && n != 1)
        rc = lower_fail(L, LLMC_E_UNSUPPORTED, node_in(L, 1), "axis must be one constant integer");
    if (!rc)
        rc = lower_axis(L, axis, node_in_value(L, 0)->shape.rank, &norm);
    kind = (llmc_node_attr_int(L->g, L->node, "exclusive", 0) ? CG_CUMSUM_EXCLUSIVE : 0) |
           (llmc_node_attr_int(L->g, L->node, "reverse", 0) ? CG_CUMSUM_REVERSE : 0);
    if (!rc)
        rc = emit_simple(L, CG_OP_CUMSUM, kind, 1);
    if (!rc)
        L->p->ops[L->p->n_ops - 1].axis = norm;
    return rc;
}

/* ---- shapes and constants ---- */

static int emit_symbols(lower_ctx *L, const llmc_affine *values, int n)
{
    uint32_t out;
    int rc = lower_output(L, 0, &out);
    if (rc)
        return rc;
    cg_op *op = lower_emit(L, CG_OP_SYMBOLS);
    if (!op)
        return L->err->code;
    op->values = malloc(sizeof *values * (size_t)(n > 0 ? n : 1));
    if (!op->values)
        return out_of_memory(L);
    if (n > 0)
        memcpy(op->values, values, sizeof *values * (size_t)n);
    op->n_values = n;
    return op_add_output(L, op, out);
}

static int64_t clamp_i64(int64_t x, int64_t lo, int64_t hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* Shape (opset 15 start/end included): the input's dims, evaluated at run time. */
static int lower_shape(lower_ctx *L, int kind)
{
    (void)kind;
    const llmc_shape *s = &node_in_value(L, 0)->shape;
    if (s->rank < 0)
        return lower_fail(L, LLMC_E_UNSUPPORTED, node_in(L, 0), "shape is unknown");
    int64_t start = llmc_node_attr_int(L->g, L->node, "start", 0);
    int64_t end = llmc_node_attr_int(L->g, L->node, "end", s->rank);
    start = clamp_i64(start < 0 ? start + s->rank : start, 0, s->rank);
    end = clamp_i64(end < 0 ? end + s->rank : end, 0, s->rank);
    return emit_symbols(L, s->dims + start, end > start ? (int)(end - start) : 0);
}

/* llmc.Symbols: INTS "values", three per element (c, s, p). */
static int lower_symbols(lower_ctx *L, int kind)
{
    (void)kind;
    const llmc_attr *a = llmc_node_attr(L->g, L->node, "values");
    if (!a || a->type != LLMC_ATTR_INTS || a->n_ints % 3)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "needs INTS 'values', 3 per element");
    llmc_affine *values = malloc(sizeof *values * (size_t)(a->n_ints / 3 + 1));
    if (!values)
        return out_of_memory(L);
    for (int i = 0; i < a->n_ints / 3; i++) {
        values[i].c = a->ints[3 * i];
        values[i].s = a->ints[3 * i + 1];
        values[i].p = a->ints[3 * i + 2];
    }
    int rc = emit_symbols(L, values, a->n_ints / 3);
    free(values);
    return rc;
}

/* Constant: no op; its output becomes a Weight tensor over the attribute. */
static int lower_constant(lower_ctx *L, int kind)
{
    (void)kind;
    int v = node_out(L, 0);
    const llmc_value *val = &L->g->values[v];
    uint32_t t;
    if (val->is_const)
        return tensor_of_value(L, v, &t);
    if (cur_node(L)->n_attrs != 1)
        return lower_fail(L, LLMC_E_UNSUPPORTED, v, "needs exactly one value attribute");
    const llmc_attr *a = &cur_node(L)->attrs[0];
    switch (a->type) {
    case LLMC_ATTR_TENSOR: return weight_tensor(L, v, a->t_data.data, a->t_data.nbytes, &t);
    case LLMC_ATTR_FLOAT: return weight_tensor(L, v, &a->f, sizeof a->f, &t);
    case LLMC_ATTR_INT: return weight_tensor(L, v, &a->i, sizeof a->i, &t);
    case LLMC_ATTR_FLOATS:
        return weight_tensor(L, v, a->floats, sizeof *a->floats * (size_t)a->n_floats, &t);
    case LLMC_ATTR_INTS:
        return weight_tensor(L, v, a->ints, sizeof *a->ints * (size_t)a->n_ints, &t);
    default: return lower_fail(L, LLMC_E_UNSUPPORTED, v, "attribute '%s' is not supported", a->name);
    }
}

static double scalar_as_double(int dtype, const void *data)
{
    switch (dtype) {
    case LLMC_DT_FLOAT: return *(const float *)data;
    case LLMC_DT_UINT8: return *(const uint8_t *)data;
    case LLMC_DT_INT8: return *(const int8_t *)data;
    case LLMC_DT_INT32: return *(const int32_t *)data;
    case LLMC_DT_INT64: return (double)*(const int64_t *)data;
    case LLMC_DT_BOOL: return *(const uint8_t *)data != 0;
    default: return 0.0;
    }
}

/* ConstantOfShape: Fill with the one-element "value" (default float 0). */
static int lower_constant_of_shape(lower_ctx *L, int kind)
{
    const llmc_attr *a = llmc_node_attr(L->g, L->node, "value");
    double value = 0.0;
    if (a && a->type == LLMC_ATTR_TENSOR && a->t_data.nbytes >= llmc_dtype_size(a->t_dtype) &&
        llmc_dtype_size(a->t_dtype) > 0)
        value = scalar_as_double(a->t_dtype, a->t_data.data);
    int rc = emit_simple(L, CG_OP_FILL, kind, 0);
    if (!rc)
        L->p->ops[L->p->n_ops - 1].value = value;
    return rc;
}

/* ---- llmc-domain fused ops (compiler/llmc_ops.h) ---- */

/* Gelu: INT tanh selects the tanh approximation. */
static int lower_gelu(lower_ctx *L, int kind)
{
    (void)kind;
    bool tanh_form = llmc_node_attr_int(L->g, L->node, "tanh", 0) != 0;
    return lower_unary(L, tanh_form ? CG_UN_GELU_TANH : CG_UN_GELU);
}

static int lower_rmsnorm(lower_ctx *L, int kind)
{
    int rc = emit_simple(L, CG_OP_RMSNORM, kind, 2);
    if (!rc)
        L->p->ops[L->p->n_ops - 1].epsilon = llmc_node_attr_float(L->g, L->node, "epsilon", 1e-5f);
    return rc;
}

static int lower_rope(lower_ctx *L, int kind)
{
    int64_t rotary_dim = llmc_node_attr_int(L->g, L->node, "rotary_dim", 0);
    const llmc_shape *x = &node_in_value(L, 0)->shape;
    if (rotary_dim <= 0 || rotary_dim % 2 || x->rank < 2 ||
        !llmc_aff_is_const(x->dims[x->rank - 1]) || rotary_dim > x->dims[x->rank - 1].c)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "rotary_dim %lld must be even, > 0 and "
                          "at most the constant last dim of x [..., S, D]", (long long)rotary_dim);
    int rc = emit_simple(L, CG_OP_ROPE, kind, 3);
    if (!rc)
        L->p->ops[L->p->n_ops - 1].rotary_dim = (int32_t)rotary_dim;
    return rc;
}

/* Checks W (a float32 constant [K, N]) against x [..., K] and the outputs,
 * whose last dims must add up to N. */
static int check_linear(lower_ctx *L, int wv)
{
    const llmc_value *w = &L->g->values[wv];
    const llmc_shape *x = &node_in_value(L, 0)->shape;
    if (!w->is_const || w->dtype != LLMC_DT_FLOAT || w->shape.rank != 2 ||
        !shape_is_const(&w->shape) || const_elems(&w->shape) * sizeof(float) != w->konst.nbytes)
        return lower_fail(L, LLMC_E_UNSUPPORTED, wv, "W must be a float32 constant [K, N]");
    if (x->rank < 1 || !llmc_aff_eq(x->dims[x->rank - 1], w->shape.dims[0]))
        return lower_fail(L, LLMC_E_UNSUPPORTED, node_in(L, 0), "must be [..., K] with K = %lld",
                          (long long)w->shape.dims[0].c);
    int64_t sum = 0;
    for (int j = 0; j < cur_node(L)->n_outputs; j++) {
        int v = node_out(L, j);
        const llmc_shape *y = v >= 0 ? &L->g->values[v].shape : NULL;
        if (!y || y->rank != x->rank || !llmc_aff_is_const(y->dims[y->rank - 1]))
            return lower_fail(L, LLMC_E_UNSUPPORTED, v, "output %d must have x's rank and a "
                              "constant last dim", j);
        sum += y->dims[y->rank - 1].c;
    }
    if (sum != w->shape.dims[1].c)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "output last dims add up to %lld; W has "
                          "N = %lld columns", (long long)sum, (long long)w->shape.dims[1].c);
    if (node_in(L, 3) >= 0 && cur_node(L)->n_outputs != 1)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "a residual needs exactly one output");
    return LLMC_OK;
}

/* Linear(x, W, bias?, residual?) -> y_0..: kind bit 0 = bias, bit 1 = residual. */
static int lower_linear(lower_ctx *L, int kind)
{
    (void)kind;
    int wv = node_in(L, 1);
    uint32_t in[4];
    int n_in = 2;
    uint8_t bits = 0;
    if (wv < 0)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "input 1 (W) is missing");
    int rc = check_linear(L, wv);
    if (!rc)
        rc = lower_input(L, 0, &in[0]);
    if (!rc)
        rc = lower_linear_weight(L, wv, &in[1]);
    for (int k = 2; k <= 3 && !rc; k++)
        if (node_in(L, k) >= 0) {
            bits |= (uint8_t)(1u << (k - 2));
            rc = lower_input(L, k, &in[n_in++]);
        }
    if (rc)
        return rc;
    cg_op *op = lower_emit(L, CG_OP_LINEAR);
    if (!op)
        return L->err->code;
    op->kind = bits;
    for (int k = 0; k < n_in && !rc; k++)
        rc = op_add_input(L, op, in[k]);
    for (int j = 0; j < cur_node(L)->n_outputs && !rc; j++) {
        uint32_t y;
        rc = lower_output(L, j, &y);
        if (!rc)
            rc = op_add_output(L, op, y);
    }
    return rc;
}

/* ---- fused ops (compiler/llmc_ops.h) ---- */

static int live_llmc_ops(const llmc_graph *g, const char *op_type)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += !g->nodes[i].dead && llmc_is_op(&g->nodes[i], op_type);
    return n;
}

/* llmc.Attention(q, k, v, cos?, sin?): the attributes become op fields;
 * cos and sin, constants, become Weight tensors.  kv_heads defaults to
 * heads, scale to 1/sqrt(head_dim), cache to 0. */
static int lower_attention(lower_ctx *L, int kind)
{
    (void)kind;
    const llmc_graph *g = L->g;
    int node = L->node, n_caches = live_llmc_ops(g, "Attention");
    int64_t heads = llmc_node_attr_int(g, node, "heads", 0);
    int64_t kv_heads = llmc_node_attr_int(g, node, "kv_heads", heads);
    int64_t head_dim = llmc_node_attr_int(g, node, "head_dim", 0);
    int64_t rotary_dim = llmc_node_attr_int(g, node, "rotary_dim", 0);
    int64_t cache = llmc_node_attr_int(g, node, "cache", 0);
    float scale = llmc_node_attr_float(g, node, "scale", head_dim > 0 ? 1.0f / sqrtf((float)head_dim) : 1.0f);
    int n_in = rotary_dim > 0 ? 5 : 3;
    if (heads < 1 || kv_heads < 1 || heads % kv_heads || head_dim < 1 || heads * head_dim > INT32_MAX ||
        rotary_dim < 0 || rotary_dim % 2 || rotary_dim > head_dim)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "heads %lld, kv_heads %lld, head_dim %lld, rotary_dim "
                          "%lld: need kv_heads | heads and an even rotary_dim <= head_dim",
                          (long long)heads, (long long)kv_heads, (long long)head_dim, (long long)rotary_dim);
    if (cache < 0 || cache >= n_caches)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "cache %lld outside [0, %d Attention ops)",
                          (long long)cache, n_caches);
    if (!isfinite(scale))
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "scale is not finite");
    uint32_t in[5], out;
    int rc = LLMC_OK;
    for (int k = 0; k < n_in && !rc; k++)
        rc = lower_input(L, k, &in[k]);
    if (!rc)
        rc = lower_output(L, 0, &out);
    cg_op *op = rc ? NULL : lower_emit(L, CG_OP_ATTENTION);
    if (!op)
        return rc ? rc : L->err->code;
    op->heads = (int32_t)heads;
    op->kv_heads = (int32_t)kv_heads;
    op->head_dim = (int32_t)head_dim;
    op->rotary_dim = (int32_t)rotary_dim;
    op->scale = scale;
    op->cache = (uint32_t)cache;
    for (int k = 0; k < n_in && !rc; k++)
        rc = op_add_input(L, op, in[k]);
    return rc ? rc : op_add_output(L, op, out);
}

/* ---- dispatch ---- */

typedef struct {
    const char *op_type;
    int (*lower)(lower_ctx *L, int kind);
    int kind;
} lowering;

static const lowering lowerings[] = {
    {"Add", lower_binary, CG_BIN_ADD}, {"Sub", lower_binary, CG_BIN_SUB},
    {"Mul", lower_binary, CG_BIN_MUL}, {"Div", lower_binary, CG_BIN_DIV},
    {"Pow", lower_binary, CG_BIN_POW}, {"Max", lower_binary, CG_BIN_MAX},
    {"Min", lower_binary, CG_BIN_MIN}, {"Equal", lower_binary, CG_BIN_EQUAL},
    {"Less", lower_binary, CG_BIN_LESS}, {"Greater", lower_binary, CG_BIN_GREATER},
    {"LessOrEqual", lower_binary, CG_BIN_LESS_OR_EQUAL},
    {"GreaterOrEqual", lower_binary, CG_BIN_GREATER_OR_EQUAL},
    {"And", lower_binary, CG_BIN_AND}, {"Or", lower_binary, CG_BIN_OR},
    {"Xor", lower_binary, CG_BIN_XOR},
    {"Neg", lower_unary, CG_UN_NEG}, {"Abs", lower_unary, CG_UN_ABS},
    {"Sqrt", lower_unary, CG_UN_SQRT}, {"Exp", lower_unary, CG_UN_EXP},
    {"Log", lower_unary, CG_UN_LOG}, {"Erf", lower_unary, CG_UN_ERF},
    {"Tanh", lower_unary, CG_UN_TANH}, {"Sigmoid", lower_unary, CG_UN_SIGMOID},
    {"Reciprocal", lower_unary, CG_UN_RECIPROCAL}, {"Relu", lower_unary, CG_UN_RELU},
    {"Sin", lower_unary, CG_UN_SIN}, {"Cos", lower_unary, CG_UN_COS},
    {"Not", lower_unary, CG_UN_NOT}, {"Floor", lower_unary, CG_UN_FLOOR},
    {"Ceil", lower_unary, CG_UN_CEIL},
    {"Where", lower_where, 0}, {"Cast", lower_cast, 0},
    {"MatMul", lower_matmul, 0}, {"Gemm", lower_gemm, 0},
    {"ReduceMean", lower_reduce, CG_RED_MEAN}, {"ReduceSum", lower_reduce, CG_RED_SUM},
    {"ReduceMax", lower_reduce, CG_RED_MAX}, {"ReduceMin", lower_reduce, CG_RED_MIN},
    {"ReduceProd", lower_reduce, CG_RED_PROD},
    {"Softmax", lower_softmax, 0}, {"LayerNormalization", lower_layernorm, 0},
    {"Gather", lower_gather, 0},
    {"Transpose", lower_transpose, 0}, {"Slice", lower_slice, 0},
    {"Concat", lower_concat, 0}, {"Split", lower_split, 0}, {"Expand", lower_expand, 0},
    {"Reshape", lower_reshape, 0}, {"Flatten", lower_reshape, 0},
    {"Squeeze", lower_reshape, 0}, {"Unsqueeze", lower_reshape, 0},
    {"Identity", lower_reshape, 0},
    {"Shape", lower_shape, 0}, {"Constant", lower_constant, 0},
    {"ConstantOfShape", lower_constant_of_shape, 0}, {"Range", lower_range, 0},
    {"Trilu", lower_trilu, 0}, {"ScatterND", lower_scatter_nd, 0}, {"CumSum", lower_cumsum, 0},
};

/* The llmc domain (compiler/llmc_ops.h). */
static const lowering llmc_lowerings[] = {
    {"Symbols", lower_symbols, 0}, {"RMSNorm", lower_rmsnorm, 0},
    {"Gelu", lower_gelu, 0}, {"Silu", lower_unary, CG_UN_SILU},
    {"SwiGLU", lower_binary, CG_BIN_SWIGLU}, {"Linear", lower_linear, 0},
    {"QuantizeRows", lower_quantize_rows, 0}, {"ShadowLinear", lower_shadow_linear, 0},
    {"Rope", lower_rope, 0}, {"Attention", lower_attention, 0},
};

#define COUNT_OF(a) (sizeof (a) / sizeof *(a))

static const lowering *find_in(const lowering *table, size_t n, const char *op_type)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i].op_type, op_type) == 0)
            return &table[i];
    return NULL;
}

static const lowering *find_lowering(const llmc_node *n)
{
    if (strcmp(n->domain, LLMC_DOMAIN) == 0)
        return find_in(llmc_lowerings, COUNT_OF(llmc_lowerings), n->op_type);
    if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
        return NULL;
    return find_in(lowerings, COUNT_OF(lowerings), n->op_type);
}

const char *cg_llmc_op(int i)
{
    return i >= 0 && (size_t)i < COUNT_OF(llmc_lowerings) ? llmc_lowerings[i].op_type : NULL;
}

bool cg_can_lower(const char *op_type)
{
    llmc_node n = {.op_type = (char *)op_type, .domain = ""};
    return find_lowering(&n) != NULL;
}

/* ---- graph inputs and outputs ---- */

static int push_binding(lower_ctx *L, cg_binding **arr, int *n, uint32_t t, int is_output)
{
    cg_binding *a = realloc(*arr, sizeof *a * (size_t)(*n + 1));
    if (!a)
        return out_of_memory(L);
    *arr = a;
    cg_binding *b = &a[(*n)++];
    b->tensor = t;
    b->role = llmc_io_role(L->p->tensors[t].name, is_output, &b->layer);
    return LLMC_OK;
}

static int bind_inputs(lower_ctx *L)
{
    for (int i = 0; i < L->g->n_inputs; i++) {
        int v = L->g->inputs[i];
        uint32_t t;
        int rc = L->tensor_of[v] >= 0 ? LLMC_OK : tensor_from_value(L, v, &t);
        if (!rc)
            rc = push_binding(L, &L->p->inputs, &L->p->n_inputs, (uint32_t)L->tensor_of[v], 0);
        if (rc)
            return rc;
    }
    return LLMC_OK;
}

/* An output that is a constant or a graph input gets its own Arena tensor,
 * filled by a Reshape (a plain copy). */
static int output_tensor(lower_ctx *L, int v, uint32_t *t)
{
    int rc = tensor_of_value(L, v, t);
    if (rc || (!L->g->values[v].is_graph_input && !L->p->tensors[*t].is_weight))
        return rc;
    uint32_t src = *t;
    const cg_tensor s = L->p->tensors[src];
    rc = lower_new_tensor(L, s.name, "", s.dtype, s.rank, s.dims, t);
    if (rc)
        return rc;
    cg_op *op = emit_named(L, CG_OP_RESHAPE, s.name);
    if (!op)
        return L->err->code;
    rc = op_add_input(L, op, src);
    return rc ? rc : op_add_output(L, op, *t);
}

static int bind_outputs(lower_ctx *L)
{
    L->node = -1;
    for (int i = 0; i < L->g->n_outputs; i++) {
        int v = L->g->outputs[i];
        uint32_t t;
        if (L->tensor_of[v] < 0 && !L->g->values[v].is_const)
            return llmc_fail(L->err, LLMC_E_UNSUPPORTED, "graph output '%s' is never computed",
                             L->g->values[v].name);
        int rc = output_tensor(L, v, &t);
        if (!rc)
            rc = push_binding(L, &L->p->outputs, &L->p->n_outputs, t, 1);
        if (rc)
            return rc;
    }
    return LLMC_OK;
}

/* ---- driver ---- */

static bool all_float32(const lower_ctx *L, const cg_op *op)
{
    for (int k = 0; k < op->n_inputs; k++)
        if (L->p->tensors[op->inputs[k]].dtype != LLMC_DT_FLOAT)
            return false;
    for (int k = 0; k < op->n_outputs; k++)
        if (L->p->tensors[op->outputs[k]].dtype != LLMC_DT_FLOAT)
            return false;
    return true;
}

/* The dtypes the runtime's kernels handle (the verifier checks the same at
 * plan open: elementwise, Cast and Reduce by the kernels' tables, MatMul,
 * Softmax and LayerNorm float32 only): a node the importer accepts with
 * other dtypes (Ceil on int8, Gemm on int32) is refused here, at compile
 * time, rather than written into a plan the runtime rejects. */
static int check_kernel_dtypes(lower_ctx *L, const cg_op *op)
{
    const cg_tensor *t = L->p->tensors;
    int x = op->n_inputs > 0 ? t[op->inputs[0]].dtype : 0;
    int b = op->n_inputs > 1 ? t[op->inputs[1]].dtype : 0;
    int y = op->n_outputs > 0 ? t[op->outputs[0]].dtype : 0;
    bool ok = true;
    switch (op->code) {
    case CG_OP_UNARY: ok = k_unary_supports(op->kind, x, y); break;
    case CG_OP_BINARY: ok = k_binary_supports(op->kind, x, b, y); break;
    case CG_OP_CAST: ok = k_cast_supports(x, y); break;
    case CG_OP_REDUCE: ok = k_reduce_supports(op->kind, x, y); break;
    case CG_OP_MATMUL: case CG_OP_SOFTMAX: case CG_OP_LAYERNORM: ok = all_float32(L, op); break;
    case CG_OP_SCATTER_ND: ok = k_scatter_nd_supports(op->kind, x); break;
    case CG_OP_CUMSUM: ok = k_cumsum_supports(x); break;
    default: break;
    }
    if (ok)
        return LLMC_OK;
    return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "the runtime has no kernel for it on %s%s%s -> %s",
                      llmc_dtype_name(x), op->n_inputs > 1 ? ", " : "",
                      op->n_inputs > 1 ? llmc_dtype_name(b) : "", llmc_dtype_name(y));
}

static int lower_node(lower_ctx *L)
{
    const llmc_node *n = cur_node(L);
    const lowering *low = find_lowering(n);
    if (!low)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "op '%s%s%s' has no lowering", n->domain,
                          n->domain[0] ? "." : "", n->op_type);
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0 && L->g->values[n->outputs[k]].shape.rank < 0)
            return lower_fail(L, LLMC_E_UNSUPPORTED, n->outputs[k], "shape is unknown");
    int first_op = L->p->n_ops;
    int rc = low->lower(L, low->kind);
    for (int i = first_op; !rc && i < L->p->n_ops; i++)
        rc = check_kernel_dtypes(L, &L->p->ops[i]);
    int64_t chunk = llmc_node_attr_int(L->g, L->node, "npu_chunk", 0);
    for (int i = first_op; !rc && chunk > 0 && i < L->p->n_ops; i++) {
        L->p->ops[i].npu = true;
        L->p->npu_chunk = (uint32_t)chunk;
    }
    return rc;
}

static int lower_nodes(lower_ctx *L)
{
    const llmc_graph *g = L->g;
    int *order = malloc(sizeof *order * (size_t)(g->n_nodes + 1));
    if (!order)
        return out_of_memory(L);
    int cycle = -1;
    int n = llmc_graph_topo_order(g, order, &cycle);
    int rc = LLMC_OK;
    if (n < 0)
        rc = cycle >= 0 ? llmc_fail(L->err, LLMC_E_UNSUPPORTED, "node '%s' (#%d, %s) is on a cycle",
                                    g->nodes[cycle].name, cycle, g->nodes[cycle].op_type)
                        : out_of_memory(L);
    for (int i = 0; i < n && !rc; i++) {
        L->node = order[i];
        rc = lower_node(L);
    }
    free(order);
    return rc;
}

int cg_lower(const llmc_graph *g, const char *target, cg_plan *p, llmc_error *err)
{
    memset(p, 0, sizeof *p);
    lower_ctx L = {.g = g, .p = p, .err = err, .node = -1};
    L.target = rt_target_info_of(rt_target_index(target ? target : "generic"));
    if (!L.target)
        return llmc_fail(err, LLMC_E_USAGE, "target '%s' unknown; llmc knows%s", target,
                         RT_TARGET_NAMES);
    L.tensor_of = malloc(sizeof *L.tensor_of * (size_t)(g->n_values + 1));
    if (!L.tensor_of)
        return out_of_memory(&L);
    for (int v = 0; v < g->n_values; v++)
        L.tensor_of[v] = -1;
    int rc = bind_inputs(&L);
    if (!rc)
        rc = lower_nodes(&L);
    if (!rc)
        rc = bind_outputs(&L);
    if (!rc)
        rc = cg_check_bindings(p, err);
    if (!rc)
        rc = cg_share_weights(p, err);
    if (!rc)
        rc = cg_group_subgraphs(p, err);
    free(L.tensor_of);
    return rc;
}

void cg_plan_free(cg_plan *p)
{
    for (int i = 0; i < p->n_tensors; i++) {
        free(p->tensors[i].name);
        free(p->tensors[i].owned);
        llmc_view_unref(p->tensors[i].view);
    }
    for (int i = 0; i < p->n_ops; i++) {
        cg_op *op = &p->ops[i];
        free(op->name);
        free(op->inputs);
        free(op->outputs);
        free(op->regions);
        free(op->values);
    }
    for (int i = 0; i < p->n_subgraphs; i++) {
        free(p->subgraphs[i].inputs);
        free(p->subgraphs[i].outputs);
    }
    free(p->subgraphs);
    free(p->tensors);
    free(p->ops);
    free(p->inputs);
    free(p->outputs);
    memset(p, 0, sizeof *p);
}
