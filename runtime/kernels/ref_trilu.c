/* Trilu: the upper or lower triangle of every matrix in the last two axes,
 * zero elsewhere.  Element (i, j) of a matrix is kept when j - i >= k
 * (upper) or j - i <= k (lower); any dtype (zero is all-zero bytes in
 * every runtime dtype). */
#include <string.h>

#include "kernels.h"
#include "rt_msg.h"

static llmc_rt_status trilu_check(const rt_view *x, const rt_view *k, const rt_view *y,
                                  llmc_rt_error *err)
{
    char tx[96], ty[96];
    if (!k_dtype_size(x->dtype) || x->dtype != y->dtype)
        return rt_fail(err, LLMC_RT_E_EXEC, "Trilu takes T -> T; got dtype %d -> %d",
                       RT_N(x->dtype, y->dtype), NULL);
    if (x->rank < 2 || !k_same_dims(x, y))
        return rt_fail(err, LLMC_RT_E_EXEC, "Trilu needs x of rank >= 2 and y of x's dims; "
                       "got %s -> %s", NULL,
                       RT_S(k_dims_text(x, tx, sizeof tx), k_dims_text(y, ty, sizeof ty)));
    if (k && (k->dtype != LLMC_RT_I64 || k->rank > 1 || k_count(k) != 1))
        return rt_fail(err, LLMC_RT_E_EXEC, "Trilu's k must be one int64; got dtype %d dims %s",
                       RT_N(k->dtype), RT_S(k_dims_text(k, tx, sizeof tx)));
    return LLMC_RT_OK;
}

/* Columns [lo, hi) of row i are kept. */
static void kept_columns(int64_t i, int64_t k, int64_t cols, bool upper, int64_t *lo,
                         int64_t *hi)
{
    /* k is clamped to [-rows, cols], so i + k + 1 cannot overflow */
    int64_t edge = upper ? i + k : i + k + 1;
    edge = edge < 0 ? 0 : edge > cols ? cols : edge;
    *lo = upper ? edge : 0;
    *hi = upper ? cols : edge;
}

llmc_rt_status k_trilu(const rt_view *x, const rt_view *k, bool upper, rt_view *y,
                       llmc_rt_error *err)
{
    llmc_rt_status st = trilu_check(x, k, y, err);
    if (st || k_count(y) == 0)
        return st;
    size_t es = k_dtype_size(x->dtype);
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    int64_t n_mat = (ptrdiff_t)k_count(x) / (ptrdiff_t)(rows * cols); /* x is in memory */
    int64_t diag = k ? k_load_i(k, 0) : 0;
    diag = diag < -rows ? -rows : diag > cols ? cols : diag;
    const uint8_t *src = x->data;
    uint8_t *dst = y->data;
    for (int64_t m = 0; m < n_mat; m++)
        for (int64_t i = 0; i < rows; i++) {
            size_t row = (size_t)((m * rows + i) * cols) * es;
            int64_t lo, hi;
            kept_columns(i, diag, cols, upper, &lo, &hi);
            memset(dst + row, 0, (size_t)lo * es);
            memcpy(dst + row + (size_t)lo * es, src + row + (size_t)lo * es,
                   (size_t)(hi - lo) * es);
            memset(dst + row + (size_t)hi * es, 0, (size_t)(cols - hi) * es);
        }
    return LLMC_RT_OK;
}
