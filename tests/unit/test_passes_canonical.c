/* The canonicalizing rewrites on hand-built graphs: identity (Casts to
 * the dtype the input already has, Slices to the input's own shape, empty
 * Concat inputs), gemm-unflatten (Reshape -> Gemm ->
 * Reshape as MatMul over the last axis), packed-split (last-axis Slices
 * tiling a MatMul's output as one Split), quant-canonical (dynamic int8
 * MatMuls to MatMul(x, DequantizeLinear(Wq)); QuantizeLinear as float ops)
 * and codegen's weight sharing (identical weights in one segment: tied
 * embeddings).  Each rewrite is
 * checked for what it changes, what it must leave alone (with the --explain
 * text), and that the graph computes the same values before and after
 * (llmc_evaluate_graph runs the runtime's kernels). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/const_view.h"
#include "graph_util.h"
#include "ir/llmc_ops.h"
#include "llmc_rt.h"
#include "codegen/evaluate.h"
#include "passes/match.h"
#include "passes/pipeline.h"
#include "passes/position_tables.h"
#include "plan_format.h"
#include "tap.h"

#define MAX_OUTPUTS 5
#define MAX_CONTEXT 64

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
    llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = MAX_CONTEXT, .explain = true, .log = log, .detail = rep->detail,
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

/* The log on one line, for a TAP description (one call per CHECK). */
static const char *one_line(const char *log)
{
    static char text[512];
    snprintf(text, sizeof text, "%s", log ? log : "");
    for (char *c = text; *c; c++)
        *c = *c == '\n' ? ' ' : *c;
    return text;
}

static int run_quiet(const llmc_pass *pass, llmc_graph *g)
{
    pass_report rep = {0};
    int rc = run_pass(pass, g, &rep);
    report_free(&rep);
    return rc;
}

static int infer(llmc_graph *g)
{
    return run_quiet(&llmc_pass_shape_inference, g);
}

/* ---- evaluation ---- */

typedef struct {
    int n;
    llmc_eval_tensor out[MAX_OUTPUTS];
} results;

static int evaluate(const llmc_graph *g, uint32_t S, uint32_t P, const llmc_rt_tensor *inputs, results *r)
{
    llmc_error err = {0};
    memset(r, 0, sizeof *r);
    r->n = g->n_outputs;
    int rc = llmc_evaluate_graph(g, S, P, MAX_CONTEXT, inputs, r->out, &err);
    if (rc)
        printf("# evaluate: %s\n", err.msg);
    return rc;
}

static void results_free(results *r)
{
    for (int k = 0; k < r->n; k++)
        llmc_eval_tensor_free(&r->out[k]);
    r->n = 0;
}

/* Same dtypes, shapes and bytes, output by output. */
static bool same_bits(const results *a, const results *b)
{
    if (a->n != b->n || a->n == 0)
        return false;
    for (int k = 0; k < a->n; k++) {
        const llmc_eval_tensor *x = &a->out[k], *y = &b->out[k];
        if (x->dtype != y->dtype || x->nbytes != y->nbytes || !shape_eq(x->shape, y->shape) ||
            (x->nbytes && (!x->data || !y->data || memcmp(x->data, y->data, x->nbytes) != 0)))
            return false;
    }
    return true;
}

/* Float outputs: every element within rel_tol * max|a| of a's. */
static bool close_results(const results *a, const results *b, float rel_tol)
{
    if (a->n != b->n || a->n == 0)
        return false;
    for (int k = 0; k < a->n; k++) {
        const llmc_eval_tensor *x = &a->out[k], *y = &b->out[k];
        if (x->nbytes != y->nbytes || x->dtype != LLMC_DT_FLOAT || y->dtype != LLMC_DT_FLOAT || !x->data ||
            !shape_eq(x->shape, y->shape))
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

static int cast_to(llmc_graph *g, const char *out, int x, int to)
{
    int v;
    int node = g_node(g, "Cast", out, &v, 1, x);
    attr_int(g, node, "to", to);
    return v;
}

/* Values named `name` (live or not): names must stay unique. */
static int count_named(const llmc_graph *g, const char *name)
{
    int n = 0;
    for (int v = 0; v < g->n_values; v++)
        n += strcmp(g->values[v].name, name) == 0;
    return n;
}

static bool all_names_unique(const llmc_graph *g)
{
    for (int a = 0; a < g->n_values; a++)
        for (int b = a + 1; b < g->n_values; b++)
            if (strcmp(g->values[a].name, g->values[b].name) == 0)
                return false;
    return true;
}

static const char *producer_op(const llmc_graph *g, int v)
{
    int p = producer_of(g, v);
    return p >= 0 && !g->nodes[p].dead ? g->nodes[p].op_type : "(none)";
}

/* ---- identity ---- */

/* y = Abs(Cast_f(Cast_f(Neg(x)))), z = Mul(Cast_i64(Cast_i64(ids + 1)), 3),
 * w = Cast_i32(y): four identity Casts between real ops, one real Cast. */
static void test_identity_chains(void)
{
    llmc_graph g;
    pass_report rep = {0};
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(4)));
    int ids = g_input(&g, "ids", LLMC_DT_INT64, SHAPE(K(1), SYM_S));
    int neg = OP(&g, "Neg", "neg", x);
    int f2 = cast_to(&g, "f2", cast_to(&g, "f1", neg, LLMC_DT_FLOAT), LLMC_DT_FLOAT);
    int y = OP(&g, "Abs", "y", f2);
    int inc = OP(&g, "Add", "inc", ids, CI64(&g, "one", 1));
    int i2 = cast_to(&g, "i2", cast_to(&g, "i1", inc, LLMC_DT_INT64), LLMC_DT_INT64);
    int z = OP(&g, "Mul", "z", i2, CI64(&g, "three", 3));
    int w = cast_to(&g, "w", OP(&g, "Mul", "y10", y, g_const_f32(&g, "ten", SCALAR, (float[]){10.0f})),
                    LLMC_DT_INT32);
    g_output(&g, y);
    g_output(&g, z);
    g_output(&g, w);
    CHECK(infer(&g) == 0, "identity chains: shapes inferred");

    float xs[5 * 4];
    int64_t is[5] = {0, 7, -3, 100, 41};
    fill(xs, 20, 21);
    results before[2], after[2];
    uint32_t Ss[2] = {1, 5};
    bool eval_ok = true;
    for (int k = 0; k < 2; k++) {
        llmc_rt_tensor in[2] = {{LLMC_RT_F32, 3, {1, Ss[k], 4}, xs}, {LLMC_RT_I64, 2, {1, Ss[k]}, is}};
        eval_ok &= evaluate(&g, Ss[k], 0, in, &before[k]) == 0;
    }
    CHECK(eval_ok, "identity chains: evaluates before the pass at S = 1 and 5");
    CHECK(run_pass(&llmc_pass_identity, &g, &rep) == 0, "identity chains: pass runs");
    CHECK(count_op(&g, "Cast") == 1 && producer_of(&g, w) >= 0 &&
              strcmp(g.nodes[producer_of(&g, w)].op_type, "Cast") == 0,
          "identity chains: 4 identity Casts gone, the float->int32 Cast stays (%d Casts)", count_op(&g, "Cast"));
    CHECK(g.nodes[producer_of(&g, y)].inputs[0] == neg && g.nodes[producer_of(&g, z)].inputs[0] == inc,
          "identity chains: Abs reads Neg, Mul reads the Add directly");
    CHECK(g.outputs[0] == y && g.outputs[1] == z && g.outputs[2] == w && strcmp(g.values[y].name, "y") == 0,
          "identity chains: graph outputs untouched");
    CHECK(strcmp(rep.detail, "4 removed") == 0, "identity chains: detail '%s'", rep.detail);
    CHECK(rep.log && rep.log_size == 0, "identity chains: nothing explained (log '%s')", one_line(rep.log));
    CHECK(infer(&g) == 0, "identity chains: shapes inferred again");
    for (int k = 0; k < 2; k++) {
        llmc_rt_tensor in[2] = {{LLMC_RT_F32, 3, {1, Ss[k], 4}, xs}, {LLMC_RT_I64, 2, {1, Ss[k]}, is}};
        bool ok = eval_ok && evaluate(&g, Ss[k], 0, in, &after[k]) == 0 && same_bits(&before[k], &after[k]);
        CHECK(ok, "identity chains: S = %u: float, int64 and int32 outputs bit-identical", Ss[k]);
        /* The values themselves: int64 (ids + 1) * 3, int32 trunc(10 |x|). */
        const int64_t *zz = ok ? after[k].out[1].data : NULL;
        const int32_t *ww = ok ? after[k].out[2].data : NULL;
        bool vals = ok && after[k].out[1].dtype == LLMC_DT_INT64 && after[k].out[2].dtype == LLMC_DT_INT32;
        for (uint32_t i = 0; vals && i < Ss[k]; i++) {
            vals &= zz[i] == (is[i] + 1) * 3;
            for (int j = 0; j < 4; j++)
                vals &= ww[i * 4 + j] == (int32_t)(fabsf(-xs[i * 4 + j]) * 10.0f);
        }
        CHECK(vals, "identity chains: S = %u: z = (ids + 1) * 3 and w = int32(10 |x|) as computed by hand", Ss[k]);
        results_free(&before[k]);
        results_free(&after[k]);
    }
    report_free(&rep);
    llmc_graph_free(&g);
}

/* Slice(x, starts, ends, axes) */
static int slice_of(llmc_graph *g, const char *out, int x, int64_t start, int64_t end, int64_t axis)
{
    char name[64];
    snprintf(name, sizeof name, "%s_start", out);
    int s = CI64(g, name, start);
    snprintf(name, sizeof name, "%s_end", out);
    int e = CI64(g, name, end);
    snprintf(name, sizeof name, "%s_axis", out);
    return OP(g, "Slice", out, x, s, e, CI64(g, name, axis));
}

/* Partial-rotary code at rotary fraction 1.0 over x [1, 2, S, 8]:
 * y = Concat(Neg(x[..., :8]), x[..., 8:]) and z = x[..., -8:INT64_MAX] * 2
 * and w = x[:, :, 0:INT64_MAX] + 1 are x's own values; x[..., 1:] and
 * x[..., :4] are real Slices. */
static void test_identity_slices(void)
{
    llmc_graph g;
    pass_report rep = {0};
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), K(2), SYM_S, K(8)));
    int rot = OP(&g, "Neg", "rot", slice_of(&g, "q_rot", x, 0, 8, -1));
    int y = OP(&g, "Concat", "y", rot, slice_of(&g, "q_pass", x, 8, INT64_MAX, -1));
    attr_int(&g, producer_of(&g, y), "axis", -1);
    int z = OP(&g, "Mul", "z", slice_of(&g, "tail", x, -8, INT64_MAX, 3),
               g_const_f32(&g, "two", SCALAR, (float[]){2.0f}));
    int w = OP(&g, "Add", "w", slice_of(&g, "rows", x, 0, INT64_MAX, 2),
               g_const_f32(&g, "one", SCALAR, (float[]){1.0f}));
    int from1 = slice_of(&g, "from1", x, 1, INT64_MAX, -1), head = slice_of(&g, "head", x, 0, 4, -1);
    int outs[] = {y, z, w, from1, head};
    for (int i = 0; i < 5; i++)
        g_output(&g, outs[i]);
    CHECK(infer(&g) == 0, "identity slices: shapes inferred");

    float xs[5 * 16];
    fill(xs, 5 * 16, 31);
    results before[2], after[2];
    uint32_t Ss[2] = {1, 5};
    bool eval_ok = true;
    for (int k = 0; k < 2; k++) {
        llmc_rt_tensor in = {LLMC_RT_F32, 4, {1, 2, Ss[k], 8}, xs};
        eval_ok &= evaluate(&g, Ss[k], 0, &in, &before[k]) == 0;
    }
    CHECK(eval_ok, "identity slices: evaluates before the pass at S = 1 and 5");
    CHECK(run_pass(&llmc_pass_identity, &g, &rep) == 0, "identity slices: pass runs");
    CHECK(count_op(&g, "Slice") == 2 && count_op(&g, "Concat") == 0 && strcmp(producer_op(&g, from1), "Slice") == 0 &&
              strcmp(producer_op(&g, head), "Slice") == 0,
          "identity slices: x[..., :8], x[..., -8:], x[:, :, 0:] and the empty x[..., 8:] gone with the Concat; "
          "x[..., 1:] and x[..., :4] stay (%d Slices, %d Concats)", count_op(&g, "Slice"), count_op(&g, "Concat"));
    int neg = producer_of(&g, g.outputs[0]);
    CHECK(neg >= 0 && strcmp(g.nodes[neg].op_type, "Neg") == 0 && g.nodes[neg].inputs[0] == x &&
              strcmp(g.values[g.outputs[0]].name, "y") == 0 && all_names_unique(&g),
          "identity slices: output 'y' is Neg(x) itself, names unique");
    CHECK(g.nodes[producer_of(&g, z)].inputs[0] == x && g.nodes[producer_of(&g, w)].inputs[0] == x,
          "identity slices: Mul and Add read x directly");
    CHECK(strcmp(rep.detail, "0 casts, 3 slices, 1 concats removed; 1 empty concat inputs dropped") == 0,
          "identity slices: detail '%s'", rep.detail);
    CHECK(infer(&g) == 0, "identity slices: shapes inferred again");
    for (int k = 0; k < 2; k++) {
        llmc_rt_tensor in = {LLMC_RT_F32, 4, {1, 2, Ss[k], 8}, xs};
        CHECK(eval_ok && evaluate(&g, Ss[k], 0, &in, &after[k]) == 0 && same_bits(&before[k], &after[k]),
              "identity slices: S = %u: all five outputs bit-identical", Ss[k]);
        results_free(&before[k]);
        results_free(&after[k]);
    }
    report_free(&rep);
    llmc_graph_free(&g);
}

/* onnxruntime-genai's RotaryEmbedding form over q [1, S, 16], 4 heads of 4:
 * split heads (Reshape to [1, S, 4, 4], Transpose 0,2,1,3), Neg as the
 * rotation, merge heads (Transpose back, Reshape to [1, S, 16]), then the
 * attention's split again: the merge-split pair goes, so the second split
 * reads the Neg.  A Reshape to its own shape goes too; a Transpose pair
 * that does not compose to the identity, and a Reshape pair to another
 * shape, stay. */
static int transpose_of(llmc_graph *g, const char *out, int x, const int64_t perm[4])
{
    int t = OP(g, "Transpose", out, x);
    attr_ints(g, producer_of(g, t), "perm", 4, perm);
    return t;
}

static void test_identity_round_trips(void)
{
    static const int64_t heads_perm[4] = {0, 2, 1, 3}, last_two[4] = {0, 1, 3, 2};
    llmc_graph g;
    pass_report rep = {0};
    new_graph(&g);
    int q = g_input(&g, "q", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(16)));
    int heads_shape = CI64(&g, "heads_shape", 1, -1, 4, 4), flat_shape = CI64(&g, "flat_shape", 1, -1, 16);
    int split = OP(&g, "Reshape", "split", q, heads_shape);
    int t1 = transpose_of(&g, "t1", split, heads_perm);
    int rot = OP(&g, "Neg", "rot", t1);
    int t2 = transpose_of(&g, "t2", rot, heads_perm);
    int merged = OP(&g, "Reshape", "merged", t2, flat_shape);
    int again = OP(&g, "Reshape", "again", merged, heads_shape);
    int same = OP(&g, "Reshape", "same", again, heads_shape);
    int y = OP(&g, "Relu", "y", transpose_of(&g, "t3", same, heads_perm));
    int other = transpose_of(&g, "other", t1, last_two);
    int w = OP(&g, "Reshape", "w", OP(&g, "Reshape", "w8", q, CI64(&g, "w8_shape", 1, -1, 8)),
               CI64(&g, "w_shape", 1, -1, 2, 8));
    int outs[] = {y, other, w};
    for (int i = 0; i < 3; i++)
        g_output(&g, outs[i]);
    CHECK(infer(&g) == 0, "identity round trips: shapes inferred");
    float xs[3 * 16];
    fill(xs, 3 * 16, 7);
    results before, after;
    llmc_rt_tensor in = {LLMC_RT_F32, 3, {1, 3, 16}, xs};
    bool eval_ok = evaluate(&g, 3, 0, &in, &before) == 0;
    CHECK(run_pass(&llmc_pass_identity, &g, &rep) == 0, "identity round trips: pass runs");
    int y_in = g.nodes[producer_of(&g, y)].inputs[0];
    CHECK(producer_of(&g, y_in) >= 0 && strcmp(producer_op(&g, y_in), "Neg") == 0,
          "identity round trips: the second split reads the rotation itself (%s)", producer_op(&g, y_in));
    CHECK(count_op(&g, "Transpose") == 2 && count_op(&g, "Reshape") == 3,
          "identity round trips: the first split and the other perm stay, the reshape pair to [1, S, 2, 8] "
          "stays (%d Transposes, %d Reshapes)", count_op(&g, "Transpose"), count_op(&g, "Reshape"));
    CHECK(strstr(rep.detail, "2 reshapes and 1 transposes undone") != NULL, "identity round trips: detail '%s'",
          rep.detail);
    CHECK(infer(&g) == 0 && eval_ok && evaluate(&g, 3, 0, &in, &after) == 0 && same_bits(&before, &after),
          "identity round trips: all three outputs bit-identical at S = 3");
    results_free(&before);
    results_free(&after);
    report_free(&rep);
    llmc_graph_free(&g);
}

/* transformers: present.0.key = Cast(Concat(past, k)) with the Cast an
 * identity; the same for the value.  The Concat must take the name. */
static void test_identity_present(void)
{
    llmc_graph g;
    pass_report rep = {0};
    new_graph(&g);
    llmc_shape past_s = SHAPE(K(1), K(2), SYM_P, K(4)), cur_s = SHAPE(K(1), K(2), SYM_S, K(4));
    int pk = g_input(&g, "past_key_values.0.key", LLMC_DT_FLOAT, past_s);
    int pv = g_input(&g, "past_key_values.0.value", LLMC_DT_FLOAT, past_s);
    int k = g_input(&g, "k", LLMC_DT_FLOAT, cur_s);
    int kcat_node = g_node(&g, "Concat", "/attn/Concat_output_0", NULL, 2, pk, OP(&g, "Neg", "kneg", k));
    attr_int(&g, kcat_node, "axis", -2);
    int vcat_node = g_node(&g, "Concat", "/attn/Concat_1_output_0", NULL, 2, pv, OP(&g, "Exp", "vexp", k));
    attr_int(&g, vcat_node, "axis", 2);
    int kcat = op_value(&g, kcat_node), vcat = op_value(&g, vcat_node);
    int out_k = cast_to(&g, "present.0.key", kcat, LLMC_DT_FLOAT);
    int out_v = cast_to(&g, "present.0.value", vcat, LLMC_DT_FLOAT);
    /* The Concat is also read by another node (attention would be). */
    int other = OP(&g, "ReduceSum", "ksum", kcat);
    g_output(&g, out_k);
    g_output(&g, out_v);
    g_output(&g, other);
    CHECK(infer(&g) == 0, "present through a Cast: shapes inferred");

    enum { S = 2, P = 3 };
    float past[2 * P * 4], pastv[2 * P * 4], cur[2 * S * 4];
    fill(past, 2 * P * 4, 31);
    fill(pastv, 2 * P * 4, 32);
    fill(cur, 2 * S * 4, 33);
    uint32_t Ps[2] = {P, 0}, Ss[2] = {S, 1};
    results before[2], after[2];
    bool eval_ok = true;
    for (int i = 0; i < 2; i++) {
        llmc_rt_tensor in[3] = {{LLMC_RT_F32, 4, {1, 2, Ps[i], 4}, past},
                                {LLMC_RT_F32, 4, {1, 2, Ps[i], 4}, pastv},
                                {LLMC_RT_F32, 4, {1, 2, Ss[i], 4}, cur}};
        eval_ok &= evaluate(&g, Ss[i], Ps[i], in, &before[i]) == 0;
    }
    CHECK(eval_ok, "present through a Cast: evaluates before the pass at (S, P) = (2, 3) and (1, 0)");
    CHECK(run_pass(&llmc_pass_identity, &g, &rep) == 0, "present through a Cast: pass runs");
    CHECK(count_op(&g, "Cast") == 0 && strcmp(rep.detail, "2 removed") == 0,
          "present through a Cast: both Casts removed (detail '%s')", rep.detail);
    int found_k = llmc_graph_find_value(&g, "present.0.key"), found_v = llmc_graph_find_value(&g, "present.0.value");
    CHECK(g.n_outputs == 3 && g.outputs[0] == kcat && g.outputs[1] == vcat && g.outputs[2] == other,
          "present through a Cast: the outputs are now the Concats' values, in order");
    CHECK(found_k == kcat && found_v == vcat && strcmp(g.values[g.outputs[0]].name, "present.0.key") == 0 &&
              strcmp(g.values[g.outputs[1]].name, "present.0.value") == 0,
          "present through a Cast: the names moved to the Cast inputs");
    CHECK(strcmp(producer_op(&g, g.outputs[0]), "Concat") == 0 &&
              strcmp(producer_op(&g, g.outputs[1]), "Concat") == 0,
          "present through a Cast: present.0.key/value produced by Concat (%s, %s)", producer_op(&g, g.outputs[0]),
          producer_op(&g, g.outputs[1]));
    CHECK(count_named(&g, "present.0.key") == 1 && count_named(&g, "present.0.value") == 1 &&
              count_named(&g, "/attn/Concat_output_0") == 1 && all_names_unique(&g),
          "present through a Cast: every value name still unique");
    CHECK(g.values[kcat].is_graph_output && !g.values[out_k].is_graph_output && g.values[vcat].is_graph_output &&
              !g.values[out_v].is_graph_output,
          "present through a Cast: graph-output flags moved with the names");
    CHECK(g.nodes[producer_of(&g, other)].inputs[0] == kcat, "present through a Cast: ReduceSum still reads the Concat");
    CHECK(infer(&g) == 0, "present through a Cast: shapes inferred again");
    for (int i = 0; i < 2; i++) {
        llmc_rt_tensor in[3] = {{LLMC_RT_F32, 4, {1, 2, Ps[i], 4}, past},
                                {LLMC_RT_F32, 4, {1, 2, Ps[i], 4}, pastv},
                                {LLMC_RT_F32, 4, {1, 2, Ss[i], 4}, cur}};
        bool ok = eval_ok && evaluate(&g, Ss[i], Ps[i], in, &after[i]) == 0 && same_bits(&before[i], &after[i]);
        CHECK(ok, "present through a Cast: (S, P) = (%u, %u): outputs bit-identical", Ss[i], Ps[i]);
        /* and the key really is Concat(past, -k) */
        const float *key = ok ? after[i].out[0].data : NULL;
        bool concat_ok = ok && after[i].out[0].nbytes == sizeof(float) * 2 * (Ps[i] + Ss[i]) * 4;
        for (uint32_t h = 0; concat_ok && h < 2; h++)
            for (uint32_t t = 0; t < Ps[i] + Ss[i]; t++)
                for (int d = 0; d < 4; d++)
                    concat_ok &= key[(h * (Ps[i] + Ss[i]) + t) * 4 + d] ==
                                 (t < Ps[i] ? past[(h * Ps[i] + t) * 4 + d] : -cur[(h * Ss[i] + t - Ps[i]) * 4 + d]);
        CHECK(concat_ok, "present through a Cast: (S, P) = (%u, %u): present.0.key = Concat(past, -k)", Ss[i], Ps[i]);
        results_free(&before[i]);
        results_free(&after[i]);
    }

    /* The renamed graph still compiles with its KV roles bound. */
    llmc_codegen_options opt = {.max_context = MAX_CONTEXT};
    uint8_t *plan = NULL;
    size_t size = 0;
    llmc_error err = {0};
    CHECK(llmc_codegen_to_memory(&g, &opt, &plan, &size, NULL, &err) == 0,
          "present through a Cast: compiles after the pass (%s)", err.msg);
    free(plan);
    report_free(&rep);
    llmc_graph_free(&g);
}

/* A graph output that is an identity Cast of a graph input: the input keeps
 * its name, so does the output, and the Cast stays. */
static void test_identity_of_input(void)
{
    llmc_graph g;
    pass_report rep = {0};
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(3)));
    int y = cast_to(&g, "y_copy", x, LLMC_DT_FLOAT);
    int neg = OP(&g, "Neg", "n", x);
    int z = cast_to(&g, "z", neg, LLMC_DT_FLOAT);   /* this one goes */
    g_output(&g, y);
    g_output(&g, z);
    CHECK(infer(&g) == 0, "Cast of a graph input: shapes inferred");
    float xs[2 * 3] = {1.5f, -2, 3, -4.25f, 5, -6};
    llmc_rt_tensor in = {LLMC_RT_F32, 3, {1, 2, 3}, xs};
    results before, after;
    bool ok = evaluate(&g, 2, 0, &in, &before) == 0;
    CHECK(run_pass(&llmc_pass_identity, &g, &rep) == 0, "Cast of a graph input: pass runs");
    CHECK(count_op(&g, "Cast") == 1 && g.outputs[0] == y && strcmp(producer_op(&g, y), "Cast") == 0 &&
              g.nodes[producer_of(&g, y)].inputs[0] == x,
          "Cast of a graph input: that Cast stays, reading x");
    CHECK(strcmp(g.values[x].name, "x") == 0 && strcmp(g.values[y].name, "y_copy") == 0 &&
              g.values[x].is_graph_input && !g.values[x].is_graph_output,
          "Cast of a graph input: names and flags unchanged");
    CHECK(g.outputs[1] == neg && strcmp(g.values[neg].name, "z") == 0, "Cast of a graph input: the other one is removed");
    CHECK(strcmp(rep.detail, "1 removed") == 0, "Cast of a graph input: detail '%s'", rep.detail);
    CHECK(rep.log && strstr(rep.log, "identity: node 'y_copy' (#0, Cast) not rewritten: ") &&
              strstr(rep.log, "its input 'x' is a graph input, output or constant, and output 'y_copy' keeps its name"),
          "Cast of a graph input: explained, naming the output (log '%s')", one_line(rep.log));
    ok = ok && infer(&g) == 0 && evaluate(&g, 2, 0, &in, &after) == 0 && same_bits(&before, &after);
    CHECK(ok && memcmp(after.out[0].data, xs, sizeof xs) == 0, "Cast of a graph input: values unchanged");
    if (ok) {
        results_free(&before);
        results_free(&after);
    }
    report_free(&rep);
    llmc_graph_free(&g);

    /* Same with a constant input and with an input that is itself a graph
     * output: both keep their names. */
    new_graph(&g);
    x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(2)));
    int c = g_const_f32(&g, "c", SHAPE(K(2)), (float[]){1, 2});
    int sum = OP(&g, "Add", "sum", x, c);
    g_output(&g, sum);
    g_output(&g, cast_to(&g, "sum_again", sum, LLMC_DT_FLOAT));
    g_output(&g, cast_to(&g, "c_out", c, LLMC_DT_FLOAT));
    CHECK(infer(&g) == 0 && run_pass(&llmc_pass_identity, &g, &rep) == 0, "Cast of an output / constant: runs");
    CHECK(count_op(&g, "Cast") == 2 && strcmp(rep.detail, "0 removed") == 0 && count_named(&g, "sum") == 1 &&
              count_named(&g, "sum_again") == 1 && strcmp(g.values[sum].name, "sum") == 0,
          "Cast of an output / constant: both stay, names unchanged (detail '%s')", rep.detail);
    CHECK(rep.log && strstr(rep.log, "its input 'sum' is a graph input, output or constant, and output 'sum_again'") &&
              strstr(rep.log, "its input 'c' is a graph input, output or constant, and output 'c_out'"),
          "Cast of an output / constant: both explained");
    report_free(&rep);
    llmc_graph_free(&g);
}

/* Two graph outputs that are identity Casts of one intermediate: the first
 * takes its name, the second must stay (the value has a name by then). */
static void test_identity_two_outputs(void)
{
    llmc_graph g;
    pass_report rep = {0};
    new_graph(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(SYM_S, K(3)));
    int t = OP(&g, "Tanh", "t", x);
    int a = cast_to(&g, "out_a", t, LLMC_DT_FLOAT), b = cast_to(&g, "out_b", t, LLMC_DT_FLOAT);
    g_output(&g, a);
    g_output(&g, b);
    float xs[2 * 3] = {0.1f, -0.2f, 0.3f, 2, -3, 0};
    llmc_rt_tensor in = {LLMC_RT_F32, 2, {2, 3}, xs};
    results before = {0}, after = {0};
    bool ok = infer(&g) == 0 && evaluate(&g, 2, 0, &in, &before) == 0;
    CHECK(ok && run_pass(&llmc_pass_identity, &g, &rep) == 0, "two outputs from one value: pass runs");
    CHECK(count_op(&g, "Cast") == 1 && strcmp(rep.detail, "1 removed") == 0 && g.outputs[0] == t &&
              strcmp(g.values[t].name, "out_a") == 0 && g.outputs[1] == b && strcmp(producer_op(&g, b), "Cast") == 0 &&
              g.nodes[producer_of(&g, b)].inputs[0] == t,
          "two outputs from one value: out_a is the Tanh, out_b = Cast(out_a) (detail '%s')", rep.detail);
    CHECK(count_named(&g, "out_a") == 1 && count_named(&g, "out_b") == 1 && all_names_unique(&g),
          "two outputs from one value: names unique");
    CHECK(rep.log && strstr(rep.log, "identity: node 'out_b' (#2, Cast) not rewritten: its input 'out_a'"),
          "two outputs from one value: the second Cast explained (log '%s')", one_line(rep.log));
    ok = ok && infer(&g) == 0 && evaluate(&g, 2, 0, &in, &after) == 0 && same_bits(&before, &after);
    CHECK(ok, "two outputs from one value: values bit-identical");
    results_free(&before);
    results_free(&after);
    report_free(&rep);
    llmc_graph_free(&g);
}

/* ---- gemm-unflatten ---- */

enum { GK = 6, GN = 4 };

typedef struct {
    int x, flat, gemm, gemm_out, y;
    int w, c;
} gemm_graph;

typedef struct {
    bool trans_b;
    int c_rank;          /* 0: no C, 1: [N], 2: [1, N] */
    float alpha;
    bool trans_a;        /* the first Reshape then gives [K, S] */
    bool extra_reader;   /* the flattened value also a Neg's input (a graph output) */
    bool bad_restore;    /* the second Reshape gives [S, 1, N] */
    bool w_input;        /* W a graph input instead of a constant */
} gemm_opts;

static float GW[GK * GN], GWT[GN * GK], GC[GN];

/* y = Reshape(Gemm(Reshape(x [1, S, K], [-1, K]), W, C), [1, -1, N]):
 * transformers' Conv1D. */
static gemm_graph build_gemm(llmc_graph *g, const gemm_opts *o)
{
    gemm_graph m;
    new_graph(g);
    fill(GW, GK * GN, 41);
    for (int i = 0; i < GK; i++)
        for (int j = 0; j < GN; j++)
            GWT[j * GK + i] = GW[i * GN + j];
    fill(GC, GN, 42);
    m.x = g_input(g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(GK)));
    int shape1 = o->trans_a ? CI64(g, "/c_attn/Constant_output_0", GK, -1) : CI64(g, "/c_attn/Constant_output_0", -1, GK);
    m.flat = OP(g, "Reshape", "/c_attn/Reshape_output_0", m.x, shape1);
    if (o->w_input)
        m.w = g_input(g, "c_attn.weight", LLMC_DT_FLOAT, SHAPE(K(GK), K(GN)));
    else
        m.w = o->trans_b ? g_const_f32(g, "c_attn.weight", SHAPE(K(GN), K(GK)), GWT)
                         : g_const_f32(g, "c_attn.weight", SHAPE(K(GK), K(GN)), GW);
    m.c = o->c_rank == 1   ? g_const_f32(g, "c_attn.bias", SHAPE(K(GN)), GC)
          : o->c_rank == 2 ? g_const_f32(g, "c_attn.bias", SHAPE(K(1), K(GN)), GC)
                           : -1;
    m.gemm = m.c >= 0 ? g_node(g, "Gemm", "/c_attn/Gemm", &m.gemm_out, 3, m.flat, m.w, m.c)
                      : g_node(g, "Gemm", "/c_attn/Gemm", &m.gemm_out, 2, m.flat, m.w);
    if (o->alpha != 1.0f)
        attr_float(g, m.gemm, "alpha", o->alpha);
    attr_float(g, m.gemm, "beta", 1.0f);
    if (o->trans_a)
        attr_int(g, m.gemm, "transA", 1);
    if (o->trans_b)
        attr_int(g, m.gemm, "transB", 1);
    int shape2 = o->bad_restore ? CI64(g, "/c_attn/Constant_1_output_0", -1, 1, GN)
                                : CI64(g, "/c_attn/Constant_1_output_0", 1, -1, GN);
    m.y = OP(g, "Reshape", "/c_attn/Reshape_1_output_0", m.gemm_out, shape2);
    g_output(g, m.y);
    if (o->extra_reader)
        g_output(g, OP(g, "Neg", "flat_neg", m.flat));
    return m;
}

static void test_gemm_rewritten(const char *what, const gemm_opts *o)
{
    llmc_graph g;
    pass_report rep = {0};
    gemm_graph m = build_gemm(&g, o);
    CHECK(infer(&g) == 0 && shape_eq(g.values[m.flat].shape, SHAPE(SYM_S, K(GK))) &&
              shape_eq(g.values[m.y].shape, SHAPE(K(1), SYM_S, K(GN))),
          "gemm %s: shapes inferred ([S, 6] flat, [1, S, 4] out)", what);
    float xs[5 * GK];
    fill(xs, 5 * GK, 43);
    uint32_t Ss[2] = {1, 5};
    results before[2], after[2];
    bool eval_ok = true;
    for (int k = 0; k < 2; k++) {
        llmc_rt_tensor in = {LLMC_RT_F32, 3, {1, Ss[k], GK}, xs};
        eval_ok &= evaluate(&g, Ss[k], 0, &in, &before[k]) == 0;
    }
    /* The reference itself is right: y = x W + C by hand. */
    bool ref_ok = eval_ok;
    for (uint32_t s = 0; ref_ok && s < 5; s++)
        for (int j = 0; j < GN; j++) {
            float want = o->c_rank ? GC[j] : 0;
            for (int i = 0; i < GK; i++)
                want += xs[s * GK + i] * GW[i * GN + j];
            ref_ok &= fabsf(((const float *)before[1].out[0].data)[s * GN + j] - want) <= 1e-5f;
        }
    CHECK(ref_ok, "gemm %s: the Gemm graph computes x W + C", what);
    CHECK(run_pass(&llmc_pass_gemm_unflatten, &g, &rep) == 0, "gemm %s: pass runs", what);
    CHECK(count_op(&g, "Gemm") == 0 && count_op(&g, "Reshape") == 0 && count_op(&g, "MatMul") == 1 &&
              count_op(&g, "Add") == (o->c_rank ? 1 : 0),
          "gemm %s: MatMul%s, no Gemm or Reshape (%d Gemm, %d Reshape, %d MatMul, %d Add)", what,
          o->c_rank ? " + Add" : " alone", count_op(&g, "Gemm"), count_op(&g, "Reshape"), count_op(&g, "MatMul"),
          count_op(&g, "Add"));
    int last = producer_of(&g, m.y);
    int mm = o->c_rank ? producer_of(&g, g.nodes[last].inputs[0]) : last;
    const llmc_node *mmn = mm >= 0 ? &g.nodes[mm] : NULL;
    const llmc_value *w = mmn ? &g.values[mmn->inputs[1]] : NULL;
    CHECK(g.outputs[0] == m.y && mmn && strcmp(mmn->op_type, "MatMul") == 0 && mmn->inputs[0] == m.x && w->is_const &&
              shape_eq(w->shape, SHAPE(K(GK), K(GN))) && memcmp(llmc_const_bytes(&w->konst), GW, sizeof GW) == 0,
          "gemm %s: MatMul(x, W [6, 4]) with W's bytes exactly x W's, writing the graph output", what);
    if (o->c_rank) {
        const llmc_node *add = &g.nodes[last];
        const llmc_value *b = &g.values[add->inputs[1]];
        CHECK(strcmp(add->op_type, "Add") == 0 && b->is_const && shape_eq(b->shape, SHAPE(K(GN))) &&
                  memcmp(b->konst.data, GC, sizeof GC) == 0,
              "gemm %s: Add of the bias as a [4] vector", what);
    }
    CHECK(strcmp(rep.detail, "1 Gemms unflattened") == 0, "gemm %s: detail '%s'", what, rep.detail);
    CHECK(infer(&g) == 0, "gemm %s: shapes inferred again", what);
    for (int k = 0; k < 2; k++) {
        llmc_rt_tensor in = {LLMC_RT_F32, 3, {1, Ss[k], GK}, xs};
        bool ok = eval_ok && evaluate(&g, Ss[k], 0, &in, &after[k]) == 0 &&
                  close_results(&before[k], &after[k], 1e-6f);
        CHECK(ok, "gemm %s: S = %u: same outputs within 1e-6 relative", what, Ss[k]);
        results_free(&after[k]);
        results_free(&before[k]);
    }
    report_free(&rep);
    llmc_graph_free(&g);
}

static void test_gemm_forms(void)
{
    test_gemm_rewritten("W [K,N], C [N]", &(gemm_opts){.c_rank = 1, .alpha = 1});
    test_gemm_rewritten("transB W [N,K], C [N]", &(gemm_opts){.trans_b = true, .c_rank = 1, .alpha = 1});
    test_gemm_rewritten("C [1,N]", &(gemm_opts){.c_rank = 2, .alpha = 1});
    test_gemm_rewritten("no C, transB", &(gemm_opts){.trans_b = true, .c_rank = 0, .alpha = 1});
}

static void check_gemm_refused(const char *what, const gemm_opts *o, const char *why)
{
    llmc_graph g;
    pass_report rep = {0};
    build_gemm(&g, o);
    CHECK(infer(&g) == 0, "gemm refused, %s: shapes inferred", what);
    int live = llmc_graph_live_nodes(&g);
    CHECK(run_pass(&llmc_pass_gemm_unflatten, &g, &rep) == 0 && llmc_graph_live_nodes(&g) == live &&
              count_op(&g, "Gemm") == 1 && count_op(&g, "Reshape") == 2 && count_op(&g, "MatMul") == 0,
          "gemm refused, %s: graph unchanged", what);
    CHECK(rep.log && strstr(rep.log, "gemm-unflatten: node '/c_attn/Gemm' (#1, Gemm) not rewritten: ") &&
              strstr(rep.log, why),
          "gemm refused, %s: explained (log '%s')", what, one_line(rep.log));
    CHECK(strcmp(rep.detail, "0 Gemms unflattened") == 0, "gemm refused, %s: detail '%s'", what, rep.detail);
    report_free(&rep);
    llmc_graph_free(&g);
}

static void test_gemm_refusals(void)
{
    check_gemm_refused("alpha 0.5", &(gemm_opts){.c_rank = 1, .alpha = 0.5f},
                       "alpha or beta is not 1, or transA is set");
    check_gemm_refused("transA", &(gemm_opts){.c_rank = 1, .alpha = 1, .trans_a = true},
                       "alpha or beta is not 1, or transA is set");
    check_gemm_refused("flattened x read twice", &(gemm_opts){.c_rank = 1, .alpha = 1, .extra_reader = true},
                       "the flattening Reshape's output has other readers");
    check_gemm_refused("second Reshape gives [S, 1, N]", &(gemm_opts){.c_rank = 1, .alpha = 1, .bad_restore = true},
                       "the second Reshape does not restore x's leading dims");
    check_gemm_refused("W a graph input", &(gemm_opts){.c_rank = 1, .alpha = 1, .w_input = true},
                       "W is not a float constant [K, N] (or [N, K] with transB)");
}

/* gemm-unflatten then linear-fusion: one llmc.Linear with the bias. */
static void test_gemm_then_linear(void)
{
    llmc_graph g;
    pass_report rep = {0};
    gemm_graph m = build_gemm(&g, &(gemm_opts){.trans_b = true, .c_rank = 2, .alpha = 1});
    float xs[3 * GK];
    fill(xs, 3 * GK, 44);
    llmc_rt_tensor in = {LLMC_RT_F32, 3, {1, 3, GK}, xs};
    results before = {0}, after = {0};
    bool ok = infer(&g) == 0 && evaluate(&g, 3, 0, &in, &before) == 0;
    ok = ok && run_quiet(&llmc_pass_gemm_unflatten, &g) == 0 && infer(&g) == 0 &&
         run_pass(&llmc_pass_linear_fusion, &g, &rep) == 0;
    CHECK(ok, "gemm -> linear: gemm-unflatten then linear-fusion run");
    int live = llmc_graph_live_nodes(&g), lin = producer_of(&g, m.y);
    const llmc_node *n = lin >= 0 ? &g.nodes[lin] : NULL;
    CHECK(live == 1 && n && !n->dead && strcmp(n->op_type, "Linear") == 0 && strcmp(n->domain, "llmc") == 0,
          "gemm -> linear: one node left, an llmc.Linear producing y (%d live, %s.%s)", live,
          n ? n->domain : "", n ? n->op_type : "");
    const llmc_value *w = n && n->n_inputs > 1 ? &g.values[n->inputs[1]] : NULL;
    const llmc_value *b = n && n->n_inputs > 2 && n->inputs[2] >= 0 ? &g.values[n->inputs[2]] : NULL;
    CHECK(n && n->inputs[0] == m.x && w && w->is_const && shape_eq(w->shape, SHAPE(K(GK), K(GN))) &&
              memcmp(llmc_const_bytes(&w->konst), GW, sizeof GW) == 0,
          "gemm -> linear: Linear(x, W [6, 4]) with W = (W^T)^T exactly");
    CHECK(b && b->is_const && shape_eq(b->shape, SHAPE(K(GN))) && memcmp(b->konst.data, GC, sizeof GC) == 0 &&
              (n->n_inputs < 4 || n->inputs[3] < 0),
          "gemm -> linear: with the bias [4], no residual");
    /* shape inference has no rule for llmc ops: the shapes linear-fusion kept stand */
    ok = ok && evaluate(&g, 3, 0, &in, &after) == 0 && close_results(&before, &after, 1e-6f);
    CHECK(ok, "gemm -> linear: same outputs within 1e-6 relative");
    results_free(&before);
    results_free(&after);
    report_free(&rep);
    llmc_graph_free(&g);
}

/* ---- weight sharing (codegen) ---- */

enum { TV = 32, TH = 16 };

static float TE[TV * TH], TET[TH * TV], TGAMMA[TH];

/* logits = MatMul(Gather(E, input_ids) * gamma, E^T): the tied LM head as
 * torch exports it, E^T a separate constant.  `perturb`: E^T differs from
 * E's transpose in one element. */
static void build_tied(llmc_graph *g, bool perturb)
{
    new_graph(g);
    g->source_hash = 0xabcdef;
    fill(TE, TV * TH, 51);
    fill(TGAMMA, TH, 52);
    for (int v = 0; v < TV; v++)
        for (int h = 0; h < TH; h++)
            TET[h * TV + v] = TE[v * TH + h];
    if (perturb)
        TET[5 * TV + 7] += 0.25f;
    int ids = g_input(g, "input_ids", LLMC_DT_INT64, SHAPE(K(1), SYM_S));
    int e = g_const_f32(g, "model.embed_tokens.weight", SHAPE(K(TV), K(TH)), TE);
    int et = g_const_f32(g, "lm_head.weight.T", SHAPE(K(TH), K(TV)), TET);
    int gamma = g_const_f32(g, "norm.weight", SHAPE(K(TH)), TGAMMA);
    int gather = g_node(g, "Gather", "embed", NULL, 2, e, ids);
    attr_int(g, gather, "axis", 0);
    int h = OP(g, "Mul", "h", op_value(g, gather), gamma);
    g_output(g, OP(g, "MatMul", "logits", h, et));
}

typedef struct {
    uint8_t *bytes;
    size_t size;
    llmc_codegen_stats stats;
    int weight_tensors;
    uint32_t segments;
    int64_t gather_segment, linear_segment;   /* of the Gather's table and the Linear's W */
    int n_linear;
} compiled;

/* Reads back the plan: weight tensors, segments, and the segments of the
 * Gather's table and the Linear's W. */
static int inspect(compiled *c)
{
    llmc_rt_plan plan;
    llmc_rt_error e = {0};
    c->gather_segment = c->linear_segment = -1;
    c->weight_tensors = c->n_linear = 0;
    if (llmc_rt_plan_open(&plan, c->bytes, c->size, LLMC_RT_VERIFY_HASHES, &e)) {
        printf("# plan_open: %s\n", e.msg);
        return -1;
    }
    c->segments = rt_plan_of(&plan)->n_segments;
    fb_reader r = rt_reader(&plan);
    for (uint32_t t = 0; t < rt_plan_of(&plan)->n_tensors; t++) {
        rt_tensor_desc d;
        if (rt_read_tensor(&r, &plan, t, &d, &e))
            return -1;
        c->weight_tensors += d.kind == KIND_WEIGHT;
    }
    for (uint32_t i = 0; i < rt_plan_of(&plan)->n_ops; i++) {
        rt_op_desc op;
        rt_tensor_desc d;
        if (rt_read_op(&r, &plan, i, &op, &e))
            return -1;
        int w_input = op.code == 10 /* Gather */ ? 0 : op.code == 14 /* Linear */ ? 1 : -1;
        c->n_linear += op.code == 14;
        if (w_input < 0 || op.inputs.len <= (uint32_t)w_input ||
            rt_read_tensor(&r, &plan, fb_vec_u32(&r, op.inputs, (uint32_t)w_input), &d, &e) || d.kind != KIND_WEIGHT)
            continue;
        if (op.code == 10)
            c->gather_segment = d.segment;
        else
            c->linear_segment = d.segment;
    }
    return 0;
}

/* shape-inference and linear-fusion, then codegen to memory. */
static int compile_tied(llmc_graph *g, compiled *c)
{
    llmc_codegen_options opt = {.max_context = MAX_CONTEXT};
    llmc_error err = {0};
    memset(c, 0, sizeof *c);
    if (infer(g) || run_quiet(&llmc_pass_linear_fusion, g))
        return -1;
    if (llmc_codegen_to_memory(g, &opt, &c->bytes, &c->size, &c->stats, &err)) {
        printf("# codegen: %s\n", err.msg);
        return -1;
    }
    return inspect(c);
}

/* Runs the plan at S with ids; the logits (malloc'ed) or NULL. */
static float *run_logits(const compiled *c, uint32_t S, const int64_t *ids)
{
    llmc_rt_plan plan;
    llmc_rt_session session;
    llmc_rt_error e = {0};
    float *out = NULL;
    if (llmc_rt_plan_open(&plan, c->bytes, c->size, LLMC_RT_VERIFY_HASHES, &e))
        return NULL;
    size_t need = llmc_rt_session_memory(&plan);
    void *memory = aligned_alloc(64, (need + 63) / 64 * 64);
    llmc_rt_tensor in = {LLMC_RT_I64, 2, {1, S}, (void *)ids}, y;
    if (memory && !llmc_rt_session_init(&session, &plan, memory, need, &e) &&
        !llmc_rt_session_run(&session, S, 0, &in, &e) && !llmc_rt_session_output(&session, 0, &y, &e) &&
        y.rank == 3 && y.dims[0] == 1 && y.dims[1] == S && y.dims[2] == TV && (out = malloc(sizeof(float) * S * TV)))
        memcpy(out, y.data, sizeof(float) * S * TV);
    if (!out)
        printf("# run: %s\n", e.msg);
    free(memory);
    return out;
}

static void test_weight_sharing(void)
{
    llmc_graph g, ref, pert;
    compiled shared, again, unshared, original;

    /* The unshared reference first: the original graph (MatMul by E^T). */
    build_tied(&ref, false);
    CHECK(infer(&ref) == 0, "tied: shapes inferred");
    enum { S = 4 };
    int64_t ids[S] = {3, 31, 0, 17};
    llmc_rt_tensor in = {LLMC_RT_I64, 2, {1, S}, ids};
    results want = {0};
    bool have_ref = evaluate(&ref, S, 0, &in, &want) == 0 && want.out[0].nbytes == sizeof(float) * S * TV;
    CHECK(have_ref, "tied: the unshared graph evaluates");
    /* by hand too: logits[s, v] = sum_h E[ids[s], h] gamma[h] E[v, h] */
    bool hand = have_ref;
    for (int s = 0; hand && s < S; s++)
        for (int v = 0; v < TV; v++) {
            float acc = 0;
            for (int h = 0; h < TH; h++)
                acc += TE[ids[s] * TH + h] * TGAMMA[h] * TE[v * TH + h];
            hand &= fabsf(((const float *)want.out[0].data)[s * TV + v] - acc) <= 1e-5f;
        }
    CHECK(hand, "tied: the reference logits are E[ids] * gamma . E^T by hand");
    /* Without linear-fusion E^T stays [H, V] and shares nothing. */
    llmc_codegen_options opt = {.max_context = MAX_CONTEXT};
    llmc_error err = {0};
    memset(&original, 0, sizeof original);
    bool orig_ok = llmc_codegen_to_memory(&ref, &opt, &original.bytes, &original.size, &original.stats, &err) == 0 &&
                   inspect(&original) == 0;
    CHECK(orig_ok && original.weight_tensors == 3 && original.segments == 3,
          "tied: the MatMul form has 3 weights in 3 segments (%d, %u)", original.weight_tensors, original.segments);

    build_tied(&g, false);
    build_tied(&pert, true);
    int rc_shared = compile_tied(&g, &shared);
    CHECK(rc_shared == 0 && shared.n_linear == 1, "tied: compiles to a plan with one Linear, opens with hashes verified");
    CHECK(rc_shared == 0 && shared.weight_tensors == 3 && shared.segments == 2,
          "tied: %d weight tensors in %u segments (one fewer)", shared.weight_tensors, shared.segments);
    CHECK(rc_shared == 0 && shared.gather_segment >= 0 && shared.gather_segment == shared.linear_segment,
          "tied: the Gather's table and the Linear's W read segment %lld and %lld", (long long)shared.gather_segment,
          (long long)shared.linear_segment);
    CHECK(rc_shared == 0 && shared.stats.weight_bytes == (TV * TH + TH) * 4,
          "tied: weight bytes %llu = E once + gamma (%d)", (unsigned long long)shared.stats.weight_bytes,
          (TV * TH + TH) * 4);

    int rc_pert = compile_tied(&pert, &unshared);
    CHECK(rc_pert == 0 && unshared.weight_tensors == 3 && unshared.segments == 3 &&
              unshared.gather_segment != unshared.linear_segment,
          "tied, E^T perturbed in one element: 3 weight tensors in 3 segments (%d, %u)", unshared.weight_tensors,
          unshared.segments);
    long long diff = (long long)unshared.size - (long long)shared.size;
    CHECK(rc_shared == 0 && rc_pert == 0 && llabs(diff - TV * TH * 4) <= 64,
          "tied: the shared plan is %lld bytes smaller (%zu vs %zu), V*H*4 = %d within 64", diff, shared.size,
          unshared.size, TV * TH * 4);
    CHECK(rc_pert == 0 && unshared.stats.weight_bytes - shared.stats.weight_bytes == TV * TH * 4,
          "tied: weight bytes differ by exactly V*H*4");

    float *got = rc_shared == 0 ? run_logits(&shared, S, ids) : NULL;
    float maxdiff = INFINITY;
    if (got && have_ref) {
        maxdiff = 0;
        for (int i = 0; i < S * TV; i++)
            maxdiff = fmaxf(maxdiff, fabsf(got[i] - ((const float *)want.out[0].data)[i]));
    }
    CHECK(maxdiff <= 1e-5f, "tied: the shared plan's logits equal the unshared graph's (max diff %.3g)", maxdiff);
    free(got);

    /* Determinism: the same graph compiled twice gives the same bytes. */
    llmc_graph g2;
    build_tied(&g2, false);
    int rc_again = compile_tied(&g2, &again);
    CHECK(rc_shared == 0 && rc_again == 0 && again.size == shared.size &&
              memcmp(again.bytes, shared.bytes, shared.size) == 0,
          "tied: codegen twice gives identical bytes (%zu)", again.size);
    uint8_t *third = NULL;
    size_t third_size = 0;
    llmc_codegen_options opt4 = {.max_context = MAX_CONTEXT, .threads = 4};
    CHECK(llmc_codegen_to_memory(&g, &opt4, &third, &third_size, NULL, &err) == 0 && third_size == shared.size &&
              memcmp(third, shared.bytes, shared.size) == 0,
          "tied: and with 4 hashing threads too");
    free(third);

    free(shared.bytes);
    free(again.bytes);
    free(unshared.bytes);
    free(original.bytes);
    results_free(&want);
    llmc_graph_free(&g);
    llmc_graph_free(&g2);
    llmc_graph_free(&ref);
    llmc_graph_free(&pert);
}

/* Three equal weights and two equal ones, interleaved with distinct ones:
 * segments are numbered in tensor order, each group shares its first
 * tensor's segment. */
static void test_weight_groups(void)
{
    llmc_graph g;
    new_graph(&g);
    float a[16], b[16], c[16];
    fill(a, 16, 61);
    fill(b, 16, 62);
    fill(c, 16, 63);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(16)));
    const float *order[6] = {a, b, a, c, b, a};   /* segments 0 1 0 2 1 0 */
    int acc = x;
    for (int i = 0; i < 6; i++) {
        char name[16], out[16];
        snprintf(name, sizeof name, "w%d", i);
        snprintf(out, sizeof out, "s%d", i);
        acc = OP(&g, "Add", out, acc, g_const_f32(&g, name, SHAPE(K(16)), order[i]));
    }
    g_output(&g, acc);
    compiled c1;
    memset(&c1, 0, sizeof c1);
    llmc_codegen_options opt = {.max_context = MAX_CONTEXT};
    llmc_error err = {0};
    bool ok = infer(&g) == 0 && llmc_codegen_to_memory(&g, &opt, &c1.bytes, &c1.size, &c1.stats, &err) == 0 &&
              inspect(&c1) == 0;
    CHECK(ok && c1.weight_tensors == 6 && c1.segments == 3, "groups: 6 weights in %u segments", c1.segments);
    llmc_rt_plan plan;
    int64_t seg[6] = {-1, -1, -1, -1, -1, -1};
    if (ok && !llmc_rt_plan_open(&plan, c1.bytes, c1.size, LLMC_RT_VERIFY_HASHES, NULL)) {
        fb_reader r = rt_reader(&plan);
        int k = 0;
        for (uint32_t t = 0; t < rt_plan_of(&plan)->n_tensors && k < 6; t++) {
            rt_tensor_desc d;
            if (!rt_read_tensor(&r, &plan, t, &d, NULL) && d.kind == KIND_WEIGHT)
                seg[k++] = d.segment;
        }
    }
    CHECK(seg[0] == 0 && seg[1] == 1 && seg[2] == 0 && seg[3] == 2 && seg[4] == 1 && seg[5] == 0,
          "groups: segments 0 1 0 2 1 0 in tensor order (%lld %lld %lld %lld %lld %lld)", (long long)seg[0],
          (long long)seg[1], (long long)seg[2], (long long)seg[3], (long long)seg[4], (long long)seg[5]);
    float xs[16], want[16];
    fill(xs, 16, 64);
    for (int i = 0; i < 16; i++)
        want[i] = xs[i] + a[i] + b[i] + a[i] + c[i] + b[i] + a[i];
    llmc_rt_tensor in = {LLMC_RT_F32, 1, {16}, xs};
    results r = {0};
    ok = ok && evaluate(&g, 1, 0, &in, &r) == 0 && memcmp(r.out[0].data, want, sizeof want) == 0;
    CHECK(ok, "groups: the plan computes x + a + b + a + c + b + a exactly");
    if (ok)
        results_free(&r);
    free(c1.bytes);
    llmc_graph_free(&g);
}

/* Equal bytes, different dims and dtypes: [16] float, [4, 4] float and
 * [16] int32 with the same bits share one segment ("whatever the dims");
 * the plan still verifies and each reads its own view. */
static void test_weight_views(void)
{
    llmc_graph g;
    new_graph(&g);
    float a[16];
    int32_t ai[16];
    fill(a, 16, 71);
    memcpy(ai, a, sizeof a);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(16)));
    int x2 = g_input(&g, "x2", LLMC_DT_FLOAT, SHAPE(K(4), K(4)));
    int xi = g_input(&g, "xi", LLMC_DT_INT32, SHAPE(K(16)));
    g_output(&g, OP(&g, "Add", "y1", x, g_const_f32(&g, "w16", SHAPE(K(16)), a)));
    g_output(&g, OP(&g, "Mul", "y2", x2, g_const_f32(&g, "w44", SHAPE(K(4), K(4)), a)));
    g_output(&g, OP(&g, "Equal", "y3", xi, g_const(&g, "wi", LLMC_DT_INT32, SHAPE(K(16)), ai)));
    compiled c;
    memset(&c, 0, sizeof c);
    llmc_codegen_options opt = {.max_context = MAX_CONTEXT};
    llmc_error err = {0};
    bool ok = infer(&g) == 0 && llmc_codegen_to_memory(&g, &opt, &c.bytes, &c.size, &c.stats, &err) == 0 &&
              inspect(&c) == 0;
    CHECK(ok && c.weight_tensors == 3 && c.segments == 1 && c.stats.weight_bytes == sizeof a,
          "views: [16] f32, [4,4] f32, [16] i32 of equal bytes: %d weights, %u segment, %llu weight bytes (%s)",
          c.weight_tensors, c.segments, (unsigned long long)c.stats.weight_bytes, err.msg);
    float xs[16], x2s[16];
    int32_t xis[16];
    fill(xs, 16, 72);
    fill(x2s, 16, 73);
    for (int i = 0; i < 16; i++)   /* equal to the weight's bits at even i */
        xis[i] = i % 2 ? ai[i] ^ 1 : ai[i];
    llmc_rt_tensor in[3] = {{LLMC_RT_F32, 1, {16}, xs}, {LLMC_RT_F32, 2, {4, 4}, x2s}, {LLMC_RT_I32, 1, {16}, xis}};
    results r = {0};
    ok = ok && evaluate(&g, 1, 0, in, &r) == 0;
    bool vals = ok;
    for (int i = 0; vals && i < 16; i++)
        vals &= ((const float *)r.out[0].data)[i] == xs[i] + a[i] && ((const float *)r.out[1].data)[i] == x2s[i] * a[i] &&
                r.out[2].dtype == LLMC_DT_BOOL && ((const uint8_t *)r.out[2].data)[i] == (i % 2 == 0);
    CHECK(vals, "views: x + w, x2 * w and Equal(xi, w as int32) read the shared bytes right");
    if (ok)
        results_free(&r);
    free(c.bytes);
    llmc_graph_free(&g);
}

/* The whole pipeline on transformers' Conv1D: gemm-unflatten runs before
 * linear-fusion and the result is one Linear. */
static void test_gemm_in_pipeline(void)
{
    llmc_graph g;
    build_gemm(&g, &(gemm_opts){.c_rank = 1, .alpha = 1});
    llmc_pass_record rec[LLMC_PIPELINE_MAX_PASSES];
    int n_rec = 0;
    llmc_error err = {0};
    llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = MAX_CONTEXT};
    CHECK(llmc_pipeline_run(&g, &ctx, NULL, rec, &n_rec, &err) == 0, "gemm pipeline runs (%s)", err.msg);
    int unflatten_at = -1, linear_at = -1;
    for (int i = 0; i < n_rec; i++) {
        unflatten_at = strcmp(rec[i].name, "gemm-unflatten") == 0 ? i : unflatten_at;
        linear_at = strcmp(rec[i].name, "linear-fusion") == 0 ? i : linear_at;
    }
    CHECK(unflatten_at >= 0 && unflatten_at < linear_at && strcmp(rec[unflatten_at].detail, "1 Gemms unflattened") == 0,
          "gemm pipeline: gemm-unflatten (#%d, '%s') before linear-fusion (#%d)", unflatten_at,
          unflatten_at >= 0 ? rec[unflatten_at].detail : "", linear_at);
    CHECK(llmc_graph_live_nodes(&g) == 1 && count_op(&g, "Linear") == 1 && count_op(&g, "Reshape") == 0,
          "gemm pipeline: one Linear, nothing else (%d live)", llmc_graph_live_nodes(&g));
    llmc_graph_free(&g);
}

/* ---- packed-split ---- */

enum { PK = 6, PN = 10 };

typedef struct {
    int64_t bounds[3][2];   /* start, end of each last-axis Slice */
    int n_slices;
    int64_t step;           /* of the last Slice */
    bool extra_reader;      /* the MatMul output also read by a Neg */
    bool slice_input;       /* the Slices read x instead of the MatMul's output */
} packed_opts;

static float PW[PK * PN];

/* Slices of MatMul(x [1, S, 6], W [6, 10]) along the last axis, each a
 * graph output: transformers' Phi-3 `qkv[..., :q]`, ... */
static int build_packed(llmc_graph *g, const packed_opts *o)
{
    new_graph(g);
    fill(PW, PK * PN, 51);
    int x = g_input(g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(PK)));
    int w = g_const_f32(g, "qkv_proj.weight", SHAPE(K(PK), K(PN)), PW);
    int y = OP(g, "MatMul", "/qkv_proj/MatMul_output_0", x, w);
    int axes = CI64(g, "axes", -1);
    char name[64];
    for (int i = 0; i < o->n_slices; i++) {
        int64_t step = i == o->n_slices - 1 ? o->step : 1;
        snprintf(name, sizeof name, "/Slice_%d_output_0", i);
        int s = g_const(g, "start", LLMC_DT_INT64, SHAPE(K(1)), &o->bounds[i][0]);
        int e = g_const(g, "end", LLMC_DT_INT64, SHAPE(K(1)), &o->bounds[i][1]);
        g_output(g, OP(g, "Slice", name, o->slice_input ? x : y, s, e, axes, CI64(g, "steps", step)));
    }
    if (o->extra_reader)
        g_output(g, OP(g, "Neg", "/Neg_output_0", y));
    return y;
}

/* q [0, 4), k [4, 7), v from -3 through the end (INT64_MAX), listed out of order. */
static const packed_opts QKV = {.bounds = {{4, 7}, {0, 4}, {-3, INT64_MAX}}, .n_slices = 3, .step = 1};

static void test_packed_split(void)
{
    llmc_graph g;
    pass_report rep = {0};
    int y = build_packed(&g, &QKV);
    float xs[5 * PK];
    fill(xs, 5 * PK, 52);
    llmc_rt_tensor in = {LLMC_RT_F32, 3, {1, 5, PK}, xs};
    results before = {0}, after = {0};
    bool ok = infer(&g) == 0 && evaluate(&g, 5, 0, &in, &before) == 0;
    CHECK(ok && run_pass(&llmc_pass_packed_split, &g, &rep) == 0, "packed: pass runs");
    int split = -1;
    for (int i = 0; i < g.n_nodes; i++)
        split = !g.nodes[i].dead && strcmp(g.nodes[i].op_type, "Split") == 0 ? i : split;
    const llmc_node *s = split >= 0 ? &g.nodes[split] : NULL;
    int64_t sizes[3] = {0};
    int n_sizes = 0;
    bool sizes_ok = s && s->n_inputs == 2 && llmc_match_const_ints(&g, s->inputs[1], sizes, 3, &n_sizes);
    CHECK(count_op(&g, "Slice") == 0 && count_op(&g, "Split") == 1 && s && s->inputs[0] == y &&
              llmc_node_attr_int(&g, split, "axis", 0) == -1 && s->n_outputs == 3 && s->outputs[0] == g.outputs[1] &&
              s->outputs[1] == g.outputs[0] && s->outputs[2] == g.outputs[2],
          "packed: one Split(axis -1) of the MatMul writes the Slices' outputs in range order");
    CHECK(sizes_ok && n_sizes == 3 && sizes[0] == 4 && sizes[1] == 3 && sizes[2] == 3,
          "packed: split sizes [4, 3, 3] (%lld, %lld, %lld)", (long long)sizes[0], (long long)sizes[1],
          (long long)sizes[2]);
    CHECK(strcmp(rep.detail, "1 packed projections split") == 0, "packed: detail '%s'", rep.detail);
    ok = ok && infer(&g) == 0 && evaluate(&g, 5, 0, &in, &after) == 0 && same_bits(&before, &after);
    CHECK(ok, "packed: the same output bits before and after");
    results_free(&after);
    CHECK(run_quiet(&llmc_pass_linear_fusion, &g) == 0 && llmc_graph_live_nodes(&g) == 1 &&
              count_op(&g, "Linear") == 1 && g.nodes[producer_of(&g, g.outputs[0])].n_outputs == 3,
          "packed: linear-fusion then makes one Linear with three outputs (%d live)", llmc_graph_live_nodes(&g));
    ok = ok && evaluate(&g, 5, 0, &in, &after) == 0 && close_results(&before, &after, 1e-6f);
    CHECK(ok, "packed: the Linear's outputs within 1e-6 of the Slices'");
    results_free(&after);
    results_free(&before);
    report_free(&rep);
    llmc_graph_free(&g);
}

/* why: the explanation's text, or NULL when the pass must stay silent. */
static void check_packed_refused(const char *what, const packed_opts *o, const char *why)
{
    llmc_graph g;
    pass_report rep = {0};
    build_packed(&g, o);
    int live = infer(&g) == 0 ? llmc_graph_live_nodes(&g) : -1;
    CHECK(run_pass(&llmc_pass_packed_split, &g, &rep) == 0 && llmc_graph_live_nodes(&g) == live &&
              count_op(&g, "Split") == 0 && count_op(&g, "Slice") == o->n_slices,
          "packed refused, %s: graph unchanged", what);
    CHECK(why ? rep.log && strstr(rep.log, "packed-split: node '") && strstr(rep.log, why) : !rep.log || !*rep.log,
          "packed refused, %s: %s (log '%s')", what, why ? "explained" : "not explained", one_line(rep.log));
    report_free(&rep);
    llmc_graph_free(&g);
}

static void test_packed_refusals(void)
{
    packed_opts o = QKV;
    o.bounds[0][0] = 5;   /* k [5, 7): a gap at 4 */
    check_packed_refused("a gap", &o, "do not cover its last axis exactly once");
    o = QKV;
    o.bounds[2][0] = 6;   /* v [6, 10): overlaps k */
    check_packed_refused("an overlap", &o, "do not cover its last axis exactly once");
    o = QKV;
    o.step = 2;
    check_packed_refused("a step of 2", &o, "is not a Slice of its last axis");
    o = QKV;
    o.extra_reader = true;
    check_packed_refused("another reader", &o, "is not a Slice of its last axis");
    o = (packed_opts){.bounds = {{0, 3}, {3, 6}}, .n_slices = 2, .step = 1, .slice_input = true};
    check_packed_refused("Slices of a graph input", &o, NULL);
}

/* ---- position tables ---- */

/* wte [32, 4] read by input_ids, wpe [128, 4] by position_ids, a cos table
 * [64, 4] (through a Cast and a Slice) by position_ids + 1, a [16, 4]
 * table by input_ids + 1 (token-derived: not a position table). */
static void test_position_tables(void)
{
    static float data[128 * 4];
    llmc_graph g;
    new_graph(&g);
    int ids = g_input(&g, "input_ids", LLMC_DT_INT64, SHAPE(K(1), SYM_S));
    int pos = g_input(&g, "position_ids", LLMC_DT_INT64, SHAPE(K(1), SYM_S));
    int wte = g_const_f32(&g, "wte", SHAPE(K(32), K(4)), data), wpe = g_const_f32(&g, "wpe", SHAPE(K(128), K(4)), data);
    int cos = g_const_f32(&g, "cos_cached", SHAPE(K(64), K(4)), data);
    int other = g_const_f32(&g, "by_token", SHAPE(K(16), K(4)), data);
    llmc_position_limit lim;
    int h = OP(&g, "Add", "h", OP(&g, "Gather", "tok", wte, ids), OP(&g, "Gather", "pe", wpe, pos));
    int by_token = OP(&g, "Gather", "by_token_rows", other, OP(&g, "Add", "ids1", ids, CI64(&g, "one", 1)));
    g_output(&g, OP(&g, "Add", "y", h, by_token));
    llmc_position_tables(&g, &lim);
    CHECK(lim.rows == 128 && lim.table == wpe && strcmp(g.nodes[lim.gather].name, "pe") == 0,
          "position tables: wpe [128, 4] read by position_ids (rows %lld), not wte nor the token-indexed table",
          (long long)lim.rows);
    int sliced = slice_of(&g, "cos_head", cast_to(&g, "cos_f", cos, LLMC_DT_FLOAT), 0, 64, 0);
    int pos1 = OP(&g, "Add", "pos1", pos, CI64(&g, "one_p", 1));
    g_output(&g, OP(&g, "Gather", "cos_rows", sliced, pos1));
    llmc_position_tables(&g, &lim);
    CHECK(lim.rows == 64 && lim.table == cos, "position tables: the smallest, cos_cached [64, 4] through "
          "Cast and Slice by position_ids + 1 (rows %lld)", (long long)lim.rows);
    llmc_graph_free(&g);

    new_graph(&g);
    ids = g_input(&g, "input_ids", LLMC_DT_INT64, SHAPE(K(1), SYM_S));
    g_output(&g, OP(&g, "Gather", "tok", g_const_f32(&g, "wte", SHAPE(K(32), K(4)), data), ids));
    llmc_position_tables(&g, &lim);
    CHECK(lim.rows == 0 && lim.table == -1, "position tables: none in a model with only a token embedding");
    llmc_graph_free(&g);
}

/* ---- quant-canonical ---- */

/* ONNX Runtime's dynamic quantization of y = x W (x [1, S, 4], W [4, 3]):
 * the MatMul becomes MatMul(x, DequantizeLinear(Wq, [1, 3] scales, [1, 3]
 * zero points, axis 0, block 4)) writing y; the activation's
 * DynamicQuantizeLinear goes. */
static void test_dynamic_int8(void)
{
    llmc_graph g;
    new_graph(&g);
    static const int8_t wq[12] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -127};
    float ws = 0.25f;
    int8_t wzp = 0;
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(4)));
    int w = g_const(&g, "W_quantized", LLMC_DT_INT8, SHAPE(K(4), K(3)), wq);
    int s = g_const(&g, "W_scale", LLMC_DT_FLOAT, SCALAR, &ws);
    int z = g_const(&g, "W_zero_point", LLMC_DT_INT8, SCALAR, &wzp);
    int outs[3] = {llmc_graph_add_value(&g, "xq", 0), llmc_graph_add_value(&g, "xs", 0),
                   llmc_graph_add_value(&g, "xzp", 0)};
    llmc_graph_add_node(&g, "DynamicQuantizeLinear", "dql", &x, 1, outs, 3);
    int mi = OP(&g, "MatMulInteger", "mi", outs[0], w, outs[2], z);
    int cast_value, cast = g_node(&g, "Cast", "c", &cast_value, 1, mi);
    attr_int(&g, cast, "to", LLMC_DT_FLOAT);
    int y = OP(&g, "Mul", "y", cast_value, OP(&g, "Mul", "sm", outs[1], s));
    g_output(&g, y);
    pass_report rep = {0};
    CHECK(infer(&g) == 0 && run_pass(&llmc_pass_quant_canonical, &g, &rep) == 0, "dynamic int8: pass runs");
    int mm = producer_of(&g, y), dq = mm >= 0 ? producer_of(&g, g.nodes[mm].inputs[1]) : -1;
    CHECK(mm >= 0 && strcmp(g.nodes[mm].op_type, "MatMul") == 0 && g.nodes[mm].inputs[0] == x && dq >= 0 &&
              strcmp(g.nodes[dq].op_type, "DequantizeLinear") == 0 && g.nodes[dq].inputs[0] == w,
          "dynamic int8: y = MatMul(x, DequantizeLinear(W_quantized))");
    bool form = dq >= 0 && llmc_node_attr_int(&g, dq, "axis", 1) == 0 &&
                llmc_node_attr_int(&g, dq, "block_size", 0) == 4 && g.nodes[dq].n_inputs == 3;
    const llmc_value *sv = form ? &g.values[g.nodes[dq].inputs[1]] : NULL, *zv = form ? &g.values[g.nodes[dq].inputs[2]] : NULL;
    const float *sc = sv ? llmc_const_bytes(&sv->konst) : NULL;
    const int8_t *zs = zv ? llmc_const_bytes(&zv->konst) : NULL;
    CHECK(sc && zs && shape_eq(sv->shape, SHAPE(K(1), K(3))) && zv->dtype == LLMC_DT_INT8 && sc[0] == 0.25f &&
              sc[1] == 0.25f && sc[2] == 0.25f && zs[0] == 0 && zs[1] == 0 && zs[2] == 0,
          "dynamic int8: blocked form, axis 0, block K, scale [1, N] of the tensor's scale, zero points 0");
    CHECK(count_op(&g, "MatMulInteger") == 0 && count_op(&g, "DynamicQuantizeLinear") == 0 &&
              count_op(&g, "Cast") == 0 && strstr(rep.detail, "1 dynamic int8 MatMuls") != NULL,
          "dynamic int8: MatMulInteger, Cast and the activation's DynamicQuantizeLinear gone (%s)", rep.detail);
    report_free(&rep);
    llmc_graph_free(&g);
}

/* QuantizeLinear(x, 2, 128) as float ops: round half to even, saturate to
 * uint8; the values ONNX's reference computes. */
static void test_quantize_linear(void)
{
    llmc_graph g;
    new_graph(&g);
    float scale = 2.0f;
    uint8_t zp = 128;
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(8)));
    int y = OP(&g, "QuantizeLinear", "y", x, g_const(&g, "s", LLMC_DT_FLOAT, SCALAR, &scale),
               g_const(&g, "zp", LLMC_DT_UINT8, SCALAR, &zp));
    g_output(&g, y);
    pass_report rep = {0};
    CHECK(infer(&g) == 0 && run_pass(&llmc_pass_quant_canonical, &g, &rep) == 0 && count_op(&g, "QuantizeLinear") == 0,
          "QuantizeLinear: rewritten into float ops");
    float xs[8] = {0, 3, 5, 7, -3, -5, 1000, -1000};        /* x / 2: 1.5, 2.5, 3.5, -1.5, -2.5 */
    static const uint8_t want[8] = {128, 130, 130, 132, 126, 126, 255, 0};
    llmc_rt_tensor in[1] = {{LLMC_RT_F32, 1, {8}, xs}};
    results r = {0};
    bool ok = infer(&g) == 0 && evaluate(&g, 1, 0, in, &r) == 0 && r.out[0].dtype == LLMC_DT_UINT8 &&
              memcmp(r.out[0].data, want, sizeof want) == 0;
    CHECK(ok, "QuantizeLinear: half to even (1.5 -> 2, 2.5 -> 2, -2.5 -> -2) and saturation");
    results_free(&r);
    report_free(&rep);
    llmc_graph_free(&g);
}

int main(void)
{
    test_identity_chains();
    test_identity_present();
    test_identity_of_input();
    test_identity_two_outputs();
    test_identity_slices();
    test_identity_round_trips();
    test_position_tables();
    test_gemm_forms();
    test_gemm_refusals();
    test_gemm_then_linear();
    test_gemm_in_pipeline();
    test_packed_split();
    test_packed_refusals();
    test_weight_sharing();
    test_weight_groups();
    test_weight_views();
    test_dynamic_int8();
    test_quantize_linear();
    return TAP_DONE();
}
