/* Portable fp32 weight-tile micro-kernel (kernel_table.h: ftile) for any
 * hp: the oracle the SIMD ftile kernels are tested against, and usable by
 * any table that packs fp32 weights.
 *
 * A row tile is [k][hp] (quant_format.h), so one reduction step c reads hp
 * consecutive weights: x[e][c] times that vector is added to the hp sums of
 * row e.  The sums live in out itself; each is accumulated in c order, one
 * multiply and one add per step, whatever rows or hp are. */
#include "kernel_table.h"

void rt_ftile_generic(const rt_ftile_args *a, int64_t e0, int rows, int64_t ht, float *out)
{
    int64_t k = a->ws.k;
    int hp = a->ws.hp;
    const float *tile = a->w + ht * k * hp;
    for (int i = 0; i < rows * hp; i++)
        out[i] = 0.0f;
    for (int64_t c = 0; c < k; c++) {
        const float *wc = tile + c * hp;
        for (int e = 0; e < rows; e++) {
            float xv = a->x[(e0 + e) * a->x_stride + c];
            float *acc = out + e * hp;
            for (int h = 0; h < hp; h++)
                acc[h] += xv * wc[h];
        }
    }
}
