/* Rope: rotate-half rotary position embedding (compiler/ir/llmc_ops.h).
 * x [..., S, D]: axis -2 is the token axis, token s at position P + s; cos
 * and sin are [max_context, rotary_dim] tables; with h = rotary_dim / 2,
 *     y_i = x_i cos[P+s][i] - x_{i+h} sin[P+s][i]     (i < h)
 *     y_i = x_i cos[P+s][i] + x_{i-h} sin[P+s][i]     (h <= i < rotary_dim)
 *     y_i = x_i                                       (rotary_dim <= i < D). */
#include <string.h>

#include "kernels.h"
#include "rt_msg.h"

static bool tables_ok(const rt_view *cos, const rt_view *sin, int64_t rotary_dim)
{
    return cos->dtype == LLMC_RT_F32 && sin->dtype == LLMC_RT_F32 && cos->rank == 2 &&
           k_same_dims(cos, sin) && cos->dims[1] == rotary_dim;
}

llmc_rt_status k_rope(const rt_view *x, const rt_view *cos, const rt_view *sin,
                      int64_t rotary_dim, int64_t P, rt_view *y, llmc_rt_error *err)
{
    if (x->dtype != LLMC_RT_F32 || y->dtype != LLMC_RT_F32 || x->rank < 2 ||
        !k_same_dims(x, y))
        return rt_fail(err, LLMC_RT_E_EXEC, "Rope needs float32 x of rank >= 2 and output "
                       "dims equal to the input's", NULL, NULL);
    int64_t d = x->dims[x->rank - 1], s_len = x->dims[x->rank - 2];
    if (rotary_dim <= 0 || rotary_dim % 2 || rotary_dim > d)
        return rt_fail(err, LLMC_RT_E_EXEC, "rotary_dim %d must be even and in (0, %d]",
                       RT_N(rotary_dim, d), NULL);
    if (!tables_ok(cos, sin, rotary_dim))
        return rt_fail(err, LLMC_RT_E_EXEC, "cos and sin must be float32 [positions, %d]",
                       RT_N(rotary_dim), NULL);
    if (P < 0 || s_len > cos->dims[0] - P)
        return rt_fail(err, LLMC_RT_E_EXEC, "positions %d..%d+%d outside the %d table rows",
                       RT_N(P, P, s_len, cos->dims[0]), NULL);
    int64_t h = rotary_dim / 2, count = k_count(x);
    /* x's rows lie in memory: pointer-wide from here */
    ptrdiff_t rows = count ? (ptrdiff_t)count / (ptrdiff_t)d : 0, seq = (ptrdiff_t)s_len;
    for (ptrdiff_t o = 0; o < rows; o++) {
        int64_t pos = P + o % seq;
        const float *in = (const float *)x->data + o * d;
        const float *c = (const float *)cos->data + pos * rotary_dim;
        const float *sn = (const float *)sin->data + pos * rotary_dim;
        float *out = (float *)y->data + o * d;
        for (int64_t i = 0; i < h; i++) {
            out[i] = in[i] * c[i] - in[i + h] * sn[i];
            out[i + h] = in[i + h] * c[i + h] + in[i] * sn[i + h];
        }
        if (d > rotary_dim)
            memmove(out + rotary_dim, in + rotary_dim, (size_t)(d - rotary_dim) * sizeof *out);
    }
    return LLMC_RT_OK;
}
