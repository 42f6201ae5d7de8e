/* Shapes and contents of Shape, Constant, ConstantOfShape, Range and
 * llmc.Symbols. */
#include "shape_ops.h"

#include <math.h>
#include <string.h>

#include "ir/const_view.h"
#include "shape_infer.h"

int infer_shape(infer *c)
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
    infer_set_output(c, 0, LLMC_DT_INT64, &out);
    infer_set_output_sym(c, 0, x->shape.dims + start, (int)len);
    return LLMC_OK;
}

/* Output of a Constant node from whichever value attribute it carries. */
int infer_constant(infer *c)
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
        return infer_fail(c, LLMC_E_UNSUPPORTED,
                          "Constant needs exactly one of value, value_float(s), value_int(s)");
    }
    infer_set_output(c, 0, dtype, &s);
    llmc_affine vals[LLMC_MAX_SYM_ELEMS];
    int n = 0;
    if (strcmp(a->name, "value_int") == 0)
        vals[n++] = llmc_aff_const(a->i);
    for (int i = 0; strcmp(a->name, "value_ints") == 0 && i < a->n_ints && i < LLMC_MAX_SYM_ELEMS; i++)
        vals[n++] = llmc_aff_const(a->ints[i]);
    if (strcmp(a->name, "value") == 0 && llmc_is_int_dtype(dtype)) {
        llmc_value tmp = {.dtype = dtype, .shape = s, .is_const = true, .konst = a->t_data};
        llmc_value_fill_const_sym(&tmp);
        memcpy(vals, tmp.sym, sizeof vals);
        n = tmp.n_sym;
    }
    infer_set_output_sym(c, 0, vals, n);
    return LLMC_OK;
}

int infer_constant_of_shape(infer *c)
{
    llmc_affine dims[LLMC_MAX_SYM_ELEMS];
    char b[96];
    int n, rc;
    if ((rc = infer_known_ints(c, 0, dims, &n, "shape")))
        return rc;
    if (n > LLMC_MAX_RANK)
        return infer_fail(c, LLMC_E_UNSUPPORTED, "rank %d above %d", n, LLMC_MAX_RANK);
    for (int i = 0; i < n; i++)
        if (llmc_aff_provably_gt(llmc_aff_const(0), dims[i], c->max_context))
            return infer_fail(c, LLMC_E_INPUT, "negative dim %s", aff_str(dims[i], b));
    const llmc_attr *value = llmc_node_attr(c->g, c->id, "value");
    int dtype = value && value->type == LLMC_ATTR_TENSOR ? value->t_dtype : LLMC_DT_FLOAT;
    llmc_shape out = make_shape(n, dims);
    infer_set_output(c, 0, dtype, &out);

    llmc_value one = {.dtype = dtype, .shape = vector_shape(llmc_aff_const(1)), .is_const = true};
    int64_t numel;
    llmc_affine vals[LLMC_MAX_SYM_ELEMS];
    if (value)
        one.konst = value->t_data;
    else
        one.konst = (llmc_const){.data = "\0\0\0\0", .nbytes = 4};
    llmc_value_fill_const_sym(&one);
    if (one.n_sym == 1 && llmc_shape_numel_const(&out, &numel) && numel <= LLMC_MAX_SYM_ELEMS) {
        for (int64_t i = 0; i < numel; i++)
            vals[i] = one.sym[0];
        infer_set_output_sym(c, 0, vals, (int)numel);
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
        return infer_fail(c, LLMC_E_UNSUPPORTED, "float Range bounds are not constants");
    if (delta == 0)
        return infer_fail(c, LLMC_E_INPUT, "Range delta is 0");
    double n = ceil((limit - start) / delta);
    *len = llmc_aff_const(n > 0 ? (int64_t)n : 0);
    return LLMC_OK;
}

int infer_range(infer *c)
{
    const llmc_value *start = input(c, 0), *limit = input(c, 1), *delta = input(c, 2);
    llmc_affine s, l, d, len, diff;
    char b[96];
    int rc;
    if (!limit || !delta || limit->dtype != start->dtype || delta->dtype != start->dtype)
        return infer_fail(c, LLMC_E_INPUT, "Range needs start, limit, delta of one type");
    if (!llmc_is_int_dtype(start->dtype)) {
        if ((rc = range_float_length(c, &len)))
            return rc;
        infer_set_output(c, 0, start->dtype, &(llmc_shape){.rank = 1, .dims = {len}});
        return LLMC_OK;
    }
    if (llmc_value_ints(c->g, input_id(c, 0), &s, 1) != 1 || llmc_value_ints(c->g, input_id(c, 1), &l, 1) != 1 ||
        llmc_value_ints(c->g, input_id(c, 2), &d, 1) != 1 || !llmc_aff_is_const(d))
        return infer_fail(c, LLMC_E_UNSUPPORTED, "Range bounds are not known at compile time");
    if (d.c == 0)
        return infer_fail(c, LLMC_E_INPUT, "Range delta is 0");
    if (!llmc_aff_sub(l, s, &diff))
        return infer_fail(c, LLMC_E_UNSUPPORTED, "Range bounds overflow");
    if (llmc_aff_is_const(diff)) {
        /* ceil(diff / delta), at least 0 */
        int64_t q = diff.c / d.c + ((diff.c % d.c != 0) && ((diff.c < 0) == (d.c < 0)));
        len = llmc_aff_const(q > 0 ? q : 0);
    } else {
        llmc_affine signed_diff = diff;
        if ((d.c != 1 && d.c != -1) || !llmc_aff_scale(diff, d.c, &signed_diff) ||
            !llmc_aff_provably_ge(signed_diff, llmc_aff_const(0), c->max_context))
            return infer_fail(c, LLMC_E_UNSUPPORTED, "Range length (%s)/%lld is not provably affine and >= 0",
                              aff_str(diff, b), (long long)d.c);
        len = signed_diff;
    }
    llmc_shape out = vector_shape(len);
    infer_set_output(c, 0, start->dtype, &out);
    llmc_affine vals[LLMC_MAX_SYM_ELEMS];
    for (int64_t i = 0; llmc_aff_is_const(len) && i < len.c && len.c <= LLMC_MAX_SYM_ELEMS; i++)
        vals[i] = (llmc_affine){s.c + i * d.c, s.s, s.p};
    if (llmc_aff_is_const(len))
        infer_set_output_sym(c, 0, vals, (int)len.c);
    return LLMC_OK;
}

/* llmc.Symbols (made by constant folding): values = (c, s, p) per element,
 * shape = the output dims. */
int infer_symbols(infer *c)
{
    const llmc_attr *values = llmc_node_attr(c->g, c->id, "values");
    const llmc_attr *shape = llmc_node_attr(c->g, c->id, "shape");
    if (!values || values->n_ints % 3 || values->n_ints / 3 > LLMC_MAX_SYM_ELEMS ||
        (shape && shape->n_ints > LLMC_MAX_RANK))
        return infer_fail(c, LLMC_E_INTERNAL, "malformed Symbols node");
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
    infer_set_output(c, 0, LLMC_DT_INT64, &out);
    infer_set_output_sym(c, 0, vals, n);
    return LLMC_OK;
}
