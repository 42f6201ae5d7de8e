/* Shapes of Trilu, ScatterND and CumSum: the output has input 0's type and
 * shape. */
#include "shape_ops.h"

#include "shape_infer.h"

/* Input k, when present, holds one integer of `dtypes` (rank 0, or rank 1 of dim 1). */
static int require_int_scalar(const infer *c, int k, bool int32_too, const char *what)
{
    const llmc_value *v = input(c, k);
    if (!v)
        return LLMC_OK;
    bool one = v->shape.rank == 0 ||
               (v->shape.rank == 1 && llmc_aff_eq(v->shape.dims[0], llmc_aff_const(1)));
    if (!one || (v->dtype != LLMC_DT_INT64 && !(int32_too && v->dtype == LLMC_DT_INT32)))
        return infer_fail(c, LLMC_E_INPUT, "%s must be one %s, not %s of rank %d", what,
                          int32_too ? "int32 or int64" : "int64", llmc_dtype_name(v->dtype), v->shape.rank);
    return LLMC_OK;
}

int infer_trilu(infer *c)
{
    const llmc_value *x = input(c, 0);
    if (x->shape.rank < 2)
        return infer_fail(c, LLMC_E_INPUT, "Trilu needs x of rank >= 2, got rank %d", x->shape.rank);
    int rc = require_int_scalar(c, 1, false, "k (input 1)");
    if (!rc)
        infer_set_output(c, 0, x->dtype, &x->shape);
    return rc;
}

/* updates = indices dims[:-1] + data dims[q:], q = indices' last dim. */
int infer_scatter_nd(infer *c)
{
    const llmc_value *data = input(c, 0), *idx = input(c, 1), *upd = input(c, 2);
    if (!idx || !upd || idx->dtype != LLMC_DT_INT64 || upd->dtype != data->dtype)
        return infer_fail(c, LLMC_E_INPUT, "ScatterND needs data, int64 indices and updates of data's type");
    int r = data->shape.rank, lead = idx->shape.rank - 1;
    llmc_affine q = lead >= 0 ? idx->shape.dims[lead] : llmc_aff_const(-1);
    if (!llmc_aff_is_const(q))
        return infer_fail(c, LLMC_E_UNSUPPORTED, "the last dim of indices depends on S or P");
    if (lead < 0 || q.c > r)
        return infer_fail(c, LLMC_E_INPUT, "indices must be [..., q] with q <= %d, the rank of data", r);
    if (upd->shape.rank != lead + r - (int)q.c)
        return infer_fail(c, LLMC_E_INPUT, "updates have rank %d; indices [..., %lld] into data of rank %d "
                          "need rank %lld", upd->shape.rank, (long long)q.c, r, (long long)(lead + r - q.c));
    int rc = LLMC_OK;
    for (int a = 0; a < lead && !rc; a++)
        rc = infer_require_equal_dims(c, upd->shape.dims[a], idx->shape.dims[a], "updates and indices dims");
    for (int a = (int)q.c; a < r && !rc; a++)
        rc = infer_require_equal_dims(c, upd->shape.dims[lead + a - q.c], data->shape.dims[a],
                                      "updates and data dims");
    if (!rc)
        infer_set_output(c, 0, data->dtype, &data->shape);
    return rc;
}

int infer_cumsum(infer *c)
{
    const llmc_value *x = input(c, 0);
    if (!input(c, 1))
        return infer_fail(c, LLMC_E_INPUT, "CumSum needs its axis (input 1)");
    if (x->shape.rank < 1)
        return infer_fail(c, LLMC_E_INPUT, "CumSum needs x of rank >= 1");
    int rc = require_int_scalar(c, 1, true, "axis (input 1)");
    if (!rc)
        infer_set_output(c, 0, x->dtype, &x->shape);
    return rc;
}
