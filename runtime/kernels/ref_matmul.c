/* MatMul with numpy semantics: 1-D operands and batch broadcasting. */
#include <string.h>

#include "kernels.h"
#include "rt_msg.h"

/* One operand seen as a batch of rows x cols matrices. */
typedef struct {
    int batch_rank;
    const int64_t *batch_dims;
    int64_t rows, cols;
} mm_operand;

static mm_operand as_matrices(const rt_view *t, bool is_left)
{
    mm_operand m;
    if (t->rank == 1) { /* [K] is [1, K] on the left, [K, 1] on the right */
        m.rows = is_left ? 1 : t->dims[0];
        m.cols = is_left ? t->dims[0] : 1;
        m.batch_rank = 0;
    } else {
        m.rows = t->dims[t->rank - 2];
        m.cols = t->dims[t->rank - 1];
        m.batch_rank = t->rank - 2;
    }
    m.batch_dims = t->dims;
    return m;
}

static llmc_rt_status shape_fail(const rt_view *a, const rt_view *b, const rt_view *y,
                                 llmc_rt_error *err)
{
    char ta[96], tb[96], ty[96];
    return rt_fail(err, LLMC_RT_E_EXEC, "MatMul of %s and %s cannot give %s", NULL,
                   RT_S(k_dims_text(a, ta, sizeof ta), k_dims_text(b, tb, sizeof tb),
                        k_dims_text(y, ty, sizeof ty)));
}

/* Output batch dims plus, per batch axis, the matrix stride of each operand
 * (0 where that operand is broadcast). */
static bool batch_layout(const mm_operand *a, const mm_operand *b, const rt_view *y,
                         int *rank, int64_t *dims, int64_t *stride_a, int64_t *stride_b)
{
    int n = a->batch_rank > b->batch_rank ? a->batch_rank : b->batch_rank;
    int64_t sa = 1, sb = 1;
    for (int i = n; i-- > 0;) {
        int ia = i - (n - a->batch_rank), ib = i - (n - b->batch_rank);
        int64_t da = ia >= 0 ? a->batch_dims[ia] : 1, db = ib >= 0 ? b->batch_dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return false;
        dims[i] = da == 1 ? db : da;
        stride_a[i] = da == 1 ? 0 : sa;
        stride_b[i] = db == 1 ? 0 : sb;
        sa *= da;
        sb *= db;
    }
    *rank = n;
    return n <= y->rank && memcmp(dims, y->dims, (size_t)n * sizeof *dims) == 0;
}

/* Tasks: one per (matrix of the batch, block of TASK_ROWS rows, block of
 * TASK_COLS columns).  Every element of c is the sum over p in order from
 * 0.0f whatever block it is in, so any split gives the serial bits; column
 * blocks give a one-row (decode) product more than one task.  Under
 * PARALLEL_MIN_MACS in all the op is one task per matrix. */
#define TASK_ROWS 16
#define TASK_COLS 256
#define PARALLEL_MIN_MACS (1 << 15)

typedef struct {
    const float *a, *b;
    float *c;
    int nb;                                    /* batch axes */
    const int64_t *dims, *stride_a, *stride_b; /* per batch axis */
    int64_t m, k, n;                           /* one matrix product */
    int64_t row_blocks, col_blocks, rows, cols; /* blocks per matrix; rows, cols of one */
} matmul_job;

/* c[i0:i1, j0:j1] of one matrix product. */
static void gemm_block(const float *a, const float *b, float *c, int64_t k, int64_t n,
                       int64_t i0, int64_t i1, int64_t j0, int64_t j1)
{
    for (int64_t i = i0; i < i1; i++) {
        float *crow = c + i * n;
        memset(crow + j0, 0, (size_t)(j1 - j0) * sizeof *crow);
        for (int64_t p = 0; p < k; p++) {
            float aip = a[i * k + p];
            const float *brow = b + p * n;
            for (int64_t j = j0; j < j1; j++)
                crow[j] += aip * brow[j];
        }
    }
}

/* Task numbers are below tasks = batches * row_blocks * col_blocks <=
 * UINT32_MAX (k_matmul), so the blocks and the batch dims fit 32 bits. */
static void matmul_task(void *ctx, uint32_t task)
{
    const matmul_job *J = ctx;
    uint32_t col_blocks = (uint32_t)J->col_blocks, row_blocks = (uint32_t)J->row_blocks;
    uint32_t cb = task % col_blocks, rb = task / col_blocks % row_blocks;
    uint32_t t = task / col_blocks / row_blocks, rest = t;
    int64_t off_a = 0, off_b = 0;
    for (int i = J->nb; i-- > 0;) {
        uint32_t d = (uint32_t)J->dims[i];
        off_a += rest % d * J->stride_a[i];
        off_b += rest % d * J->stride_b[i];
        rest /= d;
    }
    int64_t i0 = rb * J->rows, j0 = cb * J->cols;
    int64_t i1 = J->m - i0 < J->rows ? J->m : i0 + J->rows;
    int64_t j1 = J->n - j0 < J->cols ? J->n : j0 + J->cols;
    gemm_block(J->a + off_a * J->m * J->k, J->b + off_b * J->k * J->n, J->c + t * J->m * J->n,
               J->k, J->n, i0, i1, j0, j1);
}

/* Blocks of a dim of y, which has elements when k_matmul splits it. */
static int64_t blocks(int64_t len, int64_t block)
{
    return len ? (ptrdiff_t)(len + block - 1) / (ptrdiff_t)block : 1;
}

llmc_rt_status k_matmul(const rt_view *a, const rt_view *b, rt_view *y, const rt_parallel *par,
                        llmc_rt_error *err)
{
    if (a->dtype != LLMC_RT_F32 || b->dtype != LLMC_RT_F32 || y->dtype != LLMC_RT_F32)
        return rt_fail(err, LLMC_RT_E_EXEC, "MatMul takes float32 only", NULL, NULL);
    if (a->rank < 1 || b->rank < 1)
        return shape_fail(a, b, y, err);
    mm_operand ma = as_matrices(a, true), mb = as_matrices(b, false);
    int nb;
    int64_t dims[RT_R], stride_a[RT_R], stride_b[RT_R];
    if (ma.cols != mb.rows || !batch_layout(&ma, &mb, y, &nb, dims, stride_a, stride_b))
        return shape_fail(a, b, y, err);
    /* output dims: batch, then M unless a is 1-D, then N unless b is 1-D */
    int expect_rank = nb + (a->rank > 1) + (b->rank > 1);
    if (y->rank != expect_rank || (a->rank > 1 && y->dims[nb] != ma.rows) ||
        (b->rank > 1 && y->dims[y->rank - 1] != mb.cols))
        return shape_fail(a, b, y, err);
    int64_t batches = 1;
    for (int i = 0; i < nb; i++)
        batches *= dims[i];
    matmul_job J = {a->data, b->data, y->data, nb, dims, stride_a, stride_b,
                    ma.rows, ma.cols, mb.cols, 1, 1, ma.rows, mb.cols};
    if (batches * J.m * J.k * J.n >= PARALLEL_MIN_MACS) {
        J.rows = TASK_ROWS;
        J.cols = TASK_COLS;
        J.row_blocks = blocks(J.m, J.rows);
        J.col_blocks = blocks(J.n, J.cols);
    }
    int64_t tasks = batches * J.row_blocks * J.col_blocks;
    if (tasks > UINT32_MAX)
        return rt_fail(err, LLMC_RT_E_EXEC, "MatMul has too many rows", NULL, NULL);
    rt_parallel_for(par, (uint32_t)tasks, matmul_task, &J);
    return LLMC_RT_OK;
}
