/* The weights of Linear ops in the layout the plan's target runs, and the
 * QuantizeRows that feeds quantized ones (runtime/quant_format.h; outside
 * NPU subgraphs quant_fold.c then moves it into those Linears).
 *
 *   quant_bits set (quantize pass)  ->  QWeightTiles int8 / uint4 with the
 *                                       node's quant_group, target hp x lp tiles
 *                                       (a file's W: its q values, with binary16
 *                                       or, quant_coef 32, its float32 scales
 *                                       and zero points)
 *   target with fp32 tiles (f_hp)   ->  FWeightTiles [N/hp][K][hp]
 *   otherwise                        ->  Dense [N, K] (W transposed: one row
 *                                       per output feature)
 * and the tables of embedding Gathers quantize-embedding marked (the same
 * formats over E [V, H] as it is, or Half: binary16 rows), so a tied
 * embedding and LM head pack to the same bytes and share one segment.
 * Nothing is packed here: each tensor is a lazy view of W^T (const_view.h)
 * with a segment producer that the plan writer calls as it writes
 * (segment_writer.h), which reads hp rows at a time, packs them and appends
 * the tile, so no whole-matrix copy of W is ever made. */
#include "lower_linear_weights.h"

#include <stdlib.h>
#include <string.h>

#include "ir/llmc_ops.h"
#include "ir/quant_form.h"
#include "lower_ops.h"
#include "segment_writer.h"
#include "weight_pack.h"
#include "llmc_rt.h"

/* Packs n_rows (<= the tile's rows) rows of W^T into one row tile. */
typedef void (*tile_packer)(const void *shape, const float *rows, int64_t n_rows, void *out);

/* Rows read from a view per call: a transposed view reads faster in blocks
 * of many rows (segment_writer.h), so blocks of whole row tiles near 1 MiB. */
#define READ_BLOCK_BYTES ((uint64_t)1 << 20)

/* Row tiles of t->view packed by `pack`, one after the other. */
static int produce_row_tiles(const cg_tensor *t, cg_sink *sink, int hp, uint64_t tile_bytes,
                             tile_packer pack, const void *shape)
{
    int64_t n = llmc_view_rows(t->view), k = llmc_view_cols(t->view);
    int64_t block = llmc_view_rows_per(t->view, READ_BLOCK_BYTES) / hp * hp;
    block = block < hp ? hp : block;
    float *rows = malloc(sizeof *rows * (size_t)block * (size_t)(k > 0 ? k : 1));
    int rc = rows ? 0 : -1;
    for (int64_t b0 = 0; !rc && b0 < n; b0 += block) {
        int64_t b1 = n - b0 < block ? n : b0 + block;
        llmc_view_read_rows(t->view, b0, b1, rows);
        for (int64_t r0 = b0; !rc && r0 < b1; r0 += hp) {
            void *out = cg_sink_reserve(sink, (size_t)tile_bytes);
            if (!out) {
                rc = -1;
                break;
            }
            pack(shape, rows + (r0 - b0) * k, b1 - r0 < hp ? b1 - r0 : hp, out);
            rc = cg_sink_commit(sink, (size_t)tile_bytes);
        }
    }
    free(rows);
    return rc;
}

/* The packed formats of a tensor's fields (checked when it was lowered). */
static rt_qweight_shape qshape_of(const cg_tensor *t)
{
    rt_qweight_shape q = {0};
    rt_qweight_shape_init(&q, t->dtype == LLMC_DT_INT8 ? 8 : 4, t->tile_rows, t->tile_depth,
                          t->dims[0].c, t->dims[1].c, t->group);
    return q;
}

static void qpack(const void *shape, const float *rows, int64_t n_rows, void *out)
{
    const rt_qweight_shape *q = shape;
    cg_qpack_row_tile(rows, q->k, n_rows, q, out);
}

static int produce_qweight(const cg_tensor *t, cg_sink *sink)
{
    rt_qweight_shape q = qshape_of(t);
    return produce_row_tiles(t, sink, q.hp, rt_qweight_tile_bytes(&q), qpack, &q);
}

static void fpack(const void *shape, const float *rows, int64_t n_rows, void *out)
{
    const rt_ftile_shape *f = shape;
    cg_fpack_row_tile(rows, f->k, n_rows, f, out);
}

static int produce_fweight(const cg_tensor *t, cg_sink *sink)
{
    rt_ftile_shape f = {t->tile_rows, t->dims[0].c, t->dims[1].c, 0};
    f.np = rt_qround_up(f.n, f.hp);
    return produce_row_tiles(t, sink, f.hp, rt_ftile_tile_bytes(&f), fpack, &f);
}

static void hpack(const void *shape, const float *rows, int64_t n_rows, void *out)
{
    const int64_t *k = shape;
    uint8_t *bytes = out;
    (void)n_rows; /* one row per tile */
    for (int64_t c = 0; c < *k; c++) {
        uint16_t h = rt_float_to_half(rows[c]);
        bytes[2 * c] = (uint8_t)(h & 255u);
        bytes[2 * c + 1] = (uint8_t)(h >> 8);
    }
}

/* Half: each row as binary16, little-endian (a "tile" of one row). */
static int produce_half(const cg_tensor *t, cg_sink *sink)
{
    int64_t k = t->dims[1].c;
    return produce_row_tiles(t, sink, 1, RT_HALF_VALUE_BITS / 8u * (uint64_t)k, hpack, &k);
}

/* A matrix [n, k] to store, as a lazy view of W's constant. */
typedef struct {
    int wv;              /* the graph constant */
    llmc_view *view;     /* [n, k], a reference the callee takes over */
    int64_t n, k;
} weight_source;

/* A new Weight [n, k] named W + suffix over src.view, made into `bytes` of
 * segment by `produce` (NULL: the floats as they are). */
static int lazy_weight(lower_ctx *L, weight_source src, const char *suffix,
                       const rt_tensor_format *f, uint64_t bytes, cg_segment_producer produce,
                       uint32_t *t)
{
    const llmc_value *w = &L->g->values[src.wv];
    llmc_affine dims[2] = {llmc_aff_const(src.n), llmc_aff_const(src.k)};
    int rc = src.view ? lower_new_tensor(L, w->name, suffix, f->dtype, 2, dims, t)
                      : lower_fail(L, LLMC_E_NOMEM, src.wv, "out of memory");
    if (rc) {
        llmc_view_unref(src.view);
        return rc;
    }
    lower_own_weight(L, *t, NULL, bytes);
    cg_tensor *x = &L->p->tensors[*t];
    x->view = src.view;
    x->produce = produce;
    x->layout = f->layout;
    x->group = f->group;
    x->tile_rows = f->tile_rows;
    x->tile_depth = f->tile_depth;
    x->coef = f->coef;
    return LLMC_OK;
}

static int quantized_weight(lower_ctx *L, weight_source src, int bits, int64_t group, uint32_t *t)
{
    rt_qweight_shape q;
    if (!rt_qweight_shape_init(&q, bits, L->target->q_hp, L->target->q_lp, src.n, src.k, group)) {
        llmc_view_unref(src.view);
        return lower_fail(L, LLMC_E_UNSUPPORTED, src.wv, "cannot quantize [%lld, %lld] to %d bits "
                          "in groups of %lld (a multiple of %d)", (long long)src.k,
                          (long long)src.n, bits, (long long)group, 2 * L->target->q_lp);
    }
    rt_tensor_format f = {bits == 8 ? LLMC_DT_INT8 : LLMC_RT_U4, LLMC_RT_LAYOUT_QWeightTiles,
                          (uint32_t)group, q.hp, q.lp, LLMC_RT_F16};
    return lazy_weight(L, src, "/packed", &f, rt_qweight_bytes(&q), produce_qweight, t);
}

static int fp32_tiled_weight(lower_ctx *L, weight_source src, uint32_t *t)
{
    rt_ftile_shape fs;
    if (!rt_ftile_shape_init(&fs, L->target->f_hp, src.n, src.k)) {
        llmc_view_unref(src.view);
        return lower_fail(L, LLMC_E_UNSUPPORTED, src.wv, "W too large for fp32 tiles");
    }
    rt_tensor_format f = {LLMC_DT_FLOAT, LLMC_RT_LAYOUT_FWeightTiles, 0, fs.hp, 0, 0};
    return lazy_weight(L, src, "/packed", &f, rt_ftile_bytes(&fs), produce_fweight, t);
}

/* ---- a pre-quantized file's weight ---- */

int lower_file_dequantize(const llmc_graph *g, int wv)
{
    return llmc_quant_dequantize_of(g, wv, -1);
}

/* DequantizeLinear(Wq, scale, zp, axis, block B) in the canonical forms:
 * axis 0, Wq [K, N] with scale and zp [G, N] (a Linear's W, packed as
 * W^T [N, K]), or axis 1, Wq [N, K] with [N, G] (an embedding table, packed
 * as it is): what the tiles are packed from. */
typedef struct {
    rt_qweight_shape q;       /* coef: the tiles' coefficients (the pass's quant_coef / embed_coef) */
    const uint8_t *wq, *zp;   /* bytes of uint8 or int8 */
    const float *scale;
    int64_t groups;           /* G: 1, or one per tile group */
    bool signed_q;            /* int8 values (else uint8) */
    bool transposed;          /* axis 0: Wq is W^T's transpose */
} file_weight_spec;

/* Offsets of W^T's (n, k) value and of its group g's coefficients. */
static int64_t value_at(const file_weight_spec *f, int64_t n, int64_t k)
{
    return f->transposed ? k * f->q.n + n : n * f->q.k + k;
}

static int64_t coef_at(const file_weight_spec *f, int64_t n, int64_t g)
{
    g = f->groups == 1 ? 0 : g;
    return f->transposed ? g * f->q.n + n : n * f->groups + g;
}

/* A file's value or zero point as the tiles store it: itself, or, for
 * 8-bit values with float32 coefficients, a uint8 file's minus 128 (an int8
 * then; the difference q - zero is the file's). */
static int byte_value(const file_weight_spec *f, const uint8_t *p, int64_t at)
{
    if (f->signed_q)
        return (int8_t)p[at];
    return f->q.bits == 8 && f->q.coef == RT_QCOEF_FLOAT ? p[at] - 128 : p[at];
}

/* The tile's stored value of (n, k) (quant_format.h): q itself, but
 * q - zero_point with 8 bits and binary16 coefficients (w = scale * q). */
static uint8_t stored_value(const file_weight_spec *f, int64_t n, int64_t k)
{
    int q = byte_value(f, f->wq, value_at(f, n, k));
    if (f->q.bits == 8 && f->q.coef == RT_QCOEF_HALF)
        q -= byte_value(f, f->zp, coef_at(f, n, k / f->q.group));
    return (uint8_t)q;
}

/* Coefficient 1 of a group (cg_qpack_row_tile_values): the zero point, or
 * with binary16 coefficients the 4-bit min (-scale * zero point; the
 * quantize passes checked it holds the file's values). */
static float second_coef(const file_weight_spec *f, int64_t at)
{
    int z = byte_value(f, f->zp, at);
    if (f->q.coef == RT_QCOEF_FLOAT)
        return (float)z;
    return f->q.bits == 4 ? rt_half_to_float(llmc_quant_half_min(f->scale[at], z)) : 0.0f;
}

static int produce_file_weight(const cg_tensor *t, cg_sink *sink)
{
    const file_weight_spec *f = t->produce_arg;
    const rt_qweight_shape *s = &f->q;
    int64_t tile_groups = s->kp / s->group;
    uint64_t tile_bytes = rt_qweight_tile_bytes(s);
    uint8_t *q = malloc((size_t)(s->hp * s->k));
    float *scale = malloc(sizeof *scale * (size_t)(s->hp * tile_groups));
    float *second = malloc(sizeof *second * (size_t)(s->hp * tile_groups));
    int rc = q && scale && second ? 0 : -1;
    for (int64_t n0 = 0; !rc && n0 < s->n; n0 += s->hp) {
        int64_t rows = s->n - n0 < s->hp ? s->n - n0 : s->hp;
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t k = 0; k < s->k; k++)
                q[r * s->k + k] = stored_value(f, n0 + r, k);
            for (int64_t g = 0; g < tile_groups; g++) {
                int64_t at = coef_at(f, n0 + r, g);
                scale[r * tile_groups + g] = f->scale[at];
                second[r * tile_groups + g] = second_coef(f, at);
            }
        }
        void *out = cg_sink_reserve(sink, (size_t)tile_bytes);
        if (!out)
            rc = -1;
        else {
            cg_qpack_row_tile_values(q, scale, second, rows, s, out);
            rc = cg_sink_commit(sink, (size_t)tile_bytes);
        }
    }
    free(q);
    free(scale);
    free(second);
    return rc;
}

/* W = DequantizeLinear node `dq`, packed in `bits`, `group` and
 * coefficients `coef` (16 or 32; the quantize passes took them from the
 * file and checked that the tiles hold its values). */
static int file_weight(lower_ctx *L, int wv, int dq, int bits, int64_t group, int64_t coef, uint32_t *t)
{
    const llmc_node *d = &L->g->nodes[dq];
    const llmc_value *wq = &L->g->values[d->inputs[0]], *sc = &L->g->values[d->inputs[1]];
    file_weight_spec *f = calloc(1, sizeof *f);
    if (!f)
        return lower_fail(L, LLMC_E_NOMEM, wv, "out of memory");
    f->transposed = llmc_node_attr_int(L->g, dq, "axis", 1) == 0;
    int64_t k = wq->shape.dims[f->transposed ? 0 : 1].c, n = wq->shape.dims[f->transposed ? 1 : 0].c;
    f->wq = llmc_const_bytes(&wq->konst);
    f->scale = llmc_const_bytes(&sc->konst);
    f->zp = llmc_const_bytes(&L->g->values[d->inputs[2]].konst);
    f->groups = sc->shape.dims[f->transposed ? 0 : 1].c;
    f->signed_q = wq->dtype == LLMC_DT_INT8;
    rt_qcoef qcoef = coef == 32 ? RT_QCOEF_FLOAT : RT_QCOEF_HALF;
    if (!f->wq || !f->scale || !f->zp || (coef != 16 && coef != 32) ||
        !rt_qweight_shape_init_coef(&f->q, bits, L->target->q_hp, L->target->q_lp, n, k, group, qcoef)) {
        free(f);
        return lower_fail(L, LLMC_E_UNSUPPORTED, wv, "cannot pack the file's [%lld, %lld] %d-bit weight in "
                          "groups of %lld (a multiple of %d) with %lld-bit coefficients", (long long)k, (long long)n,
                          bits, (long long)group, 2 * L->target->q_lp, (long long)coef);
    }
    weight_source src = {wv, llmc_const_share_view(&sc->konst, sc->shape.dims[0].c, sc->shape.dims[1].c), n, k};
    rt_tensor_format fmt = {bits == 8 ? LLMC_DT_INT8 : LLMC_RT_U4, LLMC_RT_LAYOUT_QWeightTiles, (uint32_t)group,
                            f->q.hp, f->q.lp, coef == 32 ? LLMC_RT_F32 : LLMC_RT_F16};
    int rc = lazy_weight(L, src, "/packed", &fmt, rt_qweight_bytes(&f->q), produce_file_weight, t);
    if (rc) {
        free(f);
        return rc;
    }
    cg_tensor *x = &L->p->tensors[*t];
    x->produce_arg = f;
    x->owned = f; /* freed with the plan */
    return LLMC_OK;
}

int lower_linear_weight(lower_ctx *L, int wv, uint32_t *t)
{
    int64_t bits = llmc_node_attr_int(L->g, L->node, "quant_bits", 0);
    int64_t group = llmc_node_attr_int(L->g, L->node, "quant_group", 0);
    int dq = lower_file_dequantize(L->g, wv);
    if (dq >= 0)
        return bits ? file_weight(L, wv, dq, (int)bits, group, llmc_node_attr_int(L->g, L->node, "quant_coef", 16), t)
                    : lower_fail(L, LLMC_E_INTERNAL, wv, "a file-quantized W without quant_bits");
    const llmc_value *w = &L->g->values[wv];
    int64_t k = w->shape.dims[0].c, n = w->shape.dims[1].c;
    weight_source src = {wv, llmc_view_transpose(llmc_const_share_view(&w->konst, k, n)), n, k};
    if (bits)
        return quantized_weight(L, src, (int)bits, group, t);
    if (L->target->f_hp)
        return fp32_tiled_weight(L, src, t);
    rt_tensor_format dense = {LLMC_DT_FLOAT, LLMC_RT_LAYOUT_Dense, 0, 0, 0, 0};
    return lazy_weight(L, src, "/transposed", &dense, sizeof(float) * (uint64_t)(n * k), NULL, t);
}

int lower_embedding_table(lower_ctx *L, int ev, int bits, int64_t group, uint32_t *t)
{
    int dq = lower_file_dequantize(L->g, ev);
    if (dq >= 0)
        return file_weight(L, ev, dq, bits, group, llmc_node_attr_int(L->g, L->node, "embed_coef", 16), t);
    const llmc_value *e = &L->g->values[ev];
    int64_t n = e->shape.dims[0].c, k = e->shape.dims[1].c;
    weight_source src = {ev, llmc_const_share_view(&e->konst, n, k), n, k};
    if (bits == 16) {
        rt_tensor_format half = {LLMC_DT_FLOAT, LLMC_RT_LAYOUT_Half, 0, 0, 0, 0};
        return lazy_weight(L, src, "/half", &half, RT_HALF_VALUE_BITS / 8u * (uint64_t)n * (uint64_t)k,
                           produce_half, t);
    }
    return bits == 32 ? fp32_tiled_weight(L, src, t) : quantized_weight(L, src, bits, group, t);
}

/* The hot channels' columns of a ShadowLinear's W: which ones, and W's
 * packed shape (the values are the int8 Linear's, scale * q). */
typedef struct {
    rt_qweight_shape q;
    int64_t n_hot;
    int64_t hot[];
} hot_spec;

/* Row r of a packed row tile: q[0, k) and its group scales. */
static int unpack_tile_row(const hot_spec *h, const uint8_t *tile, int64_t r, int8_t *q,
                           float *scales)
{
    llmc_rt_sg_tensor w = {.dtype = LLMC_RT_I8, .layout = LLMC_RT_LAYOUT_QWeightTiles, .rank = 2,
                           .dims = {h->q.hp, h->q.k}, .weight = tile,
                           .bytes = rt_qweight_tile_bytes(&h->q),
                           .group = (uint32_t)h->q.group, .tile_rows = (uint32_t)h->q.hp,
                           .tile_depth = (uint32_t)h->q.lp};
    return llmc_rt_sg_weight_row(&w, r, q, scales, NULL) ? -1 : 0;
}

/* [n_hot, N + 1] float32: row i = (channel c_i, then W[n, c_i] for every
 * output n), W's values exactly as the int8 tiles hold them: each row tile
 * is packed as the Linear's is, then read back. */
static int produce_hot_table(const cg_tensor *t, cg_sink *sink)
{
    const hot_spec *h = t->produce_arg;
    int64_t n = h->q.n, k = h->q.k, width = n + 1, hp = h->q.hp;
    uint64_t tile_bytes = rt_qweight_tile_bytes(&h->q);
    float *table = calloc((size_t)(h->n_hot * width), sizeof *table);
    float *rows = malloc(sizeof *rows * (size_t)(hp * k)), *scales = malloc(sizeof *scales * (size_t)k);
    uint8_t *tile = malloc((size_t)tile_bytes);
    int8_t *q = malloc((size_t)k);
    int rc = table && rows && scales && tile && q ? 0 : -1;
    for (int64_t i = 0; !rc && i < h->n_hot; i++)
        table[i * width] = (float)h->hot[i];
    for (int64_t r0 = 0; !rc && r0 < n; r0 += hp) {
        int64_t r1 = n - r0 < hp ? n : r0 + hp;
        llmc_view_read_rows(t->view, r0, r1, rows);
        cg_qpack_row_tile(rows, k, r1 - r0, &h->q, tile);
        for (int64_t r = r0; !rc && r < r1; r++) {
            rc = unpack_tile_row(h, tile, r - r0, q, scales);
            for (int64_t i = 0; !rc && i < h->n_hot; i++) {
                int64_t c = h->hot[i];
                table[i * width + 1 + r] = scales[c / h->q.group] * (float)q[c];
            }
        }
    }
    uint64_t bytes = sizeof *table * (uint64_t)(h->n_hot * width);
    void *out = rc ? NULL : cg_sink_reserve(sink, (size_t)bytes);
    if (out)
        memcpy(out, table, (size_t)bytes);
    rc = out ? cg_sink_commit(sink, (size_t)bytes) : -1;
    free(table);
    free(rows);
    free(scales);
    free(tile);
    free(q);
    return rc;
}

/* The hot table of the node's hot_channels over W (value wv), if any. */
static int hot_table(lower_ctx *L, int wv, const rt_qweight_shape *q, uint32_t *t, bool *made)
{
    const llmc_attr *a = llmc_node_attr(L->g, L->node, "hot_channels");
    *made = a && a->n_ints > 0;
    if (!*made)
        return LLMC_OK;
    for (int i = 0; i < a->n_ints; i++)
        if (a->ints[i] < 0 || a->ints[i] >= q->k || (i && a->ints[i] <= a->ints[i - 1]) ||
            a->ints[i] >= (1 << 24)) /* exact as a float */
            return lower_fail(L, LLMC_E_INTERNAL, -1, "hot_channels must ascend within [0, K)");
    hot_spec *h = malloc(sizeof *h + sizeof h->hot[0] * (size_t)a->n_ints);
    if (!h)
        return lower_fail(L, LLMC_E_NOMEM, -1, "out of memory");
    h->q = *q;
    h->n_hot = a->n_ints;
    memcpy(h->hot, a->ints, sizeof h->hot[0] * (size_t)a->n_ints);
    const llmc_value *w = &L->g->values[wv];
    weight_source src = {wv, llmc_view_transpose(llmc_const_share_view(&w->konst, q->k, q->n)),
                         q->n, q->k};
    rt_tensor_format dense = {LLMC_DT_FLOAT, LLMC_RT_LAYOUT_Dense, 0, 0, 0, 0};
    int rc = lazy_weight(L, src, "/hot", &dense, 4u * (uint64_t)(h->n_hot * (q->n + 1)),
                         produce_hot_table, t);
    if (rc) {
        free(h);
        return rc;
    }
    cg_tensor *x = &L->p->tensors[*t];
    x->dims[0] = llmc_aff_const(h->n_hot);
    x->dims[1] = llmc_aff_const(q->n + 1);
    x->produce_arg = h;
    x->owned = h; /* freed with the plan */
    return LLMC_OK;
}

/* llmc.ShadowLinear(x, W, y_0..) -> z_0..: W lowered as its Linear's (the
 * node carries the Linear's quant_bits and quant_group), so the two
 * tensors have equal bytes and share one segment (cg_share_weights); then,
 * with hot_channels, the CPU's copy of those columns (kind 1). */
int lower_shadow_linear(lower_ctx *L, int unused)
{
    (void)unused;
    const llmc_node *n = cur_node(L);
    float scale = llmc_node_attr_float(L->g, L->node, "scale", 0.0f);
    if (n->n_inputs != 2 + n->n_outputs || node_in(L, 1) < 0 || !(scale > 0.0f))
        return lower_fail(L, LLMC_E_INTERNAL, -1, "ShadowLinear needs x, W, one y per output "
                          "and a positive scale");
    uint32_t t;
    bool hot = false;
    int rc = lower_input(L, 0, &t);
    cg_op *op = rc ? NULL : lower_emit(L, LLMC_RT_OP_ShadowLinear);
    if (!rc && !op)
        return L->err->code;
    if (!rc)
        rc = op_add_input(L, op, t);
    if (!rc)
        rc = lower_linear_weight(L, node_in(L, 1), &t);
    if (!rc)
        rc = op_add_input(L, op, t);
    if (!rc) {
        rt_qweight_shape q = qshape_of(&L->p->tensors[t]);
        rc = hot_table(L, node_in(L, 1), &q, &t, &hot);
    }
    if (!rc && hot) { /* (new tensors never move the ops) */
        op->kind = 1;
        rc = op_add_input(L, op, t);
    }
    for (int j = 0; j < n->n_outputs && !rc; j++) {
        rc = lower_input(L, 2 + j, &t);
        if (!rc)
            rc = op_add_input(L, op, t);
    }
    for (int j = 0; j < n->n_outputs && !rc; j++) {
        rc = lower_output(L, j, &t);
        if (!rc)
            rc = op_add_output(L, op, t);
    }
    if (!rc)
        op->scale = scale;
    return rc;
}

/* llmc.QuantizeRows(x) -> xq: QActTiles of the target's ep x lp tiles;
 * its scale attribute (calibration's static per-tensor scale) if set. */
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
    if (!rt_qdepth_ok(L->target->q_lp, group) || group > UINT32_MAX)
        return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "group %lld is not a positive multiple of %d",
                          (long long)group, 2 * L->target->q_lp);
    cg_tensor *yt = &L->p->tensors[y];
    yt->layout = LLMC_RT_LAYOUT_QActTiles;
    yt->group = (uint32_t)group;
    yt->tile_rows = L->target->q_ep;
    yt->tile_depth = L->target->q_lp;
    cg_op *op = lower_emit(L, LLMC_RT_OP_QuantizeRows);
    if (!op)
        return L->err->code;
    op->scale = llmc_node_attr_float(L->g, L->node, "scale", 0.0f);
    rc = op_add_input(L, op, x);
    return rc ? rc : op_add_output(L, op, y);
}

/* DequantizeLinear in canonical form: packed with the Linears or the
 * embedding Gathers reading it (file_weight), so nothing of its own; any other reader is a bug of the
 * passes before (quant_canonical.c rewrites every other DequantizeLinear).
 * UNSUPPORTED, so constant folding's evaluator leaves it alone. */
int lower_dequantize_linear(lower_ctx *L, int unused)
{
    (void)unused;
    const llmc_graph *g = L->g;
    int out = node_out(L, 0);
    for (int i = 0; i < g->n_nodes; i++) {
        const llmc_node *n = &g->nodes[i];
        for (int k = 0; !n->dead && k < n->n_inputs; k++)
            if (n->inputs[k] == out && !((llmc_is_op(n, "Linear") || llmc_is_op(n, "ShadowLinear")) && k == 1) &&
                !(llmc_is_onnx_op(n, "Gather") && k == 0 && llmc_node_attr_int(g, i, "embed_bits", 0)))
                return lower_fail(L, LLMC_E_UNSUPPORTED, out, "a dequantized weight is lowered with the Linear or "
                                  "embedding Gather reading it, and node '%s' (%s) reads it otherwise", n->name,
                                  n->op_type);
    }
    return g->values[out].is_graph_output
               ? lower_fail(L, LLMC_E_UNSUPPORTED, out, "a dequantized weight cannot be a graph output")
               : LLMC_OK;
}

/* QuantizeLinear, DynamicQuantizeLinear, MatMulInteger: the quant-canonical
 * pass rewrites them into float ops or the canonical weight form. */
int lower_quant_rewritten(lower_ctx *L, int unused)
{
    (void)unused;
    return lower_fail(L, LLMC_E_UNSUPPORTED, -1, "%s is rewritten by the quant-canonical pass before lowering",
                      cur_node(L)->op_type);
}
