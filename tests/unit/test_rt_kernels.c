/* Reference kernels against hand-computed values and plain loops. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "tap.h"

static llmc_rt_error err;

static rt_view view(int dtype, void *data, int rank, const int64_t *dims)
{
    rt_view v = {dtype, rank, {0}, data};
    for (int i = 0; i < rank; i++)
        v.dims[i] = dims[i];
    return v;
}
#define V(dtype, data, ...) view(dtype, data, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8), \
                                 (int64_t[]){__VA_ARGS__})
#define SCALAR(dtype, data) view(dtype, data, 0, NULL)

static float frand(void)
{
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static bool close_rel(double got, double want, double tol)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

static bool all_close(const float *got, const double *want, int n, double tol)
{
    for (int i = 0; i < n; i++)
        if (!close_rel(got[i], want[i], tol))
            return false;
    return true;
}

/* ---- elementwise -------------------------------------------------------- */

static double unary_ref(int kind, double x)
{
    switch (kind) {
    case 0: return x;
    case 1: return -x;
    case 2: return fabs(x);
    case 3: return sqrt(x);
    case 4: return exp(x);
    case 5: return log(x);
    case 6: return erf(x);
    case 7: return tanh(x);
    case 8: return 1.0 / (1.0 + exp(-x));
    case 9: return 1.0 / x;
    case 10: return x > 0 ? x : 0;
    case 11: return sin(x);
    case 12: return cos(x);
    case 14: return floor(x);
    default: return ceil(x);
    }
}

static void test_unary(void)
{
    float x[64], y[64];
    double want[64];
    for (int i = 0; i < 64; i++)
        x[i] = (i - 32) * 0.173f + (i % 2 ? 0.013f : 0.0f);
    for (int kind = 0; kind <= 15; kind++) {
        if (kind == 13)
            continue;
        float xx[64];
        for (int i = 0; i < 64; i++) /* positive inputs for Sqrt and Log */
            xx[i] = kind == 3 || kind == 5 ? fabsf(x[i]) + 0.01f : x[i];
        for (int i = 0; i < 64; i++)
            want[i] = unary_ref(kind, xx[i]);
        rt_view vx = V(LLMC_RT_F32, xx, 4, 16), vy = V(LLMC_RT_F32, y, 4, 16);
        CHECK(k_unary(llmc_rt_all_ops.unary[kind], kind, &vx, &vy, &err) == LLMC_RT_OK && all_close(y, want, 64, 2e-6),
              "unary kind %d on float32 matches libm in double", kind);
    }
    int64_t xi[4] = {-5, 0, 7, INT64_MIN}, yi[4];
    rt_view vi = V(LLMC_RT_I64, xi, 4), vo = V(LLMC_RT_I64, yi, 4);
    CHECK(k_unary(llmc_rt_all_ops.unary[2], 2, &vi, &vo, &err) == LLMC_RT_OK && yi[0] == 5 && yi[2] == 7 &&
          yi[3] == INT64_MIN, "Abs on int64 (INT64_MIN wraps)");
    CHECK(k_unary(llmc_rt_all_ops.unary[10], 10, &vi, &vo, &err) == LLMC_RT_OK && yi[0] == 0 && yi[2] == 7, "Relu on int64");
    uint8_t b[3] = {0, 1, 0}, nb[3];
    rt_view vb = V(LLMC_RT_BOOL, b, 3), vnb = V(LLMC_RT_BOOL, nb, 3);
    CHECK(k_unary(llmc_rt_all_ops.unary[13], 13, &vb, &vnb, &err) == LLMC_RT_OK && nb[0] == 1 && nb[1] == 0, "Not on bool");
    CHECK(k_unary(llmc_rt_all_ops.unary[3], 3, &vi, &vo, &err) == LLMC_RT_E_EXEC, "Sqrt on int64 refused");
}

/* k_binary with every Binary loop (llmc_rt_all_ops' entries). */
static llmc_rt_status binary_all(int kind, const rt_view *a, const rt_view *b, rt_view *y,
                                 llmc_rt_error *err)
{
    k_binary_loops loops = {llmc_rt_all_ops.binary[kind], llmc_rt_all_ops.binary_any_dtype};
    return k_binary(kind, &loops, a, b, y, err);
}

static void test_binary(void)
{
    float a[6], b[3], y[6];
    double want[6];
    for (int i = 0; i < 6; i++)
        a[i] = frand();
    for (int i = 0; i < 3; i++)
        b[i] = frand() + 2;
    rt_view va = V(LLMC_RT_F32, a, 2, 3), vb = V(LLMC_RT_F32, b, 3), vy = V(LLMC_RT_F32, y, 2, 3);
    const char *names[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"};
    for (int kind = 0; kind <= 6; kind++) {
        for (int i = 0; i < 6; i++) {
            double p = a[i], q = b[i % 3];
            double r[] = {p + q, p - q, p * q, p / q, pow(fabs(p), q), fmax(p, q), fmin(p, q)};
            want[i] = r[kind];
        }
        float aa[6];
        for (int i = 0; i < 6; i++)
            aa[i] = kind == 4 ? fabsf(a[i]) : a[i];
        va.data = aa;
        CHECK(binary_all(kind, &va, &vb, &vy, &err) == LLMC_RT_OK && all_close(y, want, 6, 1e-6),
              "%s [2,3] op [3] broadcasts", names[kind]);
    }
    /* [2,1] * [1,3] -> [2,3] */
    float c[2] = {2, 3}, d[3] = {1, 10, 100};
    rt_view vc = V(LLMC_RT_F32, c, 2, 1), vd = V(LLMC_RT_F32, d, 1, 3);
    CHECK(binary_all(2, &vc, &vd, &vy, &err) == LLMC_RT_OK && y[0] == 2 && y[2] == 200 &&
          y[3] == 3 && y[5] == 300, "[2,1] * [1,3] outer product");
    rt_view wrong = V(LLMC_RT_F32, y, 3, 2);
    CHECK(binary_all(0, &vc, &vd, &wrong, &err) == LLMC_RT_E_EXEC, "bad output dims: %s", err.msg);
    float n1 = NAN, one = 1, out1;
    rt_view vn = SCALAR(LLMC_RT_F32, &n1), v1 = SCALAR(LLMC_RT_F32, &one),
            vo = SCALAR(LLMC_RT_F32, &out1);
    CHECK(binary_all(5, &v1, &vn, &vo, &err) == LLMC_RT_OK && isnan(out1), "Max propagates NaN");

    int64_t ia[4] = {-7, 7, -7, INT64_MAX}, ib[4] = {2, -2, -2, 1}, iy[4];
    rt_view via = V(LLMC_RT_I64, ia, 4), vib = V(LLMC_RT_I64, ib, 4), viy = V(LLMC_RT_I64, iy, 4);
    CHECK(binary_all(3, &via, &vib, &viy, &err) == LLMC_RT_OK && iy[0] == -3 && iy[1] == -3 &&
          iy[2] == 3 && iy[3] == INT64_MAX, "int64 Div truncates toward zero");
    int64_t ka[4] = {INT64_MIN, INT64_MIN, INT64_MIN, -9}, kb[4] = {-1, 1, 2, 4}, ky[4];
    rt_view vka = V(LLMC_RT_I64, ka, 4), vkb = V(LLMC_RT_I64, kb, 4), vky = V(LLMC_RT_I64, ky, 4);
    CHECK(binary_all(3, &vka, &vkb, &vky, &err) == LLMC_RT_OK && ky[0] == INT64_MIN &&
          ky[1] == INT64_MIN && ky[2] == INT64_MIN / 2 && ky[3] == -2,
          "int64 Div of INT64_MIN (by -1 it wraps) and of a negative by a positive");
    CHECK(binary_all(0, &via, &vib, &viy, &err) == LLMC_RT_OK && iy[3] == INT64_MIN,
          "int64 Add wraps");
    ib[1] = 0;
    CHECK(binary_all(3, &via, &vib, &viy, &err) == LLMC_RT_E_EXEC, "int Div by zero: %s", err.msg);
    int32_t ja[3] = {5, -5, 9}, jb[1] = {3}, jy[3];
    rt_view vja = V(LLMC_RT_I32, ja, 3), vjb = V(LLMC_RT_I32, jb, 1), vjy = V(LLMC_RT_I32, jy, 3);
    CHECK(binary_all(3, &vja, &vjb, &vjy, &err) == LLMC_RT_OK && jy[0] == 1 && jy[1] == -1 &&
          jy[2] == 3, "int32 Div");
    uint8_t cmp[6];
    rt_view vcmp = V(LLMC_RT_BOOL, cmp, 2, 3);
    float l[6] = {1, 2, 3, 4, 5, 6}, r[3] = {2, 2, 7};
    rt_view vl = V(LLMC_RT_F32, l, 2, 3), vr = V(LLMC_RT_F32, r, 3);
    CHECK(binary_all(8, &vl, &vr, &vcmp, &err) == LLMC_RT_OK && cmp[0] == 1 && cmp[1] == 0 &&
          cmp[2] == 1 && cmp[3] == 0 && cmp[5] == 1, "Less gives bool");
    CHECK(binary_all(11, &vl, &vr, &vcmp, &err) == LLMC_RT_OK && cmp[0] == 0 && cmp[1] == 1,
          "GreaterOrEqual gives bool");
    uint8_t p[4] = {0, 0, 1, 1}, q[4] = {0, 1, 0, 1}, o[4];
    rt_view vp = V(LLMC_RT_BOOL, p, 4), vq = V(LLMC_RT_BOOL, q, 4), vo4 = V(LLMC_RT_BOOL, o, 4);
    binary_all(12, &vp, &vq, &vo4, &err);
    bool and_ok = !o[0] && !o[1] && !o[2] && o[3];
    binary_all(13, &vp, &vq, &vo4, &err);
    bool or_ok = !o[0] && o[1] && o[2] && o[3];
    binary_all(14, &vp, &vq, &vo4, &err);
    CHECK(and_ok && or_ok && !o[0] && o[1] && o[2] && !o[3], "And, Or, Xor truth tables");
    float base[2] = {2, -3};
    int64_t ex[2] = {3, 2};
    float pw[2];
    rt_view vbase = V(LLMC_RT_F32, base, 2), vex = V(LLMC_RT_I64, ex, 2), vpw = V(LLMC_RT_F32, pw, 2);
    CHECK(binary_all(4, &vbase, &vex, &vpw, &err) == LLMC_RT_OK && pw[0] == 8 && pw[1] == 9,
          "Pow float32 ^ int64");
    CHECK(!k_binary_supports(0, LLMC_RT_F32, LLMC_RT_I64, LLMC_RT_F32) &&
          !k_binary_supports(12, LLMC_RT_F32, LLMC_RT_F32, LLMC_RT_BOOL), "unsupported combos");
}

static void test_where_cast(void)
{
    uint8_t cond[3] = {1, 0, 1};
    float x[2] = {10, 20}, yv = -1, out[6];
    rt_view vc = V(LLMC_RT_BOOL, cond, 3), vx = V(LLMC_RT_F32, x, 2, 1),
            vy = SCALAR(LLMC_RT_F32, &yv), vo = V(LLMC_RT_F32, out, 2, 3);
    CHECK(k_where(&vc, &vx, &vy, &vo, &err) == LLMC_RT_OK && out[0] == 10 && out[1] == -1 &&
          out[2] == 10 && out[3] == 20 && out[4] == -1, "Where broadcasts [3], [2,1], []");
    float f[6] = {-2.7f, 2.7f, 0, NAN, 1e30f, -0.5f};
    int64_t i64[6];
    rt_view vf = V(LLMC_RT_F32, f, 6), vi = V(LLMC_RT_I64, i64, 6);
    CHECK(k_cast(&vf, &vi, &err) == LLMC_RT_OK && i64[0] == -2 && i64[1] == 2 && i64[3] == 0 &&
          i64[4] == INT64_MAX && i64[5] == 0, "float -> int64 truncates, saturates, NaN -> 0");
    uint8_t bo[6];
    rt_view vbo = V(LLMC_RT_BOOL, bo, 6);
    CHECK(k_cast(&vf, &vbo, &err) == LLMC_RT_OK && bo[0] == 1 && bo[2] == 0 && bo[3] == 1,
          "float -> bool");
    int64_t big[2] = {(1ll << 32) + 5, -1};
    int32_t small[2];
    rt_view vbig = V(LLMC_RT_I64, big, 2), vsmall = V(LLMC_RT_I32, small, 2);
    CHECK(k_cast(&vbig, &vsmall, &err) == LLMC_RT_OK && small[0] == 5 && small[1] == -1,
          "int64 -> int32 wraps");
    uint8_t u[2];
    int8_t s8[2];
    rt_view vu = V(LLMC_RT_U8, u, 2), vs8 = V(LLMC_RT_I8, s8, 2);
    big[0] = 300;
    CHECK(k_cast(&vbig, &vu, &err) == LLMC_RT_OK && u[0] == 44 && u[1] == 255 &&
          k_cast(&vbig, &vs8, &err) == LLMC_RT_OK && s8[0] == 44 && s8[1] == -1,
          "int64 -> uint8 / int8 wrap");
    float back[2];
    rt_view vback = V(LLMC_RT_F32, back, 2);
    CHECK(k_cast(&vs8, &vback, &err) == LLMC_RT_OK && back[0] == 44 && back[1] == -1,
          "int8 -> float");
}

/* ---- matmul ------------------------------------------------------------- */

/* Naive numpy matmul on dims given in full (no 1-D handling here): a is
 * [Ba..., M, K], b [Bb..., K, N] with batch broadcasting over `nb` axes. */
static void naive_batched(const float *a, const float *b, double *y, int nb,
                          const int64_t *ba, const int64_t *bb, const int64_t *by,
                          int M, int K, int N)
{
    int64_t batches = 1;
    for (int i = 0; i < nb; i++)
        batches *= by[i];
    for (int64_t t = 0; t < batches; t++) {
        int64_t rest = t, ia = 0, ib = 0, sa = 1, sb = 1;
        for (int i = nb - 1; i >= 0; i--) {
            int64_t idx = rest % by[i];
            rest /= by[i];
            ia += (ba[i] == 1 ? 0 : idx) * sa;
            ib += (bb[i] == 1 ? 0 : idx) * sb;
            sa *= ba[i];
            sb *= bb[i];
        }
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double acc = 0;
                for (int k = 0; k < K; k++)
                    acc += (double)a[ia * M * K + m * K + k] * b[ib * K * N + k * N + n];
                y[t * M * N + m * N + n] = acc;
            }
    }
}

static void test_matmul(void)
{
    static float a[4096], b[4096], y[4096];
    static double want[4096];
    for (int i = 0; i < 4096; i++) {
        a[i] = frand();
        b[i] = frand();
    }
    int ok = 1;
    for (int trial = 0; trial < 40; trial++) {
        int M = 1 + rand() % 7, K = 1 + rand() % 9, N = 1 + rand() % 8;
        int64_t ba[2] = {1 + rand() % 2, 1 + rand() % 3}, bb[2], by[2];
        for (int i = 0; i < 2; i++) {
            bb[i] = rand() % 2 ? ba[i] : 1;
            if (rand() % 2) { /* broadcast a instead */
                bb[i] = ba[i];
                ba[i] = 1;
            }
            by[i] = ba[i] > bb[i] ? ba[i] : bb[i];
        }
        rt_view va = V(LLMC_RT_F32, a, ba[0], ba[1], M, K), vb = V(LLMC_RT_F32, b, bb[0], bb[1], K, N),
                vy = V(LLMC_RT_F32, y, by[0], by[1], M, N);
        naive_batched(a, b, want, 2, ba, bb, by, M, K, N);
        if (k_matmul(&va, &vb, &vy, NULL, &err) != LLMC_RT_OK ||
            !all_close(y, want, (int)(by[0] * by[1] * M * N), 1e-5)) {
            ok = 0;
            CHECK(0, "matmul trial %d: %s", trial, err.msg);
        }
    }
    CHECK(ok, "40 random batched matmuls with broadcasting match a naive loop");
    /* rank-3 times rank-2: batch only on the left */
    rt_view va = V(LLMC_RT_F32, a, 3, 4, 5), vb = V(LLMC_RT_F32, b, 5, 6), vy = V(LLMC_RT_F32, y, 3, 4, 6);
    int64_t one = 1, three = 3;
    naive_batched(a, b, want, 1, &three, &one, &three, 4, 5, 6);
    CHECK(k_matmul(&va, &vb, &vy, NULL, &err) == LLMC_RT_OK && all_close(y, want, 72, 1e-5),
          "[3,4,5] x [5,6]");
    /* 1-D operands */
    va = V(LLMC_RT_F32, a, 5);
    vb = V(LLMC_RT_F32, b, 2, 5, 3);
    vy = V(LLMC_RT_F32, y, 2, 3);
    int64_t two = 2;
    naive_batched(a, b, want, 1, &one, &two, &two, 1, 5, 3);
    CHECK(k_matmul(&va, &vb, &vy, NULL, &err) == LLMC_RT_OK && all_close(y, want, 6, 1e-5),
          "[5] x [2,5,3] -> [2,3]");
    va = V(LLMC_RT_F32, a, 4, 5);
    vb = V(LLMC_RT_F32, b, 5);
    vy = V(LLMC_RT_F32, y, 4);
    naive_batched(a, b, want, 0, NULL, NULL, NULL, 4, 5, 1);
    CHECK(k_matmul(&va, &vb, &vy, NULL, &err) == LLMC_RT_OK && all_close(y, want, 4, 1e-5),
          "[4,5] x [5] -> [4]");
    va = V(LLMC_RT_F32, a, 5);
    vy = SCALAR(LLMC_RT_F32, y);
    naive_batched(a, b, want, 0, NULL, NULL, NULL, 1, 5, 1);
    CHECK(k_matmul(&va, &vb, &vy, NULL, &err) == LLMC_RT_OK && close_rel(y[0], want[0], 1e-5),
          "[5] x [5] -> []");
    va = V(LLMC_RT_F32, a, 4, 5);
    vb = V(LLMC_RT_F32, b, 4, 3);
    vy = V(LLMC_RT_F32, y, 4, 3);
    CHECK(k_matmul(&va, &vb, &vy, NULL, &err) == LLMC_RT_E_EXEC, "K mismatch: %s", err.msg);
    va = V(LLMC_RT_F32, a, 2, 4, 5);
    vb = V(LLMC_RT_F32, b, 3, 5, 3);
    vy = V(LLMC_RT_F32, y, 3, 4, 3);
    CHECK(k_matmul(&va, &vb, &vy, NULL, &err) == LLMC_RT_E_EXEC, "batch 2 vs 3 refused");
}

/* ---- reduce, softmax, layernorm ---------------------------------------- */

static void test_reduce(void)
{
    float x[24], y[24];
    double want[24];
    for (int i = 0; i < 24; i++)
        x[i] = frand() * 4;
    rt_view vx = V(LLMC_RT_F32, x, 2, 3, 4), vy = V(LLMC_RT_F32, y, 2, 1, 4);
    int ax1[1] = {1};
    const char *names[] = {"Mean", "Sum", "Max", "Min", "Prod"};
    for (int kind = 0; kind < 5; kind++) {
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++) {
                double acc = kind == 4 ? 1 : kind == 2 ? -INFINITY : kind == 3 ? INFINITY : 0;
                for (int j = 0; j < 3; j++) {
                    double v = x[i * 12 + j * 4 + k];
                    acc = kind == 4 ? acc * v : kind == 2 ? fmax(acc, v)
                        : kind == 3 ? fmin(acc, v) : acc + v;
                }
                want[i * 4 + k] = kind == 0 ? acc / 3 : acc;
            }
        CHECK(k_reduce(kind, &vx, ax1, 1, true, &vy, &err) == LLMC_RT_OK &&
              all_close(y, want, 8, 1e-6), "Reduce%s over axis 1 of [2,3,4], keepdims", names[kind]);
    }
    int ax02[2] = {0, 2};
    vy = V(LLMC_RT_F32, y, 3);
    for (int j = 0; j < 3; j++) {
        want[j] = 0;
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++)
                want[j] += x[i * 12 + j * 4 + k] / 8.0;
    }
    CHECK(k_reduce(0, &vx, ax02, 2, false, &vy, &err) == LLMC_RT_OK && all_close(y, want, 3, 1e-6),
          "ReduceMean over axes [0, 2] without keepdims");
    vy = V(LLMC_RT_F32, y, 2, 3);
    CHECK(k_reduce(0, &vx, ax02, 2, false, &vy, &err) == LLMC_RT_E_EXEC, "wrong output dims: %s",
          err.msg);
    int64_t xi[6] = {1, 2, 3, 4, 5, 6}, yi[2];
    rt_view vxi = V(LLMC_RT_I64, xi, 2, 3), vyi = V(LLMC_RT_I64, yi, 2);
    CHECK(k_reduce(1, &vxi, ax1, 1, false, &vyi, &err) == LLMC_RT_OK && yi[0] == 6 && yi[1] == 15,
          "int64 ReduceSum");
    CHECK(k_reduce(4, &vxi, ax1, 1, false, &vyi, &err) == LLMC_RT_OK && yi[0] == 6 && yi[1] == 120,
          "int64 ReduceProd");
    vyi = SCALAR(LLMC_RT_I64, yi);
    CHECK(k_reduce(2, &vxi, NULL, 0, false, &vyi, &err) == LLMC_RT_OK && yi[0] == 6,
          "no axes reduces everything");
}

static void test_softmax(void)
{
    float x[24], y[24];
    double want[24];
    for (int i = 0; i < 24; i++)
        x[i] = frand() * 30; /* large values: max subtraction matters */
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) {
            double max = -INFINITY, sum = 0;
            for (int j = 0; j < 3; j++)
                max = fmax(max, x[i * 12 + j * 4 + k]);
            for (int j = 0; j < 3; j++)
                sum += exp(x[i * 12 + j * 4 + k] - max);
            for (int j = 0; j < 3; j++)
                want[i * 12 + j * 4 + k] = exp(x[i * 12 + j * 4 + k] - max) / sum;
        }
    rt_view vx = V(LLMC_RT_F32, x, 2, 3, 4), vy = V(LLMC_RT_F32, y, 2, 3, 4);
    CHECK(k_softmax(&vx, 1, &vy, &err) == LLMC_RT_OK && all_close(y, want, 24, 1e-6),
          "Softmax over the middle axis");
    float big[2] = {1000, 1000}, out[2];
    rt_view vb = V(LLMC_RT_F32, big, 2), vo = V(LLMC_RT_F32, out, 2);
    CHECK(k_softmax(&vb, 0, &vo, &err) == LLMC_RT_OK && out[0] == 0.5f, "no overflow at 1000");
    CHECK(k_softmax(&vx, 3, &vy, &err) == LLMC_RT_E_EXEC, "axis outside rank");
}

static void layernorm_ref(const float *x, int outer, int n, const float *scale,
                          const int *scale_idx, const float *bias, double eps, double *y)
{
    for (int o = 0; o < outer; o++) {
        double mean = 0, var = 0;
        for (int j = 0; j < n; j++)
            mean += x[o * n + j];
        mean /= n;
        for (int j = 0; j < n; j++)
            var += (x[o * n + j] - mean) * (x[o * n + j] - mean);
        var /= n;
        for (int j = 0; j < n; j++)
            y[o * n + j] = (x[o * n + j] - mean) / sqrt(var + eps) * scale[scale_idx[j]] +
                           (bias ? bias[j % 4] : 0);
    }
}

static void test_layernorm(void)
{
    float x[24], y[24], scale[12], bias[4];
    double want[24];
    int idx[12];
    const rt_layernorm_stats no_stats = {NULL, NULL};
    for (int i = 0; i < 24; i++)
        x[i] = frand() * 3 + 1;
    for (int i = 0; i < 12; i++)
        scale[i] = frand();
    for (int i = 0; i < 4; i++)
        bias[i] = frand();
    rt_view vx = V(LLMC_RT_F32, x, 2, 3, 4), vy = V(LLMC_RT_F32, y, 2, 3, 4);
    rt_view vs = V(LLMC_RT_F32, scale, 4), vb = V(LLMC_RT_F32, bias, 4);
    for (int j = 0; j < 12; j++)
        idx[j] = j % 4;
    layernorm_ref(x, 6, 4, scale, idx, bias, 1e-5, want);
    CHECK(k_layernorm(&vx, &vs, &vb, 2, 1e-5f, &vy, &no_stats, &err) == LLMC_RT_OK &&
          all_close(y, want, 24, 1e-5), "LayerNorm over the last axis with scale and bias");
    for (int j = 0; j < 12; j++)
        idx[j] = j;
    vs = V(LLMC_RT_F32, scale, 3, 4);
    layernorm_ref(x, 2, 12, scale, idx, NULL, 1e-3, want);
    CHECK(k_layernorm(&vx, &vs, NULL, 1, 1e-3f, &vy, &no_stats, &err) == LLMC_RT_OK &&
          all_close(y, want, 24, 1e-5), "LayerNorm over axes [1, 3) with [3,4] scale, no bias");
    for (int j = 0; j < 12; j++)
        idx[j] = j % 4;
    vs = V(LLMC_RT_F32, scale, 1, 1, 4);
    layernorm_ref(x, 2, 12, scale, idx, NULL, 1e-3, want);
    CHECK(k_layernorm(&vx, &vs, NULL, 1, 1e-3f, &vy, &no_stats, &err) == LLMC_RT_OK &&
          all_close(y, want, 24, 1e-5), "scale [1,1,4] broadcasts over normalized [3,4]");
    vs = V(LLMC_RT_F32, scale, 3);
    CHECK(k_layernorm(&vx, &vs, NULL, 1, 1e-3f, &vy, &no_stats, &err) == LLMC_RT_E_EXEC,
          "scale [3] does not broadcast to [3,4]");
}

/* Per-row mean and 1 / sqrt(var + eps) of `outer` rows of n elements. */
static void layernorm_stats_ref(const float *x, int outer, int n, double eps, double *mean,
                                double *inv_std_dev)
{
    for (int o = 0; o < outer; o++) {
        double sum = 0, squares = 0;
        for (int j = 0; j < n; j++)
            sum += x[o * n + j];
        mean[o] = sum / n;
        for (int j = 0; j < n; j++)
            squares += (x[o * n + j] - mean[o]) * (x[o * n + j] - mean[o]);
        inv_std_dev[o] = 1 / sqrt(squares / n + eps);
    }
}

static void test_layernorm_stats(void)
{
    float x[24], y[24], scale[12], mean[6], inv[6];
    double want_y[24], want_mean[6], want_inv[6];
    int idx[12];
    for (int i = 0; i < 24; i++)
        x[i] = frand() * 3 + 1;
    for (int i = 0; i < 12; i++) {
        scale[i] = frand();
        idx[i] = i % 4;
    }
    rt_view vx = V(LLMC_RT_F32, x, 2, 3, 4), vy = V(LLMC_RT_F32, y, 2, 3, 4);
    rt_view vs = V(LLMC_RT_F32, scale, 4);
    rt_view vm = V(LLMC_RT_F32, mean, 2, 3, 1), vi = V(LLMC_RT_F32, inv, 2, 3, 1);
    rt_layernorm_stats stats = {&vm, &vi};
    layernorm_ref(x, 6, 4, scale, idx, NULL, 1e-5, want_y);
    layernorm_stats_ref(x, 6, 4, 1e-5, want_mean, want_inv);
    CHECK(k_layernorm(&vx, &vs, NULL, 2, 1e-5f, &vy, &stats, &err) == LLMC_RT_OK &&
              all_close(y, want_y, 24, 1e-5) && all_close(mean, want_mean, 6, 1e-6) &&
              all_close(inv, want_inv, 6, 1e-5),
          "LayerNorm axis 2 writes y, Mean [2,3,1] and InvStdDev [2,3,1]");
    vs = V(LLMC_RT_F32, scale, 3, 4);
    vm = V(LLMC_RT_F32, mean, 2, 1, 1);
    for (int j = 0; j < 12; j++)
        idx[j] = j;
    stats.inv_std_dev = NULL;
    layernorm_ref(x, 2, 12, scale, idx, NULL, 1e-3, want_y);
    layernorm_stats_ref(x, 2, 12, 1e-3, want_mean, want_inv);
    CHECK(k_layernorm(&vx, &vs, NULL, 1, 1e-3f, &vy, &stats, &err) == LLMC_RT_OK &&
              all_close(y, want_y, 24, 1e-5) && all_close(mean, want_mean, 2, 1e-6),
          "LayerNorm axis 1 with Mean [2,1,1] only");
    vm = V(LLMC_RT_F32, mean, 2, 3, 1);
    CHECK(k_layernorm(&vx, &vs, NULL, 1, 1e-3f, &vy, &stats, &err) == LLMC_RT_E_EXEC,
          "Mean [2,3,1] for axis 1 refused: %s", err.msg);
    vm = V(LLMC_RT_F32, mean, 2, 1);
    CHECK(k_layernorm(&vx, &vs, NULL, 1, 1e-3f, &vy, &stats, &err) == LLMC_RT_E_EXEC,
          "Mean of rank 2 for a rank-3 input refused");
}

/* ---- gather, copy, reshape, fill, range --------------------------------- */

static void test_gather(void)
{
    float data[12], y[12];
    for (int i = 0; i < 12; i++)
        data[i] = (float)i;
    int32_t idx[2] = {-1, 0};
    rt_view vd = V(LLMC_RT_F32, data, 3, 4), vi = V(LLMC_RT_I32, idx, 2), vy = V(LLMC_RT_F32, y, 2, 4);
    CHECK(k_gather(&vd, &vi, 0, &vy, &err) == LLMC_RT_OK && y[0] == 8 && y[3] == 11 &&
          y[4] == 0 && y[7] == 3, "Gather rows with a negative index");
    int64_t idx2[4] = {3, 1, -4, 2};
    rt_view vi2 = V(LLMC_RT_I64, idx2, 2, 2), vy2 = V(LLMC_RT_F32, y, 3, 2, 2);
    CHECK(k_gather(&vd, &vi2, 1, &vy2, &err) == LLMC_RT_OK && y[0] == 3 && y[1] == 1 &&
          y[2] == 0 && y[3] == 2 && y[4] == 7 && y[11] == 10, "Gather axis 1 with [2,2] indices");
    idx2[2] = 4;
    CHECK(k_gather(&vd, &vi2, 1, &vy2, &err) == LLMC_RT_E_EXEC && strstr(err.msg, "index 4"),
          "index out of range: %s", err.msg);
}

static rt_region region(int rank_dst, const int64_t *dst_start, const int64_t *size,
                        int rank_src, const int64_t *src_start, const int *axis,
                        const int64_t *step)
{
    rt_region g;
    memset(&g, 0, sizeof g);
    for (int k = 0; k < rank_dst; k++) {
        g.dst_start[k] = dst_start[k];
        g.size[k] = size[k];
        g.src_axis[k] = axis[k];
        g.src_step[k] = step[k];
    }
    for (int a = 0; a < rank_src; a++)
        g.src_start[a] = src_start[a];
    return g;
}
#define L(...) ((int64_t[]){__VA_ARGS__})
#define AX(...) ((int[]){__VA_ARGS__})

static void test_copy(void)
{
    float src[24], dst[48];
    for (int i = 0; i < 24; i++)
        src[i] = (float)i;
    /* transpose [2,3,4] -> [4,2,3]: dst (k, i, j) = src (i, j, k) */
    rt_view vs = V(LLMC_RT_F32, src, 2, 3, 4), vd = V(LLMC_RT_F32, dst, 4, 2, 3);
    rt_region g = region(3, L(0, 0, 0), L(4, 2, 3), 3, L(0, 0, 0), AX(2, 0, 1), L(1, 1, 1));
    int ok = k_copy_region(&g, &vs, &vd, &err) == LLMC_RT_OK;
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                ok &= dst[k * 6 + i * 3 + j] == src[i * 12 + j * 4 + k];
    CHECK(ok, "transpose perm (2, 0, 1)");
    /* slice x[:, ::-2, 1:3] of [2,3,4] -> [2,2,2] */
    vd = V(LLMC_RT_F32, dst, 2, 2, 2);
    g = region(3, L(0, 0, 0), L(2, 2, 2), 3, L(0, 2, 1), AX(0, 1, 2), L(1, -2, 1));
    ok = k_copy_region(&g, &vs, &vd, &err) == LLMC_RT_OK;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 2; k++)
                ok &= dst[i * 4 + j * 2 + k] == src[i * 12 + (2 - 2 * j) * 4 + 1 + k];
    CHECK(ok, "slice with a negative step");
    /* concat [2,3,4] and [2,1,4] along axis 1 -> [2,4,4] */
    float other[8] = {100, 101, 102, 103, 104, 105, 106, 107};
    rt_view vo = V(LLMC_RT_F32, other, 2, 1, 4);
    vd = V(LLMC_RT_F32, dst, 2, 4, 4);
    rt_region g1 = region(3, L(0, 0, 0), L(2, 3, 4), 3, L(0, 0, 0), AX(0, 1, 2), L(1, 1, 1));
    rt_region g2 = region(3, L(0, 3, 0), L(2, 1, 4), 3, L(0, 0, 0), AX(0, 1, 2), L(1, 1, 1));
    ok = k_copy_region(&g1, &vs, &vd, &err) == LLMC_RT_OK &&
         k_copy_region(&g2, &vo, &vd, &err) == LLMC_RT_OK;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 4; k++)
                ok &= dst[i * 16 + j * 4 + k] ==
                      (j < 3 ? src[i * 12 + j * 4 + k] : other[i * 4 + k]);
    CHECK(ok, "concat of two regions");
    /* expand [3,1] -> [2,3,4] */
    float col[3] = {7, 8, 9};
    rt_view vc = V(LLMC_RT_F32, col, 3, 1);
    vd = V(LLMC_RT_F32, dst, 2, 3, 4);
    g = region(3, L(0, 0, 0), L(2, 3, 4), 2, L(0, 0), AX(-1, 0, -1), L(0, 1, 0));
    ok = k_copy_region(&g, &vc, &vd, &err) == LLMC_RT_OK;
    for (int i = 0; i < 24; i++)
        ok &= dst[i] == col[(i / 4) % 3];
    CHECK(ok, "broadcast expand [3,1] -> [2,3,4]");
    g = region(3, L(0, 1, 0), L(2, 3, 4), 2, L(0, 0), AX(-1, 0, -1), L(0, 1, 0));
    CHECK(k_copy_region(&g, &vc, &vd, &err) == LLMC_RT_E_EXEC, "dst box past the dims: %s", err.msg);
    g = region(3, L(0, 0, 0), L(2, 3, 4), 2, L(1, 0), AX(-1, 0, -1), L(0, 1, 0));
    CHECK(k_copy_region(&g, &vc, &vd, &err) == LLMC_RT_E_EXEC, "src indices past the dims: %s",
          err.msg);
    g = region(3, L(0, 0, 0), L(2, 3, 4), 2, L(0, 0), AX(-1, 0, -1), L(0, INT64_MAX, 0));
    CHECK(k_copy_region(&g, &vc, &vd, &err) == LLMC_RT_E_EXEC, "huge step overflows: %s", err.msg);
    g = region(3, L(0, 0, 0), L(2, 1, 4), 2, L(2, 0), AX(-1, 0, -1), L(0, INT64_MAX, 0));
    CHECK(k_copy_region(&g, &vc, &vd, &err) == LLMC_RT_OK && dst[0] == 9,
          "size-1 axis ignores its step");
    float scalar = 5;
    rt_view vsc = SCALAR(LLMC_RT_F32, &scalar);
    vd = V(LLMC_RT_F32, dst, 4);
    g = region(1, L(0), L(4), 0, NULL, AX(-1), L(0));
    CHECK(k_copy_region(&g, &vsc, &vd, &err) == LLMC_RT_OK && dst[0] == 5 && dst[3] == 5,
          "scalar source broadcast");
    rt_view r1 = V(LLMC_RT_F32, src, 2, 12), r2 = V(LLMC_RT_F32, dst, 24);
    CHECK(k_reshape(&r1, &r2, &err) == LLMC_RT_OK && dst[23] == 23, "Reshape copies the bytes");
    r2.dims[0] = 23;
    CHECK(k_reshape(&r1, &r2, &err) == LLMC_RT_E_EXEC, "Reshape with another element count");
}

static uint64_t f64_bits(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
}

/* What the runtime's conversion did in double before: truncate toward
 * zero, saturate, NaN -> 0. */
static int64_t k_f2i_double_reference(double v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

/* k_f64_to_f32 / k_f64_to_i64 convert by integer operations: they must give
 * the C conversions' bits on special values, the float subnormal range,
 * rounding ties, and random bit patterns of every exponent. */
static void test_f64_conversions(void)
{
    static const double special[] = {0.0, -0.0, 1.0, -1.5, 0.1, 3.4028235677973366e38,
                                     3.4028235677973362e38, 1e39, -1e300, 1.401298464324817e-45,
                                     7.006492321624085e-46, 7.006492321624087e-46, 1e-46,
                                     1.1754942106924411e-38, 1.1754943508222875e-38, 1e-310,
                                     16777217.0, 16777219.0, 9.2233720368547758e18, -9.3e18,
                                     -9.2233720368547758e18, 4503599627370497.0, -2.5};
    int f_bad = 0, i_bad = 0;
    uint64_t x = 0x9E3779B97F4A7C15u;
    for (int k = 0; k < 200000; k++) {
        double v;
        if (k < (int)(sizeof special / sizeof *special)) {
            v = special[k];
        } else {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint64_t bits = x;
            if (k % 2) /* half of them near float's range, where the cases are */
                bits = (bits & ~(UINT64_C(0x7FF) << 52)) | (uint64_t)(1023 - 160 + k % 320) << 52;
            memcpy(&v, &bits, sizeof v);
        }
        float want = (float)v, got = k_f64_to_f32(f64_bits(v));
        if (memcmp(&want, &got, sizeof want) && !(want != want && got != got))
            f_bad++;
        if (k_f64_to_i64(f64_bits(v)) != k_f2i_double_reference(v))
            i_bad++;
    }
    CHECK(f_bad == 0, "binary64 -> float by integer operations equals the C conversion (%d off)", f_bad);
    CHECK(i_bad == 0, "binary64 -> int64 truncates and saturates as a C conversion would (%d off)", i_bad);
    CHECK(k_f64_to_i64(f64_bits(NAN)) == 0 && k_f64_to_i64(f64_bits(INFINITY)) == INT64_MAX &&
          k_f64_to_i64(f64_bits(-INFINITY)) == INT64_MIN, "binary64 -> int64 of NaN and infinities");
}

static bool same_float(float a, float b)
{
    return !memcmp(&a, &b, sizeof a);
}

/* k_i64_to_f32 must give the C conversion's bits for every int64: powers
 * of two and their neighbours, values halfway between two floats (ties to
 * even, both ways) and next to them, the extremes and random values of
 * every magnitude. */
static void test_i64_to_f32(void)
{
    int bad = 0, n = 0;
    for (int e = 0; e < 63; e++) {
        int64_t p = (int64_t)1 << e;
        for (int64_t d = -2; d <= 2; d++)
            for (int sign = -1; sign <= 1; sign += 2) {
                int64_t v = sign * (p + d);
                bad += !same_float(k_i64_to_f32(v), (float)v), n++;
            }
        if (e < 25)
            continue;
        int64_t half = (int64_t)1 << (e - 25); /* half a float ulp at 2^e */
        for (int64_t m = 0; m < 6; m++) {       /* odd and even mantissas */
            int64_t tie = p + (2 * m + 1) * half;
            for (int64_t d = -1; d <= 1; d++)
                for (int sign = -1; sign <= 1; sign += 2) {
                    int64_t v = sign * (tie + d);
                    bad += !same_float(k_i64_to_f32(v), (float)v), n++;
                }
        }
    }
    static const int64_t extremes[] = {0, 1, -1, INT64_MAX, INT64_MIN, INT64_MIN + 1, INT32_MAX,
                                       INT32_MIN, (int64_t)INT32_MAX + 1, (int64_t)INT32_MIN - 1,
                                       INT64_MAX - 1, INT64_MAX - 256, INT64_MAX - 257};
    for (size_t k = 0; k < sizeof extremes / sizeof *extremes; k++)
        bad += !same_float(k_i64_to_f32(extremes[k]), (float)extremes[k]), n++;
    uint64_t x = 0x2545F4914F6CDD1Du;
    for (int k = 0; k < 200000; k++, n++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int64_t v = (int64_t)(x >> (k % 64)) * (k % 3 ? 1 : -1); /* every magnitude */
        bad += !same_float(k_i64_to_f32(v), (float)v);
    }
    CHECK(bad == 0, "int64 -> float equals the C conversion on %d values (%d off)", n, bad);
}

static void test_fill_range(void)
{
    int64_t i64[3];
    float f[4];
    uint8_t b[2];
    rt_view vi = V(LLMC_RT_I64, i64, 3), vf = V(LLMC_RT_F32, f, 2, 2), vb = V(LLMC_RT_BOOL, b, 2);
    CHECK(k_fill(f64_bits(-3.9), &vi, &err) == LLMC_RT_OK && i64[0] == -3 && i64[2] == -3,
          "Fill int64 truncates the value");
    CHECK(k_fill(f64_bits(0.25), &vf, &err) == LLMC_RT_OK && f[3] == 0.25f, "Fill float32");
    CHECK(k_fill(f64_bits(2), &vb, &err) == LLMC_RT_OK && b[0] == 1, "Fill bool");
    CHECK(k_fill(f64_bits(-0.0), &vb, &err) == LLMC_RT_OK && b[1] == 0, "Fill bool with -0");
    float s = 1, l = 2, d = 0.25f;
    rt_view vs = SCALAR(LLMC_RT_F32, &s), vl = SCALAR(LLMC_RT_F32, &l), vd = SCALAR(LLMC_RT_F32, &d);
    rt_view vo = V(LLMC_RT_F32, f, 4);
    CHECK(k_range(&vs, &vl, &vd, &vo, &err) == LLMC_RT_OK && f[0] == 1 && f[1] == 1.25f &&
          f[3] == 1.75f, "Range float32");
    int64_t is = 10, il = 4, id = -2;
    rt_view vis = SCALAR(LLMC_RT_I64, &is), vil = V(LLMC_RT_I64, &il, 1), vid = SCALAR(LLMC_RT_I64, &id);
    CHECK(k_range(&vis, &vil, &vid, &vi, &err) == LLMC_RT_OK && i64[0] == 10 && i64[1] == 8 &&
          i64[2] == 6, "Range int64 with a negative delta");
    CHECK(k_range(&vs, &vil, &vid, &vi, &err) == LLMC_RT_E_EXEC, "Range with mixed dtypes");
}

/* ---- Trilu, ScatterND, CumSum -------------------------------------------- */

/* Plain loop: element (i, j) of every [rows, cols] matrix kept where j - i
 * >= k (upper) or <= k (lower). */
static bool trilu_matches(const int64_t *x, const int64_t *y, int64_t n_mat, int64_t rows,
                          int64_t cols, int64_t k, bool upper)
{
    for (int64_t m = 0; m < n_mat; m++)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
                int64_t e = (m * rows + i) * cols + j;
                bool keep = upper ? j - i >= k : j - i <= k;
                if (y[e] != (keep ? x[e] : 0))
                    return false;
            }
    return true;
}

static void test_trilu(void)
{
    float x[12], y[12];
    for (int i = 0; i < 12; i++)
        x[i] = (float)(i + 1);
    rt_view vx = V(LLMC_RT_F32, x, 3, 4), vy = V(LLMC_RT_F32, y, 3, 4);
    static const float triu0[12] = {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12};
    static const float tril_m1[12] = {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0};
    CHECK(k_trilu(&vx, NULL, true, &vy, &err) == LLMC_RT_OK && !memcmp(y, triu0, sizeof y),
          "Trilu upper without k (k = 0) on [3, 4]");
    int64_t k = -1;
    rt_view vk = SCALAR(LLMC_RT_I64, &k);
    CHECK(k_trilu(&vx, &vk, false, &vy, &err) == LLMC_RT_OK && !memcmp(y, tril_m1, sizeof y),
          "Trilu lower with k = -1 on [3, 4]");
    int64_t bx[2 * 3 * 5], by[2 * 3 * 5];
    for (int i = 0; i < 30; i++)
        bx[i] = 100 + i;
    rt_view vbx = V(LLMC_RT_I64, bx, 2, 3, 5), vby = V(LLMC_RT_I64, by, 2, 3, 5);
    bool ok = true;
    for (k = -5; k <= 6; k++)
        for (int upper = 0; upper <= 1; upper++)
            ok &= k_trilu(&vbx, &vk, upper, &vby, &err) == LLMC_RT_OK &&
                  trilu_matches(bx, by, 2, 3, 5, k, upper);
    CHECK(ok, "Trilu int64 [2, 3, 5], k = -5..6 (beyond both edges), upper and lower, batched");
    static const int64_t extremes[2] = {INT64_MAX, INT64_MIN};
    ok = true;
    for (int e = 0; e < 2; e++) {
        k = extremes[e];
        for (int upper = 0; upper <= 1; upper++)
            ok &= k_trilu(&vbx, &vk, upper, &vby, &err) == LLMC_RT_OK &&
                  trilu_matches(bx, by, 2, 3, 5, k, upper);
    }
    CHECK(ok, "Trilu with k = INT64_MAX and INT64_MIN: all or nothing kept, no overflow");
    uint8_t b[4] = {1, 1, 1, 1}, bo[4];
    k = 0;
    rt_view vb = V(LLMC_RT_BOOL, b, 2, 2), vbo = V(LLMC_RT_BOOL, bo, 2, 2);
    CHECK(k_trilu(&vb, &vk, false, &vbo, &err) == LLMC_RT_OK && bo[0] == 1 && bo[1] == 0 &&
          bo[2] == 1 && bo[3] == 1, "Trilu lower on bool");
    float sentinel = 42.0f;
    rt_view e1 = V(LLMC_RT_F32, &sentinel, 0, 5), e2 = V(LLMC_RT_F32, &sentinel, 3, 0, 5);
    CHECK(k_trilu(&e1, NULL, true, &e1, &err) == LLMC_RT_OK &&
          k_trilu(&e2, &vk, false, &e2, &err) == LLMC_RT_OK && sentinel == 42.0f,
          "Trilu on empty [0, 5] and [3, 0, 5] writes nothing");
    int32_t k32 = 0;
    rt_view vk32 = SCALAR(LLMC_RT_I32, &k32), v1 = V(LLMC_RT_F32, x, 12);
    CHECK(k_trilu(&vx, &vk32, true, &vy, &err) == LLMC_RT_E_EXEC && strstr(err.msg, "one int64"),
          "Trilu with an int32 k refused: %s", err.msg);
    CHECK(k_trilu(&v1, NULL, true, &v1, &err) == LLMC_RT_E_EXEC && strstr(err.msg, "rank >= 2"),
          "Trilu on a vector refused: %s", err.msg);
}

static void test_scatter_nd(void)
{
    /* the ONNX operator example: data 1..8, indices [[4], [3], [1], [7]] */
    float data[8] = {1, 2, 3, 4, 5, 6, 7, 8}, upd[4] = {9, 10, 11, 12}, y[8];
    int64_t idx[4] = {4, 3, 1, 7};
    static const float want[8] = {1, 11, 3, 10, 9, 6, 7, 12};
    rt_view vd = V(LLMC_RT_F32, data, 8), vi = V(LLMC_RT_I64, idx, 4, 1),
            vu = V(LLMC_RT_F32, upd, 4), vy = V(LLMC_RT_F32, y, 8);
    CHECK(k_scatter_nd(0, &vd, &vi, &vu, &vy, &err) == LLMC_RT_OK && !memcmp(y, want, sizeof y),
          "ScatterND 1-D example of the ONNX spec");
    int64_t neg[4] = {-4, -5, -7, -1};
    rt_view vn = V(LLMC_RT_I64, neg, 4, 1);
    CHECK(k_scatter_nd(0, &vd, &vn, &vu, &vy, &err) == LLMC_RT_OK && !memcmp(y, want, sizeof y),
          "negative indices wrap (-4 -> 4, -1 -> 7)");
    /* slices: data [2, 3], indices [[1]] -> row 1 replaced */
    int32_t m[6] = {1, 2, 3, 4, 5, 6}, mu[3] = {7, 8, 9}, my[6];
    int64_t row[1] = {-1}, cell[4] = {1, 2, -2, 0};
    rt_view vm = V(LLMC_RT_I32, m, 2, 3), vrow = V(LLMC_RT_I64, row, 1, 1),
            vmu = V(LLMC_RT_I32, mu, 1, 3), vmy = V(LLMC_RT_I32, my, 2, 3);
    CHECK(k_scatter_nd(0, &vm, &vrow, &vmu, &vmy, &err) == LLMC_RT_OK && my[0] == 1 &&
          my[2] == 3 && my[3] == 7 && my[5] == 9, "ScatterND of a row (q = 1 < rank 2), int32");
    rt_view vcell = V(LLMC_RT_I64, cell, 2, 2), vcu = V(LLMC_RT_I32, mu, 2);
    CHECK(k_scatter_nd(0, &vm, &vcell, &vcu, &vmy, &err) == LLMC_RT_OK && my[5] == 7 &&
          my[0] == 8 && my[1] == 2 && my[4] == 5, "ScatterND of elements (q = rank), [-2, 0] wraps");
    int64_t none[1];
    rt_view vnone = V(LLMC_RT_I64, none, 0, 1), vnu = V(LLMC_RT_I32, mu, 0, 3);
    CHECK(k_scatter_nd(0, &vm, &vnone, &vnu, &vmy, &err) == LLMC_RT_OK &&
          !memcmp(my, m, sizeof my), "no index tuples: y = data");
    int64_t whole[1];
    int32_t wu[6] = {10, 20, 30, 40, 50, 60};
    rt_view vwhole = V(LLMC_RT_I64, whole, 1, 0), vwu = V(LLMC_RT_I32, wu, 1, 2, 3);
    CHECK(k_scatter_nd(0, &vm, &vwhole, &vwu, &vmy, &err) == LLMC_RT_OK &&
          !memcmp(my, wu, sizeof my), "q = 0: one tuple replaces all of data");
    /* reductions with a duplicate index: data [1, 2, 3, 4], indices 0, 0, 3 */
    int64_t r[4] = {1, 2, 3, 4}, ru[3] = {10, 5, -7}, ry[4], ridx[3] = {0, 0, 3};
    rt_view vr = V(LLMC_RT_I64, r, 4), vru = V(LLMC_RT_I64, ru, 3), vry = V(LLMC_RT_I64, ry, 4),
            vridx = V(LLMC_RT_I64, ridx, 3, 1);
    static const int64_t want_red[4][2] = {{16, -3}, {50, -28}, {10, 4}, {1, -7}};
    static const char *const red_name[4] = {"add", "mul", "max", "min"};
    for (int kind = 1; kind <= 4; kind++)
        CHECK(k_scatter_nd(kind, &vr, &vridx, &vru, &vry, &err) == LLMC_RT_OK &&
              ry[0] == want_red[kind - 1][0] && ry[1] == 2 && ry[2] == 3 &&
              ry[3] == want_red[kind - 1][1], "ScatterND reduction %s over a duplicate index, int64",
              red_name[kind - 1]);
    float fu[3] = {0.5f, 0.25f, 2.0f}, fd[4] = {1, 2, 3, 4}, fy[4];
    rt_view vfd = V(LLMC_RT_F32, fd, 4), vfu = V(LLMC_RT_F32, fu, 3), vfy = V(LLMC_RT_F32, fy, 4);
    CHECK(k_scatter_nd(2, &vfd, &vridx, &vfu, &vfy, &err) == LLMC_RT_OK && fy[0] == 0.125f &&
          fy[3] == 8.0f, "ScatterND mul on float32");
    /* an index out of range: a clear error, and nothing written */
    int64_t bad[4] = {4, 3, 8, 7};
    rt_view vbad = V(LLMC_RT_I64, bad, 4, 1);
    for (int i = 0; i < 8; i++)
        y[i] = -1.0f;
    CHECK(k_scatter_nd(0, &vd, &vbad, &vu, &vy, &err) == LLMC_RT_E_EXEC &&
          strstr(err.msg, "index 8 (tuple 2, axis 0) is outside [-8, 8)") && y[0] == -1.0f &&
          y[4] == -1.0f, "index 8 of 8: runtime error, y untouched: %s", err.msg);
    bad[2] = -9;
    CHECK(k_scatter_nd(1, &vd, &vbad, &vu, &vy, &err) == LLMC_RT_E_EXEC &&
          strstr(err.msg, "index -9"), "index -9 of 8 refused: %s", err.msg);
    rt_view vshort = V(LLMC_RT_F32, upd, 3);
    CHECK(k_scatter_nd(0, &vd, &vi, &vshort, &vy, &err) == LLMC_RT_E_EXEC &&
          strstr(err.msg, "updates"), "updates of the wrong dims refused: %s", err.msg);
    int32_t i32idx[4] = {0, 1, 2, 3};
    rt_view vi32 = V(LLMC_RT_I32, i32idx, 4, 1);
    CHECK(k_scatter_nd(0, &vd, &vi32, &vu, &vy, &err) == LLMC_RT_E_EXEC, "int32 indices refused");
    uint8_t bd[2] = {0, 1}, bu[1] = {1}, by[2];
    int64_t bi[1] = {0};
    rt_view vbd = V(LLMC_RT_BOOL, bd, 2), vbu = V(LLMC_RT_BOOL, bu, 1), vby = V(LLMC_RT_BOOL, by, 2),
            vbi = V(LLMC_RT_I64, bi, 1, 1);
    CHECK(k_scatter_nd(0, &vbd, &vbi, &vbu, &vby, &err) == LLMC_RT_OK && by[0] == 1 && by[1] == 1 &&
          k_scatter_nd(1, &vbd, &vbi, &vbu, &vby, &err) == LLMC_RT_E_EXEC &&
          !k_scatter_nd_supports(1, LLMC_RT_BOOL), "bool: plain scatter yes, add no");
}

static void test_cumsum(void)
{
    float x[5] = {1, 2, 3, 4, 5}, y[5];
    static const float want[4][5] = {{1, 3, 6, 10, 15}, {0, 1, 3, 6, 10},
                                     {15, 14, 12, 9, 5}, {14, 12, 9, 5, 0}};
    static const char *const names[4] = {"plain", "exclusive", "reverse", "exclusive + reverse"};
    rt_view vx = V(LLMC_RT_F32, x, 5), vy = V(LLMC_RT_F32, y, 5);
    for (int kind = 0; kind < 4; kind++)
        CHECK(k_cumsum(&vx, 0, kind, &vy, &err) == LLMC_RT_OK && !memcmp(y, want[kind], sizeof y),
              "CumSum 1-D %s", names[kind]);
    int64_t m[6] = {1, 2, 3, 4, 5, 6}, my[6];
    rt_view vm = V(LLMC_RT_I64, m, 2, 3), vmy = V(LLMC_RT_I64, my, 2, 3);
    CHECK(k_cumsum(&vm, 0, 0, &vmy, &err) == LLMC_RT_OK && my[0] == 1 && my[2] == 3 &&
          my[3] == 5 && my[5] == 9, "CumSum int64 [2, 3] axis 0");
    CHECK(k_cumsum(&vm, 1, 3, &vmy, &err) == LLMC_RT_OK && my[0] == 5 && my[1] == 3 &&
          my[2] == 0 && my[3] == 11 && my[5] == 0, "CumSum int64 axis 1, exclusive + reverse");
    int64_t mask[5] = {1, 1, 1, 0, 1}, pos[5];
    rt_view vmask = V(LLMC_RT_I64, mask, 1, 5), vpos = V(LLMC_RT_I64, pos, 1, 5);
    CHECK(k_cumsum(&vmask, 1, 0, &vpos, &err) == LLMC_RT_OK && pos[2] == 3 && pos[3] == 3 &&
          pos[4] == 4, "attention mask cumsum with a padding hole");
    int32_t w[3] = {INT32_MAX, 1, 1}, wy[3];
    rt_view vw = V(LLMC_RT_I32, w, 3), vwy = V(LLMC_RT_I32, wy, 3);
    CHECK(k_cumsum(&vw, 0, 0, &vwy, &err) == LLMC_RT_OK && wy[0] == INT32_MAX &&
          wy[1] == INT32_MIN && wy[2] == INT32_MIN + 1, "CumSum int32 wraps");
    float sentinel = 7;
    rt_view e1 = V(LLMC_RT_F32, &sentinel, 0, 3), e2 = V(LLMC_RT_F32, &sentinel, 2, 0);
    CHECK(k_cumsum(&e1, 1, 3, &e1, &err) == LLMC_RT_OK && k_cumsum(&e2, 1, 1, &e2, &err) == LLMC_RT_OK &&
          sentinel == 7, "CumSum of empty [0, 3] and [2, 0] writes nothing");
    int8_t i8[2] = {1, 2}, i8y[2];
    rt_view v8 = V(LLMC_RT_I8, i8, 2), v8y = V(LLMC_RT_I8, i8y, 2);
    CHECK(k_cumsum(&v8, 0, 0, &v8y, &err) == LLMC_RT_E_EXEC, "CumSum on int8 refused: %s", err.msg);
    CHECK(k_cumsum(&vx, 1, 0, &vy, &err) == LLMC_RT_E_EXEC && strstr(err.msg, "axis 1"),
          "CumSum axis past the rank refused: %s", err.msg);
}

int main(void)
{
    srand(3);
    test_unary();
    test_binary();
    test_where_cast();
    test_matmul();
    test_reduce();
    test_softmax();
    test_layernorm();
    test_layernorm_stats();
    test_gather();
    test_copy();
    test_f64_conversions();
    test_i64_to_f32();
    test_fill_range();
    test_trilu();
    test_scatter_nd();
    test_cumsum();
    return TAP_DONE();
}
