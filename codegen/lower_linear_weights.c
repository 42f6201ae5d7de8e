/* The weights of Linear ops in the layout the plan's target runs, and the
 * QuantizeRows that feeds quantized ones (runtime/kernels/quant_format.h).
 *
 *   quant_bits set (quantize pass)  ->  QWeightTiles int8 / uint4 with the
 *                                       node's quant_group, target hp x lp tiles
 *   target with fp32 tiles (f_hp)   ->  FWeightTiles [N/hp][K][hp]
 *   otherwise                        ->  Dense [N, K] (W transposed: one row
 *                                       per output feature)
 * Packing goes one row tile at a time through a [hp][K] float buffer of
 * W's transposed rows, so no second full-size float copy is made for the
 * packed forms. */
#include <stdlib.h>
#include <string.h>

#include "lower_internal.h"
#include "weight_pack.h"

/* Rows [r0, r0 + n_rows) of W^T (W [k, n] row-major, unaligned bytes) into
 * rows[n_rows][k]. */
static void transposed_rows(const uint8_t *w, int64_t k, int64_t n, int64_t r0, int64_t n_rows,
                            float *rows)
{
    for (int64_t i = 0; i < k; i++)
        for (int64_t r = 0; r < n_rows; r++) /* memcpy: constants need not be aligned */
            memcpy(&rows[r * k + i], w + sizeof(float) * (size_t)(i * n + r0 + r), sizeof(float));
}

typedef struct {
    int64_t k, n;          /* W [k, n] */
    int tile_rows;         /* rows per packed row tile */
    uint64_t tile_bytes;   /* packed bytes of one row tile */
    const rt_qweight_shape *q;  /* quantized, or */
    const rt_ftile_shape *f;    /* fp32 tiles */
} pack_plan;

static int pack_tiles(lower_ctx *L, const uint8_t *w, const pack_plan *pp, uint8_t *out)
{
    float *rows = malloc(sizeof *rows * (size_t)(pp->tile_rows * (pp->k > 0 ? pp->k : 1)));
    if (!rows)
        return lower_fail(L, LLMC_E_NOMEM, -1, "out of memory packing W");
    for (int64_t r0 = 0, ht = 0; r0 < pp->n; r0 += pp->tile_rows, ht++) {
        int64_t n_rows = pp->n - r0 < pp->tile_rows ? pp->n - r0 : pp->tile_rows;
        transposed_rows(w, pp->k, pp->n, r0, n_rows, rows);
        uint8_t *dst = out + (uint64_t)ht * pp->tile_bytes;
        if (pp->q)
            cg_qpack_row_tile(rows, pp->k, n_rows, pp->q, dst);
        else
            cg_fpack_row_tile(rows, pp->k, n_rows, pp->f, (float *)(void *)dst);
    }
    free(rows);
    return LLMC_OK;
}

/* A new Weight tensor [n, k] named after W with the given format, owning
 * `bytes` packed from W. */
static int packed_weight(lower_ctx *L, int wv, const rt_tensor_format *f, const pack_plan *pp,
                         uint64_t bytes, uint32_t *t)
{
    const llmc_value *w = &L->g->values[wv];
    llmc_affine dims[2] = {llmc_aff_const(pp->n), llmc_aff_const(pp->k)};
    uint8_t *data = calloc(1, bytes ? bytes : 1);
    if (!data)
        return lower_fail(L, LLMC_E_NOMEM, wv, "out of memory for %llu packed bytes",
                          (unsigned long long)bytes);
    int rc = pack_tiles(L, w->konst.data, pp, data);
    if (!rc)
        rc = lower_new_tensor(L, w->name, "/packed", f->dtype, 2, dims, t);
    if (rc) {
        free(data);
        return rc;
    }
    cg_tensor *x = &L->p->tensors[*t];
    x->layout = f->layout;
    x->group = f->group;
    x->tile_rows = f->tile_rows;
    x->tile_depth = f->tile_depth;
    lower_own_weight(L, *t, data, bytes);
    return LLMC_OK;
}

static int quantized_weight(lower_ctx *L, int wv, int bits, int64_t group, uint32_t *t)
{
    const llmc_value *w = &L->g->values[wv];
    int64_t k = w->shape.dims[0].c, n = w->shape.dims[1].c;
    rt_qweight_shape q;
    if (!rt_qweight_shape_init(&q, bits, L->target->q_hp, L->target->q_lp, n, k, group))
        return lower_fail(L, LLMC_E_UNSUPPORTED, wv, "cannot quantize [%lld, %lld] to %d bits in "
                          "groups of %lld (a multiple of %d)", (long long)k, (long long)n, bits,
                          (long long)group, 2 * L->target->q_lp);
    rt_tensor_format f = {bits == 8 ? LLMC_DT_INT8 : LLMC_RT_U4, CG_LAYOUT_QWEIGHT,
                          (uint32_t)group, q.hp, q.lp};
    pack_plan pp = {k, n, q.hp, (uint64_t)(q.kp / q.group) * rt_qweight_block_bytes(&q), &q, NULL};
    return packed_weight(L, wv, &f, &pp, rt_qweight_bytes(&q), t);
}

static int fp32_tiled_weight(lower_ctx *L, int wv, uint32_t *t)
{
    const llmc_value *w = &L->g->values[wv];
    int64_t k = w->shape.dims[0].c, n = w->shape.dims[1].c;
    rt_ftile_shape fs;
    if (!rt_ftile_shape_init(&fs, L->target->f_hp, n, k))
        return lower_fail(L, LLMC_E_UNSUPPORTED, wv, "W [%lld, %lld] too large for fp32 tiles",
                          (long long)k, (long long)n);
    rt_tensor_format f = {LLMC_DT_FLOAT, CG_LAYOUT_FWEIGHT, 0, fs.hp, 0};
    pack_plan pp = {k, n, fs.hp, 4u * (uint64_t)fs.hp * (uint64_t)k, NULL, &fs};
    return packed_weight(L, wv, &f, &pp, rt_ftile_bytes(&fs), t);
}

/* W [K, N] as a new Weight [N, K] (one row per output feature). */
static int transposed_weight(lower_ctx *L, int wv, uint32_t *t)
{
    const llmc_value *w = &L->g->values[wv];
    int64_t k = w->shape.dims[0].c, n = w->shape.dims[1].c;
    float *data = malloc(sizeof *data * (size_t)(n * k > 0 ? n * k : 1));
    if (!data)
        return lower_fail(L, LLMC_E_NOMEM, wv, "out of memory");
    transposed_rows(w->konst.data, k, n, 0, n, data);
    llmc_affine dims[2] = {llmc_aff_const(n), llmc_aff_const(k)};
    int rc = lower_new_tensor(L, w->name, "/transposed", LLMC_DT_FLOAT, 2, dims, t);
    if (rc) {
        free(data);
        return rc;
    }
    lower_own_weight(L, *t, data, sizeof *data * (uint64_t)(n * k));
    return LLMC_OK;
}

int lower_linear_weight(lower_ctx *L, int wv, uint32_t *t)
{
    int64_t bits = llmc_node_attr_int(L->g, L->node, "quant_bits", 0);
    int64_t group = llmc_node_attr_int(L->g, L->node, "quant_group", 0);
    if (bits)
        return quantized_weight(L, wv, (int)bits, group, t);
    if (L->target->f_hp)
        return fp32_tiled_weight(L, wv, t);
    return transposed_weight(L, wv, t);
}

/* llmc.QuantizeRows(x) -> xq: QActTiles of the target's ep x lp tiles. */
int lower_quantize_rows(lower_ctx *L, int unused)
{
    (void)unused;
    int64_t group = llmc_node_attr_int(L->g, L->node, "group", 0);
    uint32_t x, y;
    int rc = lower_input(L, 0, &x);
    if (!rc)
        rc = lower_output(L, 0, &y);
    if (rc)
        return rc;
    if (group < 2 * L->target->q_lp || group % (2 * L->target->q_lp) || group > UINT32_MAX)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "group %lld is not a positive multiple of %d",
                          (long long)group, 2 * L->target->q_lp);
    cg_tensor *yt = &L->p->tensors[y];
    yt->layout = CG_LAYOUT_QACT;
    yt->group = (uint32_t)group;
    yt->tile_rows = L->target->q_ep;
    yt->tile_depth = L->target->q_lp;
    cg_op *op = lower_emit(L, CG_OP_QUANTIZE_ROWS);
    if (!op)
        return L->err->code;
    rc = op_add_input(L, op, x);
    return rc ? rc : op_add_output(L, op, y);
}
