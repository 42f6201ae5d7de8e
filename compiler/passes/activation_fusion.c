/* activation-fusion: GELU, SiLU and SwiGLU spelled out in elementwise ops.
 *
 *   erf GELU  (nn.GELU):  x * 0.5 * (1 + Erf(x / 1.4142135))   -> llmc.Gelu
 *   tanh GELU (GPT-2):    0.5 * x * (1 + Tanh(0.7978846 *
 *                         (x + 0.044715 * Pow(x, 3))))          -> llmc.Gelu{tanh=1}
 *   SiLU:                 x * Sigmoid(x)                        -> llmc.Silu
 *   SwiGLU:               Mul(llmc.Silu(gate), up)              -> llmc.SwiGLU(gate, up)
 *
 * The erf argument may be Div(x, sqrt 2) or Mul(x, 1/sqrt 2); the final
 * product may group as (x * (1 + e)) * 0.5, x * ((1 + e) * 0.5) or
 * (x * 0.5) * (1 + e), every Add and Mul in either operand order.  The exponent must
 * be exactly 3 and every other constant (0.5, 1, sqrt 2, 0.044715,
 * sqrt(2/pi)) within 1e-6 relative of its value, the result must have x's shape, and no
 * intermediate may be read outside the pattern (the Silu feeding a SwiGLU
 * included).  Erf, Tanh and Sigmoid are the anchors: a failure at one of
 * them is what --explain reports. */
#include <math.h>

#include "fusion_match.h"
#include "ir/llmc_ops.h"
#include "pass.h"

#define PASS_NAME "activation-fusion"

/* Mul(a, b) with one operand a constant near `want`: the other, else -1. */
static int times_const(const llmc_graph *g, int mul, double want)
{
    const llmc_node *n = &g->nodes[mul];
    for (int k = 0; k < 2 && n->n_inputs == 2; k++)
        if (llmc_const_near(g, n->inputs[k], want))
            return n->inputs[1 - k];
    return -1;
}

/* 0.5 * x * (1 + act) after the Erf/Tanh output `act`: the root node, or
 * -1 with the reason recorded. */
static int match_half_x_one_plus(llmc_match *m, int act_node, int x)
{
    const llmc_graph *g = m->g;
    int act = g->nodes[act_node].outputs[0];
    int one_plus = llmc_match_consumer(m, act, "Add");
    if (one_plus < 0 || !llmc_const_near(g, llmc_other_input(g, one_plus, act), 1.0))
        return llmc_match_reject(m, act_node, "not read by exactly one Add(., 1)"), -1;
    int sum = g->nodes[one_plus].outputs[0];
    int mul = llmc_match_consumer(m, sum, "Mul");
    int other = mul >= 0 ? llmc_other_input(g, mul, sum) : -1;
    if (other < 0)
        return llmc_match_reject(m, one_plus, "not read by exactly one Mul"), -1;
    int root = -1;
    if (llmc_const_near(g, other, 0.5)) {                      /* x * ((1 + e) * 0.5) */
        root = llmc_match_consumer(m, g->nodes[mul].outputs[0], "Mul");
        if (root >= 0 && llmc_strip_casts(g, llmc_other_input(g, root, g->nodes[mul].outputs[0])) !=
                             llmc_strip_casts(g, x))
            root = -1;
    } else if (llmc_strip_casts(g, other) == llmc_strip_casts(g, x)) {   /* (x * (1 + e)) * 0.5 */
        root = llmc_match_consumer(m, g->nodes[mul].outputs[0], "Mul");
        if (root >= 0 && !llmc_const_near(g, llmc_other_input(g, root, g->nodes[mul].outputs[0]), 0.5))
            root = -1;
    } else {                                                     /* (x * 0.5) * (1 + e) */
        int half = llmc_fusion_producer(m, other, "Mul");
        root = half >= 0 && llmc_strip_casts(g, times_const(g, half, 0.5)) == llmc_strip_casts(g, x) ? mul : -1;
    }
    if (root < 0)
        return llmc_match_reject(m, mul, "(1 + %s) is not multiplied by 0.5 * x", g->nodes[act_node].op_type), -1;
    if (!llmc_shape_eq(&g->values[g->nodes[root].outputs[0]].shape, &g->values[x].shape))
        return llmc_match_reject(m, root, "the result is broadcast to another shape than x's"), -1;
    return root;
}

/* Replaces the closed match rooted at `root` by llmc.op_type(x); 1 fused,
 * 0 not (explained), -1 OOM. */
static int replace_unary(llmc_match *m, int root, const char *op_type, int x, int tanh_form)
{
    if (root < 0 || !llmc_match_is_closed(m, root)) {
        llmc_match_explain(m);
        return 0;
    }
    int id = llmc_match_replace(m, root, op_type, false, &x, 1);
    if (id < 0 || (tanh_form && llmc_node_set_int(m->g, id, "tanh", 1)))
        return -1;
    return 1;
}

/* Erf(x / sqrt 2) or Erf(x * (1 / sqrt 2)) -> x, else -1. */
static int erf_argument(llmc_match *m, int erf)
{
    const llmc_graph *g = m->g;
    int arg = g->nodes[erf].inputs[0];
    int div = llmc_fusion_producer(m, arg, "Div");
    if (div >= 0 && llmc_const_near(g, g->nodes[div].inputs[1], sqrt(2.0)))
        return g->nodes[div].inputs[0];
    int mul = div < 0 ? llmc_fusion_producer(m, arg, "Mul") : -1;
    int x = mul >= 0 ? times_const(g, mul, sqrt(0.5)) : -1;
    if (x < 0)
        llmc_match_reject(m, erf, "its input is not x / sqrt(2) or x * (1 / sqrt(2))");
    return x;
}

/* Tanh(sqrt(2/pi) * (x + 0.044715 * Pow(x, 3))) -> x, else -1. */
static int tanh_argument(llmc_match *m, int tanh_node)
{
    const llmc_graph *g = m->g;
    int scaled = llmc_fusion_producer(m, g->nodes[tanh_node].inputs[0], "Mul");
    int inner = scaled >= 0 ? times_const(g, scaled, sqrt(2.0 / M_PI)) : -1;
    int add = inner >= 0 ? llmc_fusion_producer(m, inner, "Add") : -1;
    if (add < 0)
        return llmc_match_reject(m, tanh_node, "its input is not sqrt(2/pi) * Add(x, c * x^3)"), -1;
    for (int k = 0; k < 2; k++) {
        int x = g->nodes[add].inputs[1 - k], n_before = m->n_nodes;
        int cubic = llmc_fusion_producer(m, g->nodes[add].inputs[k], "Mul");
        int cube = cubic >= 0 ? times_const(g, cubic, 0.044715) : -1;
        int pow = cube >= 0 ? llmc_fusion_producer(m, cube, "Pow") : -1;
        double exponent;
        if (pow >= 0 && llmc_match_const_scalar(g, g->nodes[pow].inputs[1], &exponent) && exponent == 3.0 &&
            llmc_strip_casts(g, g->nodes[pow].inputs[0]) == llmc_strip_casts(g, x))
            return x;
        m->n_nodes = n_before;
    }
    return llmc_match_reject(m, add, "not x + 0.044715 * Pow(x, 3)"), -1;
}

/* GELU from its Erf or Tanh node: `argument` finds x inside it. */
static int fuse_gelu(llmc_graph *g, const llmc_pass_ctx *ctx, int anchor, int (*argument)(llmc_match *, int),
                     int tanh_form)
{
    llmc_match m;
    llmc_match_init(&m, g, ctx, PASS_NAME);
    llmc_match_add(&m, anchor);
    int x = argument(&m, anchor);
    int root = x >= 0 ? match_half_x_one_plus(&m, anchor, x) : -1;
    return replace_unary(&m, root, "Gelu", x, tanh_form);
}

static int fuse_silu(llmc_graph *g, const llmc_pass_ctx *ctx, int sigmoid)
{
    llmc_match m;
    llmc_match_init(&m, g, ctx, PASS_NAME);
    llmc_match_add(&m, sigmoid);
    int x = g->nodes[sigmoid].inputs[0], s = g->nodes[sigmoid].outputs[0];
    int root = llmc_match_consumer(&m, s, "Mul");
    bool ok = root >= 0 && llmc_strip_casts(g, llmc_other_input(g, root, s)) == llmc_strip_casts(g, x);
    if (!ok)
        llmc_match_reject(&m, sigmoid, "not read by exactly one Mul(x, Sigmoid(x))");
    else if (!llmc_shape_eq(&g->values[g->nodes[root].outputs[0]].shape, &g->values[x].shape))
        ok = llmc_match_reject(&m, root, "the result is broadcast to another shape than x's");
    return replace_unary(&m, ok ? root : -1, "Silu", x, 0);
}

static int fuse_swiglu(llmc_graph *g, const llmc_pass_ctx *ctx, int silu)
{
    llmc_match m;
    llmc_match_init(&m, g, ctx, PASS_NAME);
    llmc_match_add(&m, silu);
    int s = g->nodes[silu].outputs[0];
    int mul = llmc_match_consumer(&m, s, "Mul");
    int up = mul >= 0 ? llmc_other_input(g, mul, s) : -1;
    if (up < 0 || g->values[up].dtype != LLMC_DT_FLOAT) {
        llmc_match_reject(&m, silu, "its output is not read by exactly one Mul(silu(gate), up)");
        llmc_match_explain(&m);
        return 0;
    }
    int inputs[2] = {g->nodes[silu].inputs[0], up};
    return llmc_match_replace(&m, mul, "SwiGLU", false, inputs, 2) < 0 ? -1 : 1;
}

static int visit_erf(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    return llmc_is_onnx_op(&g->nodes[node], "Erf") ? fuse_gelu(g, ctx, node, erf_argument, 0) : 0;
}

static int visit_tanh(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    return llmc_is_onnx_op(&g->nodes[node], "Tanh") ? fuse_gelu(g, ctx, node, tanh_argument, 1) : 0;
}

static int visit_sigmoid(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    return llmc_is_onnx_op(&g->nodes[node], "Sigmoid") ? fuse_silu(g, ctx, node) : 0;
}

static int visit_silu(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    return llmc_is_op(&g->nodes[node], "Silu") ? fuse_swiglu(g, ctx, node) : 0;
}

static int run_activation_fusion(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    /* SwiGLU last: it is built from the Silu nodes the walk before makes */
    static const llmc_fusion_visit walks[] = {visit_erf, visit_tanh, visit_sigmoid, visit_silu};
    int n[4];
    int rc = llmc_fusion_walks(g, ctx, PASS_NAME, walks, 4, n, err);
    if (rc == LLMC_OK)
        llmc_pass_detail(ctx, "%d gelu (%d tanh form), %d silu (%d into swiglu)", n[0] + n[1], n[1], n[2], n[3]);
    return rc;
}

const llmc_pass llmc_pass_activation_fusion = {PASS_NAME, run_activation_fusion};
