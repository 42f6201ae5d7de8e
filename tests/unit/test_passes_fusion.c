/* layernorm-, rmsnorm-, activation- and linear-fusion on hand-built graphs.
 *
 * Each pattern is checked twice: the ORIGINAL graph is run on the runtime
 * (llmc_evaluate_graph) and compared with a plain C implementation of the
 * fused op's formula from compiler/ir/llmc_ops.h, which shows the subgraph
 * really computes that op; then the pass runs and the fused node's op,
 * inputs, attributes and outputs are checked exactly.  Near misses (a wrong
 * constant, axis or shape, an intermediate read elsewhere) must stay
 * unfused and be explained under --explain. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/const_view.h"
#include "graph_util.h"
#include "ir/llmc_ops.h"
#include "codegen/evaluate.h"
#include "passes/pipeline.h"
#include "tap.h"

#define D 8          /* hidden size of the test graphs */
#define S_RUN 3      /* tokens per evaluation: x is [1, S, D] at S = 3 */
#define ROWS S_RUN
#define MAX_OUTPUTS 4

/* ---- building and running ---- */

static void new_graph(llmc_graph *g)
{
    llmc_graph_init(g);
    g->opset = 17;
}

static int fconst(llmc_graph *g, const char *name, float x)
{
    return g_const(g, name, LLMC_DT_FLOAT, SCALAR, &x);
}

static int fvector(llmc_graph *g, const char *name, int n, const float *data)
{
    return g_const(g, name, LLMC_DT_FLOAT, SHAPE(K(n)), data);
}

static int x_input(llmc_graph *g, const char *name, int width)
{
    return g_input(g, name, LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(width)));
}

/* Deterministic values in [-2, 2). */
static void fill(float *a, int n, uint32_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        a[i] = (float)(seed >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
    }
}

static int infer(llmc_graph *g)
{
    llmc_error err = {0};
    llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = 64};
    return llmc_pass_shape_inference.run(g, &ctx, &err);
}

/* Runs g at S = S_RUN with float inputs; output k is copied to outs[k]. */
static int evaluate(llmc_graph *g, float *const *inputs, float **outs)
{
    llmc_rt_tensor in[MAX_OUTPUTS];
    llmc_eval_tensor out[MAX_OUTPUTS];
    llmc_error err = {0};
    for (int k = 0; k < g->n_inputs; k++) {
        const llmc_shape *s = &g->values[g->inputs[k]].shape;
        in[k] = (llmc_rt_tensor){.dtype = LLMC_RT_F32, .rank = s->rank, .data = inputs[k]};
        for (int i = 0; i < s->rank; i++)
            in[k].dims[i] = s->dims[i].c + s->dims[i].s * S_RUN;
    }
    int rc = llmc_evaluate_graph(g, S_RUN, 0, 64, in, out, &err);
    if (rc)
        printf("# evaluate: %s\n", err.msg);
    for (int k = 0; !rc && k < g->n_outputs; k++) {
        memcpy(outs[k], out[k].data, out[k].nbytes);
        llmc_eval_tensor_free(&out[k]);
    }
    return rc;
}

/* |got - want| <= 1e-5 (1 + |want|) everywhere: float32 kernels against
 * a double-precision reference. */
static bool close_to(const float *got, const double *want, int n)
{
    for (int i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= 1e-5 * (1.0 + fabs(want[i])))) {
            printf("# element %d: got %.9g, want %.9g\n", i, got[i], want[i]);
            return false;
        }
    return true;
}

typedef struct {
    char detail[128];
    char *log;
    size_t log_size;
} pass_run;

/* Runs `pass` with --explain into r->log; the LLMC_* code. */
static int run_pass(const llmc_pass *pass, llmc_graph *g, pass_run *r)
{
    llmc_error err = {0};
    FILE *log = open_memstream(&r->log, &r->log_size);
    llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = 64, .explain = true, .log = log, .detail = r->detail,
                         .detail_size = sizeof r->detail};
    int rc = pass->run(g, &ctx, &err);
    fclose(log);
    if (rc)
        printf("# %s: %s\n", pass->name, err.msg);
    return rc;
}

static void pass_run_free(pass_run *r)
{
    free(r->log);
    r->log = NULL;
}

/* The only live node, or -1. */
static int only_node(const llmc_graph *g)
{
    int found = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead)
            continue;
        if (found >= 0)
            return -1;
        found = i;
    }
    return found;
}

/* Live node producing v is llmc.op with these inputs (-2 = any). */
static bool is_fused(const llmc_graph *g, int v, const char *op, int n_inputs, const int *inputs)
{
    int p = g->values[v].producer;
    if (p < 0 || g->nodes[p].dead || !llmc_is_op(&g->nodes[p], op) || g->nodes[p].n_inputs != n_inputs)
        return false;
    for (int k = 0; k < n_inputs; k++)
        if (inputs[k] != -2 && g->nodes[p].inputs[k] != inputs[k])
            return false;
    return true;
}
#define IS_FUSED(g, v, op, ...)                                                                    \
    is_fused((g), (v), (op), (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__})

/* Runs shape inference and `pass` on g, expects no `op` node afterwards
 * and an explanation containing `why`; frees g. */
static void expect_unfused(llmc_graph *g, const llmc_pass *pass, const char *op, const char *why, const char *what)
{
    pass_run r = {0};
    CHECK(infer(g) == LLMC_OK && run_pass(pass, g, &r) == LLMC_OK && count_op(g, op) == 0 && r.log &&
              strstr(r.log, why),
          "%s: no %s, explained: %s", what, op, r.log ? r.log : "(nothing)");
    pass_run_free(&r);
    llmc_graph_free(g);
}

/* ---- references: the formulas of compiler/ir/llmc_ops.h ---- */

static void rmsnorm_ref(const float *x, const float *scale, float eps, double *y)
{
    for (int r = 0; r < ROWS; r++) {
        double ss = 0;
        for (int i = 0; i < D; i++)
            ss += (double)x[r * D + i] * x[r * D + i];
        double inv = 1.0 / sqrt(ss / D + eps);
        for (int i = 0; i < D; i++)
            y[r * D + i] = x[r * D + i] * inv * scale[i];
    }
}

/* ONNX LayerNormalization over the last axis; bias may be NULL. */
static void layernorm_ref(const float *x, const float *scale, const float *bias, float eps, double *y)
{
    for (int r = 0; r < ROWS; r++) {
        double mean = 0, var = 0;
        for (int i = 0; i < D; i++)
            mean += x[r * D + i] / (double)D;
        for (int i = 0; i < D; i++)
            var += (x[r * D + i] - mean) * (x[r * D + i] - mean) / D;
        for (int i = 0; i < D; i++)
            y[r * D + i] = (x[r * D + i] - mean) / sqrt(var + eps) * scale[i] + (bias ? bias[i] : 0.0);
    }
}

static double silu_ref(double x)
{
    return x / (1 + exp(-x));
}

/* z = x W + bias + residual, x [ROWS, k], W [k, n]; bias, residual may be NULL. */
static void linear_ref(const float *x, const float *w, const float *bias, const float *residual, int k, int n,
                       double *z)
{
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < n; j++) {
            double acc = (bias ? bias[j] : 0.0) + (residual ? residual[r * n + j] : 0.0);
            for (int i = 0; i < k; i++)
                acc += (double)x[r * k + i] * w[i * n + j];
            z[r * n + j] = acc;
        }
}

/* ---- rmsnorm-fusion ---- */

typedef enum { RMS_TORCH, RMS_VARIANTS, RMS_DIV } rms_form;

/* x / sqrt(mean(x^2) + eps) * scale in one of three spellings:
 *  RMS_TORCH:    Pow(x, 2), Add(mean, eps), Div(1, sqrt), Mul(x, inv), Mul(n, scale)
 *  RMS_VARIANTS: Mul(x, x), Add(eps, mean), Reciprocal, Mul(inv, x), identity
 *                Cast before the scale, Mul(scale, n)
 *  RMS_DIV:      Pow(x, 2), Div(x, sqrt). */
static int build_rmsnorm(llmc_graph *g, rms_form form, const float *scale, float eps, int *x, int *sc)
{
    *x = x_input(g, "x", D);
    *sc = fvector(g, "scale", D, scale);
    int sq = form == RMS_VARIANTS ? OP(g, "Mul", "sq", *x, *x) : OP(g, "Pow", "sq", *x, fconst(g, "two", 2.0f));
    int mean_node = g_node(g, "ReduceMean", "mean", NULL, 1, sq);
    ATTR_INTS(g, mean_node, "axes", -1);
    int mean = op_value(g, mean_node), e = fconst(g, "eps", eps);
    int root = OP(g, "Sqrt", "root", form == RMS_VARIANTS ? OP(g, "Add", "var", e, mean) : OP(g, "Add", "var", mean, e));
    int normed;
    if (form == RMS_DIV) {
        normed = OP(g, "Div", "normed", *x, root);
    } else if (form == RMS_VARIANTS) {
        normed = OP(g, "Mul", "normed", OP(g, "Reciprocal", "inv", root), *x);
        int cast = g_node(g, "Cast", "cast", NULL, 1, normed);
        attr_int(g, cast, "to", LLMC_DT_FLOAT);
        normed = op_value(g, cast);
    } else {
        normed = OP(g, "Mul", "normed", *x, OP(g, "Div", "inv", fconst(g, "one", 1.0f), root));
    }
    int y = form == RMS_VARIANTS ? OP(g, "Mul", "y", *sc, normed) : OP(g, "Mul", "y", normed, *sc);
    return y;
}

static void test_rmsnorm_forms(void)
{
    static const char *names[] = {"torch rsqrt form", "Mul(x,x)/Reciprocal/Cast/swapped operands", "Div(x, sqrt)"};
    float x[ROWS * D], scale[D], got[ROWS * D];
    double want[ROWS * D];
    fill(x, ROWS * D, 1);
    fill(scale, D, 2);
    for (int form = RMS_TORCH; form <= RMS_DIV; form++) {
        llmc_graph g;
        pass_run r = {0};
        int xv, sv;
        new_graph(&g);
        int y = build_rmsnorm(&g, (rms_form)form, scale, 1e-6f, &xv, &sv);
        g_output(&g, y);
        CHECK(infer(&g) == LLMC_OK, "%s: shapes infer", names[form]);
        rmsnorm_ref(x, scale, 1e-6f, want);
        CHECK(evaluate(&g, (float *[]){x}, (float *[]){got}) == LLMC_OK && close_to(got, want, ROWS * D),
              "%s: the original graph computes x / sqrt(mean(x^2) + eps) * scale", names[form]);
        CHECK(run_pass(&llmc_pass_rmsnorm_fusion, &g, &r) == LLMC_OK && strcmp(r.detail, "1 fused") == 0,
              "%s: rmsnorm-fusion reports '%s'", names[form], r.detail);
        int node = only_node(&g);
        CHECK(node >= 0 && IS_FUSED(&g, y, "RMSNorm", xv, sv) &&
                  llmc_node_attr_float(&g, node, "epsilon", 0) == 1e-6f && g.nodes[node].outputs[0] == y,
              "%s: one llmc.RMSNorm(x, scale){epsilon=1e-6} writing y", names[form]);
        pass_run_free(&r);
        llmc_graph_free(&g);
    }
}

/* Builds the torch form, breaks it with `spoil`, and expects no fusion and
 * an explanation containing `why`. */
static void expect_rmsnorm_rejected(const char *what, void (*spoil)(llmc_graph *g), const char *why)
{
    float scale[D];
    fill(scale, D, 2);
    llmc_graph g;
    pass_run r = {0};
    int xv, sv;
    new_graph(&g);
    g_output(&g, build_rmsnorm(&g, RMS_TORCH, scale, 1e-6f, &xv, &sv));
    spoil(&g);
    CHECK(infer(&g) == LLMC_OK, "%s: shapes infer", what);
    int before = llmc_graph_live_nodes(&g);
    CHECK(run_pass(&llmc_pass_rmsnorm_fusion, &g, &r) == LLMC_OK && llmc_graph_live_nodes(&g) == before &&
              count_op(&g, "RMSNorm") == 0 && strcmp(r.detail, "0 fused") == 0,
          "%s: not fused", what);
    CHECK(r.log && strstr(r.log, "rmsnorm-fusion: node '") && strstr(r.log, why), "%s: explained: %s", what,
          r.log ? r.log : "(nothing)");
    pass_run_free(&r);
    llmc_graph_free(&g);
}

static int node_named(const llmc_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0)
            return i;
    return -1;
}

static void cube_instead_of_square(llmc_graph *g)
{
    float three = 3.0f;
    int v = g->nodes[node_named(g, "sq")].inputs[1];
    memcpy((void *)g->values[v].konst.data, &three, sizeof three);
}

/* The float right above 2: the exponent must be 2 exactly. */
static void almost_square(llmc_graph *g)
{
    float above = nextafterf(2.0f, 3.0f);
    int v = g->nodes[node_named(g, "sq")].inputs[1];
    memcpy((void *)g->values[v].konst.data, &above, sizeof above);
}

static void mean_over_axis_1(llmc_graph *g)
{
    llmc_attr *a = (llmc_attr *)llmc_node_attr(g, node_named(g, "mean"), "axes");
    a->ints[0] = 1;
}

/* With keepdims=0 the graph only infers when D = 1 ([1, S, 1] * [1, S]). */
static void mean_without_keepdims(llmc_graph *g)
{
    attr_int(g, node_named(g, "mean"), "keepdims", 0);
    g->values[g->inputs[0]].shape = SHAPE(K(1), SYM_S, K(1));
    g->nodes[node_named(g, "y")].inputs[1] = fvector(g, "scale1", 1, (float[]){2.0f});
}

static void square_also_an_output(llmc_graph *g)
{
    g_output(g, g->nodes[node_named(g, "sq")].outputs[0]);
}

static void inverse_also_an_output(llmc_graph *g)
{
    g_output(g, g->nodes[node_named(g, "inv")].outputs[0]);
}

static void scale_of_one_element(llmc_graph *g)
{
    int mul = node_named(g, "y");
    g->nodes[mul].inputs[1] = fvector(g, "scale1", 1, (float[]){2.0f});
}

static void test_rmsnorm_rejections(void)
{
    expect_rmsnorm_rejected("Pow(x, 3)", cube_instead_of_square, "the exponent is not the constant 2");
    expect_rmsnorm_rejected("Pow(x, 2.0000002)", almost_square, "the exponent is not the constant 2");
    expect_rmsnorm_rejected("mean over axis 1", mean_over_axis_1, "not over the last axis only");
    expect_rmsnorm_rejected("keepdims=0", mean_without_keepdims, "keepdims is 0");
    expect_rmsnorm_rejected("x^2 read outside", square_also_an_output, "output 'sq' is also read outside the pattern");
    expect_rmsnorm_rejected("1 / sqrt read outside", inverse_also_an_output,
                            "the reciprocal square root is not read by one Mul");
    expect_rmsnorm_rejected("scale [1]", scale_of_one_element, "scale is not a float constant of shape [D]");
}

/* ---- layernorm-fusion ---- */

typedef enum { LN_TORCH, LN_TWO_SUBS, LN_CAST } ln_form;

/* mu = mean(x); d = x - mu; (d / sqrt(mean(d^2) + eps)) * scale + bias.
 * LN_TWO_SUBS: the division reads a second Sub(x, mu) through an identity
 * Cast; LN_CAST: it reads Cast(d).  bias may be NULL. */
static int build_layernorm(llmc_graph *g, ln_form form, const float *scale, const float *bias, int *x, int *sc,
                           int *bi)
{
    *x = x_input(g, "x", D);
    *sc = fvector(g, "scale", D, scale);
    *bi = bias ? fvector(g, "bias", D, bias) : -1;
    int mu_node = g_node(g, "ReduceMean", "mu", NULL, 1, *x);
    ATTR_INTS(g, mu_node, "axes", -1);
    int mu = op_value(g, mu_node), d = OP(g, "Sub", "d", *x, mu);
    int var_node = g_node(g, "ReduceMean", "var", NULL, 1, OP(g, "Pow", "sq", d, fconst(g, "two", 2.0f)));
    ATTR_INTS(g, var_node, "axes", 2);
    int root = OP(g, "Sqrt", "root", OP(g, "Add", "ve", op_value(g, var_node), fconst(g, "eps", 1e-5f)));
    int num = d;
    if (form != LN_TORCH) {
        int cast = g_node(g, "Cast", "cast", NULL, 1, form == LN_TWO_SUBS ? OP(g, "Sub", "d2", *x, mu) : d);
        attr_int(g, cast, "to", LLMC_DT_FLOAT);
        num = op_value(g, cast);
    }
    int y = OP(g, "Mul", "scaled", OP(g, "Div", "normed", num, root), *sc);
    if (bias)
        y = OP(g, "Add", "y", *bi, y);
    g_output(g, y);
    return y;
}

static void test_layernorm(void)
{
    float x[ROWS * D], scale[D], bias[D], got[ROWS * D];
    double want[ROWS * D];
    fill(x, ROWS * D, 3);
    fill(scale, D, 4);
    fill(bias, D, 5);
    static const char *names[] = {"torch opset-14 form with bias", "two Subs, a Cast, no bias",
                                  "Div(Cast(d), .), no bias"};
    for (int form = LN_TORCH; form <= LN_CAST; form++) {
        const char *what = names[form];
        const float *b = form == LN_TORCH ? bias : NULL;
        llmc_graph g;
        pass_run r = {0};
        int xv, sv, bv;
        new_graph(&g);
        int y = build_layernorm(&g, (ln_form)form, scale, b, &xv, &sv, &bv);
        CHECK(infer(&g) == LLMC_OK, "%s: shapes infer", what);
        layernorm_ref(x, scale, b, 1e-5f, want);
        CHECK(evaluate(&g, (float *[]){x}, (float *[]){got}) == LLMC_OK && close_to(got, want, ROWS * D),
              "%s: the original graph computes LayerNorm over the last axis", what);
        CHECK(run_pass(&llmc_pass_layernorm_fusion, &g, &r) == LLMC_OK &&
                  strcmp(r.detail, "1 fused, 0 already LayerNormalization") == 0,
              "%s: layernorm-fusion reports '%s'", what, r.detail);
        int node = only_node(&g);
        const llmc_node *n = node >= 0 ? &g.nodes[node] : NULL;
        CHECK(n && strcmp(n->op_type, "LayerNormalization") == 0 && n->domain[0] == 0 && n->n_inputs == (b ? 3 : 2) && n->inputs[0] == xv &&
                  n->inputs[1] == sv && (!b || n->inputs[2] == bv) && n->outputs[0] == y && n->opset == 17 &&
                  llmc_node_attr_int(&g, node, "axis", 0) == -1 &&
                  llmc_node_attr_float(&g, node, "epsilon", 0) == 1e-5f,
              "%s: one LayerNormalization(x, scale%s){axis=-1, epsilon=1e-5} writing y", what, b ? ", bias" : "");
        /* LayerNormalization lowers already: the fused graph must agree too. */
        CHECK(evaluate(&g, (float *[]){x}, (float *[]){got}) == LLMC_OK && close_to(got, want, ROWS * D),
              "%s: the fused graph computes the same", what);
        pass_run_free(&r);
        llmc_graph_free(&g);
    }
}

static void test_layernorm_rejections(void)
{
    float scale[D], bias[D];
    fill(scale, D, 4);
    fill(bias, D, 5);
    llmc_graph g;
    pass_run r = {0};
    int xv, sv, bv;
    new_graph(&g);
    build_layernorm(&g, LN_TORCH, scale, bias, &xv, &sv, &bv);
    ((llmc_attr *)llmc_node_attr(&g, node_named(&g, "mu"), "axes"))->ints[0] = 1;
    expect_unfused(&g, &llmc_pass_layernorm_fusion, "LayerNormalization",
                   "layernorm-fusion: node 'mu' (#0, ReduceMean) not fused: the mean is not over the last axis only",
                   "mean over axis 1");

    /* The Sub's result also read elsewhere */
    new_graph(&g);
    build_layernorm(&g, LN_TORCH, scale, bias, &xv, &sv, &bv);
    g_output(&g, g.nodes[node_named(&g, "d")].outputs[0]);
    expect_unfused(&g, &llmc_pass_layernorm_fusion, "LayerNormalization", "output 'd' is also read outside",
                   "x - mean(x) read outside");

    /* Opset-17 exports carry LayerNormalization: counted, left as is */
    new_graph(&g);
    int x = x_input(&g, "x", D);
    int y = OP(&g, "LayerNormalization", "ln", x, fvector(&g, "scale", D, scale), fvector(&g, "bias", D, bias));
    g_output(&g, y);
    CHECK(infer(&g) == LLMC_OK && run_pass(&llmc_pass_layernorm_fusion, &g, &r) == LLMC_OK &&
              strcmp(r.detail, "0 fused, 1 already LayerNormalization") == 0 && count_op(&g, "LayerNormalization") == 1,
          "a LayerNormalization node is counted: '%s'", r.detail);
    pass_run_free(&r);
    llmc_graph_free(&g);
}

/* ---- activation-fusion ---- */

typedef enum {
    GELU_PHI, GELU_HALF_FIRST, GELU_HALF_LAST, GELU_TANH, GELU_TANH_TORCH, GELU_TANH_FAST, GELU_TANH_F16,
    GELU_ERF_F16, GELU_FORMS
} gelu_form;

static bool gelu_is_tanh(gelu_form form)
{
    return form >= GELU_TANH && form <= GELU_TANH_F16;
}

/* The constants a form is written with: sqrt(2/pi), 0.044715 and sqrt 2
 * as float32, or rounded to float16 as a float16 export stores them. */
typedef struct {
    float s, k, r;
} gelu_consts;
static const gelu_consts GELU_F32 = {0.7978845608f, 0.044715f, 1.4142135f};
static const gelu_consts GELU_F16 = {0.7978515625f, 0.044708251953125f, 1.4140625f};

static gelu_consts gelu_consts_of(gelu_form form)
{
    return form == GELU_TANH_F16 || form == GELU_ERF_F16 ? GELU_F16 : GELU_F32;
}

/* GELU as the original graph computes it, with the form's constants. */
static double gelu_of(double x, gelu_form form)
{
    gelu_consts c = gelu_consts_of(form);
    if (gelu_is_tanh(form))
        return 0.5 * x * (1 + tanh((double)c.s * (x + (double)c.k * x * x * x)));
    return 0.5 * x * (1 + erf(x / (double)c.r));
}

/* The tanh forms:
 * GELU_TANH:       scripts/export_llm.py gelu_tanh as torch exports it
 *                  (Pow(x, 3), 0.5 * x first);
 * GELU_TANH_TORCH: F.gelu(approximate="tanh") as torch exports it below
 *                  opset 20: Mul(0.5, Mul(x, Add(1, Tanh(Mul(s, Add(x,
 *                  Mul(k, Mul(x, Mul(x, x))))))))), constants first;
 * GELU_TANH_FAST:  (x * 0.5) * (1 + Tanh((x * s) * (1 + (k * x) * x)));
 * GELU_TANH_F16:   GELU_TANH_TORCH with float16-rounded constants. */
static int build_gelu_tanh(llmc_graph *g, gelu_form form, int x)
{
    gelu_consts c = gelu_consts_of(form);
    int s = fconst(g, "c_s", c.s), k = fconst(g, "c_k", c.k), one = fconst(g, "c_one", 1.0f);
    int half = fconst(g, "c_half", 0.5f);
    if (form == GELU_TANH) {
        int cube = OP(g, "Pow", "cube", x, fconst(g, "c_three", 3.0f));
        int inner = OP(g, "Add", "inner", x, OP(g, "Mul", "cubic", cube, k));
        int t = OP(g, "Tanh", "t", OP(g, "Mul", "scaled", inner, s));
        return OP(g, "Mul", "gelu", OP(g, "Mul", "half", x, half), OP(g, "Add", "one_plus", t, one));
    }
    if (form == GELU_TANH_FAST) {
        int poly = OP(g, "Add", "inner", one, OP(g, "Mul", "kxx", OP(g, "Mul", "kx", k, x), x));
        int t = OP(g, "Tanh", "t", OP(g, "Mul", "scaled", OP(g, "Mul", "xs", x, s), poly));
        return OP(g, "Mul", "gelu", OP(g, "Mul", "half", x, half), OP(g, "Add", "one_plus", one, t));
    }
    int cube = OP(g, "Mul", "cube", x, OP(g, "Mul", "square", x, x));
    int inner = OP(g, "Add", "inner", x, OP(g, "Mul", "cubic", k, cube));
    int t = OP(g, "Tanh", "t", OP(g, "Mul", "scaled", s, inner));
    return OP(g, "Mul", "gelu", half, OP(g, "Mul", "xe", x, OP(g, "Add", "one_plus", one, t)));
}

/* The erf forms:
 * GELU_PHI:        Mul(Mul(x, Add(Erf(Div(x, 1.4142135)), 1)), 0.5)   (nn.GELU, opset 14)
 * GELU_HALF_FIRST: Mul(Mul(x, 0.5), Add(1, Erf(Mul(x, 0.70710678))))
 * GELU_HALF_LAST:  Mul(x, Mul(Add(Erf(x / sqrt 2), 1), 0.5))
 * GELU_ERF_F16:    GELU_PHI dividing by float16's sqrt 2, 1.4140625. */
static int build_gelu(llmc_graph *g, gelu_form form, int x)
{
    if (gelu_is_tanh(form))
        return build_gelu_tanh(g, form, x);
    int arg = form == GELU_HALF_FIRST ? OP(g, "Mul", "arg", x, fconst(g, "c_r", 0.70710678f))
                                      : OP(g, "Div", "arg", x, fconst(g, "c_r", gelu_consts_of(form).r));
    int e = OP(g, "Erf", "e", arg);
    int one = fconst(g, "c_one", 1.0f), half = fconst(g, "c_half", 0.5f);
    int one_plus = form == GELU_HALF_FIRST ? OP(g, "Add", "one_plus", one, e) : OP(g, "Add", "one_plus", e, one);
    if (form == GELU_HALF_FIRST)
        return OP(g, "Mul", "gelu", OP(g, "Mul", "xh", x, half), one_plus);
    if (form == GELU_HALF_LAST)
        return OP(g, "Mul", "gelu", x, OP(g, "Mul", "h", one_plus, half));
    return OP(g, "Mul", "gelu", OP(g, "Mul", "xe", x, one_plus), half);
}

static void test_gelu(void)
{
    static const char *names[] = {"erf GELU as nn.GELU exports it", "erf GELU, (x*0.5)*(1+erf(x*0.7071))",
                                  "erf GELU, x*((erf+1)*0.5)", "tanh GELU as GPT-2 exports it",
                                  "tanh GELU as torch exports F.gelu(approximate='tanh')",
                                  "tanh GELU, (x*0.5)*(1+tanh((x*s)*(1+(k*x)*x)))",
                                  "tanh GELU with float16 constants", "erf GELU with float16 sqrt 2"};
    float x[ROWS * D], got[ROWS * D];
    double want[ROWS * D];
    fill(x, ROWS * D, 6);
    for (int form = GELU_PHI; form < GELU_FORMS; form++) {
        llmc_graph g;
        pass_run r = {0};
        int tanh_form = gelu_is_tanh((gelu_form)form);
        new_graph(&g);
        int xv = x_input(&g, "x", D), y = build_gelu(&g, (gelu_form)form, xv);
        g_output(&g, y);
        CHECK(infer(&g) == LLMC_OK, "%s: shapes infer", names[form]);
        for (int i = 0; i < ROWS * D; i++)
            want[i] = gelu_of(x[i], (gelu_form)form);
        CHECK(evaluate(&g, (float *[]){x}, (float *[]){got}) == LLMC_OK && close_to(got, want, ROWS * D),
              "%s: the original graph computes GELU with its constants", names[form]);
        CHECK(run_pass(&llmc_pass_activation_fusion, &g, &r) == LLMC_OK, "%s: pass runs", names[form]);
        int node = only_node(&g);
        char want_detail[64];
        snprintf(want_detail, sizeof want_detail, "1 gelu (%d tanh form), 0 silu (0 into swiglu)", tanh_form);
        CHECK(node >= 0 && IS_FUSED(&g, y, "Gelu", xv) && llmc_node_attr_int(&g, node, "tanh", 0) == tanh_form &&
                  strcmp(r.detail, want_detail) == 0,
              "%s: one llmc.Gelu{tanh=%d}(x) writing y; detail '%s'", names[form], tanh_form, r.detail);
        bool f16 = gelu_consts_of((gelu_form)form).s == GELU_F16.s;
        bool said = r.log && strstr(r.log, "fused: GELU's constants were rounded to float16; the fused Gelu computes "
                                           "with the exact ones (a rounding change)");
        CHECK(said == f16, "%s: --explain %s the rounding change: %s", names[form], f16 ? "names" : "does not name",
              r.log ? r.log : "(nothing)");
        /* the fused node computes exact GELU: within 2e-4 of the float16 constants' */
        for (int i = 0; i < ROWS * D; i++)
            want[i] = gelu_of(x[i], tanh_form ? GELU_TANH : GELU_PHI);
        CHECK(evaluate(&g, (float *[]){x}, (float *[]){got}) == LLMC_OK && close_to(got, want, ROWS * D),
              "%s: the fused graph computes GELU", names[form]);
        pass_run_free(&r);
        llmc_graph_free(&g);
    }
}

static void test_gelu_rejections(void)
{
    llmc_graph g;
    new_graph(&g);
    int xv = x_input(&g, "x", D);
    g_output(&g, build_gelu(&g, GELU_TANH, xv));
    float *k = (float *)g.values[g.nodes[node_named(&g, "cubic")].inputs[1]].konst.data;
    *k = 0.0447f;
    expect_unfused(&g, &llmc_pass_activation_fusion, "Gelu",
                   "node 't' (#4, Tanh) not fused: its input is not sqrt(2/pi) * (x + 0.044715 * x^3) in x",
                   "tanh GELU with 0.0447 for 0.044715");

    new_graph(&g);
    xv = x_input(&g, "x", D);
    g_output(&g, build_gelu(&g, GELU_TANH_TORCH, xv));
    *(float *)g.values[llmc_graph_find_value(&g, "c_half")].konst.data = 0.25f;
    expect_unfused(&g, &llmc_pass_activation_fusion, "Gelu",
                   "node 't' (#5, Tanh) not fused: its output is not read by one chain computing 0.5 * x * (1 + Tanh)",
                   "F.gelu tanh form with 0.25 for 0.5");

    new_graph(&g);
    xv = x_input(&g, "x", D);
    g_output(&g, build_gelu(&g, GELU_TANH_F16, xv));
    *(float *)g.values[llmc_graph_find_value(&g, "c_s")].konst.data = 0.798f;   /* neither value nor float16's */
    expect_unfused(&g, &llmc_pass_activation_fusion, "Gelu", "node 't' (#5, Tanh) not fused: its input is not",
                   "tanh GELU with 0.798 for sqrt(2/pi)");

    new_graph(&g);
    xv = x_input(&g, "x", D);
    g_output(&g, build_gelu(&g, GELU_PHI, xv));
    g_output(&g, g.nodes[node_named(&g, "arg")].outputs[0]);
    expect_unfused(&g, &llmc_pass_activation_fusion, "Gelu", "output 'arg' is also read outside",
                   "erf GELU whose x / sqrt 2 is also an output");
}

static void test_silu_swiglu(void)
{
    float gate[ROWS * D], up[ROWS * D], got[2][ROWS * D];
    double want_silu[ROWS * D], want_swiglu[ROWS * D];
    fill(gate, ROWS * D, 7);
    fill(up, ROWS * D, 8);
    for (int i = 0; i < ROWS * D; i++) {
        want_silu[i] = silu_ref(gate[i]);
        want_swiglu[i] = silu_ref(gate[i]) * up[i];
    }
    /* y1 = silu(gate) on its own; y2 = up * (Sigmoid(gate2) * gate2): SwiGLU with swapped operands */
    llmc_graph g;
    pass_run r = {0};
    new_graph(&g);
    int gv = x_input(&g, "gate", D), uv = x_input(&g, "up", D);
    int y1 = OP(&g, "Mul", "y1", gv, OP(&g, "Sigmoid", "s1", gv));
    int g2 = OP(&g, "Identity", "gate2", gv);
    int y2 = OP(&g, "Mul", "y2", uv, OP(&g, "Mul", "silu2", OP(&g, "Sigmoid", "s2", g2), g2));
    g_output(&g, y1);
    g_output(&g, y2);
    CHECK(infer(&g) == LLMC_OK, "SiLU / SwiGLU graph infers");
    CHECK(evaluate(&g, (float *[]){gate, up}, (float *[]){got[0], got[1]}) == LLMC_OK &&
              close_to(got[0], want_silu, ROWS * D) && close_to(got[1], want_swiglu, ROWS * D),
          "the original graph computes silu(gate) and silu(gate) * up");
    CHECK(run_pass(&llmc_pass_activation_fusion, &g, &r) == LLMC_OK &&
              strcmp(r.detail, "0 gelu (0 tanh form), 2 silu (1 into swiglu)") == 0,
          "activation-fusion reports '%s'", r.detail);
    CHECK(IS_FUSED(&g, y1, "Silu", gv) && IS_FUSED(&g, y2, "SwiGLU", g2, uv) && llmc_graph_live_nodes(&g) == 3,
          "y1 = llmc.Silu(gate), y2 = llmc.SwiGLU(gate2, up), Identity left");
    pass_run_free(&r);
    llmc_graph_free(&g);

    /* The Silu is also read elsewhere: no SwiGLU */
    new_graph(&g);
    gv = x_input(&g, "gate", D);
    uv = x_input(&g, "up", D);
    int silu = OP(&g, "Mul", "silu", gv, OP(&g, "Sigmoid", "s", gv));
    g_output(&g, OP(&g, "Mul", "y", silu, uv));
    g_output(&g, silu);
    CHECK(infer(&g) == LLMC_OK && run_pass(&llmc_pass_activation_fusion, &g, &r) == LLMC_OK &&
              count_op(&g, "Silu") == 1 && count_op(&g, "SwiGLU") == 0 && count_op(&g, "Mul") == 1 && r.log &&
              strstr(r.log, "not read by exactly one Mul(Silu(gate), up)"),
          "a Silu that is also an output stays a Silu: %s", r.log ? r.log : "(nothing)");
    pass_run_free(&r);
    llmc_graph_free(&g);

    /* x * Sigmoid(y): not SiLU */
    new_graph(&g);
    gv = x_input(&g, "gate", D);
    uv = x_input(&g, "up", D);
    g_output(&g, OP(&g, "Mul", "y", uv, OP(&g, "Sigmoid", "s", gv)));
    expect_unfused(&g, &llmc_pass_activation_fusion, "Silu", "not read by exactly one Mul(x, Sigmoid(x))",
                   "up * Sigmoid(gate)");
}

/* ONNX's own Gelu{approximate} node (opset 20 on) gating an up projection,
 * as onnxruntime-genai's builder writes Gemma's MLP at opset 21. */
static int onnx_gelu_gate(llmc_graph *g, int opset, const char *approximate, int *gv, int *uv)
{
    new_graph(g);
    g->opset = opset;
    *gv = x_input(g, "gate", D);
    *uv = x_input(g, "up", D);
    int act = 0;
    int node = g_node(g, "Gelu", "act", &act, 1, *gv);
    llmc_attr a = {.name = "approximate", .type = LLMC_ATTR_STRING, .s = (char *)approximate};
    llmc_node_add_attr(g, node, &a);
    return OP(g, "Mul", "y", act, *uv);
}

static void test_geglu_onnx_gelu(void)
{
    float gate[ROWS * D], up[ROWS * D], got[ROWS * D];
    double want[ROWS * D];
    fill(gate, ROWS * D, 9);
    fill(up, ROWS * D, 10);
    for (int i = 0; i < ROWS * D; i++)
        want[i] = gelu_of(gate[i], GELU_TANH) * up[i];
    llmc_graph g;
    pass_run r = {0};
    int gv, uv, y = onnx_gelu_gate(&g, 21, "tanh", &gv, &uv);
    g_output(&g, y);
    CHECK(infer(&g) == LLMC_OK && evaluate(&g, (float *[]){gate, up}, (float *[]){got}) == LLMC_OK &&
              close_to(got, want, ROWS * D),
          "the original graph computes gelu_tanh(gate) * up");
    CHECK(run_pass(&llmc_pass_activation_fusion, &g, &r) == LLMC_OK && IS_FUSED(&g, y, "GeGLU", gv, uv) &&
              llmc_graph_live_nodes(&g) == 1 &&
              strcmp(r.detail, "0 gelu (0 tanh form, 1 into geglu), 0 silu (0 into swiglu)") == 0,
          "Mul(Gelu{approximate=tanh}(gate), up) at opset 21 -> llmc.GeGLU(gate, up); detail '%s'", r.detail);
    pass_run_free(&r);
    llmc_graph_free(&g);

    /* the erf form gates nothing, and a Gelu node below opset 20 is not ONNX's op */
    static const struct {
        int opset;
        const char *approximate;
    } misses[] = {{21, "none"}, {17, "tanh"}};
    for (int k = 0; k < 2; k++) {
        y = onnx_gelu_gate(&g, misses[k].opset, misses[k].approximate, &gv, &uv);
        g_output(&g, y);
        CHECK(infer(&g) == LLMC_OK && run_pass(&llmc_pass_activation_fusion, &g, &r) == LLMC_OK &&
                  count_op(&g, "GeGLU") == 0 && llmc_graph_live_nodes(&g) == 2,
              "Gelu{approximate=%s} at opset %d stays unfused", misses[k].approximate, misses[k].opset);
        pass_run_free(&r);
        llmc_graph_free(&g);
    }
}

/* ---- linear-fusion ---- */

static int matrix(llmc_graph *g, const char *name, int rows, int cols, const float *data)
{
    return g_const(g, name, LLMC_DT_FLOAT, SHAPE(K(rows), K(cols)), data);
}

static const float *const_data(const llmc_graph *g, int v)
{
    return llmc_const_bytes(&g->values[v].konst);   /* merged weights are lazy views */
}

/* q (bias), k (no bias), v (bias, bias first in the Add) from one x: one
 * Linear with W = [Wq | Wk | Wv], bias = [bq | 0 | bv]. */
static void test_linear_merge(void)
{
    enum { NQ = 4, NK = 2, NV = 2, N = NQ + NK + NV };
    float x[ROWS * D], wq[D * NQ], wk[D * NK], wv[D * NV], bq[NQ], bv[NV], got[3][ROWS * NQ];
    float *outs[3] = {got[0], got[1], got[2]};
    fill(x, ROWS * D, 9);
    fill(wq, D * NQ, 10);
    fill(wk, D * NK, 11);
    fill(wv, D * NV, 12);
    fill(bq, NQ, 13);
    fill(bv, NV, 14);
    llmc_graph g;
    pass_run r = {0};
    new_graph(&g);
    int xv = x_input(&g, "x", D);
    int q = OP(&g, "Add", "q", OP(&g, "MatMul", "q_mm", xv, matrix(&g, "wq", D, NQ, wq)), fvector(&g, "bq", NQ, bq));
    int k = OP(&g, "MatMul", "k", xv, matrix(&g, "wk", D, NK, wk));
    int v = OP(&g, "Add", "v", fvector(&g, "bv", NV, bv), OP(&g, "MatMul", "v_mm", xv, matrix(&g, "wv", D, NV, wv)));
    g_output(&g, q);
    g_output(&g, k);
    g_output(&g, v);
    CHECK(infer(&g) == LLMC_OK && evaluate(&g, (float *[]){x}, outs) == LLMC_OK, "q/k/v graph evaluates");
    CHECK(run_pass(&llmc_pass_linear_fusion, &g, &r) == LLMC_OK &&
              strcmp(r.detail, "3 linears, 1 merged groups, 0 residuals (0 down a chain), 0 splits absorbed") == 0,
          "linear-fusion reports '%s'", r.detail);
    int node = only_node(&g);
    const llmc_node *n = node >= 0 ? &g.nodes[node] : NULL;
    CHECK(n && llmc_is_op(n, "Linear") && n->n_inputs == 3 && n->inputs[0] == xv && n->n_outputs == 3 &&
              n->outputs[0] == q && n->outputs[1] == k && n->outputs[2] == v,
          "one llmc.Linear(x, W, bias) -> (q, k, v)");
    if (!n)
        return;
    const llmc_value *wval = &g.values[n->inputs[1]], *bval = &g.values[n->inputs[2]];
    bool w_ok = wval->is_const && shape_eq(wval->shape, SHAPE(K(D), K(N))), b_ok = bval->is_const &&
                                                                              shape_eq(bval->shape, SHAPE(K(N)));
    for (int i = 0; w_ok && i < D; i++) {
        const float *row = const_data(&g, n->inputs[1]) + i * N;
        w_ok = !memcmp(row, wq + i * NQ, sizeof wq[0] * NQ) && !memcmp(row + NQ, wk + i * NK, sizeof wk[0] * NK) &&
               !memcmp(row + NQ + NK, wv + i * NV, sizeof wv[0] * NV);
    }
    const float *b = b_ok ? const_data(&g, n->inputs[2]) : NULL;
    b_ok = b && !memcmp(b, bq, sizeof bq) && b[NQ] == 0 && b[NQ + 1] == 0 && !memcmp(b + NQ + NK, bv, sizeof bv);
    CHECK(w_ok, "W [8, 8] is Wq | Wk | Wv row by row");
    CHECK(b_ok, "bias [8] is bq | 0 0 | bv");
    /* The merged constants reproduce what the three projections computed. */
    double z[ROWS * N], want[3][ROWS * NQ];
    linear_ref(x, const_data(&g, n->inputs[1]), b, NULL, D, N, z);
    for (int row = 0; row < ROWS; row++)
        for (int j = 0; j < N; j++) {
            int which = j < NQ ? 0 : j < NQ + NK ? 1 : 2, col = j - (which == 0 ? 0 : which == 1 ? NQ : NQ + NK);
            int width = which == 0 ? NQ : 2;
            want[which][row * width + col] = z[row * N + j];
        }
    CHECK(close_to(got[0], want[0], ROWS * NQ) && close_to(got[1], want[1], ROWS * NK) &&
              close_to(got[2], want[2], ROWS * NV),
          "x W + bias split as (4, 2, 2) equals the original q, k, v");
    pass_run_free(&r);
    llmc_graph_free(&g);
}

/* GPT-2's c_attn: Add(bias, MatMul) then Split(axis=-1) into (4, 2). */
static void test_linear_split(void)
{
    float x[ROWS * D], w[D * 6], b[6], got[2][ROWS * 4];
    double z[ROWS * 6], want[2][ROWS * 4];
    fill(x, ROWS * D, 15);
    fill(w, D * 6, 16);
    fill(b, 6, 17);
    llmc_graph g;
    pass_run r = {0};
    new_graph(&g);
    int xv = x_input(&g, "x", D), wv = matrix(&g, "w", D, 6, w), bv = fvector(&g, "b", 6, b);
    int sum = OP(&g, "Add", "c_attn", bv, OP(&g, "MatMul", "mm", xv, wv));
    int outs[2] = {llmc_graph_add_value(&g, "a", 0), llmc_graph_add_value(&g, "c", 0)};
    int split = llmc_graph_add_node(&g, "Split", "split", (int[]){sum, CI64(&g, "sizes", 4, 2)}, 2, outs, 2);
    attr_int(&g, split, "axis", -1);
    g_output(&g, outs[0]);
    g_output(&g, outs[1]);
    CHECK(infer(&g) == LLMC_OK && evaluate(&g, (float *[]){x}, (float *[]){got[0], got[1]}) == LLMC_OK,
          "c_attn graph evaluates");
    linear_ref(x, w, b, NULL, D, 6, z);
    for (int row = 0; row < ROWS; row++)
        for (int j = 0; j < 6; j++)
            want[j / 4][row * (j < 4 ? 4 : 2) + j % 4] = z[row * 6 + j];
    CHECK(close_to(got[0], want[0], ROWS * 4) && close_to(got[1], want[1], ROWS * 2),
          "the original graph computes x W + b split (4, 2)");
    CHECK(run_pass(&llmc_pass_linear_fusion, &g, &r) == LLMC_OK &&
              strcmp(r.detail, "1 linears, 0 merged groups, 0 residuals (0 down a chain), 1 splits absorbed") == 0,
          "linear-fusion reports '%s'", r.detail);
    int node = only_node(&g);
    CHECK(node >= 0 && IS_FUSED(&g, outs[0], "Linear", xv, wv, bv) && g.nodes[node].n_outputs == 2 &&
              g.nodes[node].outputs[0] == outs[0] && g.nodes[node].outputs[1] == outs[1],
          "one llmc.Linear(x, W, b) -> (a, c)");
    pass_run_free(&r);
    llmc_graph_free(&g);
}

/* Transformers' Phi: y = (x1 W1 + x2 W2) + r.  Step 4 gives the second
 * Linear the first's output as residual; step 5 sends r down that chain to
 * the first Linear, so two Linears and no Add are left, computing the same
 * sum. */
static void test_linear_residual_chain(void)
{
    float x1[ROWS * D], x2[ROWS * D], w1[D * 6], w2[D * 6], res[ROWS * 6], got[ROWS * 6];
    double part[ROWS * 6], want[ROWS * 6];
    fill(x1, ROWS * D, 21);
    fill(x2, ROWS * D, 22);
    fill(w1, D * 6, 23);
    fill(w2, D * 6, 24);
    fill(res, ROWS * 6, 25);
    llmc_graph g;
    pass_run r = {0};
    new_graph(&g);
    int x1v = x_input(&g, "x1", D), x2v = x_input(&g, "x2", D), rv = x_input(&g, "r", 6);
    int w1v = matrix(&g, "w1", D, 6, w1), w2v = matrix(&g, "w2", D, 6, w2);
    int sum = OP(&g, "Add", "sum", OP(&g, "MatMul", "attn", x1v, w1v), OP(&g, "MatMul", "mlp", x2v, w2v));
    int y = OP(&g, "Add", "y", sum, rv);
    g_output(&g, y);
    CHECK(infer(&g) == LLMC_OK, "chain graph infers");
    CHECK(run_pass(&llmc_pass_linear_fusion, &g, &r) == LLMC_OK &&
              strcmp(r.detail, "2 linears, 0 merged groups, 2 residuals (1 down a chain), 0 splits absorbed") == 0 &&
              count_op(&g, "Linear") == 2 && count_op(&g, "Add") == 0 && llmc_graph_live_nodes(&g) == 2,
          "two llmc.Linear, no Add left; '%s'", r.detail);
    int last = g.values[y].producer, first = g.nodes[last].inputs[3];
    CHECK(last >= 0 && first >= 0 && g.values[first].producer >= 0 &&
              g.nodes[g.values[first].producer].inputs[3] == rv,
          "y's Linear takes the other Linear's output as residual, and that one takes r");
    linear_ref(x1, w1, NULL, res, D, 6, part);
    for (int i = 0; i < ROWS * 6; i++)
        res[i] = (float)part[i];   /* x1 W1 + r, then + x2 W2: the reassociated sum */
    linear_ref(x2, w2, NULL, res, D, 6, want);
    fill(res, ROWS * 6, 25);
    CHECK(evaluate(&g, (float *[]){x1, x2, res}, (float *[]){got}) == LLMC_OK && close_to(got, want, ROWS * 6),
          "the fused graph computes x1 W1 + x2 W2 + r");
    pass_run_free(&r);
    llmc_graph_free(&g);
}

/* Add(r, Linear(x)) with r [1, S, 6] becomes the residual input; with r [6]
 * (broadcast) it does not. */
static void test_linear_residual(void)
{
    float x[ROWS * D], w[D * 6], res[ROWS * 6], got[ROWS * 6];
    double want[ROWS * 6];
    fill(x, ROWS * D, 18);
    fill(w, D * 6, 19);
    fill(res, ROWS * 6, 20);
    llmc_graph g;
    pass_run r = {0};
    new_graph(&g);
    int xv = x_input(&g, "x", D), rv = x_input(&g, "r", 6), wv = matrix(&g, "w", D, 6, w);
    int y = OP(&g, "Add", "y", rv, OP(&g, "MatMul", "mm", xv, wv));
    g_output(&g, y);
    CHECK(infer(&g) == LLMC_OK && evaluate(&g, (float *[]){x, res}, (float *[]){got}) == LLMC_OK,
          "residual graph evaluates");
    linear_ref(x, w, NULL, res, D, 6, want);
    CHECK(close_to(got, want, ROWS * 6), "the original graph computes x W + r");
    CHECK(run_pass(&llmc_pass_linear_fusion, &g, &r) == LLMC_OK &&
              strcmp(r.detail, "1 linears, 0 merged groups, 1 residuals (0 down a chain), 0 splits absorbed") == 0 &&
              only_node(&g) >= 0 && IS_FUSED(&g, y, "Linear", xv, wv, -1, rv),
          "one llmc.Linear(x, W, -, r) writing y; '%s'", r.detail);
    pass_run_free(&r);
    llmc_graph_free(&g);

    new_graph(&g);
    xv = x_input(&g, "x", D);
    rv = g_input(&g, "r", LLMC_DT_FLOAT, SHAPE(K(6)));
    y = OP(&g, "Add", "y", OP(&g, "MatMul", "mm", xv, matrix(&g, "w", D, 6, w)), rv);
    g_output(&g, y);
    CHECK(infer(&g) == LLMC_OK && run_pass(&llmc_pass_linear_fusion, &g, &r) == LLMC_OK &&
              count_op(&g, "Linear") == 1 && count_op(&g, "Add") == 1 && r.log &&
              strstr(r.log, "node 'y' (#1, Add) not fused: the residual is not a float tensor of the Linear's output "
                            "shape"),
          "a broadcast [6] addend stays an Add: %s", r.log ? r.log : "(nothing)");
    pass_run_free(&r);
    llmc_graph_free(&g);
}

/* Gemm(A, B, C){transB=1} with B [6, 8], C [1, 6] -> Linear(A, B^T, C as [6]). */
static void test_linear_gemm(void)
{
    float a[ROWS * D], bt[6 * D], c[6], w[D * 6], got[ROWS * 6];
    double want[ROWS * 6];
    fill(a, ROWS * D, 21);
    fill(bt, 6 * D, 22);
    fill(c, 6, 23);
    for (int i = 0; i < D; i++)
        for (int j = 0; j < 6; j++)
            w[i * 6 + j] = bt[j * D + i];
    llmc_graph g;
    pass_run r = {0};
    new_graph(&g);
    int av = g_input(&g, "a", LLMC_DT_FLOAT, SHAPE(K(ROWS), K(D)));
    int gemm = g_node(&g, "Gemm", "gemm", NULL, 3, av, matrix(&g, "b", 6, D, bt), matrix(&g, "c", 1, 6, c));
    attr_int(&g, gemm, "transB", 1);
    int y = op_value(&g, gemm);
    g_output(&g, y);
    CHECK(infer(&g) == LLMC_OK && evaluate(&g, (float *[]){a}, (float *[]){got}) == LLMC_OK, "Gemm graph evaluates");
    linear_ref(a, w, c, NULL, D, 6, want);
    CHECK(close_to(got, want, ROWS * 6), "the original Gemm computes A B^T + C");
    CHECK(run_pass(&llmc_pass_linear_fusion, &g, &r) == LLMC_OK && only_node(&g) >= 0 &&
              IS_FUSED(&g, y, "Linear", av, -2, -2),
          "one llmc.Linear(A, W, bias) writing y");
    const llmc_node *n = &g.nodes[g.values[y].producer];
    const llmc_value *wval = &g.values[n->inputs[1]], *bval = &g.values[n->inputs[2]];
    CHECK(shape_eq(wval->shape, SHAPE(K(D), K(6))) && !memcmp(llmc_const_bytes(&wval->konst), w, sizeof w) &&
              shape_eq(bval->shape, SHAPE(K(6))) && !memcmp(bval->konst.data, c, sizeof c),
          "W is B transposed [8, 6], bias is C as [6]");
    pass_run_free(&r);
    llmc_graph_free(&g);

    /* alpha = 2 is not a plain projection */
    new_graph(&g);
    av = g_input(&g, "a", LLMC_DT_FLOAT, SHAPE(K(ROWS), K(D)));
    gemm = g_node(&g, "Gemm", "gemm", NULL, 2, av, matrix(&g, "b", D, 6, w));
    attr_float(&g, gemm, "alpha", 2.0f);
    g_output(&g, op_value(&g, gemm));
    expect_unfused(&g, &llmc_pass_linear_fusion, "Linear", "alpha = beta = 1", "Gemm with alpha = 2");
}

/* Activation x activation (attention scores) is no projection; an addend
 * of shape [1, 6] (not [N]) stays a separate Add. */
static void test_linear_not_projections(void)
{
    float w[D * 6], b[6];
    fill(w, D * 6, 24);
    fill(b, 6, 25);
    llmc_graph g;
    pass_run r = {0};
    new_graph(&g);
    int xv = x_input(&g, "x", D);
    int kt = g_input(&g, "kt", LLMC_DT_FLOAT, SHAPE(K(1), K(D), SYM_S));
    g_output(&g, OP(&g, "MatMul", "scores", xv, kt));
    g_output(&g, OP(&g, "Add", "y", OP(&g, "MatMul", "mm", xv, matrix(&g, "w", D, 6, w)), matrix(&g, "b", 1, 6, b)));
    CHECK(infer(&g) == LLMC_OK && run_pass(&llmc_pass_linear_fusion, &g, &r) == LLMC_OK &&
              strcmp(r.detail, "1 linears, 0 merged groups, 0 residuals (0 down a chain), 0 splits absorbed") == 0 &&
              count_op(&g, "MatMul") == 1 && count_op(&g, "Add") == 1 && count_op(&g, "Linear") == 1 &&
              r.log && !strstr(r.log, "'scores'") &&
              strstr(r.log, "node 'y' (#2, Add) not fused: a constant addend that is not a float bias [N]"),
          "x Kt stays a MatMul silently, the [1, 6] addend an Add, explained: %s", r.log ? r.log : "(nothing)");
    pass_run_free(&r);
    llmc_graph_free(&g);
}

/* ---- the pipeline ---- */

/* Position of the pass `name` in the records; n when absent. */
static int record_index(const llmc_pass_record *rec, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(rec[i].name, name) == 0)
            return i;
    return n;
}

/* A LLaMA MLP block, x + down(silu(gate(h)) * up(h)) with h = RMSNorm(x),
 * through the whole pipeline: RMSNorm, one Linear for gate and up, SwiGLU,
 * and the down Linear with x as its residual. */
static void test_pipeline_mlp_block(void)
{
    enum { F = 6 };
    float x[ROWS * D], scale[D], wg[D * F], wu[D * F], wd[F * D], got[ROWS * D];
    double h[ROWS * D], gate[ROWS * F], up[ROWS * F], want[ROWS * D];
    float hf[ROWS * D], act[ROWS * F];
    fill(x, ROWS * D, 26);
    fill(scale, D, 27);
    fill(wg, D * F, 28);
    fill(wu, D * F, 29);
    fill(wd, F * D, 30);
    llmc_graph g;
    new_graph(&g);
    int xv, sv;
    int hv = build_rmsnorm(&g, RMS_TORCH, scale, 1e-6f, &xv, &sv);
    int gv = OP(&g, "MatMul", "gate", hv, matrix(&g, "wg", D, F, wg));
    int uv = OP(&g, "MatMul", "up", hv, matrix(&g, "wu", D, F, wu));
    int av = OP(&g, "Mul", "act", OP(&g, "Mul", "silu", gv, OP(&g, "Sigmoid", "sig", gv)), uv);
    int y = OP(&g, "Add", "y", xv, OP(&g, "MatMul", "down", av, matrix(&g, "wd", F, D, wd)));
    g_output(&g, y);
    CHECK(infer(&g) == LLMC_OK && evaluate(&g, (float *[]){x}, (float *[]){got}) == LLMC_OK, "MLP block evaluates");
    rmsnorm_ref(x, scale, 1e-6f, h);
    for (int i = 0; i < ROWS * D; i++)
        hf[i] = (float)h[i];
    linear_ref(hf, wg, NULL, NULL, D, F, gate);
    linear_ref(hf, wu, NULL, NULL, D, F, up);
    for (int i = 0; i < ROWS * F; i++)
        act[i] = (float)(silu_ref(gate[i]) * up[i]);
    linear_ref(act, wd, NULL, x, F, D, want);
    CHECK(close_to(got, want, ROWS * D), "the original block computes x + down(swiglu(gate(h), up(h)))");

    llmc_pass_record rec[LLMC_PIPELINE_MAX_PASSES];
    llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = 64};
    llmc_error err = {0};
    int n_rec = 0;
    CHECK(llmc_pipeline_run(&g, &ctx, NULL, rec, &n_rec, &err) == LLMC_OK, "pipeline runs (%s)", err.msg);
    CHECK(record_index(rec, n_rec, "dead-code") < record_index(rec, n_rec, "layernorm-fusion") &&
              record_index(rec, n_rec, "layernorm-fusion") < record_index(rec, n_rec, "rmsnorm-fusion") &&
              record_index(rec, n_rec, "rmsnorm-fusion") < record_index(rec, n_rec, "activation-fusion") &&
              record_index(rec, n_rec, "activation-fusion") < record_index(rec, n_rec, "linear-fusion") &&
              record_index(rec, n_rec, "linear-fusion") < n_rec,
          "the pipeline runs dead-code, layernorm-, rmsnorm-, activation-, linear-fusion in this order");
    int h_fused = g.nodes[producer_of(&g, gv)].inputs[0];
    CHECK(llmc_graph_live_nodes(&g) == 4 && IS_FUSED(&g, h_fused, "RMSNorm", xv, sv) &&
              IS_FUSED(&g, gv, "Linear", h_fused, -2) && producer_of(&g, gv) == producer_of(&g, uv) &&
              IS_FUSED(&g, av, "SwiGLU", gv, uv) && IS_FUSED(&g, y, "Linear", av, -2, -1, xv),
          "4 nodes: RMSNorm, Linear -> (gate, up), SwiGLU, Linear(act, Wd, -, x)");
    llmc_graph_free(&g);
}

int main(void)
{
    test_rmsnorm_forms();
    test_rmsnorm_rejections();
    test_layernorm();
    test_layernorm_rejections();
    test_gelu();
    test_gelu_rejections();
    test_silu_swiglu();
    test_geglu_onnx_gelu();
    test_linear_merge();
    test_linear_split();
    test_linear_residual();
    test_linear_residual_chain();
    test_linear_gemm();
    test_linear_not_projections();
    test_pipeline_mlp_block();
    return TAP_DONE();
}
