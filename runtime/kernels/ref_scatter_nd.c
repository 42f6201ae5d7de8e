/* ScatterND: y = data, then for every index tuple t (the last axis of
 * indices, q = its length <= rank of data) the slice y[t] (data's dims
 * [q, rank)) is replaced by, or combined (add, mul, max, min) with, the
 * slice updates[t's position].  Negative indices wrap; every tuple is
 * checked before anything is written, so an index out of range fails
 * cleanly and never writes. */
#include <string.h>

#include "kernels.h"
#include "plan_format.h"
#include "rt_msg.h"

bool k_scatter_nd_supports(int kind, int dtype)
{
    if (!k_dtype_size(dtype) || kind < SCATTER_NONE || kind >= SCATTER_COUNT)
        return false;
    return kind == SCATTER_NONE || dtype != LLMC_RT_BOOL;
}

/* updates dims = indices dims[:-1] + data dims[q:]. */
static bool scatter_dims_ok(const rt_view *data, const rt_view *idx, const rt_view *upd)
{
    int q = (int)idx->dims[idx->rank - 1], lead = idx->rank - 1;
    if (upd->rank != lead + data->rank - q)
        return false;
    for (int a = 0; a < lead; a++)
        if (upd->dims[a] != idx->dims[a])
            return false;
    for (int a = q; a < data->rank; a++)
        if (upd->dims[lead + a - q] != data->dims[a])
            return false;
    return true;
}

static llmc_rt_status scatter_check(int kind, const rt_view *data, const rt_view *idx,
                                    const rt_view *upd, const rt_view *y, llmc_rt_error *err)
{
    char td[96], ti[96], tu[96];
    if (!k_scatter_nd_supports(kind, data->dtype) || upd->dtype != data->dtype ||
        y->dtype != data->dtype || idx->dtype != LLMC_RT_I64)
        return rt_fail(err, LLMC_RT_E_EXEC, "ScatterND reduction %d takes T, int64, T -> T "
                       "(no bool with a reduction); got %d, %d, %d -> %d",
                       RT_N(kind, data->dtype, idx->dtype, upd->dtype, y->dtype), NULL);
    if (!k_same_dims(data, y) || idx->rank < 1 || idx->dims[idx->rank - 1] > data->rank ||
        !scatter_dims_ok(data, idx, upd))
        return rt_fail(err, LLMC_RT_E_EXEC, "ScatterND of data %s with indices %s needs "
                       "updates of indices dims[:-1] + data dims[q:] and y of data's dims; "
                       "updates are %s", NULL,
                       RT_S(k_dims_text(data, td, sizeof td), k_dims_text(idx, ti, sizeof ti),
                            k_dims_text(upd, tu, sizeof tu)));
    return LLMC_RT_OK;
}

/* Element offset of tuple t in data (row-major strides), after checking
 * every component against its dim. */
static llmc_rt_status tuple_offset(const rt_view *data, const rt_view *idx, int64_t t,
                                   const int64_t *strides, int64_t *off, llmc_rt_error *err)
{
    int q = (int)idx->dims[idx->rank - 1];
    *off = 0;
    for (int a = 0; a < q; a++) {
        int64_t j = k_load_i(idx, t * q + a), d = data->dims[a];
        if (j < -d || j >= d)
            return rt_fail(err, LLMC_RT_E_EXEC, "ScatterND index %d (tuple %d, axis %d) is "
                           "outside [-%d, %d)", RT_N(j, t, a, d, d), NULL);
        *off += (j < 0 ? j + d : j) * strides[a];
    }
    return LLMC_RT_OK;
}

static int64_t wrap_u64(uint64_t v)
{
    return v <= (uint64_t)INT64_MAX ? (int64_t)v : -(int64_t)~v - 1;
}

static void combine_int(int kind, rt_view *y, int64_t i, int64_t u)
{
    int64_t a = k_load_i(y, i);
    switch (kind) {
    case SCATTER_ADD: a = wrap_u64((uint64_t)a + (uint64_t)u); break;
    case SCATTER_MUL: a = wrap_u64((uint64_t)a * (uint64_t)u); break;
    case SCATTER_MAX: a = u > a ? u : a; break;
    default: a = u < a ? u : a; break;
    }
    k_store_i(y, i, a);
}

static void combine_float(int kind, rt_view *y, int64_t i, float u)
{
    float a = k_load_f(y, i);
    switch (kind) {
    case SCATTER_ADD: a += u; break;
    case SCATTER_MUL: a *= u; break;
    case SCATTER_MAX: a = u > a || u != u ? u : a; break; /* NaN propagates */
    default: a = u < a || u != u ? u : a; break;
    }
    k_store_f(y, i, a);
}

/* Slice `s` of updates (n elements) into y at element offset `off`. */
static void scatter_slice(int kind, const rt_view *upd, int64_t s, int64_t n, rt_view *y,
                          int64_t off)
{
    size_t es = k_dtype_size(y->dtype);
    if (kind == SCATTER_NONE) {
        memcpy((uint8_t *)y->data + (size_t)off * es,
               (const uint8_t *)upd->data + (size_t)(s * n) * es, (size_t)n * es);
        return;
    }
    for (int64_t e = 0; e < n; e++) {
        if (y->dtype == LLMC_RT_F32)
            combine_float(kind, y, off + e, k_load_f(upd, s * n + e));
        else
            combine_int(kind, y, off + e, k_load_i(upd, s * n + e));
    }
}

llmc_rt_status k_scatter_nd(int kind, const rt_view *data, const rt_view *idx,
                            const rt_view *upd, rt_view *y, llmc_rt_error *err)
{
    llmc_rt_status st = scatter_check(kind, data, idx, upd, y, err);
    if (st)
        return st;
    int64_t strides[RT_R], off, n_tuples = 1, slice = 1;
    int q = (int)idx->dims[idx->rank - 1];
    k_strides(data, strides);
    for (int a = 0; a < idx->rank - 1; a++)
        n_tuples *= idx->dims[a];
    for (int a = q; a < data->rank; a++)
        slice *= data->dims[a];
    if (k_count(y) == 0)
        return LLMC_RT_OK;
    for (int64_t t = 0; t < n_tuples; t++) /* every index checked before any write */
        if ((st = tuple_offset(data, idx, t, strides, &off, err)) != LLMC_RT_OK)
            return st;
    if (y->data != data->data)
        memcpy(y->data, data->data, (size_t)k_count(y) * k_dtype_size(y->dtype));
    for (int64_t t = 0; t < n_tuples; t++) {
        tuple_offset(data, idx, t, strides, &off, NULL);
        scatter_slice(kind, upd, t, slice, y, off);
    }
    return LLMC_RT_OK;
}
