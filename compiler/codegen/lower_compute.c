/* Lowerers of the elementwise and compute ops, Trilu, ScatterND and CumSum:
 * one plan op per node, Max/Min and Gemm a short chain. */
#include "lower_ops.h"

#include <stdlib.h>
#include <string.h>

#include "lower_ctx.h"
#include "lower_layout.h"

int lower_unary(lower_ctx *L, int kind) { return lower_emit_simple(L, LLMC_RT_OP_Unary, kind, 1); }
int lower_cast(lower_ctx *L, int kind) { return lower_emit_simple(L, LLMC_RT_OP_Cast, kind, 1); }
int lower_where(lower_ctx *L, int kind) { return lower_emit_simple(L, LLMC_RT_OP_Where, kind, 3); }
int lower_matmul(lower_ctx *L, int kind) { return lower_emit_simple(L, LLMC_RT_OP_MatMul, kind, 2); }
int lower_range(lower_ctx *L, int kind) { return lower_emit_simple(L, LLMC_RT_OP_Range, kind, 3); }
/* An If is replaced by its selected branch in constant folding; one left
 * (an output of the graph itself) has no plan op. */
int lower_if(lower_ctx *L, int kind)
{
    (void)kind;
    return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "an If whose output is a graph output is not supported");
}
/* Reshape, Flatten, Squeeze, Unsqueeze, Identity: the output's dims already
 * say everything; the shape/axes operands are not needed at run time. */
int lower_reshape(lower_ctx *L, int kind) { return lower_emit_simple(L, LLMC_RT_OP_Reshape, kind, 1); }

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
int lower_binary(lower_ctx *L, int kind)
{
    int n = cur_node(L)->n_inputs;
    if (n == 1)
        return lower_emit_simple(L, LLMC_RT_OP_Reshape, 0, 1);
    if (n == 2)
        return lower_emit_simple(L, LLMC_RT_OP_Binary, kind, 2);
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
            rc = lower_emit_to(L, LLMC_RT_OP_Binary, kind, acc, in, next);
        acc = next;
    }
    return rc;
}

/* Gemm: Y = alpha * A' @ B' + beta * C, as [Copy transposes] MatMul
 * [Mul alpha] [Mul beta] [Add C]. */
int lower_gemm(lower_ctx *L, int kind)
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
        rc = lower_emit_to(L, LLMC_RT_OP_MatMul, 0, a, b, cur);
    if (!rc && alpha != 1.0f) {
        uint32_t scaled = y;
        rc = lower_scalar_weight(L, "/alpha", alpha, &factor);
        if (!rc && has_c)
            rc = lower_temp(L, "/scaled", ty.dtype, ty.rank, ty.dims, &scaled);
        if (!rc)
            rc = lower_emit_to(L, LLMC_RT_OP_Binary, LLMC_RT_BINARY_Mul, cur, factor, scaled);
        cur = scaled;
    }
    if (rc || !has_c)
        return rc;
    rc = lower_input(L, 2, &c);
    if (!rc && beta != 1.0f) {
        const cg_tensor tc = L->p->tensors[c];
        uint32_t scaled = 0;
        rc = lower_scalar_weight(L, "/beta", beta, &factor);
        if (!rc)
            rc = lower_temp(L, "/beta_c", tc.dtype, tc.rank, tc.dims, &scaled);
        if (!rc)
            rc = lower_emit_to(L, LLMC_RT_OP_Binary, LLMC_RT_BINARY_Mul, c, factor, scaled);
        c = scaled;
    }
    return rc ? rc : lower_emit_to(L, LLMC_RT_OP_Binary, LLMC_RT_BINARY_Add, cur, c, y);
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

int lower_reduce(lower_ctx *L, int kind)
{
    int rank = node_in_value(L, 0)->shape.rank;
    int32_t axes[LLMC_MAX_RANK];
    int n_axes;
    int rc = reduce_axes(L, rank, axes, &n_axes);
    if (rc)
        return rc;
    if (n_axes == 0) {
        if (llmc_node_attr_int(L->g, L->node, "noop_with_empty_axes", 0))
            return lower_emit_simple(L, LLMC_RT_OP_Reshape, 0, 1);
        for (int k = 0; k < rank; k++)
            axes[n_axes++] = k;
    }
    rc = lower_emit_simple(L, LLMC_RT_OP_Reduce, kind, 1);
    if (rc)
        return rc;
    cg_op *op = &L->p->ops[L->p->n_ops - 1];
    memcpy(op->axes, axes, sizeof *axes * (size_t)n_axes);
    op->n_axes = n_axes;
    op->keepdims = llmc_node_attr_int(L->g, L->node, "keepdims", 1) != 0;
    return LLMC_OK;
}

int lower_softmax(lower_ctx *L, int kind)
{
    int32_t axis = 0;
    int rc = lower_axis(L, llmc_node_attr_int(L->g, L->node, "axis", -1),
                        node_in_value(L, 0)->shape.rank, &axis);
    if (!rc)
        rc = lower_emit_simple(L, LLMC_RT_OP_Softmax, kind, 1);
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
int lower_layernorm(lower_ctx *L, int kind)
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
    cg_op *op = lower_emit(L, LLMC_RT_OP_LayerNorm);
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
int lower_trilu(lower_ctx *L, int kind)
{
    (void)kind;
    bool upper = llmc_node_attr_int(L->g, L->node, "upper", 1) != 0;
    return lower_emit_simple(L, LLMC_RT_OP_Trilu, upper ? 1 : 0, node_in(L, 1) >= 0 ? 2 : 1);
}

/* ScatterND(data, indices, updates): reduction none (default), add, mul,
 * max or min. */
int lower_scatter_nd(lower_ctx *L, int kind)
{
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    const llmc_attr *a = llmc_node_attr(L->g, L->node, "reduction");
    const char *reduction = a && a->type == LLMC_ATTR_STRING && a->s ? a->s : "none";
    for (kind = 0; kind < (int)(sizeof names / sizeof *names); kind++)
        if (strcmp(reduction, names[kind]) == 0)
            return lower_emit_simple(L, LLMC_RT_OP_ScatterND, kind, 3);
    return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "reduction '%.64s' is not supported (none, add, "
                      "mul, max, min)", reduction);
}

/* CumSum(x, axis): the axis must be a compile-time constant; attributes
 * exclusive and reverse become kind bits. */
int lower_cumsum(lower_ctx *L, int kind)
{
    int64_t axis;
    int32_t norm = 0;
    int n;
    int rc = lower_const_ints(L, 1, &axis, 1, &n);
    if (!rc && n != 1)
        rc = lower_fail(L, LLMC_E_UNSUPPORTED, node_in(L, 1), "axis must be one constant integer");
    if (!rc)
        rc = lower_axis(L, axis, node_in_value(L, 0)->shape.rank, &norm);
    kind = (llmc_node_attr_int(L->g, L->node, "exclusive", 0) ? CUMSUM_EXCLUSIVE : 0) |
           (llmc_node_attr_int(L->g, L->node, "reverse", 0) ? CUMSUM_REVERSE : 0);
    if (!rc)
        rc = lower_emit_simple(L, LLMC_RT_OP_CumSum, kind, 1);
    if (!rc)
        L->p->ops[L->p->n_ops - 1].axis = norm;
    return rc;
}
