/* ShadowLinear: the outliers' part of a Linear whose x was quantized with a
 * static per-tensor scale (paper 003 §3.3, shadow outlier execution).
 *
 * With q = clamp(round(x / s), -127, 127) (QuantizeRows' static path),
 * x = s * q + r exactly, r = x - s * q.  The quantized Linear computes the
 * s * q part; for an outlier (|x / s| > 127, so q = +-127) r is everything
 * beyond the clip, and adding r * W[:, c] makes that channel's product
 * exact:  y + sum over outliers c of r_c * W[:, c]
 *       = sum over in-range c of s q_c W[:, c] + sum over outliers x_c W[:, c].
 * (The paper's Eq. 1 writes the excess as floor(x/s / 128) * 128, which is
 * not x/s - 128: for x/s = 200 it gives 256.)  W is the Linear's own int8
 * tiles: each outlier reads one column of them (scale * q per row), so
 * the rare outliers cost O(N) each and no second copy of W exists. */
#include <float.h>

#include "kernels.h"
#include "q_generic.h"
#include "quant_format.h"
#include "rt_div64.h"
#include "rt_msg.h"

/* Dequantized column c of W (position j of group g) into the outputs'
 * columns: z[.., n] += r * W[n, c].  Row tiles in order, so no division. */
static void add_column(const uint8_t *w, const rt_qweight_shape *ws, int64_t g, int64_t j,
                       float r, float *const *rows, const int64_t *first, const int64_t *width)
{
    int64_t lp = ws->lp, tile = (int64_t)rt_udiv64((uint64_t)j, (uint64_t)lp);
    int64_t at = tile * (int64_t)ws->hp * lp + (j - tile * lp);
    uint64_t data = (uint64_t)ws->hp * (uint64_t)ws->group; /* int8: one byte each */
    uint32_t out = 0;
    for (int64_t ht = 0, n = 0; n < ws->n; ht++) {
        const uint8_t *block = w + rt_qweight_block_offset(ws, ht, g);
        for (int64_t h = 0; h < ws->hp && n < ws->n; h++, n++) {
            float weight = rt_half_at(block + data + 2u * (uint64_t)h) *
                           (float)(int8_t)block[at + h * lp];
            while (n >= first[out] + width[out])
                out++;
            rows[out][n - first[out]] += r * weight;
        }
    }
}

llmc_rt_status k_shadow_linear(const rt_view *x, const uint8_t *w, const rt_qweight_shape *ws,
                               float scale, const rt_view *ys, rt_view *zs, uint32_t n_out,
                               llmc_rt_error *err)
{
    if (ws->bits != 8 || !(scale >= FLT_MIN && scale <= FLT_MAX) || n_out < 1 ||
        n_out > RT_SHADOW_OUTPUTS)
        return rt_fail(err, LLMC_RT_E_EXEC, "ShadowLinear takes int8 W, a normal positive "
                       "scale and 1..%d outputs", RT_N(RT_SHADOW_OUTPUTS), NULL);
    int64_t first[RT_SHADOW_OUTPUTS], width[RT_SHADOW_OUTPUTS], cols = 0;
    for (uint32_t j = 0; j < n_out; j++) {
        first[j] = cols;
        width[j] = zs[j].rank ? zs[j].dims[zs[j].rank - 1] : 0;
        cols += width[j];
        if (!k_same_dims(&ys[j], &zs[j]))
            return rt_fail(err, LLMC_RT_E_EXEC, "output %u does not have its input's dims",
                           RT_N(j), NULL);
    }
    int64_t k = ws->k, m = k ? (int64_t)rt_udiv64((uint64_t)k_count(x), (uint64_t)k) : 0;
    if (x->rank < 1 || x->dims[x->rank - 1] != k || cols != ws->n ||
        (width[0] && (int64_t)rt_udiv64((uint64_t)k_count(&zs[0]), (uint64_t)width[0]) != m))
        return rt_fail(err, LLMC_RT_E_EXEC, "x [..., %d] and outputs summing to %d columns "
                       "with x's rows", RT_N(k, ws->n), NULL);
    for (uint32_t j = 0; j < n_out; j++) { /* z = y (z may be y's bytes) */
        const float *y = ys[j].data;
        float *z = zs[j].data;
        for (int64_t i = 0, count = k_count(&zs[j]); i < count; i++)
            z[i] = y[i];
    }
    float inv = 1.0f / scale;
    for (int64_t e = 0; e < m; e++) {
        const float *row = (const float *)x->data + e * k;
        float *rows[RT_SHADOW_OUTPUTS];
        for (uint32_t j = 0; j < n_out; j++)
            rows[j] = (float *)zs[j].data + e * width[j];
        for (int64_t c = 0, g = 0, j = 0; c < k; c++, j = j + 1 == ws->group ? 0 : j + 1) {
            float v = row[c] * inv;
            if (v > 127.0f || v < -127.0f) { /* else in range (or NaN): the int8 part holds it */
                float r = row[c] - scale * (float)rt_q_value(row[c], inv);
                add_column(w, ws, g, j, r, rows, first, width);
            }
            g += j + 1 == ws->group;
        }
    }
    return LLMC_RT_OK;
}
