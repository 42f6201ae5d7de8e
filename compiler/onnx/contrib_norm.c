/* ONNX Runtime's norms and tanh GELU (ContribOperators.md; the model
 * builder of onnxruntime-genai writes one pair of norms per decoder layer,
 * RMS norms for LLaMA-shaped models, layer norms for Phi-2):
 *
 *   SimplifiedLayerNormalization(X, scale) -> Y           (default domain)
 *       Y = X / sqrt(mean(X^2 over the last axis) + epsilon) * scale
 *   SkipSimplifiedLayerNormalization(X, skip, gamma, bias?)  (com.microsoft)
 *       -> Y, mean, inv_std_var, sum
 *       sum = X + skip (+ bias);  Y = the same norm of sum with gamma
 *   SkipLayerNormalization(X, skip, gamma, beta?, bias?)     (com.microsoft)
 *       -> Y, mean, inv_std_var, sum
 *       sum = X + skip (+ bias);  Y = LayerNormalization(sum, gamma, beta)
 *       over the last axis
 *   FastGelu(X, bias?) -> Y                                  (com.microsoft)
 *       Y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), x = X (+ bias)
 *
 * The RMS norms expand into the Pow/ReduceMean/Add/Sqrt/Div/Mul chain torch
 * writes for LLaMA's RMSNorm (rmsnorm-fusion's canonical form), the layer
 * norm into ONNX's LayerNormalization (layernorm-fusion keeps it), FastGelu
 * into the polynomial transformers' gelu_new spells (activation-fusion's),
 * and the residual sum into an Add, which the next layer reads from output
 * 3.  The mean and inverse deviation outputs are training-time extras:
 * refused if read.  stash_type only says the statistics are float32, which
 * they are in llmc (16-bit graphs are widened at import). */
#include "contrib_expand.h"

#define DEFAULT_EPSILON 1e-5f

/* Y = x / sqrt(mean(x^2, -1) + eps) * scale, written into value y. */
static int rms_norm(llmc_expand *e, int x, int scale, int y)
{
    float eps = llmc_node_attr_float(e->g, e->node, "epsilon", DEFAULT_EPSILON);
    int dtype = e->g->values[x].dtype;
    int two = ex_const_float(e, 2.0f), epsilon = ex_const_float(e, eps);
    if (two < 0 || epsilon < 0)
        return e->err->code;
    int pow_in[2] = {x, two};
    int sq = ex_node1(e, "Pow", pow_in, 2, dtype);
    int mean, reduce = sq < 0 ? -1 : ex_node(e, "ReduceMean", &sq, 1, dtype, &mean, 1);
    int64_t last = -1;
    if (reduce < 0 || ex_set_ints(e, reduce, "axes", &last, 1) || ex_set_int(e, reduce, "keepdims", 1))
        return e->err->code;
    int var_in[2] = {mean, epsilon};
    int var = ex_node1(e, "Add", var_in, 2, dtype);
    int root = var < 0 ? -1 : ex_node1(e, "Sqrt", &var, 1, dtype);
    int div_in[2] = {x, root};
    int normed = root < 0 ? -1 : ex_node1(e, "Div", div_in, 2, dtype);
    int mul_in[2] = {normed, scale};
    return normed < 0 || ex_node_into(e, "Mul", mul_in, 2, y) < 0 ? e->err->code : LLMC_OK;
}

int expand_simplified_layer_norm(llmc_expand *e)
{
    int64_t axis = llmc_node_attr_int(e->g, e->node, "axis", -1);
    const llmc_shape *declared = &e->g->values[ex_input(e, 0)].shape;
    if (axis != -1 && !(declared->rank > 0 && axis == declared->rank - 1))
        return ex_fail(e, LLMC_E_UNSUPPORTED, "axis %lld: llmc normalizes over the last axis only",
                       (long long)axis);
    int rc = ex_refuse_read_output(e, 1, "inv_std_var");
    return rc ? rc : rms_norm(e, ex_input(e, 0), ex_input(e, 1), ex_output(e, 0));
}

/* X + skip (+ bias) of a Skip*LayerNormalization, into output 3 when the
 * graph reads it; -1 on error. */
static int skip_sum(llmc_expand *e, int bias)
{
    if (ex_refuse_read_output(e, 1, "mean") || ex_refuse_read_output(e, 2, "inv_std_var"))
        return -1;
    int x = ex_input(e, 0), skip = ex_input(e, 1), sum_out = ex_output(e, 3);
    int dtype = e->g->values[x].dtype;
    int add_in[2] = {x, skip};
    int sum = bias < 0 && sum_out >= 0 ? (ex_node_into(e, "Add", add_in, 2, sum_out) < 0 ? -1 : sum_out)
                                       : ex_node1(e, "Add", add_in, 2, dtype);
    if (sum >= 0 && bias >= 0) {
        int bias_in[2] = {sum, bias};
        sum = sum_out >= 0 ? (ex_node_into(e, "Add", bias_in, 2, sum_out) < 0 ? -1 : sum_out)
                           : ex_node1(e, "Add", bias_in, 2, dtype);
    }
    return sum;
}

int expand_skip_simplified_layer_norm(llmc_expand *e)
{
    int sum = skip_sum(e, ex_input(e, 3));
    return sum < 0 ? e->err->code : rms_norm(e, sum, ex_input(e, 2), ex_output(e, 0));
}

int expand_skip_layer_norm(llmc_expand *e)
{
    int sum = skip_sum(e, ex_input(e, 4));
    if (sum < 0)
        return e->err->code;
    int beta = ex_input(e, 3), ins[3] = {sum, ex_input(e, 2), beta};
    int norm = ex_node_into(e, "LayerNormalization", ins, beta < 0 ? 2 : 3, ex_output(e, 0));
    if (norm < 0 || ex_set_int(e, norm, "axis", -1) ||
        ex_set_float(e, norm, "epsilon", llmc_node_attr_float(e->g, e->node, "epsilon", DEFAULT_EPSILON)))
        return e->err->code;
    return LLMC_OK;
}

/* a * b of a fresh value of x's dtype (-1 when an operand is -1). */
static int mul(llmc_expand *e, int a, int b, int dtype)
{
    int ins[2] = {a, b};
    return a < 0 || b < 0 ? -1 : ex_node1(e, "Mul", ins, 2, dtype);
}

static int add(llmc_expand *e, int a, int b, int dtype)
{
    int ins[2] = {a, b};
    return a < 0 || b < 0 ? -1 : ex_node1(e, "Add", ins, 2, dtype);
}

int expand_fast_gelu(llmc_expand *e)
{
    int x = ex_input(e, 0), bias = ex_input(e, 1), dtype = e->g->values[x].dtype;
    /* one statement per node, so values are numbered in a fixed order */
    int three = ex_const_float(e, 3.0f), coef = ex_const_float(e, 0.044715f);
    int root = ex_const_float(e, 0.7978845608028654f); /* sqrt(2 / pi), as gelu_new's float */
    int one = ex_const_float(e, 1.0f), half = ex_const_float(e, 0.5f);
    if (bias >= 0)
        x = add(e, x, bias, dtype);
    int pow_in[2] = {x, three};
    int cube = x < 0 || three < 0 ? -1 : ex_node1(e, "Pow", pow_in, 2, dtype);
    int scaled = mul(e, cube, coef, dtype);
    int inner = add(e, x, scaled, dtype);
    int arg = mul(e, inner, root, dtype);
    int th = arg < 0 ? -1 : ex_node1(e, "Tanh", &arg, 1, dtype);
    int one_plus = add(e, th, one, dtype);
    int half_x = mul(e, x, half, dtype);
    int out_in[2] = {half_x, one_plus};
    return half_x < 0 || one_plus < 0 || ex_node_into(e, "Mul", out_in, 2, ex_output(e, 0)) < 0 ? e->err->code
                                                                                               : LLMC_OK;
}
