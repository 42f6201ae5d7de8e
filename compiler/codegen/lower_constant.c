/* Lowerers of Shape, Constant, ConstantOfShape and llmc.Symbols: values
 * known at compile time become Weight tensors, the rest Symbols and Fill
 * ops. */
#include "lower_ops.h"

#include <stdlib.h>
#include <string.h>

#include "lower_ctx.h"

static int emit_symbols(lower_ctx *L, const llmc_affine *values, int n)
{
    uint32_t out;
    int rc = lower_output(L, 0, &out);
    if (rc)
        return rc;
    cg_op *op = lower_emit(L, LLMC_RT_OP_Symbols);
    if (!op)
        return L->err->code;
    op->values = malloc(sizeof *values * (size_t)(n > 0 ? n : 1));
    if (!op->values)
        return lower_out_of_memory(L);
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
int lower_shape(lower_ctx *L, int kind)
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
int lower_symbols(lower_ctx *L, int kind)
{
    (void)kind;
    const llmc_attr *a = llmc_node_attr(L->g, L->node, "values");
    if (!a || a->type != LLMC_ATTR_INTS || a->n_ints % 3)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "needs INTS 'values', 3 per element");
    llmc_affine *values = malloc(sizeof *values * (size_t)(a->n_ints / 3 + 1));
    if (!values)
        return lower_out_of_memory(L);
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
int lower_constant(lower_ctx *L, int kind)
{
    (void)kind;
    int v = node_out(L, 0);
    const llmc_value *val = &L->g->values[v];
    uint32_t t;
    if (val->is_const)
        return lower_tensor_of_value(L, v, &t);
    if (cur_node(L)->n_attrs != 1)
        return lower_fail(L, LLMC_E_UNSUPPORTED, v, "needs exactly one value attribute");
    const llmc_attr *a = &cur_node(L)->attrs[0];
    switch (a->type) {
    case LLMC_ATTR_TENSOR: return lower_weight_tensor(L, v, a->t_data.data, a->t_data.nbytes, &t);
    case LLMC_ATTR_FLOAT: return lower_weight_tensor(L, v, &a->f, sizeof a->f, &t);
    case LLMC_ATTR_INT: return lower_weight_tensor(L, v, &a->i, sizeof a->i, &t);
    case LLMC_ATTR_FLOATS:
        return lower_weight_tensor(L, v, a->floats, sizeof *a->floats * (size_t)a->n_floats, &t);
    case LLMC_ATTR_INTS:
        return lower_weight_tensor(L, v, a->ints, sizeof *a->ints * (size_t)a->n_ints, &t);
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
int lower_constant_of_shape(lower_ctx *L, int kind)
{
    const llmc_attr *a = llmc_node_attr(L->g, L->node, "value");
    double value = 0.0;
    if (a && a->type == LLMC_ATTR_TENSOR && a->t_data.nbytes >= llmc_dtype_size(a->t_dtype) &&
        llmc_dtype_size(a->t_dtype) > 0)
        value = scalar_as_double(a->t_dtype, a->t_data.data);
    int rc = lower_emit_simple(L, LLMC_RT_OP_Fill, kind, 0);
    if (!rc)
        L->p->ops[L->p->n_ops - 1].value = value;
    return rc;
}
