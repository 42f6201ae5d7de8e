/* The fused Attention op and the generation API:
 *   - llmc.Attention compiled from an IR graph and run through the runtime,
 *     against a double-precision reference in this file (MHA, GQA, full and
 *     partial RoPE, Qwen3's per-head q/k RMSNorm, prompts of 1, 7 and 64
 *     tokens, decode across the chunk boundaries at 64 and 128, reset, a
 *     smaller session context);
 *   - a 2-layer model fused, unfused (ONNX ops with past/present I/O) and
 *     mixed: same logits through llmc_rt_session_feed, and the bytes a
 *     decode step moves (llmc_rt_session_stats) constant for the fused plan
 *     but growing with P for the unfused one;
 *   - sliding windows (smaller than, equal to and larger than the context),
 *     soft-caps and Qwen2-0.5B's shape at depth 4096: the kernel with each kernel table this CPU runs on a
 *     chunked cache whose rows outside every window are NaN, against
 *     double, bitwise the same for any thread count; through a session,
 *     whose windowed cache keeps a ring of chunks (prompts longer than
 *     the ring, decode past it);
 *   - the verifier's Attention checks on hand-written plans;
 *   - the sampler. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "graph_util.h"
#include "llmc_rt.h"
#include "llmc_rt_internal.h"
#include "passes/pipeline.h"
#include "rt_testplan.h"
#include "tap.h"
#include "codegen/evaluate.h"
#include "kernels/kernel_table.h"
#include "kernel_tables.h"
#include "parallel_orders.h"

enum { CTX = 160 }; /* > 150 decode positions; chunks of 64: 3 per cache */

static float frand(void)
{
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static int value(llmc_graph *g, const char *name, int dtype, llmc_shape s)
{
    int v = llmc_graph_add_value(g, name, dtype);
    g->values[v].shape = s;
    return v;
}

/* RoPE tables [CTX, R], HF layout: frequency i and i + R/2 equal. */
static float *rope_table(int R, int is_sin)
{
    float *t = malloc(sizeof(float) * CTX * (R ? R : 1));
    for (int p = 0; p < CTX; p++)
        for (int i = 0; i < R; i++) {
            double theta = p * pow(10000.0, -2.0 * (i % (R / 2)) / R);
            t[p * R + i] = (float)(is_sin ? sin(theta) : cos(theta));
        }
    return t;
}

typedef struct {
    int H, G, D, R; /* heads, kv_heads, head_dim, rotary_dim */
    int N;          /* 1: per-head q/k RMSNorm (Qwen3) */
    int W;          /* sliding window, 0 none */
    float C;        /* soft-cap, 0 none */
} attn_cfg;

/* The keys query position pos sees: [lo, pos]. */
static int window_lo(int W, int pos)
{
    return W && pos >= W ? pos - W + 1 : 0;
}

/* scale * q.k, soft-capped, in double. */
static double capped(double s, float C)
{
    return C > 0 ? C * tanh(s / C) : s;
}

#define NORM_EPS 1e-6f

/* norms: the q_norm and k_norm weight values when c->N. */
static int add_attention(llmc_graph *g, const char *name, const attn_cfg *c, int q, int k,
                         int v, int cos_v, int sin_v, const int *norms, int cache, int out)
{
    int ins[7] = {q, k, v}, n_ins = 3;
    if (c->R) {
        ins[n_ins++] = cos_v;
        ins[n_ins++] = sin_v;
    }
    if (c->N) {
        ins[n_ins++] = norms[0];
        ins[n_ins++] = norms[1];
    }
    int n = llmc_graph_add_llmc_node(g, "Attention", name, ins, n_ins, &out, 1);
    if (c->N)
        llmc_node_set_float(g, n, "epsilon", NORM_EPS);
    llmc_node_set_int(g, n, "heads", c->H);
    llmc_node_set_int(g, n, "kv_heads", c->G);
    llmc_node_set_int(g, n, "head_dim", c->D);
    llmc_node_set_int(g, n, "rotary_dim", c->R);
    llmc_node_set_int(g, n, "cache", cache);
    llmc_node_set_float(g, n, "scale", 1.0f / sqrtf((float)c->D));
    if (c->W)
        llmc_node_set_int(g, n, "window", c->W);
    if (c->C > 0)
        llmc_node_set_float(g, n, "softcap", c->C);
    return n;
}

static uint8_t *compile(const llmc_graph *g, size_t *size, llmc_error *err)
{
    llmc_codegen_options opt = {.max_context = CTX};
    uint8_t *plan = NULL;
    memset(err, 0, sizeof *err);
    return llmc_codegen_to_memory(g, &opt, &plan, size, NULL, err) ? NULL : plan;
}

typedef struct {
    uint8_t *bytes;
    llmc_rt_plan plan;
    llmc_rt_session s;
    void *mem;
} runner;

static int runner_open(runner *r, uint8_t *bytes, size_t size, uint32_t context,
                       llmc_rt_error *err)
{
    memset(r, 0, sizeof *r);
    r->bytes = bytes;
    if (!bytes || llmc_rt_plan_open(&r->plan, bytes, size, LLMC_RT_VERIFY_HASHES, err))
        return -1;
    size_t need = llmc_rt_session_memory_for(&r->plan, context);
    r->mem = malloc(need);
    return llmc_rt_session_init_for(&r->s, &r->plan, context, r->mem, need, err) ? -1 : 0;
}

static void runner_close(runner *r)
{
    free(r->mem);
    free(r->bytes);
}

/* ---- the op against a double reference -------------------------------- */

typedef struct {
    attn_cfg c;
    float *cos_t, *sin_t;
    double *K, *V; /* [CTX][G][D]: rotated keys and values by position */
    float q_norm[64], k_norm[64]; /* per-head norm weights when c.N */
} attn_ref;

/* x as doubles, RMS-normalized over D with weight w when the config has norms. */
static void head_in(const attn_ref *a, const float *x, const float *w, double *y)
{
    int D = a->c.D;
    double ss = 0;
    for (int i = 0; i < D; i++)
        ss += (double)x[i] * x[i];
    double inv = a->c.N ? 1.0 / sqrt(ss / D + (double)NORM_EPS) : 1.0;
    for (int i = 0; i < D; i++)
        y[i] = a->c.N ? x[i] * inv * w[i] : x[i];
}

static void rope_d(const attn_ref *a, const float *xf, const float *w, int pos, double *y)
{
    double x[64];
    head_in(a, xf, w, x);
    int D = a->c.D, R = a->c.R, h = R / 2;
    for (int i = 0; i < D; i++) {
        if (i >= R) {
            y[i] = x[i];
            continue;
        }
        double rot = i < h ? -(double)x[i + h] : x[i - h];
        y[i] = x[i] * (double)a->cos_t[pos * R + i] + rot * (double)a->sin_t[pos * R + i];
    }
}

/* Appends S rows at P and writes the reference o [S, H*D]. */
static void attn_reference(attn_ref *a, const float *q, const float *k, const float *v, int S,
                           int P, double *o)
{
    int H = a->c.H, G = a->c.G, D = a->c.D;
    double qr[64], score[CTX];
    for (int s = 0; s < S; s++)
        for (int g = 0; g < G; g++) {
            rope_d(a, k + (s * G + g) * D, a->k_norm, P + s, a->K + ((P + s) * G + g) * D);
            for (int i = 0; i < D; i++)
                a->V[((P + s) * G + g) * D + i] = v[(s * G + g) * D + i];
        }
    for (int s = 0; s < S; s++)
        for (int h = 0; h < H; h++) {
            int g = h / (H / G), n = P + s + 1, lo = window_lo(a->c.W, P + s);
            double mx = -INFINITY, sum = 0;
            rope_d(a, q + (s * H + h) * D, a->q_norm, P + s, qr);
            for (int t = lo; t < n; t++) {
                score[t] = 0;
                for (int i = 0; i < D; i++)
                    score[t] += qr[i] * a->K[(t * G + g) * D + i];
                score[t] = capped(score[t] / sqrt((double)D), a->c.C);
                mx = fmax(mx, score[t]);
            }
            for (int t = lo; t < n; t++)
                sum += score[t] = exp(score[t] - mx);
            for (int i = 0; i < D; i++) {
                double acc = 0;
                for (int t = lo; t < n; t++)
                    acc += score[t] * a->V[(t * G + g) * D + i];
                o[(s * H + h) * D + i] = acc / sum;
            }
        }
}

/* q, k, v graph inputs -> llmc.Attention -> o. */
static uint8_t *build_op_plan(const attn_ref *a, size_t *size, llmc_error *err)
{
    llmc_graph g;
    llmc_graph_init(&g);
    g.opset = 17;
    const attn_cfg *c = &a->c;
    int q = g_input(&g, "q", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(c->H * c->D)));
    int k = g_input(&g, "k", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(c->G * c->D)));
    int v = g_input(&g, "v", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(c->G * c->D)));
    int cs = -1, sn = -1;
    if (c->R) {
        cs = g_const(&g, "rope.cos", LLMC_DT_FLOAT, SHAPE(K(CTX), K(c->R)), a->cos_t);
        sn = g_const(&g, "rope.sin", LLMC_DT_FLOAT, SHAPE(K(CTX), K(c->R)), a->sin_t);
    }
    int norms[2] = {-1, -1};
    if (c->N) {
        norms[0] = g_const(&g, "q_norm", LLMC_DT_FLOAT, SHAPE(K(c->D)), a->q_norm);
        norms[1] = g_const(&g, "k_norm", LLMC_DT_FLOAT, SHAPE(K(c->D)), a->k_norm);
    }
    int o = value(&g, "o", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(c->H * c->D)));
    add_attention(&g, "attn", c, q, k, v, cs, sn, norms, 0, o);
    g_output(&g, o);
    uint8_t *bytes = compile(&g, size, err);
    llmc_graph_free(&g);
    return bytes;
}

/* Lowering refuses inconsistent llmc.Attention attributes at compile time. */
static void test_lowering_errors(void)
{
    static const struct { attn_cfg c; int cache; const char *msg; } bad[] = {
        {{3, 2, 8, 0, 0, 0, 0}, 0, "kv_heads | heads"},
        {{2, 1, 8, 3, 0, 0, 0}, 0, "even rotary_dim"},
        {{2, 1, 8, 0, 0, 0, 0}, 1, "cache 1 outside [0, 1 Attention ops)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const attn_cfg *c = &bad[i].c;
        llmc_graph g;
        llmc_error err;
        size_t size;
        llmc_graph_init(&g);
        g.opset = 17;
        int q = g_input(&g, "q", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(c->H * c->D)));
        int k = g_input(&g, "k", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(c->G * c->D)));
        int o = value(&g, "o", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(c->H * c->D)));
        add_attention(&g, "attn", c, q, k, k, k, k, NULL, bad[i].cache, o);
        g_output(&g, o);
        uint8_t *bytes = compile(&g, &size, &err);
        CHECK(!bytes && strstr(err.msg, bad[i].msg) && strstr(err.msg, "node 'attn'"),
              "lowering refuses: %s", err.msg);
        free(bytes);
        llmc_graph_free(&g);
    }
}

/* One call at (S, P) with random q, k, v; returns the worst relative error. */
static double op_step(runner *r, attn_ref *a, int S, int P, llmc_rt_status *st,
                      llmc_rt_error *err)
{
    const attn_cfg *c = &a->c;
    int nq = S * c->H * c->D, nk = S * c->G * c->D;
    float *q = malloc(sizeof(float) * (size_t)nq), *k = malloc(sizeof(float) * (size_t)nk);
    float *v = malloc(sizeof(float) * (size_t)nk);
    double *want = malloc(sizeof(double) * (size_t)nq), worst = 0;
    for (int i = 0; i < nq; i++)
        q[i] = 2 * frand();
    for (int i = 0; i < nk; i++) {
        k[i] = 2 * frand();
        v[i] = frand();
    }
    llmc_rt_tensor in[3] = {{LLMC_RT_F32, 3, {1, S, c->H * c->D}, q},
                            {LLMC_RT_F32, 3, {1, S, c->G * c->D}, k},
                            {LLMC_RT_F32, 3, {1, S, c->G * c->D}, v}};
    llmc_rt_tensor out;
    *st = llmc_rt_session_run(&r->s, (uint32_t)S, (uint32_t)P, in, err);
    if (!*st)
        *st = llmc_rt_session_output(&r->s, 0, &out, err);
    if (!*st) {
        attn_reference(a, q, k, v, S, P, want);
        for (int i = 0; i < nq; i++)
            worst = fmax(worst, fabs(((float *)out.data)[i] - want[i]) / (1 + fabs(want[i])));
    }
    free(q);
    free(k);
    free(v);
    free(want);
    return worst;
}

/* Chunks of 64 a cache of this config keeps live out of `chunks`. */
static uint32_t live_chunks(const attn_cfg *c, uint32_t chunks)
{
    uint32_t ring = c->W ? (uint32_t)(c->W + 63) / 64 + 1 : chunks;
    return ring < chunks ? ring : chunks;
}

static void test_op(const attn_cfg *c, const char *what)
{
    uint32_t live = live_chunks(c, 3), live70 = live_chunks(c, 2);
    attn_ref a = {*c, rope_table(c->R, 0), rope_table(c->R, 1), NULL, NULL, {0}, {0}};
    for (int i = 0; c->N && i < c->D; i++) { /* norm weights near 1, as trained ones are */
        a.q_norm[i] = 1 + 0.5f * frand();
        a.k_norm[i] = 1 + 0.5f * frand();
    }
    a.K = malloc(sizeof(double) * CTX * (size_t)(c->G * c->D));
    a.V = malloc(sizeof(double) * CTX * (size_t)(c->G * c->D));
    llmc_error cerr;
    llmc_rt_error err = {0};
    size_t size;
    runner r;
    uint8_t *bytes = build_op_plan(&a, &size, &cerr);
    CHECK(bytes != NULL, "%s: llmc.Attention compiles (%s)", what, cerr.msg);
    if (runner_open(&r, bytes, size, CTX, &err)) {
        CHECK(0, "%s: plan opens (%s)", what, err.msg);
        runner_close(&r);
        return;
    }
    CHECK(rt_plan_of(&r.plan)->n_caches == 1 && rt_plan_of(&r.plan)->kv_chunk == 64 && rt_plan_of(&r.plan)->n_layers == 1 &&
              rt_plan_of(&r.plan)->kv_slot_bytes == (uint64_t)2 * c->G * 64 * c->D * 4,
          "%s: n_caches 1, kv_chunk 64, a chunk slot holds K and V (%llu bytes)", what,
          (unsigned long long)rt_plan_of(&r.plan)->kv_slot_bytes);
    static const int prompts[4] = {1, 7, 64, 150}; /* 150 > a ring of 2 chunks */
    for (int i = 0; i < 4; i++) {
        llmc_rt_status st = LLMC_RT_OK;
        llmc_rt_session_reset(&r.s);
        double worst = op_step(&r, &a, prompts[i], 0, &st, &err);
        CHECK(!st && worst < 2e-5, "%s: prompt S=%d matches the double reference (%g) %s",
              what, prompts[i], worst, st ? err.msg : "");
        int P = prompts[i], steps = 0;
        double worst_decode = 0;
        while (!st && P < (P < 141 ? 141 : CTX)) { /* crosses 64 and 128; one 5-row call across 128 */
            int S = P == 126 ? 5 : 1;
            worst_decode = fmax(worst_decode, op_step(&r, &a, S, P, &st, &err));
            P += S;
            steps++;
        }
        llmc_rt_stats stats;
        llmc_rt_session_stats(&r.s, &stats);
        CHECK(!st && worst_decode < 2e-5 && stats.kv_chunks_used == live && stats.kv_chunks == live,
              "%s: %d decode calls after S=%d up to P=%d match (%g); %u of %u chunks taken %s",
              what, steps, prompts[i], P, worst_decode, stats.kv_chunks_used, live, st ? err.msg : "");
    }
    llmc_rt_session_reset(&r.s);
    llmc_rt_status st = LLMC_RT_OK;
    op_step(&r, &a, 1, 3, &st, &err);
    CHECK(st == LLMC_RT_E_EXEC && strstr(err.msg, "holds 0 positions"),
          "%s: after reset a call at P=3 is refused: %s", what, err.msg);
    runner_close(&r);

    /* a session of 70 positions: 2 chunks, less memory, bounded */
    bytes = build_op_plan(&a, &size, &cerr);
    if (!runner_open(&r, bytes, size, 70, &err)) {
        size_t full = llmc_rt_session_memory(&r.plan), part = llmc_rt_session_memory_for(&r.plan, 70);
        double worst = op_step(&r, &a, 64, 0, &st, &err);
        for (int P = 64; !st && P < 70; P++)
            worst = fmax(worst, op_step(&r, &a, 1, P, &st, &err));
        CHECK(!st && worst < 2e-5 && tp_stats(&r.s).kv_chunks == live70 &&
                  tp_stats(&r.s).kv_chunks_used == live70 &&
                  full - part == (live - live70) * rt_plan_of(&r.plan)->kv_slot_bytes,
              "%s: context 70 uses %u chunks, %u chunk(s) less memory, matches (%g)", what, live70,
              live - live70, worst);
        op_step(&r, &a, 1, 70, &st, &err);
        CHECK(st == LLMC_RT_E_BOUNDS, "%s: position 70 outside the session context", what);
        CHECK(llmc_rt_session_memory_for(&r.plan, CTX + 1) == SIZE_MAX &&
                  llmc_rt_session_memory_for(&r.plan, 0) == SIZE_MAX,
              "memory_for refuses context 0 and > max_context");
    } else {
        CHECK(0, "%s: context-70 session (%s)", what, err.msg);
    }
    runner_close(&r);
    free(a.cos_t);
    free(a.sin_t);
    free(a.K);
    free(a.V);
}

/* ---- windows and soft-caps in the kernel, every kernel table ---------- */

typedef struct {
    int H, G, D, chunk, P, S, W;
    float C;
} win_case;

typedef struct {
    win_case c;
    uint8_t *pool;
    uint32_t *slot;
    uint64_t slot_bytes;
    float *q, *k, *v; /* new rows; no RoPE: the keys are stored as given */
} win_data;

static float *win_row(const win_data *d, int which, int g, int t)
{
    const win_case *c = &d->c;
    float *chunk = (float *)(void *)(d->pool + d->slot[t / c->chunk] * d->slot_bytes);
    return chunk + (which * c->G + g) * c->chunk * c->D + (t % c->chunk) * c->D;
}

/* History [0, P) random, NaN where no query of the call may look (before
 * the first query's window); chunk slots in reverse order. */
static void win_make(win_data *d, const win_case *c)
{
    int n_chunks = (c->P + c->S + c->chunk - 1) / c->chunk, lo = window_lo(c->W, c->P);
    d->c = *c;
    d->slot_bytes = ((uint64_t)2 * c->G * c->chunk * c->D * 4 + 63) / 64 * 64;
    d->pool = calloc((size_t)(d->slot_bytes * (uint64_t)n_chunks), 1);
    d->slot = malloc(sizeof *d->slot * (size_t)n_chunks);
    for (int i = 0; i < n_chunks; i++)
        d->slot[i] = (uint32_t)(n_chunks - 1 - i);
    for (int t = 0; t < c->P; t++)
        for (int g = 0; g < c->G; g++)
            for (int i = 0; i < c->D; i++) {
                win_row(d, 0, g, t)[i] = t < lo ? NAN : 2 * frand();
                win_row(d, 1, g, t)[i] = t < lo ? NAN : frand();
            }
    int nq = c->S * c->H * c->D, nk = c->S * c->G * c->D;
    d->q = malloc(sizeof(float) * (size_t)nq);
    d->k = malloc(sizeof(float) * (size_t)nk);
    d->v = malloc(sizeof(float) * (size_t)nk);
    for (int i = 0; i < nq; i++)
        d->q[i] = 2 * frand();
    for (int i = 0; i < nk; i++) {
        d->k[i] = 2 * frand();
        d->v[i] = frand();
    }
}

static llmc_rt_status win_run(const rt_kernels *kt, const win_data *d, float *o,
                              const rt_parallel *par, llmc_rt_error *err)
{
    const win_case *c = &d->c;
    rt_kv_cache cache = {d->pool, d->slot, d->slot_bytes, c->chunk, LLMC_RT_F32};
    rt_attention_attrs a = {c->H, c->G, c->D, 0, 1.0f / sqrtf((float)c->D), NULL, NULL, 0.0f,
                            c->W, c->C};
    rt_view q = {LLMC_RT_F32, 3, {1, c->S, c->H * c->D}, d->q},
            k = {LLMC_RT_F32, 3, {1, c->S, c->G * c->D}, d->k},
            v = {LLMC_RT_F32, 3, {1, c->S, c->G * c->D}, d->v},
            out = {LLMC_RT_F32, 3, {1, c->S, c->H * c->D}, o};
    return k_attention_kernels(kt, &a, &q, &k, &v, NULL, NULL, &cache, c->P, &out, par, err);
}

/* The plain definition in double over the cache k_attention appended to. */
static double win_worst(const win_data *d, const float *o)
{
    const win_case *c = &d->c;
    double worst = 0, *sc = malloc(sizeof(double) * (size_t)(c->P + c->S));
    for (int s = 0; s < c->S; s++)
        for (int h = 0; h < c->H; h++) {
            int g = h / (c->H / c->G), pos = c->P + s, lo = window_lo(c->W, pos);
            const float *q = d->q + (s * c->H + h) * c->D;
            double mx = -INFINITY, l = 0;
            for (int t = lo; t <= pos; t++) {
                double dot = 0;
                for (int i = 0; i < c->D; i++)
                    dot += (double)q[i] * win_row(d, 0, g, t)[i];
                sc[t] = capped(dot / sqrt((double)c->D), c->C);
                mx = fmax(mx, sc[t]);
            }
            for (int t = lo; t <= pos; t++)
                l += sc[t] = exp(sc[t] - mx);
            for (int i = 0; i < c->D; i++) {
                double acc = 0;
                for (int t = lo; t <= pos; t++)
                    acc += sc[t] * win_row(d, 1, g, t)[i];
                double want = acc / l, got = o[(s * c->H + h) * c->D + i];
                worst = isnan(got) ? INFINITY : fmax(worst, fabs(got - want) / (1 + fabs(want)));
            }
        }
    free(sc);
    return worst;
}

static void test_window_case(const rt_kernels *kt, const win_case *c, const char *what)
{
    win_data d;
    llmc_rt_error err = {0};
    win_make(&d, c);
    int n = c->S * c->H * c->D;
    float *want = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
    bool ok = win_run(kt, &d, want, NULL, &err) == LLMC_RT_OK;
    double worst = ok ? win_worst(&d, want) : INFINITY;
    bool same = ok;
    for (int i = 0; i < PARALLELS; i++) {
        rt_parallel par = parallel_number(i);
        same = same && win_run(kt, &d, got, &par, &err) == LLMC_RT_OK &&
               !memcmp(got, want, sizeof(float) * (size_t)n);
        parallel_done(&par);
    }
    CHECK(ok && worst < 2e-5 && same, "window/softcap (%s) %s: H %d G %d D %d chunk %d P %d S %d "
          "window %d softcap %g: %.2g vs double, bitwise the same on 1/2/3/2 threads %s",
          kt ? kt->isa : "portable", what, c->H, c->G, c->D, c->chunk, c->P, c->S, c->W,
          (double)c->C, worst, ok ? "" : err.msg);
    free(want);
    free(got);
    free(d.pool);
    free(d.slot);
    free(d.q);
    free(d.k);
    free(d.v);
}

static void test_window_kernels(void)
{
    static const struct { win_case c; const char *what; } cases[] = {
        {{6, 2, 20, 32, 300, 1, 50, 0}, "decode, window < context"},
        {{2, 1, 33, 64, 1000, 1, 700, 3.0f}, "decode split over the window, softcap"},
        {{4, 2, 12, 16, 0, 70, 16, 0}, "prefill of 70 > window 16"},
        {{3, 3, 17, 32, 40, 9, 45, 5.0f}, "prefill after history, window inside the call"},
        {{4, 1, 8, 16, 20, 5, 25, 0}, "window = context"},
        {{4, 1, 8, 16, 20, 5, 1000, 0}, "window > context"},
        {{4, 2, 24, 32, 100, 3, 0, 2.5f}, "softcap only"},
        {{2, 2, 64, 32, 500, 1, 1, 0}, "window 1 (the query's own key)"},
        /* Qwen2-0.5B's attention shape at depth 4096: decode splits the
         * keys into ranges as long as the scratch allows; a prefill after
         * 4096 positions walks them in key blocks */
        {{14, 2, 64, 64, 4096, 1, 0, 0}, "decode at depth 4096, key split"},
        {{14, 2, 64, 64, 4096, 17, 0, 0}, "prefill of 17 at depth 4096"},
        {{14, 2, 64, 64, 4096, 1, 1024, 0}, "decode at depth 4096, window 1024"},
    };
    /* the portable loops and the x86 tables; NEON's inner loops are tested
     * under qemu (tests/unit_arm), the window and cap logic around them is
     * this shared driver */
    const rt_kernels *tables[3];
    int n_tables = x86_tables(tables);
    for (int t = 0; t < n_tables; t++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            test_window_case(tables[t], &cases[i].c, cases[i].what);
}

/* ---- a group of query rows per sweep (attn_scores_rows) ---------------- */

/* nk key rows of head_dim d in a cache of `dtype`, values in [-2, 2) (int8:
 * values in [-127, 127] and a scale per row). */
static uint8_t *stored_keys(int dtype, int64_t nk, int64_t d)
{
    uint64_t row = rt_kv_row_bytes(dtype, 0, d);
    uint8_t *k = calloc((size_t)(row * (uint64_t)nk) + 1, 1);
    for (int64_t t = 0; t < nk; t++) {
        uint8_t *r = k + (uint64_t)t * row;
        for (int64_t i = 0; i < d; i++) {
            float x = 4 * frand() - 2;
            if (dtype == LLMC_RT_F16) {
                uint16_t h = rt_float_to_half(x);
                memcpy(r + 2 * i, &h, 2);
            } else if (dtype == LLMC_RT_I8) {
                r[i] = (uint8_t)(int8_t)lrintf(x * 63.5f);
            } else {
                memcpy(r + 4 * i, &x, 4);
            }
        }
        if (dtype == LLMC_RT_I8) {
            float scale = 0.01f + frand() / 64;
            memcpy(r + rt_kv_scale_offset(d), &scale, 4);
        }
    }
    return k;
}

static void single_scores(const rt_kernels *kt, int dtype, const float *q, const uint8_t *k,
                          int64_t nk, int64_t d, float *s)
{
    if (dtype == LLMC_RT_F16)
        kt->attn_scores_f16(q, (const uint16_t *)(const void *)k, nk, d, s);
    else if (dtype == LLMC_RT_I8)
        kt->attn_scores_i8(q, k, nk, d, s);
    else
        kt->attn_scores(q, (const float *)(const void *)k, nk, d, s);
}

/* A prefetch cursor of `lines` K lines at kl and as many V lines at vl. */
static rt_attn_prefetch cursor_over(const char *kl, const char *vl, int64_t lines)
{
    rt_attn_prefetch pf = {{kl, vl}, {kl + 64 * lines, vl + 64 * lines}};
    return pf;
}

/* After a loop that should have taken `steps` lines of each of its two
 * `lines`-line ranges: it took them (all of them, if fewer) and stored its
 * cursor back. */
static bool cursor_took(const rt_attn_prefetch *pf, const char *kl, const char *vl,
                        int64_t lines, int64_t steps)
{
    int64_t taken = steps < lines ? steps : lines;
    return pf->next[0] == kl + 64 * taken && pf->next[1] == vl + 64 * taken;
}

enum { ROWS_KEYS = RT_ATTN_KEY_BLOCK, ROWS_DIMS = 200 };

/* nr rows' scores of nk key rows k (cache dtype) by the rows loop, without
 * and with a prefetch cursor, and by the single-row loops, byte for byte;
 * the cursor gave a K and a V line per step of 8 columns over 4 keys (of
 * ranges long enough and of ones too short for them). */
static bool scores_rows_same(const rt_kernels *kt, int dtype, const uint8_t *k, int64_t nk,
                             int64_t d, int nr)
{
    static char kl[64 * 512], vl[64 * 512];
    float q[RT_ATTN_GROUP_ROWS][ROWS_DIMS], got[RT_ATTN_GROUP_ROWS][ROWS_KEYS];
    float paced[RT_ATTN_GROUP_ROWS][ROWS_KEYS], want[ROWS_KEYS];
    const float *qr[RT_ATTN_GROUP_ROWS];
    for (int r = 0; r < nr; r++) {
        for (int64_t c = 0; c < d; c++)
            q[r][c] = 2 * frand() - 1;
        qr[r] = q[r];
    }
    int64_t steps = 2 * ((nk + 7) / 8) * (d / 8);
    rt_attn_prefetch all = cursor_over(kl, vl, 512), short_of = cursor_over(kl, vl, steps / 2);
    rt_attn_rows_q rows;
    kt->attn_rows_queries(qr, nr, d, &rows);
    kt->attn_scores_rows(&rows, nr, k, dtype, nk, d, got[0], NULL);
    kt->attn_scores_rows(&rows, nr, k, dtype, nk, d, paced[0], &all);
    kt->attn_scores_rows(&rows, nr, k, dtype, nk, d, paced[0], &short_of);
    bool same = cursor_took(&all, kl, vl, 512, steps) &&
                cursor_took(&short_of, kl, vl, steps / 2, steps);
    size_t n = sizeof(float) * (size_t)nk;
    for (int r = 0; r < nr; r++) {
        single_scores(kt, dtype, q[r], k, nk, d, want);
        same &= !memcmp(got[r], want, n) && !memcmp(paced[r], want, n);
    }
    return same;
}

/* nr rows' sums over nk V rows v (float32 or float16) by the rows loop
 * (with a prefetch cursor: a V and a K line per key and 32 columns) and row
 * by row, byte for byte. */
static bool accumulate_rows_same(const rt_kernels *kt, int dtype, const uint8_t *v, int64_t nk,
                                 int64_t d, int nr)
{
    static char kl[64 * 512], vl[64 * 512];
    float p[RT_ATTN_GROUP_ROWS][ROWS_KEYS], o[RT_ATTN_GROUP_ROWS][ROWS_DIMS];
    float want[RT_ATTN_GROUP_ROWS][ROWS_DIMS];
    float *orow[RT_ATTN_GROUP_ROWS];
    for (int r = 0; r < nr; r++) {
        for (int64_t t = 0; t < nk; t++)
            p[r][t] = frand();
        for (int64_t c = 0; c < d; c++)
            want[r][c] = o[r][c] = 2 * frand() - 1;
        orow[r] = o[r];
    }
    rt_attn_prefetch pf = cursor_over(kl, vl, 512);
    kt->attn_accumulate_rows(orow, p[0], nr, v, dtype, nk, d, &pf);
    bool same = cursor_took(&pf, kl, vl, 512, nk * (d / 32));
    for (int r = 0; r < nr; r++) {
        if (dtype == LLMC_RT_F16)
            kt->attn_accumulate_f16(want[r], (const uint16_t *)(const void *)v, p[r], nk, d);
        else
            kt->attn_accumulate(want[r], (const float *)(const void *)v, p[r], nk, d);
        same &= !memcmp(o[r], want[r], sizeof(float) * (size_t)d);
    }
    return same;
}

/* The table's attn_exp_pair against attn_exp row by row, byte for byte:
 * differences over [-100, 100] (both clamps), -inf, +inf, NaN, -0 and the
 * clamp bounds themselves, 1..40 values (whole and partial 8-lane steps),
 * each row with an offset of its own. */
static bool exp_pair_same(const rt_kernels *kt, int64_t n)
{
    static const uint32_t edges[] = {0xFF800000u, 0x7F800000u, 0x7FC00000u, 0x80000000u,
                                     RT_EXP_MIN_BITS, RT_EXP_MAX_BITS, 0xC2AE0001u, 0x42B00001};
    float pa[40], pb[40], wa[40], wb[40];
    for (int64_t t = 0; t < n; t++) {
        pa[t] = 100 * frand();
        pb[t] = 100 * frand();
        if (t % 5 == 4)
            memcpy(&pa[t], &edges[(t / 5) % 8], 4);
        if (t % 7 == 3)
            memcpy(&pb[t], &edges[(t / 7 + 3) % 8], 4);
    }
    float off_a = 3 * frand(), off_b = -2 * frand();
    memcpy(wa, pa, sizeof pa);
    memcpy(wb, pb, sizeof pb);
    kt->attn_exp_pair(pa, pb, n, off_a, off_b);
    kt->attn_exp(wa, n, off_a);
    kt->attn_exp(wb, n, off_b);
    return !memcmp(pa, wa, sizeof(float) * (size_t)n) && !memcmp(pb, wb, sizeof(float) * (size_t)n);
}

/* A table's rows loops against its single-row ones, byte for byte: 1..8
 * rows, every cache dtype's K rows (float32, float16, int8) and V rows
 * (float32, float16), head_dim 1..200 (whole and partial 8-column steps,
 * 16-, 32- and 64-column sweeps), 1..32 keys (a key block: whole and
 * partial 8-key groups). */
static void test_rows_loops(const rt_kernels *kt)
{
    static const int64_t ds[] = {1, 3, 8, 20, 48, 64, 65, 80, 96, 128, 200};
    static const int64_t nks[] = {1, 5, 8, 13, 31, 32};
    static const int dtypes[] = {LLMC_RT_F32, LLMC_RT_F16, LLMC_RT_I8};
    bool scores = true, sums = true;
    int cases = 0;
    for (size_t t = 0; t < 3; t++)
        for (size_t i = 0; i < sizeof ds / sizeof *ds; i++)
            for (size_t j = 0; j < sizeof nks / sizeof *nks; j++) {
                uint8_t *rows = stored_keys(dtypes[t], nks[j], ds[i]);
                for (int nr = 1; nr <= RT_ATTN_GROUP_ROWS; nr++, cases++) {
                    scores &= scores_rows_same(kt, dtypes[t], rows, nks[j], ds[i], nr);
                    if (dtypes[t] != LLMC_RT_I8) /* an int8 cache's V rows are float16 */
                        sums &= accumulate_rows_same(kt, dtypes[t], rows, nks[j], ds[i], nr);
                }
                free(rows);
            }
    CHECK(scores, "%s attn_scores_rows: every row's scores bitwise the single-row loops' on %d "
          "cases (1..8 rows, float32, float16 and int8 rows, head_dim 1..200, 1..32 keys), "
          "with and without a prefetch cursor, which gave a K and a V line per 8 columns of 4 "
          "keys", kt->isa, cases);
    CHECK(sums, "%s attn_accumulate_rows: every row bitwise attn_accumulate's (float32, "
          "float16 V rows) on the same row counts, head_dims and key counts; a V and a K line "
          "per key and 32 columns", kt->isa);
    bool exps = true;
    for (int64_t n = 1; n <= 40; n++)
        for (int rep = 0; rep < 8; rep++)
            exps &= exp_pair_same(kt, n);
    CHECK(exps, "%s attn_exp_pair: both rows bitwise attn_exp's on 1..40 values of [-100, 100], "
          "infinities, NaN, -0 and the clamp bounds", kt->isa);
}

/* kt without its multi-row attention loops (row groups, widened blocks,
 * lanes): the single-row loops every other path is compared with. */
static rt_kernels row_by_row(const rt_kernels *kt)
{
    rt_kernels rows = *kt;
    rows.attn_scores_rows = NULL;
    rows.attn_accumulate_rows = NULL;
    rows.attn_exp_pair = NULL;
    rows.attn_widen_rows = NULL;
    rows.attn_block_lanes = NULL;
    return rows;
}

/* The attention op with a table's rows loops and without them (row by
 * row), byte for byte, on the window/softcap cases' shapes (decode,
 * prefill, causal and window edges inside key blocks, GQA groups of 1..7). */
static void test_rows_op(const rt_kernels *kt)
{
    /* then head_dim 256 (the rows loops' largest) and 264 (past it: row by
     * row); the last four: passes of 9..16 rows (the lanes loop) with
     * blocks cut by chunks, head_dim 24 (an 8-column step), a window all
     * rows start before, and queries 6x as large (scores past phi +
     * headroom: the exact fallback) */
    static const win_case cases[] = {
        {6, 2, 20, 32, 300, 1, 50, 0},   {2, 1, 33, 64, 1000, 1, 700, 3.0f},
        {4, 2, 12, 16, 0, 70, 16, 0},    {3, 3, 17, 32, 40, 9, 45, 5.0f},
        {14, 2, 64, 64, 100, 37, 0, 0},  {14, 2, 64, 64, 4096, 1, 0, 0},
        {5, 1, 128, 32, 7, 23, 0, 0},    {7, 7, 8, 16, 3, 50, 20, 0},
        {8, 2, 256, 32, 90, 1, 0, 0},    {4, 1, 264, 16, 40, 2, 0, 0},
        {8, 2, 64, 48, 30, 40, 0, 0},    {12, 4, 24, 32, 5, 33, 0, 0},
        {16, 1, 64, 64, 0, 40, 64, 0},   {14, 2, 64, 32, 70, 30, 0, 0},
    };
    rt_kernels rows = row_by_row(kt), groups = *kt;
    groups.attn_block_lanes = NULL;
    bool ok = true;
    size_t n_cases = sizeof cases / sizeof *cases;
    for (size_t i = 0; i < n_cases; i++) {
        win_data d;
        llmc_rt_error err = {0};
        win_make(&d, &cases[i]);
        int n = cases[i].S * cases[i].H * cases[i].D;
        for (int j = 0; i == n_cases - 1 && j < n; j++)
            d.q[j] *= 6.0f;
        float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
        float *c = malloc(sizeof(float) * (size_t)n);
        ok &= win_run(kt, &d, a, NULL, &err) == LLMC_RT_OK &&
              win_run(&rows, &d, b, NULL, &err) == LLMC_RT_OK &&
              win_run(&groups, &d, c, NULL, &err) == LLMC_RT_OK &&
              !memcmp(a, b, sizeof(float) * (size_t)n) && !memcmp(c, b, sizeof(float) * (size_t)n);
        free(a);
        free(b);
        free(c);
        free(d.pool);
        free(d.slot);
        free(d.q);
        free(d.k);
        free(d.v);
    }
    CHECK(ok, "%s Attention with the lanes loop, with the rows loops only and row by row: "
          "bitwise the same on %d shapes (decode, prefill, windows, softcap, GQA, head_dim "
          "8..264, the exact fallback)", kt->isa, (int)n_cases);
}

/* One call of the op on a float16 or int8 cache: n rows at position P of
 * q, k, v, the output into o.  The pool is used in place (history) or as a
 * copy of `pool` (every compared run starts from the same cache). */
typedef struct {
    int H, G, D, chunk, P, S;
} cache_case;

static bool cache_call(const rt_kernels *kt, const cache_case *c, int dtype, uint8_t *pool,
                       uint64_t slot_bytes, bool copy, int64_t P, int64_t n, const float *q,
                       const float *k, const float *v, float *o)
{
    int chunks = (c->P + c->S + c->chunk - 1) / c->chunk;
    size_t bytes = (size_t)(slot_bytes * (uint64_t)chunks);
    uint8_t *use = copy ? malloc(bytes) : pool;
    uint32_t *slot = malloc(sizeof *slot * (size_t)chunks);
    if (copy)
        memcpy(use, pool, bytes);
    for (int i = 0; i < chunks; i++)
        slot[i] = (uint32_t)(chunks - 1 - i);
    rt_kv_cache cache = {use, slot, slot_bytes, c->chunk, dtype};
    rt_attention_attrs a = {c->H, c->G, c->D, 0, 1.0f / sqrtf((float)c->D), NULL, NULL, 0.0f, 0,
                            0.0f};
    rt_view vq = {LLMC_RT_F32, 3, {1, n, c->H * c->D}, (void *)q},
            vk = {LLMC_RT_F32, 3, {1, n, c->G * c->D}, (void *)k},
            vv = {LLMC_RT_F32, 3, {1, n, c->G * c->D}, (void *)v},
            out = {LLMC_RT_F32, 3, {1, n, c->H * c->D}, o};
    llmc_rt_error err = {0};
    bool ok = k_attention_kernels(kt, &a, &vq, &vk, &vv, NULL, NULL, &cache, P, &out, NULL,
                                  &err) == LLMC_RT_OK;
    if (copy)
        free(use);
    free(slot);
    return ok;
}

static float *rand_floats(int64_t n, float scale)
{
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        x[i] = scale * (2 * frand() - 1);
    return x;
}

/* The op on float16 and int8 caches with a table's rows loops reading key
 * blocks widened to float32 once a pass (attn_widen_rows), reading the
 * stored rows, and row by row: byte for byte (decode and prefill, GQA
 * groups of 1..8, head_dim 8..136, blocks cut by chunks and the causal
 * edge; head_dim 136 is past what a pass widens). */
static void test_rows_op_caches(const rt_kernels *kt)
{
    static const cache_case cases[] = {
        {14, 2, 64, 64, 300, 1}, {14, 2, 64, 64, 100, 37}, {6, 2, 20, 32, 50, 9},
        {7, 7, 8, 16, 3, 50},    {8, 1, 128, 32, 70, 5},   {4, 1, 136, 32, 40, 3},
    };
    static const int dtypes[] = {LLMC_RT_F16, LLMC_RT_I8};
    rt_kernels stored = *kt, rows = row_by_row(kt);
    stored.attn_widen_rows = NULL;
    bool ok = true;
    int runs = 0;
    for (size_t t = 0; t < 2; t++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            const cache_case *c = &cases[i];
            int chunks = (c->P + c->S + c->chunk - 1) / c->chunk;
            uint64_t slot_bytes = ((uint64_t)c->chunk * rt_kv_position_bytes(dtypes[t], c->G, c->D) +
                                   63) / 64 * 64;
            uint8_t *pool = calloc((size_t)(slot_bytes * (uint64_t)chunks), 1);
            int64_t n_all = (int64_t)(c->P + c->S);
            float *q = rand_floats(n_all * c->H * c->D, 1.0f), *k = rand_floats(n_all * c->G * c->D, 2.0f);
            float *v = rand_floats(n_all * c->G * c->D, 1.0f);
            float *o = malloc(sizeof(float) * (size_t)(n_all * c->H * c->D));
            int64_t new_q = (int64_t)c->P * c->H * c->D, new_kv = (int64_t)c->P * c->G * c->D;
            ok &= cache_call(&rows, c, dtypes[t], pool, slot_bytes, false, 0, c->P, q, k, v, o);
            int n = c->S * c->H * c->D;
            float *want = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
            const float *nq = q + new_q, *nk = k + new_kv, *nv = v + new_kv;
            ok &= cache_call(&rows, c, dtypes[t], pool, slot_bytes, true, c->P, c->S, nq, nk, nv, want);
            ok &= cache_call(kt, c, dtypes[t], pool, slot_bytes, true, c->P, c->S, nq, nk, nv, got) &&
                  !memcmp(want, got, sizeof(float) * (size_t)n);
            ok &= cache_call(&stored, c, dtypes[t], pool, slot_bytes, true, c->P, c->S, nq, nk, nv,
                             got) && !memcmp(want, got, sizeof(float) * (size_t)n);
            runs++;
            free(pool), free(q), free(k), free(v), free(o), free(want), free(got);
        }
    CHECK(ok, "%s Attention on float16 and int8 caches: rows loops over widened key blocks, "
          "rows loops over the stored rows and row by row bitwise the same (%d cases)", kt->isa,
          runs);
}

/* The op with the table's loops (lanes, row groups) and row by row, byte for
 * byte, on 120 random shapes of a float32 cache: GQA groups 1..10,
 * head_dim 8..128 in steps of 8 (whole and half 16-column steps), chunks
 * that cut key blocks, 0..200 cached positions, 1..40 new rows, windows
 * that start inside and before a pass's blocks. */
static void test_lanes_random(const rt_kernels *kt)
{
    static const int chunks[] = {16, 24, 32, 48, 64, 100};
    rt_kernels rows = row_by_row(kt);
    int same = 0, cases = 120;
    for (int i = 0; i < cases; i++) {
        int G = 1 + rand() % 3, group = 1 + rand() % 10, P = rand() % 201, S = 1 + rand() % 40;
        win_case c = {G * group, G, 8 * (1 + rand() % 16), chunks[rand() % 6], P, S,
                      rand() % 3 ? 0 : 1 + rand() % (P + S), 0.0f};
        win_data d;
        llmc_rt_error err = {0};
        win_make(&d, &c);
        int n = c.S * c.H * c.D;
        float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
        same += win_run(kt, &d, a, NULL, &err) == LLMC_RT_OK &&
                win_run(&rows, &d, b, NULL, &err) == LLMC_RT_OK &&
                !memcmp(a, b, sizeof(float) * (size_t)n);
        free(a), free(b), free(d.pool), free(d.slot), free(d.q), free(d.k), free(d.v);
    }
    CHECK(same == cases, "%s Attention with its lanes and rows loops bitwise row by row on %d of "
          "%d random shapes (GQA, head_dim, chunks, windows)", kt->isa, same, cases);
}

/* A widened int8 prefill at head_dim 128 (the lanes loop's deepest stack)
 * on a thread whose stack is LLMC_RT_TASK_STACK plus this test's frames:
 * the bound llmc_rt.h documents holds (an overflow would crash). */
typedef struct {
    const rt_kernels *kt;
    bool ok;
} stack_run;

static void *deep_stack_run(void *arg)
{
    stack_run *r = arg;
    static const cache_case c = {8, 1, 128, 32, 70, 9};
    uint64_t slot_bytes = ((uint64_t)c.chunk * rt_kv_position_bytes(LLMC_RT_I8, c.G, c.D) + 63) /
                          64 * 64;
    int chunks = (c.P + c.S + c.chunk - 1) / c.chunk;
    uint8_t *pool = calloc((size_t)(slot_bytes * (uint64_t)chunks), 1);
    float *q = rand_floats((int64_t)c.S * c.H * c.D, 1.0f), *k = rand_floats((int64_t)c.S * c.D, 2.0f);
    float *v = rand_floats((int64_t)c.S * c.D, 1.0f), *o = malloc(sizeof(float) * (size_t)(c.S * c.H * c.D));
    r->ok = cache_call(r->kt, &c, LLMC_RT_I8, pool, slot_bytes, false, 0, c.S, q, k, v, o);
    free(pool), free(q), free(k), free(v), free(o);
    return NULL;
}

static void test_task_stack(const rt_kernels *kt)
{
    pthread_attr_t attr;
    pthread_t th;
    stack_run r = {kt, false};
    pthread_attr_init(&attr);
    /* the task's LLMC_RT_TASK_STACK, the op's own frame (~21 KiB) and this test's */
    pthread_attr_setstacksize(&attr, LLMC_RT_TASK_STACK + 48 * 1024);
    bool ok = !pthread_create(&th, &attr, deep_stack_run, &r) && !pthread_join(th, NULL);
    pthread_attr_destroy(&attr);
    CHECK(ok && r.ok, "%s Attention's lanes loop (int8 cache, head_dim 128) runs on a thread of "
          "LLMC_RT_TASK_STACK + 48 KiB of stack", kt->isa);
}

static void test_rows_tables(void)
{
    const rt_kernels *tables[3];
    int n_tables = x86_tables(tables), tested = 0;
    for (int t = 0; t < n_tables; t++)
        if (tables[t] && tables[t]->attn_scores_rows) {
            test_rows_loops(tables[t]);
            test_rows_op(tables[t]);
            test_rows_op_caches(tables[t]);
            test_task_stack(tables[t]);
            test_lanes_random(tables[t]);
            tested++;
        }
    if (!tested)
        printf("# skipped: no kernel table with attn_scores_rows on this CPU\n");
}

/* ---- a 2-layer model: fused, unfused, mixed ---------------------------- */

enum { VOC = 11, DM = 16, MH = 2, MD = 8, LAYERS = 2 };

static float embed[VOC * DM], lm_head[DM * VOC], wts[LAYERS][4][DM * DM];
static float *m_cos, *m_sin;

typedef struct {
    llmc_graph *g;
    int pos, cos_v, sin_v;
    int holes[LAYERS]; /* attention outputs added after shape inference */
    int hole_in[LAYERS][3];
} model_b;

static const char *nm(int layer, const char *what)
{
    static char bufs[16][64];
    static int next;
    char *b = bufs[next++ % 16];
    snprintf(b, sizeof bufs[0], "l%d.%s", layer, what);
    return b;
}

/* rotate-half RoPE in ONNX ops on x [1, h, S, MD] with cos4, sin4 [1, 1, S, MD]. */
static int onnx_rope(llmc_graph *g, int layer, const char *tag, int x, int cos4, int sin4)
{
    char n[32];
    snprintf(n, sizeof n, "%s.x1", tag);
    int x1 = OP(g, "Slice", nm(layer, n), x, CI64(g, nm(layer, "s0"), 0),
                CI64(g, nm(layer, "s1"), MD / 2), CI64(g, nm(layer, "s3"), 3));
    snprintf(n, sizeof n, "%s.x2", tag);
    int x2 = OP(g, "Slice", nm(layer, n), x, CI64(g, nm(layer, "t0"), MD / 2),
                CI64(g, nm(layer, "t1"), MD), CI64(g, nm(layer, "t3"), 3));
    snprintf(n, sizeof n, "%s.neg", tag);
    int neg = OP(g, "Neg", nm(layer, n), x2);
    snprintf(n, sizeof n, "%s.rot", tag);
    int rot = OP(g, "Concat", nm(layer, n), neg, x1);
    attr_int(g, producer_of(g, rot), "axis", 3);
    snprintf(n, sizeof n, "%s.xc", tag);
    int xc = OP(g, "Mul", nm(layer, n), x, cos4);
    snprintf(n, sizeof n, "%s.rs", tag);
    int rs = OP(g, "Mul", nm(layer, n), rot, sin4);
    snprintf(n, sizeof n, "%s.roped", tag);
    return OP(g, "Add", nm(layer, n), xc, rs);
}

static int heads_first(llmc_graph *g, int layer, const char *tag, int x)
{
    char n[32];
    snprintf(n, sizeof n, "%s.4d", tag);
    int x4 = OP(g, "Reshape", nm(layer, n), x, CI64(g, nm(layer, "shape4"), 0, 0, MH, MD));
    snprintf(n, sizeof n, "%s.t", tag);
    int t = OP(g, "Transpose", nm(layer, n), x4);
    ATTR_INTS(g, producer_of(g, t), "perm", 0, 2, 1, 3);
    return t;
}

/* Attention in ONNX ops with past/present: what exporters write. */
static int unfused_attention(model_b *m, int layer, int q, int k, int v)
{
    llmc_graph *g = m->g;
    char name[64];
    int qt = heads_first(g, layer, "q", q), kt = heads_first(g, layer, "k", k);
    int vt = heads_first(g, layer, "v", v);
    int cg = OP(g, "Gather", nm(layer, "cos"), m->cos_v, m->pos);
    int sg = OP(g, "Gather", nm(layer, "sin"), m->sin_v, m->pos);
    int cos4 = OP(g, "Unsqueeze", nm(layer, "cos4"), cg, CI64(g, nm(layer, "ax1"), 1));
    int sin4 = OP(g, "Unsqueeze", nm(layer, "sin4"), sg, CI64(g, nm(layer, "ax1b"), 1));
    int qr = onnx_rope(g, layer, "q", qt, cos4, sin4), kr = onnx_rope(g, layer, "k", kt, cos4, sin4);
    snprintf(name, sizeof name, "past_key_values.%d.key", layer);
    int pk = g_input(g, name, LLMC_DT_FLOAT, SHAPE(K(1), K(MH), SYM_P, K(MD)));
    snprintf(name, sizeof name, "past_key_values.%d.value", layer);
    int pv = g_input(g, name, LLMC_DT_FLOAT, SHAPE(K(1), K(MH), SYM_P, K(MD)));
    snprintf(name, sizeof name, "present.%d.key", layer);
    int prk = OP(g, "Concat", name, pk, kr);
    attr_int(g, producer_of(g, prk), "axis", 2);
    snprintf(name, sizeof name, "present.%d.value", layer);
    int prv = OP(g, "Concat", name, pv, vt);
    attr_int(g, producer_of(g, prv), "axis", 2);
    g_output(g, prk);
    g_output(g, prv);
    int kT = OP(g, "Transpose", nm(layer, "kT"), prk);
    ATTR_INTS(g, producer_of(g, kT), "perm", 0, 1, 3, 2);
    int sc = OP(g, "MatMul", nm(layer, "scores"), qr, kT);
    float scale = 1.0f / sqrtf((float)MD), neg_inf = -INFINITY, zero = 0;
    int scs = OP(g, "Mul", nm(layer, "scaled"), sc,
                 g_const(g, nm(layer, "scale"), LLMC_DT_FLOAT, SCALAR, &scale));
    int shp = OP(g, "Shape", nm(layer, "kshape"), prk);
    int len = OP(g, "Gather", nm(layer, "klen"), shp, g_scalar_i64(g, nm(layer, "two"), 2));
    int rng = OP(g, "Range", nm(layer, "t"), g_scalar_i64(g, nm(layer, "zero"), 0), len,
                 g_scalar_i64(g, nm(layer, "one"), 1));
    int qp = OP(g, "Unsqueeze", nm(layer, "qpos"), m->pos, CI64(g, nm(layer, "ax13"), 1, 3));
    int gt = OP(g, "Greater", nm(layer, "future"), rng, qp);
    int mask = OP(g, "Where", nm(layer, "mask"), gt,
                  g_const(g, nm(layer, "ninf"), LLMC_DT_FLOAT, SCALAR, &neg_inf),
                  g_const(g, nm(layer, "zf"), LLMC_DT_FLOAT, SCALAR, &zero));
    int msk = OP(g, "Add", nm(layer, "masked"), scs, mask);
    int pr = OP(g, "Softmax", nm(layer, "probs"), msk);
    attr_int(g, producer_of(g, pr), "axis", -1);
    int cx = OP(g, "MatMul", nm(layer, "ctx"), pr, prv);
    int cxt = OP(g, "Transpose", nm(layer, "ctx.t"), cx);
    ATTR_INTS(g, producer_of(g, cxt), "perm", 0, 2, 1, 3);
    return OP(g, "Reshape", nm(layer, "ctx.3d"), cxt, CI64(g, nm(layer, "shape3"), 0, 0, MH * MD));
}

static int build_layer(model_b *m, int layer, int x, bool fused)
{
    llmc_graph *g = m->g;
    int w[4];
    for (int i = 0; i < 4; i++) {
        char n[16];
        snprintf(n, sizeof n, "w%d", i);
        w[i] = g_const(g, nm(layer, n), LLMC_DT_FLOAT, SHAPE(K(DM), K(DM)), wts[layer][i]);
    }
    int q = OP(g, "MatMul", nm(layer, "q"), x, w[0]);
    int k = OP(g, "MatMul", nm(layer, "k"), x, w[1]);
    int v = OP(g, "MatMul", nm(layer, "v"), x, w[2]);
    int a;
    if (fused) { /* a graph input until shape inference has run */
        a = g_input(g, nm(layer, "attn"), LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(MH * MD)));
        m->holes[layer] = a;
        m->hole_in[layer][0] = q;
        m->hole_in[layer][1] = k;
        m->hole_in[layer][2] = v;
    } else {
        a = unfused_attention(m, layer, q, k, v);
        m->holes[layer] = -1;
    }
    int o = OP(g, "MatMul", nm(layer, "o"), a, w[3]);
    return OP(g, "Add", nm(layer, "h"), x, o);
}

/* Turns hole value v (a graph input) into the output of an llmc.Attention. */
static void fill_hole(model_b *m, int layer)
{
    llmc_graph *g = m->g;
    int v = m->holes[layer], k = 0;
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] != v)
            g->inputs[k++] = g->inputs[i];
    g->n_inputs = k;
    g->values[v].is_graph_input = false;
    attn_cfg c = {MH, MH, MD, MD, 0, 0, 0};
    add_attention(g, nm(layer, "attention"), &c, m->hole_in[layer][0], m->hole_in[layer][1],
                  m->hole_in[layer][2], m->cos_v, m->sin_v, NULL, layer, v);
}

/* fused_mask bit l: layer l uses llmc.Attention. */
static uint8_t *build_model(unsigned fused_mask, size_t *size, llmc_error *err)
{
    llmc_graph g;
    llmc_graph_init(&g);
    g.opset = 17;
    model_b m = {&g, -1, -1, -1, {-1, -1}, {{0}}};
    int ids = g_input(&g, "input_ids", LLMC_DT_INT64, SHAPE(K(1), SYM_S));
    if (fused_mask != (1u << LAYERS) - 1)
        m.pos = g_input(&g, "position_ids", LLMC_DT_INT64, SHAPE(K(1), SYM_S));
    m.cos_v = g_const(&g, "rope.cos", LLMC_DT_FLOAT, SHAPE(K(CTX), K(MD)), m_cos);
    m.sin_v = g_const(&g, "rope.sin", LLMC_DT_FLOAT, SHAPE(K(CTX), K(MD)), m_sin);
    int table = g_const(&g, "embed", LLMC_DT_FLOAT, SHAPE(K(VOC), K(DM)), embed);
    int x = OP(&g, "Gather", "x", table, ids);
    for (int l = 0; l < LAYERS; l++)
        x = build_layer(&m, l, x, fused_mask >> l & 1);
    int head = g_const(&g, "lm_head", LLMC_DT_FLOAT, SHAPE(K(DM), K(VOC)), lm_head);
    g_output(&g, OP(&g, "MatMul", "logits", x, head));
    llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = CTX};
    memset(err, 0, sizeof *err);
    uint8_t *bytes = NULL;
    if (llmc_pass_shape_inference.run(&g, &ctx, err) == LLMC_OK) {
        for (int l = 0; l < LAYERS; l++)
            if (m.holes[l] >= 0)
                fill_hole(&m, l);
        bytes = compile(&g, size, err);
    }
    llmc_graph_free(&g);
    return bytes;
}

static double logits_diff(const float *a, const float *b)
{
    double worst = 0, top = 0;
    for (int i = 0; i < VOC; i++) {
        worst = fmax(worst, fabs(a[i] - b[i]));
        top = fmax(top, fabs(b[i]));
    }
    return worst / fmax(top, 1e-30);
}

static void test_model(void)
{
    for (int i = 0; i < VOC * DM; i++) {
        embed[i] = frand();
        lm_head[i] = frand();
    }
    for (int l = 0; l < LAYERS; l++)
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < DM * DM; i++)
                wts[l][j][i] = 0.5f * frand();
    m_cos = rope_table(MD, 0);
    m_sin = rope_table(MD, 1);
    static const unsigned masks[3] = {3, 0, 1};
    static const char *const names[3] = {"fused", "unfused", "mixed (layer 0 fused)"};
    runner r[3];
    llmc_rt_error err = {0};
    for (int i = 0; i < 3; i++) {
        llmc_error cerr;
        size_t size = 0;
        uint8_t *bytes = build_model(masks[i], &size, &cerr);
        CHECK(bytes != NULL, "%s model compiles (%s)", names[i], cerr.msg);
        int rc = runner_open(&r[i], bytes, size, CTX, &err);
        CHECK(rc == 0, "%s model opens (%s)", names[i], err.msg);
        if (rc) {
            for (int j = 0; j <= i; j++)
                runner_close(&r[j]);
            return;
        }
    }
    CHECK(rt_plan_of(&r[0].plan)->n_caches == 2 && rt_plan_of(&r[0].plan)->kv_bytes == 0 && rt_plan_of(&r[1].plan)->n_caches == 0 &&
              rt_plan_of(&r[1].plan)->kv_bytes > 0 && rt_plan_of(&r[2].plan)->n_caches == 1 && rt_plan_of(&r[2].plan)->kv_bytes > 0 &&
              rt_plan_of(&r[0].plan)->n_layers == 2 && rt_plan_of(&r[2].plan)->n_layers == 2,
          "fused plan: 2 caches, no KV store; unfused: KV store; mixed: both");

    int64_t tokens[CTX];
    for (int i = 0; i < CTX; i++)
        tokens[i] = rand() % VOC;
    float logits[3][VOC], first[VOC];
    uint64_t bytes10[3] = {0}, bytes150[3] = {0};
    double worst = 0;
    llmc_rt_status st = LLMC_RT_OK;
    for (int i = 0; i < 3 && !st; i++)
        st = llmc_rt_session_feed(&r[i].s, tokens, 7, logits[i], &err);
    CHECK(!st && logits_diff(logits[1], logits[0]) < 1e-5 && logits_diff(logits[2], logits[0]) < 1e-5,
          "prefill of 7: fused, unfused and mixed logits agree (%g, %g) %s",
          logits_diff(logits[1], logits[0]), logits_diff(logits[2], logits[0]), st ? err.msg : "");
    memcpy(first, logits[0], sizeof first);
    int P = 7;
    for (; P < 151 && !st; P++) {
        for (int i = 0; i < 3 && !st; i++) {
            st = llmc_rt_session_feed(&r[i].s, &tokens[P], 1, logits[i], &err);
            llmc_rt_stats stats;
            llmc_rt_session_stats(&r[i].s, &stats);
            if (P == 10)
                bytes10[i] = stats.bytes_last;
            if (P == 150)
                bytes150[i] = stats.bytes_last;
        }
        worst = fmax(worst, fmax(logits_diff(logits[1], logits[0]), logits_diff(logits[2], logits[0])));
    }
    CHECK(!st && P == 151 && worst < 1e-5 && tp_stats(&r[0].s).position == 151,
          "decode to position 151: logits agree at every step (worst %g relative to max|logit|) %s",
          worst, st ? err.msg : "");
    CHECK(bytes10[0] > 0 && bytes10[0] == bytes150[0],
          "fused: a decode step moves %llu bytes at P=10 and %llu at P=150",
          (unsigned long long)bytes10[0], (unsigned long long)bytes150[0]);
    CHECK(bytes150[1] > bytes10[1] + 2 * 2 * 140 * MH * MD * 4,
          "unfused: a decode step moves %llu bytes at P=10 but %llu at P=150",
          (unsigned long long)bytes10[1], (unsigned long long)bytes150[1]);
    CHECK(bytes150[2] > bytes10[2], "mixed: grows too (%llu -> %llu)",
          (unsigned long long)bytes10[2], (unsigned long long)bytes150[2]);
    llmc_rt_stats stats;
    llmc_rt_session_stats(&r[0].s, &stats);
    CHECK(stats.kv_chunks_used == 6 && stats.kv_chunks == 6 && stats.runs == 145,
          "fused: 2 caches x 3 chunks taken at 151 positions, 145 runs counted");
    llmc_rt_session_reset(&r[0].s);
    st = llmc_rt_session_feed(&r[0].s, tokens, 7, logits[0], &err);
    llmc_rt_session_stats(&r[0].s, &stats);
    CHECK(!st && !memcmp(logits[0], first, sizeof first) && stats.kv_chunks_used == 2 &&
              tp_stats(&r[0].s).position == 7,
          "llmc_rt_session_reset: the same prompt gives bit-identical logits; 2 chunks in use again");
    st = llmc_rt_session_feed(&r[0].s, tokens + 7, 1, NULL, &err);
    CHECK(!st && tp_stats(&r[0].s).position == 8, "prefill continues a sequence; NULL logits allowed");
    for (int i = 0; i < 3; i++)
        runner_close(&r[i]);
    free(m_cos);
    free(m_sin);
}

/* ---- the verifier ------------------------------------------------------- */

static tp_plan tp;
static float tp_cos[16 * 4], tp_sin[16 * 4], tp_norm[16];

typedef struct {
    const char *q_dims, *k_dims, *q_dtype, *table_dims, *fields, *extra;
    int with_tables, two_ops;
    const char *norm_dims;   /* q_norm, k_norm after the inputs when set */
    const char *k_norm_dims; /* k_norm's when not "8" */
} bad_case;

/* Bytes of a float32 weight of dims "a,b,...". */
static size_t f32_bytes(const char *dims)
{
    size_t n = 4;
    for (const char *d = dims; d; d = strchr(d, ','), d = d ? d + 1 : NULL)
        n *= (size_t)atoi(d);
    return n;
}

static uint8_t *attention_plan(const bad_case *c, size_t *size)
{
    tp_init(&tp, 16);
    snprintf(tp.extra, sizeof tp.extra, "%s", c->extra ? c->extra : "n_caches: 1, kv_chunk: 64, n_layers: 1,");
    int q = tp_tensor(&tp, "q", c->q_dtype ? c->q_dtype : "Float32", c->q_dims ? c->q_dims : "1,S,16");
    int k = tp_tensor(&tp, "k", "Float32", c->k_dims ? c->k_dims : "1,S,8");
    int v = tp_tensor(&tp, "v", "Float32", "1,S,8");
    int o = tp_tensor(&tp, "o", "Float32", "1,S,16");
    int o2 = tp_tensor(&tp, "o2", "Float32", "1,S,16");
    const char *td = c->table_dims ? c->table_dims : "16,4";
    int cs = tp_weight(&tp, "cos", "Float32", td, tp_cos, sizeof tp_cos);
    int sn = tp_weight(&tp, "sin", "Float32", td, tp_sin, sizeof tp_sin);
    const char *fields = c->fields ? c->fields : "heads: 2, kv_heads: 1, head_dim: 8, rotary_dim: 4, scale: 0.35";
    char norms[32] = "";
    if (c->norm_dims) {
        const char *kd = c->k_norm_dims ? c->k_norm_dims : "8";
        snprintf(norms, sizeof norms, ", %d, %d",
                 tp_weight(&tp, "qn", "Float32", c->norm_dims, tp_norm, f32_bytes(c->norm_dims)),
                 tp_weight(&tp, "kn", "Float32", kd, tp_norm, f32_bytes(kd)));
    }
    for (int i = 0; i <= c->two_ops; i++) {
        char ins[96];
        if (c->with_tables)
            snprintf(ins, sizeof ins, "%d, %d, %d, %d, %d%s", q, k, v, cs, sn, norms);
        else
            snprintf(ins, sizeof ins, "%d, %d, %d%s", q, k, v, norms);
        tp_op(&tp, "code: \"Attention\", name: \"attn%d\", inputs: [%s], outputs: [%d], %s", i,
              ins, i ? o2 : o, fields);
    }
    tp_io(&tp, 0, q, "Generic", 0);
    tp_io(&tp, 0, k, "Generic", 0);
    tp_io(&tp, 0, v, "Generic", 0);
    tp_io(&tp, 1, o, "Generic", 0);
    return tp_finish(&tp, "rt_attention_verify", size);
}

/* heads 4 of head_dim 4 over kv_heads 2: q [1, S, 16], k [1, S, 8] */
#define WHOLE_4_2 "heads: 4, kv_heads: 2, head_dim: 4, rotary_dim: 4, scale: 0.5"

static void test_verifier(void)
{
    static const struct {
        bad_case c;
        const char *what, *msg;
    } cases[] = {
        {{.with_tables = 1}, "a well-formed Attention op opens", NULL},
        {{.with_tables = 1, .fields = "heads: 3, kv_heads: 2, head_dim: 8, rotary_dim: 4, scale: 0.35"},
         "heads not a multiple of kv_heads", "kv_heads | heads"},
        {{.with_tables = 1, .q_dims = "1,S,12"}, "q last dim != heads*head_dim", "must be [1, S, 16]"},
        {{.with_tables = 1, .k_dims = "1,S,16"}, "k last dim != kv_heads*head_dim", "k and v"},
        {{.with_tables = 1, .k_dims = "1,P,8"}, "k rows not S", "k and v"},
        {{.with_tables = 1, .q_dtype = "Int32"}, "q int32", "float32"},
        {{.with_tables = 1, .fields = "heads: 2, kv_heads: 1, head_dim: 8, rotary_dim: 3, scale: 0.35"},
         "odd rotary_dim", "even rotary_dim"},
        {{.with_tables = 1, .fields = "heads: 2, kv_heads: 1, head_dim: 8, rotary_dim: 10, scale: 0.35"},
         "rotary_dim > head_dim", "even rotary_dim"},
        {{.with_tables = 0}, "rotary_dim 4 without cos/sin", "needs 5"},
        {{.with_tables = 1, .fields = "heads: 2, kv_heads: 1, head_dim: 8, scale: 0.35"},
         "cos/sin given with rotary_dim 0 (read as head norms)", "q_norm and k_norm must be float32 [head_dim 8]"},
        {{.with_tables = 1, .norm_dims = "8"}, "q/k head norms [head_dim] open", NULL},
        {{.with_tables = 0, .norm_dims = "8", .fields = "heads: 2, kv_heads: 1, head_dim: 8, scale: 0.35"},
         "q/k head norms without RoPE open", NULL},
        {{.with_tables = 1, .norm_dims = "2,4"}, "q_norm [2, 4]", "q_norm and k_norm must be float32 [head_dim 8]"},
        {{.with_tables = 1, .norm_dims = "16", .k_norm_dims = "8", .fields = WHOLE_4_2},
         "whole-row norms [heads*head_dim] [kv_heads*head_dim] open", NULL},
        {{.with_tables = 1, .norm_dims = "12", .k_norm_dims = "8", .fields = WHOLE_4_2},
         "q_norm [12] (neither head_dim 4 nor heads*head_dim 16)",
         "[head_dim 4] both (per head) or [4 heads * head_dim] and [2 kv_heads * head_dim]"},
        {{.with_tables = 1, .norm_dims = "16", .k_norm_dims = "4", .fields = WHOLE_4_2},
         "q_norm over the whole row, k_norm per head", "[4 heads * head_dim] and [2 kv_heads"},
        {{.with_tables = 1, .norm_dims = "4", .k_norm_dims = "8", .fields = WHOLE_4_2},
         "q_norm per head, k_norm over the whole row", "[head_dim 4] both"},
        {{.with_tables = 1, .norm_dims = "8", .fields = "heads: 2, kv_heads: 1, head_dim: 8, rotary_dim: 4, "
                                                       "scale: 0.35, epsilon: nan"},
         "head norm epsilon NaN", "epsilon finite >= 0"},
        {{.with_tables = 1, .table_dims = "8,8"}, "table rows != max_context", "max_context 16"},
        {{.with_tables = 1, .table_dims = "32,2"}, "table cols != rotary_dim", "rotary_dim 4"},
        {{.with_tables = 1, .fields = "heads: 2, kv_heads: 1, head_dim: 8, rotary_dim: 4, scale: inf"},
         "scale infinite", "scale must be finite"},
        {{.with_tables = 1, .fields = "heads: 2, kv_heads: 1, head_dim: 8, rotary_dim: 4, scale: 0.35, softcap: -1"},
         "softcap negative", "softcap must be finite and >= 0"},
        {{.with_tables = 1, .fields = "heads: 2, kv_heads: 1, head_dim: 8, rotary_dim: 4, scale: 0.35, softcap: inf"},
         "softcap infinite", "softcap must be finite and >= 0"},
        {{.with_tables = 1, .fields = "heads: 2, kv_heads: 1, head_dim: 8, rotary_dim: 4, scale: 0.35, cache: 1"},
         "cache >= n_caches", "cache 1 >= n_caches 1"},
        {{.with_tables = 1, .two_ops = 1, .extra = "n_caches: 2, kv_chunk: 64, n_layers: 2,"},
         "two ops on cache 0", "both use cache 0"},
        {{.with_tables = 1, .extra = "n_caches: 2, kv_chunk: 64, n_layers: 2,"},
         "n_caches 2 with one Attention op", "n_caches"},
        {{.with_tables = 1, .extra = "n_caches: 1, n_layers: 1,"}, "kv_chunk 0", "kv_chunk >= 1"},
        {{.with_tables = 1, .fields = "heads: 2, kv_heads: 1, head_dim: 0, rotary_dim: 0, scale: 0.35"},
         "head_dim 0", "head_dim 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t size = 0;
        uint8_t *bytes = attention_plan(&cases[i].c, &size);
        llmc_rt_plan plan;
        llmc_rt_error err = {0};
        llmc_rt_status st = bytes ? llmc_rt_plan_open(&plan, bytes, size, 0, &err) : LLMC_RT_E_ARG;
        if (!cases[i].msg)
            CHECK(st == LLMC_RT_OK && rt_plan_of(&plan)->n_caches == 1 && rt_plan_of(&plan)->kv_slot_bytes == 2 * 64 * 8 * 4,
                  "%s (%s)", cases[i].what, err.msg);
        else
            CHECK(st == LLMC_RT_E_CORRUPT && strstr(err.msg, cases[i].msg),
                  "rejected: %s: %s", cases[i].what, err.msg);
        free(bytes);
    }
}

/* ---- sampling ------------------------------------------------------------ */

static void test_sampler(void)
{
    enum { N = 50 };
    float logits[N];
    uint8_t scratch[LLMC_SAMPLER_SCRATCH_BYTES(N)] __attribute__((aligned(4)));
    llmc_rt_error err;
    llmc_sampler sm;
    int64_t tok = -1, best = 0;
    int agree = 1;
    for (int trial = 0; trial < 20; trial++) {
        for (int i = 0; i < N; i++)
            logits[i] = 3 * frand();
        best = 0;
        for (int i = 1; i < N; i++)
            best = logits[i] > logits[best] ? i : best;
        llmc_sampler_init(&sm, 0.0f, 0, 1.0f, trial);
        agree &= !llmc_sample(&sm, logits, N, NULL, 0, &tok, &err) && tok == best;
        llmc_sampler_init(&sm, 1e-4f, 0, 1.0f, trial);
        agree &= !llmc_sample(&sm, logits, N, scratch, sizeof scratch, &tok, &err) && tok == best;
        llmc_sampler_init(&sm, 1.5f, 1, 1.0f, trial);
        agree &= !llmc_sample(&sm, logits, N, NULL, 0, &tok, &err) && tok == best;
        llmc_sampler_init(&sm, 1.0f, 0, 1e-6f, trial);
        agree &= !llmc_sample(&sm, logits, N, scratch, sizeof scratch, &tok, &err) && tok == best;
    }
    CHECK(agree, "greedy = argmax; temperature -> 0, top-k 1 and tiny top-p all pick the argmax");
    logits[3] = logits[7] = 100; /* a tie: the lowest id, as `llmc run` */
    llmc_sampler_init(&sm, 0.0f, 0, 1.0f, 1);
    CHECK(!llmc_sample(&sm, logits, N, NULL, 0, &tok, &err) && tok == 3, "greedy ties to the lowest id");

    for (int i = 0; i < N; i++)
        logits[i] = 2 * frand();
    int64_t a[64], b[64], c[64];
    llmc_sampler s1, s2, s3;
    llmc_sampler_init(&s1, 1.0f, 20, 0.9f, 42);
    llmc_sampler_init(&s2, 1.0f, 20, 0.9f, 42);
    llmc_sampler_init(&s3, 1.0f, 20, 0.9f, 43);
    for (int i = 0; i < 64; i++) {
        llmc_sample(&s1, logits, N, scratch, sizeof scratch, &a[i], &err);
        llmc_sample(&s2, logits, N, scratch, sizeof scratch, &b[i], &err);
        llmc_sample(&s3, logits, N, scratch, sizeof scratch, &c[i], &err);
    }
    CHECK(!memcmp(a, b, sizeof a) && memcmp(a, c, sizeof a), "same seed, same draws; another seed differs");
    CHECK(llmc_sample(&s1, logits, N, scratch, sizeof scratch - 1, &tok, &err) == LLMC_RT_E_MEMORY,
          "too little scratch is refused: %s", err.msg);

    /* exact distributions: temperature 0.7, top-k 10, top-p 0.8 */
    enum { DRAWS = 200000 };
    static const struct { float t; uint32_t k; float p; const char *what; } dists[3] = {
        {0.7f, 0, 1.0f, "temperature 0.7"}, {1.0f, 10, 1.0f, "top-k 10"}, {1.0f, 0, 0.8f, "top-p 0.8"}};
    for (int d = 0; d < 3; d++) {
        int order[N];
        double prob[N], sum = 0, mx = -1e30;
        for (int i = 0; i < N; i++) {
            order[i] = i;
            mx = fmax(mx, logits[i]);
        }
        for (int i = 0; i < N; i++) /* selection sort by logit, descending */
            for (int j = i + 1; j < N; j++)
                if (logits[order[j]] > logits[order[i]]) {
                    int t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
        for (int i = 0; i < N; i++)
            prob[i] = 0;
        int keep = dists[d].k ? (int)dists[d].k : N;
        for (int i = 0; i < keep; i++)
            sum += prob[order[i]] = exp((logits[order[i]] - mx) / dists[d].t);
        if (dists[d].p < 1) {
            double cum = 0;
            int n = 0;
            while (cum < dists[d].p * sum)
                cum += prob[order[n++]];
            for (int i = n; i < N; i++)
                prob[order[i]] = 0;
            sum = cum;
        }
        int counts[N] = {0};
        llmc_sampler_init(&sm, dists[d].t, dists[d].k, dists[d].p, 7);
        for (int i = 0; i < DRAWS; i++) {
            llmc_sample(&sm, logits, N, scratch, sizeof scratch, &tok, &err);
            counts[tok]++;
        }
        double worst = 0;
        int outside = 0;
        for (int i = 0; i < N; i++) {
            double pi = prob[i] / sum, sd = sqrt(pi * (1 - pi) / DRAWS);
            worst = fmax(worst, fabs(counts[i] / (double)DRAWS - pi) / fmax(sd, 1e-9));
            outside += pi == 0 && counts[i];
        }
        CHECK(worst < 5 && !outside, "%s: %d draws match the exact probabilities (worst %.2f sigma), "
              "none outside the candidates", dists[d].what, DRAWS, worst);
    }
    int64_t stops[2] = {5, 9};
    llmc_sampler_init(&sm, 0, 0, 1, 0);
    sm.stop = stops;
    sm.n_stop = 2;
    CHECK(llmc_sampler_is_stop(&sm, 9) && !llmc_sampler_is_stop(&sm, 4), "stop tokens recognized");
}

int main(void)
{
    srand(3);
    static const struct { attn_cfg c; const char *what; } cfgs[] = {
        {{4, 4, 8, 0, 0, 0, 0}, "MHA, no RoPE"},
        {{4, 2, 8, 8, 0, 0, 0}, "GQA 4/2, full RoPE"},
        {{6, 2, 16, 8, 0, 0, 0}, "GQA 6/2, partial RoPE 8 of 16"},
        {{2, 1, 4, 4, 0, 0, 0}, "MQA 2/1, RoPE"},
        {{4, 2, 16, 16, 1, 0, 0}, "GQA 4/2, q/k RMSNorm per head, full RoPE"},
        {{4, 4, 8, 0, 1, 0, 0}, "MHA, q/k RMSNorm per head, no RoPE"},
        {{6, 2, 12, 6, 0, 5, 0}, "GQA 6/2, window 5 (ring of 2 chunks)"},
        {{4, 2, 16, 16, 0, 64, 0}, "GQA 4/2, window 64 = the chunk"},
        {{3, 1, 10, 0, 0, 100, 4.0f}, "MQA 3/1, window 100, softcap 4"},
        {{4, 4, 8, 8, 0, 0, 3.0f}, "MHA, softcap 3"},
        {{4, 2, 16, 16, 1, 33, 0}, "GQA 4/2, q/k RMSNorm, window 33"},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++)
        test_op(&cfgs[i].c, cfgs[i].what);
    test_window_kernels();
    test_rows_tables();
    test_lowering_errors();
    test_model();
    test_verifier();
    test_sampler();
    return TAP_DONE();
}
