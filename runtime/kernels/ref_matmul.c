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

static void gemm(const float *a, const float *b, float *c, int64_t m, int64_t k, int64_t n)
{
    memset(c, 0, (size_t)(m * n) * sizeof *c);
    for (int64_t i = 0; i < m; i++) {
        float *crow = c + i * n;
        for (int64_t p = 0; p < k; p++) {
            float aip = a[i * k + p];
            const float *brow = b + p * n;
            for (int64_t j = 0; j < n; j++)
                crow[j] += aip * brow[j];
        }
    }
}

llmc_rt_status k_matmul(const rt_view *a, const rt_view *b, rt_view *y, llmc_rt_error *err)
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
    int64_t size_a = ma.rows * ma.cols, size_b = mb.rows * mb.cols, size_y = ma.rows * mb.cols;
    for (int64_t t = 0; t < batches; t++) {
        int64_t rest = t, off_a = 0, off_b = 0;
        for (int i = nb; i-- > 0;) {
            off_a += rest % dims[i] * stride_a[i];
            off_b += rest % dims[i] * stride_b[i];
            rest /= dims[i];
        }
        gemm((const float *)a->data + off_a * size_a, (const float *)b->data + off_b * size_b,
             (float *)y->data + t * size_y, ma.rows, ma.cols, mb.cols);
    }
    return LLMC_RT_OK;
}
