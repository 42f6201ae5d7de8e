/* Linear: y = x W^T + bias + residual, W stored [N, K] (one row per output
 * feature), for the output columns [col0, col0 + N_y) of one of the op's
 * outputs.
 *
 * Decode feeds one token, so the common case is a matrix-vector product
 * that streams all of W once.  The inner loop therefore walks K contiguously
 * in both x and the W rows, ROWS output features at a time (x is loaded once
 * for all of them) with LANES independent partial sums per feature.  The
 * lanes are plain array elements updated elementwise, which gcc -O2 turns
 * into SIMD without reassociating anything: the result is the same fp32
 * arithmetic on every target.  The lanes are added in a fixed order at the
 * end. */
#include "kernels.h"
#include "rt_msg.h"

/* 4 lanes = one SSE/NEON register per feature, so 4 features keep 4
 * accumulators plus x and 4 W loads live: gcc -O2 keeps them all in
 * registers (8 lanes made it spill the accumulators to the stack, 1.5x
 * slower on cache-resident W). */
#define LANES 4
#define ROWS 4

/* The lanes summed pairwise, in a fixed order. */
static float lane_sum(const float *acc)
{
    return (acc[0] + acc[2]) + (acc[1] + acc[3]);
}

/* acc[r][l] += x[p + l] * w_r[p + l] over whole blocks of LANES elements
 * for p in [0, k8): each lane an independent sum, so the vectorizer needs
 * no reassociation. */
#define DOT_BLOCKS(acc, x, w0, w1, w2, w3, k8)                   \
    for (int64_t p_ = 0; p_ < (k8); p_ += LANES)                \
        for (int l = 0; l < LANES; l++) {                       \
            float xv = (x)[p_ + l];                             \
            (acc)[0][l] += xv * (w0)[p_ + l];                   \
            (acc)[1][l] += xv * (w1)[p_ + l];                   \
            (acc)[2][l] += xv * (w2)[p_ + l];                   \
            (acc)[3][l] += xv * (w3)[p_ + l];                   \
        }

/* out[r] = x . w_r for the first `rows` (<= ROWS) rows of w (row stride
 * k); missing rows repeat row 0.  The last k % LANES elements go through
 * one zero-padded block, so acc is never indexed by a variable and can
 * stay in registers.  Each out[r] depends only on x and w_r, not on the
 * other rows of the call (Attention relies on it). */
void k_dot_rows(const float *x, const float *w, int64_t k, int rows, float *out)
{
    float acc[ROWS][LANES] = {{0}};
    const float *wr[ROWS];
    for (int r = 0; r < ROWS; r++)
        wr[r] = w + (r < rows ? r : 0) * k;
    int64_t k8 = k - k % LANES;
    DOT_BLOCKS(acc, x, wr[0], wr[1], wr[2], wr[3], k8)
    if (k8 < k) {
        float xt[LANES] = {0}, wt[ROWS][LANES] = {{0}};
        for (int64_t l = 0; k8 + l < k; l++) {
            xt[l] = x[k8 + l];
            for (int r = 0; r < ROWS; r++)
                wt[r][l] = wr[r][k8 + l];
        }
        DOT_BLOCKS(acc, xt, wt[0], wt[1], wt[2], wt[3], LANES)
    }
    for (int r = 0; r < rows; r++)
        out[r] = lane_sum(acc[r]);
}

static bool is_f32(const rt_view *t)
{
    return !t || t->dtype == LLMC_RT_F32;
}

/* y has x's dims except the last; bias is [N]; residual has y's dims. */
static bool shapes_ok(const rt_view *x, const rt_view *w, const rt_view *bias,
                      const rt_view *residual, int64_t col0, const rt_view *y)
{
    if (x->rank < 1 || w->rank != 2 || y->rank != x->rank ||
        x->dims[x->rank - 1] != w->dims[1])
        return false;
    for (int a = 0; a + 1 < x->rank; a++)
        if (y->dims[a] != x->dims[a])
            return false;
    int64_t n_y = y->dims[y->rank - 1];
    if (col0 < 0 || n_y > w->dims[0] - col0)
        return false;
    if (bias && (bias->rank != 1 || bias->dims[0] != w->dims[0]))
        return false;
    return !residual || k_same_dims(residual, y);
}

/* Tasks: blocks of TASK_FEATURES output features (whole ROWS blocks; every
 * output element is one k_dot_rows lane sum whatever block it is in, so any
 * split gives the serial bits).  16 features of a 896-wide decode are ~14k
 * multiply-adds, a few microseconds: enough to hide handing a task out, and
 * a 4864-wide MLP still gives 300 tasks to balance.  Under PARALLEL_MIN_MACS
 * in all the op is one task (waking threads would cost more). */
#define TASK_FEATURES (4 * ROWS)
#define PARALLEL_MIN_MACS (1 << 15)

typedef struct {
    const float *xs, *ws, *bs, *rs;   /* x [m, k]; W rows of y's columns; bias; residual [m, n] */
    float *ys;                        /* y [m, n] */
    int64_t m, k, n, per_task;        /* per_task: features of one task */
} linear_job;

/* y's columns [j0, j1). */
static void linear_cols(const linear_job *J, int64_t j0, int64_t j1)
{
    int64_t k = J->k, n = J->n;
    /* features outer, tokens inner: a block of W rows stays in cache while
     * every token uses it */
    for (int64_t j = j0; j < j1; j += ROWS) {
        int rows = j1 - j < ROWS ? (int)(j1 - j) : ROWS;
        for (int64_t t = 0; t < J->m; t++) {
            float z[ROWS];
            k_dot_rows(J->xs + t * k, J->ws + j * k, k, rows, z);
            for (int r = 0; r < rows; r++) {
                float v = z[r];
                if (J->bs)
                    v += J->bs[j + r];
                if (J->rs)
                    v += J->rs[t * n + j + r];
                J->ys[t * n + j + r] = v;
            }
        }
    }
}

static void linear_task(void *ctx, uint32_t i)
{
    const linear_job *J = ctx;
    int64_t j0 = (int64_t)i * J->per_task;
    linear_cols(J, j0, J->n - j0 < J->per_task ? J->n : j0 + J->per_task);
}

llmc_rt_status k_linear(const rt_view *x, const rt_view *w, const rt_view *bias,
                        const rt_view *residual, int64_t col0, rt_view *y,
                        const rt_parallel *par, llmc_rt_error *err)
{
    if (!is_f32(x) || !is_f32(w) || !is_f32(bias) || !is_f32(residual) || !is_f32(y))
        return rt_fail(err, LLMC_RT_E_EXEC, "Linear takes float32 only", NULL, NULL);
    if (!shapes_ok(x, w, bias, residual, col0, y)) {
        char tx[96], tw[96], ty[96];
        return rt_fail(err, LLMC_RT_E_EXEC, "Linear of %s by W %s cannot give columns %d.. "
                       "as %s (or bias/residual mismatch)", RT_N(col0),
                       RT_S(k_dims_text(x, tx, sizeof tx), k_dims_text(w, tw, sizeof tw),
                            k_dims_text(y, ty, sizeof ty)));
    }
    linear_job J;
    J.k = w->dims[1];
    J.n = y->dims[y->rank - 1];
    int64_t count = k_count(y);
    J.m = count ? (ptrdiff_t)count / (ptrdiff_t)J.n : 0; /* y's rows: in memory */
    J.xs = x->data;
    J.ws = (const float *)w->data + col0 * J.k;
    J.bs = bias ? (const float *)bias->data + col0 : NULL;
    J.rs = residual ? residual->data : NULL;
    J.ys = y->data;
    bool one_task = J.m * J.n * J.k < PARALLEL_MIN_MACS || J.n <= TASK_FEATURES;
    J.per_task = one_task ? J.n : TASK_FEATURES;
    int64_t tasks = one_task ? J.n > 0 : (J.n + TASK_FEATURES - 1) / TASK_FEATURES;
    if (tasks > UINT32_MAX)
        return rt_fail(err, LLMC_RT_E_EXEC, "Linear has too many output features", NULL, NULL);
    rt_parallel_for(par, (uint32_t)tasks, linear_task, &J);
    return LLMC_RT_OK;
}
