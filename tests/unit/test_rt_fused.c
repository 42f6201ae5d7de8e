/* The fused ops (Linear, RMSNorm, Rope, Gelu/GeluTanh/Silu, SwiGLU):
 * kernels against double-precision references on random data, the
 * verifier on malformed ops, and codegen of llmc-domain nodes against the
 * same graph spelled in plain ONNX ops. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/evaluate.h"
#include "graph_util.h"
#include "kernels/kernels.h"
#include "ir/llmc_ops.h"
#include "llmc_threads.h"
#include "rt_testplan.h"
#include "tap.h"

static llmc_rt_error err;

static rt_view view(void *data, int rank, const int64_t *dims)
{
    rt_view v = {LLMC_RT_F32, rank, {0}, data};
    for (int i = 0; i < rank; i++)
        v.dims[i] = dims[i];
    return v;
}
#define V(data, ...) view(data, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8), (int64_t[]){__VA_ARGS__})

static float frand(void)
{
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static float *rand_floats(int n)
{
    float *p = malloc(sizeof *p * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

/* max |got - want| / max(1, |want|) */
static double max_rel_err(const float *got, const double *want, int n)
{
    double e = 0.0;
    for (int i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]) / fmax(1.0, fabs(want[i]));
        if (!(d <= e))
            e = d; /* NaN counts as an error */
    }
    return e;
}

/* ---- Linear ------------------------------------------------------------- */

/* z[t][n] = sum_k x[t][k] W[n][k] + bias[n] + residual[t][n], in double. */
static double *linear_ref(const float *x, const float *w, const float *bias,
                          const float *residual, int m, int k, int n)
{
    double *z = malloc(sizeof *z * (size_t)(m * n));
    for (int t = 0; t < m; t++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int p = 0; p < k; p++)
                s += (double)x[t * k + p] * w[j * k + p];
            z[t * n + j] = s + (bias ? bias[j] : 0.0) + (residual ? residual[t * n + j] : 0.0);
        }
    return z;
}

/* x [2, m/2... as [1, m, k]] split over outputs of widths n_out[]. */
static void check_linear_split(int m, int k, const int *widths, int n_out, bool with_bias)
{
    int n = 0;
    for (int j = 0; j < n_out; j++)
        n += widths[j];
    float *x = rand_floats(m * k), *w = rand_floats(n * k), *bias = rand_floats(n);
    double *z = linear_ref(x, w, with_bias ? bias : NULL, NULL, m, k, n);
    rt_view vx = V(x, 1, m, k), vw = V(w, n, k), vb = V(bias, n);
    double worst = 0.0;
    bool ok = true;
    int col0 = 0;
    for (int j = 0; j < n_out; j++) {
        float *y = malloc(sizeof *y * (size_t)(m * widths[j]));
        double *want = malloc(sizeof *want * (size_t)(m * widths[j]));
        for (int t = 0; t < m; t++)
            for (int c = 0; c < widths[j]; c++)
                want[t * widths[j] + c] = z[t * n + col0 + c];
        rt_view vy = V(y, 1, m, widths[j]);
        ok &= k_linear(&vx, &vw, with_bias ? &vb : NULL, NULL, col0, &vy, NULL, &err) == LLMC_RT_OK;
        double e = max_rel_err(y, want, m * widths[j]);
        worst = e > worst ? e : worst;
        col0 += widths[j];
        free(y);
        free(want);
    }
    CHECK(ok && worst <= 1e-5, "Linear S=%d K=%d N=%d in %d outputs%s: max rel err %.2g", m, k,
          n, n_out, with_bias ? " + bias" : "", worst);
    free(x);
    free(w);
    free(bias);
    free(z);
}

static void test_linear(void)
{
    check_linear_split(1, 64, (int[]){64}, 1, false);           /* decode, whole blocks */
    check_linear_split(1, 37, (int[]){7}, 1, true);             /* K, N tails */
    check_linear_split(5, 29, (int[]){8, 4, 4}, 3, true);       /* q, k, v */
    check_linear_split(3, 130, (int[]){3, 6}, 2, false);        /* gate, up; odd split */
    check_linear_split(7, 1, (int[]){1, 2}, 2, true);           /* K = 1 */

    int m = 4, k = 19, n = 11;
    float *x = rand_floats(m * k), *w = rand_floats(n * k), *bias = rand_floats(n);
    float *res = rand_floats(m * n), y[44];
    double *want = linear_ref(x, w, bias, res, m, k, n);
    rt_view vx = V(x, 2, 2, k), vw = V(w, n, k), vb = V(bias, n), vr = V(res, 2, 2, n),
            vy = V(y, 2, 2, n);
    CHECK(k_linear(&vx, &vw, &vb, &vr, 0, &vy, NULL, &err) == LLMC_RT_OK &&
          max_rel_err(y, want, m * n) <= 1e-5, "Linear rank 3 with bias + residual: %.2g",
          max_rel_err(y, want, m * n));
    double *want2 = linear_ref(x, w, NULL, res, m, k, n);
    CHECK(k_linear(&vx, &vw, NULL, &vr, 0, &vy, NULL, &err) == LLMC_RT_OK &&
          max_rel_err(y, want2, m * n) <= 1e-5, "Linear with residual only");
    rt_view bad_y = V(y, 2, 2, 6);
    CHECK(k_linear(&vx, &vw, NULL, NULL, 6, &bad_y, NULL, &err) == LLMC_RT_E_EXEC &&
              strstr(err.msg, "columns 6"),
          "Linear columns past N rejected: %s", err.msg);
    rt_view bad_x = V(x, 2, 2, k - 1);
    CHECK(k_linear(&bad_x, &vw, NULL, NULL, 0, &vy, NULL, &err) == LLMC_RT_E_EXEC,
          "Linear with x's last dim != K rejected");
    free(x);
    free(w);
    free(bias);
    free(res);
    free(want);
    free(want2);
}

/* ---- RMSNorm ------------------------------------------------------------ */

/* RMSNorm in fp64, epsilon 1e-5. */
static void rmsnorm_reference(const float *x, const float *scale, int rows, int d, double *want)
{
    for (int r = 0; r < rows; r++) {
        double ss = 0.0;
        for (int j = 0; j < d; j++)
            ss += (double)x[r * d + j] * x[r * d + j];
        double inv = 1.0 / sqrt(ss / d + 1e-5);
        for (int j = 0; j < d; j++)
            want[r * d + j] = x[r * d + j] * inv * scale[j];
    }
}

static void test_rmsnorm(void)
{
    int rows = 6, d = 13;
    float *x = rand_floats(rows * d), *scale = rand_floats(d), y[78];
    double want[78];
    rmsnorm_reference(x, scale, rows, d, want);
    rt_view vx = V(x, 2, 3, d), vs = V(scale, d), vy = V(y, 2, 3, d);
    CHECK(k_rmsnorm(NULL, &vx, &vs, NULL, 1e-5f, &vy, NULL, &err) == LLMC_RT_OK &&
          max_rel_err(y, want, rows * d) <= 1e-6, "RMSNorm [2, 3, 13]: %.2g",
          max_rel_err(y, want, rows * d));
    float zeros[4] = {0}, one[4] = {1, 1, 1, 1}, out[4];
    rt_view vz = V(zeros, 4), vo = V(one, 4), vout = V(out, 4);
    CHECK(k_rmsnorm(NULL, &vz, &vo, NULL, 1e-6f, &vout, NULL, &err) == LLMC_RT_OK && out[0] == 0.0f,
          "RMSNorm of zeros is 0 (epsilon keeps it finite)");
    rt_view short_scale = V(scale, d - 1);
    CHECK(k_rmsnorm(NULL, &vx, &short_scale, NULL, 1e-5f, &vy, NULL, &err) == LLMC_RT_E_EXEC,
          "RMSNorm scale of the wrong length rejected: %s", err.msg);
    /* post-norm: residual + norm(x), against the reference plus the residual */
    float *r = rand_floats(rows * d), yr[78];
    rt_view vr = V(r, 2, 3, d), vyr = V(yr, 2, 3, d), vr_short = V(r, 3, 2, d);
    for (int i = 0; i < rows * d; i++)
        want[i] += r[i];
    CHECK(k_rmsnorm(NULL, &vx, &vs, &vr, 1e-5f, &vyr, NULL, &err) == LLMC_RT_OK &&
          max_rel_err(yr, want, rows * d) <= 1e-5, "RMSNorm [2, 3, 13] + residual: %.2g",
          max_rel_err(yr, want, rows * d));
    CHECK(k_rmsnorm(NULL, &vx, &vs, &vr_short, 1e-5f, &vyr, NULL, &err) == LLMC_RT_E_EXEC,
          "RMSNorm residual of other dims rejected: %s", err.msg);
    free(r);
    free(x);
    free(scale);
}

/* Rows long enough for several tasks (40 rows of 4099: 5 rows a task) and
 * for the lanes and their tail: within 1e-6 of fp64, and bitwise the
 * serial result on 1-3 threads. */
static void test_rmsnorm_rows(void)
{
    int rows = 40, d = 4099;
    float *x = rand_floats(rows * d), *scale = rand_floats(d);
    float *y = malloc(sizeof(float) * (size_t)(rows * d));
    float *y2 = malloc(sizeof(float) * (size_t)(rows * d));
    double *want = malloc(sizeof(double) * (size_t)(rows * d));
    rmsnorm_reference(x, scale, rows, d, want);
    rt_view vx = V(x, rows, d), vs = V(scale, d), vy = V(y, rows, d), vy2 = V(y2, rows, d);
    CHECK(k_rmsnorm(NULL, &vx, &vs, NULL, 1e-5f, &vy, NULL, &err) == LLMC_RT_OK &&
          max_rel_err(y, want, rows * d) <= 1e-6, "RMSNorm [40, 4099]: %.2g",
          max_rel_err(y, want, rows * d));
    for (uint32_t threads = 1; threads <= 3; threads++) {
        llmc_threads *pool = llmc_threads_create(threads);
        rt_parallel par = {llmc_threads_parallel, pool};
        memset(y2, 0, sizeof(float) * (size_t)(rows * d));
        CHECK(pool && k_rmsnorm(NULL, &vx, &vs, NULL, 1e-5f, &vy2, &par, &err) == LLMC_RT_OK &&
                  !memcmp(y, y2, sizeof(float) * (size_t)(rows * d)),
              "RMSNorm [40, 4099] on %u threads: bitwise the serial result", threads);
        llmc_threads_destroy(pool);
    }
    free(x);
    free(scale);
    free(y);
    free(y2);
    free(want);
}

/* ---- Rope --------------------------------------------------------------- */

static void rope_ref(const float *x, const float *cs, const float *sn, int rows, int s_len,
                     int d, int rot, int P, double *y)
{
    int h = rot / 2;
    for (int r = 0; r < rows; r++) {
        int pos = P + r % s_len;
        for (int i = 0; i < d; i++) {
            double v = x[r * d + i];
            if (i < rot) {
                double rotated = i < h ? -x[r * d + i + h] : x[r * d + i - h];
                v = v * cs[pos * rot + i] + rotated * sn[pos * rot + i];
            }
            y[r * d + i] = v;
        }
    }
}

static void check_rope(int heads, int s_len, int d, int rot, int P, int max_ctx)
{
    int rows = heads * s_len;
    float *x = rand_floats(rows * d), *cs = rand_floats(max_ctx * rot);
    float *sn = rand_floats(max_ctx * rot), *y = malloc(sizeof *y * (size_t)(rows * d));
    double *want = malloc(sizeof *want * (size_t)(rows * d));
    rope_ref(x, cs, sn, rows, s_len, d, rot, P, want);
    rt_view vx = V(x, 1, heads, s_len, d), vc = V(cs, max_ctx, rot), vs = V(sn, max_ctx, rot),
            vy = V(y, 1, heads, s_len, d);
    CHECK(k_rope(&vx, &vc, &vs, rot, P, &vy, &err) == LLMC_RT_OK &&
          max_rel_err(y, want, rows * d) <= 1e-6,
          "Rope heads=%d S=%d D=%d rotary_dim=%d P=%d: %.2g", heads, s_len, d, rot, P,
          max_rel_err(y, want, rows * d));
    free(x);
    free(cs);
    free(sn);
    free(y);
    free(want);
}

static void test_rope(void)
{
    check_rope(2, 3, 8, 8, 0, 16);     /* full rotary, prefill */
    check_rope(3, 1, 10, 4, 7, 16);    /* partial rotary, decode at P = 7 */
    check_rope(1, 5, 6, 2, 11, 16);    /* last table row used: 11 + 4 = 15 */
    float x[16], cs[32], sn[32], y[16];
    rt_view vx = V(x, 2, 8), vc = V(cs, 8, 4), vs = V(sn, 8, 4), vy = V(y, 2, 8);
    CHECK(k_rope(&vx, &vc, &vs, 4, 7, &vy, &err) == LLMC_RT_E_EXEC &&
              strstr(err.msg, "outside the 8 table rows"),
          "Rope past the table rejected: %s", err.msg);
    CHECK(k_rope(&vx, &vc, &vs, 3, 0, &vy, &err) == LLMC_RT_E_EXEC, "odd rotary_dim rejected");
}

/* ---- activations -------------------------------------------------------- */

enum { UN_GELU = 16, UN_GELU_TANH = 17, UN_SILU = 18, BIN_SWIGLU = 15 };

static double act_ref(int kind, double x)
{
    switch (kind) {
    case UN_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case UN_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    default: return x / (1.0 + exp(-x));
    }
}

/* k_binary with every Binary loop (llmc_rt_all_ops' entries). */
static llmc_rt_status binary_all(int kind, const rt_view *a, const rt_view *b, rt_view *y,
                                 llmc_rt_error *err)
{
    k_binary_loops loops = {llmc_rt_all_ops.binary[kind], llmc_rt_all_ops.binary_any_dtype};
    return k_binary(kind, &loops, a, b, y, err);
}

static void test_activations(void)
{
    enum { N = 200 };
    float x[N], y[N];
    double want[N];
    for (int i = 0; i < N; i++) /* [-10, 10) plus the far tails */
        x[i] = i < 2 ? (i ? 120.0f : -120.0f) : (float)(i - 100) * 0.1f + frand() * 0.05f;
    static const char *const names[] = {"Gelu", "GeluTanh", "Silu"};
    for (int kind = UN_GELU; kind <= UN_SILU; kind++) {
        for (int i = 0; i < N; i++)
            want[i] = act_ref(kind, x[i]);
        rt_view vx = V(x, 4, 50), vy = V(y, 4, 50);
        bool ran = k_unary(llmc_rt_all_ops.unary[kind], kind, &vx, &vy, &err) == LLMC_RT_OK;
        CHECK(ran && max_rel_err(y, want, N) <= 2e-6, "%s on [-10, 10] and +-120: %.2g",
              names[kind - UN_GELU], max_rel_err(y, want, N));
        CHECK(k_unary_supports(kind, LLMC_RT_F32, LLMC_RT_F32) &&
                  !k_unary_supports(kind, LLMC_RT_I64, LLMC_RT_I64),
              "%s is float32 only", names[kind - UN_GELU]);
    }
    /* SwiGLU with broadcasting: gate [4, 50], up [50] */
    float up[50];
    for (int i = 0; i < 50; i++)
        up[i] = frand();
    for (int i = 0; i < N; i++)
        want[i] = act_ref(UN_SILU, x[i]) * up[i % 50];
    rt_view va = V(x, 4, 50), vb = V(up, 50), vy = V(y, 4, 50);
    CHECK(binary_all(BIN_SWIGLU, &va, &vb, &vy, &err) == LLMC_RT_OK &&
          max_rel_err(y, want, N) <= 2e-6, "SwiGLU with broadcast up: %.2g",
          max_rel_err(y, want, N));
    CHECK(k_binary_supports(BIN_SWIGLU, LLMC_RT_F32, LLMC_RT_F32, LLMC_RT_F32) &&
              !k_binary_supports(BIN_SWIGLU, LLMC_RT_I32, LLMC_RT_I32, LLMC_RT_I32),
          "SwiGLU is float32 only");
}

/* ---- a hand-written plan: session run and verifier defects -------------- */

enum { P_VALID, P_W_SHAPE, P_SPLIT_SUM, P_KIND_NO_BIAS, P_BIAS_SHAPE, P_ROPE_ROWS,
       P_ROTARY_ODD, P_RMS_SCALE, P_RESIDUAL_SPLIT };

#define TP_CTX 8
static tp_plan tp;
static float pw[6 * 8], pb[6], pscale[8], pcos[TP_CTX * 4], psin[TP_CTX * 4];

/* x [S, 8] -> RMSNorm -> Rope(rotary 4) -> Linear W [6, 8] + b -> y1 [S, 4], y2 [S, 2] */
static uint8_t *build_plan(int variant, size_t *size)
{
    tp_init(&tp, TP_CTX);
    int x = tp_tensor(&tp, "x", "Float32", "S,8");
    int scale = tp_weight(&tp, "scale", "Float32", variant == P_RMS_SCALE ? "7" : "8", pscale,
                          (variant == P_RMS_SCALE ? 7 : 8) * sizeof(float));
    int cs = tp_weight(&tp, "cos", "Float32", variant == P_ROPE_ROWS ? "7,4" : "8,4", pcos,
                       (variant == P_ROPE_ROWS ? 7 : 8) * 4 * sizeof(float));
    int sn = tp_weight(&tp, "sin", "Float32", "8,4", psin, sizeof psin);
    int w = tp_weight(&tp, "w", "Float32", variant == P_W_SHAPE ? "8,6" : "6,8", pw, sizeof pw);
    int b = tp_weight(&tp, "b", "Float32", variant == P_BIAS_SHAPE ? "5" : "6", pb,
                      (variant == P_BIAS_SHAPE ? 5 : 6) * sizeof(float));
    int n = tp_tensor(&tp, "n", "Float32", "S,8");
    int r = tp_tensor(&tp, "r", "Float32", "S,8");
    int y1 = tp_tensor(&tp, "y1", "Float32", "S,4");
    int y2 = tp_tensor(&tp, "y2", "Float32", variant == P_SPLIT_SUM ? "S,3" : "S,2");
    tp_op(&tp, "code: \"RMSNorm\", name: \"norm\", epsilon: 0.00001, inputs: [%d, %d], "
          "outputs: [%d]", x, scale, n);
    tp_op(&tp, "code: \"Rope\", name: \"rope\", rotary_dim: %d, inputs: [%d, %d, %d], "
          "outputs: [%d]", variant == P_ROTARY_ODD ? 3 : 4, n, cs, sn, r);
    if (variant == P_KIND_NO_BIAS)
        tp_op(&tp, "code: \"Linear\", name: \"fc\", kind: 1, inputs: [%d, %d], "
              "outputs: [%d, %d]", r, w, y1, y2);
    else if (variant == P_RESIDUAL_SPLIT)
        tp_op(&tp, "code: \"Linear\", name: \"fc\", kind: 3, inputs: [%d, %d, %d, %d], "
              "outputs: [%d, %d]", r, w, b, y1, y1, y2);
    else
        tp_op(&tp, "code: \"Linear\", name: \"fc\", kind: 1, inputs: [%d, %d, %d], "
              "outputs: [%d, %d]", r, w, b, y1, y2);
    tp_io(&tp, 0, x, "Generic", 0);
    tp_io(&tp, 1, y1, "Generic", 0);
    tp_io(&tp, 1, y2, "Generic", 0);
    return tp_finish(&tp, "rt_fused", size);
}

static void expect_defect(int variant, const char *needle, const char *what)
{
    size_t size;
    llmc_rt_plan plan;
    llmc_rt_error e = {LLMC_RT_OK, ""};
    uint8_t *bytes = build_plan(variant, &size);
    llmc_rt_status st = bytes ? llmc_rt_plan_open(&plan, bytes, size, 0, &e) : LLMC_RT_E_ARG;
    CHECK(st == LLMC_RT_E_CORRUPT && strstr(e.msg, needle), "%s: %s", what, e.msg);
    free(bytes);
}

static void test_plan(void)
{
    for (int i = 0; i < 48; i++)
        pw[i] = frand();
    for (int i = 0; i < 6; i++)
        pb[i] = frand();
    for (int i = 0; i < 8; i++)
        pscale[i] = frand();
    for (int i = 0; i < TP_CTX * 4; i++) {
        pcos[i] = cosf(0.3f * (float)i);
        psin[i] = sinf(0.3f * (float)i);
    }
    size_t size;
    uint8_t *bytes = build_plan(P_VALID, &size);
    llmc_rt_plan plan;
    llmc_rt_session s;
    CHECK(bytes && llmc_rt_plan_open(&plan, bytes, size, LLMC_RT_VERIFY_HASHES, &err) == 0,
          "plan with RMSNorm, Rope, split Linear opens: %s", err.msg);
    void *mem = malloc(llmc_rt_session_memory(&plan));
    enum { S = 3, P = 4 };
    float x[S * 8];
    for (int i = 0; i < S * 8; i++)
        x[i] = frand();
    llmc_rt_tensor in = {LLMC_RT_F32, 2, {S, 8}, x};
    bool ran = llmc_rt_session_init(&s, &plan, mem, llmc_rt_session_memory(&plan), &err) == 0 &&
               llmc_rt_session_run(&s, S, P, &in, &err) == 0;
    /* reference: each step in double */
    double n[S * 8], r[S * 8], want1[S * 4], want2[S * 2];
    for (int t = 0; t < S; t++) {
        double ss = 0.0;
        for (int j = 0; j < 8; j++)
            ss += (double)x[t * 8 + j] * x[t * 8 + j];
        for (int j = 0; j < 8; j++)
            n[t * 8 + j] = x[t * 8 + j] / sqrt(ss / 8 + 1e-5) * pscale[j];
        for (int j = 0; j < 8; j++) {
            double v = n[t * 8 + j];
            if (j < 4) {
                double rot = j < 2 ? -n[t * 8 + j + 2] : n[t * 8 + j - 2];
                v = v * pcos[(P + t) * 4 + j] + rot * psin[(P + t) * 4 + j];
            }
            r[t * 8 + j] = v;
        }
        for (int o = 0; o < 6; o++) {
            double z = pb[o];
            for (int k = 0; k < 8; k++)
                z += r[t * 8 + k] * pw[o * 8 + k];
            if (o < 4)
                want1[t * 4 + o] = z;
            else
                want2[t * 2 + o - 4] = z;
        }
    }
    llmc_rt_tensor o1, o2;
    ran = ran && llmc_rt_session_output(&s, 0, &o1, &err) == 0 &&
          llmc_rt_session_output(&s, 1, &o2, &err) == 0;
    CHECK(ran && max_rel_err(o1.data, want1, S * 4) <= 1e-5 &&
              max_rel_err(o2.data, want2, S * 2) <= 1e-5,
          "session: RMSNorm -> Rope at P=%d -> Linear split [4, 2] matches (%s)", P, err.msg);
    free(mem);
    free(bytes);

    expect_defect(P_W_SHAPE, "op 2 (Linear 'fc'): x must be [..., K] with K = 6",
                  "W [8, 6] against x [S, 8]");
    expect_defect(P_SPLIT_SUM, "output last dims sum to 7; W has N = 6 rows",
                  "split widths not adding up to N");
    expect_defect(P_KIND_NO_BIAS, "kind 1 (bit 0 bias, bit 1 residual, bit 2 quantize) does not match 2 inputs",
                  "bias bit without a bias input");
    expect_defect(P_BIAS_SHAPE, "bias must be [N] = [6]", "bias of the wrong length");
    expect_defect(P_RESIDUAL_SPLIT, "residual needs exactly one output",
                  "residual with a split output");
    expect_defect(P_ROPE_ROWS, "cos and sin must be [max_context 8, rotary_dim 4]",
                  "rope table rows != max_context");
    expect_defect(P_ROTARY_ODD, "rotary_dim 3 must be even", "odd rotary_dim");
    expect_defect(P_RMS_SCALE, "op 0 (RMSNorm 'norm'): scale must be [D]",
                  "RMSNorm scale of the wrong length");
}

/* ---- codegen: llmc nodes against plain ONNX ----------------------------- */

#define GS 3 /* S of the run */
#define GP 2 /* P of the run */
#define GCTX 8
#define SH3(d) SHAPE(K(1), SYM_S, K(d))

static float g_scale[8], g_wqk[8 * 12], g_bqk[12], g_wo[8 * 4], g_cos[GCTX * 4], g_sin[GCTX * 4];

/* A float value with a known shape. */
static int fval(llmc_graph *g, const char *name, llmc_shape s)
{
    int v = llmc_graph_add_value(g, name, LLMC_DT_FLOAT);
    g->values[v].shape = s;
    return v;
}

/* A one-output ONNX node whose output is float with shape s. */
static int fnode(llmc_graph *g, const char *op, const char *out, llmc_shape s, int n_in,
                 const int *ins)
{
    int v = fval(g, out, s);
    llmc_graph_add_node(g, op, out, ins, n_in, &v, 1);
    return v;
}
#define FN(g, op, out, s, ...) fnode((g), (op), (out), (s), \
    (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__})

static int fconst(llmc_graph *g, const char *name, float value)
{
    return g_const(g, name, LLMC_DT_FLOAT, SCALAR, &value);
}

/* A one-output llmc node. */
static int lnode(llmc_graph *g, const char *op, const char *out, llmc_shape s, int n_in,
                 const int *ins, int *node)
{
    int v = fval(g, out, s);
    *node = llmc_graph_add_llmc_node(g, op, out, ins, n_in, &v, 1);
    return v;
}

typedef struct {
    int x, scale, wqk, bqk, wo, cos, sin;
} g_common;

static g_common common_inputs(llmc_graph *g)
{
    g_common c;
    c.x = g_input(g, "x", LLMC_DT_FLOAT, SH3(8));
    c.scale = g_const(g, "scale", LLMC_DT_FLOAT, SHAPE(K(8)), g_scale);
    c.wqk = g_const(g, "wqk", LLMC_DT_FLOAT, SHAPE(K(8), K(12)), g_wqk);
    c.bqk = g_const(g, "bqk", LLMC_DT_FLOAT, SHAPE(K(12)), g_bqk);
    c.wo = g_const(g, "wo", LLMC_DT_FLOAT, SHAPE(K(8), K(4)), g_wo);
    c.cos = g_const(g, "cos", LLMC_DT_FLOAT, SHAPE(K(GCTX), K(4)), g_cos);
    c.sin = g_const(g, "sin", LLMC_DT_FLOAT, SHAPE(K(GCTX), K(4)), g_sin);
    return c;
}

/* RMSNorm -> Linear (q [8] | k [4], bias) -> Rope(q, rotary 4 of 8) -> Gelu,
 * GeluTanh -> SwiGLU; Silu(k); Linear(swiglu, wo) + residual silu(k).
 * Outputs: o, the tanh-GELU and the Rope output. */
static void build_fused(llmc_graph *g)
{
    int nd;
    g_common c = common_inputs(g);
    int h = lnode(g, "RMSNorm", "h", SH3(8), 2, (int[]){c.x, c.scale}, &nd);
    llmc_node_set_float(g, nd, "epsilon", 1e-5f);
    int q = fval(g, "q", SH3(8)), k = fval(g, "k", SH3(4));
    llmc_graph_add_llmc_node(g, "Linear", "qk", (int[]){h, c.wqk, c.bqk}, 3, (int[]){q, k}, 2);
    int qr = lnode(g, "Rope", "qr", SH3(8), 3, (int[]){q, c.cos, c.sin}, &nd);
    llmc_node_set_int(g, nd, "rotary_dim", 4);
    int a = lnode(g, "Gelu", "a", SH3(8), 1, (int[]){qr}, &nd);
    int b = lnode(g, "Gelu", "b", SH3(8), 1, (int[]){qr}, &nd);
    llmc_node_set_int(g, nd, "tanh", 1);
    int sw = lnode(g, "SwiGLU", "sw", SH3(8), 2, (int[]){a, b}, &nd);
    int si = lnode(g, "Silu", "si", SH3(4), 1, (int[]){k}, &nd);
    int o = fval(g, "o", SH3(4));
    llmc_graph_add_llmc_node(g, "Linear", "out", (int[]){sw, c.wo, -1, si}, 4, (int[]){o}, 1);
    g_output(g, o);
    g_output(g, b);
    g_output(g, qr);
}

/* Symbolic int64 [1] value c + s*S + p*P, made by an llmc.Symbols node. */
static int sym_value(llmc_graph *g, const char *name, int64_t c0, int64_t s, int64_t p)
{
    int v = llmc_graph_add_value(g, name, LLMC_DT_INT64);
    g->values[v].shape = SHAPE(K(1));
    g->values[v].n_sym = 1;
    g->values[v].sym[0] = AFF(c0, s, p);
    int nd = llmc_graph_add_llmc_node(g, "Symbols", name, NULL, 0, &v, 1);
    llmc_node_set_ints(g, nd, "values", (int64_t[]){c0, s, p}, 3);
    return v;
}

/* Slice of the last axis [from, to) of a [1, S, d] value. */
static int slice_last(llmc_graph *g, const char *name, int v, int from, int to)
{
    char sn[64], en[64], an[64];
    snprintf(sn, sizeof sn, "%s/starts", name);
    snprintf(en, sizeof en, "%s/ends", name);
    snprintf(an, sizeof an, "%s/axes", name);
    return FN(g, "Slice", name, SH3(to - from), v, CI64(g, sn, from), CI64(g, en, to),
              CI64(g, an, 2));
}

static void build_plain(llmc_graph *g)
{
    g_common c = common_inputs(g);
    /* RMSNorm */
    int xx = FN(g, "Mul", "xx", SH3(8), c.x, c.x);
    int ms = fval(g, "ms", SH3(1));
    int rm = llmc_graph_add_node(g, "ReduceMean", "ms", (int[]){xx}, 1, &ms, 1);
    ATTR_INTS(g, rm, "axes", -1);
    int den = FN(g, "Sqrt", "den", SH3(1), FN(g, "Add", "mse", SH3(1), ms, fconst(g, "eps", 1e-5f)));
    int h = FN(g, "Mul", "h", SH3(8), FN(g, "Div", "hn", SH3(8), c.x, den), c.scale);
    /* Linear + split */
    int z = FN(g, "Add", "z", SH3(12), FN(g, "MatMul", "zm", SH3(12), h, c.wqk), c.bqk);
    int q = slice_last(g, "q", z, 0, 8), k = slice_last(g, "k", z, 8, 12);
    /* Rope at positions P .. P+S-1, rotary 4 of 8 */
    int from = sym_value(g, "pos_from", 0, 0, 1), to = sym_value(g, "pos_to", 0, 1, 1);
    int cs = FN(g, "Slice", "cs", SHAPE(SYM_S, K(4)), c.cos, from, to, CI64(g, "cs/axes", 0));
    int sn = FN(g, "Slice", "sn", SHAPE(SYM_S, K(4)), c.sin, from, to, CI64(g, "sn/axes", 0));
    int q1 = slice_last(g, "q1", q, 0, 2), q2 = slice_last(g, "q2", q, 2, 4);
    int qrot = slice_last(g, "qrot", q, 0, 4), qpass = slice_last(g, "qpass", q, 4, 8);
    int rot = fval(g, "rot", SH3(4));
    int cat = llmc_graph_add_node(g, "Concat", "rot",
                                  (int[]){FN(g, "Neg", "nq2", SH3(2), q2), q1}, 2, &rot, 1);
    attr_int(g, cat, "axis", 2);
    int t = FN(g, "Add", "t", SH3(4), FN(g, "Mul", "tc", SH3(4), qrot, cs),
               FN(g, "Mul", "ts", SH3(4), rot, sn));
    int qr = fval(g, "qr", SH3(8));
    cat = llmc_graph_add_node(g, "Concat", "qr", (int[]){t, qpass}, 2, &qr, 1);
    attr_int(g, cat, "axis", 2);
    /* Gelu (erf) and Gelu (tanh) */
    int half = fconst(g, "half", 0.5f), one = fconst(g, "one", 1.0f);
    int erf = FN(g, "Erf", "erf", SH3(8), FN(g, "Div", "xs2", SH3(8), qr, fconst(g, "sqrt2", sqrtf(2.0f))));
    int a = FN(g, "Mul", "a", SH3(8), FN(g, "Mul", "ah", SH3(8), qr, half),
               FN(g, "Add", "a1", SH3(8), erf, one));
    int cube = FN(g, "Mul", "cube", SH3(8), FN(g, "Mul", "sq", SH3(8), qr, qr), qr);
    int inner = FN(g, "Add", "inner", SH3(8), qr,
                   FN(g, "Mul", "c3", SH3(8), cube, fconst(g, "c044", 0.044715f)));
    int th = FN(g, "Tanh", "th", SH3(8),
                FN(g, "Mul", "ti", SH3(8), inner, fconst(g, "k2pi", 0.7978845608f)));
    int b = FN(g, "Mul", "b", SH3(8), FN(g, "Mul", "bh", SH3(8), qr, half),
               FN(g, "Add", "b1", SH3(8), th, one));
    /* SwiGLU, Silu, Linear + residual */
    int sw = FN(g, "Mul", "sw", SH3(8),
                FN(g, "Mul", "silu_a", SH3(8), a, FN(g, "Sigmoid", "sga", SH3(8), a)), b);
    int si = FN(g, "Mul", "si", SH3(4), k, FN(g, "Sigmoid", "sgk", SH3(4), k));
    int o = FN(g, "Add", "o", SH3(4), FN(g, "MatMul", "om", SH3(4), sw, c.wo), si);
    g_output(g, o);
    g_output(g, b);
    g_output(g, qr);
}

static int count_code(const llmc_codegen_stats *st, int code)
{
    return (int)st->op_counts[code];
}

static void test_codegen(void)
{
    for (int i = 0; i < 8; i++)
        g_scale[i] = 1.0f + 0.5f * frand();
    for (int i = 0; i < 96; i++)
        g_wqk[i] = frand();
    for (int i = 0; i < 12; i++)
        g_bqk[i] = frand();
    for (int i = 0; i < 32; i++)
        g_wo[i] = frand();
    for (int i = 0; i < GCTX * 4; i++) {
        g_cos[i] = cosf(0.7f * (float)i);
        g_sin[i] = sinf(0.7f * (float)i);
    }
    llmc_graph fused, plain;
    llmc_graph_init(&fused);
    llmc_graph_init(&plain);
    build_fused(&fused);
    build_plain(&plain);

    llmc_codegen_options opt = {.max_context = GCTX};
    llmc_codegen_stats st;
    llmc_error e = {0};
    uint8_t *bytes = NULL;
    size_t size = 0;
    int rc = llmc_codegen_to_memory(&fused, &opt, &bytes, &size, &st, &e);
    CHECK(rc == 0 && count_code(&st, 14) == 2 && count_code(&st, 15) == 1 &&
              count_code(&st, 16) == 1 && count_code(&st, 2) == 3 && count_code(&st, 3) == 1 &&
              st.n_ops == 8,
          "llmc nodes lower to 2 Linear, RMSNorm, Rope, 3 Unary, 1 Binary (%u ops): %s",
          st.n_ops, e.msg);
    llmc_rt_plan plan;
    CHECK(rc == 0 && llmc_rt_plan_open(&plan, bytes, size, LLMC_RT_VERIFY_HASHES, &err) == 0,
          "the fused plan passes the verifier: %s", err.msg);
    free(bytes);

    float x[GS * 8];
    for (int i = 0; i < GS * 8; i++)
        x[i] = 2.0f * frand();
    llmc_rt_tensor in = {LLMC_RT_F32, 3, {1, GS, 8}, x};
    llmc_eval_tensor of[3], op[3];
    memset(of, 0, sizeof of);
    memset(op, 0, sizeof op);
    int rf = llmc_evaluate_graph(&fused, GS, GP, GCTX, &in, of, &e);
    CHECK(rf == 0, "fused graph runs at S=%d P=%d: %s", GS, GP, e.msg);
    int rp = llmc_evaluate_graph(&plain, GS, GP, GCTX, &in, op, &e);
    CHECK(rp == 0, "plain ONNX graph runs: %s", e.msg);
    static const char *const names[] = {"o (Linear + residual)", "b (GeluTanh)", "qr (Rope)"};
    for (int j = 0; j < 3 && rf == 0 && rp == 0; j++) {
        int n = (int)(of[j].nbytes / 4);
        double *want = malloc(sizeof *want * (size_t)n), scale = 1.0;
        for (int i = 0; i < n; i++) {
            want[i] = ((const float *)op[j].data)[i];
            scale = fmax(scale, fabs(want[i]));
        }
        double e_rel = max_rel_err(of[j].data, want, n) / scale;
        CHECK(of[j].nbytes == op[j].nbytes && n == GS * (j ? 8 : 4) && e_rel <= 1e-5,
              "fused %s equals the plain ONNX graph: max err %.2g relative", names[j], e_rel);
        free(want);
    }
    for (int j = 0; j < 3; j++) {
        llmc_eval_tensor_free(&of[j]);
        llmc_eval_tensor_free(&op[j]);
    }
    llmc_graph_free(&fused);
    llmc_graph_free(&plain);
}

/* Codegen rejects a Linear whose outputs do not add up to N. */
static void test_codegen_errors(void)
{
    llmc_graph g;
    llmc_graph_init(&g);
    g_common c = common_inputs(&g);
    int q = fval(&g, "q", SH3(8)), k = fval(&g, "k", SH3(3));
    llmc_graph_add_llmc_node(&g, "Linear", "qk", (int[]){c.x, c.wqk}, 2, (int[]){q, k}, 2);
    g_output(&g, q);
    llmc_codegen_options opt = {.max_context = GCTX};
    llmc_error e = {0};
    uint8_t *bytes = NULL;
    size_t size;
    int rc = llmc_codegen_to_memory(&g, &opt, &bytes, &size, NULL, &e);
    CHECK(rc == LLMC_E_UNSUPPORTED && strstr(e.msg, "output last dims add up to 11; W has N = 12"),
          "Linear split not adding up to N: %s", e.msg);
    free(bytes);
    llmc_graph_free(&g);

    llmc_graph_init(&g);
    memset(&e, 0, sizeof e);
    c = common_inputs(&g);
    int nd, y = lnode(&g, "Rope", "y", SH3(8), 3, (int[]){c.x, c.cos, c.sin}, &nd);
    llmc_node_set_int(&g, nd, "rotary_dim", 5);
    g_output(&g, y);
    rc = llmc_codegen_to_memory(&g, &opt, &bytes, &size, NULL, &e);
    CHECK(rc == LLMC_E_UNSUPPORTED && strstr(e.msg, "rotary_dim 5 must be even"),
          "Rope with an odd rotary_dim: %s", e.msg);
    free(bytes);
    llmc_graph_free(&g);
}

int main(void)
{
    srand(7);
    test_linear();
    test_rmsnorm();
    test_rmsnorm_rows();
    test_rope();
    test_activations();
    test_plan();
    test_codegen();
    test_codegen_errors();
    return TAP_DONE();
}
