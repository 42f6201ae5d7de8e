/* The variance / division / scale chain LayerNorm and RMSNorm share
 * (norm_match.h). */
#include "norm_match.h"

#include <math.h>

#include "shape_inference.h"

bool llmc_reduces_last_axis(llmc_match *m, int node)
{
    const llmc_graph *g = m->g;
    const llmc_node *n = &g->nodes[node];
    int rank = g->values[n->inputs[0]].shape.rank;
    const llmc_attr *attr = llmc_node_attr(g, node, "axes");
    llmc_affine axes[LLMC_MAX_RANK];
    int n_axes = -1;
    if (attr && attr->type == LLMC_ATTR_INTS && attr->n_ints == 1) {
        axes[0] = llmc_aff_const(attr->ints[0]);
        n_axes = 1;
    } else if (!attr && n->n_inputs > 1 && n->inputs[1] >= 0 && g->values[n->inputs[1]].is_const)
        n_axes = llmc_value_ints(g, n->inputs[1], axes, LLMC_MAX_RANK);   /* opset 18: axes input */
    if (n_axes != 1 || !llmc_aff_is_const(axes[0]) || (axes[0].c != -1 && axes[0].c != rank - 1))
        return llmc_match_reject(m, node, "the mean is not over the last axis only");
    if (llmc_node_attr_int(g, node, "keepdims", 1) != 1)
        return llmc_match_reject(m, node, "keepdims is 0");
    return true;
}

/* Add(mean, eps) -> the ReduceMean node and epsilon. */
static int match_mean_plus_eps(llmc_match *m, int add, float *epsilon)
{
    const llmc_node *n = &m->g->nodes[add];
    for (int k = 0; k < 2 && n->n_inputs == 2; k++) {
        int mean = llmc_fusion_producer(m, n->inputs[k], "ReduceMean");
        double eps;
        if (mean < 0)
            continue;
        if (!llmc_match_const_scalar(m->g, n->inputs[1 - k], &eps) || !(eps >= 0) || !isfinite(eps))
            return llmc_match_reject(m, add, "epsilon is not a scalar constant >= 0"), -1;
        *epsilon = (float)eps;
        return mean;
    }
    return llmc_match_reject(m, add, "not Add(ReduceMean(...), epsilon)"), -1;
}

/* ReduceMean(Pow(d, 2) or Mul(d, d)) -> d. */
static int match_square(llmc_match *m, int mean)
{
    const llmc_graph *g = m->g;
    int sq = g->nodes[mean].inputs[0];
    int pow = llmc_fusion_producer(m, sq, "Pow");
    double exponent;
    if (pow >= 0) {
        if (!llmc_match_const_scalar(g, g->nodes[pow].inputs[1], &exponent) || exponent != 2.0)
            return llmc_match_reject(m, pow, "the exponent is not the constant 2"), -1;
        return g->nodes[pow].inputs[0];
    }
    int mul = llmc_fusion_producer(m, sq, "Mul");
    if (mul >= 0 && llmc_strip_casts(g, g->nodes[mul].inputs[0]) == llmc_strip_casts(g, g->nodes[mul].inputs[1]))
        return g->nodes[mul].inputs[0];
    return llmc_match_reject(m, mean, "the mean is not of a square Pow(d, 2) or Mul(d, d)"), -1;
}

/* The node computing num / sqrt: Div(num, sqrt), or Mul(num, inv) with inv
 * Reciprocal(sqrt) or Div(1, sqrt).  Returns its output, *numerator = num. */
static int match_division(llmc_match *m, int sqrt_node, int *numerator)
{
    const llmc_graph *g = m->g;
    int root = g->nodes[sqrt_node].outputs[0];
    int inv = llmc_match_consumer(m, root, "Reciprocal");
    int div = inv < 0 ? llmc_match_consumer(m, root, "Div") : -1;
    if (inv < 0 && div < 0)
        return llmc_match_reject(m, sqrt_node, "it is not read by exactly one Div or Reciprocal"), -1;
    if (div >= 0 && llmc_strip_casts(g, g->nodes[div].inputs[1]) != llmc_strip_casts(g, root))
        return llmc_match_reject(m, div, "the square root is the numerator"), -1;
    if (div >= 0 && !llmc_const_near(g, g->nodes[div].inputs[0], 1.0)) {
        *numerator = g->nodes[div].inputs[0];
        return g->nodes[div].outputs[0];
    }
    inv = inv >= 0 ? inv : div;
    int mul = llmc_match_consumer(m, g->nodes[inv].outputs[0], "Mul");
    if (mul < 0)
        return llmc_match_reject(m, inv, "the reciprocal square root is not read by one Mul"), -1;
    *numerator = llmc_other_input(g, mul, g->nodes[inv].outputs[0]);
    return g->nodes[mul].outputs[0];
}

/* Mul(normalized, scale) with scale a float constant [D]. */
static int match_scale(llmc_match *m, int normalized, llmc_affine dim, int *scale)
{
    const llmc_graph *g = m->g;
    int mul = llmc_match_consumer(m, normalized, "Mul");
    if (mul < 0)
        return llmc_match_reject(m, g->values[normalized].producer, "not read by one Mul by a scale"), -1;
    *scale = llmc_other_input(g, mul, normalized);
    if (!llmc_const_vector(g, *scale, dim))
        return llmc_match_reject(m, mul, "the scale is not a float constant of shape [D], D the last dim"), -1;
    return mul;
}

bool llmc_is_centered(const llmc_graph *g, int v)
{
    int sub = g->values[llmc_strip_casts(g, v)].producer;
    if (sub < 0 || !llmc_is_onnx_op(&g->nodes[sub], "Sub"))
        return false;
    int mean = g->values[llmc_strip_casts(g, g->nodes[sub].inputs[1])].producer;
    return mean >= 0 && llmc_is_onnx_op(&g->nodes[mean], "ReduceMean");
}

bool llmc_match_norm(llmc_match *m, int sqrt_node, llmc_norm_parts *parts)
{
    const llmc_graph *g = m->g;
    parts->squared = -1;
    llmc_match_add(m, sqrt_node);
    int add = llmc_fusion_producer(m, g->nodes[sqrt_node].inputs[0], "Add");
    if (add < 0)
        return llmc_match_reject(m, sqrt_node, "its input is not Add(mean, epsilon)");
    int mean = match_mean_plus_eps(m, add, &parts->epsilon);
    if (mean < 0 || !llmc_reduces_last_axis(m, mean) || (parts->squared = match_square(m, mean)) < 0)
        return false;
    const llmc_shape *shape = &g->values[parts->squared].shape;
    if (g->values[parts->squared].dtype != LLMC_DT_FLOAT || shape->rank < 1 ||
        !llmc_aff_is_const(shape->dims[shape->rank - 1]))
        return llmc_match_reject(m, mean, "the normalized value is not float with a constant last dim");
    int normalized = match_division(m, sqrt_node, &parts->numerator);
    if (normalized < 0 || parts->numerator < 0 ||
        (parts->root = match_scale(m, normalized, shape->dims[shape->rank - 1], &parts->scale)) < 0)
        return llmc_match_reject(m, sqrt_node, "the division by the square root does not match");
    if (!llmc_shape_eq(&g->values[g->nodes[parts->root].outputs[0]].shape, shape))
        return llmc_match_reject(m, parts->root, "the result is broadcast to another shape than the input's");
    return true;
}
