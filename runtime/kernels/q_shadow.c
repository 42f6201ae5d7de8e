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
 * tiles: each outlier reads one column of them (each row's dequantized
 * weight, rt_qweight_value: either coefficient dtype), so
 * the rare outliers cost O(N) each.  Or, for the hot channels (§3.3: the
 * few channels where calibration saw outliers), a copy of just their
 * columns (the same values, so the same bits): a delegate may then own W,
 * and the CPU reads W only for an outlier in a channel calibration never
 * saw one in. */
#include <float.h>
#include <string.h>

#include "kernels.h"
#include "q_generic.h"
#include "quant_format.h"
#include "rt_div64.h"
#include "rt_msg.h"

/* Shadow tasks: ranges of W's row tiles (output features), each walking
 * every column, so an output element takes its outliers in column order
 * whatever the split (bitwise the same for any thread count). */
#define SHADOW_TASKS 8
/* Outlier columns listed up front: outliers gather in a few channels
 * (paper 003 Fig. 11: under 3% of channels hold 80% of them). */
#define SHADOW_COLS 64

typedef struct {
    const float *x;
    int64_t m, k;
    const uint8_t *w;
    const rt_qweight_shape *ws;
    float scale, inv;
    rt_view *zs;
    int64_t first[RT_SHADOW_OUTPUTS], width[RT_SHADOW_OUTPUTS]; /* the outputs' columns */
    int64_t tiles_per_task;
    /* the columns holding outliers, ascending, when there are at most
     * SHADOW_COLS of them (n_cols < 0: more; every task walks all) */
    int64_t cols[SHADOW_COLS];
    int n_cols;
    const float *hot;      /* [n_hot][n + 1]: channel, then its column of W; or NULL */
    int64_t n_hot;
} shadow_job;

/* Where column n of the outputs is in row 0 of its z, and that z's row
 * stride. */
static float *z_column(const shadow_job *J, int64_t n, int64_t *stride)
{
    uint32_t j = 0;
    while (n >= J->first[j] + J->width[j])
        j++;
    *stride = J->width[j];
    return (float *)J->zs[j].data + (n - J->first[j]);
}

static bool is_outlier(const shadow_job *J, float x)
{
    float v = x * J->inv;
    return v > 127.0f || v < -127.0f; /* in range (or NaN): the int8 part holds it */
}

/* The outliers of column c: rows and residuals x - scale * q, a batch at
 * a time (rows in order). */
#define SHADOW_BATCH 32

typedef struct {
    int64_t row[SHADOW_BATCH];
    float r[SHADOW_BATCH];
    int n;
} outlier_batch;

/* Rows from *e on into b until it is full; false when none was found. */
static bool next_outliers(const shadow_job *J, int64_t c, int64_t *e, outlier_batch *b)
{
    for (b->n = 0; *e < J->m && b->n < SHADOW_BATCH; ++*e) {
        float x = J->x[*e * J->k + c];
        if (is_outlier(J, x)) {
            b->row[b->n] = *e;
            b->r[b->n++] = x - J->scale * (float)rt_q_value(x, J->inv);
        }
    }
    return b->n > 0;
}

/* Column c (position j of group g) for row tiles [ht0, ht1): each tile's
 * hp weights dequantized once per batch of outlier rows, then
 * z[e][n] += (x - scale * q) * W[n, c] for each of them. */
static void add_column(const shadow_job *J, int64_t c, int64_t g, int64_t j, int64_t ht0,
                       int64_t ht1)
{
    const rt_qweight_shape *ws = J->ws;
    outlier_batch b;
    for (int64_t e = 0; next_outliers(J, c, &e, &b);)
        for (int64_t ht = ht0; ht < ht1; ht++) {
            const uint8_t *block = J->w + rt_qweight_block_offset(ws, ht, g);
            int64_t n0 = ht * ws->hp, rows = ws->n - n0 < ws->hp ? ws->n - n0 : ws->hp;
            for (int64_t h = 0; h < rows; h++) {
                float weight = rt_qweight_value(block, ws, (int)h,
                                                rt_qweight_q(block, ws, (int)h, (size_t)j));
                int64_t stride;
                float *z = z_column(J, n0 + h, &stride);
                for (int i = 0; i < b.n; i++)
                    z[b.row[i] * stride] += b.r[i] * weight;
            }
        }
}

/* The hot table's copy of column c (n values), or NULL.  Channels are
 * below 2^24 there (exact floats); through int32, which a Cortex-M
 * converts in one instruction (int64 would call libgcc). */
static const float *hot_column(const shadow_job *J, int64_t c)
{
    if (c >= ((int64_t)1 << 24))
        return NULL;
    float channel = (float)(int32_t)c;
    for (int64_t i = 0; i < J->n_hot; i++) {
        const float *row = J->hot + i * (J->ws->n + 1);
        if (row[0] == channel)
            return row + 1;
    }
    return NULL;
}

/* Column c from the hot copy for outputs [n0, n1). */
static void add_hot_column(const shadow_job *J, int64_t c, const float *w, int64_t n0,
                           int64_t n1)
{
    outlier_batch b;
    for (int64_t e = 0; next_outliers(J, c, &e, &b);)
        for (int64_t n = n0; n < n1; n++) {
            int64_t stride;
            float *z = z_column(J, n, &stride);
            for (int i = 0; i < b.n; i++)
                z[b.row[i] * stride] += b.r[i] * w[n];
        }
}

/* Column c for row tiles [ht0, ht1): its hot copy if it has one, else W. */
static void add_any_column(const shadow_job *J, int64_t c, int64_t g, int64_t j, int64_t ht0,
                           int64_t ht1)
{
    const float *w = hot_column(J, c);
    int64_t n1 = ht1 * J->ws->hp;
    if (w)
        add_hot_column(J, c, w, ht0 * J->ws->hp, n1 < J->ws->n ? n1 : J->ws->n);
    else
        add_column(J, c, g, j, ht0, ht1);
}

/* Column c into the ascending list (once); false when it is full. */
static bool list_column(shadow_job *J, int64_t c)
{
    int at = J->n_cols;
    while (at > 0 && J->cols[at - 1] >= c)
        at--;
    if (at < J->n_cols && J->cols[at] == c)
        return true;
    if (J->n_cols == SHADOW_COLS)
        return false;
    for (int i = J->n_cols; i > at; i--)
        J->cols[i] = J->cols[i - 1];
    J->cols[at] = c;
    J->n_cols++;
    return true;
}

/* The columns with outliers, one row-major scan (n_cols 0: none, the
 * common decode step; -1: more than SHADOW_COLS). */
static void find_columns(shadow_job *J)
{
    J->n_cols = 0;
    for (int64_t e = 0; e < J->m; e++)
        for (int64_t c = 0; c < J->k; c++)
            if (is_outlier(J, J->x[e * J->k + c]) && !list_column(J, c)) {
                J->n_cols = -1;
                return;
            }
}

static void shadow_task(void *ctx, uint32_t i)
{
    const shadow_job *J = ctx;
    const rt_qweight_shape *ws = J->ws;
    int64_t tiles = (int64_t)rt_udiv64((uint64_t)ws->np, (uint64_t)ws->hp);
    int64_t ht0 = (int64_t)i * J->tiles_per_task;
    int64_t ht1 = ht0 + J->tiles_per_task < tiles ? ht0 + J->tiles_per_task : tiles;
    for (int i = 0; i < J->n_cols; i++) {
        int64_t c = J->cols[i], g = (int64_t)rt_udiv64((uint64_t)c, (uint64_t)ws->group);
        add_any_column(J, c, g, c - g * ws->group, ht0, ht1);
    }
    for (int64_t c = 0, g = 0, j = 0; J->n_cols < 0 && c < J->k;
         c++, j = j + 1 == ws->group ? 0 : j + 1) {
        add_any_column(J, c, g, j, ht0, ht1);
        g += j + 1 == ws->group;
    }
}

llmc_rt_status k_shadow_linear(const rt_view *x, const uint8_t *w, const rt_qweight_shape *ws,
                               float scale, const rt_view *hot, const rt_view *ys, rt_view *zs,
                               uint32_t n_out, const rt_parallel *par, llmc_rt_error *err)
{
    if (ws->bits != 8 || !(scale >= FLT_MIN && scale <= FLT_MAX) || n_out < 1 ||
        n_out > RT_SHADOW_OUTPUTS)
        return rt_fail(err, LLMC_RT_E_EXEC, "ShadowLinear takes int8 W, a normal positive "
                       "scale and 1..%d outputs", RT_N(RT_SHADOW_OUTPUTS), NULL);
    shadow_job J = {x->data, 0, ws->k, w, ws, scale, 1.0f / scale, zs, {0}, {0}, 1, {0}, 0,
                    NULL, 0};
    if (hot && (hot->dtype != LLMC_RT_F32 || hot->rank != 2 || hot->dims[1] != ws->n + 1))
        return rt_fail(err, LLMC_RT_E_EXEC, "the hot table is not float32 [H, N + 1 = %d]",
                       RT_N(ws->n + 1), NULL);
    if (hot) {
        J.hot = hot->data;
        J.n_hot = hot->dims[0];
    }
    int64_t cols = 0;
    for (uint32_t j = 0; j < n_out; j++) {
        J.first[j] = cols;
        J.width[j] = zs[j].rank ? zs[j].dims[zs[j].rank - 1] : 0;
        cols += J.width[j];
        if (!k_same_dims(&ys[j], &zs[j]))
            return rt_fail(err, LLMC_RT_E_EXEC, "output %u does not have its input's dims",
                           RT_N(j), NULL);
    }
    int64_t k = ws->k;
    J.m = k ? (int64_t)rt_udiv64((uint64_t)k_count(x), (uint64_t)k) : 0;
    if (x->rank < 1 || x->dims[x->rank - 1] != k || cols != ws->n ||
        (J.width[0] &&
         (int64_t)rt_udiv64((uint64_t)k_count(&zs[0]), (uint64_t)J.width[0]) != J.m))
        return rt_fail(err, LLMC_RT_E_EXEC, "x [..., %d] and outputs summing to %d columns "
                       "with x's rows", RT_N(k, ws->n), NULL);
    /* z = y, then the outliers added; memmove: a verified plan may still
     * place z over part of y (the arena's offsets are not proved apart) */
    for (uint32_t j = 0; j < n_out; j++)
        if (zs[j].data != ys[j].data)
            memmove(zs[j].data, ys[j].data, sizeof(float) * (size_t)k_count(&zs[j]));
    find_columns(&J);
    if (!J.n_cols) /* most decode steps */
        return LLMC_RT_OK;
    uint64_t tiles = rt_udiv64((uint64_t)ws->np, (uint64_t)ws->hp);
    J.tiles_per_task = (int64_t)rt_udiv64(tiles + SHADOW_TASKS - 1, SHADOW_TASKS);
    if (J.m && tiles)
        rt_parallel_for(par, (uint32_t)rt_udiv64(tiles + (uint64_t)J.tiles_per_task - 1,
                                                 (uint64_t)J.tiles_per_task),
                        shadow_task, &J);
    return LLMC_RT_OK;
}
