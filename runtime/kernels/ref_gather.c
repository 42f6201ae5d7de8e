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
 * the row lies in group c / group, tile (c % group) / lp of the row tile
 * n / hp, at row n % hp of that tile (quant_format.h). */
static void qweight_row(const rt_qweight_shape *s, const uint8_t *w, int64_t n, float *out)
{
    int64_t ht = n / s->hp, r = n % s->hp, tile = (int64_t)s->hp * s->lp;
    uint64_t data_bytes = (uint64_t)s->hp * (uint64_t)s->group * (uint64_t)s->bits / 8u;
    for (int64_t g = 0; g * s->group < s->k; g++) {
        const uint8_t *block = w + rt_qweight_block_offset(s, ht, g);
        const uint8_t *halves = block + data_bytes;
        float scale = rt_half_at(halves + 2 * r);
        float min = 0.0f;
        if (s->bits == 4) {
            const uint8_t *mins = halves + 2 * s->hp;
            min = rt_half_at(mins + 2 * r);
        }
        int64_t end = s->k - g * s->group < s->group ? s->k - g * s->group : s->group;
        for (int64_t c = 0; c < end; c++) {
            int64_t t = c / s->lp, at = r * s->lp + c % s->lp;
            float q = s->bits == 8 ? (float)(int8_t)block[t * tile + at]
                                   : (float)(block[t / 2 * tile + at] >> (t & 1 ? 4 : 0) & 15);
            out[g * s->group + c] = s->bits == 8 ? scale * q : scale * q + min;
        }
    }
}

/* Row n of FWeightTiles W [n, k]: float (ht * k + c) * hp + r. */
static void ftile_row(const rt_ftile_shape *s, const float *w, int64_t n, float *out)
{
    const float *base = w + n / s->hp * s->k * s->hp + n % s->hp;
    for (int64_t c = 0; c < s->k; c++)
        out[c] = base[c * s->hp];
}

static void half_row(const uint8_t *w, int64_t k, int64_t n, float *out)
{
    const uint8_t *row = w + (uint64_t)n * (uint64_t)k * 2u;
    for (int64_t c = 0; c < k; c++)
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
    if (ok && f->layout == LAYOUT_QWEIGHT)
        ok = rt_qweight_shape_of(f, 2, data->dims, &qs);
    else if (ok && f->layout == LAYOUT_FWEIGHT)
        ok = rt_ftile_shape_of(f, 2, data->dims, &fs);
    else
        ok = ok && f->layout == LAYOUT_HALF && f->dtype == LLMC_RT_F32;
    if (!ok)
        return rt_fail(err, LLMC_RT_E_EXEC, "Gather of a packed weight (layout %d, rank %d) "
                       "wants axis 0, int indices and float32 rows", RT_N(f->layout, data->rank),
                       NULL);
    int64_t n_rows = data->dims[0], k = data->dims[1], n_idx = k_count(idx);
    float *dst = y->data;
    for (int64_t i = 0; i < n_idx; i++) {
        int64_t j;
        if (wrapped_index(idx, i, n_rows, &j, err))
            return LLMC_RT_E_EXEC;
        if (f->layout == LAYOUT_QWEIGHT)
            qweight_row(&qs, data->data, j, dst + i * k);
        else if (f->layout == LAYOUT_FWEIGHT)
            ftile_row(&fs, data->data, j, dst + i * k);
        else
            half_row(data->data, k, j, dst + i * k);
    }
    return LLMC_RT_OK;
}
