/* The op exporters of the NPU export (npu_export_ops.h). */
#include "npu_export_ops.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "support/version.h"

/* A tensor's elements: far beyond any chunk, far below overflow. */
#define MAX_ELEMS ((int64_t)1 << 40)

/* Plan kinds whose ONNX op has the same name and meaning; NULL: none. */
static const char *const binary_onnx_ops[LLMC_RT_BINARY_COUNT] = {
    [LLMC_RT_BINARY_Add] = "Add", [LLMC_RT_BINARY_Sub] = "Sub", [LLMC_RT_BINARY_Mul] = "Mul",
    [LLMC_RT_BINARY_Div] = "Div", [LLMC_RT_BINARY_Max] = "Max", [LLMC_RT_BINARY_Min] = "Min"};
static const char *const unary_onnx_ops[LLMC_RT_UNARY_COUNT] = {
    [LLMC_RT_UNARY_Identity] = "Identity", [LLMC_RT_UNARY_Neg] = "Neg",
    [LLMC_RT_UNARY_Abs] = "Abs",           [LLMC_RT_UNARY_Sqrt] = "Sqrt",
    [LLMC_RT_UNARY_Exp] = "Exp",           [LLMC_RT_UNARY_Tanh] = "Tanh",
    [LLMC_RT_UNARY_Sigmoid] = "Sigmoid",   [LLMC_RT_UNARY_Relu] = "Relu"};

/* ---- op exporters ---------------------------------------------------------- */

static int refuse(onnx_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(onnx_graph *g, const char *fmt, ...)
{
    const llmc_rt_sg_op *op = &g->sg->ops[g->op];
    const char *code = llmc_rt_op_name(op->code);
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return llmc_fail(g->err, LLMC_E_UNSUPPORTED, "--npu-export: subgraph %u '%s': op %u (%s '%s'): %s",
                     g->sg->index, npx_text_of(g->sg->name), g->op, code, npx_text_of(op->name), why);
}

static bool is_f32_dense(const llmc_rt_sg_tensor *d)
{
    return d->dtype == LLMC_RT_F32 && d->layout == LLMC_RT_LAYOUT_Dense;
}

static int check_counts(onnx_graph *g, const llmc_rt_sg_op *op, uint32_t min_in, uint32_t max_in,
                        uint32_t max_out)
{
    if (op->n_inputs < min_in || op->n_inputs > max_in || op->n_outputs > max_out)
        return refuse(g, "%u inputs and %u outputs, expected %u to %u inputs and at most %u "
                      "outputs", op->n_inputs, op->n_outputs, min_in, max_in, max_out);
    return LLMC_OK;
}

/* Operands in range; every weight read (but a Linear's W) float32 and
 * whole; outputs float32 (but QuantizeRows') and neither weights nor
 * subgraph inputs. */
static int check_operands(onnx_graph *g, const llmc_rt_sg_op *op)
{
    if (!op->n_outputs || op->n_inputs > LLMC_RT_SG_OP_IO || op->n_outputs > LLMC_RT_SG_OP_IO)
        return refuse(g, "%u inputs and %u outputs", op->n_inputs, op->n_outputs);
    for (uint32_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
        uint32_t t = i < op->n_inputs ? op->inputs[i] : op->outputs[i - op->n_inputs];
        if (t >= g->sg->n_tensors)
            return refuse(g, "operand %u is tensor %u of %u", i, t, g->sg->n_tensors);
    }
    for (uint32_t i = 0; i < op->n_inputs; i++) {
        const llmc_rt_sg_tensor *d = npx_desc(g, op->inputs[i]);
        npx_shape s = npx_shape_of(d);
        bool w = op->code == LLMC_RT_OP_Linear && i == 1;
        if (d->weight && !w && (!is_f32_dense(d) || d->bytes < (uint64_t)npx_elements(&s) * 4u))
            return refuse(g, "weight '%s' is not a whole float32 Dense tensor", d->name);
    }
    for (uint32_t i = 0; i < op->n_outputs; i++) {
        uint32_t t = op->outputs[i];
        bool quantized = op->code == LLMC_RT_OP_QuantizeRows;
        if (npx_desc(g, t)->weight || t < g->sg->n_inputs ||
            (!quantized && !is_f32_dense(npx_desc(g, t))))
            return refuse(g, "output '%s' is a weight, a subgraph input or not float32",
                          npx_desc(g, t)->name);
    }
    return LLMC_OK;
}

/* QuantizeRows, static scale s: Clip to +-127 s (llmc clamps to +-127,
 * ONNX saturates to [-128, 127]), then QuantizeLinear(s, zero point 0). */
static int export_quantize(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_counts(g, op, 1, 1, 1);
    if (rc)
        return rc;
    uint32_t x = op->inputs[0], y = op->outputs[0];
    float s = op->scale;
    if (!(s > 0.0f) || !isfinite(s))
        return refuse(g, "scale %g: only a static per-tensor scale > 0 (--calibrate) has a "
                      "QuantizeLinear form", (double)s);
    if (!is_f32_dense(npx_desc(g, x)) || npx_desc(g, y)->dtype != LLMC_RT_I8)
        return refuse(g, "needs float32 '%s' into int8 '%s'", npx_desc(g, x)->name, npx_desc(g, y)->name);
    if (y < g->sg->n_inputs + g->sg->n_outputs)
        return refuse(g, "its int8 output '%s' crosses the subgraph's boundary", npx_desc(g, y)->name);
    const char *lo = npx_const_f32(g, "clip_min", -127.0f * s);
    const char *hi = npx_const_f32(g, "clip_max", 127.0f * s);
    const char *scale = npx_const_f32(g, "scale", s), *zero = npx_const_i8_zero(g, "zero_point");
    const char *clipped = npx_op_value(g, "clipped");
    npx_node3(g, "Clip", npx_value_of(g, x), lo, hi, clipped);
    npx_node3(g, "QuantizeLinear", clipped, scale, zero, npx_tensor_name(g, y));
    g->act_scale[y] = scale;
    g->act_zero[y] = zero;
    return LLMC_OK;
}

/* W [N, K] (Int8 QWeightTiles, one scale per output channel) as MatMul's
 * [K, N]: an int8 initializer with W's name, its scales and zero points
 * [N] along axis 1, and the DequantizeLinear making it float (once per W). */
static int weight_kn(onnx_graph *g, uint32_t w, int64_t x_cols, const char **value)
{
    const llmc_rt_sg_tensor *d = npx_desc(g, w);
    if (d->dtype != LLMC_RT_I8 || d->layout != LLMC_RT_LAYOUT_QWeightTiles || !d->weight || d->rank != 2)
        return refuse(g, "W '%s' is not an Int8 QWeightTiles weight [N, K]", d->name);
    int64_t n = d->dims[0], k = d->dims[1];
    if (k != x_cols)
        return refuse(g, "W '%s' is [%lld, %lld] but x has %lld columns", d->name, (long long)n,
                      (long long)k, (long long)x_cols);
    if (g->weight_value[w]) {
        *value = g->weight_value[w];
        return LLMC_OK;
    }
    if ((int64_t)d->group < k)
        return refuse(g, "per-channel weights only: W '%s' has groups of %u < K %lld (compile "
                      "with --group-size 0)", d->name, d->group, (long long)k);
    int8_t *q = npx_graph_alloc(g, (size_t)(n * k)), *row = npx_graph_alloc(g, (size_t)k);
    int8_t *zeros = npx_graph_alloc(g, (size_t)n);
    float *scales = npx_graph_alloc(g, (size_t)n * sizeof *scales);
    for (int64_t r = 0; !g->failed && r < n; r++) {
        llmc_rt_error rt = {0};
        if (llmc_rt_sg_weight_row(d, r, row, &scales[r], &rt))
            return refuse(g, "%s", rt.msg);
        for (int64_t c = 0; c < k; c++)
            q[c * n + r] = row[c];
    }
    if (g->failed)
        return LLMC_OK; /* reported by the op loop */
    const char *wq = npx_tensor_name(g, w);
    const char *ws = npx_graph_printf(g, "%s::scale", wq);
    const char *wz = npx_graph_printf(g, "%s::zero_point", wq);
    const char *wf = npx_graph_printf(g, "%s::dequantized", wq);
    npx_shape kn = {2, {k, n}}, channels = {1, {n}};
    npx_add_init(g, wq, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, &kn, q, (size_t)(n * k));
    npx_add_init(g, ws, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &channels, scales, (size_t)n * 4u);
    npx_add_init(g, wz, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, &channels, zeros, (size_t)n);
    npx_attr_int(g, npx_node3(g, "DequantizeLinear", wq, ws, wz, wf), "axis", 1);
    g->weight_bytes += (uint64_t)(n * k) + 5u * (uint64_t)n;
    g->weight_value[w] = wf;
    *value = wf;
    return LLMC_OK;
}

/* z (shape zd, the last node `last` writes it) into the Linear's outputs:
 * renamed when there is one, else split along the last axis; a Reshape
 * where an output's dims are not z's rows. */
static int linear_outputs(onnx_graph *g, const llmc_rt_sg_op *op, Onnx__NodeProto *last,
                          const char *z, const npx_shape *zd)
{
    int64_t rows = npx_elements(zd) / (npx_last_dim(zd) ? npx_last_dim(zd) : 1), cols = 0;
    int64_t split[LLMC_RT_SG_OP_IO];
    for (uint32_t j = 0; j < op->n_outputs; j++) {
        npx_shape y = npx_shape_of(npx_desc(g, op->outputs[j]));
        split[j] = npx_last_dim(&y);
        cols += split[j];
        if (y.rank < 1 || npx_elements(&y) != rows * split[j])
            return refuse(g, "output '%s' does not have x's %lld rows",
                          npx_desc(g, op->outputs[j])->name, (long long)rows);
    }
    if (cols != npx_last_dim(zd))
        return refuse(g, "outputs have %lld columns, W has %lld rows", (long long)cols,
                      (long long)npx_last_dim(zd));
    const char *parts[LLMC_RT_SG_OP_IO];
    npx_shape part[LLMC_RT_SG_OP_IO];
    for (uint32_t j = 0; j < op->n_outputs; j++) {
        npx_shape y = npx_shape_of(npx_desc(g, op->outputs[j]));
        part[j] = *zd;
        part[j].dims[zd->rank - 1] = split[j];
        char what[32];
        snprintf(what, sizeof what, "part%u", j);
        parts[j] = npx_same_shape(&part[j], &y) ? npx_tensor_name(g, op->outputs[j])
                                            : npx_op_value(g, what);
    }
    if (op->n_outputs == 1)
        npx_rename_output(g, last, parts[0]);
    else
        npx_attr_int(g, npx_add_node(g, "Split", 2, (const char *const[]){z,
                                     npx_const_i64s(g, "split", split, (int)op->n_outputs)},
                                     op->n_outputs, parts), "axis", -1);
    for (uint32_t j = 0; j < op->n_outputs; j++) {
        npx_shape y = npx_shape_of(npx_desc(g, op->outputs[j]));
        if (!npx_same_shape(&part[j], &y)) {
            char what[32];
            snprintf(what, sizeof what, "part%u_shape", j);
            npx_node2(g, "Reshape", parts[j], npx_const_i64s(g, what, y.dims, y.rank),
                      npx_tensor_name(g, op->outputs[j]));
        }
    }
    return LLMC_OK;
}

/* Linear(xq, W[, bias][, residual]): DequantizeLinear(xq) MatMul W
 * (dequantized), + bias, + residual, into the outputs. */
static int export_linear(onnx_graph *g, const llmc_rt_sg_op *op)
{
    if (op->kind < 0 || op->kind > 3)
        return refuse(g, "kind %d (1 bias, 2 residual)", op->kind);
    bool bias = op->kind & 1, residual = op->kind & 2;
    uint32_t n_in = 2u + bias + residual;
    int rc = check_counts(g, op, n_in, n_in, LLMC_RT_SG_OP_IO);
    if (rc)
        return rc;
    uint32_t x = op->inputs[0];
    npx_shape xd = npx_shape_of(npx_desc(g, x));
    if (!g->act_scale[x] || xd.rank < 1)
        return refuse(g, "x '%s' is not the int8 output of a static-scale QuantizeRows of this "
                      "subgraph", npx_desc(g, x)->name);
    const char *w = NULL;
    if ((rc = weight_kn(g, op->inputs[1], npx_last_dim(&xd), &w)) || g->failed)
        return rc;
    npx_shape zd = xd;
    zd.dims[zd.rank - 1] = npx_desc(g, op->inputs[1])->dims[0];
    const char *xf = npx_op_value(g, "x"), *z = npx_op_value(g, "matmul");
    npx_node3(g, "DequantizeLinear", npx_tensor_name(g, x), g->act_scale[x], g->act_zero[x], xf);
    Onnx__NodeProto *last = npx_node2(g, "MatMul", xf, w, z);
    if (bias) {
        const llmc_rt_sg_tensor *b = npx_desc(g, op->inputs[2]);
        npx_shape bd = npx_shape_of(b);
        if (!b->weight || npx_elements(&bd) != npx_last_dim(&zd) || npx_last_dim(&bd) != npx_last_dim(&zd))
            return refuse(g, "bias '%s' must be a float32 weight [%lld]", b->name,
                          (long long)npx_last_dim(&zd));
        const char *zb = npx_op_value(g, "plus_bias");
        last = npx_node2(g, "Add", z, npx_value_of(g, op->inputs[2]), zb);
        z = zb;
    }
    if (residual) {
        uint32_t r = op->inputs[n_in - 1];
        npx_shape rd = npx_shape_of(npx_desc(g, r));
        if (npx_elements(&rd) != npx_elements(&zd) || npx_last_dim(&rd) != npx_last_dim(&zd))
            return refuse(g, "residual '%s' does not have the output's rows and columns",
                          npx_desc(g, r)->name);
        const char *zr = npx_op_value(g, "plus_residual");
        const char *residual_value = npx_as_shape(g, npx_value_of(g, r), &rd, &zd, "residual");
        last = npx_node2(g, "Add", z, residual_value, zr);
        z = zr;
    }
    return linear_outputs(g, op, last, z, &zd);
}

/* RMSNorm: y = x / sqrt(mean(x^2) + eps) * scale, over the last axis. */
static int export_rmsnorm(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_counts(g, op, 2, 2, 1);
    if (rc)
        return rc;
    const char *x = npx_value_of(g, op->inputs[0]), *scale = npx_value_of(g, op->inputs[1]);
    const char *sq = npx_op_value(g, "square"), *mean = npx_op_value(g, "mean_square");
    const char *eps = npx_const_f32(g, "epsilon", op->epsilon);
    const char *var = npx_op_value(g, "plus_epsilon");
    const char *rms = npx_op_value(g, "rms"), *normed = npx_op_value(g, "normalized");
    npx_node2(g, "Mul", x, x, sq);
    Onnx__NodeProto *reduce = npx_node1(g, "ReduceMean", sq, mean);
    npx_attr_ints(g, reduce, "axes", (const int64_t[]){-1}, 1);
    npx_attr_int(g, reduce, "keepdims", 1);
    npx_node2(g, "Add", mean, eps, var);
    npx_node1(g, "Sqrt", var, rms);
    npx_node2(g, "Div", x, rms, normed);
    npx_node2(g, "Mul", normed, scale, npx_tensor_name(g, op->outputs[0]));
    return LLMC_OK;
}

static int export_layernorm(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_counts(g, op, 2, 3, 1);
    if (rc)
        return rc;
    npx_shape x = npx_shape_of(npx_desc(g, op->inputs[0]));
    npx_shape vector = {1, {npx_last_dim(&x)}};
    const char *in[3] = {npx_value_of(g, op->inputs[0])};
    for (uint32_t i = 1; i < op->n_inputs; i++) { /* scale, bias: [D] as ONNX wants them */
        npx_shape w = npx_shape_of(npx_desc(g, op->inputs[i]));
        if (npx_elements(&w) != npx_last_dim(&x) || npx_last_dim(&w) != npx_last_dim(&x))
            return refuse(g, "'%s' must be a float32 weight [%lld]", npx_desc(g, op->inputs[i])->name,
                          (long long)npx_last_dim(&x));
        in[i] = npx_as_shape(g, npx_value_of(g, op->inputs[i]), &w, &vector,
                             i == 1 ? "scale" : "bias");
    }
    const char *y = npx_tensor_name(g, op->outputs[0]);
    Onnx__NodeProto *node = npx_add_node(g, "LayerNormalization", op->n_inputs, in, 1,
                                         (const char *const[]){y});
    npx_attr_int(g, node, "axis", -1);
    npx_attr_float(g, node, "epsilon", op->epsilon);
    return LLMC_OK;
}

/* silu(a) = a * sigmoid(a), into `y`. */
static void silu(onnx_graph *g, const char *a, const char *y)
{
    const char *sig = npx_op_value(g, "sigmoid");
    npx_node1(g, "Sigmoid", a, sig);
    npx_node2(g, "Mul", a, sig, y);
}

/* a `kind` b (b may be a weight of a's trailing dims: ONNX broadcasting);
 * SwiGLU(a, b) = silu(a) * b. */
static int export_binary(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_counts(g, op, 2, 2, 1);
    if (rc)
        return rc;
    const char *a = npx_value_of(g, op->inputs[0]), *b = npx_value_of(g, op->inputs[1]);
    const char *y = npx_tensor_name(g, op->outputs[0]);
    if (op->kind == LLMC_RT_BINARY_SwiGLU) {
        const char *gate = npx_op_value(g, "silu");
        silu(g, a, gate);
        npx_node2(g, "Mul", gate, b, y);
        return LLMC_OK;
    }
    const char *type = op->kind >= 0 && op->kind < LLMC_RT_BINARY_COUNT ? binary_onnx_ops[op->kind]
                                                                        : NULL;
    if (!type)
        return refuse(g, "Binary kind %d has no ONNX form here (Add, Sub, Mul, Div, Max, Min, "
                      "SwiGLU do)", op->kind);
    npx_node2(g, type, a, b, y);
    return LLMC_OK;
}

/* gelu(x) = 0.5 x (1 + erf(x / sqrt 2)); tanh form 0.5 x (1 + tanh(sqrt(2 /
 * pi) (x + 0.044715 x^3))), as runtime/kernels/ref_elementwise.c. */
static void gelu(onnx_graph *g, const char *x, bool tanh_form, const char *y)
{
    const char *inner = npx_op_value(g, "inner"), *curve = npx_op_value(g, "curve");
    if (tanh_form) {
        const char *x2 = npx_op_value(g, "x2"), *x3 = npx_op_value(g, "x3");
        const char *cubic = npx_op_value(g, "cubic");
        const char *sum = npx_op_value(g, "x_plus_cubic");
        npx_node2(g, "Mul", x, x, x2);
        npx_node2(g, "Mul", x2, x, x3);
        npx_node2(g, "Mul", x3, npx_const_f32(g, "cubic_coefficient", 0.044715f), cubic);
        npx_node2(g, "Add", x, cubic, sum);
        npx_node2(g, "Mul", sum, npx_const_f32(g, "sqrt_2_over_pi", 0.79788456080286536f), inner);
        npx_node1(g, "Tanh", inner, curve);
    } else {
        npx_node2(g, "Mul", x, npx_const_f32(g, "one_over_sqrt_2", 0.70710678118654752f), inner);
        npx_node1(g, "Erf", inner, curve);
    }
    const char *one_plus = npx_op_value(g, "one_plus"), *half_x = npx_op_value(g, "half_x");
    npx_node2(g, "Add", curve, npx_const_f32(g, "one", 1.0f), one_plus);
    npx_node2(g, "Mul", x, npx_const_f32(g, "half", 0.5f), half_x);
    npx_node2(g, "Mul", half_x, one_plus, y);
}

static int export_unary(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_counts(g, op, 1, 1, 1);
    if (rc)
        return rc;
    const char *x = npx_value_of(g, op->inputs[0]), *y = npx_tensor_name(g, op->outputs[0]);
    const char *type = op->kind >= 0 && op->kind < LLMC_RT_UNARY_COUNT ? unary_onnx_ops[op->kind]
                                                                       : NULL;
    if (type)
        npx_node1(g, type, x, y);
    else if (op->kind == LLMC_RT_UNARY_Silu)
        silu(g, x, y);
    else if (op->kind == LLMC_RT_UNARY_Gelu || op->kind == LLMC_RT_UNARY_GeluTanh)
        gelu(g, x, op->kind == LLMC_RT_UNARY_GeluTanh, y);
    else
        return refuse(g, "Unary kind %d has no ONNX form here", op->kind);
    return LLMC_OK;
}

static int export_reshape(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_counts(g, op, 1, 1, 1);
    if (rc)
        return rc;
    npx_shape x = npx_shape_of(npx_desc(g, op->inputs[0])), y = npx_shape_of(npx_desc(g, op->outputs[0]));
    if (npx_elements(&x) != npx_elements(&y))
        return refuse(g, "'%s' and '%s' have different sizes", npx_desc(g, op->inputs[0])->name,
                      npx_desc(g, op->outputs[0])->name);
    npx_node2(g, "Reshape", npx_value_of(g, op->inputs[0]),
              npx_const_i64s(g, "shape", y.dims, y.rank), npx_tensor_name(g, op->outputs[0]));
    return LLMC_OK;
}

static int export_op(onnx_graph *g, const llmc_rt_sg_op *op)
{
    int rc = check_operands(g, op);
    if (rc)
        return rc;
    if (!llmc_rt_op_npu(op->code))
        return refuse(g, "no ONNX form for this op (an NPU subgraph cannot hold it)");
    switch (op->code) {
    case LLMC_RT_OP_QuantizeRows: return export_quantize(g, op);
    case LLMC_RT_OP_Linear: return export_linear(g, op);
    case LLMC_RT_OP_RMSNorm: return export_rmsnorm(g, op);
    case LLMC_RT_OP_LayerNorm:
        return op->n_outputs == 1 ? export_layernorm(g, op)
                                  : refuse(g, "Mean and InvStdDev outputs are not exported");
    case LLMC_RT_OP_Binary: return export_binary(g, op);
    case LLMC_RT_OP_Unary: return export_unary(g, op);
    case LLMC_RT_OP_Reshape: return export_reshape(g, op);
    default: return refuse(g, "no ONNX form for this op");
    }
}

/* ---- the model ------------------------------------------------------------- */

/* Ranks and dims in range, no empty dim; inputs and outputs float32 and no
 * weights. */
int npx_check_tensors(const llmc_rt_subgraph *sg, llmc_error *err)
{
    for (uint32_t t = 0; t < sg->n_tensors; t++) {
        const llmc_rt_sg_tensor *d = &sg->tensors[t];
        bool ok = d->rank >= 0 && d->rank <= LLMC_RT_MAX_RANK;
        int64_t n = 1;
        for (int a = 0; ok && a < d->rank; a++) {
            ok = d->dims[a] >= 1 && d->dims[a] <= MAX_ELEMS / n;
            n *= ok ? d->dims[a] : 1;
        }
        if (!ok)
            return llmc_fail(err, LLMC_E_UNSUPPORTED, "--npu-export: subgraph %u '%s': tensor "
                             "%u '%s': rank %d or its dims out of range", sg->index,
                             npx_text_of(sg->name), t, npx_text_of(d->name), d->rank);
        if (t < sg->n_inputs + sg->n_outputs && (d->weight || !is_f32_dense(d)))
            return llmc_fail(err, LLMC_E_UNSUPPORTED, "--npu-export: subgraph %u '%s': %s '%s' "
                             "is not a float32 Dense tensor", sg->index, npx_text_of(sg->name),
                             t < sg->n_inputs ? "input" : "output", npx_text_of(d->name));
    }
    return LLMC_OK;
}

/* The graph of every op, its inputs and outputs, wrapped in a model. */
int npx_build_model(onnx_graph *g, const char *plan_name, Onnx__ModelProto *model)
{
    const llmc_rt_subgraph *sg = g->sg;
    size_t n = sg->n_tensors + 1u;
    g->weight_value = npx_graph_alloc(g, n * sizeof *g->weight_value);
    g->act_scale = npx_graph_alloc(g, n * sizeof *g->act_scale);
    g->act_zero = npx_graph_alloc(g, n * sizeof *g->act_zero);
    int rc = LLMC_OK;
    for (g->op = 0; !rc && !g->failed && g->op < sg->n_ops; g->op++)
        rc = export_op(g, &sg->ops[g->op]);
    Onnx__GraphProto *graph = npx_graph_alloc(g, sizeof *graph);
    Onnx__OperatorSetIdProto *opset = npx_graph_alloc(g, sizeof *opset);
    Onnx__OperatorSetIdProto **opsets = npx_graph_alloc(g, sizeof *opsets);
    if (!rc && !g->failed) {
        *graph = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
        graph->name = npx_graph_strdup(g, sg->name);
        graph->doc_string = npx_graph_printf(g, "llmc plan %s, NPU subgraph %u '%s': %u ops at "
                                             "%u rows (the chunk), weights in QDQ form",
                                             plan_name, sg->index, sg->name, sg->n_ops, sg->rows);
        graph->n_node = g->n_nodes;
        graph->node = g->nodes;
        graph->n_initializer = g->n_inits;
        graph->initializer = g->inits;
        graph->n_input = sg->n_inputs;
        graph->input = npx_value_infos(g, 0, sg->n_inputs);
        graph->n_output = sg->n_outputs;
        graph->output = npx_value_infos(g, sg->n_inputs, sg->n_outputs);
        *opset = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
        opset->domain = npx_graph_strdup(g, "");
        opset->has_version = 1;
        opset->version = ONNX_OPSET;
        opsets[0] = opset;
        model->has_ir_version = 1;
        model->ir_version = ONNX_IR_VERSION;
        model->n_opset_import = 1;
        model->opset_import = opsets;
        model->producer_name = npx_graph_strdup(g, "llmc");
        model->producer_version = npx_graph_strdup(g, LLMC_VERSION);
        model->graph = graph;
    }
    if (!rc && g->failed)
        rc = llmc_fail(g->err, LLMC_E_NOMEM, "--npu-export: subgraph %u '%s': out of memory",
                       sg->index, npx_text_of(sg->name));
    return rc;
}
