/* Shapes of the elementwise ops: numpy broadcasting, and the contents of
 * small integer results folded through the symbolic arithmetic. */
#include "shape_ops.h"

#include <string.h>

#include "shape_infer.h"

typedef enum { SYM_OK, SYM_UNKNOWN } sym_result;
typedef sym_result (*sym_binary_fn)(llmc_affine a, llmc_affine b, uint32_t m, llmc_affine *r);

static sym_result bool_result(bool v, llmc_affine *r)
{
    *r = llmc_aff_const(v);
    return SYM_OK;
}

static sym_result sym_add(llmc_affine a, llmc_affine b, uint32_t m, llmc_affine *r)
{
    (void)m;
    return llmc_aff_add(a, b, r) ? SYM_OK : SYM_UNKNOWN;
}

static sym_result sym_sub(llmc_affine a, llmc_affine b, uint32_t m, llmc_affine *r)
{
    (void)m;
    return llmc_aff_sub(a, b, r) ? SYM_OK : SYM_UNKNOWN;
}

static sym_result sym_mul(llmc_affine a, llmc_affine b, uint32_t m, llmc_affine *r)
{
    (void)m;
    if (llmc_aff_is_const(b))
        return llmc_aff_scale(a, b.c, r) ? SYM_OK : SYM_UNKNOWN;
    if (llmc_aff_is_const(a))
        return llmc_aff_scale(b, a.c, r) ? SYM_OK : SYM_UNKNOWN;
    return SYM_UNKNOWN;
}

static sym_result sym_div(llmc_affine a, llmc_affine b, uint32_t m, llmc_affine *r)
{
    return llmc_aff_is_const(b) && llmc_aff_div(a, b.c, m, r) ? SYM_OK : SYM_UNKNOWN;
}

static sym_result sym_max(llmc_affine a, llmc_affine b, uint32_t m, llmc_affine *r)
{
    if (llmc_aff_provably_ge(a, b, m))
        *r = a;
    else if (llmc_aff_provably_ge(b, a, m))
        *r = b;
    else
        return SYM_UNKNOWN;
    return SYM_OK;
}

static sym_result sym_min(llmc_affine a, llmc_affine b, uint32_t m, llmc_affine *r)
{
    if (llmc_aff_provably_ge(b, a, m))
        *r = a;
    else if (llmc_aff_provably_ge(a, b, m))
        *r = b;
    else
        return SYM_UNKNOWN;
    return SYM_OK;
}

/* 1 when a >= b (strict: a > b) everywhere, 0 when the opposite holds
 * everywhere, unknown otherwise. */
static sym_result decide_ge(llmc_affine a, llmc_affine b, bool strict, uint32_t m, llmc_affine *r)
{
    if (strict ? llmc_aff_provably_gt(a, b, m) : llmc_aff_provably_ge(a, b, m))
        return bool_result(true, r);
    if (strict ? llmc_aff_provably_ge(b, a, m) : llmc_aff_provably_gt(b, a, m))
        return bool_result(false, r);
    return SYM_UNKNOWN;
}

static sym_result sym_equal(llmc_affine a, llmc_affine b, uint32_t m, llmc_affine *r)
{
    if (llmc_aff_eq(a, b))
        return bool_result(true, r);
    if (llmc_aff_provably_gt(a, b, m) || llmc_aff_provably_gt(b, a, m))
        return bool_result(false, r);
    return SYM_UNKNOWN;
}

static sym_result sym_less(llmc_affine a, llmc_affine b, uint32_t m, llmc_affine *r)
{
    return decide_ge(b, a, true, m, r);
}

static sym_result sym_greater(llmc_affine a, llmc_affine b, uint32_t m, llmc_affine *r)
{
    return decide_ge(a, b, true, m, r);
}

static sym_result sym_less_equal(llmc_affine a, llmc_affine b, uint32_t m, llmc_affine *r)
{
    return decide_ge(b, a, false, m, r);
}

static sym_result sym_greater_equal(llmc_affine a, llmc_affine b, uint32_t m, llmc_affine *r)
{
    return decide_ge(a, b, false, m, r);
}

/* What shape inference knows of each op whose shape handler is
 * infer_binary (ir/op_list.h), by op id. */
typedef struct {
    sym_binary_fn fn;
    bool bool_output;       /* comparisons */
    bool bool_inputs;       /* And, Or, Xor */
    bool mixed_types;       /* Pow: exponent may have another type */
} binary_op;

static const binary_op binary_ops[LLMC_ONNX_OP_COUNT] = {
    [LLMC_ONNX_Add] = {sym_add, false, false, false},
    [LLMC_ONNX_Sub] = {sym_sub, false, false, false},
    [LLMC_ONNX_Mul] = {sym_mul, false, false, false},
    [LLMC_ONNX_Div] = {sym_div, false, false, false},
    [LLMC_ONNX_Pow] = {NULL, false, false, true},
    [LLMC_ONNX_Max] = {sym_max, false, false, false},
    [LLMC_ONNX_Min] = {sym_min, false, false, false},
    [LLMC_ONNX_Equal] = {sym_equal, true, false, false},
    [LLMC_ONNX_Less] = {sym_less, true, false, false},
    [LLMC_ONNX_Greater] = {sym_greater, true, false, false},
    [LLMC_ONNX_LessOrEqual] = {sym_less_equal, true, false, false},
    [LLMC_ONNX_GreaterOrEqual] = {sym_greater_equal, true, false, false},
    [LLMC_ONNX_And] = {NULL, true, true, false},
    [LLMC_ONNX_Or] = {NULL, true, true, false},
    [LLMC_ONNX_Xor] = {NULL, true, true, false},
};

bool infer_compare_decided(llmc_op op, llmc_affine a, llmc_affine b, uint32_t max_context, bool *value)
{
    if ((int)op < 0 || (int)op >= (int)LLMC_ONNX_OP_COUNT || !binary_ops[op].bool_output || !binary_ops[op].fn)
        return false;
    llmc_affine r;
    if (binary_ops[op].fn(a, b, max_context, &r) != SYM_OK)
        return false;
    *value = r.c != 0;
    return true;
}

/* Contents of output 0 = fold of fn over the (broadcast) inputs. */
static void binary_sym(const infer *c, sym_binary_fn fn)
{
    llmc_affine in[2][LLMC_MAX_SYM_ELEMS], out[LLMC_MAX_SYM_ELEMS];
    llmc_value *o = output(c, 0);
    int64_t numel;
    if (!fn || !o || !llmc_shape_numel_const(&o->shape, &numel) || numel > LLMC_MAX_SYM_ELEMS)
        return;
    if (llmc_value_ints(c->g, input_id(c, 0), in[0], LLMC_MAX_SYM_ELEMS) < 0)
        return;
    /* Variadic Max/Min fold left to right; the accumulated shape is the
     * output shape after the first step, so index through `o`. */
    const llmc_shape *acc_shape = &input(c, 0)->shape;
    for (int k = 1; k < c->n->n_inputs; k++) {
        if (llmc_value_ints(c->g, input_id(c, k), in[1], LLMC_MAX_SYM_ELEMS) < 0)
            return;
        for (int64_t i = 0; i < numel; i++) {
            llmc_affine a = in[0][infer_broadcast_source(&o->shape, acc_shape, i)];
            llmc_affine b = in[1][infer_broadcast_source(&o->shape, &input(c, k)->shape, i)];
            if (fn(a, b, c->max_context, &out[i]) != SYM_OK)
                return;
        }
        memcpy(in[0], out, sizeof out);
        acc_shape = &o->shape;
    }
    infer_set_output_sym(c, 0, in[0], (int)numel);
}

int infer_binary(infer *c)
{
    const binary_op *op = &binary_ops[c->op];
    const llmc_value *a = input(c, 0);
    llmc_shape shape = a->shape;
    for (int k = 1; k < c->n->n_inputs; k++) {
        const llmc_value *b = input(c, k);
        if (!b)
            return infer_fail(c, LLMC_E_INPUT, "input %d is missing", k);
        if (!op->mixed_types && b->dtype != a->dtype)
            return infer_fail(c, LLMC_E_INPUT, "operand types differ (%s vs %s)", llmc_dtype_name(a->dtype),
                              llmc_dtype_name(b->dtype));
        llmc_shape acc = shape;
        int rc = infer_broadcast_shapes(c, &acc, &b->shape, &shape);
        if (rc)
            return rc;
    }
    if (op->bool_inputs && a->dtype != LLMC_DT_BOOL)
        return infer_fail(c, LLMC_E_INPUT, "%s needs bool operands, got %s", c->n->op_type,
                          llmc_dtype_name(a->dtype));
    infer_set_output(c, 0, op->bool_output ? LLMC_DT_BOOL : a->dtype, &shape);
    binary_sym(c, op->fn);
    return LLMC_OK;
}

int infer_unary(infer *c)
{
    const llmc_value *x = input(c, 0);
    if (c->op == LLMC_ONNX_Not && x->dtype != LLMC_DT_BOOL)
        return infer_fail(c, LLMC_E_INPUT, "Not needs a bool operand, got %s", llmc_dtype_name(x->dtype));
    infer_set_output(c, 0, x->dtype, &x->shape);
    if (c->op == LLMC_ONNX_Identity) {
        infer_copy_sym(c, 0);
    } else if (c->op == LLMC_ONNX_Neg) {
        llmc_affine vals[LLMC_MAX_SYM_ELEMS];
        int n = llmc_value_ints(c->g, input_id(c, 0), vals, LLMC_MAX_SYM_ELEMS);
        for (int i = 0; i < n; i++)
            if (!llmc_aff_scale(vals[i], -1, &vals[i]))
                return LLMC_OK;
        infer_set_output_sym(c, 0, vals, n);
    }
    return LLMC_OK;
}

int infer_where(infer *c)
{
    const llmc_value *cond = input(c, 0), *x = input(c, 1), *y = input(c, 2);
    llmc_shape shape;
    if (!x || !y)
        return infer_fail(c, LLMC_E_INPUT, "Where needs 3 inputs");
    if (cond->dtype != LLMC_DT_BOOL || x->dtype != y->dtype)
        return infer_fail(c, LLMC_E_INPUT, "bad operand types (%s, %s, %s)", llmc_dtype_name(cond->dtype),
                          llmc_dtype_name(x->dtype), llmc_dtype_name(y->dtype));
    llmc_shape cx;
    int rc = infer_broadcast_shapes(c, &cond->shape, &x->shape, &cx);
    if (!rc)
        rc = infer_broadcast_shapes(c, &cx, &y->shape, &shape);
    if (rc)
        return rc;
    infer_set_output(c, 0, x->dtype, &shape);

    llmc_affine vc[LLMC_MAX_SYM_ELEMS], vx[LLMC_MAX_SYM_ELEMS], vy[LLMC_MAX_SYM_ELEMS];
    llmc_affine out[LLMC_MAX_SYM_ELEMS];
    int64_t numel;
    if (!llmc_shape_numel_const(&shape, &numel) || numel > LLMC_MAX_SYM_ELEMS ||
        llmc_value_ints(c->g, input_id(c, 0), vc, LLMC_MAX_SYM_ELEMS) < 0 ||
        llmc_value_ints(c->g, input_id(c, 1), vx, LLMC_MAX_SYM_ELEMS) < 0 ||
        llmc_value_ints(c->g, input_id(c, 2), vy, LLMC_MAX_SYM_ELEMS) < 0)
        return LLMC_OK;
    for (int64_t i = 0; i < numel; i++) {
        llmc_affine sel = vc[infer_broadcast_source(&shape, &cond->shape, i)];
        if (!llmc_aff_is_const(sel))
            return LLMC_OK;
        out[i] = sel.c ? vx[infer_broadcast_source(&shape, &x->shape, i)]
                       : vy[infer_broadcast_source(&shape, &y->shape, i)];
    }
    infer_set_output_sym(c, 0, out, (int)numel);
    return LLMC_OK;
}

/* Cast: `saturate` (opset 19) only changes casts to the float8 types, which
 * llmc refuses with the other types it has no tensors of (opset 19's float8,
 * opset 21's int4 and uint4), so it is accepted and has no effect. */
int infer_cast(infer *c)
{
    const llmc_value *x = input(c, 0);
    int to = (int)llmc_node_attr_int(c->g, c->id, "to", LLMC_DT_UNDEFINED);
    if (llmc_dtype_size(to) == 0)
        return infer_fail(c, LLMC_E_UNSUPPORTED, "Cast to %s (%d), which llmc does not support",
                          llmc_dtype_name(to), to);
    infer_set_output(c, 0, to, &x->shape);
    llmc_affine vals[LLMC_MAX_SYM_ELEMS];
    int n = llmc_is_int_dtype(x->dtype) ? llmc_value_ints(c->g, input_id(c, 0), vals, LLMC_MAX_SYM_ELEMS)
                                        : -1;
    if (n <= 0 || !llmc_is_int_dtype(to))
        return LLMC_OK;
    for (int i = 0; i < n && to == LLMC_DT_BOOL; i++) {
        if (!llmc_aff_is_const(vals[i]))
            return LLMC_OK;
        vals[i] = llmc_aff_const(vals[i].c != 0);
    }
    infer_set_output_sym(c, 0, vals, n);
    return LLMC_OK;
}
