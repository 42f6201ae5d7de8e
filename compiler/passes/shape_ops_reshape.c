/* Shapes of Reshape, Flatten, Squeeze and Unsqueeze: same elements, new
 * dims. */
#include "shape_ops.h"

#include "shape_infer.h"

static int dim_product(const infer *c, const llmc_shape *s, int from, int to, llmc_poly *p)
{
    if (!llmc_shape_product(s, from, to, p))
        return infer_fail(c, LLMC_E_UNSUPPORTED, "element count overflows");
    return LLMC_OK;
}

static int require_affine(const infer *c, const llmc_poly *p, int out_dim, llmc_affine *a)
{
    char b[256];
    if (llmc_poly_to_affine(p, a))
        return LLMC_OK;
    llmc_poly_format(p, b, sizeof b);
    return infer_fail(c, LLMC_E_UNSUPPORTED, "output dim %d is %s, not affine in (S, P)", out_dim, b);
}

int infer_reshape(infer *c)
{
    const llmc_value *x = input(c, 0);
    llmc_affine target[LLMC_MAX_SYM_ELEMS];
    llmc_shape out;
    char why[512];
    int n, rc;
    if ((rc = infer_known_ints(c, 1, target, &n, "shape")))
        return rc;
    /* allowzero exists from opset 14; before, 0 always copies. */
    bool allowzero = c->n->opset >= 14 && llmc_node_attr_int(c->g, c->id, "allowzero", 0) != 0;
    if ((rc = llmc_reshape_shape(&x->shape, target, n, allowzero, &out, why, sizeof why)))
        return infer_fail(c, rc, "%s", why);
    infer_set_output(c, 0, x->dtype, &out);
    infer_copy_sym(c, 0);
    return LLMC_OK;
}

int infer_flatten(infer *c)
{
    const llmc_value *x = input(c, 0);
    int64_t axis = llmc_node_attr_int(c->g, c->id, "axis", 1);
    int r = x->shape.rank, rc;
    llmc_poly outer, inner;
    llmc_shape out = {.rank = 2};
    if (axis < -r || axis > r)
        return infer_fail(c, LLMC_E_INPUT, "axis %lld out of range for rank %d", (long long)axis, r);
    axis += axis < 0 ? r : 0;
    if ((rc = dim_product(c, &x->shape, 0, (int)axis, &outer)) ||
        (rc = dim_product(c, &x->shape, (int)axis, r, &inner)) ||
        (rc = require_affine(c, &outer, 0, &out.dims[0])) || (rc = require_affine(c, &inner, 1, &out.dims[1])))
        return rc;
    infer_set_output(c, 0, x->dtype, &out);
    infer_copy_sym(c, 0);
    return LLMC_OK;
}

int infer_squeeze(infer *c)
{
    const llmc_value *x = input(c, 0);
    int64_t axes[LLMC_MAX_RANK];
    bool drop[LLMC_MAX_RANK] = {false};
    int n = 0, rc, axis;
    char b[96];
    if (input(c, 1) && (rc = infer_const_ints(c, 1, axes, LLMC_MAX_RANK, &n, "axes")))
        return rc;
    for (int i = 0; i < n; i++) {
        if ((rc = infer_normalize_axis(c, axes[i], x->shape.rank, &axis)))
            return rc;
        llmc_affine d = x->shape.dims[axis];
        if (!llmc_aff_eq(d, llmc_aff_const(1)))
            return infer_fail(c, llmc_aff_is_const(d) ? LLMC_E_INPUT : LLMC_E_UNSUPPORTED,
                              "cannot squeeze axis %d of size %s", axis, aff_str(d, b));
        drop[axis] = true;
    }
    for (int i = 0; !input(c, 1) && i < x->shape.rank; i++) {
        /* No axes: every dim that is 1 goes; a symbolic dim must provably
         * differ from 1. */
        llmc_affine d = x->shape.dims[i];
        drop[i] = llmc_aff_eq(d, llmc_aff_const(1));
        if (!drop[i] && !llmc_aff_is_const(d) && !llmc_aff_provably_gt(d, llmc_aff_const(1), c->max_context))
            return infer_fail(c, LLMC_E_UNSUPPORTED, "squeeze without axes: dim %d (%s) may be 1", i,
                              aff_str(d, b));
    }
    llmc_shape out = {.rank = 0};
    for (int i = 0; i < x->shape.rank; i++)
        if (!drop[i])
            out.dims[out.rank++] = x->shape.dims[i];
    infer_set_output(c, 0, x->dtype, &out);
    infer_copy_sym(c, 0);
    return LLMC_OK;
}

int infer_unsqueeze(infer *c)
{
    const llmc_value *x = input(c, 0);
    int64_t axes[LLMC_MAX_RANK];
    bool inserted[LLMC_MAX_RANK] = {false};
    int n, rc, axis;
    if ((rc = infer_const_ints(c, 1, axes, LLMC_MAX_RANK, &n, "axes")))
        return rc;
    int rank = x->shape.rank + n;
    if (rank > LLMC_MAX_RANK)
        return infer_fail(c, LLMC_E_UNSUPPORTED, "rank %d above %d", rank, LLMC_MAX_RANK);
    for (int i = 0; i < n; i++) {
        if ((rc = infer_normalize_axis(c, axes[i], rank, &axis)))
            return rc;
        if (inserted[axis])
            return infer_fail(c, LLMC_E_INPUT, "axis %d repeated", axis);
        inserted[axis] = true;
    }
    llmc_shape out = {.rank = rank};
    for (int i = 0, j = 0; i < rank; i++)
        out.dims[i] = inserted[i] ? llmc_aff_const(1) : x->shape.dims[j++];
    infer_set_output(c, 0, x->dtype, &out);
    infer_copy_sym(c, 0);
    return LLMC_OK;
}
