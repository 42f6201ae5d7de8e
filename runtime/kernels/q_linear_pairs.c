/* The QLinear driver's walk over pairs of tiles, for tables whose
 * qtile_2x2 computes two activation tiles by two W row tiles in one call
 * (rt_kernels.qlinear_pair_column).  Only such a table refers to it, so a
 * build without one (the Cortex-M core) links none of it. */
#include "q_linear_job.h"

/* Activation tiles et, et + 1 by W row tiles ht, ht + 1 in one call of
 * the table's qtile_2x2 (rows >= 2 in both activation tiles: the bits of
 * qtile's GEMM path). */
static void four_tiles(const rt_qlinear_job *J, ptrdiff_t et, ptrdiff_t ht)
{
    float out[4 * RT_QTILE_MAX_OUT];
    int tile = J->a.xs.ep * J->a.ws.hp;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            rt_qlinear_prefetch_outputs(J, et + i, rt_qlinear_tile_rows(J, et + i), ht + j);
    J->kt->qtile_2x2(&J->a, et, ht, out);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            rt_qlinear_store_tile(J, et + i, rt_qlinear_tile_rows(J, et + i), ht + j,
                                  out + (2 * i + j) * tile);
}

/* Activation tiles [b0, b1) by W row tiles ht, ht + 1, four at a time
 * where both activation tiles have a GEMM's rows. */
void rt_qlinear_pair_column(const rt_qlinear_job *J, ptrdiff_t b0, ptrdiff_t b1, ptrdiff_t ht)
{
    for (ptrdiff_t et = b0; et < b1;) {
        if (et + 1 < b1 && rt_qlinear_tile_rows(J, et + 1) >= 2) {
            four_tiles(J, et, ht);
            et += 2;
        } else {
            rt_qlinear_one_tile(J, et, ht);
            rt_qlinear_one_tile(J, et, ht + 1);
            et++;
        }
    }
}
