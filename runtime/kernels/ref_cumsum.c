/* CumSum: running sums along one axis, float32 (summed in float, in
 * order, as ONNX Runtime does), int32 and int64 (wrapping).  Exclusive sums
 * leave out their own element; reverse sums run from the end.  Each output
 * row is the previous one plus one input row, so the inner loop is
 * contiguous. */
#include <string.h>

#include "kernels.h"
#include "plan_format.h"
#include "rt_msg.h"

bool k_cumsum_supports(int dtype)
{
    return dtype == LLMC_RT_F32 || dtype == LLMC_RT_I32 || dtype == LLMC_RT_I64;
}

/* y = prev + x over n elements (prev NULL: y = x; x NULL: y = 0). */
static void add_row(int dtype, const void *prev, const void *x, void *y, int64_t n)
{
    size_t es = k_dtype_size(dtype);
    if (!x) {
        memset(y, 0, (size_t)n * es);
    } else if (!prev) {
        memmove(y, x, (size_t)n * es); /* a fuzzed plan may overlap y with x */
    } else if (dtype == LLMC_RT_F32) {
        const float *a = prev, *b = x;
        float *c = y;
        for (int64_t i = 0; i < n; i++)
            c[i] = a[i] + b[i];
    } else if (dtype == LLMC_RT_I32) {
        const int32_t *a = prev, *b = x;
        int32_t *c = y;
        for (int64_t i = 0; i < n; i++) /* wraps: uint32 arithmetic, then back */
            c[i] = (int32_t)(uint32_t)((uint32_t)a[i] + (uint32_t)b[i]);
    } else {
        const int64_t *a = prev, *b = x;
        int64_t *c = y;
        for (int64_t i = 0; i < n; i++) {
            uint64_t s = (uint64_t)a[i] + (uint64_t)b[i];
            c[i] = s <= (uint64_t)INT64_MAX ? (int64_t)s : -(int64_t)~s - 1;
        }
    }
}

llmc_rt_status k_cumsum(const rt_view *x, int axis, int kind, rt_view *y, llmc_rt_error *err)
{
    char tx[96], ty[96];
    if (!k_cumsum_supports(x->dtype) || y->dtype != x->dtype)
        return rt_fail(err, LLMC_RT_E_EXEC, "CumSum takes T -> T with T float32, int32 or "
                       "int64; got dtype %d -> %d", RT_N(x->dtype, y->dtype), NULL);
    if (axis < 0 || axis >= x->rank || !k_same_dims(x, y) || kind & ~3)
        return rt_fail(err, LLMC_RT_E_EXEC, "CumSum kind %d on axis %d of %s cannot give %s",
                       RT_N(kind, axis), RT_S(k_dims_text(x, tx, sizeof tx),
                                              k_dims_text(y, ty, sizeof ty)));
    if (k_count(y) == 0)
        return LLMC_RT_OK;
    bool exclusive = kind & CUMSUM_EXCLUSIVE, reverse = kind & CUMSUM_REVERSE;
    int64_t outer = 1, n = x->dims[axis], inner = 1;
    for (int a = 0; a < axis; a++)
        outer *= x->dims[a];
    for (int a = axis + 1; a < x->rank; a++)
        inner *= x->dims[a];
    size_t row = (size_t)inner * k_dtype_size(x->dtype);
    const uint8_t *src = x->data;
    uint8_t *dst = y->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t s = 0; s < n; s++) {
            int64_t j = reverse ? n - 1 - s : s, prev = reverse ? j + 1 : j - 1;
            int64_t from = exclusive ? prev : j; /* the input row this step adds */
            size_t base = (size_t)(o * n) * row;
            add_row(x->dtype, s ? dst + base + (size_t)prev * row : NULL,
                    s || !exclusive ? src + base + (size_t)from * row : NULL,
                    dst + base + (size_t)j * row, inner);
        }
    return LLMC_RT_OK;
}
