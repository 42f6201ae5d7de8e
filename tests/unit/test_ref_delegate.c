/* The reference delegate (runtime/platform/llmc_ref_delegate.h) and
 * llmc_rt_sg_weight_row, on subgraph descriptions built here by hand with
 * weights packed by the compiler's own packer at the avx2 target's tiles:
 *   - weight rows unpack to exactly the q values and binary16 scales that
 *     were packed (odd N and K, per-channel and per-group), bad weights fail
 *     naming the tensor;
 *   - RMSNorm -> QuantizeRows -> Linear (bias, residual, outputs split 3 +
 *     rest) -> SwiGLU chains over 1, 5 and 64 rows, with clamped
 *     activations, against a double reference from the same int8 values;
 *     LayerNorm, every Unary and Binary kind the delegate takes (equal dims
 *     and a broadcast weight) and Reshape against double references;
 *   - execute hands the job over: wait(0) polling and wait(1) both report
 *     it, a second execute before wait is refused, two graphs run in turns
 *     give the bytes each gives alone, and the last run's clock stamps lie
 *     inside the caller's;
 *   - a dynamic QuantizeRows, per-group weights, Attention and int8
 *     activations among the outputs are refused naming the op. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/weight_pack.h"
#include "qweight_pack.h"
#include "llmc_ref_delegate.h"
#include "plan_format.h"
#include "tap.h"

static llmc_rt_error err;
static int hp, lp; /* QWeightTiles tiles of the avx2 target */

static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Per-channel weights: one group covering K (the quantize pass rounds K up
 * to 32 for them). */
static int64_t per_channel_group(int64_t k)
{
    return rt_qround_up(k, 32);
}

/* ---- weights ----------------------------------------------------------- */

/* W [n, k] = s * q with q in [-127, 127] and, per (row, group), one |q| =
 * 127 and s a binary16 value: the packer's amax / 127 is then s exactly and
 * q round-trips, so the test knows the packed bytes' values.  scales has
 * ceil(k / group) entries per row. */
static void exact_weights(int64_t n, int64_t k, int64_t group, int8_t *q, float *scales,
                          float *W)
{
    int64_t groups = (k + group - 1) / group;
    for (int64_t r = 0; r < n; r++)
        for (int64_t g = 0; g < groups; g++) {
            float s = ldexpf((float)(1024 + rand() % 1024), -17 - rand() % 4);
            int64_t c0 = g * group, len = k - c0 < group ? k - c0 : group;
            int64_t peak = c0 + rand() % len;
            scales[r * groups + g] = s;
            for (int64_t c = c0; c < c0 + len; c++) {
                int v = c == peak ? (rand() % 2 ? 127 : -127) : rand() % 255 - 127;
                q[r * k + c] = (int8_t)v;
                W[r * k + c] = s * (float)v;
            }
        }
}


/* An Int8 W [n, k] with known q and scales, packed. */
typedef struct {
    rt_qweight_shape shape;
    int8_t *q;
    float *scales;
    uint8_t *packed;
    llmc_rt_sg_tensor desc;
} qweight;

static llmc_rt_sg_tensor qweight_desc(const char *name, const rt_qweight_shape *s,
                                       const uint8_t *packed)
{
    llmc_rt_sg_tensor d = {name, LLMC_RT_I8, LLMC_RT_LAYOUT_QWeightTiles, 2, {s->n, s->k},
                           rt_qweight_bytes(s), packed, (uint32_t)s->group,
                           (uint32_t)s->hp, (uint32_t)s->lp};
    return d;
}

static void qweight_init(qweight *w, const char *name, int64_t n, int64_t k, int64_t group)
{
    int64_t groups = (k + group - 1) / group;
    float *W = malloc((size_t)(n * k + 1) * sizeof *W);
    w->q = malloc((size_t)(n * k + 1));
    w->scales = malloc((size_t)(n * groups + 1) * sizeof *w->scales);
    exact_weights(n, k, group, w->q, w->scales, W);
    rt_qweight_shape_init(&w->shape, 8, hp, lp, n, k, group);
    w->packed = pack_weights(W, &w->shape);
    free(W);
    w->desc = qweight_desc(name, &w->shape, w->packed);
}

static void qweight_free(qweight *w)
{
    free(w->q);
    free(w->scales);
    free(w->packed);
}

static bool fails_naming(llmc_rt_status st, llmc_rt_status code, const char *a, const char *b)
{
    return st == code && err.code == code && strstr(err.msg, a) && (!b || strstr(err.msg, b));
}

static void test_weight_rows(void)
{
    static const int64_t cases[][3] = {
        {1, 1, 0}, {5, 13, 0}, {17, 40, 0}, {9, 70, 32}, {23, 100, 16}, {3, 8, 8}};
    int8_t q[128];
    float scales[16];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int64_t n = cases[i][0], k = cases[i][1];
        int64_t group = cases[i][2] ? cases[i][2] : per_channel_group(k);
        int64_t groups = (k + group - 1) / group;
        qweight w;
        qweight_init(&w, "w", n, k, group);
        bool ok = true;
        for (int64_t r = 0; r < n; r++) {
            memset(q, 0x55, sizeof q);
            ok &= llmc_rt_sg_weight_row(&w.desc, r, q, scales, &err) == LLMC_RT_OK &&
                  !memcmp(q, w.q + r * k, (size_t)k) &&
                  !memcmp(scales, w.scales + r * groups, (size_t)groups * sizeof *scales) &&
                  q[k] == 0x55; /* nothing past K */
        }
        CHECK(ok, "W [%lld, %lld] in groups of %lld (tiles %d x %d): every row's q and scales "
              "as packed", (long long)n, (long long)k, (long long)group, hp, lp);
        qweight_free(&w);
    }

    qweight w;
    qweight_init(&w, "proj.w", 9, 70, 32);
    llmc_rt_sg_tensor bad = w.desc;
    CHECK(fails_naming(llmc_rt_sg_weight_row(&bad, 9, q, scales, &err), LLMC_RT_E_ARG,
                       "'proj.w'", "row 9 outside [0, 9)") &&
          fails_naming(llmc_rt_sg_weight_row(&bad, -1, q, scales, &err), LLMC_RT_E_ARG,
                       "'proj.w'", "row -1"),
          "rows outside [0, N) refused: %s", err.msg);
    bad.bytes--;
    CHECK(fails_naming(llmc_rt_sg_weight_row(&bad, 0, q, scales, &err), LLMC_RT_E_ARG,
                       "'proj.w'", "segment of"),
          "a segment one byte short refused: %s", err.msg);
    bad = w.desc;
    bad.tile_depth = 3;
    CHECK(fails_naming(llmc_rt_sg_weight_row(&bad, 0, q, scales, &err), LLMC_RT_E_ARG,
                       "'proj.w'", "tile depth 3"),
          "a tile depth that is not a power of two refused: %s", err.msg);
    bad = w.desc;
    bad.tile_rows = 65;
    CHECK(fails_naming(llmc_rt_sg_weight_row(&bad, 0, q, scales, &err), LLMC_RT_E_ARG,
                       "'proj.w'", "tile rows 65"),
          "65 tile rows refused: %s", err.msg);
    bad = w.desc;
    bad.dtype = LLMC_RT_U4;
    CHECK(fails_naming(llmc_rt_sg_weight_row(&bad, 0, q, scales, &err), LLMC_RT_E_ARG,
                       "'proj.w'", "not an Int8 QWeightTiles"),
          "a Uint4 weight refused: %s", err.msg);
    qweight_free(&w);
}

/* ---- subgraph descriptions ------------------------------------------------ */

#define MAX_T 16
#define MAX_OPS 8

typedef struct {
    llmc_rt_sg_tensor t[MAX_T];
    llmc_rt_sg_op op[MAX_OPS];
    llmc_rt_subgraph sg;
} sg_build;

static void sg_begin(sg_build *b, const char *name, uint32_t rows, uint32_t n_inputs,
                     uint32_t n_outputs)
{
    memset(b, 0, sizeof *b);
    b->sg.index = 7;
    b->sg.name = name;
    b->sg.rows = rows;
    b->sg.n_inputs = n_inputs;
    b->sg.n_outputs = n_outputs;
    b->sg.tensors = b->t;
    b->sg.ops = b->op;
}

/* Float32 Dense tensor (a weight when data is not NULL); its index. */
static uint32_t f32_tensor(sg_build *b, const char *name, const float *weight, int rank,
                           const int64_t *dims)
{
    llmc_rt_sg_tensor *t = &b->t[b->sg.n_tensors];
    t->name = name;
    t->dtype = LLMC_RT_F32;
    t->layout = LLMC_RT_LAYOUT_Dense;
    t->rank = rank;
    t->bytes = 4;
    for (int a = 0; a < rank; a++) {
        t->dims[a] = dims[a];
        t->bytes *= (uint64_t)dims[a];
    }
    t->weight = weight;
    return b->sg.n_tensors++;
}

static uint32_t add_tensor(sg_build *b, const llmc_rt_sg_tensor *t)
{
    b->t[b->sg.n_tensors] = *t;
    return b->sg.n_tensors++;
}

static llmc_rt_sg_op *add_op(sg_build *b, int code, int kind, const char *name, uint32_t n_in,
                             const uint32_t *in, uint32_t n_out, const uint32_t *out)
{
    llmc_rt_sg_op *op = &b->op[b->sg.n_ops++];
    op->code = code;
    op->kind = kind;
    op->name = name;
    op->n_inputs = n_in;
    op->n_outputs = n_out;
    memcpy(op->inputs, in, n_in * sizeof *in);
    memcpy(op->outputs, out, n_out * sizeof *out);
    return op;
}

#define IN(...) (uint32_t)(sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t)), \
                (const uint32_t[]){__VA_ARGS__}
#define DIMS(...) (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                  (const int64_t[]){__VA_ARGS__}

/* execute, then wait(block = 1): the job's status (LLMC_RT_E_EXEC if wait
 * did not report it finished). */
static llmc_rt_status run(const llmc_rt_delegate *dt, void *graph, void *const *io)
{
    llmc_rt_status st = dt->execute(dt->ctx, graph, io, &err);
    if (st)
        return st;
    int finished = 0;
    st = dt->wait(dt->ctx, 1, &finished, &err);
    return st ? st : finished ? LLMC_RT_OK : LLMC_RT_E_EXEC;
}

static double silu(double v)
{
    return v / (1.0 + exp(-v));
}

/* ---- the Linear chain ------------------------------------------------------ */

enum { CH_X, CH_RES, CH_H, CH_Y0, CH_Y1, CH_O, CH_HQ, CH_S, CH_G, CH_W, CH_BIAS, CH_U };
#define CH_IO 6
#define Y0_COLS 3

/* x [1, m, d], res [1, m, n] ->
 *   h  = RMSNorm(x, g)                    (output)
 *   hq = QuantizeRows(h, qscale)          (int8, internal)
 *   y0, y1 = Linear(hq, W, bias, res)     (outputs: 3 columns, n - 3)
 *   s  = SwiGLU(y1, u), u a weight [n - 3] (internal)
 *   o  = SwiGLU(s, y1)                    (output) */
typedef struct {
    int64_t m, d, n;
    float qscale, epsilon;
    float *x, *res, *g, *bias, *u;
    qweight w;
    float *out, *h, *y0, *y1, *o; /* the outputs, one block */
    size_t out_bytes;
    void *io[CH_IO];
    sg_build b;
} chain;

static void chain_init(chain *c, int64_t m, int64_t group)
{
    int64_t d = 37, n = 14, r = n - Y0_COLS;
    c->m = m;
    c->d = d;
    c->n = n;
    c->qscale = 0.016f; /* |h| / qscale passes 127 for |h| > 2.03 */
    c->epsilon = 1e-5f;
    c->x = malloc((size_t)(m * d) * sizeof *c->x);
    c->res = malloc((size_t)(m * n) * sizeof *c->res);
    c->g = malloc((size_t)d * sizeof *c->g);
    c->bias = malloc((size_t)n * sizeof *c->bias);
    c->u = malloc((size_t)r * sizeof *c->u);
    for (int64_t i = 0; i < m * d; i++)
        c->x[i] = frand(-1.0f, 1.0f);
    for (int64_t e = 0; e < m; e++) /* one outlier per row: clamped at +-127 */
        c->x[e * d + e % d] = e % 2 ? -6.0f : 6.0f;
    for (int64_t i = 0; i < m * n; i++)
        c->res[i] = frand(-1.0f, 1.0f);
    for (int64_t i = 0; i < d; i++)
        c->g[i] = frand(0.5f, 1.5f);
    for (int64_t i = 0; i < n; i++)
        c->bias[i] = frand(-0.5f, 0.5f);
    for (int64_t i = 0; i < r; i++)
        c->u[i] = frand(-1.5f, 1.5f);
    qweight_init(&c->w, "fc.w", n, d, group);

    c->out_bytes = (size_t)(m * (d + n + r)) * sizeof(float);
    c->out = malloc(c->out_bytes);
    c->h = c->out;
    c->y0 = c->h + m * d;
    c->y1 = c->y0 + m * Y0_COLS;
    c->o = c->y1 + m * r;
    void *io[CH_IO] = {c->x, c->res, c->h, c->y0, c->y1, c->o};
    memcpy(c->io, io, sizeof io);

    sg_build *b = &c->b;
    sg_begin(b, "block0", (uint32_t)m, 2, 4);
    f32_tensor(b, "x", NULL, DIMS(1, m, d));
    f32_tensor(b, "res", NULL, DIMS(1, m, n));
    f32_tensor(b, "h", NULL, DIMS(1, m, d));
    f32_tensor(b, "y0", NULL, DIMS(1, m, Y0_COLS));
    f32_tensor(b, "y1", NULL, DIMS(1, m, r));
    f32_tensor(b, "o", NULL, DIMS(1, m, r));
    llmc_rt_sg_tensor hq = {"hq", LLMC_RT_I8, LLMC_RT_LAYOUT_QActTiles, 3, {1, m, d}, 0, NULL, 64, 4, 4};
    add_tensor(b, &hq);
    f32_tensor(b, "s", NULL, DIMS(1, m, r));
    f32_tensor(b, "g", c->g, DIMS(d));
    add_tensor(b, &c->w.desc);
    f32_tensor(b, "bias", c->bias, DIMS(n));
    f32_tensor(b, "u", c->u, DIMS(r));
    add_op(b, LLMC_RT_OP_RMSNorm, 0, "norm", IN(CH_X, CH_G), IN(CH_H))->epsilon = c->epsilon;
    add_op(b, LLMC_RT_OP_QuantizeRows, 0, "quant", IN(CH_H), IN(CH_HQ))->scale = c->qscale;
    add_op(b, LLMC_RT_OP_Linear, 3, "fc", IN(CH_HQ, CH_W, CH_BIAS, CH_RES), IN(CH_Y0, CH_Y1));
    add_op(b, LLMC_RT_OP_Binary, LLMC_RT_BINARY_SwiGLU, "swiglu_u", IN(CH_Y1, CH_U), IN(CH_S));
    add_op(b, LLMC_RT_OP_Binary, LLMC_RT_BINARY_SwiGLU, "swiglu_y", IN(CH_S, CH_Y1), IN(CH_O));
}

static void chain_free(chain *c)
{
    free(c->x);
    free(c->res);
    free(c->g);
    free(c->bias);
    free(c->u);
    free(c->out);
    qweight_free(&c->w);
}

/* The worst |got - want| / tolerance over a chain's outputs (<= 1: within
 * 1e-5 relative), against double arithmetic:
 *   h: RMSNorm in double, relative to |h|;
 *   y0, y1: from the int8 values the delegate must have used, computed as
 *     the reference's q (float inv = 1 / scale, nearbyintf, clamp) from the
 *     delegate's h, relative to the terms summed (a float sum's rounding);
 *   o: both SwiGLUs in double from the delegate's y1, relative to |o|.
 * *clamped counts the q at +-127 from |h / scale| > 127. */
typedef struct {
    double h, y, o;
    int64_t clamped;
} chain_errors;

/* |got - want| over the tolerance 1e-5 * scale; a NaN counts as infinite. */
static double ratio(double got, double want, double scale)
{
    double diff = fabs(got - want);
    if (diff == 0)
        return 0;
    return diff <= DBL_MAX ? diff / (1e-5 * scale) : INFINITY;
}

static void check_norm(const chain *c, chain_errors *e)
{
    for (int64_t r = 0; r < c->m; r++) {
        const float *x = c->x + r * c->d;
        double ss = 0;
        for (int64_t j = 0; j < c->d; j++)
            ss += (double)x[j] * x[j];
        double inv = 1.0 / sqrt(ss / (double)c->d + c->epsilon);
        for (int64_t j = 0; j < c->d; j++) {
            double want = x[j] * inv * c->g[j];
            e->h = fmax(e->h, ratio(c->h[r * c->d + j], want, fabs(want)));
        }
    }
}

static void check_linear(const chain *c, chain_errors *e)
{
    int64_t r = c->n - Y0_COLS;
    int8_t *q = malloc((size_t)c->d);
    float inv = 1.0f / c->qscale;
    for (int64_t row = 0; row < c->m; row++) {
        for (int64_t j = 0; j < c->d; j++) {
            float v = nearbyintf(c->h[row * c->d + j] * inv);
            e->clamped += fabsf(v) > 127.0f;
            q[j] = (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
        }
        for (int64_t f = 0; f < c->n; f++) {
            int64_t acc = 0;
            for (int64_t j = 0; j < c->d; j++)
                acc += q[j] * c->w.q[f * c->d + j];
            double dot = (double)c->qscale * c->w.scales[f] * (double)acc;
            double bias = c->bias[f], res = c->res[row * c->n + f];
            double got = f < Y0_COLS ? c->y0[row * Y0_COLS + f] : c->y1[row * r + f - Y0_COLS];
            e->y = fmax(e->y, ratio(got, dot + bias + res, fabs(dot) + fabs(bias) + fabs(res)));
        }
    }
    free(q);
}

static void check_swiglu(const chain *c, chain_errors *e)
{
    int64_t r = c->n - Y0_COLS;
    for (int64_t i = 0; i < c->m * r; i++) {
        double y1 = c->y1[i], s = silu(y1) * c->u[i % r], want = silu(s) * y1;
        e->o = fmax(e->o, ratio(c->o[i], want, fabs(want)));
    }
}

static chain_errors chain_check(const chain *c)
{
    chain_errors e = {0, 0, 0, 0};
    check_norm(c, &e);
    check_linear(c, &e);
    check_swiglu(c, &e);
    return e;
}

static void test_chain(llmc_ref_delegate *d)
{
    static const int64_t rows[] = {1, 5, 64};
    llmc_rt_delegate dt;
    llmc_ref_delegate_table(d, &dt);
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        chain c;
        chain_init(&c, rows[i], per_channel_group(37));
        void *graph = NULL;
        llmc_rt_status st = dt.prepare(dt.ctx, &c.b.sg, &graph, &err);
        CHECK(st == LLMC_RT_OK && graph, "rows %lld: the chain prepares (%s)", (long long)rows[i],
              st ? err.msg : "ok");
        if (st) {
            chain_free(&c);
            continue;
        }
        memset(c.out, 0xff, c.out_bytes); /* NaN everywhere the run must write */
        memset(&c.b, 0xa5, sizeof c.b);   /* prepare copied what it needs */
        st = run(&dt, graph, c.io);
        chain_errors e = chain_check(&c);
        CHECK(st == LLMC_RT_OK && e.h <= 1.0, "rows %lld: RMSNorm within 1e-5 of double "
              "(worst %.3g of the tolerance)", (long long)rows[i], e.h);
        CHECK(st == LLMC_RT_OK && e.y <= 1.0 && e.clamped >= rows[i],
              "rows %lld: Linear (bias, residual, 3 + 11 columns) within 1e-5 of the int8 "
              "reference (worst %.3g), %lld values clamped at +-127", (long long)rows[i], e.y,
              (long long)e.clamped);
        CHECK(st == LLMC_RT_OK && e.o <= 1.0, "rows %lld: SwiGLU(SwiGLU(y1, u), y1) within 1e-5 "
              "of double (worst %.3g)", (long long)rows[i], e.o);
        dt.release(dt.ctx, graph);
        chain_free(&c);
    }
}

/* ---- LayerNorm, Unary, Binary, Reshape -------------------------------------- */

typedef struct {
    int kind;
    const char *name;
} named_kind;

static double unary_ref(int kind, double x)
{
    switch (kind) {
    case LLMC_RT_UNARY_Identity: return x;
    case LLMC_RT_UNARY_Neg: return -x;
    case LLMC_RT_UNARY_Abs: return fabs(x);
    case LLMC_RT_UNARY_Sqrt: return sqrt(x);
    case LLMC_RT_UNARY_Exp: return exp(x);
    case LLMC_RT_UNARY_Tanh: return tanh(x);
    case LLMC_RT_UNARY_Sigmoid: return 1.0 / (1.0 + exp(-x));
    case LLMC_RT_UNARY_Relu: return x > 0 ? x : 0;
    case LLMC_RT_UNARY_Silu: return silu(x);
    case LLMC_RT_UNARY_Gelu: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    default: /* GeluTanh */
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    }
}

static double binary_ref(int kind, double a, double b)
{
    switch (kind) {
    case LLMC_RT_BINARY_Add: return a + b;
    case LLMC_RT_BINARY_Sub: return a - b;
    case LLMC_RT_BINARY_Mul: return a * b;
    case LLMC_RT_BINARY_Div: return a / b;
    case LLMC_RT_BINARY_Max: return fmax(a, b);
    case LLMC_RT_BINARY_Min: return fmin(a, b);
    default: return silu(a) * b; /* SwiGLU */
    }
}

/* x [m, d] (in [-2, 2]; positive for Sqrt) -> Unary kind -> y. */
static void test_unary_kinds(const llmc_rt_delegate *dt)
{
#define UNARY_KIND(Name) {LLMC_RT_UNARY_##Name, #Name}
    static const named_kind kinds[] = {
        UNARY_KIND(Identity), UNARY_KIND(Neg), UNARY_KIND(Abs), UNARY_KIND(Sqrt),
        UNARY_KIND(Exp), UNARY_KIND(Tanh), UNARY_KIND(Sigmoid), UNARY_KIND(Relu),
        UNARY_KIND(Silu), UNARY_KIND(Gelu), UNARY_KIND(GeluTanh)};
    enum { M = 5, D = 21 };
    float x[M * D], y[M * D];
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        for (int i = 0; i < M * D; i++)
            x[i] = kinds[k].kind == LLMC_RT_UNARY_Sqrt ? frand(0.0f, 4.0f) : frand(-2.0f, 2.0f);
        sg_build b;
        sg_begin(&b, "act", M, 1, 1);
        f32_tensor(&b, "x", NULL, DIMS(M, D));
        f32_tensor(&b, "y", NULL, DIMS(M, D));
        add_op(&b, LLMC_RT_OP_Unary, kinds[k].kind, "unary", IN(0), IN(1));
        void *graph = NULL, *io[2] = {x, y};
        double worst = 0;
        llmc_rt_status st = dt->prepare(dt->ctx, &b.sg, &graph, &err);
        if (!st)
            st = run(dt, graph, io);
        for (int i = 0; i < M * D; i++) {
            double want = unary_ref(kinds[k].kind, x[i]);
            worst = fmax(worst, ratio(y[i], want, fabs(want) + 1e-30));
        }
        CHECK(st == LLMC_RT_OK && worst <= 1.0, "Unary %s within 1e-5 of double (worst %.3g)",
              kinds[k].name, worst);
        dt->release(dt->ctx, graph);
    }
}

/* a, b [1, m, d] -> kind(a, b) (equal dims) and kind(a, w) (w a weight
 * [d] repeated over the rows). */
static void test_binary_kinds(const llmc_rt_delegate *dt)
{
#define BINARY_KIND(Name) {LLMC_RT_BINARY_##Name, #Name}
    static const named_kind kinds[] = {BINARY_KIND(Add), BINARY_KIND(Sub), BINARY_KIND(Mul),
                                       BINARY_KIND(Div), BINARY_KIND(Max), BINARY_KIND(Min),
                                       BINARY_KIND(SwiGLU)};
    enum { M = 6, D = 19 };
    float a[M * D], bv[M * D], w[D], y[M * D], yw[M * D];
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        for (int i = 0; i < M * D; i++) {
            a[i] = frand(-2.0f, 2.0f);
            bv[i] = frand(0.5f, 2.0f) * (rand() % 2 ? 1.0f : -1.0f);
        }
        for (int i = 0; i < D; i++)
            w[i] = frand(0.5f, 2.0f);
        sg_build b;
        sg_begin(&b, "pair", M, 2, 2);
        f32_tensor(&b, "a", NULL, DIMS(1, M, D));
        f32_tensor(&b, "b", NULL, DIMS(1, M, D));
        f32_tensor(&b, "y", NULL, DIMS(1, M, D));
        f32_tensor(&b, "yw", NULL, DIMS(1, M, D));
        f32_tensor(&b, "w", w, DIMS(D));
        add_op(&b, LLMC_RT_OP_Binary, kinds[k].kind, "ab", IN(0, 1), IN(2));
        add_op(&b, LLMC_RT_OP_Binary, kinds[k].kind, "aw", IN(0, 4), IN(3));
        void *graph = NULL, *io[4] = {a, bv, y, yw};
        double worst = 0;
        llmc_rt_status st = dt->prepare(dt->ctx, &b.sg, &graph, &err);
        if (!st)
            st = run(dt, graph, io);
        for (int i = 0; i < M * D; i++) {
            double want = binary_ref(kinds[k].kind, a[i], bv[i]);
            double want_w = binary_ref(kinds[k].kind, a[i], w[i % D]);
            worst = fmax(worst, ratio(y[i], want, fabs(want) + 1e-30));
            worst = fmax(worst, ratio(yw[i], want_w, fabs(want_w) + 1e-30));
        }
        CHECK(st == LLMC_RT_OK && worst <= 1.0, "Binary %s, equal dims and a broadcast weight, "
              "within 1e-5 of double (worst %.3g)", kinds[k].name, worst);
        dt->release(dt->ctx, graph);
    }
}

/* x [1, m, d] -> LayerNorm(x, g, beta) -> Reshape [m * d] -> out.  g > 0
 * and beta >= 1 keep every output away from zero (no cancellation). */
static void test_layernorm_reshape(const llmc_rt_delegate *dt)
{
    enum { M = 7, D = 33 };
    float x[M * D], g[D], beta[D], out[M * D];
    for (int i = 0; i < M * D; i++)
        x[i] = frand(-3.0f, 1.0f);
    for (int i = 0; i < D; i++) {
        g[i] = frand(0.1f, 0.3f);
        beta[i] = frand(1.0f, 1.5f);
    }
    sg_build b;
    sg_begin(&b, "ln", M, 1, 1);
    f32_tensor(&b, "x", NULL, DIMS(1, M, D));
    f32_tensor(&b, "out", NULL, DIMS(M * D));
    f32_tensor(&b, "n", NULL, DIMS(1, M, D));
    f32_tensor(&b, "g", g, DIMS(D));
    f32_tensor(&b, "beta", beta, DIMS(D));
    add_op(&b, LLMC_RT_OP_LayerNorm, 0, "ln", IN(0, 3, 4), IN(2))->epsilon = 1e-3f;
    add_op(&b, LLMC_RT_OP_Reshape, 0, "flat", IN(2), IN(1));
    void *graph = NULL, *io[2] = {x, out};
    llmc_rt_status st = dt->prepare(dt->ctx, &b.sg, &graph, &err);
    if (!st)
        st = run(dt, graph, io);
    double worst = 0;
    for (int r = 0; r < M; r++) {
        double mean = 0, var = 0;
        for (int j = 0; j < D; j++)
            mean += x[r * D + j] / (double)D;
        for (int j = 0; j < D; j++)
            var += (x[r * D + j] - mean) * (x[r * D + j] - mean) / D;
        for (int j = 0; j < D; j++) {
            double want = (x[r * D + j] - mean) / sqrt(var + 1e-3) * g[j] + beta[j];
            worst = fmax(worst, ratio(out[r * D + j], want, fabs(want)));
        }
    }
    CHECK(st == LLMC_RT_OK && worst <= 1.0, "LayerNorm (scale, bias) then Reshape within 1e-5 "
          "of double (worst %.3g)", worst);
    dt->release(dt->ctx, graph);
}

/* x -> QuantizeRows(scale 1/4) -> Linear with W = 127/128 I: y = q * 127/512
 * exactly, so every q the delegate computed is read back.  x * 4 lands on
 * ties k + 0.5 (half to even), on +-127.5 and beyond (clamped), on +-0. */
static void test_quantize_rounding(const llmc_rt_delegate *dt)
{
    enum { M = 3, K = 16 };
    static const float edges[K] = {126.5f, -126.5f, 127.4f, -127.4f, 127.5f,  -127.5f,
                                   128.0f, -128.0f, 1e3f,   -1e3f,   0.0f,    -0.0f,
                                   0.49f,  -0.5f,   1.5f,   2.5f};
    float x[M * K], y[M * K], W[K * K] = {0};
    for (int j = 0; j < K; j++) {
        x[j] = ((float)(j - 8) + 0.5f) / 4.0f;
        x[K + j] = edges[j] / 4.0f;
        x[2 * K + j] = frand(-40.0f, 40.0f);
        W[j * K + j] = 127.0f / 128.0f;
    }
    rt_qweight_shape ws;
    rt_qweight_shape_init(&ws, 8, hp, lp, K, K, per_channel_group(K));
    uint8_t *packed = pack_weights(W, &ws);
    sg_build b;
    sg_begin(&b, "round", M, 1, 1);
    f32_tensor(&b, "x", NULL, DIMS(M, K));
    f32_tensor(&b, "y", NULL, DIMS(M, K));
    llmc_rt_sg_tensor xq = {"xq", LLMC_RT_I8, LLMC_RT_LAYOUT_QActTiles, 2, {M, K}, 0, NULL, 32, 4, 4};
    add_tensor(&b, &xq);
    llmc_rt_sg_tensor w = qweight_desc("eye", &ws, packed);
    add_tensor(&b, &w);
    add_op(&b, LLMC_RT_OP_QuantizeRows, 0, "q", IN(0), IN(2))->scale = 0.25f;
    add_op(&b, LLMC_RT_OP_Linear, 0, "eye", IN(2, 3), IN(1));
    void *graph = NULL, *io[2] = {x, y};
    llmc_rt_status st = dt->prepare(dt->ctx, &b.sg, &graph, &err);
    if (!st)
        st = run(dt, graph, io);
    bool exact = true;
    float inv = 1.0f / 0.25f;
    for (int i = 0; i < M * K; i++) {
        float q = nearbyintf(x[i] * inv);
        q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
        exact &= y[i] == q * (127.0f / 512.0f);
    }
    CHECK(st == LLMC_RT_OK && exact, "QuantizeRows: ties to even, +-127.5 and beyond clamped, "
          "every q the reference's (read back through an identity W)");
    dt->release(dt->ctx, graph);
    free(packed);
}

/* ---- the job protocol --------------------------------------------------------- */

static void test_polling_and_busy(const llmc_rt_delegate *dt)
{
    chain c;
    chain_init(&c, 64, per_channel_group(37));
    void *graph = NULL;
    int finished = 0;
    CHECK(dt->wait(dt->ctx, 0, &finished, &err) == LLMC_RT_OK && finished == 1,
          "wait with no job in flight reports finished at once");
    if (dt->prepare(dt->ctx, &c.b.sg, &graph, &err)) {
        CHECK(0, "the chain prepares: %s", err.msg);
        chain_free(&c);
        return;
    }
    llmc_rt_status first = run(dt, graph, c.io);
    unsigned char *alone = malloc(c.out_bytes);
    memcpy(alone, c.out, c.out_bytes);

    memset(c.out, 0xff, c.out_bytes);
    llmc_rt_status st = dt->execute(dt->ctx, graph, c.io, &err);
    long polls = 0;
    finished = 0;
    while (st == LLMC_RT_OK && !finished && polls < 100000000L) {
        st = dt->wait(dt->ctx, 0, &finished, &err);
        polls++;
    }
    CHECK(first == LLMC_RT_OK && st == LLMC_RT_OK && finished &&
          !memcmp(c.out, alone, c.out_bytes),
          "wait(block = 0) polled %ld times until finished; the outputs are the run's", polls);
    CHECK(dt->wait(dt->ctx, 0, &finished, &err) == LLMC_RT_OK && finished,
          "a finished job is reported, then nothing is in flight");

    memset(c.out, 0xff, c.out_bytes);
    st = dt->execute(dt->ctx, graph, c.io, &err);
    llmc_rt_status busy = dt->execute(dt->ctx, graph, c.io, &err);
    CHECK(st == LLMC_RT_OK && busy == LLMC_RT_E_DELEGATE && strstr(err.msg, "busy") &&
          strstr(err.msg, "subgraph 7 'block0'"),
          "a second execute before wait is refused: %s", err.msg);
    finished = 0;
    st = dt->wait(dt->ctx, 1, &finished, &err);
    CHECK(st == LLMC_RT_OK && finished && !memcmp(c.out, alone, c.out_bytes),
          "wait(block = 1) returns the first job finished, its outputs intact");
    memset(c.out, 0xff, c.out_bytes);
    CHECK(run(dt, graph, c.io) == LLMC_RT_OK && !memcmp(c.out, alone, c.out_bytes),
          "after wait the delegate takes the next execute");
    free(alone);
    dt->release(dt->ctx, graph);
    chain_free(&c);
}

/* The outputs of a chain run alone on a fresh delegate. */
static unsigned char *outputs_alone(chain *c)
{
    llmc_ref_delegate *d = llmc_ref_delegate_create();
    llmc_rt_delegate dt;
    llmc_ref_delegate_table(d, &dt);
    void *graph = NULL;
    unsigned char *bytes = NULL;
    memset(c->out, 0xff, c->out_bytes);
    if (!dt.prepare(dt.ctx, &c->b.sg, &graph, &err) && !run(&dt, graph, c->io)) {
        bytes = malloc(c->out_bytes);
        memcpy(bytes, c->out, c->out_bytes);
    }
    dt.release(dt.ctx, graph);
    llmc_ref_delegate_destroy(d);
    return bytes;
}

static void test_two_graphs(const llmc_rt_delegate *dt)
{
    chain a, b;
    chain_init(&a, 5, per_channel_group(37));
    chain_init(&b, 64, per_channel_group(37));
    unsigned char *alone_a = outputs_alone(&a), *alone_b = outputs_alone(&b);
    void *ga = NULL, *gb = NULL;
    bool ok = alone_a && alone_b && !dt->prepare(dt->ctx, &a.b.sg, &ga, &err) &&
              !dt->prepare(dt->ctx, &b.b.sg, &gb, &err);
    for (int turn = 0; turn < 4 && ok; turn++) {
        chain *c = turn % 2 ? &b : &a;
        memset(c->out, 0xff, c->out_bytes);
        ok = run(dt, turn % 2 ? gb : ga, c->io) == LLMC_RT_OK &&
             !memcmp(c->out, turn % 2 ? alone_b : alone_a, c->out_bytes);
    }
    CHECK(ok, "two graphs (5 and 64 rows) prepared together and run in turns, A B A B: each "
          "run's outputs are the bytes of that graph run alone");
    dt->release(dt->ctx, ga);
    dt->release(dt->ctx, gb);
    free(alone_a);
    free(alone_b);
    chain_free(&a);
    chain_free(&b);
}

static void test_last_run(void)
{
    llmc_ref_delegate *d = llmc_ref_delegate_create();
    llmc_rt_delegate dt;
    llmc_ref_delegate_table(d, &dt);
    uint64_t start = 1, end = 1;
    llmc_ref_delegate_last_run(d, &start, &end);
    CHECK(start == 0 && end == 0, "before any run the last run is 0, 0");
    chain c;
    chain_init(&c, 64, per_channel_group(37));
    void *graph = NULL;
    llmc_rt_status st = dt.prepare(dt.ctx, &c.b.sg, &graph, &err);
    uint64_t before = now_ns();
    if (!st)
        st = run(&dt, graph, c.io);
    uint64_t after = now_ns();
    llmc_ref_delegate_last_run(d, &start, &end);
    CHECK(st == LLMC_RT_OK && before <= start && start <= end && end <= after,
          "the run's stamps lie in order inside the caller's execute .. wait (%llu ns on the "
          "delegate's thread of %llu)", (unsigned long long)(end - start),
          (unsigned long long)(after - before));
    dt.release(dt.ctx, graph);
    chain_free(&c);
    llmc_ref_delegate_destroy(d);
}

/* ---- refusals ---------------------------------------------------------------- */

static bool refused(const llmc_rt_delegate *dt, const llmc_rt_subgraph *sg, const char *op,
                    const char *why)
{
    void *graph = (void *)1;
    llmc_rt_status st = dt->prepare(dt->ctx, sg, &graph, &err);
    return graph == NULL && fails_naming(st, LLMC_RT_E_DELEGATE, op, why) &&
           strstr(err.msg, "subgraph 7 '");
}

static void test_refusals(const llmc_rt_delegate *dt)
{
    chain c;
    chain_init(&c, 5, per_channel_group(37));
    c.b.op[1].scale = 0.0f;
    CHECK(refused(dt, &c.b.sg, "op 1 (QuantizeRows 'quant')", "per-tensor int8 only"),
          "QuantizeRows with scale 0 (per row): %s", err.msg);
    chain_free(&c);

    chain_init(&c, 5, 32);
    CHECK(refused(dt, &c.b.sg, "op 2 (Linear 'fc')", "per-channel weights only"),
          "W in groups of 32 < K 37: %s", err.msg);
    chain_free(&c);

    chain_init(&c, 5, per_channel_group(37));
    c.b.op[3].code = LLMC_RT_OP_Attention;
    CHECK(refused(dt, &c.b.sg, "op 3 (Attention 'swiglu_u')", "does not run"),
          "an Attention op: %s", err.msg);
    chain_free(&c);

    sg_build b;
    sg_begin(&b, "leak", 4, 1, 1);
    f32_tensor(&b, "x", NULL, DIMS(4, 16));
    llmc_rt_sg_tensor xq = {"xq", LLMC_RT_I8, LLMC_RT_LAYOUT_QActTiles, 2, {4, 16}, 0, NULL, 16, 4, 4};
    add_tensor(&b, &xq);
    add_op(&b, LLMC_RT_OP_QuantizeRows, 0, "quant_out", IN(0), IN(1))->scale = 0.5f;
    CHECK(refused(dt, &b.sg, "op 0 (QuantizeRows 'quant_out')", "'xq' is a subgraph output"),
          "a QActTiles tensor among the outputs: %s", err.msg);
}

int main(void)
{
    const rt_target_info *avx2 = rt_target_info_of(TARGET_AVX2);
    hp = avx2->q_hp;
    lp = avx2->q_lp;
    srand(3);
    test_weight_rows();

    llmc_ref_delegate *d = llmc_ref_delegate_create();
    CHECK(d != NULL, "the delegate starts its thread");
    if (!d)
        return TAP_DONE();
    llmc_rt_delegate dt;
    llmc_ref_delegate_table(d, &dt);
    CHECK(dt.ctx == d && dt.prepare && dt.execute && dt.wait && dt.release,
          "the table is filled, ctx the delegate");
    test_chain(d);
    test_unary_kinds(&dt);
    test_binary_kinds(&dt);
    test_layernorm_reshape(&dt);
    test_quantize_rounding(&dt);
    test_polling_and_busy(&dt);
    test_two_graphs(&dt);
    test_refusals(&dt);
    llmc_ref_delegate_destroy(d);
    test_last_run();
    return TAP_DONE();
}
