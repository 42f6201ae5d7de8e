/* The shape arithmetic shape inference shares with the rewriting passes:
 * the known contents of integer values, Reshape's output shape and one
 * axis of a constant Slice (shape_inference.h). */
#include "shape_inference.h"

#include <stdio.h>
#include <string.h>

#include "symbolic.h"

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
    if (v->is_const && llmc_is_int_dtype(v->dtype) && const_shape && numel <= max &&
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

void llmc_value_fill_const_sym(llmc_value *v)
{
    int64_t numel;
    v->n_sym = 0;
    if (!v->is_const || !llmc_is_int_dtype(v->dtype) || !llmc_shape_numel_const(&v->shape, &numel) ||
        numel <= 0 || numel > LLMC_MAX_SYM_ELEMS ||
        v->konst.nbytes < (uint64_t)numel * llmc_dtype_size(v->dtype))
        return;
    read_const_ints(v, v->sym, numel);
    v->n_sym = (int)numel;
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
