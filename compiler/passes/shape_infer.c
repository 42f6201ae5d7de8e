/* The node context of the shape handlers: messages, outputs, operand
 * contents, broadcasting. */
#include "shape_infer.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

int infer_fail(const infer *c, int code, const char *fmt, ...)
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

void infer_set_output(const infer *c, int k, int dtype, const llmc_shape *s)
{
    llmc_value *v = output(c, k);
    if (!v)
        return;
    v->dtype = dtype;
    v->shape = *s;
    v->n_sym = 0;
}

void infer_set_output_sym(const infer *c, int k, const llmc_affine *sym, int n)
{
    llmc_value *v = output(c, k);
    int64_t numel;
    if (!v || n <= 0 || n > LLMC_MAX_SYM_ELEMS || !llmc_is_int_dtype(v->dtype) ||
        !llmc_shape_numel_const(&v->shape, &numel) || numel != n)
        return;
    memcpy(v->sym, sym, sizeof *sym * (size_t)n);
    v->n_sym = n;
}

int infer_normalize_axis(const infer *c, int64_t axis, int rank, int *out)
{
    *out = 0;
    if (axis < -rank || axis >= rank)
        return infer_fail(c, LLMC_E_INPUT, "axis %lld out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return LLMC_OK;
}

int infer_const_ints(const infer *c, int k, int64_t *vals, int max, int *n, const char *what)
{
    llmc_affine a[LLMC_MAX_SYM_ELEMS];
    int cnt = llmc_value_ints(c->g, input_id(c, k), a, max < LLMC_MAX_SYM_ELEMS ? max : LLMC_MAX_SYM_ELEMS);
    for (int i = 0; i < cnt; i++)
        if (!llmc_aff_is_const(a[i]))
            cnt = -1;
    if (cnt < 0)
        return infer_fail(c, LLMC_E_UNSUPPORTED, "%s (input %d) is not a compile-time constant", what, k);
    for (int i = 0; i < cnt; i++)
        vals[i] = a[i].c;
    *n = cnt;
    return LLMC_OK;
}

int infer_known_ints(const infer *c, int k, llmc_affine *vals, int *n, const char *what)
{
    int cnt = llmc_value_ints(c->g, input_id(c, k), vals, LLMC_MAX_SYM_ELEMS);
    if (cnt < 0)
        return infer_fail(c, LLMC_E_UNSUPPORTED, "%s (input %d) is not known at compile time", what, k);
    *n = cnt;
    return LLMC_OK;
}

static int broadcast_dim(const infer *c, llmc_affine a, llmc_affine b, llmc_affine *r)
{
    char x[96], y[96];
    if (llmc_aff_eq(a, b) || llmc_aff_eq(b, llmc_aff_const(1)))
        *r = a;
    else if (llmc_aff_eq(a, llmc_aff_const(1)))
        *r = b;
    else if (llmc_aff_is_const(a) && llmc_aff_is_const(b))
        return infer_fail(c, LLMC_E_INPUT, "cannot broadcast dims %s and %s", aff_str(a, x), aff_str(b, y));
    else
        return infer_fail(c, LLMC_E_UNSUPPORTED, "cannot prove dims %s and %s equal for broadcasting",
                          aff_str(a, x), aff_str(b, y));
    return LLMC_OK;
}

int infer_broadcast_shapes(const infer *c, const llmc_shape *a, const llmc_shape *b, llmc_shape *r)
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

int64_t infer_broadcast_source(const llmc_shape *out, const llmc_shape *in, int64_t flat)
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

void infer_copy_sym(const infer *c, int from_input)
{
    const llmc_value *v = input(c, from_input);
    llmc_affine vals[LLMC_MAX_SYM_ELEMS];
    int n = llmc_value_ints(c->g, input_id(c, from_input), vals, LLMC_MAX_SYM_ELEMS);
    if (v && n > 0)
        infer_set_output_sym(c, 0, vals, n);
}

int infer_require_equal_dims(const infer *c, llmc_affine a, llmc_affine b, const char *what)
{
    char x[96], y[96];
    if (llmc_aff_eq(a, b))
        return LLMC_OK;
    return infer_fail(c, llmc_aff_is_const(a) && llmc_aff_is_const(b) ? LLMC_E_INPUT : LLMC_E_UNSUPPORTED,
                      "%s differ: %s vs %s", what, aff_str(a, x), aff_str(b, y));
}
