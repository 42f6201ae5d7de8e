/* LayerNorm over axes [axis, rank): y = (x - mean) / sqrt(var + eps) * scale + bias,
 * scale and bias broadcast over the normalized shape; optionally each row's
 * mean and 1 / sqrt(var + eps) (ONNX's Mean and InvStdDev outputs). */
#include <math.h>

#include "kernel_table.h"
#include "rt_msg.h"

/* Element strides of a scale/bias operand over the normalized dims (0 where
 * broadcast); false if it does not broadcast to them. */
static bool param_strides(const rt_view *p, const int64_t *norm_dims, int n_norm,
                          int64_t *strides)
{
    int64_t s[RT_R];
    int shift = p->rank - n_norm; /* extra leading dims of p must be 1 */
    for (int a = 0; a < shift; a++)
        if (p->dims[a] != 1)
            return false;
    k_strides(p, s);
    for (int a = 0; a < n_norm; a++) {
        int pa = a + shift;
        int64_t d = pa >= 0 ? p->dims[pa] : 1;
        if (d != 1 && d != norm_dims[a])
            return false;
        strides[a] = d == 1 ? 0 : s[pa];
    }
    return true;
}

static bool is_f32(const rt_view *t)
{
    return !t || t->dtype == LLMC_RT_F32;
}

/* Mean and InvStdDev have x's dims up to axis and 1 from there on. */
static bool stats_dims_ok(const rt_view *x, int axis, const rt_view *stats)
{
    if (!stats)
        return true;
    if (stats->dtype != LLMC_RT_F32 || stats->rank != x->rank)
        return false;
    for (int a = 0; a < x->rank; a++)
        if (stats->dims[a] != (a < axis ? x->dims[a] : 1))
            return false;
    return true;
}

static llmc_rt_status check_operands(const rt_view *x, const rt_view *scale,
                                     const rt_view *bias, int axis, const rt_view *y,
                                     const rt_layernorm_stats *stats, llmc_rt_error *err)
{
    if (!is_f32(x) || !is_f32(scale) || !is_f32(bias) || !is_f32(y) || !k_same_dims(x, y))
        return rt_fail(err, LLMC_RT_E_EXEC, "LayerNorm needs float32 operands and output "
                       "dims equal to the input's", NULL, NULL);
    if (axis < 0 || axis >= x->rank)
        return rt_fail(err, LLMC_RT_E_EXEC, "axis %d outside rank %d", RT_N(axis, x->rank),
                       NULL);
    if (!stats_dims_ok(x, axis, stats->mean) || !stats_dims_ok(x, axis, stats->inv_std_dev))
        return rt_fail(err, LLMC_RT_E_EXEC, "Mean and InvStdDev need float32 and the input's "
                       "dims with 1 over the normalized axes", NULL, NULL);
    return LLMC_RT_OK;
}

/* Mean and 1 / sqrt(variance + epsilon) of one row of n elements, two
 * passes with compensated float sums (kernels.h k_fsum). */
static void row_stats(const float *in, int64_t n, float epsilon, float *mean,
                      float *inv_std_dev)
{
    k_fsum sum = {0, 0}, var = {0, 0};
    for (int64_t j = 0; j < n; j++)
        k_fsum_add(&sum, in[j]);
    *mean = k_fsum_value(&sum) / k_i64_to_f32(n);
    for (int64_t j = 0; j < n; j++)
        k_fsum_add(&var, (in[j] - *mean) * (in[j] - *mean));
    *inv_std_dev = 1.0f / k_sqrtf(k_fsum_value(&var) / k_i64_to_f32(n) + epsilon);
}

llmc_rt_status k_layernorm(const rt_view *x, const rt_view *scale, const rt_view *bias,
                           int axis, float epsilon, rt_view *y, const rt_layernorm_stats *stats,
                           llmc_rt_error *err)
{
    int64_t sstr[RT_R], bstr[RT_R] = {0};
    llmc_rt_status st = check_operands(x, scale, bias, axis, y, stats, err);
    if (st)
        return st;
    const int64_t *norm_dims = x->dims + axis;
    int n_norm = x->rank - axis;
    if (!param_strides(scale, norm_dims, n_norm, sstr) ||
        (bias && !param_strides(bias, norm_dims, n_norm, bstr)))
        return rt_fail(err, LLMC_RT_E_EXEC, "scale or bias does not broadcast to the "
                       "normalized dims", NULL, NULL);
    int64_t n = 1, outer = 1;
    for (int a = 0; a < n_norm; a++)
        n *= norm_dims[a];
    for (int a = 0; a < axis; a++)
        outer *= x->dims[a];
    const float *sc = scale->data, *bi = bias ? bias->data : NULL;
    const int64_t *param_strides_of[2] = {sstr, bstr};
    for (int64_t o = 0; o < outer; o++) {
        const float *in = (const float *)x->data + o * n;
        float *out = (float *)y->data + o * n;
        float mean, inv;
        row_stats(in, n, epsilon, &mean, &inv);
        if (stats->mean)
            ((float *)stats->mean->data)[o] = mean;
        if (stats->inv_std_dev)
            ((float *)stats->inv_std_dev->data)[o] = inv;
        k_walk p; /* off[0]: the scale's element, off[1]: the bias's */
        k_walk_init(&p, n_norm, norm_dims, 2, param_strides_of);
        for (int64_t j = 0; j < n; j++, k_walk_next(&p)) {
            float v = (in[j] - mean) * inv * sc[p.off[0]];
            out[j] = bi ? v + bi[p.off[1]] : v;
        }
    }
    return LLMC_RT_OK;
}

/* RMSNorm's sum of squares in RT_RMS_LANES interleaved compensated sums
 * (k_fsum), then those in lane order (rt_rms_inv): independent chains,
 * where one chain waited ~4 cycles per element on the previous sum
 * (RMSNorm was 5% of a Qwen2-0.5B prefill).  The same bits on every
 * target. */
float rt_rms_row_inv(const float *x, int64_t n, float epsilon, float fd)
{
    k_fsum lane[RT_RMS_LANES] = {{0, 0}};
    ptrdiff_t j = 0, len = (ptrdiff_t)n; /* the row lies in memory */
    for (; j + RT_RMS_LANES <= len; j += RT_RMS_LANES)
        for (int l = 0; l < RT_RMS_LANES; l++)
            k_fsum_add(&lane[l], x[j + l] * x[j + l]);
    return rt_rms_inv(lane, x, j, len, epsilon, fd);
}

void rt_rmsnorm_row_generic(const float *x, const float *scale, float *y, int64_t n,
                            float epsilon, float fd)
{
    float inv = rt_rms_row_inv(x, n, epsilon, fd);
    for (ptrdiff_t j = 0; j < (ptrdiff_t)n; j++)
        y[j] = x[j] * inv * scale[j];
}

/* Rows per task: about RMS_TASK_ELEMS inputs (a decode row is one task,
 * which runs on the calling thread). */
#define RMS_TASK_ELEMS 32768

typedef struct {
    void (*row)(const float *x, const float *scale, float *y, int64_t n, float epsilon,
                float fd);
    const float *x, *scale, *residual;
    float *y;
    ptrdiff_t n, rows, rows_per_task;
    float epsilon, fd;
} rmsnorm_job;

static void rmsnorm_task(void *ctx, uint32_t i)
{
    const rmsnorm_job *J = ctx;
    ptrdiff_t r0 = (ptrdiff_t)i * J->rows_per_task, r1 = r0 + J->rows_per_task;
    for (ptrdiff_t o = r0; o < r1 && o < J->rows; o++) {
        float *y = J->y + o * J->n;
        J->row(J->x + o * J->n, J->scale, y, J->n, J->epsilon, J->fd);
        for (ptrdiff_t j = 0; J->residual && j < J->n; j++)
            y[j] += J->residual[o * J->n + j];
    }
}

/* RMSNorm over the last axis: y = x / sqrt(mean(x^2) + epsilon) * scale,
 * scale [D].  The sum of squares is compensated, as LayerNorm's.  Rows by
 * kt's rmsnorm_row (kt or the entry NULL: the portable row; the same bits). */
llmc_rt_status k_rmsnorm(const struct rt_kernels *kt, const rt_view *x, const rt_view *scale,
                         const rt_view *residual, float epsilon, rt_view *y, const rt_parallel *par,
                         llmc_rt_error *err)
{
    if (!is_f32(x) || !is_f32(scale) || !is_f32(y) || !k_same_dims(x, y) || x->rank < 1 ||
        (residual && (!is_f32(residual) || !k_same_dims(residual, y))))
        return rt_fail(err, LLMC_RT_E_EXEC, "RMSNorm needs float32 operands of rank >= 1 "
                       "and output (and residual) dims equal to the input's", NULL, NULL);
    int64_t d = x->dims[x->rank - 1];
    if (scale->rank != 1 || scale->dims[0] != d)
        return rt_fail(err, LLMC_RT_E_EXEC, "scale must be [%d], the input's last dim",
                       RT_N(d), NULL);
    /* pointer-wide: x lies in memory */
    ptrdiff_t n = (ptrdiff_t)d, rows = n ? (ptrdiff_t)k_count(x) / n : 0;
    rmsnorm_job J = {kt && kt->rmsnorm_row ? kt->rmsnorm_row : rt_rmsnorm_row_generic,
                     x->data, scale->data, residual ? residual->data : NULL, y->data, n, rows, 1, epsilon,
                     k_i64_to_f32(d)};
    if (n < RMS_TASK_ELEMS)
        J.rows_per_task = RMS_TASK_ELEMS / n;
    ptrdiff_t tasks = (rows + J.rows_per_task - 1) / J.rows_per_task;
    if ((uint64_t)tasks > UINT32_MAX)
        return rt_fail(err, LLMC_RT_E_EXEC, "RMSNorm has too many rows", NULL, NULL);
    rt_parallel_for(par, (uint32_t)tasks, rmsnorm_task, &J);
    return LLMC_RT_OK;
}
