/* Internal: the portable quantized micro-kernels (q_generic.c) behind
 * rt_kernels_generic, for any hp, lp, ep the formats allow, and the
 * rounding rules every table shares so that their activations match the
 * portable ones byte for byte. */
#ifndef LLMC_RT_Q_GENERIC_H
#define LLMC_RT_Q_GENERIC_H

#include <float.h>

#include "kernel_table.h"

/* 127 / amax, or 0 when the (row, group) quantizes to zeros: amax 0 (or
 * NaN), or so small that 127 / amax overflows (x = 0 would become 0 * inf).
 * Inline: the NEON tables' test links no portable kernel. */
static inline float rt_q_row_inverse(float amax)
{
    float inv = 127.0f / amax;
    return amax > 0.0f && inv <= FLT_MAX ? inv : 0.0f;
}
/* round half to even of x * inv clamped to [-127, 127]; a NaN product gives
 * 127, as the x86 min/max instructions do. */
int rt_q_value(float x, float inv);

/* rt_kernels.quantize_rows and rt_kernels.qtile (kernel_table.h). */
void rt_q_generic_quantize_rows(const float *x, int64_t x_stride, const rt_qact_shape *s,
                                int64_t r0, int64_t r1, float scale, uint8_t *xq);
void rt_q_generic_qtile(const rt_qtile_args *a, int64_t et, int rows, int64_t ht, float *out);

#endif
