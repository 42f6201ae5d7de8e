/* Pre-quantized weights and tables (quant_weight.h). */
#include "quant_weight.h"

typedef struct {
    const uint8_t *q, *zp;
    const float *scale;
    int64_t rows, cols, groups, block;
    int axis;
    bool is_signed;
} quant_view;

static int view_of(const llmc_graph *g, int dq, quant_view *v)
{
    const llmc_value *wq = &g->values[llmc_quant_weight_input(g, dq, 0)];
    const llmc_value *sv = &g->values[llmc_quant_weight_input(g, dq, 1)];
    v->q = llmc_const_bytes(&wq->konst);
    v->scale = llmc_const_bytes(&sv->konst);
    v->zp = llmc_const_bytes(&g->values[llmc_quant_weight_input(g, dq, 2)].konst);
    v->rows = wq->shape.dims[0].c;
    v->cols = wq->shape.dims[1].c;
    v->axis = (int)llmc_node_attr_int(g, dq, "axis", 0);
    v->groups = sv->shape.dims[v->axis].c;
    v->block = llmc_node_attr_int(g, dq, "block_size", 1);
    v->is_signed = wq->dtype == LLMC_DT_INT8;
    return v->q && v->scale && v->zp ? 0 : -1;
}

/* The scale / zero point index of element i (row-major) of Wq. */
static int64_t coef_at(const quant_view *v, int64_t i)
{
    int64_t r = i / v->cols, c = i % v->cols;
    return v->axis == 0 ? r / v->block * v->cols + c : r * v->groups + c / v->block;
}

static int value_at(const quant_view *v, const uint8_t *p, int64_t i)
{
    return v->is_signed ? (int8_t)p[i] : p[i];
}

int llmc_quant_weight_bits(const llmc_graph *g, int dq)
{
    quant_view v;
    if (view_of(g, dq, &v))
        return -1;
    bool nibbles = !v.is_signed, bytes = true;
    for (int64_t i = 0; i < v.rows * v.cols; i++) {
        int q = value_at(&v, v.q, i), z = value_at(&v, v.zp, coef_at(&v, i));
        nibbles = nibbles && q <= 15 && z <= 15;
        bytes = bytes && q - z >= -127 && q - z <= 127;
    }
    return nibbles ? 4 : bytes ? 8 : 0;
}

int llmc_quant_weight_dequantize(const llmc_graph *g, int dq, float *out)
{
    quant_view v;
    if (view_of(g, dq, &v))
        return -1;
    for (int64_t i = 0; i < v.rows * v.cols; i++) {
        int64_t at = coef_at(&v, i);
        out[i] = (float)(value_at(&v, v.q, i) - value_at(&v, v.zp, at)) * v.scale[at];
    }
    return 0;
}
