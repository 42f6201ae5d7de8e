/* activation-fusion: GELU, SiLU and SwiGLU spelled out in elementwise ops.
 *
 *   erf GELU  (nn.GELU):  0.5 * x * (1 + Erf(x / sqrt 2))            -> llmc.Gelu
 *   tanh GELU (GPT-2, F.gelu(approximate="tanh") below opset 20):
 *                         0.5 * x * (1 + Tanh(sqrt(2/pi) *
 *                                    (x + 0.044715 * x^3)))            -> llmc.Gelu{tanh=1}
 *   SiLU:                 x * Sigmoid(x)                                -> llmc.Silu
 *   SwiGLU:               Mul(llmc.Silu(gate), up)                      -> llmc.SwiGLU(gate, up)
 *   GeGLU (Gemma):        Mul(llmc.Gelu{tanh=1}(gate), up)              -> llmc.GeGLU(gate, up)
 *                         (or ONNX's own Gelu{approximate="tanh"} of opset 20 on,
 *                         as onnxruntime-genai's builder writes Gemma's gate)
 *
 * Exporters associate these products and sums in many orders (x*x*x or
 * Pow(x, 3); 0.5*(x*(1+e)), (x*0.5)*(1+e), x*((1+e)*0.5); x / sqrt 2 or
 * x * (1/sqrt 2); sqrt(2/pi)*x*(1 + 0.044715*x*x)), so GELU is matched as
 * algebra, not as a tree: the Erf/Tanh argument and the product around it
 * are read as polynomials in x and e = Erf/Tanh(...) built from Mul, Add,
 * Sub, Neg, Div by a constant and Pow by 1..3, and compared with
 *   Erf argument   (1/sqrt 2) x
 *   Tanh argument  s x + s k x^3,  s = sqrt(2/pi), k = 0.044715
 *   result         0.5 x + 0.5 x e
 * each coefficient as llmc_value_near (fusion_match.h) takes a constant:
 * the value within 1e-6 relative or its float16 rounding (a float16 export
 * widened at import), compared directly or as a reciprocal (Div by sqrt 2).
 * The result must have x's shape, and no intermediate may be read outside
 * the pattern (the Silu feeding a SwiGLU included).  Erf, Tanh and Sigmoid
 * are the anchors: a failure at one of them is what --explain reports. */
#include <math.h>
#include <string.h>

#include "fusion_match.h"
#include "ir/llmc_ops.h"
#include "pass.h"

#define PASS_NAME "activation-fusion"

/* A polynomial in x (degree <= 3) and the anchor's output e (degree <= 1):
 * c[a][b] is the coefficient of x^a e^b. */
#define POLY_X 4
#define POLY_E 2
typedef struct {
    double c[POLY_X][POLY_E];
} poly;

/* What a walk reads as variables: x and e, stripped of identity Casts
 * (e = -1 when there is none yet). */
typedef struct {
    llmc_match *m;
    int x, e;
} poly_vars;

/* Enough nodes for every spelling above: Tanh's argument is at most
 * Mul(Add(x, Mul(Mul(x, Mul(x, x)), k)), s), four deep. */
#define POLY_DEPTH 6

static bool poly_mul(const poly *a, const poly *b, poly *r)
{
    poly out = {0};
    for (int i = 0; i < POLY_X; i++)
        for (int j = 0; j < POLY_E; j++)
            for (int k = 0; a->c[i][j] != 0 && k < POLY_X; k++)
                for (int l = 0; l < POLY_E; l++) {
                    if (b->c[k][l] == 0)
                        continue;
                    if (i + k >= POLY_X || j + l >= POLY_E)
                        return false;
                    out.c[i + k][j + l] += a->c[i][j] * b->c[k][l];
                }
    *r = out;
    return true;
}

/* r = a + sign * b */
static void poly_add(const poly *a, const poly *b, double sign, poly *r)
{
    for (int i = 0; i < POLY_X; i++)
        for (int j = 0; j < POLY_E; j++)
            r->c[i][j] = a->c[i][j] + sign * b->c[i][j];
}

/* Only the coefficients in `keep` (a bit per x^a e^b, bit 2a + b) may be nonzero. */
static bool poly_only(const poly *p, unsigned keep)
{
    for (int i = 0; i < POLY_X; i++)
        for (int j = 0; j < POLY_E; j++)
            if (p->c[i][j] != 0 && !(keep & 1u << (2 * i + j)))
                return false;
    return true;
}
#define TERM(a, b) (1u << (2 * (a) + (b)))

static bool poly_of(const poly_vars *pv, int v, int depth, poly *p);

/* The polynomial node `node` computes from its operands' polynomials. */
static bool poly_of_node(const poly_vars *pv, int node, int depth, poly *p)
{
    const llmc_node *n = &pv->m->g->nodes[node];
    poly a, b;
    if (n->n_inputs < 1 || n->n_inputs > 2 || !poly_of(pv, n->inputs[0], depth - 1, &a))
        return false;
    if (n->n_inputs == 1) {
        poly_add(&(poly){0}, &a, -1, p);
        return llmc_is_onnx_op(n, "Neg");
    }
    if (!poly_of(pv, n->inputs[1], depth - 1, &b))
        return false;
    double k = b.c[0][0];
    bool constant = poly_only(&b, TERM(0, 0));
    if (llmc_is_onnx_op(n, "Add") || llmc_is_onnx_op(n, "Sub")) {
        poly_add(&a, &b, llmc_is_onnx_op(n, "Add") ? 1 : -1, p);
        return true;
    }
    if (llmc_is_onnx_op(n, "Mul"))
        return poly_mul(&a, &b, p);
    if (llmc_is_onnx_op(n, "Div"))
        return constant && k != 0 && poly_mul(&a, &(poly){.c[0][0] = 1 / k}, p);
    if (!llmc_is_onnx_op(n, "Pow") || !constant || !(k == 1 || k == 2 || k == 3))
        return false;
    *p = a;
    for (int i = 1; i < (int)k; i++)
        if (!poly_mul(p, &a, p))
            return false;
    return true;
}

/* The polynomial value v computes in pv's variables; its nodes (and the
 * identity Casts stepped over) are collected into the match. */
static bool poly_of(const poly_vars *pv, int v, int depth, poly *p)
{
    const llmc_graph *g = pv->m->g;
    int s = llmc_strip_casts(g, v);
    double k;
    *p = (poly){0};
    if (s < 0 || depth < 0 || !llmc_match_add_casts(pv->m, v))
        return false;
    if (s == pv->x || s == pv->e) {
        p->c[s == pv->x][s == pv->e] = 1;
        return true;
    }
    if (llmc_match_const_scalar(g, s, &k)) {
        p->c[0][0] = k;
        return true;
    }
    int node = g->values[s].producer;
    return node >= 0 && g->nodes[node].n_outputs == 1 && llmc_match_add(pv->m, node) &&
           poly_of_node(pv, node, depth, p);
}

/* A coefficient that stands for the constant `want`: it or its reciprocal
 * (a Div by the constant) within llmc_value_near of want or 1/want. */
static bool coef_is(double got, double want)
{
    return llmc_value_near(got, want) || (got != 0 && llmc_value_near(1 / got, 1 / want));
}

/* A GELU argument's coefficient as gelu_argument_is takes it, but equal to
 * want itself (or its reciprocal), not only to its float16 rounding. */
static bool coef_exact(double got, double want)
{
    return llmc_value_exact(got, want) || (got != 0 && llmc_value_exact(1 / got, 1 / want));
}

/* Is the anchor's argument, read as a polynomial in x, the one GELU's
 * erf form (tanh_form 0) or tanh form takes? */
static bool gelu_argument_is(const poly *p, int tanh_form)
{
    double s = p->c[1][0];
    if (!tanh_form)
        return poly_only(p, TERM(1, 0)) && coef_is(s, sqrt(0.5));
    return poly_only(p, TERM(1, 0) | TERM(3, 0)) && coef_is(s, sqrt(2.0 / M_PI)) &&
           s != 0 && coef_is(p->c[3][0] / s, 0.044715);
}

/* The values inside the argument subtree of v that may be x: every
 * non-constant operand of its Mul/Add/Sub/Div/Pow/Neg nodes (and v itself),
 * Casts stepped over, each once, in walk order. */
#define MAX_CANDIDATES 16
static void x_candidates(const llmc_graph *g, int v, int depth, int *out, int *n)
{
    static const char *const ops[] = {"Mul", "Add", "Sub", "Div", "Pow", "Neg"};
    v = llmc_strip_casts(g, v);
    double k;
    if (v < 0 || llmc_match_const_scalar(g, v, &k))
        return;
    for (int i = 0; i < *n; i++)
        if (out[i] == v)
            return;
    if (*n == MAX_CANDIDATES)
        return;
    out[(*n)++] = v;
    int p = g->values[v].producer;
    for (int i = 0; p >= 0 && depth > 0 && i < (int)(sizeof ops / sizeof ops[0]); i++)
        for (int k = 0; llmc_is_onnx_op(&g->nodes[p], ops[i]) && k < g->nodes[p].n_inputs; k++)
            x_candidates(g, g->nodes[p].inputs[k], depth - 1, out, n);
}

/* x of GELU's anchor (Erf or Tanh), the candidate for which the argument
 * is GELU's; its nodes collected.  -1 (rejected) when none is.  *rounded:
 * the argument's constants are GELU's rounded to float16 (a float16 export),
 * which the fused op replaces by the exact ones.  (0.5, the outer
 * coefficient, is exact in float16.) */
static int gelu_x(llmc_match *m, int anchor, int tanh_form, bool *rounded)
{
    const llmc_graph *g = m->g;
    int arg = g->nodes[anchor].inputs[0], cand[MAX_CANDIDATES], n = 0, n_before = m->n_nodes;
    x_candidates(g, arg, POLY_DEPTH, cand, &n);
    for (int i = 1; i < n; i++) {   /* cand[0] is the argument itself */
        poly p;
        poly_vars pv = {m, cand[i], -1};
        if (poly_of(&pv, arg, POLY_DEPTH, &p) && gelu_argument_is(&p, tanh_form)) {
            double s = p.c[1][0];
            *rounded = !(tanh_form ? coef_exact(s, sqrt(2.0 / M_PI)) && coef_exact(p.c[3][0] / s, 0.044715)
                                   : coef_exact(s, sqrt(0.5)));
            return cand[i];
        }
        m->n_nodes = n_before;
    }
    return llmc_match_reject(m, anchor, "its input is not %s in x in any association order",
                             tanh_form ? "sqrt(2/pi) * (x + 0.044715 * x^3)" : "x / sqrt(2)"), -1;
}

/* The sole Mul/Add/Sub/Div reading v (identity Casts in between
 * collected), or -1. */
static int poly_reader(llmc_match *m, int v)
{
    static const char *const ops[] = {"Mul", "Add", "Sub", "Div"};
    int r = -1;
    for (int i = 0; r < 0 && i < (int)(sizeof ops / sizeof ops[0]); i++)
        r = llmc_match_consumer(m, v, ops[i]);
    return r;
}

/* Up to this many nodes between the anchor and the root: 0.5 * (x * (1 + e)). */
#define MAX_OUTER 4

/* The root of 0.5 * x * (1 + e) above the anchor's output e: the first
 * node up the chain of sole readers whose output is that polynomial; -1
 * with the reason recorded. */
static int gelu_root(llmc_match *m, int anchor, int x)
{
    const llmc_graph *g = m->g;
    poly_vars pv = {m, llmc_strip_casts(g, x), g->nodes[anchor].outputs[0]};
    int v = pv.e;
    for (int step = 0, node; step < MAX_OUTER && (node = poly_reader(m, v)) >= 0; step++) {
        int n_before = m->n_nodes;
        poly p;
        v = g->nodes[node].outputs[0];
        if (poly_of(&pv, v, POLY_DEPTH, &p) && poly_only(&p, TERM(1, 0) | TERM(1, 1)) && coef_is(p.c[1][0], 0.5) &&
            coef_is(p.c[1][1], 0.5))
            return node;
        m->n_nodes = n_before;
    }
    return llmc_match_reject(m, anchor, "its output is not read by one chain computing 0.5 * x * (1 + %s)",
                             g->nodes[anchor].op_type), -1;
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

/* GELU from its Erf or Tanh node. */
static int fuse_gelu(llmc_graph *g, const llmc_pass_ctx *ctx, int anchor, int tanh_form)
{
    llmc_match m;
    llmc_match_init(&m, g, ctx, PASS_NAME);
    llmc_match_add(&m, anchor);
    bool rounded = false;
    int x = gelu_x(&m, anchor, tanh_form, &rounded);
    int root = x >= 0 ? gelu_root(&m, anchor, x) : -1;
    if (root >= 0 && !llmc_shape_eq(&g->values[g->nodes[root].outputs[0]].shape, &g->values[x].shape)) {
        llmc_match_reject(&m, root, "the result is broadcast to another shape than x's");
        root = -1;
    }
    int rc = replace_unary(&m, root, "Gelu", x, tanh_form);
    if (rc == 1 && rounded && ctx->explain && ctx->log) {
        const llmc_node *a = &g->nodes[anchor];
        fprintf(ctx->log, "%s: node '%s' (#%d, %s) fused: GELU's constants were rounded to float16; the fused Gelu "
                "computes with the exact ones (a rounding change)\n", PASS_NAME, a->name, anchor, a->op_type);
    }
    return rc;
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

/* Mul(act(gate), up) -> op_type(gate, up), act the fused activation node */
static int fuse_gated(llmc_graph *g, const llmc_pass_ctx *ctx, int act, const char *op_type)
{
    llmc_match m;
    llmc_match_init(&m, g, ctx, PASS_NAME);
    llmc_match_add(&m, act);
    int s = g->nodes[act].outputs[0];
    int mul = llmc_match_consumer(&m, s, "Mul");
    int up = mul >= 0 ? llmc_other_input(g, mul, s) : -1;
    if (up < 0 || g->values[up].dtype != LLMC_DT_FLOAT) {
        llmc_match_reject(&m, act, "its output is not read by exactly one Mul(%s(gate), up)", g->nodes[act].op_type);
        llmc_match_explain(&m);
        return 0;
    }
    int inputs[2] = {g->nodes[act].inputs[0], up};
    return llmc_match_replace(&m, mul, op_type, false, inputs, 2) < 0 ? -1 : 1;
}

static int visit_erf(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    return llmc_is_onnx_op(&g->nodes[node], "Erf") ? fuse_gelu(g, ctx, node, 0) : 0;
}

static int visit_tanh(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    return llmc_is_onnx_op(&g->nodes[node], "Tanh") ? fuse_gelu(g, ctx, node, 1) : 0;
}

static int visit_sigmoid(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    return llmc_is_onnx_op(&g->nodes[node], "Sigmoid") ? fuse_silu(g, ctx, node) : 0;
}

static int visit_silu(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    return llmc_is_op(&g->nodes[node], "Silu") ? fuse_gated(g, ctx, node, "SwiGLU") : 0;
}

/* The tanh GELU as one node: llmc.Gelu{tanh=1} (the walks above), or ONNX's
 * Gelu{approximate="tanh"} (opset 20 on; below it the node is left for
 * codegen to refuse). */
static bool is_tanh_gelu(const llmc_graph *g, int node)
{
    const llmc_node *n = &g->nodes[node];
    if (llmc_is_op(n, "Gelu"))
        return llmc_node_attr_int(g, node, "tanh", 0) == 1;
    if (!llmc_is_onnx_op(n, "Gelu") || n->opset < 20)
        return false;
    const llmc_attr *a = llmc_node_attr(g, node, "approximate");
    return a && a->type == LLMC_ATTR_STRING && a->s && strcmp(a->s, "tanh") == 0;
}

/* GeGLU gates with the tanh form only (Gemma's gelu_pytorch_tanh); the
 * erf form's Gelu stays an op of its own, and so does a tanh Gelu that no
 * Mul reads (GPT-2's, read by a MatMul: not a gate, nothing to explain) */
static int visit_gelu_tanh(llmc_graph *g, const llmc_pass_ctx *ctx, int node)
{
    bool tanh_gelu = is_tanh_gelu(g, node);
    int reader = tanh_gelu ? llmc_match_sole_reader(g, g->nodes[node].outputs[0]) : -1;
    return reader >= 0 && llmc_is_onnx_op(&g->nodes[reader], "Mul") ? fuse_gated(g, ctx, node, "GeGLU") : 0;
}

static int run_activation_fusion(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    /* SwiGLU and GeGLU last: they are built from the Silu and Gelu nodes the walks before make */
    static const llmc_fusion_visit walks[] = {visit_erf, visit_tanh, visit_sigmoid, visit_silu, visit_gelu_tanh};
    int n[5];
    int rc = llmc_fusion_walks(g, ctx, PASS_NAME, walks, 5, n, err);
    if (rc == LLMC_OK && n[4] == 0)
        llmc_pass_detail(ctx, "%d gelu (%d tanh form), %d silu (%d into swiglu)", n[0] + n[1], n[1], n[2], n[3]);
    else if (rc == LLMC_OK)
        llmc_pass_detail(ctx, "%d gelu (%d tanh form, %d into geglu), %d silu (%d into swiglu)", n[0] + n[1], n[1],
                         n[4], n[2], n[3]);
    return rc;
}

const llmc_pass llmc_pass_activation_fusion = {PASS_NAME, run_activation_fusion};
