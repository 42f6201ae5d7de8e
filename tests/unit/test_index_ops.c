/* Trilu, ScatterND and CumSum end to end: graphs in the shapes transformers
 * and optimum export (a causal mask from triu over run-time dims, a
 * slice assignment through ScatterND with indices built from shapes,
 * position_ids = cumsum(attention_mask) - 1) go through the whole pass
 * pipeline and codegen and run on the runtime at several (S, P) against C
 * loops; constant folding evaluates a constant Trilu; the verifier refuses
 * malformed Trilu/ScatterND/CumSum ops by name; a scatter index out of
 * range fails the session with a message naming the op. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "graph_util.h"
#include "codegen/evaluate.h"
#include "passes/pipeline.h"
#include "rt_testplan.h"
#include "tap.h"

#define MAX_CTX 32

static int scalar_dim(llmc_graph *g, int x, int64_t axis, const char *tag)
{
    char n1[64], n2[64], n3[64];
    snprintf(n1, sizeof n1, "%s_shape", tag);
    snprintf(n2, sizeof n2, "%s_axis", tag);
    snprintf(n3, sizeof n3, "%s_dim", tag);
    return OP(g, "Gather", n3, OP(g, "Shape", n1, x), g_scalar_i64(g, n2, axis));
}

static int unsqueeze0(llmc_graph *g, int x, const char *tag)
{
    char n1[64], n2[64];
    snprintf(n1, sizeof n1, "%s_axes", tag);
    snprintf(n2, sizeof n2, "%s_vec", tag);
    return OP(g, "Unsqueeze", n2, x, CI64(g, n1, 0));
}

static int pipeline(llmc_graph *g, llmc_error *err)
{
    llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = MAX_CTX};
    llmc_pass_record rec[LLMC_PIPELINE_MAX_PASSES];
    int n_rec = 0;
    memset(err, 0, sizeof *err);
    return llmc_pipeline_run(g, &ctx, NULL, rec, &n_rec, err);
}

static void free_outputs(llmc_eval_tensor *out, int n)
{
    for (int i = 0; i < n; i++)
        llmc_eval_tensor_free(&out[i]);
}

/* ---- causal mask: triu(full((S, P+S), -1e9), diagonal = P + 1) ---------- */

static void build_mask(llmc_graph *g)
{
    llmc_graph_init(g);
    g->opset = 17;
    int x = g_input(g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S));
    int past = g_input(g, "past", LLMC_DT_FLOAT, SHAPE(K(1), K(1), SYM_P, K(2)));
    int s = scalar_dim(g, x, 1, "s"), p = scalar_dim(g, past, 2, "p");
    int total = OP(g, "Add", "total", s, p);
    int shape = OP(g, "Concat", "mask_shape", unsqueeze0(g, s, "s"), unsqueeze0(g, total, "t"));
    attr_int(g, producer_of(g, shape), "axis", 0);
    float big = -1e9f;
    int full = OP(g, "Add", "full", OP(g, "ConstantOfShape", "zeros", shape),
                  g_const(g, "min", LLMC_DT_FLOAT, SCALAR, &big));
    int k = OP(g, "Add", "k", p, g_scalar_i64(g, "one", 1));
    int mask = OP(g, "Trilu", "mask", full, k);                     /* computed k */
    int fixed = OP(g, "Trilu", "fixed", full, g_scalar_i64(g, "k1", 1)); /* constant k */
    int lower = OP(g, "Trilu", "lower", full);                       /* no k, lower */
    attr_int(g, producer_of(g, lower), "upper", 0);
    g_output(g, mask);
    g_output(g, fixed);
    g_output(g, lower);
}

static bool mask_ok(const llmc_eval_tensor *t, int S, int P, int64_t k, bool upper)
{
    const float *m = t->data;
    if (t->dtype != LLMC_DT_FLOAT || t->shape.rank != 2 || t->shape.dims[0].c != S ||
        t->shape.dims[1].c != P + S)
        return false;
    for (int i = 0; i < S; i++)
        for (int j = 0; j < P + S; j++) {
            bool keep = upper ? j - i >= k : j - i <= k;
            if (m[i * (P + S) + j] != (keep ? -1e9f : 0.0f))
                return false;
        }
    return true;
}

static void test_causal_mask(void)
{
    llmc_graph g;
    llmc_error err;
    build_mask(&g);
    CHECK(pipeline(&g, &err) == LLMC_OK, "causal-mask graph through the pipeline (%s)", err.msg);
    CHECK(count_op(&g, "Trilu") == 3 && shape_eq(g.values[g.outputs[0]].shape,
                                                  SHAPE(SYM_S, AFF(0, 1, 1))),
          "three Trilu nodes left, mask shape [S, P+S]");
    static const int runs[][2] = {{1, 0}, {4, 0}, {1, 6}, {3, 5}, {7, 9}};
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        int S = runs[r][0], P = runs[r][1];
        float xs[MAX_CTX] = {0}, ps[2 * MAX_CTX] = {0};
        llmc_rt_tensor in[2] = {{LLMC_RT_F32, 2, {1, S}, xs}, {LLMC_RT_F32, 4, {1, 1, P, 2}, ps}};
        llmc_eval_tensor out[3];
        memset(out, 0, sizeof out);
        int rc = llmc_evaluate_graph(&g, (uint32_t)S, (uint32_t)P, MAX_CTX, in, out, &err);
        CHECK(rc == LLMC_OK && mask_ok(&out[0], S, P, P + 1, true) &&
              mask_ok(&out[1], S, P, 1, true) && mask_ok(&out[2], S, P, 0, false),
              "S=%d P=%d: triu k=P+1 (computed), triu k=1 (constant), tril k=0 match loops (%s)",
              S, P, err.msg);
        free_outputs(out, 3);
    }
    llmc_graph_free(&g);
}

/* ---- slice assignment: d[P:P+S] = u, indices built from shapes ---------- */

/* Index rows built from shapes, as [S, 1] indices: Range(0, S) + P (the
 * new rows), Range(0, S) - S (the same rows, negative), or Range(0, S) + P
 * + 1 (one past the end). */
enum { ROWS_PAST, ROWS_NEGATIVE, ROWS_PAST_END };

static void build_scatter(llmc_graph *g, int form)
{
    llmc_graph_init(g);
    g->opset = 17;
    int d = g_input(g, "d", LLMC_DT_FLOAT, SHAPE(AFF(0, 1, 1), K(3)));
    int u = g_input(g, "u", LLMC_DT_FLOAT, SHAPE(SYM_S, K(3)));
    int s = scalar_dim(g, u, 0, "s");
    int rows = OP(g, "Range", "rows", g_scalar_i64(g, "zero", 0), s, g_scalar_i64(g, "step", 1));
    int p = OP(g, "Sub", "p", scalar_dim(g, d, 0, "t"), s);
    int offset = form == ROWS_NEGATIVE ? OP(g, "Neg", "minus_s", s)
               : form == ROWS_PAST ? p : OP(g, "Add", "p1", p, g_scalar_i64(g, "one", 1));
    int shifted = OP(g, "Add", "shifted", rows, offset);
    int idx = OP(g, "Unsqueeze", "idx", shifted, CI64(g, "last", 1));
    int y = OP(g, "ScatterND", "assign", d, idx, u);
    g_output(g, y);
}

static int run_scatter(llmc_graph *g, int S, int P, float *d, float *u, llmc_eval_tensor *out,
                       llmc_error *err)
{
    llmc_rt_tensor in[2] = {{LLMC_RT_F32, 2, {P + S, 3}, d}, {LLMC_RT_F32, 2, {S, 3}, u}};
    memset(out, 0, sizeof *out);
    return llmc_evaluate_graph(g, (uint32_t)S, (uint32_t)P, MAX_CTX, in, out, err);
}

static bool scatter_ok(const llmc_eval_tensor *t, const float *d, const float *u, int S, int P)
{
    const float *y = t->data;
    for (int r = 0; r < P + S; r++)
        for (int c = 0; c < 3; c++)
            if (y[r * 3 + c] != (r >= P ? u[(r - P) * 3 + c] : d[r * 3 + c]))
                return false;
    return t->shape.dims[0].c == P + S;
}

static void test_scatter_assign(void)
{
    static const char *const what[2] = {"rows P + i", "rows i - S (negative, wrapping)"};
    float d[3 * MAX_CTX], u[3 * MAX_CTX];
    for (int i = 0; i < 3 * MAX_CTX; i++) {
        d[i] = (float)i;
        u[i] = -100.0f - (float)i;
    }
    llmc_error err;
    for (int form = ROWS_PAST; form <= ROWS_NEGATIVE; form++) {
        llmc_graph g;
        build_scatter(&g, form);
        CHECK(pipeline(&g, &err) == LLMC_OK && count_op(&g, "ScatterND") == 1,
              "slice assignment via %s through the pipeline (%s)", what[form], err.msg);
        static const int runs[][2] = {{1, 0}, {4, 0}, {1, 6}, {3, 5}};
        for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
            int S = runs[r][0], P = runs[r][1];
            llmc_eval_tensor out;
            int rc = run_scatter(&g, S, P, d, u, &out, &err);
            CHECK(rc == LLMC_OK && scatter_ok(&out, d, u, S, P),
                  "S=%d P=%d: ScatterND with %s = d with rows P.. replaced (%s)", S, P,
                  what[form], err.msg);
            llmc_eval_tensor_free(&out);
        }
        llmc_graph_free(&g);
    }
    /* indices one past the end at run time: an error naming the op */
    llmc_graph g;
    build_scatter(&g, ROWS_PAST_END);
    CHECK(pipeline(&g, &err) == LLMC_OK, "off-by-one assignment compiles (%s)", err.msg);
    llmc_eval_tensor out;
    int rc = run_scatter(&g, 3, 2, d, u, &out, &err);
    CHECK(rc == LLMC_E_RUNTIME && strstr(err.msg, "ScatterND 'assign'") &&
          strstr(err.msg, "index 5 (tuple 2, axis 0) is outside [-5, 5)"),
          "index P+S at run time: %s", err.msg);
    llmc_eval_tensor_free(&out);
    llmc_graph_free(&g);
}

/* ---- position_ids = cumsum(attention_mask, -1) - 1 ----------------------- */

static void test_position_ids(void)
{
    llmc_graph g;
    llmc_error err;
    llmc_graph_init(&g);
    g.opset = 14;
    int mask = g_input(&g, "mask", LLMC_DT_INT64, SHAPE(K(1), AFF(0, 1, 1)));
    int cs = OP(&g, "CumSum", "cs", mask, g_scalar_i64(&g, "axis", -1));
    int pos = OP(&g, "Sub", "pos", cs, g_scalar_i64(&g, "one", 1));
    int fm = OP(&g, "Cast", "fmask", mask);
    attr_int(&g, producer_of(&g, fm), "to", LLMC_DT_FLOAT);
    int32_t axis0 = 0;
    int rev = OP(&g, "CumSum", "rev", fm, g_const(&g, "axis32", LLMC_DT_INT32, SCALAR, &axis0));
    attr_int(&g, producer_of(&g, rev), "exclusive", 1);
    attr_int(&g, producer_of(&g, rev), "reverse", 1);
    int rev1 = OP(&g, "CumSum", "rev1", fm, g_scalar_i64(&g, "axis1", 1));
    attr_int(&g, producer_of(&g, rev1), "exclusive", 1);
    attr_int(&g, producer_of(&g, rev1), "reverse", 1);
    g_output(&g, pos);
    g_output(&g, rev);
    g_output(&g, rev1);
    CHECK(pipeline(&g, &err) == LLMC_OK && count_op(&g, "CumSum") == 3,
          "position_ids graph through the pipeline (%s)", err.msg);
    static const int runs[][2] = {{1, 0}, {5, 0}, {1, 7}, {4, 3}};
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        int S = runs[r][0], P = runs[r][1], n = P + S;
        int64_t m[MAX_CTX];
        for (int i = 0; i < n; i++)
            m[i] = i % 4 != 1 || i == n - 1; /* padding holes */
        llmc_rt_tensor in = {LLMC_RT_I64, 2, {1, n}, m};
        llmc_eval_tensor out[3];
        memset(out, 0, sizeof out);
        int rc = llmc_evaluate_graph(&g, (uint32_t)S, (uint32_t)P, MAX_CTX, &in, out, &err);
        bool ok = rc == LLMC_OK;
        int64_t run = 0;
        double tail = 0;
        for (int i = 0; ok && i < n; i++) {
            run += m[i];
            ok = ((const int64_t *)out[0].data)[i] == run - 1 &&
                 ((const float *)out[1].data)[i] == (float)m[i] * 0.0f;
        }
        for (int i = n - 1; ok && i >= 0; i--) {
            ok = ((const float *)out[2].data)[i] == (float)tail;
            tail += (double)m[i];
        }
        CHECK(ok, "S=%d P=%d: cumsum(mask) - 1 with padding holes; exclusive reverse "
              "sums on axes 0 and 1 (%s)", S, P, err.msg);
        free_outputs(out, 3);
    }
    llmc_graph_free(&g);
}

/* ---- constant folding runs the kernels ------------------------------------ */

static void test_folding(void)
{
    llmc_graph g;
    llmc_error err;
    llmc_graph_init(&g);
    g.opset = 17;
    int32_t x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    int c = g_const(&g, "c", LLMC_DT_INT32, SHAPE(K(3), K(3)), x);
    int t = OP(&g, "Trilu", "t", c, g_scalar_i64(&g, "kneg", -1));
    attr_int(&g, producer_of(&g, t), "upper", 0);
    int cs = OP(&g, "CumSum", "cs", t, g_scalar_i64(&g, "ax", 1));
    int y = OP(&g, "Add", "y", g_input(&g, "in", LLMC_DT_INT32, SHAPE(K(3), K(3))), cs);
    g_output(&g, y);
    CHECK(pipeline(&g, &err) == LLMC_OK && count_op(&g, "Trilu") == 0 && count_op(&g, "CumSum") == 0,
          "constant Trilu -> CumSum folded away (%s)", err.msg);
    int32_t zero[9] = {0};
    llmc_rt_tensor in = {LLMC_RT_I32, 2, {3, 3}, zero};
    llmc_eval_tensor out;
    memset(&out, 0, sizeof out);
    static const int32_t want[9] = {0, 0, 0, 4, 4, 4, 7, 15, 15};
    int rc = llmc_evaluate_graph(&g, 1, 0, MAX_CTX, &in, &out, &err);
    CHECK(rc == LLMC_OK && !memcmp(out.data, want, sizeof want),
          "folded cumsum(tril(c, -1), axis 1) = [[0,0,0],[4,4,4],[7,15,15]] (%s)", err.msg);
    llmc_eval_tensor_free(&out);
    llmc_graph_free(&g);
}

/* ---- codegen refusals ------------------------------------------------------ */

static int attr_string(llmc_graph *g, int node, const char *name, const char *s)
{
    llmc_attr a = {.name = (char *)name, .type = LLMC_ATTR_STRING, .s = (char *)s};
    return llmc_node_add_attr(g, node, &a);
}

static void test_refusals(void)
{
    llmc_graph g;
    llmc_error err;
    llmc_graph_init(&g);
    g.opset = 17;
    int d = g_input(&g, "d", LLMC_DT_FLOAT, SHAPE(K(4)));
    int64_t one = 1;
    int y = OP(&g, "ScatterND", "sc", d, g_const(&g, "i", LLMC_DT_INT64, SHAPE(K(1), K(1)), &one),
               g_input(&g, "u", LLMC_DT_FLOAT, SHAPE(K(1))));
    attr_string(&g, producer_of(&g, y), "reduction", "median");
    g_output(&g, y);
    int rc = pipeline(&g, &err);
    if (!rc) {
        llmc_eval_tensor out;
        float dv[4] = {0}, uv[1] = {0};
        llmc_rt_tensor in[2] = {{LLMC_RT_F32, 1, {4}, dv}, {LLMC_RT_F32, 1, {1}, uv}};
        memset(&out, 0, sizeof out);
        rc = llmc_evaluate_graph(&g, 1, 0, MAX_CTX, in, &out, &err);
        llmc_eval_tensor_free(&out);
    }
    CHECK(rc == LLMC_E_UNSUPPORTED && strstr(err.msg, "node 'sc'") &&
          strstr(err.msg, "reduction 'median' is not supported"), "reduction 'median': %s", err.msg);
    llmc_graph_free(&g);

    llmc_graph_init(&g);
    g.opset = 14;
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(2), K(3)));
    int ax = g_input(&g, "ax", LLMC_DT_INT64, SCALAR);
    g_output(&g, OP(&g, "CumSum", "cs", x, ax));
    rc = pipeline(&g, &err);
    if (!rc) {
        float xv[6] = {0};
        int64_t av = 0;
        llmc_rt_tensor in[2] = {{LLMC_RT_F32, 2, {2, 3}, xv}, {LLMC_RT_I64, 0, {0}, &av}};
        llmc_eval_tensor out;
        memset(&out, 0, sizeof out);
        rc = llmc_evaluate_graph(&g, 1, 0, MAX_CTX, in, &out, &err);
        llmc_eval_tensor_free(&out);
    }
    CHECK(rc == LLMC_E_UNSUPPORTED && strstr(err.msg, "CumSum") && strstr(err.msg, "'ax'"),
          "CumSum with a run-time axis refused: %s", err.msg);
    llmc_graph_free(&g);

    llmc_graph_init(&g);
    g.opset = 14;
    g_output(&g, OP(&g, "Trilu", "tv", g_input(&g, "v", LLMC_DT_FLOAT, SHAPE(K(5)))));
    rc = pipeline(&g, &err);
    CHECK(rc == LLMC_E_INPUT && strstr(err.msg, "rank >= 2"), "Trilu on a vector: %s", err.msg);
    llmc_graph_free(&g);
}

/* ---- hand-written plans: run, runtime error, verifier defects ------------- */

enum { V_VALID, V_SCATTER_PAST, V_TRILU_KIND, V_TRILU_K32, V_TRILU_DIMS, V_TRILU_ARITY,
       V_SCATTER_I32, V_SCATTER_Q, V_SCATTER_UPD, V_SCATTER_KIND, V_CUMSUM_AXIS, V_CUMSUM_I8,
       V_CUMSUM_DIMS };

static int64_t tp_k = 1, tp_idx_ok = -1, tp_idx_past = 5, tp_idx_q[3] = {-1, 0, 0};
static float tp_upd[4] = {10, 20, 30, 40};
static int32_t tp_k32 = 1;

/* x [S, 4] -> Trilu(k = 1) -> t -> ScatterND(indices [[-1]], updates [1, 4]) -> u
 * -> CumSum axis 0 -> c */
static uint8_t *build_plan(int v, size_t *size)
{
    static tp_plan tp;
    tp_init(&tp, 8);
    int x = tp_tensor(&tp, "x", "Float32", "S,4");
    int k = v == V_TRILU_K32 ? tp_weight(&tp, "k", "Int32", "", &tp_k32, 4)
                             : tp_weight(&tp, "k", "Int64", "", &tp_k, 8);
    int idx = tp_weight(&tp, "idx", v == V_SCATTER_I32 ? "Int32" : "Int64",
                        v == V_SCATTER_Q ? "1,3" : "1,1",
                        v == V_SCATTER_PAST ? &tp_idx_past : v == V_SCATTER_Q ? tp_idx_q : &tp_idx_ok,
                        v == V_SCATTER_I32 ? 4 : v == V_SCATTER_Q ? 24 : 8);
    int upd = tp_weight(&tp, "upd", "Float32", v == V_SCATTER_UPD ? "1,3" : "1,4", tp_upd,
                        v == V_SCATTER_UPD ? 12 : 16);
    int t = tp_tensor(&tp, "t", "Float32", v == V_TRILU_DIMS ? "S,3" : "S,4");
    int u = tp_tensor(&tp, "u", "Float32", "S,4");
    int c = tp_tensor(&tp, "c", v == V_CUMSUM_I8 ? "Int8" : "Float32",
                      v == V_CUMSUM_DIMS ? "S+1,4" : "S,4");
    if (v == V_CUMSUM_I8)
        c = tp_tensor(&tp, "c8", "Int8", "S,4");
    tp_op(&tp, "code: \"Trilu\", name: \"tri\", kind: %d, inputs: [%d, %d%s], outputs: [%d]",
          v == V_TRILU_KIND ? 2 : 1, x, k, v == V_TRILU_ARITY ? ", 0" : "", t);
    tp_op(&tp, "code: \"ScatterND\", name: \"scat\", kind: %d, inputs: [%d, %d, %d], "
          "outputs: [%d]", v == V_SCATTER_KIND ? 9 : 0, t, idx, upd, u);
    if (v == V_CUMSUM_I8) {
        int u8 = tp_tensor(&tp, "u8", "Int8", "S,4");
        tp_op(&tp, "code: \"Cast\", name: \"to_i8\", inputs: [%d], outputs: [%d]", u, u8);
        u = u8;
    }
    tp_op(&tp, "code: \"CumSum\", name: \"csum\", axis: %d, inputs: [%d], outputs: [%d]",
          v == V_CUMSUM_AXIS ? 2 : 0, u, c);
    tp_io(&tp, 0, x, "Generic", 0);
    tp_io(&tp, 1, c, "Generic", 0);
    return tp_finish(&tp, "index_ops", size);
}

static void expect_defect(int v, const char *needle, const char *what)
{
    size_t size;
    llmc_rt_plan plan;
    llmc_rt_error e = {LLMC_RT_OK, ""};
    uint8_t *bytes = build_plan(v, &size);
    llmc_rt_status st = bytes ? llmc_rt_plan_open(&plan, bytes, size, 0, &e) : LLMC_RT_E_ARG;
    CHECK(st == LLMC_RT_E_CORRUPT && strstr(e.msg, needle), "verifier: %s: %s", what, e.msg);
    free(bytes);
}

static llmc_rt_status run_hand_plan(int v, int S, float *x, float *c, llmc_rt_error *e)
{
    size_t size;
    llmc_rt_plan plan;
    llmc_rt_session s;
    uint8_t *bytes = build_plan(v, &size);
    llmc_rt_status st = bytes ? llmc_rt_plan_open(&plan, bytes, size, LLMC_RT_VERIFY_HASHES, e)
                              : LLMC_RT_E_ARG;
    void *mem = st ? NULL : malloc(llmc_rt_session_memory(&plan));
    llmc_rt_tensor in = {LLMC_RT_F32, 2, {S, 4}, x}, out;
    if (!st)
        st = llmc_rt_session_init(&s, &plan, mem, llmc_rt_session_memory(&plan), e);
    if (!st)
        st = llmc_rt_session_run(&s, (uint32_t)S, 0, &in, e);
    if (!st)
        st = llmc_rt_session_output(&s, 0, &out, e);
    if (!st)
        memcpy(c, out.data, sizeof(float) * (size_t)(S * 4));
    free(mem);
    free(bytes);
    return st;
}

static void test_plans(void)
{
    enum { S = 3 };
    float x[S * 4], c[S * 4], want[S * 4];
    for (int i = 0; i < S * 4; i++)
        x[i] = (float)(i + 1);
    for (int j = 0; j < 4; j++) { /* triu k=1, last row := upd, cumsum over rows */
        float acc = 0;
        for (int i = 0; i < S; i++) {
            acc += i == S - 1 ? tp_upd[j] : (j - i >= 1 ? x[i * 4 + j] : 0.0f);
            want[i * 4 + j] = acc;
        }
    }
    llmc_rt_error e = {LLMC_RT_OK, ""};
    CHECK(run_hand_plan(V_VALID, S, x, c, &e) == LLMC_RT_OK && !memcmp(c, want, sizeof c),
          "plan Trilu -> ScatterND -> CumSum verifies and runs at S=3 (%s)", e.msg);
    CHECK(run_hand_plan(V_SCATTER_PAST, S, x, c, &e) == LLMC_RT_E_EXEC &&
          strstr(e.msg, "op 1 (ScatterND 'scat')") && strstr(e.msg, "index 5 (tuple 0, axis 0) "
                                                            "is outside [-3, 3)"),
          "an index past the rows fails the run: %s", e.msg);
    expect_defect(V_TRILU_KIND, "op 0 (Trilu 'tri'): kind 2", "Trilu kind 2");
    expect_defect(V_TRILU_K32, "op 0 (Trilu 'tri'): k must be one int64", "Trilu int32 k");
    expect_defect(V_TRILU_DIMS, "op 0 (Trilu 'tri'): x must have rank >= 2 and the output",
                  "Trilu output dims [S, 3] for x [S, 4]");
    expect_defect(V_TRILU_ARITY, "Trilu takes 1..2 inputs", "Trilu with 3 inputs");
    expect_defect(V_SCATTER_I32, "op 1 (ScatterND 'scat'): kind 0: ScatterND takes",
                  "ScatterND int32 indices");
    expect_defect(V_SCATTER_Q, "indices must be [..., q] with a constant q <= the rank 2",
                  "ScatterND indices [1, 3] into rank 2");
    expect_defect(V_SCATTER_UPD, "updates must have dims indices[:-1] + data[1:]",
                  "ScatterND updates [1, 3] for data [S, 4]");
    expect_defect(V_SCATTER_KIND, "kind 9: ScatterND", "ScatterND reduction 9");
    expect_defect(V_CUMSUM_AXIS, "op 2 (CumSum 'csum'): axis 2 outside rank 2", "CumSum axis 2");
    expect_defect(V_CUMSUM_I8, "(CumSum 'csum'): kind 0, dtype 3", "CumSum on int8");
    expect_defect(V_CUMSUM_DIMS, "the output must have x's dtype and dims",
                  "CumSum output [S+1, 4]");
}

int main(void)
{
    test_causal_mask();
    test_scatter_assign();
    test_position_ids();
    test_folding();
    test_refusals();
    test_plans();
    return TAP_DONE();
}
