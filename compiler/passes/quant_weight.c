/* Pre-quantized weights and tables (quant_weight.h). */
#include <string.h>

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

static bool same_bits(float a, float b)
{
    return !memcmp(&a, &b, sizeof a);
}

/* What ONNX Runtime's DequantizeLinear computes for q, z, s. */
static float dequantized(int q, int z, float s)
{
    return (float)(q - z) * s;
}

/* Whether the binary16 coefficients reproduce element (q, z, s) in `bits`
 * (the scale is a binary16 already): bits 8 stores q - z, so its product is
 * the file's when q - z fits; bits 4 computes scale * q + min, the same
 * float but for a zero's sign (+0 where a negative scale gives -0: equal
 * values). */
static bool half_holds(int bits, int q, int z, float s)
{
    if (bits == 8)
        return q - z >= -127 && q - z <= 127;
    return s * (float)q + rt_half_to_float(llmc_quant_half_min(s, z)) == dequantized(q, z, s);
}

int llmc_quant_weight_form(const llmc_graph *g, int dq, llmc_quant_tile_form *form)
{
    quant_view v;
    if (view_of(g, dq, &v))
        return -1;
    int64_t n = v.rows * v.cols, n_coef = v.axis == 0 ? v.groups * v.cols : v.rows * v.groups;
    bool nibbles = true, half = true;
    for (int64_t i = 0; nibbles && i < n; i++) {
        int q = value_at(&v, v.q, i), z = value_at(&v, v.zp, coef_at(&v, i));
        nibbles = q >= 0 && q <= 15 && z >= 0 && z <= 15;
    }
    for (int64_t i = 0; half && i < n_coef; i++)
        half = same_bits(v.scale[i], rt_half_to_float(rt_float_to_half(v.scale[i])));
    form->bits = nibbles ? 4 : 8;
    for (int64_t i = 0; half && i < n; i++) {
        int64_t at = coef_at(&v, i);
        half = half_holds(form->bits, value_at(&v, v.q, i), value_at(&v, v.zp, at), v.scale[at]);
    }
    form->coef = half ? 16 : 32;
    return 0;
}

int llmc_quant_weight_dequantize(const llmc_graph *g, int dq, float *out)
{
    quant_view v;
    if (view_of(g, dq, &v))
        return -1;
    for (int64_t i = 0; i < v.rows * v.cols; i++) {
        int64_t at = coef_at(&v, i);
        out[i] = dequantized(value_at(&v, v.q, i), value_at(&v, v.zp, at), v.scale[at]);
    }
    return 0;
}
