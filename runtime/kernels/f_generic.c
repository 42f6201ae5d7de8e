/* Portable fp32 weight-panel micro-kernel (kernel_table.h: ftile) for any
 * hp: the oracle the SIMD ftile kernels are tested against, and usable by
 * any table that packs fp32 weights.
 *
 * A panel is [kc][hp] (quant_format.h), so one reduction step c reads hp
 * consecutive weights: x[e][c] times that vector is added to the hp sums of
 * row e.  The sums live in acc itself; each is continued in c order, one
 * multiply and one add per step, whatever rows or hp are. */
#include "kernel_table.h"

void rt_ftile_generic(const float *x, int64_t x_stride, const float *panel, int hp, int64_t kc,
                      int rows, float *acc)
{
    for (int64_t c = 0; c < kc; c++) {
        const float *wc = panel + c * hp;
        for (int e = 0; e < rows; e++) {
            float xv = x[e * x_stride + c];
            float *sum = acc + e * hp;
            for (int h = 0; h < hp; h++)
                sum[h] += xv * wc[h];
        }
    }
}
