/* The rewriting passes (cse, slice-fusion, lora-reorder) on hand-built
 * graphs: what they rewrite, what they must leave alone (with the
 * explanation --explain prints), and that the graph computes the same
 * values before and after (llmc_evaluate_graph runs the runtime's kernels). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_util.h"
#include "codegen/evaluate.h"
#include "passes/pipeline.h"
#include "tap.h"

#define MAX_OUTPUTS 4

/* A pass run with --explain on: explanations land in `log`. */
typedef struct {
    char detail[160];
    char *log;
    size_t log_size;
} pass_report;

static void new_graph(llmc_graph *g)
{
    llmc_graph_init(g);
    g->opset = 17;
}

static int run_pass(const llmc_pass *pass, llmc_graph *g, pass_report *rep)
{
    llmc_error err = {0};
    FILE *log = open_memstream(&rep->log, &rep->log_size);
    llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = 256, .explain = true, .log = log, .detail = rep->detail,
                         .detail_size = sizeof rep->detail};
    rep->detail[0] = 0;
    int rc = pass->run(g, &ctx, &err);
    fclose(log);
    if (rc)
        printf("# %s: %s\n", pass->name, err.msg);
    return rc;
}

static void report_free(pass_report *rep)
{
    free(rep->log);
    rep->log = NULL;
}

static int infer(llmc_graph *g)
{
    pass_report rep = {0};
    int rc = run_pass(&llmc_pass_shape_inference, g, &rep);
    report_free(&rep);
    return rc;
}

/* ---- numerical equivalence ---- */

typedef struct {
    int n;
    llmc_eval_tensor out[MAX_OUTPUTS];
} results;

static int evaluate(const llmc_graph *g, uint32_t S, const llmc_rt_tensor *inputs, results *r)
{
    llmc_error err = {0};
    r->n = g->n_outputs;
    int rc = llmc_evaluate_graph(g, S, 0, 256, inputs, r->out, &err);
    if (rc)
        printf("# evaluate: %s\n", err.msg);
    return rc;
}

static void results_free(results *r)
{
    for (int k = 0; k < r->n; k++)
        llmc_eval_tensor_free(&r->out[k]);
}

/* Every float output within rel_tol * max|before| of its value before. */
static bool same_results(const results *a, const results *b, float rel_tol)
{
    if (a->n != b->n)
        return false;
    for (int k = 0; k < a->n; k++) {
        const llmc_eval_tensor *x = &a->out[k], *y = &b->out[k];
        if (x->nbytes != y->nbytes || x->dtype != LLMC_DT_FLOAT || y->dtype != LLMC_DT_FLOAT || !x->data)
            return false;
        const float *p = x->data, *q = y->data;
        size_t n = x->nbytes / sizeof(float);
        float scale = 0;
        for (size_t i = 0; i < n; i++)
            scale = fmaxf(scale, fabsf(p[i]));
        for (size_t i = 0; i < n; i++)
            if (!(fabsf(p[i] - q[i]) <= rel_tol * scale))
                return false;
    }
    return true;
}

/* Evaluates g, runs the pass, evaluates again: true when both agree.  Shape
 * inference runs again first, so the rewritten nodes' own shapes count. */
static bool pass_keeps_values(const llmc_pass *pass, llmc_graph *g, uint32_t S, const llmc_rt_tensor *inputs,
                              float rel_tol, pass_report *rep)
{
    results before = {0}, after = {0};
    bool ok = evaluate(g, S, inputs, &before) == 0 && run_pass(pass, g, rep) == 0 && infer(g) == 0 &&
              evaluate(g, S, inputs, &after) == 0 && same_results(&before, &after, rel_tol);
    results_free(&before);
    results_free(&after);
    return ok;
}

static void fill(float *x, int n, uint32_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
    }
}

static int g_const_f32(llmc_graph *g, const char *name, llmc_shape s, const float *data)
{
    return g_const(g, name, LLMC_DT_FLOAT, s, data);
}

/* ---- cse ---- */

/* Paper 000's duplicate: two ReduceMean -> Div chains over the same x, each
 * scaled by its own copy of the constant 2; they meet in an Add. */
static void test_cse_chains(void)
{
    llmc_graph g;
    pass_report rep = {0};
    new_graph(&g);
    float two = 2.0f;
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(8)));
    int two_a = g_const_f32(&g, "two_a", SCALAR, &two), two_b = g_const_f32(&g, "two_b", SCALAR, &two);
    int m1 = g_node(&g, "ReduceMean", "m1", NULL, 1, x), m2 = g_node(&g, "ReduceMean", "m2", NULL, 1, x);
    ATTR_INTS(&g, m1, "axes", -1);
    ATTR_INTS(&g, m2, "axes", -1);
    int d1 = OP(&g, "Div", "d1", x, op_value(&g, m1)), d2 = OP(&g, "Div", "d2", x, op_value(&g, m2));
    int y = OP(&g, "Add", "y", OP(&g, "Mul", "e1", d1, two_a), OP(&g, "Mul", "e2", d2, two_b));
    g_output(&g, y);
    CHECK(infer(&g) == 0, "cse chains: shapes inferred");
    float xs[2 * 8];
    fill(xs, 16, 1);
    llmc_rt_tensor in = {LLMC_RT_F32, 3, {1, 2, 8}, xs};
    CHECK(pass_keeps_values(&llmc_pass_cse, &g, 2, &in, 0, &rep), "cse chains: same values, bit for bit");
    CHECK(count_op(&g, "ReduceMean") == 1 && count_op(&g, "Div") == 1 && count_op(&g, "Mul") == 1,
          "cse chains: one ReduceMean, one Div, one Mul left (%d, %d, %d)", count_op(&g, "ReduceMean"),
          count_op(&g, "Div"), count_op(&g, "Mul"));
    int add = producer_of(&g, g.outputs[0]);
    CHECK(g.outputs[0] == y && g.nodes[add].inputs[0] == g.nodes[add].inputs[1],
          "cse chains: the Add reads the one Mul twice, graph output unchanged");
    CHECK(strcmp(rep.detail, "3 nodes merged, 1 constants merged") == 0, "cse chains: detail '%s'", rep.detail);
    CHECK(!g.values[two_b].is_const && g.values[two_a].is_const, "cse chains: the later constant is dropped");
    report_free(&rep);
    llmc_graph_free(&g);
}

/* Equal except for one attribute, one constant's dtype or shape: nothing
 * merges. */
static void test_cse_differences(void)
{
    llmc_graph g;
    pass_report rep = {0};
    new_graph(&g);
    int64_t pair[2] = {1, 2};
    float one = 1.0f;
    int32_t one_bits;
    memcpy(&one_bits, &one, sizeof one_bits);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(2), K(4)));
    int s1 = g_node(&g, "Softmax", "s1", NULL, 1, x), s2 = g_node(&g, "Softmax", "s2", NULL, 1, x);
    attr_int(&g, s1, "axis", -1);
    attr_int(&g, s2, "axis", 0);
    int row = g_const(&g, "row", LLMC_DT_INT64, SHAPE(K(2)), pair);
    int col = g_const(&g, "col", LLMC_DT_INT64, SHAPE(K(2), K(1)), pair);
    int f = g_const_f32(&g, "f", SCALAR, &one);
    int i = g_const(&g, "i", LLMC_DT_INT32, SCALAR, &one_bits);
    int cast = g_node(&g, "Cast", "fi", NULL, 1, i);
    attr_int(&g, cast, "to", LLMC_DT_FLOAT);
    g_output(&g, op_value(&g, s1));
    g_output(&g, op_value(&g, s2));
    g_output(&g, OP(&g, "Add", "a1", x, f));
    g_output(&g, OP(&g, "Add", "a2", x, op_value(&g, cast)));
    OP(&g, "Identity", "r1", row);
    OP(&g, "Identity", "r2", col);
    CHECK(infer(&g) == 0, "cse differences: shapes inferred");
    int live = llmc_graph_live_nodes(&g);
    CHECK(run_pass(&llmc_pass_cse, &g, &rep) == 0 && llmc_graph_live_nodes(&g) == live,
          "cse differences: Softmax axis -1 vs 0, float 1.0 vs int32 of the same bits, [2] vs [2,1] "
          "(%d -> %d nodes)", live, llmc_graph_live_nodes(&g));
    CHECK(strcmp(rep.detail, "0 nodes merged, 0 constants merged") == 0, "cse differences: detail '%s'",
          rep.detail);
    report_free(&rep);
    llmc_graph_free(&g);
}

/* Equal nodes that produce graph outputs: the output names must survive. */
static void test_cse_graph_outputs(void)
{
    llmc_graph g;
    pass_report rep = {0};
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(4)));
    int n1 = OP(&g, "Neg", "n1", x), n2 = OP(&g, "Neg", "n2", x);
    g_output(&g, n1);
    g_output(&g, n2);
    CHECK(infer(&g) == 0 && run_pass(&llmc_pass_cse, &g, &rep) == 0, "cse outputs: pass runs");
    CHECK(count_op(&g, "Neg") == 2 && g.outputs[0] == n1 && g.outputs[1] == n2,
          "cse outputs: two graph outputs stay two nodes");
    CHECK(rep.log && strstr(rep.log, "cse: node 'n2' (#1, Neg) not rewritten: equals 'n1' (#0) but both "
                                     "produce graph outputs"),
          "cse outputs: the refusal is explained");
    report_free(&rep);
    llmc_graph_free(&g);

    /* Only the later one is a graph output: it is kept, the earlier goes. */
    new_graph(&g);
    x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(4)));
    n1 = OP(&g, "Neg", "n1", x);
    int a = OP(&g, "Abs", "a", n1);
    n2 = OP(&g, "Neg", "n2", x);
    g_output(&g, a);
    g_output(&g, n2);
    float xs[4] = {1, -2, 3, -4};
    llmc_rt_tensor in = {LLMC_RT_F32, 1, {4}, xs};
    CHECK(infer(&g) == 0 && pass_keeps_values(&llmc_pass_cse, &g, 1, &in, 0, &rep), "cse outputs: same values");
    CHECK(count_op(&g, "Neg") == 1 && producer_of(&g, n1) < 0, "cse outputs: n1's producer is gone");
    CHECK(g.outputs[1] == n2 && g.nodes[producer_of(&g, a)].inputs[0] == n2,
          "cse outputs: the graph output 'n2' is kept and Abs reads it");
    report_free(&rep);
    llmc_graph_free(&g);
}

/* An llmc.Symbols value of one element (a scalar, or [1] if `vector`). */
static int symbols_node(llmc_graph *g, const char *name, const int64_t *values, bool vector)
{
    static const int64_t one = 1;
    int v = llmc_graph_add_value(g, name, LLMC_DT_INT64);
    int node = llmc_graph_add_llmc_node(g, "Symbols", name, NULL, 0, &v, 1);
    llmc_node_set_ints(g, node, "values", values, 3);
    llmc_node_set_ints(g, node, "shape", &one, vector);
    g->values[v].shape = vector ? SHAPE(K(1)) : SCALAR;
    return v;
}

/* llmc.Symbols nodes have no inputs: equal attributes make them equal. */
static void test_cse_symbols(void)
{
    llmc_graph g;
    pass_report rep = {0};
    new_graph(&g);
    int64_t total[3] = {0, 1, 1}, past[3] = {0, 0, 1};
    int t1 = symbols_node(&g, "t1", total, false), t2 = symbols_node(&g, "t2", total, false);
    int p = symbols_node(&g, "p", past, false);
    g_output(&g, OP(&g, "Add", "sum", OP(&g, "Add", "tt", t1, t2), p));
    CHECK(infer(&g) == 0 && run_pass(&llmc_pass_cse, &g, &rep) == 0, "cse symbols: pass runs");
    CHECK(count_op(&g, "Symbols") == 2, "cse symbols: [P+S] twice -> once, [P] stays (%d Symbols)",
          count_op(&g, "Symbols"));
    CHECK(strcmp(rep.detail, "1 nodes merged, 0 constants merged") == 0, "cse symbols: detail '%s'", rep.detail);
    report_free(&rep);
    llmc_graph_free(&g);
}

/* ---- lora-reorder ---- */

enum { LORA_IN = 16, LORA_OUT = 8, LORA_R = 2 };

typedef struct {
    int x, a, b, product, transpose, y;
} lora_graph;

/* y = MatMul(x, Transpose(MatMul(B, A))) * 0.5 with x [1,S,16], A [r,16],
 * B [8,r]: torch's `x @ (B @ A).t() * scale`. */
static lora_graph build_lora(llmc_graph *g, int r, float *a_data, float *b_data)
{
    static const float half = 0.5f;
    lora_graph l;
    new_graph(g);
    fill(a_data, r * LORA_IN, 7);
    fill(b_data, LORA_OUT * r, 8);
    l.x = g_input(g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(LORA_IN)));
    l.a = g_const_f32(g, "lora_a", SHAPE(K(r), K(LORA_IN)), a_data);
    l.b = g_const_f32(g, "lora_b", SHAPE(K(LORA_OUT), K(r)), b_data);
    l.product = OP(g, "MatMul", "ba", l.b, l.a);
    l.transpose = OP(g, "Transpose", "ba_t", l.product);
    int bypass = OP(g, "MatMul", "bypass", l.x, l.transpose);
    l.y = OP(g, "Mul", "scaled", bypass, g_const_f32(g, "scale", SCALAR, &half));
    g_output(g, l.y);
    return l;
}

static bool is_const_of(const llmc_graph *g, int v, int rows, int cols)
{
    const llmc_value *val = &g->values[v];
    return val->is_const && shape_eq(val->shape, SHAPE(K(rows), K(cols)));
}

static void test_lora_transposed(void)
{
    llmc_graph g;
    pass_report rep = {0};
    float a[LORA_R * LORA_IN], b[LORA_OUT * LORA_R], xs[3 * LORA_IN];
    lora_graph l = build_lora(&g, LORA_R, a, b);
    fill(xs, 3 * LORA_IN, 9);
    llmc_rt_tensor in = {LLMC_RT_F32, 3, {1, 3, LORA_IN}, xs};
    CHECK(infer(&g) == 0, "lora x (B A)^T: shapes inferred");
    CHECK(pass_keeps_values(&llmc_pass_lora_reorder, &g, 3, &in, 1e-5f, &rep),
          "lora x (B A)^T: same values within 1e-5 of the largest");
    CHECK(count_op(&g, "Transpose") == 0 && count_op(&g, "MatMul") == 2 && producer_of(&g, l.product) < 0,
          "lora x (B A)^T: the product and its Transpose are gone, two MatMuls remain");
    const llmc_node *scale = &g.nodes[producer_of(&g, l.y)];
    const llmc_node *up = &g.nodes[producer_of(&g, scale->inputs[0])];
    const llmc_node *down = &g.nodes[producer_of(&g, up->inputs[0])];
    CHECK(strcmp(scale->op_type, "Mul") == 0 && down->inputs[0] == l.x,
          "lora x (B A)^T: the scale Mul stays after the bypass, which starts from x");
    const float *at = g.values[down->inputs[1]].konst.data;
    CHECK(is_const_of(&g, down->inputs[1], LORA_IN, LORA_R) && is_const_of(&g, up->inputs[1], LORA_R, LORA_OUT) &&
              at[1] == a[LORA_IN] && at[LORA_R] == a[1],
          "lora x (B A)^T: x A^T [16,2] then B^T [2,8], A^T transposed exactly");
    CHECK(shape_eq(g.values[up->inputs[0]].shape, SHAPE(K(1), SYM_S, K(LORA_R))), "lora: the intermediate is [1,S,2]");
    CHECK(strcmp(rep.detail, "1 bypasses: 128 -> 48 MACs/token, 512 -> 192 weight bytes") == 0,
          "lora x (B A)^T: detail '%s'", rep.detail);
    report_free(&rep);
    llmc_graph_free(&g);
}

/* MatMul(x, MatMul(L, R)) and MatMul(MatMul(L, R), x). */
static void test_lora_plain_forms(void)
{
    llmc_graph g;
    pass_report rep = {0};
    float l_data[LORA_IN * LORA_R], r_data[LORA_R * LORA_OUT], xs[3 * LORA_IN];
    fill(l_data, LORA_IN * LORA_R, 3);
    fill(r_data, LORA_R * LORA_OUT, 4);
    fill(xs, 3 * LORA_IN, 5);
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(3), K(LORA_IN)));
    int left = g_const_f32(&g, "L", SHAPE(K(LORA_IN), K(LORA_R)), l_data);
    int right = g_const_f32(&g, "R", SHAPE(K(LORA_R), K(LORA_OUT)), r_data);
    g_output(&g, OP(&g, "MatMul", "y", x, OP(&g, "MatMul", "lr", left, right)));
    llmc_rt_tensor in = {LLMC_RT_F32, 2, {3, LORA_IN}, xs};
    CHECK(infer(&g) == 0 && pass_keeps_values(&llmc_pass_lora_reorder, &g, 1, &in, 1e-5f, &rep),
          "lora x (L R): same values");
    int down = producer_of(&g, g.nodes[producer_of(&g, g.outputs[0])].inputs[0]);
    CHECK(count_op(&g, "MatMul") == 2 && down >= 0 && g.nodes[down].inputs[0] == x && g.nodes[down].inputs[1] == left,
          "lora x (L R): (x L) R, with L itself");
    report_free(&rep);
    llmc_graph_free(&g);

    /* (L R) x with L [8,2], R [2,16], x [16,3]: L (R x). */
    new_graph(&g);
    x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(LORA_IN), K(3)));
    left = g_const_f32(&g, "L", SHAPE(K(LORA_OUT), K(LORA_R)), r_data);
    right = g_const_f32(&g, "R", SHAPE(K(LORA_R), K(LORA_IN)), l_data);
    g_output(&g, OP(&g, "MatMul", "y", OP(&g, "MatMul", "lr", left, right), x));
    in = (llmc_rt_tensor){LLMC_RT_F32, 2, {LORA_IN, 3}, xs};
    CHECK(infer(&g) == 0 && pass_keeps_values(&llmc_pass_lora_reorder, &g, 1, &in, 1e-5f, &rep),
          "lora (L R) x: same values");
    const llmc_node *up = &g.nodes[producer_of(&g, g.outputs[0])];
    CHECK(count_op(&g, "MatMul") == 2 && up->inputs[0] == left &&
              shape_eq(g.values[up->inputs[1]].shape, SHAPE(K(LORA_R), K(3))),
          "lora (L R) x: L (R x) with R x [2,3]");
    CHECK(strcmp(rep.detail, "1 bypasses: 128 -> 48 MACs/token, 512 -> 192 weight bytes") == 0,
          "lora (L R) x: detail '%s'", rep.detail);
    report_free(&rep);
    llmc_graph_free(&g);
}

/* The pattern with one condition broken: nothing changes, and --explain
 * says which condition. */
static void check_lora_refused(llmc_graph *g, const char *what, const char *why)
{
    pass_report rep = {0};
    int live = llmc_graph_live_nodes(g);
    CHECK(infer(g) == 0 && run_pass(&llmc_pass_lora_reorder, g, &rep) == 0 && llmc_graph_live_nodes(g) == live &&
              count_op(g, "Transpose") == 1,
          "lora refused, %s: graph unchanged", what);
    CHECK(rep.log && strstr(rep.log, "lora-reorder: node 'bypass' (#2, MatMul) not rewritten: ") &&
              strstr(rep.log, why),
          "lora refused, %s: explained (%s)", what, why);
    report_free(&rep);
    llmc_graph_free(g);
}

static void test_lora_refusals(void)
{
    llmc_graph g;
    float a[LORA_IN * LORA_IN], b[LORA_OUT * LORA_IN];
    build_lora(&g, LORA_IN, a, b);
    check_lora_refused(&g, "r = 16 is not below out = 8",
                       "inner dim r = 16 is not smaller than both outer dims (16, 8)");

    lora_graph l = build_lora(&g, LORA_R, a, b);
    g_output(&g, l.product);
    check_lora_refused(&g, "the dense product is also a graph output", "the dense product has other readers");

    l = build_lora(&g, LORA_R, a, b);
    g.values[l.a].is_graph_input = true;
    push_id(&g.inputs, &g.n_inputs, l.a);
    check_lora_refused(&g, "A is an overridable initializer", "the factors are not constant matrices");
}

/* In the pipeline it runs before constant folding: no dense product later. */
static void test_lora_in_pipeline(void)
{
    llmc_graph g;
    float a[LORA_R * LORA_IN], b[LORA_OUT * LORA_R];
    build_lora(&g, LORA_R, a, b);
    llmc_pass_record rec[LLMC_PIPELINE_MAX_PASSES];
    int n_rec = 0;
    llmc_error err = {0};
    llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = 256};
    CHECK(llmc_pipeline_run(&g, &ctx, NULL, rec, &n_rec, &err) == 0, "lora pipeline runs (%s)", err.msg);
    bool dense = false;
    for (int v = 0; v < g.n_values; v++)
        dense |= is_const_of(&g, v, LORA_IN, LORA_OUT) || is_const_of(&g, v, LORA_OUT, LORA_IN);
    CHECK(!dense && count_op(&g, "MatMul") + count_op(&g, "Linear") == 2,
          "lora pipeline: no dense 16x8 product anywhere, two thin products (MatMul or Linear)");
    int reorder_at = -1, folding_at = -1;
    for (int i = 0; i < n_rec; i++) {
        reorder_at = strcmp(rec[i].name, "lora-reorder") == 0 ? i : reorder_at;
        folding_at = strcmp(rec[i].name, "constant-folding") == 0 ? i : folding_at;
    }
    CHECK(reorder_at >= 0 && reorder_at < folding_at && strstr(rec[reorder_at].detail, "1 bypasses"),
          "lora pipeline: lora-reorder (#%d) runs before constant-folding (#%d) and reports '%s'", reorder_at,
          folding_at, reorder_at >= 0 ? rec[reorder_at].detail : "");
    llmc_graph_free(&g);
}

/* ---- slice-fusion ---- */

/* Slice(x, starts, ends, axes, steps) with 1-element bounds. */
static int slice1(llmc_graph *g, const char *name, int x, int64_t start, int64_t end, int64_t axis, int64_t step)
{
    char n[4][64];
    const char *what[4] = {"starts", "ends", "axes", "steps"};
    for (int i = 0; i < 4; i++)
        snprintf(n[i], sizeof n[i], "%s_%s", name, what[i]);
    return OP(g, "Slice", name, x, CI64(g, n[0], start), CI64(g, n[1], end), CI64(g, n[2], axis),
              CI64(g, n[3], step));
}

/* The bounds input k of the one Slice left, as a C array. */
static const int64_t *fused_bounds(const llmc_graph *g, int k)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && strcmp(g->nodes[i].op_type, "Slice") == 0)
            return g->values[g->nodes[i].inputs[k]].konst.data;
    return NULL;
}

static bool fused_axis_is(const llmc_graph *g, int64_t start, int64_t end, int64_t axis, int64_t step)
{
    const int64_t *st = fused_bounds(g, 1), *en = fused_bounds(g, 2), *ax = fused_bounds(g, 3),
                  *sp = fused_bounds(g, 4);
    return count_op(g, "Slice") == 1 && st && st[0] == start && en[0] == end && ax[0] == axis && sp[0] == step;
}

/* x [rows, 3] with a constant row count; y = outer(inner(x)) along axis 0. */
static void check_const_dim(const char *what, int64_t rows, const int64_t inner[3], const int64_t outer[3],
                            const int64_t want[3])
{
    llmc_graph g;
    pass_report rep = {0};
    float xs[32 * 3];
    fill(xs, (int)rows * 3, 11);
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(rows), K(3)));
    int in = slice1(&g, "inner", x, inner[0], inner[1], 0, inner[2]);
    g_output(&g, slice1(&g, "outer", in, outer[0], outer[1], 0, outer[2]));
    llmc_rt_tensor t = {LLMC_RT_F32, 2, {rows, 3}, xs};
    CHECK(infer(&g) == 0 && pass_keeps_values(&llmc_pass_slice_fusion, &g, 1, &t, 0, &rep),
          "slice %s: same values", what);
    CHECK(fused_axis_is(&g, want[0], want[1], 0, want[2]), "slice %s: one Slice [%lld:%lld:%lld]", what,
          (long long)want[0], (long long)want[1], (long long)want[2]);
    CHECK(strcmp(rep.detail, "1 Slice pairs fused, 0 left") == 0, "slice %s: detail '%s'", what, rep.detail);
    report_free(&rep);
    llmc_graph_free(&g);
}

static void test_slice_const_dims(void)
{
    /* rows 9,7,5,3,1 then positions 1..3: rows 7,5,3 */
    check_const_dim("[-1::-2][1:4]", 10, (int64_t[]){-1, INT64_MIN, -2}, (int64_t[]){1, 4, 1},
                    (int64_t[]){7, 2, -2});
    /* rows 1,4,7 (end clamped) reversed: 7,4,1 */
    check_const_dim("[1:100:3][::-1]", 10, (int64_t[]){1, 100, 3}, (int64_t[]){-1, -100, -1},
                    (int64_t[]){7, 0, -3});
    /* all rows reversed: the end before row 0 must not read as -1 */
    check_const_dim("[0:10][::-1]", 10, (int64_t[]){0, 10, 1}, (int64_t[]){-1, INT64_MIN, -1},
                    (int64_t[]){9, INT64_MIN, -1});
}

static void test_slice_axes_and_symbols(void)
{
    llmc_graph g;
    pass_report rep = {0};
    float xs[4 * 7 * 6];
    fill(xs, 4 * 7 * 6, 12);

    /* Different axes: x[1:4, :, -4::2]. */
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(4), SYM_S, K(6)));
    int in = slice1(&g, "inner", x, 1, 4, 0, 1);
    g_output(&g, slice1(&g, "outer", in, -4, INT64_MAX, -1, 2));
    llmc_rt_tensor t = {LLMC_RT_F32, 3, {4, 7, 6}, xs};
    CHECK(infer(&g) == 0 && pass_keeps_values(&llmc_pass_slice_fusion, &g, 7, &t, 0, &rep),
          "slice different axes: same values");
    const int64_t *ax = fused_bounds(&g, 3), *st = fused_bounds(&g, 1);
    CHECK(count_op(&g, "Slice") == 1 && ax && ax[0] == 0 && ax[1] == 2 && st[0] == 1 && st[1] == -4,
          "slice different axes: one Slice over axes 0 and 2");
    report_free(&rep);
    llmc_graph_free(&g);

    /* Axis S: x[1:][2:5:2] = x[3:6:2] for every S. */
    new_graph(&g);
    x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(SYM_S, K(4)));
    in = slice1(&g, "inner", x, 1, INT64_MAX, 0, 1);
    g_output(&g, slice1(&g, "outer", in, 2, 5, 0, 2));
    t = (llmc_rt_tensor){LLMC_RT_F32, 2, {7, 4}, xs};
    CHECK(infer(&g) == 0 && pass_keeps_values(&llmc_pass_slice_fusion, &g, 7, &t, 0, &rep),
          "slice on S: same values at S = 7");
    CHECK(fused_axis_is(&g, 3, 6, 0, 2), "slice on S: [1:][2:5:2] -> [3:6:2]");
    report_free(&rep);
    llmc_graph_free(&g);
}

/* The pattern with one condition broken: both Slices stay, explained. */
static void check_slice_refused(llmc_graph *g, const char *what, const char *why)
{
    pass_report rep = {0};
    CHECK(infer(g) == 0 && run_pass(&llmc_pass_slice_fusion, g, &rep) == 0 && count_op(g, "Slice") >= 2,
          "slice refused, %s: no fusion", what);
    CHECK(rep.log && strstr(rep.log, "slice-fusion: node 'outer' (#") &&
              strstr(rep.log, ", Slice) not rewritten: ") && strstr(rep.log, why),
          "slice refused, %s: explained (%s)", what, why);
    CHECK(strcmp(rep.detail, "0 Slice pairs fused, 1 left") == 0, "slice refused, %s: detail '%s'", what,
          rep.detail);
    report_free(&rep);
    llmc_graph_free(g);
}

static void test_slice_refusals(void)
{
    llmc_graph g;
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(SYM_S, K(4)));
    int in = slice1(&g, "inner", x, 0, INT64_MAX, 0, 1);
    g_output(&g, slice1(&g, "outer", in, -2, INT64_MAX, 0, 1));
    check_slice_refused(&g, "negative start on S", "axis 0 (dim [S]): a negative index or step on a symbolic dim");

    new_graph(&g);
    x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(8), K(4)));
    in = slice1(&g, "inner", x, 1, 7, 0, 1);
    g_output(&g, slice1(&g, "outer", in, 0, 2, 1, 1));
    g_output(&g, OP(&g, "Neg", "other", in));
    check_slice_refused(&g, "inner read twice", "the inner Slice 'inner' has other readers");

    new_graph(&g);
    x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(8), K(4)));
    int64_t past[3] = {0, 0, 1};
    in = OP(&g, "Slice", "inner", x, symbols_node(&g, "start", past, true), CI64(&g, "e", 7));
    g_output(&g, slice1(&g, "outer", in, 0, 2, 1, 1));
    check_slice_refused(&g, "start [P] from llmc.Symbols", "Slice 'inner' has bounds that are not constants");
}

/* Three Slices on one axis fuse into one. */
static void test_slice_chain(void)
{
    llmc_graph g;
    pass_report rep = {0};
    float xs[16 * 2];
    fill(xs, 32, 13);
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(16), K(2)));
    int a = slice1(&g, "a", x, 2, 16, 0, 1), b = slice1(&g, "b", a, 1, 12, 0, 2);
    g_output(&g, slice1(&g, "c", b, -1, 0, 0, -1));
    llmc_rt_tensor t = {LLMC_RT_F32, 2, {16, 2}, xs};
    CHECK(infer(&g) == 0 && pass_keeps_values(&llmc_pass_slice_fusion, &g, 1, &t, 0, &rep),
          "slice chain of three: same values");
    /* rows 2..15, then 3,5,...,13, then 13,11,...,5 (position 0 excluded) */
    CHECK(fused_axis_is(&g, 13, 4, 0, -2), "slice chain of three: one Slice [13:4:-2]");
    CHECK(strcmp(rep.detail, "2 Slice pairs fused, 0 left") == 0, "slice chain of three: detail '%s'", rep.detail);
    report_free(&rep);
    llmc_graph_free(&g);
}

int main(void)
{
    test_cse_chains();
    test_cse_differences();
    test_cse_graph_outputs();
    test_cse_symbols();
    test_lora_transposed();
    test_lora_plain_forms();
    test_lora_refusals();
    test_lora_in_pipeline();
    test_slice_const_dims();
    test_slice_axes_and_symbols();
    test_slice_refusals();
    test_slice_chain();
    return TAP_DONE();
}
