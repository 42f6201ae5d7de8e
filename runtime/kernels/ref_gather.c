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

/* Index element i wrapped into [0, n) (negative ones count from the end). */
static llmc_rt_status wrapped_index(const rt_view *idx, int64_t i, int64_t n, int64_t *j,
                                    llmc_rt_error *err)
{
    *j = k_load_i(idx, i);
    if (*j < -n || *j >= n)
        return rt_fail(err, LLMC_RT_E_EXEC, "index %d (element %d) outside [-%d, %d)",
                       RT_N(*j, i, n, n), NULL);
    *j += *j < 0 ? n : 0;
    return LLMC_RT_OK;
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
        int64_t j;
        if (wrapped_index(idx, i, n_axis, &j, err))
            return LLMC_RT_E_EXEC;
        for (int64_t o = 0; o < outer; o++)
            memcpy(dst + (size_t)(o * n_idx + i) * block,
                   src + (size_t)(o * n_axis + j) * block, block);
    }
    return LLMC_RT_OK;
}

/* ---- rows of a packed weight (an embedding table) ---- */

/* Row n of QWeightTiles W [n, k] dequantized into out[0, k): element c of
 * the row is element c % group of block (n / hp, c / group), row n % hp
 * (quant_format.h).  Index arithmetic is pointer-wide (32-bit on a
 * Cortex-M) here and below: W lies in memory. */
static void qweight_row(const rt_qweight_shape *s, const uint8_t *w, ptrdiff_t n, float *out)
{
    ptrdiff_t k = (ptrdiff_t)s->k, group = (ptrdiff_t)s->group;
    int r = (int)(n % s->hp);
    size_t block_bytes = (size_t)rt_qweight_block_bytes(s);
    const uint8_t *block = w + (size_t)rt_qweight_block_offset(s, n / s->hp, 0);
    for (ptrdiff_t g0 = 0; g0 < k; g0 += group, block += block_bytes) {
        ptrdiff_t end = k - g0 < group ? k - g0 : group;
        for (ptrdiff_t c = 0; c < end; c++)
            out[g0 + c] = rt_qweight_value(block, s, r, rt_qweight_q(block, s, r, (size_t)c));
    }
}

/* Row n of FWeightTiles W [n, k]: float (ht * k + c) * hp + r. */
static void ftile_row(const rt_ftile_shape *s, const float *w, ptrdiff_t n, float *out)
{
    ptrdiff_t hp = s->hp, k = (ptrdiff_t)s->k;
    const float *base = w + n / hp * k * hp + n % hp;
    for (ptrdiff_t c = 0; c < k; c++)
        out[c] = base[c * hp];
}

static void half_row(const uint8_t *w, ptrdiff_t k, ptrdiff_t n, float *out)
{
    const uint8_t *row = w + (size_t)n * (size_t)k * (RT_HALF_VALUE_BITS / 8u);
    for (ptrdiff_t c = 0; c < k; c++)
        out[c] = rt_half_at(row + 2 * c);
}

llmc_rt_status k_gather_rows(const rt_tensor_format *f, const rt_view *data, const rt_view *idx,
                             rt_view *y, llmc_rt_error *err)
{
    rt_qweight_shape qs = {0};
    rt_ftile_shape fs = {0};
    bool ok = data->rank == 2 && y->dtype == LLMC_RT_F32 &&
              (idx->dtype == LLMC_RT_I32 || idx->dtype == LLMC_RT_I64) &&
              gather_dims_ok(data, idx, 0, y);
    if (ok && f->layout == LLMC_RT_LAYOUT_QWeightTiles)
        ok = rt_qweight_shape_of(f, 2, data->dims, &qs);
    else if (ok && f->layout == LLMC_RT_LAYOUT_FWeightTiles)
        ok = rt_ftile_shape_of(f, 2, data->dims, &fs);
    else
        ok = ok && f->layout == LLMC_RT_LAYOUT_Half && f->dtype == LLMC_RT_F32;
    if (!ok)
        return rt_fail(err, LLMC_RT_E_EXEC, "Gather of a packed weight (layout %d, rank %d) "
                       "wants axis 0, int indices and float32 rows", RT_N(f->layout, data->rank),
                       NULL);
    ptrdiff_t k = (ptrdiff_t)data->dims[1], n_idx = (ptrdiff_t)k_count(idx);
    float *dst = y->data;
    for (ptrdiff_t i = 0; i < n_idx; i++, dst += k) {
        int64_t j;
        if (wrapped_index(idx, i, data->dims[0], &j, err))
            return LLMC_RT_E_EXEC;
        if (f->layout == LLMC_RT_LAYOUT_QWeightTiles)
            qweight_row(&qs, data->data, (ptrdiff_t)j, dst);
        else if (f->layout == LLMC_RT_LAYOUT_FWeightTiles)
            ftile_row(&fs, data->data, (ptrdiff_t)j, dst);
        else
            half_row(data->data, k, (ptrdiff_t)j, dst);
    }
    return LLMC_RT_OK;
}
