/* Softmax over one axis, max-subtracted (opset-13 semantics). */
#include <math.h>

#include "kernels.h"
#include "rt_msg.h"

llmc_rt_status k_softmax(const rt_view *x, int axis, rt_view *y, llmc_rt_error *err)
{
    if (x->dtype != LLMC_RT_F32 || y->dtype != LLMC_RT_F32 || !k_same_dims(x, y))
        return rt_fail(err, LLMC_RT_E_EXEC, "Softmax needs float32 input and output of "
                       "equal dims", NULL, NULL);
    if (axis < 0 || axis >= x->rank)
        return rt_fail(err, LLMC_RT_E_EXEC, "axis %d outside rank %d", RT_N(axis, x->rank),
                       NULL);
    int64_t outer = 1, n = x->dims[axis], inner = 1;
    for (int a = 0; a < axis; a++)
        outer *= x->dims[a];
    for (int a = axis + 1; a < x->rank; a++)
        inner *= x->dims[a];
    const float *in = x->data;
    float *out = y->data;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            float max = -INFINITY;
            for (int64_t j = 0; j < n; j++)
                max = in[base + j * inner] > max ? in[base + j * inner] : max;
            k_fsum sum = {0, 0};
            for (int64_t j = 0; j < n; j++) {
                out[base + j * inner] = expf(in[base + j * inner] - max);
                k_fsum_add(&sum, out[base + j * inner]);
            }
            float total = k_fsum_value(&sum);
            for (int64_t j = 0; j < n; j++)
                out[base + j * inner] = out[base + j * inner] / total;
        }
    }
    return LLMC_RT_OK;
}
