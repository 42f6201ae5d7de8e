/* shape-inference: dtype and symbolic shape of every value, plus the
 * symbolic contents of small integer tensors (paper §III.B).
 *
 * Dims are affine in S (tokens of this call) and P (past length).  Integer
 * tensors of at most LLMC_MAX_SYM_ELEMS elements also carry their contents
 * as affine values, so Shape -> Gather -> Unsqueeze -> Concat -> Reshape
 * chains resolve to targets like [1, S, 16, 2, 64] that constant folding can
 * turn into constants.  Semantics follow the ONNX operator specs for opsets
 * 13..17; anything not representable (a dim S*P, an unknown shape operand)
 * is an LLMC_E_UNSUPPORTED error naming the node, and inconsistent inputs
 * (broadcast or MatMul dims that differ) are LLMC_E_INPUT.
 *
 * Nodes are visited once in topological order; the pass can run again after
 * any rewrite and recomputes everything but graph inputs and constants. */
#include "shape_inference.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/const_view.h"
#include "ir/ir_dump.h"
#include "pass.h"
#include "symbolic.h"

typedef struct {
    llmc_graph *g;
    uint32_t max_context;
    llmc_error *err;
    int id;                 /* the node being inferred */
    const llmc_node *n;
} infer;

/* ---- access and messages ---- */

static const llmc_value *input(const infer *c, int k)
{
    if (k >= c->n->n_inputs || c->n->inputs[k] < 0)
        return NULL;
    return &c->g->values[c->n->inputs[k]];
}

static int input_id(const infer *c, int k)
{
    return k < c->n->n_inputs ? c->n->inputs[k] : -1;
}

/* An output this node defines, or NULL when omitted or folded away. */
static llmc_value *output(const infer *c, int k)
{
    if (k >= c->n->n_outputs || c->n->outputs[k] < 0)
        return NULL;
    llmc_value *v = &c->g->values[c->n->outputs[k]];
    return v->producer == c->id ? v : NULL;
}

static void describe_inputs(const infer *c, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = 0;
    for (int k = 0; k < c->n->n_inputs && len + 1 < size; k++) {
        const llmc_value *v = input(c, k);
        char shape[256];
        if (v)
            llmc_shape_format(&v->shape, shape, sizeof shape);
        int w = snprintf(buf + len, size - len, "%s%s %s", k ? ", " : "", v ? v->name : "-",
                         v ? shape : "");
        len += w > 0 ? (size_t)w : 0;
    }
}

static int fail(const infer *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(const infer *c, int code, const char *fmt, ...)
{
    char what[1024], inputs[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    describe_inputs(c, inputs, sizeof inputs);
    return llmc_fail(c->err, code, "node '%s' (#%d, %s): %s (inputs: %s)", c->n->name, c->id,
                     c->n->op_type, what, inputs);
}

static const char *aff_str(llmc_affine a, char buf[96])
{
    llmc_ir_format_affine(a, buf, 96);
    return buf;
}

static void set_output(const infer *c, int k, int dtype, const llmc_shape *s)
{
    llmc_value *v = output(c, k);
    if (!v)
        return;
    v->dtype = dtype;
    v->shape = *s;
    v->n_sym = 0;
}

static bool is_int_dtype(int dtype)
{
    return dtype == LLMC_DT_INT64 || dtype == LLMC_DT_INT32 || dtype == LLMC_DT_BOOL;
}

/* Records the contents of output k when it is a small integer tensor. */
static void set_output_sym(const infer *c, int k, const llmc_affine *sym, int n)
{
    llmc_value *v = output(c, k);
    int64_t numel;
    if (!v || n <= 0 || n > LLMC_MAX_SYM_ELEMS || !is_int_dtype(v->dtype) ||
        !llmc_shape_numel_const(&v->shape, &numel) || numel != n)
        return;
    memcpy(v->sym, sym, sizeof *sym * (size_t)n);
    v->n_sym = n;
}

static llmc_shape make_shape(int rank, const llmc_affine *dims)
{
    llmc_shape s;
    s.rank = rank;
    for (int i = 0; i < rank; i++)
        s.dims[i] = dims[i];
    return s;
}

static llmc_shape scalar_shape(void)
{
    llmc_shape s = {.rank = 0};
    return s;
}

static llmc_shape vector_shape(llmc_affine len)
{
    return make_shape(1, &len);
}

/* An axis attribute/operand in [-rank, rank-1] made non-negative. */
static int normalize_axis(const infer *c, int64_t axis, int rank, int *out)
{
    *out = 0;
    if (axis < -rank || axis >= rank)
        return fail(c, LLMC_E_INPUT, "axis %lld out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return LLMC_OK;
}

/* ---- known contents of integer values ---- */

static void read_const_ints(const llmc_value *v, llmc_affine *vals, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t x;
        if (v->dtype == LLMC_DT_INT64)
            memcpy(&x, (const int64_t *)v->konst.data + i, sizeof x);
        else if (v->dtype == LLMC_DT_INT32)
            x = ((const int32_t *)v->konst.data)[i];
        else
            x = ((const uint8_t *)v->konst.data)[i] != 0;
        vals[i] = llmc_aff_const(x);
    }
}

int llmc_value_ints(const llmc_graph *g, int value, llmc_affine *vals, int max)
{
    if (value < 0)
        return -1;
    const llmc_value *v = &g->values[value];
    int64_t numel;
    bool const_shape = llmc_shape_numel_const(&v->shape, &numel);
    if (const_shape && numel == 0)
        return 0;
    if (v->is_const && is_int_dtype(v->dtype) && const_shape && numel <= max &&
        v->konst.nbytes >= (uint64_t)numel * llmc_dtype_size(v->dtype)) {
        read_const_ints(v, vals, numel);
        return (int)numel;
    }
    if (v->n_sym > 0 && v->n_sym <= max) {
        memcpy(vals, v->sym, sizeof *vals * (size_t)v->n_sym);
        return v->n_sym;
    }
    return -1;
}

/* Contents of input k, which must be known constants (axes, perm, ...). */
static int const_ints(const infer *c, int k, int64_t *vals, int max, int *n, const char *what)
{
    llmc_affine a[LLMC_MAX_SYM_ELEMS];
    int cnt = llmc_value_ints(c->g, input_id(c, k), a, max < LLMC_MAX_SYM_ELEMS ? max : LLMC_MAX_SYM_ELEMS);
    for (int i = 0; i < cnt; i++)
        if (!llmc_aff_is_const(a[i]))
            cnt = -1;
    if (cnt < 0)
        return fail(c, LLMC_E_UNSUPPORTED, "%s (input %d) is not a compile-time constant", what, k);
    for (int i = 0; i < cnt; i++)
        vals[i] = a[i].c;
    *n = cnt;
    return LLMC_OK;
}

/* Contents of input k, symbolic allowed (shape operands, Slice bounds). */
static int known_ints(const infer *c, int k, llmc_affine *vals, int *n, const char *what)
{
    int cnt = llmc_value_ints(c->g, input_id(c, k), vals, LLMC_MAX_SYM_ELEMS);
    if (cnt < 0)
        return fail(c, LLMC_E_UNSUPPORTED, "%s (input %d) is not known at compile time", what, k);
    *n = cnt;
    return LLMC_OK;
}

static void fill_const_sym(llmc_value *v)
{
    int64_t numel;
    v->n_sym = 0;
    if (!v->is_const || !is_int_dtype(v->dtype) || !llmc_shape_numel_const(&v->shape, &numel) ||
        numel <= 0 || numel > LLMC_MAX_SYM_ELEMS ||
        v->konst.nbytes < (uint64_t)numel * llmc_dtype_size(v->dtype))
        return;
    read_const_ints(v, v->sym, numel);
    v->n_sym = (int)numel;
}

/* ---- broadcasting ---- */

static int broadcast_dim(const infer *c, llmc_affine a, llmc_affine b, llmc_affine *r)
{
    char x[96], y[96];
    if (llmc_aff_eq(a, b) || llmc_aff_eq(b, llmc_aff_const(1)))
        *r = a;
    else if (llmc_aff_eq(a, llmc_aff_const(1)))
        *r = b;
    else if (llmc_aff_is_const(a) && llmc_aff_is_const(b))
        return fail(c, LLMC_E_INPUT, "cannot broadcast dims %s and %s", aff_str(a, x), aff_str(b, y));
    else
        return fail(c, LLMC_E_UNSUPPORTED, "cannot prove dims %s and %s equal for broadcasting",
                    aff_str(a, x), aff_str(b, y));
    return LLMC_OK;
}

/* numpy multidirectional broadcasting of shapes a and b into r. */
static int broadcast_shapes(const infer *c, const llmc_shape *a, const llmc_shape *b, llmc_shape *r)
{
    int rank = a->rank > b->rank ? a->rank : b->rank;
    r->rank = rank;
    for (int i = 0; i < rank; i++) {
        int ia = i - (rank - a->rank), ib = i - (rank - b->rank);
        llmc_affine da = ia >= 0 ? a->dims[ia] : llmc_aff_const(1);
        llmc_affine db = ib >= 0 ? b->dims[ib] : llmc_aff_const(1);
        int rc = broadcast_dim(c, da, db, &r->dims[i]);
        if (rc)
            return rc;
    }
    return LLMC_OK;
}

/* Flat index in `in` of the element that broadcasts to flat index `flat`
 * of `out` (both constant shapes). */
static int64_t broadcast_source(const llmc_shape *out, const llmc_shape *in, int64_t flat)
{
    int64_t src = 0, stride = 1;
    for (int d = out->rank - 1, e = in->rank - 1; d >= 0; d--, e--) {
        int64_t idx = flat % out->dims[d].c;
        flat /= out->dims[d].c;
        if (e < 0)
            continue;
        if (in->dims[e].c != 1)
            src += idx * stride;
        stride *= in->dims[e].c;
    }
    return src;
}

/* ---- elementwise ops ---- */

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

typedef struct {
    const char *op;
    sym_binary_fn fn;
    bool bool_output;       /* comparisons */
    bool bool_inputs;       /* And, Or, Xor */
    bool mixed_types;       /* Pow: exponent may have another type */
} binary_op;

static const binary_op binary_ops[] = {
    {"Add", sym_add, false, false, false},
    {"Sub", sym_sub, false, false, false},
    {"Mul", sym_mul, false, false, false},
    {"Div", sym_div, false, false, false},
    {"Pow", NULL, false, false, true},
    {"Max", sym_max, false, false, false},
    {"Min", sym_min, false, false, false},
    {"Equal", sym_equal, true, false, false},
    {"Less", sym_less, true, false, false},
    {"Greater", sym_greater, true, false, false},
    {"LessOrEqual", sym_less_equal, true, false, false},
    {"GreaterOrEqual", sym_greater_equal, true, false, false},
    {"And", NULL, true, true, false},
    {"Or", NULL, true, true, false},
    {"Xor", NULL, true, true, false},
};

static const binary_op *find_binary(const char *op)
{
    for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++)
        if (strcmp(binary_ops[i].op, op) == 0)
            return &binary_ops[i];
    return NULL;
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
            llmc_affine a = in[0][broadcast_source(&o->shape, acc_shape, i)];
            llmc_affine b = in[1][broadcast_source(&o->shape, &input(c, k)->shape, i)];
            if (fn(a, b, c->max_context, &out[i]) != SYM_OK)
                return;
        }
        memcpy(in[0], out, sizeof out);
        acc_shape = &o->shape;
    }
    set_output_sym(c, 0, in[0], (int)numel);
}

static int infer_binary(infer *c)
{
    const binary_op *op = find_binary(c->n->op_type);
    const llmc_value *a = input(c, 0);
    llmc_shape shape = a->shape;
    for (int k = 1; k < c->n->n_inputs; k++) {
        const llmc_value *b = input(c, k);
        if (!b)
            return fail(c, LLMC_E_INPUT, "input %d is missing", k);
        if (!op->mixed_types && b->dtype != a->dtype)
            return fail(c, LLMC_E_INPUT, "operand types differ (%s vs %s)", llmc_dtype_name(a->dtype),
                        llmc_dtype_name(b->dtype));
        llmc_shape acc = shape;
        int rc = broadcast_shapes(c, &acc, &b->shape, &shape);
        if (rc)
            return rc;
    }
    if (op->bool_inputs && a->dtype != LLMC_DT_BOOL)
        return fail(c, LLMC_E_INPUT, "%s needs bool operands, got %s", op->op, llmc_dtype_name(a->dtype));
    set_output(c, 0, op->bool_output ? LLMC_DT_BOOL : a->dtype, &shape);
    binary_sym(c, op->fn);
    return LLMC_OK;
}

static void copy_sym(const infer *c, int from_input)
{
    const llmc_value *v = input(c, from_input);
    llmc_affine vals[LLMC_MAX_SYM_ELEMS];
    int n = llmc_value_ints(c->g, input_id(c, from_input), vals, LLMC_MAX_SYM_ELEMS);
    if (v && n > 0)
        set_output_sym(c, 0, vals, n);
}

static int infer_unary(infer *c)
{
    const llmc_value *x = input(c, 0);
    if (strcmp(c->n->op_type, "Not") == 0 && x->dtype != LLMC_DT_BOOL)
        return fail(c, LLMC_E_INPUT, "Not needs a bool operand, got %s", llmc_dtype_name(x->dtype));
    set_output(c, 0, x->dtype, &x->shape);
    if (strcmp(c->n->op_type, "Identity") == 0) {
        copy_sym(c, 0);
    } else if (strcmp(c->n->op_type, "Neg") == 0) {
        llmc_affine vals[LLMC_MAX_SYM_ELEMS];
        int n = llmc_value_ints(c->g, input_id(c, 0), vals, LLMC_MAX_SYM_ELEMS);
        for (int i = 0; i < n; i++)
            if (!llmc_aff_scale(vals[i], -1, &vals[i]))
                return LLMC_OK;
        set_output_sym(c, 0, vals, n);
    }
    return LLMC_OK;
}

static int infer_where(infer *c)
{
    const llmc_value *cond = input(c, 0), *x = input(c, 1), *y = input(c, 2);
    llmc_shape shape;
    if (!x || !y)
        return fail(c, LLMC_E_INPUT, "Where needs 3 inputs");
    if (cond->dtype != LLMC_DT_BOOL || x->dtype != y->dtype)
        return fail(c, LLMC_E_INPUT, "bad operand types (%s, %s, %s)", llmc_dtype_name(cond->dtype),
                    llmc_dtype_name(x->dtype), llmc_dtype_name(y->dtype));
    llmc_shape cx;
    int rc = broadcast_shapes(c, &cond->shape, &x->shape, &cx);
    if (!rc)
        rc = broadcast_shapes(c, &cx, &y->shape, &shape);
    if (rc)
        return rc;
    set_output(c, 0, x->dtype, &shape);

    llmc_affine vc[LLMC_MAX_SYM_ELEMS], vx[LLMC_MAX_SYM_ELEMS], vy[LLMC_MAX_SYM_ELEMS];
    llmc_affine out[LLMC_MAX_SYM_ELEMS];
    int64_t numel;
    if (!llmc_shape_numel_const(&shape, &numel) || numel > LLMC_MAX_SYM_ELEMS ||
        llmc_value_ints(c->g, input_id(c, 0), vc, LLMC_MAX_SYM_ELEMS) < 0 ||
        llmc_value_ints(c->g, input_id(c, 1), vx, LLMC_MAX_SYM_ELEMS) < 0 ||
        llmc_value_ints(c->g, input_id(c, 2), vy, LLMC_MAX_SYM_ELEMS) < 0)
        return LLMC_OK;
    for (int64_t i = 0; i < numel; i++) {
        llmc_affine sel = vc[broadcast_source(&shape, &cond->shape, i)];
        if (!llmc_aff_is_const(sel))
            return LLMC_OK;
        out[i] = sel.c ? vx[broadcast_source(&shape, &x->shape, i)]
                       : vy[broadcast_source(&shape, &y->shape, i)];
    }
    set_output_sym(c, 0, out, (int)numel);
    return LLMC_OK;
}

static int infer_cast(infer *c)
{
    const llmc_value *x = input(c, 0);
    int to = (int)llmc_node_attr_int(c->g, c->id, "to", LLMC_DT_UNDEFINED);
    if (llmc_dtype_size(to) == 0)
        return fail(c, LLMC_E_UNSUPPORTED, "Cast to %s", llmc_dtype_name(to));
    set_output(c, 0, to, &x->shape);
    llmc_affine vals[LLMC_MAX_SYM_ELEMS];
    int n = is_int_dtype(x->dtype) ? llmc_value_ints(c->g, input_id(c, 0), vals, LLMC_MAX_SYM_ELEMS) : -1;
    if (n <= 0 || !is_int_dtype(to))
        return LLMC_OK;
    for (int i = 0; i < n && to == LLMC_DT_BOOL; i++) {
        if (!llmc_aff_is_const(vals[i]))
            return LLMC_OK;
        vals[i] = llmc_aff_const(vals[i].c != 0);
    }
    set_output_sym(c, 0, vals, n);
    return LLMC_OK;
}

/* ---- compute ops ---- */

static int require_equal_dims(const infer *c, llmc_affine a, llmc_affine b, const char *what)
{
    char x[96], y[96];
    if (llmc_aff_eq(a, b))
        return LLMC_OK;
    return fail(c, llmc_aff_is_const(a) && llmc_aff_is_const(b) ? LLMC_E_INPUT : LLMC_E_UNSUPPORTED,
                "%s differ: %s vs %s", what, aff_str(a, x), aff_str(b, y));
}

static int infer_matmul(infer *c)
{
    const llmc_value *a = input(c, 0), *b = input(c, 1);
    if (!b || a->shape.rank < 1 || b->shape.rank < 1)
        return fail(c, LLMC_E_INPUT, "MatMul needs two operands of rank >= 1");
    if (a->dtype != b->dtype)
        return fail(c, LLMC_E_INPUT, "operand types differ");
    /* numpy: a 1-D left operand gets a leading 1, a 1-D right operand a
     * trailing 1, and those dims are removed from the result. */
    llmc_shape sa = a->shape, sb = b->shape, batch_a = sa, batch_b = sb, out;
    if (sa.rank == 1)
        sa = make_shape(2, (llmc_affine[]){llmc_aff_const(1), a->shape.dims[0]});
    if (sb.rank == 1)
        sb = make_shape(2, (llmc_affine[]){b->shape.dims[0], llmc_aff_const(1)});
    int rc = require_equal_dims(c, sa.dims[sa.rank - 1], sb.dims[sb.rank - 2], "inner dims");
    if (rc)
        return rc;
    batch_a = make_shape(sa.rank - 2, sa.dims);
    batch_b = make_shape(sb.rank - 2, sb.dims);
    if ((rc = broadcast_shapes(c, &batch_a, &batch_b, &out)))
        return rc;
    if (a->shape.rank > 1)
        out.dims[out.rank++] = sa.dims[sa.rank - 2];
    if (b->shape.rank > 1)
        out.dims[out.rank++] = sb.dims[sb.rank - 1];
    if (out.rank > LLMC_MAX_RANK)
        return fail(c, LLMC_E_UNSUPPORTED, "rank above %d", LLMC_MAX_RANK);
    set_output(c, 0, a->dtype, &out);
    return LLMC_OK;
}

static int infer_gemm(infer *c)
{
    const llmc_value *a = input(c, 0), *b = input(c, 1), *bias = input(c, 2);
    if (!b || a->shape.rank != 2 || b->shape.rank != 2)
        return fail(c, LLMC_E_INPUT, "Gemm needs two 2-D operands");
    bool ta = llmc_node_attr_int(c->g, c->id, "transA", 0) != 0;
    bool tb = llmc_node_attr_int(c->g, c->id, "transB", 0) != 0;
    llmc_affine m = a->shape.dims[ta ? 1 : 0], ka = a->shape.dims[ta ? 0 : 1];
    llmc_affine kb = b->shape.dims[tb ? 1 : 0], n = b->shape.dims[tb ? 0 : 1];
    int rc = require_equal_dims(c, ka, kb, "inner dims");
    if (rc)
        return rc;
    llmc_shape out = make_shape(2, (llmc_affine[]){m, n});
    if (bias) {
        /* C broadcasts unidirectionally to (M, N). */
        llmc_shape r;
        if (bias->shape.rank > 2 || (rc = broadcast_shapes(c, &out, &bias->shape, &r)))
            return rc ? rc : fail(c, LLMC_E_INPUT, "C has rank %d", bias->shape.rank);
        if (!llmc_aff_eq(r.dims[0], m) || !llmc_aff_eq(r.dims[1], n))
            return fail(c, LLMC_E_INPUT, "C does not broadcast to (M, N)");
    }
    set_output(c, 0, a->dtype, &out);
    return LLMC_OK;
}

/* Marks the axes a Reduce* node reduces; *identity when it reduces none. */
static int reduce_axes(const infer *c, int rank, bool *reduced, bool *identity)
{
    int64_t axes[LLMC_MAX_RANK];
    int n = 0, rc;
    /* Opsets 13..17: ReduceSum takes axes as input 1, the others as an
     * attribute (they move to an input in opset 18). */
    if (strcmp(c->n->op_type, "ReduceSum") == 0 && input(c, 1)) {
        if ((rc = const_ints(c, 1, axes, LLMC_MAX_RANK, &n, "axes")))
            return rc;
    } else if (strcmp(c->n->op_type, "ReduceSum") != 0) {
        const llmc_attr *a = llmc_node_attr(c->g, c->id, "axes");
        if (a && a->n_ints > LLMC_MAX_RANK)
            return fail(c, LLMC_E_INPUT, "%d axes for rank %d", a->n_ints, rank);
        for (n = 0; a && n < a->n_ints; n++)
            axes[n] = a->ints[n];
    }
    *identity = n == 0 && llmc_node_attr_int(c->g, c->id, "noop_with_empty_axes", 0) != 0;
    for (int i = 0; i < rank; i++)
        reduced[i] = n == 0 && !*identity;
    for (int i = 0; i < n; i++) {
        int axis;
        if ((rc = normalize_axis(c, axes[i], rank, &axis)))
            return rc;
        if (reduced[axis])
            return fail(c, LLMC_E_INPUT, "axis %d repeated", axis);
        reduced[axis] = true;
    }
    return LLMC_OK;
}

static int infer_reduce(infer *c)
{
    const llmc_value *x = input(c, 0);
    bool reduced[LLMC_MAX_RANK], identity;
    int rc = reduce_axes(c, x->shape.rank, reduced, &identity);
    if (rc)
        return rc;
    bool keep = llmc_node_attr_int(c->g, c->id, "keepdims", 1) != 0;
    llmc_shape out = {.rank = 0};
    for (int i = 0; i < x->shape.rank; i++) {
        if (!reduced[i])
            out.dims[out.rank++] = x->shape.dims[i];
        else if (keep)
            out.dims[out.rank++] = llmc_aff_const(1);
    }
    set_output(c, 0, x->dtype, &out);
    return LLMC_OK;
}

static int infer_softmax(infer *c)
{
    const llmc_value *x = input(c, 0);
    int axis;
    int rc = normalize_axis(c, llmc_node_attr_int(c->g, c->id, "axis", -1), x->shape.rank, &axis);
    if (rc)
        return rc;
    set_output(c, 0, x->dtype, &x->shape);
    return LLMC_OK;
}

static int infer_layer_norm(infer *c)
{
    const llmc_value *x = input(c, 0);
    int axis;
    if (!input(c, 1))
        return fail(c, LLMC_E_INPUT, "Scale is missing");
    int rc = normalize_axis(c, llmc_node_attr_int(c->g, c->id, "axis", -1), x->shape.rank, &axis);
    if (rc)
        return rc;
    set_output(c, 0, x->dtype, &x->shape);
    /* Mean and InvStdDev keep the leading dims, 1 over the normalized axes,
     * in the stash type. */
    llmc_shape stats = x->shape;
    for (int i = axis; i < stats.rank; i++)
        stats.dims[i] = llmc_aff_const(1);
    int stash = (int)llmc_node_attr_int(c->g, c->id, "stash_type", LLMC_DT_FLOAT);
    set_output(c, 1, stash, &stats);
    set_output(c, 2, stash, &stats);
    return LLMC_OK;
}

static int infer_gather(infer *c)
{
    const llmc_value *data = input(c, 0), *idx = input(c, 1);
    int axis;
    if (!idx || (idx->dtype != LLMC_DT_INT64 && idx->dtype != LLMC_DT_INT32))
        return fail(c, LLMC_E_INPUT, "indices must be int32 or int64");
    int rc = normalize_axis(c, llmc_node_attr_int(c->g, c->id, "axis", 0), data->shape.rank, &axis);
    if (rc)
        return rc;
    llmc_shape out = {.rank = data->shape.rank - 1 + idx->shape.rank};
    if (out.rank > LLMC_MAX_RANK)
        return fail(c, LLMC_E_UNSUPPORTED, "rank above %d", LLMC_MAX_RANK);
    int r = 0;
    for (int i = 0; i < axis; i++)
        out.dims[r++] = data->shape.dims[i];
    for (int i = 0; i < idx->shape.rank; i++)
        out.dims[r++] = idx->shape.dims[i];
    for (int i = axis + 1; i < data->shape.rank; i++)
        out.dims[r++] = data->shape.dims[i];
    set_output(c, 0, data->dtype, &out);

    llmc_affine iv[LLMC_MAX_SYM_ELEMS], dv[LLMC_MAX_SYM_ELEMS], ov[LLMC_MAX_SYM_ELEMS];
    int ni = llmc_value_ints(c->g, input_id(c, 1), iv, LLMC_MAX_SYM_ELEMS);
    llmc_affine dim = data->shape.dims[axis];
    for (int i = 0; i < ni && llmc_aff_is_const(dim); i++) {
        if (!llmc_aff_is_const(iv[i]))
            return LLMC_OK;
        if (iv[i].c < -dim.c || iv[i].c >= dim.c)
            return fail(c, LLMC_E_INPUT, "index %lld out of range for dim %lld", (long long)iv[i].c,
                        (long long)dim.c);
        iv[i].c += iv[i].c < 0 ? dim.c : 0;
    }
    int64_t numel, inner;
    llmc_poly pinner;
    if (ni < 0 || !llmc_aff_is_const(dim) || llmc_value_ints(c->g, input_id(c, 0), dv, LLMC_MAX_SYM_ELEMS) < 0 ||
        !llmc_shape_numel_const(&out, &numel) || numel > LLMC_MAX_SYM_ELEMS ||
        !llmc_shape_product(&data->shape, axis + 1, data->shape.rank, &pinner))
        return LLMC_OK;
    inner = pinner.c[0][0];
    /* out flat = (outer * ni + j) * inner + i  <-  data (outer * dim + idx[j]) * inner + i */
    for (int64_t f = 0; f < numel; f++) {
        int64_t i = f % inner, j = (f / inner) % ni, outer = f / inner / ni;
        ov[f] = dv[(outer * dim.c + iv[j].c) * inner + i];
    }
    set_output_sym(c, 0, ov, (int)numel);
    return LLMC_OK;
}

/* ---- layout ops ---- */

static int infer_transpose(infer *c)
{
    const llmc_value *x = input(c, 0);
    const llmc_attr *perm = llmc_node_attr(c->g, c->id, "perm");
    int rank = x->shape.rank;
    bool seen[LLMC_MAX_RANK] = {false};
    llmc_shape out = {.rank = rank};
    if (perm && perm->n_ints != rank)
        return fail(c, LLMC_E_INPUT, "perm has %d entries for rank %d", perm->n_ints, rank);
    for (int i = 0; i < rank; i++) {
        int64_t p = perm ? perm->ints[i] : rank - 1 - i;   /* default: reversed */
        if (p < 0 || p >= rank || seen[p])
            return fail(c, LLMC_E_INPUT, "perm is not a permutation of 0..%d", rank - 1);
        seen[p] = true;
        out.dims[i] = x->shape.dims[p];
    }
    set_output(c, 0, x->dtype, &out);
    return LLMC_OK;
}

/* Copies the elements of a strided window: out[idx] = in[first + idx*step]
 * per axis (constant shapes). */
static void strided_sym(const llmc_shape *in, const llmc_affine *in_sym, const int64_t *first,
                        const int64_t *step, const llmc_shape *out, int64_t n_out, llmc_affine *out_sym)
{
    for (int64_t f = 0; f < n_out; f++) {
        int64_t rest = f, src = 0, stride = 1;
        for (int a = out->rank - 1; a >= 0; a--) {
            int64_t idx = rest % out->dims[a].c;
            rest /= out->dims[a].c;
            src += (first[a] + idx * step[a]) * stride;
            stride *= in->dims[a].c;
        }
        out_sym[f] = in_sym[src];
    }
}

void llmc_slice_axis_const(int64_t d, int64_t s, int64_t e, int64_t k, int64_t *first, int64_t *len)
{
    s += s < 0 ? d : 0;
    e += e < 0 ? d : 0;
    if (k > 0) {
        s = s < 0 ? 0 : s > d ? d : s;
        e = e < 0 ? 0 : e > d ? d : e;
        *len = e > s ? 1 + (e - s - 1) / k : 0;
    } else {
        s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
        e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
        *len = s > e ? 1 + (s - e - 1) / -k : 0;
    }
    *first = s;
}

/* One start or end of Slice when the dim or the index is symbolic.  A
 * negative index counts from the end; clamping is applied where it is
 * provable (sentinels such as INT64_MAX beyond any possible dim), otherwise
 * the index is taken to be within bounds, as exporters emit it. */
static int slice_index_symbolic(const infer *c, llmc_affine dim, llmc_affine x, bool is_end,
                                int64_t step, llmc_affine *r)
{
    int64_t hi;
    int64_t beyond = llmc_aff_max(dim, c->max_context, &hi) ? hi : INT32_MAX;
    llmc_affine low = llmc_aff_const(step < 0 && is_end ? -1 : 0), top = dim;
    char b[96];
    if (step < 0)
        top.c -= 1;
    if (llmc_aff_is_const(x) && x.c >= beyond) {
        *r = top;
    } else if (llmc_aff_is_const(x) && x.c < -beyond) {
        *r = low;
    } else {
        bool nonnegative = llmc_aff_provably_ge(x, llmc_aff_const(0), c->max_context);
        bool negative = llmc_aff_provably_gt(llmc_aff_const(0), x, c->max_context);
        if (!nonnegative && !(negative && llmc_aff_add(x, dim, r)))
            return fail(c, LLMC_E_UNSUPPORTED, "sign of slice index %s is not known", aff_str(x, b));
        if (nonnegative)
            *r = x;
    }
    return LLMC_OK;
}

/* Element count ceil(diff / k) of a symbolic slice, k > 0. */
static int slice_length(const infer *c, llmc_affine diff, int64_t k, llmc_affine *len)
{
    char b[96];
    if (llmc_aff_is_const(diff)) {
        *len = llmc_aff_const(diff.c > 0 ? 1 + (diff.c - 1) / k : 0);
        return LLMC_OK;
    }
    if (llmc_aff_provably_ge(llmc_aff_const(0), diff, c->max_context)) {
        *len = llmc_aff_const(0);
        return LLMC_OK;
    }
    if (diff.s % k || diff.p % k)
        return fail(c, LLMC_E_UNSUPPORTED, "slice length %s / %lld is not affine", aff_str(diff, b),
                    (long long)k);
    /* ceil of c/k for the constant part; the rest divides exactly. */
    int64_t cq = diff.c / k + (diff.c % k > 0);
    *len = (llmc_affine){cq, diff.s / k, diff.p / k};
    return LLMC_OK;
}

static int slice_axis(const infer *c, llmc_affine dim, llmc_affine s, llmc_affine e, int64_t k,
                      llmc_affine *first, llmc_affine *len)
{
    if (llmc_aff_is_const(dim) && llmc_aff_is_const(s) && llmc_aff_is_const(e)) {
        int64_t f, l;
        llmc_slice_axis_const(dim.c, s.c, e.c, k, &f, &l);
        *first = llmc_aff_const(f);
        *len = llmc_aff_const(l);
        return LLMC_OK;
    }
    llmc_affine diff;
    int rc = slice_index_symbolic(c, dim, s, false, k, first);
    if (!rc)
        rc = slice_index_symbolic(c, dim, e, true, k, &e);
    if (rc)
        return rc;
    if (!(k > 0 ? llmc_aff_sub(e, *first, &diff) : llmc_aff_sub(*first, e, &diff)))
        return fail(c, LLMC_E_UNSUPPORTED, "slice bounds overflow");
    return slice_length(c, diff, k > 0 ? k : -k, len);
}

typedef struct {
    int n;
    llmc_affine starts[LLMC_MAX_SYM_ELEMS], ends[LLMC_MAX_SYM_ELEMS];
    int64_t axes[LLMC_MAX_SYM_ELEMS], steps[LLMC_MAX_SYM_ELEMS];
} slice_args;

static int read_slice_args(const infer *c, int rank, slice_args *a)
{
    int ne, na = 0, ns = 0, rc;
    if ((rc = known_ints(c, 1, a->starts, &a->n, "starts")) || (rc = known_ints(c, 2, a->ends, &ne, "ends")))
        return rc;
    if (input(c, 3) && (rc = const_ints(c, 3, a->axes, LLMC_MAX_SYM_ELEMS, &na, "axes")))
        return rc;
    if (input(c, 4) && (rc = const_ints(c, 4, a->steps, LLMC_MAX_SYM_ELEMS, &ns, "steps")))
        return rc;
    if (ne != a->n || (input(c, 3) && na != a->n) || (input(c, 4) && ns != a->n))
        return fail(c, LLMC_E_INPUT, "starts, ends, axes and steps differ in length");
    for (int i = 0; i < a->n; i++) {
        int axis = i;
        if (input(c, 3) && (rc = normalize_axis(c, a->axes[i], rank, &axis)))
            return rc;
        a->axes[i] = axis;
        if (!input(c, 4))
            a->steps[i] = 1;
        if (a->steps[i] == 0 || a->steps[i] == INT64_MIN)
            return fail(c, LLMC_E_INPUT, "slice step %lld", (long long)a->steps[i]);
    }
    return LLMC_OK;
}

static int infer_slice(infer *c)
{
    const llmc_value *x = input(c, 0);
    slice_args a;
    int rc = read_slice_args(c, x->shape.rank, &a);
    if (rc)
        return rc;
    llmc_shape out = x->shape;
    llmc_affine first[LLMC_MAX_RANK];
    int64_t step[LLMC_MAX_RANK];
    bool seen[LLMC_MAX_RANK] = {false};
    for (int i = 0; i < out.rank; i++) {
        first[i] = llmc_aff_const(0);
        step[i] = 1;
    }
    for (int i = 0; i < a.n; i++) {
        int axis = (int)a.axes[i];
        if (seen[axis])
            return fail(c, LLMC_E_INPUT, "axis %d repeated", axis);
        seen[axis] = true;
        step[axis] = a.steps[i];
        rc = slice_axis(c, x->shape.dims[axis], a.starts[i], a.ends[i], a.steps[i], &first[axis],
                        &out.dims[axis]);
        if (rc)
            return rc;
    }
    set_output(c, 0, x->dtype, &out);

    llmc_affine in_sym[LLMC_MAX_SYM_ELEMS], out_sym[LLMC_MAX_SYM_ELEMS];
    int64_t numel, first_c[LLMC_MAX_RANK], in_numel;
    for (int i = 0; i < out.rank; i++) {
        if (!llmc_aff_is_const(first[i]))
            return LLMC_OK;
        first_c[i] = first[i].c;
    }
    if (!llmc_shape_numel_const(&out, &numel) || numel == 0 || numel > LLMC_MAX_SYM_ELEMS ||
        !llmc_shape_numel_const(&x->shape, &in_numel) ||
        llmc_value_ints(c->g, input_id(c, 0), in_sym, LLMC_MAX_SYM_ELEMS) < 0)
        return LLMC_OK;
    strided_sym(&x->shape, in_sym, first_c, step, &out, numel, out_sym);
    set_output_sym(c, 0, out_sym, (int)numel);
    return LLMC_OK;
}

/* Contents of a Concat: each input's elements land at its offset along
 * `axis` of the (constant) output shape. */
static void concat_sym(const infer *c, int axis, const llmc_shape *out)
{
    llmc_affine vals[LLMC_MAX_SYM_ELEMS], out_sym[LLMC_MAX_SYM_ELEMS];
    int64_t numel, offset = 0, inner = 1;
    if (!llmc_shape_numel_const(out, &numel) || numel == 0 || numel > LLMC_MAX_SYM_ELEMS)
        return;
    for (int i = axis + 1; i < out->rank; i++)
        inner *= out->dims[i].c;
    for (int k = 0; k < c->n->n_inputs; k++) {
        const llmc_value *v = input(c, k);
        int n = llmc_value_ints(c->g, input_id(c, k), vals, LLMC_MAX_SYM_ELEMS);
        if (n < 0)
            return;
        int64_t len = v->shape.dims[axis].c;
        /* element (outer, j, i) of input k -> (outer, offset + j, i) */
        for (int f = 0; f < n; f++) {
            int64_t i = f % inner, j = (f / inner) % len, outer = f / inner / len;
            out_sym[(outer * out->dims[axis].c + offset + j) * inner + i] = vals[f];
        }
        offset += len;
    }
    set_output_sym(c, 0, out_sym, (int)numel);
}

static int infer_concat(infer *c)
{
    const llmc_value *first = input(c, 0);
    const llmc_attr *axis_attr = llmc_node_attr(c->g, c->id, "axis");
    int axis, rc;
    if (!axis_attr)
        return fail(c, LLMC_E_INPUT, "Concat needs an axis");
    if ((rc = normalize_axis(c, axis_attr->i, first->shape.rank, &axis)))
        return rc;
    llmc_shape out = first->shape;
    for (int k = 1; k < c->n->n_inputs; k++) {
        const llmc_value *v = input(c, k);
        if (!v || v->shape.rank != out.rank || v->dtype != first->dtype)
            return fail(c, LLMC_E_INPUT, "input %d differs in rank or type", k);
        for (int i = 0; i < out.rank; i++)
            if (i != axis && (rc = require_equal_dims(c, out.dims[i], v->shape.dims[i], "non-axis dims")))
                return rc;
        if (!llmc_aff_add(out.dims[axis], v->shape.dims[axis], &out.dims[axis]))
            return fail(c, LLMC_E_UNSUPPORTED, "dim overflow");
    }
    set_output(c, 0, first->dtype, &out);
    concat_sym(c, axis, &out);
    return LLMC_OK;
}

/* Contents of Split output k: the window [offset, offset+len) on `axis`. */
static void split_sym(const infer *c, int k, int axis, int64_t offset)
{
    const llmc_value *x = input(c, 0);
    llmc_value *o = output(c, k);
    llmc_affine in_sym[LLMC_MAX_SYM_ELEMS], out_sym[LLMC_MAX_SYM_ELEMS];
    int64_t first[LLMC_MAX_RANK] = {0}, step[LLMC_MAX_RANK], numel, in_numel;
    if (!o || !llmc_shape_numel_const(&x->shape, &in_numel) || !llmc_shape_numel_const(&o->shape, &numel) ||
        numel == 0 || llmc_value_ints(c->g, input_id(c, 0), in_sym, LLMC_MAX_SYM_ELEMS) < 0)
        return;
    for (int i = 0; i < x->shape.rank; i++)
        step[i] = 1;
    first[axis] = offset;
    strided_sym(&x->shape, in_sym, first, step, &o->shape, numel, out_sym);
    set_output_sym(c, k, out_sym, (int)numel);
}

static int split_sizes(const infer *c, llmc_affine dim, llmc_affine *sizes)
{
    int n = c->n->n_outputs, cnt, rc;
    char b[96];
    if (input(c, 1)) {
        if ((rc = known_ints(c, 1, sizes, &cnt, "split")))
            return rc;
        if (cnt != n)
            return fail(c, LLMC_E_INPUT, "split has %d entries for %d outputs", cnt, n);
        llmc_affine sum = llmc_aff_const(0);
        for (int i = 0; i < n; i++)
            if (!llmc_aff_add(sum, sizes[i], &sum))
                return fail(c, LLMC_E_UNSUPPORTED, "dim overflow");
        return require_equal_dims(c, sum, dim, "sum of split sizes and the dim");
    }
    /* Opset 13: no split input means equal parts. */
    if (dim.c % n || dim.s % n || dim.p % n)
        return fail(c, LLMC_E_INPUT, "dim %s does not split into %d equal parts", aff_str(dim, b), n);
    for (int i = 0; i < n; i++)
        sizes[i] = (llmc_affine){dim.c / n, dim.s / n, dim.p / n};
    return LLMC_OK;
}

static int infer_split(infer *c)
{
    const llmc_value *x = input(c, 0);
    llmc_affine sizes[LLMC_MAX_SYM_ELEMS];
    int axis, rc;
    if (c->n->n_outputs > LLMC_MAX_SYM_ELEMS)
        return fail(c, LLMC_E_UNSUPPORTED, "more than %d outputs", LLMC_MAX_SYM_ELEMS);
    if ((rc = normalize_axis(c, llmc_node_attr_int(c->g, c->id, "axis", 0), x->shape.rank, &axis)) ||
        (rc = split_sizes(c, x->shape.dims[axis], sizes)))
        return rc;
    llmc_affine offset = llmc_aff_const(0);
    for (int k = 0; k < c->n->n_outputs; k++) {
        llmc_shape out = x->shape;
        out.dims[axis] = sizes[k];
        set_output(c, k, x->dtype, &out);
        if (llmc_aff_is_const(offset))
            split_sym(c, k, axis, offset.c);
        llmc_aff_add(offset, sizes[k], &offset);
    }
    return LLMC_OK;
}

static int infer_expand(infer *c)
{
    const llmc_value *x = input(c, 0);
    llmc_affine target[LLMC_MAX_SYM_ELEMS];
    int n, rc;
    if ((rc = known_ints(c, 1, target, &n, "shape")))
        return rc;
    if (n > LLMC_MAX_RANK)
        return fail(c, LLMC_E_UNSUPPORTED, "rank %d above %d", n, LLMC_MAX_RANK);
    llmc_shape want = make_shape(n, target), out;
    if ((rc = broadcast_shapes(c, &x->shape, &want, &out)))
        return rc;
    set_output(c, 0, x->dtype, &out);

    llmc_affine in[LLMC_MAX_SYM_ELEMS], vals[LLMC_MAX_SYM_ELEMS];
    int64_t numel;
    if (!llmc_shape_numel_const(&out, &numel) || numel == 0 || numel > LLMC_MAX_SYM_ELEMS ||
        llmc_value_ints(c->g, input_id(c, 0), in, LLMC_MAX_SYM_ELEMS) < 0)
        return LLMC_OK;
    for (int64_t i = 0; i < numel; i++)
        vals[i] = in[broadcast_source(&out, &x->shape, i)];
    set_output_sym(c, 0, vals, (int)numel);
    return LLMC_OK;
}

static int dim_product(const infer *c, const llmc_shape *s, int from, int to, llmc_poly *p)
{
    if (!llmc_shape_product(s, from, to, p))
        return fail(c, LLMC_E_UNSUPPORTED, "element count overflows");
    return LLMC_OK;
}

static int require_affine(const infer *c, const llmc_poly *p, int out_dim, llmc_affine *a)
{
    char b[256];
    if (llmc_poly_to_affine(p, a))
        return LLMC_OK;
    llmc_poly_format(p, b, sizeof b);
    return fail(c, LLMC_E_UNSUPPORTED, "output dim %d is %s, not affine in (S, P)", out_dim, b);
}

int llmc_reshape_shape(const llmc_shape *in, const llmc_affine *target, int n, bool allowzero,
                       llmc_shape *out, char *why, size_t why_size)
{
    llmc_poly total, known, q;
    char a[256], b[256];
    int infer_at = -1;
    if (n > LLMC_MAX_RANK) {
        snprintf(why, why_size, "rank %d above %d", n, LLMC_MAX_RANK);
        return LLMC_E_UNSUPPORTED;
    }
    out->rank = n;
    for (int i = 0; i < n; i++) {
        llmc_affine t = target[i];
        if (llmc_aff_is_const(t) && t.c == 0 && !allowzero) {
            if (i >= in->rank) {
                snprintf(why, why_size, "target dim %d is 0 but the input has rank %d", i, in->rank);
                return LLMC_E_INPUT;
            }
            t = in->dims[i];
        } else if (llmc_aff_is_const(t) && t.c == -1 && infer_at < 0) {
            infer_at = i;
            t = llmc_aff_const(1);
        } else if (llmc_aff_is_const(t) && t.c < 0) {
            snprintf(why, why_size, "invalid target dim %lld at %d", (long long)t.c, i);
            return LLMC_E_INPUT;
        }
        out->dims[i] = t;
    }
    if (!llmc_shape_product(in, 0, in->rank, &total) || !llmc_shape_product(out, 0, n, &known)) {
        snprintf(why, why_size, "element count overflows");
        return LLMC_E_UNSUPPORTED;
    }
    llmc_poly_format(&total, a, sizeof a);
    llmc_poly_format(&known, b, sizeof b);
    /* Constant counts that disagree make a bad model; symbolic ones we
     * cannot reason about. */
    int bad = llmc_poly_is_const(&total) && llmc_poly_is_const(&known) ? LLMC_E_INPUT : LLMC_E_UNSUPPORTED;
    if (infer_at < 0) {
        if (llmc_poly_eq(&total, &known))
            return LLMC_OK;
        snprintf(why, why_size, "element counts differ: %s vs %s", a, b);
        return bad;
    }
    if (!llmc_poly_div(&total, &known, &q)) {
        snprintf(why, why_size, "cannot solve -1 at %d: %s is not a multiple of %s", infer_at, a, b);
        return bad;
    }
    if (!llmc_poly_to_affine(&q, &out->dims[infer_at])) {
        llmc_poly_format(&q, a, sizeof a);
        snprintf(why, why_size, "output dim %d is %s, not affine in (S, P)", infer_at, a);
        return LLMC_E_UNSUPPORTED;
    }
    return LLMC_OK;
}

static int infer_reshape(infer *c)
{
    const llmc_value *x = input(c, 0);
    llmc_affine target[LLMC_MAX_SYM_ELEMS];
    llmc_shape out;
    char why[512];
    int n, rc;
    if ((rc = known_ints(c, 1, target, &n, "shape")))
        return rc;
    /* allowzero exists from opset 14; before, 0 always copies. */
    bool allowzero = c->n->opset >= 14 && llmc_node_attr_int(c->g, c->id, "allowzero", 0) != 0;
    if ((rc = llmc_reshape_shape(&x->shape, target, n, allowzero, &out, why, sizeof why)))
        return fail(c, rc, "%s", why);
    set_output(c, 0, x->dtype, &out);
    copy_sym(c, 0);
    return LLMC_OK;
}

static int infer_flatten(infer *c)
{
    const llmc_value *x = input(c, 0);
    int64_t axis = llmc_node_attr_int(c->g, c->id, "axis", 1);
    int r = x->shape.rank, rc;
    llmc_poly outer, inner;
    llmc_shape out = {.rank = 2};
    if (axis < -r || axis > r)
        return fail(c, LLMC_E_INPUT, "axis %lld out of range for rank %d", (long long)axis, r);
    axis += axis < 0 ? r : 0;
    if ((rc = dim_product(c, &x->shape, 0, (int)axis, &outer)) ||
        (rc = dim_product(c, &x->shape, (int)axis, r, &inner)) ||
        (rc = require_affine(c, &outer, 0, &out.dims[0])) || (rc = require_affine(c, &inner, 1, &out.dims[1])))
        return rc;
    set_output(c, 0, x->dtype, &out);
    copy_sym(c, 0);
    return LLMC_OK;
}

static int infer_squeeze(infer *c)
{
    const llmc_value *x = input(c, 0);
    int64_t axes[LLMC_MAX_RANK];
    bool drop[LLMC_MAX_RANK] = {false};
    int n = 0, rc, axis;
    char b[96];
    if (input(c, 1) && (rc = const_ints(c, 1, axes, LLMC_MAX_RANK, &n, "axes")))
        return rc;
    for (int i = 0; i < n; i++) {
        if ((rc = normalize_axis(c, axes[i], x->shape.rank, &axis)))
            return rc;
        llmc_affine d = x->shape.dims[axis];
        if (!llmc_aff_eq(d, llmc_aff_const(1)))
            return fail(c, llmc_aff_is_const(d) ? LLMC_E_INPUT : LLMC_E_UNSUPPORTED,
                        "cannot squeeze axis %d of size %s", axis, aff_str(d, b));
        drop[axis] = true;
    }
    for (int i = 0; !input(c, 1) && i < x->shape.rank; i++) {
        /* No axes: every dim that is 1 goes; a symbolic dim must provably
         * differ from 1. */
        llmc_affine d = x->shape.dims[i];
        drop[i] = llmc_aff_eq(d, llmc_aff_const(1));
        if (!drop[i] && !llmc_aff_is_const(d) && !llmc_aff_provably_gt(d, llmc_aff_const(1), c->max_context))
            return fail(c, LLMC_E_UNSUPPORTED, "squeeze without axes: dim %d (%s) may be 1", i, aff_str(d, b));
    }
    llmc_shape out = {.rank = 0};
    for (int i = 0; i < x->shape.rank; i++)
        if (!drop[i])
            out.dims[out.rank++] = x->shape.dims[i];
    set_output(c, 0, x->dtype, &out);
    copy_sym(c, 0);
    return LLMC_OK;
}

static int infer_unsqueeze(infer *c)
{
    const llmc_value *x = input(c, 0);
    int64_t axes[LLMC_MAX_RANK];
    bool inserted[LLMC_MAX_RANK] = {false};
    int n, rc, axis;
    if ((rc = const_ints(c, 1, axes, LLMC_MAX_RANK, &n, "axes")))
        return rc;
    int rank = x->shape.rank + n;
    if (rank > LLMC_MAX_RANK)
        return fail(c, LLMC_E_UNSUPPORTED, "rank %d above %d", rank, LLMC_MAX_RANK);
    for (int i = 0; i < n; i++) {
        if ((rc = normalize_axis(c, axes[i], rank, &axis)))
            return rc;
        if (inserted[axis])
            return fail(c, LLMC_E_INPUT, "axis %d repeated", axis);
        inserted[axis] = true;
    }
    llmc_shape out = {.rank = rank};
    for (int i = 0, j = 0; i < rank; i++)
        out.dims[i] = inserted[i] ? llmc_aff_const(1) : x->shape.dims[j++];
    set_output(c, 0, x->dtype, &out);
    copy_sym(c, 0);
    return LLMC_OK;
}

/* ---- shapes and constants ---- */

static int infer_shape(infer *c)
{
    const llmc_value *x = input(c, 0);
    int r = x->shape.rank;
    int64_t start = 0, end = r;
    if (c->n->opset >= 15) {       /* start/end attributes appear in opset 15 */
        start = llmc_node_attr_int(c->g, c->id, "start", 0);
        end = llmc_node_attr_int(c->g, c->id, "end", r);
        start += start < 0 ? r : 0;
        end += end < 0 ? r : 0;
        start = start < 0 ? 0 : start > r ? r : start;
        end = end < 0 ? 0 : end > r ? r : end;
    }
    int64_t len = end > start ? end - start : 0;
    llmc_shape out = vector_shape(llmc_aff_const(len));
    set_output(c, 0, LLMC_DT_INT64, &out);
    set_output_sym(c, 0, x->shape.dims + start, (int)len);
    return LLMC_OK;
}

/* Output of a Constant node from whichever value attribute it carries. */
static int infer_constant(infer *c)
{
    const llmc_attr *a = c->n->n_attrs == 1 ? &c->n->attrs[0] : NULL;
    llmc_shape s = scalar_shape();
    int dtype;
    if (a && strcmp(a->name, "value") == 0 && a->type == LLMC_ATTR_TENSOR) {
        s.rank = a->t_rank;
        for (int i = 0; i < a->t_rank; i++)
            s.dims[i] = llmc_aff_const(a->t_dims[i]);
        dtype = a->t_dtype;
    } else if (a && strcmp(a->name, "value_float") == 0) {
        dtype = LLMC_DT_FLOAT;
    } else if (a && strcmp(a->name, "value_floats") == 0) {
        s = vector_shape(llmc_aff_const(a->n_floats));
        dtype = LLMC_DT_FLOAT;
    } else if (a && strcmp(a->name, "value_int") == 0) {
        dtype = LLMC_DT_INT64;
    } else if (a && strcmp(a->name, "value_ints") == 0) {
        s = vector_shape(llmc_aff_const(a->n_ints));
        dtype = LLMC_DT_INT64;
    } else {
        return fail(c, LLMC_E_UNSUPPORTED, "Constant needs exactly one of value, value_float(s), value_int(s)");
    }
    set_output(c, 0, dtype, &s);
    llmc_affine vals[LLMC_MAX_SYM_ELEMS];
    int n = 0;
    if (strcmp(a->name, "value_int") == 0)
        vals[n++] = llmc_aff_const(a->i);
    for (int i = 0; strcmp(a->name, "value_ints") == 0 && i < a->n_ints && i < LLMC_MAX_SYM_ELEMS; i++)
        vals[n++] = llmc_aff_const(a->ints[i]);
    if (strcmp(a->name, "value") == 0 && is_int_dtype(dtype)) {
        llmc_value tmp = {.dtype = dtype, .shape = s, .is_const = true, .konst = a->t_data};
        fill_const_sym(&tmp);
        memcpy(vals, tmp.sym, sizeof vals);
        n = tmp.n_sym;
    }
    set_output_sym(c, 0, vals, n);
    return LLMC_OK;
}

static int infer_constant_of_shape(infer *c)
{
    llmc_affine dims[LLMC_MAX_SYM_ELEMS];
    char b[96];
    int n, rc;
    if ((rc = known_ints(c, 0, dims, &n, "shape")))
        return rc;
    if (n > LLMC_MAX_RANK)
        return fail(c, LLMC_E_UNSUPPORTED, "rank %d above %d", n, LLMC_MAX_RANK);
    for (int i = 0; i < n; i++)
        if (llmc_aff_provably_gt(llmc_aff_const(0), dims[i], c->max_context))
            return fail(c, LLMC_E_INPUT, "negative dim %s", aff_str(dims[i], b));
    const llmc_attr *value = llmc_node_attr(c->g, c->id, "value");
    int dtype = value && value->type == LLMC_ATTR_TENSOR ? value->t_dtype : LLMC_DT_FLOAT;
    llmc_shape out = make_shape(n, dims);
    set_output(c, 0, dtype, &out);

    llmc_value one = {.dtype = dtype, .shape = vector_shape(llmc_aff_const(1)), .is_const = true};
    int64_t numel;
    llmc_affine vals[LLMC_MAX_SYM_ELEMS];
    if (value)
        one.konst = value->t_data;
    else
        one.konst = (llmc_const){.data = "\0\0\0\0", .nbytes = 4};
    fill_const_sym(&one);
    if (one.n_sym == 1 && llmc_shape_numel_const(&out, &numel) && numel <= LLMC_MAX_SYM_ELEMS) {
        for (int64_t i = 0; i < numel; i++)
            vals[i] = one.sym[0];
        set_output_sym(c, 0, vals, (int)numel);
    }
    return LLMC_OK;
}

/* A Range operand as a double when it is a constant float scalar. */
static bool const_float_scalar(const llmc_value *v, double *x)
{
    const void *bytes = v->is_const && v->konst.nbytes >= llmc_dtype_size(v->dtype) ? llmc_const_bytes(&v->konst)
                                                                                  : NULL;
    if (bytes && v->dtype == LLMC_DT_FLOAT)
        *x = *(const float *)bytes;
    else if (bytes && v->dtype == LLMC_DT_DOUBLE)
        *x = *(const double *)bytes;
    else
        return false;
    return true;
}

static int range_float_length(const infer *c, llmc_affine *len)
{
    double start, limit, delta;
    if (!const_float_scalar(input(c, 0), &start) || !const_float_scalar(input(c, 1), &limit) ||
        !const_float_scalar(input(c, 2), &delta))
        return fail(c, LLMC_E_UNSUPPORTED, "float Range bounds are not constants");
    if (delta == 0)
        return fail(c, LLMC_E_INPUT, "Range delta is 0");
    double n = ceil((limit - start) / delta);
    *len = llmc_aff_const(n > 0 ? (int64_t)n : 0);
    return LLMC_OK;
}

static int infer_range(infer *c)
{
    const llmc_value *start = input(c, 0), *limit = input(c, 1), *delta = input(c, 2);
    llmc_affine s, l, d, len, diff;
    char b[96];
    int rc;
    if (!limit || !delta || limit->dtype != start->dtype || delta->dtype != start->dtype)
        return fail(c, LLMC_E_INPUT, "Range needs start, limit, delta of one type");
    if (!is_int_dtype(start->dtype)) {
        if ((rc = range_float_length(c, &len)))
            return rc;
        set_output(c, 0, start->dtype, &(llmc_shape){.rank = 1, .dims = {len}});
        return LLMC_OK;
    }
    if (llmc_value_ints(c->g, input_id(c, 0), &s, 1) != 1 || llmc_value_ints(c->g, input_id(c, 1), &l, 1) != 1 ||
        llmc_value_ints(c->g, input_id(c, 2), &d, 1) != 1 || !llmc_aff_is_const(d))
        return fail(c, LLMC_E_UNSUPPORTED, "Range bounds are not known at compile time");
    if (d.c == 0)
        return fail(c, LLMC_E_INPUT, "Range delta is 0");
    if (!llmc_aff_sub(l, s, &diff))
        return fail(c, LLMC_E_UNSUPPORTED, "Range bounds overflow");
    if (llmc_aff_is_const(diff)) {
        /* ceil(diff / delta), at least 0 */
        int64_t q = diff.c / d.c + ((diff.c % d.c != 0) && ((diff.c < 0) == (d.c < 0)));
        len = llmc_aff_const(q > 0 ? q : 0);
    } else {
        llmc_affine signed_diff = diff;
        if ((d.c != 1 && d.c != -1) || !llmc_aff_scale(diff, d.c, &signed_diff) ||
            !llmc_aff_provably_ge(signed_diff, llmc_aff_const(0), c->max_context))
            return fail(c, LLMC_E_UNSUPPORTED, "Range length (%s)/%lld is not provably affine and >= 0",
                        aff_str(diff, b), (long long)d.c);
        len = signed_diff;
    }
    llmc_shape out = vector_shape(len);
    set_output(c, 0, start->dtype, &out);
    llmc_affine vals[LLMC_MAX_SYM_ELEMS];
    for (int64_t i = 0; llmc_aff_is_const(len) && i < len.c && len.c <= LLMC_MAX_SYM_ELEMS; i++)
        vals[i] = (llmc_affine){s.c + i * d.c, s.s, s.p};
    if (llmc_aff_is_const(len))
        set_output_sym(c, 0, vals, (int)len.c);
    return LLMC_OK;
}

/* llmc.Symbols (made by constant folding): values = (c, s, p) per element,
 * shape = the output dims. */
static int infer_symbols(infer *c)
{
    const llmc_attr *values = llmc_node_attr(c->g, c->id, "values");
    const llmc_attr *shape = llmc_node_attr(c->g, c->id, "shape");
    if (!values || values->n_ints % 3 || values->n_ints / 3 > LLMC_MAX_SYM_ELEMS ||
        (shape && shape->n_ints > LLMC_MAX_RANK))
        return fail(c, LLMC_E_INTERNAL, "malformed Symbols node");
    int n = values->n_ints / 3;
    llmc_shape out = vector_shape(llmc_aff_const(n));
    if (shape) {
        out.rank = shape->n_ints;
        for (int i = 0; i < shape->n_ints; i++)
            out.dims[i] = llmc_aff_const(shape->ints[i]);
    }
    llmc_affine vals[LLMC_MAX_SYM_ELEMS];
    for (int i = 0; i < n; i++)
        vals[i] = (llmc_affine){values->ints[3 * i], values->ints[3 * i + 1], values->ints[3 * i + 2]};
    set_output(c, 0, LLMC_DT_INT64, &out);
    set_output_sym(c, 0, vals, n);
    return LLMC_OK;
}

/* ---- Trilu, ScatterND, CumSum: the output has input 0's type and shape ---- */

/* Input k, when present, holds one integer of `dtypes` (rank 0, or rank 1 of dim 1). */
static int require_int_scalar(const infer *c, int k, bool int32_too, const char *what)
{
    const llmc_value *v = input(c, k);
    if (!v)
        return LLMC_OK;
    bool one = v->shape.rank == 0 ||
               (v->shape.rank == 1 && llmc_aff_eq(v->shape.dims[0], llmc_aff_const(1)));
    if (!one || (v->dtype != LLMC_DT_INT64 && !(int32_too && v->dtype == LLMC_DT_INT32)))
        return fail(c, LLMC_E_INPUT, "%s must be one %s, not %s of rank %d", what,
                    int32_too ? "int32 or int64" : "int64", llmc_dtype_name(v->dtype), v->shape.rank);
    return LLMC_OK;
}

static int infer_trilu(infer *c)
{
    const llmc_value *x = input(c, 0);
    if (x->shape.rank < 2)
        return fail(c, LLMC_E_INPUT, "Trilu needs x of rank >= 2, got rank %d", x->shape.rank);
    int rc = require_int_scalar(c, 1, false, "k (input 1)");
    if (!rc)
        set_output(c, 0, x->dtype, &x->shape);
    return rc;
}

/* updates = indices dims[:-1] + data dims[q:], q = indices' last dim. */
static int infer_scatter_nd(infer *c)
{
    const llmc_value *data = input(c, 0), *idx = input(c, 1), *upd = input(c, 2);
    if (!idx || !upd || idx->dtype != LLMC_DT_INT64 || upd->dtype != data->dtype)
        return fail(c, LLMC_E_INPUT, "ScatterND needs data, int64 indices and updates of data's type");
    int r = data->shape.rank, lead = idx->shape.rank - 1;
    llmc_affine q = lead >= 0 ? idx->shape.dims[lead] : llmc_aff_const(-1);
    if (!llmc_aff_is_const(q))
        return fail(c, LLMC_E_UNSUPPORTED, "the last dim of indices depends on S or P");
    if (lead < 0 || q.c > r)
        return fail(c, LLMC_E_INPUT, "indices must be [..., q] with q <= %d, the rank of data", r);
    if (upd->shape.rank != lead + r - (int)q.c)
        return fail(c, LLMC_E_INPUT, "updates have rank %d; indices [..., %lld] into data of rank %d "
                    "need rank %lld", upd->shape.rank, (long long)q.c, r, (long long)(lead + r - q.c));
    int rc = LLMC_OK;
    for (int a = 0; a < lead && !rc; a++)
        rc = require_equal_dims(c, upd->shape.dims[a], idx->shape.dims[a], "updates and indices dims");
    for (int a = (int)q.c; a < r && !rc; a++)
        rc = require_equal_dims(c, upd->shape.dims[lead + a - q.c], data->shape.dims[a],
                                "updates and data dims");
    if (!rc)
        set_output(c, 0, data->dtype, &data->shape);
    return rc;
}

static int infer_cumsum(infer *c)
{
    const llmc_value *x = input(c, 0);
    if (!input(c, 1))
        return fail(c, LLMC_E_INPUT, "CumSum needs its axis (input 1)");
    if (x->shape.rank < 1)
        return fail(c, LLMC_E_INPUT, "CumSum needs x of rank >= 1");
    int rc = require_int_scalar(c, 1, true, "axis (input 1)");
    if (!rc)
        set_output(c, 0, x->dtype, &x->shape);
    return rc;
}

/* ---- dispatch ---- */

typedef int (*infer_fn)(infer *c);

static const struct {
    const char *op;
    infer_fn fn;
} handlers[] = {
    {"Add", infer_binary}, {"Sub", infer_binary}, {"Mul", infer_binary}, {"Div", infer_binary},
    {"Pow", infer_binary}, {"Max", infer_binary}, {"Min", infer_binary}, {"Equal", infer_binary},
    {"Less", infer_binary}, {"Greater", infer_binary}, {"LessOrEqual", infer_binary},
    {"GreaterOrEqual", infer_binary}, {"And", infer_binary}, {"Or", infer_binary}, {"Xor", infer_binary},
    {"Neg", infer_unary}, {"Abs", infer_unary}, {"Sqrt", infer_unary}, {"Exp", infer_unary},
    {"Log", infer_unary}, {"Erf", infer_unary}, {"Tanh", infer_unary}, {"Sigmoid", infer_unary},
    {"Reciprocal", infer_unary}, {"Relu", infer_unary}, {"Sin", infer_unary}, {"Cos", infer_unary},
    {"Not", infer_unary}, {"Floor", infer_unary}, {"Ceil", infer_unary}, {"Identity", infer_unary},
    {"Where", infer_where}, {"Cast", infer_cast},
    {"MatMul", infer_matmul}, {"Gemm", infer_gemm},
    {"ReduceMean", infer_reduce}, {"ReduceSum", infer_reduce}, {"ReduceMax", infer_reduce},
    {"ReduceMin", infer_reduce}, {"ReduceProd", infer_reduce},
    {"Softmax", infer_softmax}, {"LayerNormalization", infer_layer_norm}, {"Gather", infer_gather},
    {"Transpose", infer_transpose}, {"Slice", infer_slice}, {"Concat", infer_concat},
    {"Split", infer_split}, {"Expand", infer_expand}, {"Reshape", infer_reshape},
    {"Flatten", infer_flatten}, {"Squeeze", infer_squeeze}, {"Unsqueeze", infer_unsqueeze},
    {"Shape", infer_shape}, {"Constant", infer_constant}, {"ConstantOfShape", infer_constant_of_shape},
    {"Range", infer_range}, {"Trilu", infer_trilu}, {"ScatterND", infer_scatter_nd},
    {"CumSum", infer_cumsum},
};

static infer_fn find_handler(const llmc_node *n)
{
    if (strcmp(n->domain, "llmc") == 0 && strcmp(n->op_type, "Symbols") == 0)
        return infer_symbols;
    if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
        return NULL;
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
        if (strcmp(handlers[i].op, n->op_type) == 0)
            return handlers[i].fn;
    return NULL;
}

static int infer_node(infer *c)
{
    infer_fn fn = find_handler(c->n);
    if (!fn)
        return fail(c, LLMC_E_UNSUPPORTED, "no shape inference for op %s%s%s", c->n->domain,
                    c->n->domain[0] ? "." : "", c->n->op_type);
    bool needs_input = strcmp(c->n->op_type, "Constant") != 0 && strcmp(c->n->op_type, "Symbols") != 0;
    if (needs_input && !input(c, 0))
        return fail(c, LLMC_E_INPUT, "input 0 is missing");
    for (int k = 0; k < c->n->n_inputs; k++) {
        const llmc_value *v = input(c, k);
        if (v && (v->shape.rank < 0 || v->dtype == LLMC_DT_UNDEFINED))
            return fail(c, LLMC_E_UNSUPPORTED, "input %d '%s' has unknown %s", k, v->name,
                        v->shape.rank < 0 ? "rank" : "type");
    }
    return fn(c);
}

static int check_graph_inputs(const llmc_graph *g, llmc_error *err)
{
    for (int k = 0; k < g->n_inputs; k++) {
        const llmc_value *v = &g->values[g->inputs[k]];
        if (v->shape.rank < 0 || v->dtype == LLMC_DT_UNDEFINED)
            return llmc_fail(err, LLMC_E_UNSUPPORTED, "graph input '%s' has unknown %s", v->name,
                             v->shape.rank < 0 ? "rank" : "type");
    }
    return LLMC_OK;
}

static void shape_text(const llmc_shape *s, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < s->rank && used < cap; d++) {
        char dim[96];
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", d ? "," : "", aff_str(s->dims[d], dim));
    }
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
}

/* The exporter's value_info and output types and shapes must agree with
 * inference: a disagreement means the model is not what its file says. */
static int check_declared(const llmc_graph *g, llmc_error *err)
{
    for (int i = 0; i < g->n_values; i++) {
        const llmc_value *v = &g->values[i];
        if (v->producer < 0 && !v->is_graph_output)
            continue;
        if (v->declared_dtype != LLMC_DT_UNDEFINED && v->dtype != LLMC_DT_UNDEFINED &&
            v->declared_dtype != v->dtype)
            return llmc_fail(err, LLMC_E_INPUT,
                             "value '%s': the model declares element type %s but its producer gives %s",
                             v->name, llmc_dtype_name(v->declared_dtype), llmc_dtype_name(v->dtype));
        if (v->declared.rank < 0 || v->shape.rank < 0)
            continue;
        bool same = v->declared.rank == v->shape.rank;
        for (int d = 0; same && d < v->shape.rank; d++)
            same = llmc_aff_eq(v->declared.dims[d], v->shape.dims[d]);
        if (!same) {
            char want[512], got[512];
            shape_text(&v->declared, want, sizeof want);
            shape_text(&v->shape, got, sizeof got);
            return llmc_fail(err, LLMC_E_INPUT, "value '%s': the model declares shape %s but its producer gives %s",
                             v->name, want, got);
        }
    }
    return LLMC_OK;
}

static int run_shape_inference(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    int rc = check_graph_inputs(g, err);
    if (rc)
        return rc;
    for (int v = 0; v < g->n_values; v++)
        fill_const_sym(&g->values[v]);
    int *order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    int cycle = -1;
    if (!order)
        return llmc_fail(err, LLMC_E_NOMEM, "shape inference: out of memory");
    int n = llmc_graph_topo_order(g, order, &cycle);
    if (n < 0)
        rc = cycle >= 0 ? llmc_fail(err, LLMC_E_INPUT, "graph has a cycle through node '%s' (#%d, %s)",
                                    g->nodes[cycle].name, cycle, g->nodes[cycle].op_type)
                        : llmc_fail(err, LLMC_E_NOMEM, "shape inference: out of memory");
    infer c = {.g = g, .max_context = ctx ? ctx->max_context : 0, .err = err};
    for (int i = 0; i < n && rc == LLMC_OK; i++) {
        c.id = order[i];
        c.n = &g->nodes[order[i]];
        rc = infer_node(&c);
    }
    free(order);
    return rc ? rc : check_declared(g, err);
}

const llmc_pass llmc_pass_shape_inference = {"shape-inference", run_shape_inference};
