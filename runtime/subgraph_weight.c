/* llmc_rt_sg_weight_row: one row of a subgraph's Int8 QWeightTiles weight,
 * unpacked from the tiles of runtime/quant_format.h, for a
 * delegate that builds its own weight layout at prepare. */
#include "rt_msg.h"
#include "tensor_traits.h"

/* w's format as a weight shape, proving its segment holds every block. */
static llmc_rt_status weight_shape(const llmc_rt_sg_tensor *w, rt_qweight_shape *s,
                                   llmc_rt_error *err)
{
    const char *name = w->name ? w->name : "";
    if (w->dtype != LLMC_RT_I8 || w->layout != LLMC_RT_LAYOUT_QWeightTiles || w->rank != 2 || !w->weight)
        return rt_fail(err, LLMC_RT_E_ARG, "tensor '%s': not an Int8 QWeightTiles weight "
                       "[N, K] (dtype %d, layout %d, rank %d)",
                       RT_N(w->dtype, w->layout, w->rank), RT_S(name));
    /* tile sizes above 64 are refused before they are narrowed to int */
    rt_tensor_format f = {w->dtype, w->layout, w->group,
                          w->tile_rows <= 64 ? (int)w->tile_rows : 0,
                          w->tile_depth <= 64 ? (int)w->tile_depth : 0, LLMC_RT_F16};
    if (!rt_qweight_shape_of(&f, w->rank, w->dims, s))
        return rt_fail(err, LLMC_RT_E_ARG, "tensor '%s': tile rows %u, tile depth %u and "
                       "group %u do not fit W [%d, %d]",
                       RT_N(w->tile_rows, w->tile_depth, w->group, w->dims[0], w->dims[1]),
                       RT_S(name));
    uint64_t need = rt_qweight_bytes(s);
    if (w->bytes < need)
        return rt_fail(err, LLMC_RT_E_ARG, "tensor '%s': segment of %u bytes, the format "
                       "needs %u", RT_N((int64_t)w->bytes, (int64_t)need), RT_S(name));
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_sg_weight_row(const llmc_rt_sg_tensor *w, int64_t row, int8_t *q,
                                     float *scales, llmc_rt_error *err)
{
    rt_qweight_shape s;
    llmc_rt_status st = weight_shape(w, &s, err);
    if (st)
        return st;
    if (row < 0 || row >= s.n)
        return rt_fail(err, LLMC_RT_E_ARG, "tensor '%s': row %d outside [0, %d)",
                       RT_N(row, s.n), RT_S(w->name ? w->name : ""));
    /* the blocks lie in memory (the segment holds them): pointer-wide from here */
    int64_t ht = (int64_t)rt_udiv64((uint64_t)row, (uint64_t)s.hp);
    size_t r = (size_t)(row - ht * s.hp), hp = (size_t)s.hp, lp = (size_t)s.lp;
    size_t k = (size_t)s.k, group = (size_t)s.group, groups = (size_t)s.kp / group;
    size_t data_bytes = (size_t)rt_qweight_data_bytes(&s);
    const uint8_t *base = w->weight;
    for (size_t g = 0; g < groups; g++) {
        const uint8_t *block = base + (size_t)rt_qweight_block_offset(&s, ht, (int64_t)g);
        for (size_t j = 0; j < group && g * group + j < k; j++)
            q[g * group + j] = (int8_t)block[(j / lp) * hp * lp + r * lp + j % lp];
        scales[g] = rt_half_at(block + data_bytes + 2 * r);
    }
    return LLMC_RT_OK;
}
