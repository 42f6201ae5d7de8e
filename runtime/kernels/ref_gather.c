/* Gather: take(data, indices, axis) with int32/int64 indices; negative
 * indices count from the end. */
#include <string.h>

#include "kernels.h"
#include "rt_msg.h"

static bool gather_dims_ok(const rt_view *data, const rt_view *idx, int axis, const rt_view *y)
{
    if (y->rank != data->rank - 1 + idx->rank)
        return false;
    int k = 0;
    for (int a = 0; a < axis; a++)
        if (y->dims[k++] != data->dims[a])
            return false;
    for (int a = 0; a < idx->rank; a++)
        if (y->dims[k++] != idx->dims[a])
            return false;
    for (int a = axis + 1; a < data->rank; a++)
        if (y->dims[k++] != data->dims[a])
            return false;
    return true;
}

llmc_rt_status k_gather(const rt_view *data, const rt_view *idx, int axis, rt_view *y,
                        llmc_rt_error *err)
{
    size_t es = k_dtype_size(data->dtype);
    if (!es || data->dtype != y->dtype ||
        (idx->dtype != LLMC_RT_I32 && idx->dtype != LLMC_RT_I64))
        return rt_fail(err, LLMC_RT_E_EXEC, "Gather takes T with int32/int64 indices -> T; "
                       "got %d, %d -> %d", RT_N(data->dtype, idx->dtype, y->dtype), NULL);
    if (axis < 0 || axis >= data->rank || !gather_dims_ok(data, idx, axis, y)) {
        char td[96], ti[96], ty[96];
        return rt_fail(err, LLMC_RT_E_EXEC, "Gather of %s with indices %s on axis %d "
                       "cannot give %s", RT_N(axis),
                       RT_S(k_dims_text(data, td, sizeof td), k_dims_text(idx, ti, sizeof ti),
                            k_dims_text(y, ty, sizeof ty)));
    }
    int64_t outer = 1, n_axis = data->dims[axis], inner = 1, n_idx = k_count(idx);
    for (int a = 0; a < axis; a++)
        outer *= data->dims[a];
    for (int a = axis + 1; a < data->rank; a++)
        inner *= data->dims[a];
    size_t block = (size_t)inner * es;
    const uint8_t *src = data->data;
    uint8_t *dst = y->data;
    for (int64_t i = 0; i < n_idx; i++) {
        int64_t j = k_load_i(idx, i);
        if (j < -n_axis || j >= n_axis)
            return rt_fail(err, LLMC_RT_E_EXEC, "index %d (element %d) outside [-%d, %d)",
                           RT_N(j, i, n_axis, n_axis), NULL);
        if (j < 0)
            j += n_axis;
        for (int64_t o = 0; o < outer; o++)
            memcpy(dst + (size_t)(o * n_idx + i) * block,
                   src + (size_t)(o * n_axis + j) * block, block);
    }
    return LLMC_RT_OK;
}
