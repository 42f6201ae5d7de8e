/* shape-inference, constant-folding, dead-code and the pipeline on
 * hand-built graphs, with expected shapes, bytes and node counts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph_util.h"
#include "ir/ir_dump.h"
#include "passes/pipeline.h"
#include "passes/shape_inference.h"
#include "passes/symbolic.h"
#include "tap.h"
#include "codegen/evaluate.h"

static const llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = 4096};

static void new_graph(llmc_graph *g)
{
    llmc_graph_init(g);
    g->opset = 17;
}

static int run_pass(const llmc_pass *pass, llmc_graph *g, llmc_error *err)
{
    memset(err, 0, sizeof *err);
    return pass->run(g, &ctx, err);
}

static int infer(llmc_graph *g, llmc_error *err)
{
    return run_pass(&llmc_pass_shape_inference, g, err);
}

static void shape_str(llmc_shape s, char *buf)
{
    llmc_shape_format(&s, buf, 256);
}

#define CHECK_SHAPE(g, v, want, what)                                                     \
    do {                                                                                  \
        char got_[256], exp_[256];                                                        \
        shape_str((g)->values[v].shape, got_);                                            \
        shape_str((want), exp_);                                                          \
        CHECK(shape_eq((g)->values[v].shape, (want)), "%s: %s (got %s)", (what), exp_, got_); \
    } while (0)

static bool sym_is(const llmc_graph *g, int v, int n, const llmc_affine *want)
{
    if (g->values[v].n_sym != n)
        return false;
    for (int i = 0; i < n; i++)
        if (!llmc_aff_eq(g->values[v].sym[i], want[i]))
            return false;
    return true;
}
#define SYM_IS(g, v, ...)                                                                  \
    sym_is((g), (v), (int)(sizeof((llmc_affine[]){__VA_ARGS__}) / sizeof(llmc_affine)),    \
           (llmc_affine[]){__VA_ARGS__})

/* The record of the pass called `name` (the pipeline keeps growing, so
 * tests look passes up by name, not by position). */
static const llmc_pass_record *record_named(const llmc_pass_record *rec, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(rec[i].name, name) == 0)
            return &rec[i];
    static const llmc_pass_record missing = {.name = "missing"};
    return &missing;
}

/* dims[i] of a value as a 1-element int64 tensor: Shape -> Gather -> Unsqueeze */
static int dim_of(llmc_graph *g, int shape_value, int64_t i, const char *tag)
{
    char n1[64], n2[64], n3[64];
    snprintf(n1, sizeof n1, "%s_idx", tag);
    snprintf(n2, sizeof n2, "%s_gather", tag);
    snprintf(n3, sizeof n3, "%s_unsq", tag);
    int idx = g_scalar_i64(g, n1, i);
    int gathered = OP(g, "Gather", n2, shape_value, idx);
    int axes = CI64(g, n3, 0);
    return OP(g, "Unsqueeze", n3, gathered, axes);
}

/* ---- shape inference, per op ---- */

static void test_broadcasting(void)
{
    llmc_graph g;
    llmc_error err;
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(896)));
    int b = g_input(&g, "b", LLMC_DT_FLOAT, SHAPE(K(896)));
    int p = g_input(&g, "p", LLMC_DT_FLOAT, SHAPE(K(2), K(1), K(4)));
    int q = g_input(&g, "q", LLMC_DT_FLOAT, SHAPE(K(3), K(1)));
    int m = g_input(&g, "m", LLMC_DT_BOOL, SHAPE(K(1), K(1), SYM_S, AFF(0, 1, 1)));
    int bias = g_input(&g, "bias", LLMC_DT_FLOAT, SHAPE(K(1), K(1), K(1), AFF(0, 1, 1)));
    int y = OP(&g, "Add", "y", x, b);
    int pq = OP(&g, "Mul", "pq", p, q);
    int cmp = OP(&g, "Less", "cmp", x, b);
    int w = OP(&g, "Where", "w", m, bias, OP(&g, "Neg", "nb", bias));
    int mx = OP(&g, "Max", "mx", q, p, p);
    CHECK(infer(&g, &err) == LLMC_OK, "broadcast graph infers (%s)", err.msg);
    CHECK_SHAPE(&g, y, SHAPE(K(1), SYM_S, K(896)), "[1,S,896] + [896]");
    CHECK_SHAPE(&g, pq, SHAPE(K(2), K(3), K(4)), "[2,1,4] * [3,1]");
    CHECK_SHAPE(&g, w, SHAPE(K(1), K(1), SYM_S, AFF(0, 1, 1)), "Where([1,1,S,P+S] mask, [1,1,1,P+S] values)");
    CHECK(g.values[cmp].dtype == LLMC_DT_BOOL && g.values[y].dtype == LLMC_DT_FLOAT, "comparison gives bool");
    CHECK_SHAPE(&g, mx, SHAPE(K(2), K(3), K(4)), "variadic Max");
    llmc_graph_free(&g);

    new_graph(&g);
    int a = g_input(&g, "a", LLMC_DT_FLOAT, SHAPE(K(3)));
    int c = g_input(&g, "c", LLMC_DT_FLOAT, SHAPE(K(4)));
    OP(&g, "Add", "bad_add", a, c);
    int rc = infer(&g, &err);
    CHECK(rc == LLMC_E_INPUT && strstr(err.msg, "node 'bad_add'") && strstr(err.msg, "[3]") &&
              strstr(err.msg, "[4]"),
          "[3] + [4] is LLMC_E_INPUT naming node and shapes: %s", err.msg);
    llmc_graph_free(&g);

    new_graph(&g);
    a = g_input(&g, "a", LLMC_DT_FLOAT, SHAPE(SYM_S));
    c = g_input(&g, "c", LLMC_DT_FLOAT, SHAPE(K(4)));
    OP(&g, "Add", "maybe", a, c);
    CHECK(infer(&g, &err) == LLMC_E_UNSUPPORTED, "[S] + [4] cannot be proven: %s", err.msg);
    llmc_graph_free(&g);
}

static void test_reshape(void)
{
    llmc_graph g;
    llmc_error err;
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(896)));
    int r1 = OP(&g, "Reshape", "r1", x, CI64(&g, "t1", 0, 0, 14, 64));
    int r2 = OP(&g, "Reshape", "r2", x, CI64(&g, "t2", 1, -1, 14, 64));
    int r3 = OP(&g, "Reshape", "r3", x, CI64(&g, "t3", -1));
    int r4 = OP(&g, "Reshape", "r4", x, CI64(&g, "t4", 2, -1, 7, 64));
    CHECK(infer(&g, &err) == LLMC_OK, "reshapes infer (%s)", err.msg);
    CHECK_SHAPE(&g, r1, SHAPE(K(1), SYM_S, K(14), K(64)), "0 copies the input dim");
    CHECK_SHAPE(&g, r2, SHAPE(K(1), SYM_S, K(14), K(64)), "-1 = (S*896)/(14*64)");
    CHECK_SHAPE(&g, r3, SHAPE(AFF(0, 896, 0)), "-1 alone = 896*S");
    CHECK_SHAPE(&g, r4, SHAPE(K(2), SYM_S, K(7), K(64)), "-1 = (896*S)/(2*7*64)");
    llmc_graph_free(&g);

    new_graph(&g);
    x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(SYM_S, SYM_P));
    OP(&g, "Reshape", "flat", x, CI64(&g, "t", -1));
    CHECK(infer(&g, &err) == LLMC_E_UNSUPPORTED && strstr(err.msg, "node 'flat' (#0, Reshape)") &&
              strstr(err.msg, "output dim 0 is S*P, not affine in (S, P)"),
          "S*P is rejected: %s", err.msg);
    llmc_graph_free(&g);

    new_graph(&g);
    x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(6), K(4)));
    OP(&g, "Reshape", "bad", x, CI64(&g, "t", 5, -1));
    CHECK(infer(&g, &err) == LLMC_E_INPUT, "24 elements into [5,-1] is bad input: %s", err.msg);
    llmc_graph_free(&g);

    new_graph(&g);
    x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(2), SYM_S));
    int f = OP(&g, "Flatten", "f", x);
    int f0 = OP(&g, "Flatten", "f0", x);
    attr_int(&g, producer_of(&g, f0), "axis", 0);
    CHECK(infer(&g, &err) == LLMC_OK, "flatten infers (%s)", err.msg);
    CHECK_SHAPE(&g, f, SHAPE(K(2), SYM_S), "Flatten axis 1");
    CHECK_SHAPE(&g, f0, SHAPE(K(1), AFF(0, 2, 0)), "Flatten axis 0");
    llmc_graph_free(&g);
}

static void test_axes_ops(void)
{
    llmc_graph g;
    llmc_error err;
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(8)));
    int u = OP(&g, "Unsqueeze", "u", x, CI64(&g, "ua", -1, 0));
    int sq = OP(&g, "Squeeze", "sq", x, CI64(&g, "sa", -3));
    int sq_all = OP(&g, "Squeeze", "sq_all", OP(&g, "Reshape", "flat", x, CI64(&g, "fs", 1, -1, 1, 1)));
    int cat = OP(&g, "Concat", "cat", x, x);
    attr_int(&g, producer_of(&g, cat), "axis", -2);
    int gi = OP(&g, "Gather", "gi", x, CI64(&g, "gidx", 0, 7, -1));
    attr_int(&g, producer_of(&g, gi), "axis", -1);
    int sm = OP(&g, "Softmax", "sm", x);
    int tr = OP(&g, "Transpose", "tr", x);
    int tp = OP(&g, "Transpose", "tp", x);
    ATTR_INTS(&g, producer_of(&g, tp), "perm", 0, 2, 1);
    int rm = OP(&g, "ReduceMean", "rm", x);
    ATTR_INTS(&g, producer_of(&g, rm), "axes", -1);
    int rs = OP(&g, "ReduceSum", "rs", x, CI64(&g, "rsa", 1));
    attr_int(&g, producer_of(&g, rs), "keepdims", 0);
    int rall = OP(&g, "ReduceMax", "rall", x);
    attr_int(&g, producer_of(&g, rall), "keepdims", 0);
    int rnoop = OP(&g, "ReduceSum", "rnoop", x);
    attr_int(&g, producer_of(&g, rnoop), "noop_with_empty_axes", 1);
    float one = 1;
    int scale = g_const(&g, "scale", LLMC_DT_FLOAT, SHAPE(K(8)), (float[8]){one, one, one, one, one, one, one, one});
    int ln_y = llmc_graph_add_value(&g, "ln_y", 0), ln_m = llmc_graph_add_value(&g, "ln_m", 0);
    int ln_i = llmc_graph_add_value(&g, "ln_i", 0);
    int ln = llmc_graph_add_node(&g, "LayerNormalization", "ln", (int[]){x, scale}, 2, (int[]){ln_y, ln_m, ln_i}, 3);
    attr_int(&g, ln, "axis", -1);
    int cast = OP(&g, "Cast", "cast", x);
    attr_int(&g, producer_of(&g, cast), "to", LLMC_DT_INT32);
    CHECK(infer(&g, &err) == LLMC_OK, "axis ops infer (%s)", err.msg);
    CHECK_SHAPE(&g, u, SHAPE(K(1), K(1), SYM_S, K(8), K(1)), "Unsqueeze axes [-1, 0]");
    CHECK_SHAPE(&g, sq, SHAPE(SYM_S, K(8)), "Squeeze axes [-3]");
    CHECK_SHAPE(&g, sq_all, SHAPE(AFF(0, 8, 0)), "Squeeze without axes drops every 1");
    CHECK(infer(&g, &err) == LLMC_OK, "re-running is fine");
    CHECK_SHAPE(&g, cat, SHAPE(K(1), AFF(0, 2, 0), K(8)), "Concat axis -2");
    CHECK_SHAPE(&g, gi, SHAPE(K(1), SYM_S, K(3)), "Gather axis -1 with 3 indices");
    CHECK_SHAPE(&g, sm, SHAPE(K(1), SYM_S, K(8)), "Softmax keeps the shape");
    CHECK_SHAPE(&g, tr, SHAPE(K(8), SYM_S, K(1)), "Transpose default perm reverses");
    CHECK_SHAPE(&g, tp, SHAPE(K(1), K(8), SYM_S), "Transpose perm [0,2,1]");
    CHECK_SHAPE(&g, rm, SHAPE(K(1), SYM_S, K(1)), "ReduceMean axes [-1] keepdims");
    CHECK_SHAPE(&g, rs, SHAPE(K(1), K(8)), "ReduceSum axes input, keepdims 0");
    CHECK_SHAPE(&g, rall, SCALAR, "ReduceMax over all axes");
    CHECK_SHAPE(&g, rnoop, SHAPE(K(1), SYM_S, K(8)), "ReduceSum noop_with_empty_axes");
    CHECK_SHAPE(&g, ln_y, SHAPE(K(1), SYM_S, K(8)), "LayerNormalization Y");
    CHECK_SHAPE(&g, ln_m, SHAPE(K(1), SYM_S, K(1)), "LayerNormalization Mean");
    CHECK(g.values[ln_i].dtype == LLMC_DT_FLOAT, "InvStdDev in the stash type");
    CHECK(g.values[cast].dtype == LLMC_DT_INT32, "Cast sets the type");
    llmc_graph_free(&g);

    new_graph(&g);
    x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), K(8)));
    OP(&g, "Gather", "oob", x, CI64(&g, "i", 8));
    attr_int(&g, producer_of(&g, llmc_graph_find_value(&g, "oob")), "axis", 1);
    CHECK(infer(&g, &err) == LLMC_E_INPUT, "Gather index 8 of dim 8: %s", err.msg);
    llmc_graph_free(&g);
}

static int slice(llmc_graph *g, const char *name, int x, int starts, int ends, int axes, int steps)
{
    int ins[5] = {x, starts, ends, axes, steps}, n = steps >= 0 ? 5 : axes >= 0 ? 4 : 3;
    int v = llmc_graph_add_value(g, name, 0);
    llmc_graph_add_node(g, "Slice", name, ins, n, &v, 1);
    return v;
}

static void test_slice(void)
{
    llmc_graph g;
    llmc_error err;
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(10)));
    int a = slice(&g, "a", x, CI64(&g, "a0", -3), CI64(&g, "a1", INT64_MAX), -1, -1);
    int b = slice(&g, "b", x, CI64(&g, "b0", 2), CI64(&g, "b1", -1), CI64(&g, "b2", 0), CI64(&g, "b3", 2));
    int c = slice(&g, "c", x, CI64(&g, "c0", -1), CI64(&g, "c1", INT64_MIN), CI64(&g, "c2", 0), CI64(&g, "c3", -1));
    int d = slice(&g, "d", x, CI64(&g, "d0", 20), CI64(&g, "d1", 30), -1, -1);
    int e = slice(&g, "e", x, CI64(&g, "e0", 8), CI64(&g, "e1", 1), CI64(&g, "e2", -1), CI64(&g, "e3", -3));
    int h = g_input(&g, "h", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(896)));
    int last = slice(&g, "last", h, CI64(&g, "l0", -1), CI64(&g, "l1", INT64_MAX), CI64(&g, "l2", 1), -1);
    int head = slice(&g, "head", h, CI64(&g, "h0", 0), CI64(&g, "h1", 448), CI64(&g, "h2", -1), -1);
    CHECK(infer(&g, &err) == LLMC_OK, "slices infer (%s)", err.msg);
    CHECK_SHAPE(&g, a, SHAPE(K(3)), "[-3:INT64_MAX] of 10");
    CHECK_SHAPE(&g, b, SHAPE(K(4)), "[2:-1:2] of 10");
    CHECK_SHAPE(&g, c, SHAPE(K(10)), "[-1:INT64_MIN:-1] of 10");
    CHECK_SHAPE(&g, d, SHAPE(K(0)), "[20:30] of 10 clamps to empty");
    CHECK_SHAPE(&g, e, SHAPE(K(3)), "[8:1:-3] of 10 (8, 5, 2)");
    CHECK_SHAPE(&g, last, SHAPE(K(1), K(1), K(896)), "last token: [-1:INT64_MAX] of S");
    CHECK_SHAPE(&g, head, SHAPE(K(1), SYM_S, K(448)), "[0:448] on the last axis");
    llmc_graph_free(&g);

    /* Symbolic bounds: the past length P read from past_key's shape. */
    new_graph(&g);
    int past = g_input(&g, "past_key", LLMC_DT_FLOAT, SHAPE(K(1), K(2), SYM_P, K(64)));
    int key = g_input(&g, "key", LLMC_DT_FLOAT, SHAPE(K(1), K(2), AFF(0, 1, 1), K(64)));
    int cache = g_input(&g, "cos_cache", LLMC_DT_FLOAT, SHAPE(K(2048), K(64)));
    int shp = OP(&g, "Shape", "shp", past);
    int p = dim_of(&g, shp, 2, "p");
    int pk = OP(&g, "Shape", "pk", key);
    int total = dim_of(&g, pk, -2, "tot");
    int fresh = slice(&g, "fresh", key, p, total, CI64(&g, "ax", 2), -1);
    int cos = slice(&g, "cos", cache, p, total, CI64(&g, "ax0", 0), -1);
    CHECK(infer(&g, &err) == LLMC_OK, "symbolic slices infer (%s)", err.msg);
    CHECK(SYM_IS(&g, p, SYM_P) && SYM_IS(&g, total, AFF(0, 1, 1)), "starts [P], ends [P+S] are known");
    CHECK_SHAPE(&g, fresh, SHAPE(K(1), K(2), SYM_S, K(64)), "key[:, :, P:P+S]");
    CHECK_SHAPE(&g, cos, SHAPE(SYM_S, K(64)), "cos_cache[P:P+S] (within bounds)");
    llmc_graph_free(&g);
}

static void test_matmul_gemm(void)
{
    llmc_graph g;
    llmc_error err;
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(896)));
    int w = g_input(&g, "w", LLMC_DT_FLOAT, SHAPE(K(896), K(128)));
    int v4 = g_input(&g, "v4", LLMC_DT_FLOAT, SHAPE(K(4)));
    int m45 = g_input(&g, "m45", LLMC_DT_FLOAT, SHAPE(K(4), K(5)));
    int m34 = g_input(&g, "m34", LLMC_DT_FLOAT, SHAPE(K(3), K(4)));
    int b1 = g_input(&g, "b1", LLMC_DT_FLOAT, SHAPE(K(2), K(1), K(3), K(4)));
    int b2 = g_input(&g, "b2", LLMC_DT_FLOAT, SHAPE(K(5), K(4), K(6)));
    int q = g_input(&g, "q", LLMC_DT_FLOAT, SHAPE(K(1), K(14), SYM_S, K(64)));
    int kt = g_input(&g, "kt", LLMC_DT_FLOAT, SHAPE(K(1), K(14), K(64), AFF(0, 1, 1)));
    int y = OP(&g, "MatMul", "y", x, w);
    int vm = OP(&g, "MatMul", "vm", v4, m45);
    int mv = OP(&g, "MatMul", "mv", m34, v4);
    int vv = OP(&g, "MatMul", "vv", v4, v4);
    int bb = OP(&g, "MatMul", "bb", b1, b2);
    int att = OP(&g, "MatMul", "att", q, kt);
    int a = g_input(&g, "a", LLMC_DT_FLOAT, SHAPE(K(2), K(3)));
    int bt = g_input(&g, "bt", LLMC_DT_FLOAT, SHAPE(K(4), K(3)));
    int c = g_input(&g, "c", LLMC_DT_FLOAT, SHAPE(K(4)));
    int gemm = OP(&g, "Gemm", "gemm", a, bt, c);
    attr_int(&g, producer_of(&g, gemm), "transB", 1);
    CHECK(infer(&g, &err) == LLMC_OK, "matmuls infer (%s)", err.msg);
    CHECK_SHAPE(&g, y, SHAPE(K(1), SYM_S, K(128)), "[1,S,896] x [896,128]");
    CHECK_SHAPE(&g, vm, SHAPE(K(5)), "1-D left operand");
    CHECK_SHAPE(&g, mv, SHAPE(K(3)), "1-D right operand");
    CHECK_SHAPE(&g, vv, SCALAR, "1-D x 1-D is a scalar");
    CHECK_SHAPE(&g, bb, SHAPE(K(2), K(5), K(3), K(6)), "batch broadcast");
    CHECK_SHAPE(&g, att, SHAPE(K(1), K(14), SYM_S, AFF(0, 1, 1)), "attention scores [.., S, P+S]");
    CHECK_SHAPE(&g, gemm, SHAPE(K(2), K(4)), "Gemm transB with bias");
    llmc_graph_free(&g);

    new_graph(&g);
    x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(2), K(3)));
    w = g_input(&g, "w", LLMC_DT_FLOAT, SHAPE(K(4), K(5)));
    OP(&g, "MatMul", "mm", x, w);
    CHECK(infer(&g, &err) == LLMC_E_INPUT && strstr(err.msg, "inner dims differ: 3 vs 4"),
          "MatMul inner dims 3 vs 4: %s", err.msg);
    llmc_graph_free(&g);
}

static void test_split_expand_range(void)
{
    llmc_graph g;
    llmc_error err;
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(6), SYM_S));
    int y = g_input(&g, "y", LLMC_DT_FLOAT, SHAPE(K(1), AFF(0, 2, 0)));
    int s1 = llmc_graph_add_value(&g, "s1", 0), s2 = llmc_graph_add_value(&g, "s2", 0);
    llmc_graph_add_node(&g, "Split", "split", (int[]){x, CI64(&g, "sizes", 2, 4)}, 2, (int[]){s1, s2}, 2);
    int e[3];
    for (int i = 0; i < 3; i++)
        e[i] = llmc_graph_add_value(&g, (const char *[]){"e0", "e1", "e2"}[i], 0);
    llmc_graph_add_node(&g, "Split", "even", &x, 1, e, 3);
    int h1 = llmc_graph_add_value(&g, "h1", 0), h2 = llmc_graph_add_value(&g, "h2", 0);
    int halves = llmc_graph_add_node(&g, "Split", "halves", &y, 1, (int[]){h1, h2}, 2);
    attr_int(&g, halves, "axis", -1);
    int col = g_input(&g, "col", LLMC_DT_FLOAT, SHAPE(K(3), K(1)));
    int ex = OP(&g, "Expand", "ex", col, CI64(&g, "eshape", 2, 1, 6));
    int r1 = OP(&g, "Range", "r1", g_scalar_i64(&g, "r1a", 0), g_scalar_i64(&g, "r1b", 5), g_scalar_i64(&g, "r1c", 1));
    int r2 = OP(&g, "Range", "r2", g_scalar_i64(&g, "r2a", 10), g_scalar_i64(&g, "r2b", 0),
                g_scalar_i64(&g, "r2c", -3));
    float fr[3] = {0, 1, 0.25f};
    int r3 = OP(&g, "Range", "r3", g_const(&g, "f0", LLMC_DT_FLOAT, SCALAR, &fr[0]),
                g_const(&g, "f1", LLMC_DT_FLOAT, SCALAR, &fr[1]), g_const(&g, "f2", LLMC_DT_FLOAT, SCALAR, &fr[2]));
    CHECK(infer(&g, &err) == LLMC_OK, "split/expand/range infer (%s)", err.msg);
    CHECK_SHAPE(&g, s1, SHAPE(K(2), SYM_S), "Split [2,4] part 0");
    CHECK_SHAPE(&g, s2, SHAPE(K(4), SYM_S), "Split [2,4] part 1");
    CHECK_SHAPE(&g, e[2], SHAPE(K(2), SYM_S), "equal Split of 6 in 3");
    CHECK_SHAPE(&g, h2, SHAPE(K(1), SYM_S), "equal Split of 2*S in 2 along -1");
    CHECK_SHAPE(&g, ex, SHAPE(K(2), K(3), K(6)), "Expand [3,1] to [2,1,6]");
    CHECK(SYM_IS(&g, r1, K(0), K(1), K(2), K(3), K(4)), "Range(0,5,1) contents");
    CHECK_SHAPE(&g, r2, SHAPE(K(4)), "Range(10,0,-3) has 4 elements");
    CHECK_SHAPE(&g, r3, SHAPE(K(4)), "float Range(0,1,0.25)");
    llmc_graph_free(&g);
}

/* Integer contents through Shape arithmetic; ConstantOfShape; Range(P, P+S). */
static void test_symbolic_contents(void)
{
    llmc_graph g;
    llmc_error err;
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(64)));
    int past = g_input(&g, "past", LLMC_DT_FLOAT, SHAPE(K(1), K(2), SYM_P, K(64)));
    int sx = OP(&g, "Shape", "sx", x);
    int s = dim_of(&g, sx, 1, "s");
    int p = dim_of(&g, OP(&g, "Shape", "sp", past), 2, "p");
    int total = OP(&g, "Add", "total", s, p);
    int twice = OP(&g, "Mul", "twice", s, CI64(&g, "two", 2));
    int half = OP(&g, "Div", "half", twice, CI64(&g, "two_b", 2));
    int mx = OP(&g, "Max", "mx", s, CI64(&g, "one", 1));
    int eq = OP(&g, "Equal", "eq", total, total);
    int pick = OP(&g, "Where", "pick", eq, s, p);
    int tail = OP(&g, "Shape", "tail", x);
    attr_int(&g, producer_of(&g, tail), "start", -2);
    int zeros = OP(&g, "ConstantOfShape", "zeros", sx);
    int pos = OP(&g, "Range", "pos", OP(&g, "Squeeze", "p0", p), OP(&g, "Squeeze", "t0", total),
                 g_scalar_i64(&g, "step", 1));
    int cat = OP(&g, "Concat", "cat", s, p, CI64(&g, "k", 7));
    attr_int(&g, producer_of(&g, cat), "axis", 0);
    int sl = slice(&g, "sl", cat, CI64(&g, "sl0", 1), CI64(&g, "sl1", 3), -1, -1);
    CHECK(infer(&g, &err) == LLMC_OK, "symbolic contents infer (%s)", err.msg);
    CHECK(SYM_IS(&g, sx, K(1), SYM_S, K(64)), "Shape gives its dims");
    CHECK(SYM_IS(&g, total, AFF(0, 1, 1)), "S + P");
    CHECK(SYM_IS(&g, twice, AFF(0, 2, 0)) && SYM_IS(&g, half, SYM_S), "2*S and (2*S)/2");
    CHECK(SYM_IS(&g, mx, SYM_S), "Max(S, 1) = S since S >= 1");
    CHECK(SYM_IS(&g, eq, K(1)) && SYM_IS(&g, pick, SYM_S), "Equal of equal expressions, Where on it");
    CHECK(SYM_IS(&g, tail, SYM_S, K(64)), "Shape start=-2 (opset 15)");
    CHECK_SHAPE(&g, zeros, SHAPE(K(1), SYM_S, K(64)), "ConstantOfShape of Shape");
    CHECK(g.values[zeros].dtype == LLMC_DT_FLOAT, "ConstantOfShape defaults to float");
    CHECK_SHAPE(&g, pos, SHAPE(SYM_S), "Range(P, P+S, 1) has S elements");
    CHECK(SYM_IS(&g, sl, SYM_P, K(7)), "Slice of a Concat of contents");
    llmc_graph_free(&g);
}

static void test_errors(void)
{
    llmc_graph g;
    llmc_error err;
    new_graph(&g);
    int x = llmc_graph_add_value(&g, "mystery", LLMC_DT_FLOAT);
    g.values[x].is_graph_input = true;
    push_id(&g.inputs, &g.n_inputs, x);
    OP(&g, "Relu", "r", x);
    CHECK(infer(&g, &err) == LLMC_E_UNSUPPORTED && strstr(err.msg, "'mystery'"),
          "unknown rank names the value: %s", err.msg);
    llmc_graph_free(&g);

    new_graph(&g);
    x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(4)));
    int sh = g_input(&g, "dyn_shape", LLMC_DT_INT64, SHAPE(K(1)));
    OP(&g, "Reshape", "r", x, sh);
    CHECK(infer(&g, &err) == LLMC_E_UNSUPPORTED && strstr(err.msg, "not known at compile time"),
          "a runtime shape operand is unsupported: %s", err.msg);
    llmc_graph_free(&g);

    new_graph(&g);
    x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(4)));
    OP(&g, "Conv", "conv", x);
    CHECK(infer(&g, &err) == LLMC_E_UNSUPPORTED && strstr(err.msg, "Conv"), "unknown op: %s", err.msg);
    llmc_graph_free(&g);
}

/* ---- the paper's chain: Shape -> Gather -> Unsqueeze -> Concat -> Reshape ---- */

static int build_paper_chain(llmc_graph *g, int *reshape_out)
{
    new_graph(g);
    int x = g_input(g, "hidden", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(2048)));
    int shp = OP(g, "Shape", "shape", x);
    int b = dim_of(g, shp, 0, "batch");
    int s = dim_of(g, shp, 1, "seq");
    int cat = OP(g, "Concat", "target", b, s, CI64(g, "tail", 16, 2, 64));
    attr_int(g, producer_of(g, cat), "axis", 0);
    int r = OP(g, "Reshape", "split_heads", x, cat);
    g_output(g, r);
    *reshape_out = r;
    return cat;
}

static void test_paper_chain(void)
{
    llmc_graph g;
    llmc_error err;
    int r;
    int cat = build_paper_chain(&g, &r);
    CHECK(infer(&g, &err) == LLMC_OK, "chain infers (%s)", err.msg);
    CHECK(SYM_IS(&g, cat, K(1), SYM_S, K(16), K(2), K(64)), "Concat holds [1,S,16,2,64]");
    CHECK_SHAPE(&g, r, SHAPE(K(1), SYM_S, K(16), K(2), K(64)), "Reshape output [1,S,16,2,64]");
    int before = llmc_graph_live_nodes(&g);
    CHECK(run_pass(&llmc_pass_constant_folding, &g, &err) == LLMC_OK, "folding runs (%s)", err.msg);
    int target = g.nodes[producer_of(&g, r)].inputs[1];
    const int64_t want[5] = {1, -1, 16, 2, 64};
    CHECK(g.values[target].is_const && g.values[target].konst.nbytes == sizeof want &&
              memcmp(g.values[target].konst.data, want, sizeof want) == 0,
          "Reshape target is the constant (1,-1,16,2,64)");
    CHECK(run_pass(&llmc_pass_dead_code, &g, &err) == LLMC_OK, "dead code runs");
    CHECK(before == 7 && llmc_graph_live_nodes(&g) == 1 && count_op(&g, "Reshape") == 1,
          "7 nodes before, only the Reshape after (%d -> %d)", before, llmc_graph_live_nodes(&g));
    CHECK(infer(&g, &err) == LLMC_OK, "the folded graph infers again");
    CHECK_SHAPE(&g, r, SHAPE(K(1), SYM_S, K(16), K(2), K(64)), "same output shape after folding");
    llmc_graph_free(&g);
}

/* ---- constant folding (b), (c), (d) ---- */

static void test_two_symbolic_dims(void)
{
    llmc_graph g;
    llmc_error err;
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(SYM_S, AFF(0, 1, 1), K(64)));
    int shp = OP(&g, "Shape", "shape", x);
    int cat = OP(&g, "Concat", "target", dim_of(&g, shp, 0, "a"), dim_of(&g, shp, 1, "b"),
                 CI64(&g, "tail", 8, 8));
    attr_int(&g, producer_of(&g, cat), "axis", 0);
    int r = OP(&g, "Reshape", "r", x, cat);
    g_output(&g, r);
    CHECK(run_pass(&llmc_pass_constant_folding, &g, &err) == LLMC_OK, "folding runs (%s)", err.msg);
    int target = g.nodes[producer_of(&g, r)].inputs[1];
    const int64_t want[4] = {0, 0, 8, 8};
    CHECK(g.values[target].is_const && memcmp(g.values[target].konst.data, want, sizeof want) == 0,
          "two symbolic dims equal to the input's become 0: (0,0,8,8)");
    llmc_graph_free(&g);
}

static const llmc_attr *find_attr(const llmc_node *n, const char *name)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0)
            return &n->attrs[i];
    return NULL;
}

static void test_symbols_node(void)
{
    llmc_graph g;
    llmc_error err;
    new_graph(&g);
    int past = g_input(&g, "past_key", LLMC_DT_FLOAT, SHAPE(K(1), K(2), SYM_P, K(64)));
    int key = g_input(&g, "key", LLMC_DT_FLOAT, SHAPE(K(1), K(2), AFF(0, 1, 1), K(64)));
    int p = dim_of(&g, OP(&g, "Shape", "shp", past), 2, "p");
    int fresh = slice(&g, "fresh", key, p, CI64(&g, "end", INT64_MAX), CI64(&g, "ax", 2), -1);
    g_output(&g, fresh);
    llmc_pass_record rec[LLMC_PIPELINE_MAX_PASSES];
    int n_rec = 0;
    memset(&err, 0, sizeof err);
    CHECK(llmc_pipeline_run(&g, &ctx, NULL, rec, &n_rec, &err) == LLMC_OK, "pipeline runs (%s)", err.msg);
    int starts = g.nodes[producer_of(&g, fresh)].inputs[1];
    const llmc_node *sym = &g.nodes[producer_of(&g, starts)];
    const llmc_attr *values = find_attr(sym, "values");
    CHECK(strcmp(sym->op_type, "Symbols") == 0 && strcmp(sym->domain, "llmc") == 0 && sym->n_inputs == 0,
          "Slice starts come from an llmc.Symbols node");
    CHECK(values && values->n_ints == 3 && values->ints[0] == 0 && values->ints[1] == 0 && values->ints[2] == 1,
          "values = (c, s, p) = (0, 0, 1), i.e. [P]");
    CHECK(llmc_graph_live_nodes(&g) == 2 && count_op(&g, "Shape") == 0 && count_op(&g, "Gather") == 0,
          "the Shape chain died: Symbols + Slice remain (%d live)", llmc_graph_live_nodes(&g));
    CHECK(n_rec == llmc_pipeline_length() && strcmp(rec[0].name, "shape-inference") == 0 && rec[0].nodes == 4 &&
              record_named(rec, n_rec, "dead-code")->nodes == 2,
          "records: 4 nodes after shape-inference, 2 after dead-code");
    CHECK_SHAPE(&g, fresh, SHAPE(K(1), K(2), SYM_S, K(64)), "key[:, :, P:]");
    llmc_graph_free(&g);
}

static void test_evaluation(void)
{
    llmc_graph g;
    llmc_error err;
    new_graph(&g);
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30};
    int ca = g_const(&g, "a", LLMC_DT_FLOAT, SHAPE(K(2), K(3)), a);
    int cb = g_const(&g, "b", LLMC_DT_FLOAT, SHAPE(K(3)), b);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(SYM_S, K(3)));
    int sum = OP(&g, "Add", "sum", ca, cb);
    int tr = OP(&g, "Transpose", "tr", sum);
    int big = OP(&g, "Expand", "big", g_const(&g, "one", LLMC_DT_FLOAT, SCALAR, &a[0]), CI64(&g, "bigshape", 1000, 1000));
    int cst = llmc_graph_add_value(&g, "cst", 0);
    int cnode = llmc_graph_add_node(&g, "Constant", "cst", NULL, 0, &cst, 1);
    ATTR_INTS(&g, cnode, "value_ints", 2, 3);
    int used = OP(&g, "Reshape", "used", tr, cst);
    int y = OP(&g, "MatMul", "y", x, OP(&g, "Reshape", "w", used, CI64(&g, "w_shape", 3, 2)));
    g_output(&g, y);
    g_output(&g, big);
    CHECK(run_pass(&llmc_pass_constant_folding, &g, &err) == LLMC_OK, "folding evaluates (%s)", err.msg);
    const float want_sum[6] = {11, 22, 33, 14, 25, 36}, want_tr[6] = {11, 14, 22, 25, 33, 36};
    CHECK(g.values[sum].is_const && memcmp(g.values[sum].konst.data, want_sum, sizeof want_sum) == 0,
          "Add of two constants is folded with the runtime's kernel");
    CHECK(g.values[tr].is_const && memcmp(g.values[tr].konst.data, want_tr, sizeof want_tr) == 0,
          "and the Transpose of it");
    CHECK(g.values[cst].is_const && ((const int64_t *)g.values[cst].konst.data)[0] == 2,
          "a Constant node becomes a constant");
    int w = g.nodes[producer_of(&g, y)].inputs[1];
    CHECK(g.values[w].is_const && g.values[w].konst.nbytes == 24, "the weight chain folds to one constant");
    CHECK(!g.values[big].is_const, "Expand of a scalar to 1000x1000 is not materialized");
    CHECK(run_pass(&llmc_pass_dead_code, &g, &err) == LLMC_OK && llmc_graph_live_nodes(&g) == 2,
          "MatMul and Expand remain (%d live)", llmc_graph_live_nodes(&g));
    CHECK(!g.values[ca].is_const && !g.values[cb].is_const, "constants nobody reads are dropped");
    llmc_graph_free(&g);
}

/* ---- dead code and long chains ---- */

static void test_dead_code(void)
{
    llmc_graph g;
    llmc_error err;
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(4)));
    float w[4] = {1, 2, 3, 4};
    int wc = g_const(&g, "w", LLMC_DT_FLOAT, SHAPE(K(4)), w);
    int live = OP(&g, "Relu", "live", x);
    int d1 = OP(&g, "Mul", "d1", x, wc);
    int d2 = OP(&g, "Neg", "d2", d1);
    OP(&g, "Add", "d3", d2, live);
    g_output(&g, live);
    CHECK(run_pass(&llmc_pass_dead_code, &g, &err) == LLMC_OK, "dead code runs");
    CHECK(llmc_graph_live_nodes(&g) == 1 && !g.nodes[producer_of(&g, live)].dead, "an unused branch dies");
    CHECK(!g.values[wc].is_const, "its constant is dropped");
    CHECK(llmc_graph_live_nodes(&g) == 1 && g.n_inputs == 1, "graph inputs stay");
    llmc_graph_free(&g);
}

static void test_long_chains(void)
{
    enum { N = 100000 };
    llmc_graph g;
    llmc_error err;
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(4)));
    int v = x, dead = x;
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "v%d", i);
        v = OP(&g, "Relu", name, v);
        snprintf(name, sizeof name, "d%d", i);
        dead = OP(&g, "Neg", name, dead);
    }
    /* A shape-arithmetic chain: Shape(x)[1] + 1 + 1 + ... feeding a Range. */
    int s = dim_of(&g, OP(&g, "Shape", "shape", x), 1, "s");
    int one = CI64(&g, "one", 1);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "s%d", i);
        s = OP(&g, "Add", name, s, one);
    }
    int r = OP(&g, "Range", "r", g_scalar_i64(&g, "zero", 0), OP(&g, "Squeeze", "sq", s), g_scalar_i64(&g, "step", 1));
    g_output(&g, v);
    g_output(&g, r);
    llmc_pass_record rec[LLMC_PIPELINE_MAX_PASSES];
    int n_rec = 0;
    memset(&err, 0, sizeof err);
    CHECK(llmc_pipeline_run(&g, &ctx, NULL, rec, &n_rec, &err) == LLMC_OK, "pipeline on 300k nodes (%s)", err.msg);
    CHECK_SHAPE(&g, v, SHAPE(K(1), SYM_S, K(4)), "end of the 100k Relu chain");
    CHECK_SHAPE(&g, r, SHAPE(AFF(N, 1, 0)), "Range length S + 100000");
    const llmc_pass_record *after_dead_code = record_named(rec, n_rec, "dead-code");
    CHECK(n_rec == llmc_pipeline_length() && after_dead_code->nodes == N + 2,
          "the dead chain and the shape chain die: %u live",
          after_dead_code->nodes);
    llmc_graph_free(&g);
}

/* ---- pipeline dumps ---- */

static void test_pipeline_dumps(void)
{
    llmc_graph g;
    llmc_error err = {0};
    int r;
    build_paper_chain(&g, &r);
    char dir[] = "/tmp/llmc_dumpsXXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    char sub[64], path[128];
    snprintf(sub, sizeof sub, "%s/new", dir);
    llmc_pass_record rec[LLMC_PIPELINE_MAX_PASSES];
    int n_rec = 0;
    CHECK(llmc_pipeline_run(&g, &ctx, sub, rec, &n_rec, &err) == LLMC_OK, "pipeline with dumps (%s)", err.msg);
    for (int i = 0; i <= n_rec; i++) {
        struct stat st;
        if (i == 0)
            snprintf(path, sizeof path, "%s/00-import.txt", sub);
        else
            snprintf(path, sizeof path, "%s/%02d-%s.txt", sub, i, rec[i - 1].name);
        CHECK(stat(path, &st) == 0 && st.st_size > 0, "%s written", path + strlen(sub) + 1);
        unlink(path);
    }
    const llmc_pass_record *last = &rec[n_rec - 1];
    CHECK(n_rec == llmc_pipeline_length() && last->nodes == 1 && last->digest == llmc_ir_digest(&g),
          "records: last digest is the final graph's");
    CHECK(rec[0].digest != record_named(rec, n_rec, "constant-folding")->digest, "folding changes the digest");
    rmdir(sub);
    rmdir(dir);
    llmc_graph_free(&g);
}

int main(void)
{
    test_broadcasting();
    test_reshape();
    test_axes_ops();
    test_slice();
    test_matmul_gemm();
    test_split_expand_range();
    test_symbolic_contents();
    test_errors();
    test_paper_chain();
    test_two_symbolic_dims();
    test_symbols_node();
    test_evaluation();
    test_dead_code();
    test_long_chains();
    test_pipeline_dumps();
    return TAP_DONE();
}
