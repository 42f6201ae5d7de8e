/* Runs complete tiny plans through llmc_rt_session_run / _feed and checks
 * the numbers against plain loops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llmc_rt.h"
#include "llmc_rt_internal.h"
#include "rt_testplan.h"
#include "tap.h"

static tp_plan tp;
static float wt[3][4], bias[3];

static float frand(void)
{
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

/* y = Softmax(MatMul(x, Transpose(wt)) + b), x: [S, 4]. */
static uint8_t *build_mlp(const char *name, size_t *size, long long x_max_bytes)
{
    tp_init(&tp, 8);
    int x = tp_tensor(&tp, "x", "Float32", "S,4");
    if (x_max_bytes >= 0)
        tp.tensor_bytes[x] = x_max_bytes;
    int t_wt = tp_weight(&tp, "wt", "Float32", "3,4", wt, sizeof wt);
    int w = tp_tensor(&tp, "w", "Float32", "4,3");
    int b = tp_weight(&tp, "b", "Float32", "3", bias, sizeof bias);
    int xw = tp_tensor(&tp, "xw", "Float32", "S,3");
    int z = tp_tensor(&tp, "z", "Float32", "S,3");
    int y = tp_tensor(&tp, "y", "Float32", "S,3");
    tp_op(&tp, "code: \"Copy\", name: \"model/Transpose\", inputs: [%d], outputs: [%d], "
          "regions: [{src: %d, dst: %d, dst_start: %s, size: %s, src_start: %s, "
          "src_axis: [1, 0], src_step: [1, 1]}]",
          t_wt, w, t_wt, w, tp_affs("0,0"), tp_affs("4,3"), tp_affs("0,0"));
    tp_op(&tp, "code: \"MatMul\", name: \"model/MatMul\", inputs: [%d, %d], outputs: [%d]",
          x, w, xw);
    tp_op(&tp, "code: \"Binary\", name: \"model/Add\", kind: 0, inputs: [%d, %d], "
          "outputs: [%d]", xw, b, z);
    tp_op(&tp, "code: \"Softmax\", name: \"model/Softmax\", axis: 1, inputs: [%d], "
          "outputs: [%d]", z, y);
    tp_io(&tp, 0, x, "Generic", 0);
    tp_io(&tp, 1, y, "Generic", 0);
    return tp_finish(&tp, name, size);
}

static void mlp_reference(const float *x, int S, float *y)
{
    for (int s = 0; s < S; s++) {
        double z[3], max = -1e30, sum = 0;
        for (int j = 0; j < 3; j++) {
            z[j] = bias[j];
            for (int k = 0; k < 4; k++)
                z[j] += (double)x[s * 4 + k] * wt[j][k];
            max = z[j] > max ? z[j] : max;
        }
        for (int j = 0; j < 3; j++)
            sum += exp(z[j] - max);
        for (int j = 0; j < 3; j++)
            y[s * 3 + j] = (float)(exp(z[j] - max) / sum);
    }
}

static void test_mlp(void)
{
    size_t size;
    for (int j = 0; j < 3; j++) {
        bias[j] = frand();
        for (int k = 0; k < 4; k++)
            wt[j][k] = frand();
    }
    uint8_t *bytes = build_mlp("rt_session_mlp", &size, -1);
    CHECK(bytes != NULL, "mlp plan built with flatc");
    if (!bytes)
        return;
    llmc_rt_plan plan;
    llmc_rt_error err;
    llmc_rt_status st = llmc_rt_plan_open(&plan, bytes, size, LLMC_RT_VERIFY_HASHES, &err);
    CHECK(st == LLMC_RT_OK, "mlp plan opens: %s", err.msg);
    if (st)
        return;
    CHECK(rt_plan_of(&plan)->n_ops == 4 && rt_plan_of(&plan)->n_tensors == 7 && rt_plan_of(&plan)->max_context == 8 && rt_plan_of(&plan)->kv_bytes == 0,
          "plan fields filled");
    size_t mem_size = llmc_rt_session_memory(&plan);
    CHECK(mem_size >= rt_plan_of(&plan)->arena_size, "session memory %zu covers the arena", mem_size);
    void *mem = malloc(mem_size);
    llmc_rt_session s;
    CHECK(llmc_rt_session_init(&s, &plan, mem, mem_size - 1, &err) == LLMC_RT_E_MEMORY,
          "one byte too little memory is refused");
    CHECK(llmc_rt_session_init(&s, &plan, mem, mem_size, &err) == LLMC_RT_OK, "session init");
    llmc_rt_tensor out;
    CHECK(llmc_rt_session_output(&s, 0, &out, &err) == LLMC_RT_E_ARG, "no output before a run");
    for (int S = 1; S <= 8; S++) {
        float x[32], expect[24];
        for (int i = 0; i < S * 4; i++)
            x[i] = frand() * 3;
        mlp_reference(x, S, expect);
        llmc_rt_tensor in = {LLMC_RT_F32, 2, {S, 4}, x};
        st = llmc_rt_session_run(&s, (uint32_t)S, 0, &in, &err);
        CHECK(st == LLMC_RT_OK, "run S=%d: %s", S, st ? err.msg : "ok");
        st = llmc_rt_session_output(&s, 0, &out, &err);
        double worst = 0;
        for (int i = 0; !st && i < S * 3; i++)
            worst = fmax(worst, fabs(((float *)out.data)[i] - expect[i]));
        CHECK(!st && out.rank == 2 && out.dims[0] == S && out.dims[1] == 3 && worst < 1e-6,
              "softmax(x W^T + b) at S=%d matches plain loops (max error %g)", S, worst);
    }
    float x[36] = {0};
    llmc_rt_tensor in = {LLMC_RT_F32, 2, {9, 4}, x};
    CHECK(llmc_rt_session_run(&s, 9, 0, &in, &err) == LLMC_RT_E_BOUNDS, "S=9 > max_context");
    CHECK(llmc_rt_session_run(&s, 4, 5, &in, &err) == LLMC_RT_E_BOUNDS, "S+P > max_context");
    CHECK(llmc_rt_session_run(&s, 0, 0, &in, &err) == LLMC_RT_E_BOUNDS,
          "S=0 refused for a plan with symbols");
    llmc_rt_tensor wrong = {LLMC_RT_F32, 2, {2, 4}, x};
    CHECK(llmc_rt_session_run(&s, 3, 0, &wrong, &err) == LLMC_RT_E_ARG,
          "input dims must match the dims at (S, P): %s", err.msg);
    wrong.dtype = LLMC_RT_I32;
    wrong.dims[0] = 3;
    CHECK(llmc_rt_session_run(&s, 3, 0, &wrong, &err) == LLMC_RT_E_ARG, "input dtype checked");
    CHECK(llmc_rt_session_feed(&s, (const int64_t *)x, 1, NULL, &err) == LLMC_RT_E_ARG,
          "feed needs InputIds and Logits bindings");
    free(mem);
    free(bytes);
}

/* A plan whose tensor x reserves only 2 rows: S=3 must fail at run time. */
static void test_max_bytes(void)
{
    size_t size;
    uint8_t *bytes = build_mlp("rt_session_small_x", &size, 2 * 4 * 4);
    llmc_rt_plan plan;
    llmc_rt_error err;
    if (!bytes || llmc_rt_plan_open(&plan, bytes, size, 0, &err)) {
        CHECK(0, "small-x plan opens");
        return;
    }
    size_t mem_size = llmc_rt_session_memory(&plan);
    void *mem = malloc(mem_size);
    llmc_rt_session s;
    llmc_rt_session_init(&s, &plan, mem, mem_size, &err);
    float x[12] = {0};
    llmc_rt_tensor in = {LLMC_RT_F32, 2, {2, 4}, x};
    CHECK(llmc_rt_session_run(&s, 2, 0, &in, &err) == LLMC_RT_OK, "2 rows fit");
    in.dims[0] = 3;
    llmc_rt_status st = llmc_rt_session_run(&s, 3, 0, &in, &err);
    CHECK(st == LLMC_RT_E_EXEC && strstr(err.msg, "tensor 0 'x'"),
          "3 rows exceed max_bytes: %s", err.msg);
    free(mem);
    free(bytes);
}

/* ---- the LLM path ----------------------------------------------------- */

enum { V = 7, D = 4, CTX = 16 };
static float emb_table[V][D], wout[D][V];

/* A fake one-layer "model" with the foundation IO: present = concat(past,
 * new rows), logits of every position depend on the whole KV history, on
 * position_ids, on the attention mask and on a Symbols value. */
static uint8_t *build_llm(size_t *size, int vocab_size)
{
    tp_init(&tp, CTX);
    snprintf(tp.extra, sizeof tp.extra, "vocab_size: %d, n_layers: 1,", vocab_size);
    int ids = tp_tensor(&tp, "input_ids", "Int64", "1,S");
    int mask = tp_tensor(&tp, "attention_mask", "Int64", "1,P+S");
    int pos = tp_tensor(&tp, "position_ids", "Int64", "1,S");
    int pk = tp_tensor(&tp, "past_key_values.0.key", "Float32", "1,1,P,4");
    int pv = tp_tensor(&tp, "past_key_values.0.value", "Float32", "1,1,P,4");
    int table = tp_weight(&tp, "embed", "Float32", "7,4", emb_table, sizeof emb_table);
    int w = tp_weight(&tp, "lm_head", "Float32", "4,7", wout, sizeof wout);
    int emb = tp_tensor(&tp, "emb", "Float32", "1,S,4");
    int sq = tp_tensor(&tp, "sq", "Float32", "1,S,4");
    int prk = tp_tensor(&tp, "present.0.key", "Float32", "1,1,P+S,4");
    int prv = tp_tensor(&tp, "present.0.value", "Float32", "1,1,P+S,4");
    int ksum = tp_tensor(&tp, "ksum", "Float32", "1,1,1,4");
    int vsum = tp_tensor(&tp, "vsum", "Float32", "1,1,1,4");
    int kv = tp_tensor(&tp, "kv", "Float32", "1,1,1,4");
    int kv3 = tp_tensor(&tp, "kv3", "Float32", "1,1,4");
    int h = tp_tensor(&tp, "h", "Float32", "1,S,4");
    int lg = tp_tensor(&tp, "lg", "Float32", "1,S,7");
    int posf = tp_tensor(&tp, "posf", "Float32", "1,S");
    int pos3 = tp_tensor(&tp, "pos3", "Float32", "1,S,1");
    int msum = tp_tensor(&tp, "masksum", "Int64", "");
    int mf = tp_tensor(&tp, "maskf", "Float32", "");
    int lg2 = tp_tensor(&tp, "lg2", "Float32", "1,S,7");
    int lg3 = tp_tensor(&tp, "lg3", "Float32", "1,S,7");
    int sym = tp_tensor(&tp, "sym", "Int64", "1");
    int symf = tp_tensor(&tp, "symf", "Float32", "1");
    int half = tp_tensor(&tp, "half", "Float32", "1");
    int hs = tp_tensor(&tp, "hs", "Float32", "1");
    int logits = tp_tensor(&tp, "logits", "Float32", "1,S,7");

    tp_op(&tp, "code: \"Gather\", name: \"embed\", inputs: [%d, %d], outputs: [%d]",
          table, ids, emb);
    tp_op(&tp, "code: \"Binary\", kind: 2, inputs: [%d, %d], outputs: [%d]", emb, emb, sq);
    const char *past[2] = {tp_affs("0,0,0,0"), tp_affs("1,1,P,4")};
    int srcs[2][2] = {{pk, emb}, {pv, sq}}, dsts[2] = {prk, prv};
    for (int i = 0; i < 2; i++)
        tp_op(&tp, "code: \"Copy\", name: \"concat%d\", inputs: [%d, %d], outputs: [%d], "
              "regions: [{src: %d, dst: %d, dst_start: %s, size: %s, src_start: %s, "
              "src_axis: [0, 1, 2, 3], src_step: [1, 1, 1, 1]}, "
              "{src: %d, dst: %d, dst_start: %s, size: %s, src_start: %s, "
              "src_axis: [0, -1, 1, 2], src_step: [1, 0, 1, 1]}]",
              i, srcs[i][0], srcs[i][1], dsts[i], srcs[i][0], dsts[i], past[0], past[1],
              past[0], srcs[i][1], dsts[i], tp_affs("0,0,P,0"), tp_affs("1,1,S,4"),
              tp_affs("0,0,0"));
    tp_op(&tp, "code: \"Reduce\", kind: 1, axes: [2], inputs: [%d], outputs: [%d]", prk, ksum);
    tp_op(&tp, "code: \"Reduce\", kind: 1, axes: [2], inputs: [%d], outputs: [%d]", prv, vsum);
    tp_op(&tp, "code: \"Binary\", kind: 0, inputs: [%d, %d], outputs: [%d]", ksum, vsum, kv);
    tp_op(&tp, "code: \"Reshape\", inputs: [%d], outputs: [%d]", kv, kv3);
    tp_op(&tp, "code: \"Binary\", kind: 0, inputs: [%d, %d], outputs: [%d]", emb, kv3, h);
    tp_op(&tp, "code: \"MatMul\", inputs: [%d, %d], outputs: [%d]", h, w, lg);
    tp_op(&tp, "code: \"Cast\", inputs: [%d], outputs: [%d]", pos, posf);
    tp_op(&tp, "code: \"Reshape\", inputs: [%d], outputs: [%d]", posf, pos3);
    tp_op(&tp, "code: \"Reduce\", kind: 1, axes: [0, 1], keepdims: false, inputs: [%d], "
          "outputs: [%d]", mask, msum);
    tp_op(&tp, "code: \"Cast\", inputs: [%d], outputs: [%d]", msum, mf);
    tp_op(&tp, "code: \"Binary\", kind: 0, inputs: [%d, %d], outputs: [%d]", lg, pos3, lg2);
    tp_op(&tp, "code: \"Binary\", kind: 0, inputs: [%d, %d], outputs: [%d]", lg2, mf, lg3);
    tp_op(&tp, "code: \"Symbols\", values: %s, outputs: [%d]", tp_affs("P+S"), sym);
    tp_op(&tp, "code: \"Cast\", inputs: [%d], outputs: [%d]", sym, symf);
    tp_op(&tp, "code: \"Fill\", value: 0.5, outputs: [%d]", half);
    tp_op(&tp, "code: \"Binary\", kind: 2, inputs: [%d, %d], outputs: [%d]", symf, half, hs);
    tp_op(&tp, "code: \"Binary\", kind: 1, inputs: [%d, %d], outputs: [%d]", lg3, hs, logits);

    tp_io(&tp, 0, ids, "InputIds", 0);
    tp_io(&tp, 0, mask, "AttentionMask", 0);
    tp_io(&tp, 0, pos, "PositionIds", 0);
    tp_io(&tp, 0, pk, "PastKey", 0);
    tp_io(&tp, 0, pv, "PastValue", 0);
    tp_io(&tp, 1, logits, "Logits", 0);
    tp_io(&tp, 1, prk, "PresentKey", 0);
    tp_io(&tp, 1, prv, "PresentValue", 0);
    return tp_finish(&tp, "rt_session_llm", size);
}

/* A plan whose vocab_size (8) is not its logits rows' (7): the feed refuses
 * it, naming both, and writes nothing to the caller's vocab_size floats. */
static void test_logits_not_vocab(void)
{
    size_t size, mem_size;
    llmc_rt_plan plan;
    llmc_rt_session s;
    llmc_rt_error err = {LLMC_RT_OK, ""};
    uint8_t *bytes = build_llm(&size, V + 1);
    void *mem = NULL;
    llmc_rt_status st = bytes ? llmc_rt_plan_open(&plan, bytes, size, 0, &err) : LLMC_RT_E_ARG;
    if (!st) {
        mem_size = llmc_rt_session_memory(&plan);
        mem = malloc(mem_size);
        st = llmc_rt_session_init(&s, &plan, mem, mem_size, &err);
    }
    float logits[V + 1] = {0};
    int64_t tokens[2] = {1, 2};
    if (!st)
        st = llmc_rt_session_feed(&s, tokens, 2, logits, &err);
    int untouched = 1;
    for (int i = 0; i <= V; i++)
        untouched &= logits[i] == 0;
    CHECK(st == LLMC_RT_E_EXEC && strstr(err.msg, "vocab_size 8") && untouched,
          "logits rows of 7 in a plan of vocab_size 8: the feed refuses it, the caller's "
          "buffer untouched (%s)", err.msg);
    free(mem);
    free(bytes);
}

/* Logits of the last of tokens[0..n) by the fake model's definition. */
static void llm_reference(const int64_t *tokens, int n, float *out)
{
    double hsum[D] = {0};
    for (int t = 0; t < n; t++)
        for (int d = 0; d < D; d++) {
            double e = emb_table[tokens[t]][d];
            hsum[d] += e + e * e;
        }
    for (int v = 0; v < V; v++) {
        double acc = 0;
        for (int d = 0; d < D; d++)
            acc += (emb_table[tokens[n - 1]][d] + hsum[d]) * wout[d][v];
        out[v] = (float)(acc + (n - 1) + n - 0.5 * n);
    }
}

static double max_diff(const float *a, const float *b, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        m = fmax(m, fabs(a[i] - b[i]) / fmax(1.0, fabs(b[i])));
    return m;
}

static void test_llm(void)
{
    size_t size;
    for (int v = 0; v < V; v++)
        for (int d = 0; d < D; d++) {
            emb_table[v][d] = frand();
            wout[d][v] = frand();
        }
    uint8_t *bytes = build_llm(&size, V);
    llmc_rt_plan plan;
    llmc_rt_error err;
    llmc_rt_status st = bytes ? llmc_rt_plan_open(&plan, bytes, size, LLMC_RT_VERIFY_HASHES, &err)
                              : LLMC_RT_E_ARG;
    CHECK(st == LLMC_RT_OK, "llm plan opens: %s", st ? err.msg : "ok");
    if (st)
        return;
    CHECK(rt_plan_of(&plan)->kv_bytes == 2 * CTX * D * sizeof(float), "kv_bytes = 2 slots of [1,1,%d,%d] "
          "floats (%llu)", CTX, D, (unsigned long long)rt_plan_of(&plan)->kv_bytes);
    llmc_rt_io io;
    CHECK(llmc_rt_plan_io(&plan, 0, 3, &io) == LLMC_RT_OK && io.role == 4 && io.layer == 0 &&
          !strcmp(io.name, "past_key_values.0.key") && io.dtype == LLMC_RT_F32,
          "plan_io describes input 3");
    CHECK(llmc_rt_plan_io(&plan, 1, 3, &io) == LLMC_RT_E_ARG, "plan_io refuses output 3");
    size_t mem_size = llmc_rt_session_memory(&plan);
    void *mem = malloc(mem_size);
    llmc_rt_session s;
    llmc_rt_session_init(&s, &plan, mem, mem_size, &err);

    int64_t tokens[CTX];
    for (int i = 0; i < CTX; i++)
        tokens[i] = rand() % V;
    float logits[V], expect[V];
    /* prompt of 5, then single tokens up to the context */
    st = llmc_rt_session_feed(&s, tokens, 5, logits, &err);
    llm_reference(tokens, 5, expect);
    CHECK(st == LLMC_RT_OK && tp_stats(&s).position == 5 && max_diff(logits, expect, V) < 1e-5,
          "prompt of 5 tokens: logits match (%s)", st ? err.msg : "ok");
    int all_ok = 1;
    for (int n = 6; n <= CTX; n++) {
        st = llmc_rt_session_feed(&s, tokens + n - 1, 1, logits, &err);
        llm_reference(tokens, n, expect);
        if (st || max_diff(logits, expect, V) > 1e-5) {
            all_ok = 0;
            CHECK(0, "token %d: %s (diff %g)", n, st ? err.msg : "", max_diff(logits, expect, V));
        }
    }
    CHECK(all_ok && tp_stats(&s).position == CTX, "single-token feeds through the KV store up to %d", CTX);
    CHECK(llmc_rt_session_feed(&s, tokens, 1, logits, &err) == LLMC_RT_E_BOUNDS,
          "feeding past max_context is refused");
    CHECK(llmc_rt_session_feed(&s, tokens, 0, logits, &err) == LLMC_RT_E_BOUNDS, "n=0 refused");
    llmc_rt_session_reset(&s);
    st = llmc_rt_session_feed(&s, tokens, 3, logits, &err);
    llm_reference(tokens, 3, expect);
    CHECK(st == LLMC_RT_OK && tp_stats(&s).position == 3 && max_diff(logits, expect, V) < 1e-5,
          "after reset the KV store starts over");
    int64_t bad = V;
    st = llmc_rt_session_feed(&s, &bad, 1, logits, &err);
    CHECK(st == LLMC_RT_E_EXEC && strstr(err.msg, "op 0 (Gather 'embed')") && tp_stats(&s).position == 3,
          "a token outside the vocabulary fails in the Gather: %s", err.msg);
    llmc_rt_tensor out;
    CHECK(llmc_rt_session_output(&s, 0, &out, &err) == LLMC_RT_E_ARG,
          "no outputs after a failed feed");
    st = llmc_rt_session_feed(&s, tokens + 3, 1, logits, &err);
    CHECK(st == LLMC_RT_OK && llmc_rt_session_output(&s, 1, &out, &err) == LLMC_RT_OK &&
          out.rank == 4 && out.dims[2] == 4, "present.0.key readable after feed, 4 rows");
    free(mem);
    free(bytes);
    test_logits_not_vocab();
}

int main(void)
{
    srand(1);
    test_mlp();
    test_max_bytes();
    test_llm();
    return TAP_DONE();
}
