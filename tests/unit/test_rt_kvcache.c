/* KV caches in float16 and int8 (Plan.kv_cache_dtype):
 *   - rt_float_to_half / rt_half_to_float (quant_format.h) against gcc's _Float16 conversions
 *     (every binary16 value back to float; random and edge floats to
 *     binary16, nearest even, subnormals, overflow, NaN);
 *   - k_attention_kernels over float32, float16 and int8 caches filled by
 *     the kernel itself (a prefix call, then S rows at P), with the portable
 *     loops and the AVX2 ones, against softmax(q.K) V in double over the rows
 *     rounded here as the format says (_Float16; int8 = round(x * 127 /
 *     max|x|) times max|x| / 127): odd head dims, GQA, P not a multiple of
 *     the chunk, prefill after a prefix and from 0, decode with the key split;
 *     bitwise the same bits for fake 1/2/3 threads and a pool of 2;
 *   - the stored rows have the sizes of rt_kv_row_bytes (the int8 scale
 *     beside its row) and a cache dtype the kernel does not know is refused. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_table.h"
#if defined(__x86_64__)
#include "kernels/x86/x86_simd.h"
#endif
#include "llmc_threads.h"
#include "parallel_orders.h"
#include "tap.h"
#include "tensor_traits.h"

static llmc_rt_error err;

static float frand(void)
{
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

/* ---- binary16 conversions ---------------------------------------------- */

static uint16_t half_bits(_Float16 h)
{
    uint16_t b;
    memcpy(&b, &h, sizeof b);
    return b;
}

static void test_f16_conversions(void)
{
    int bad_back = 0, bad_to = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        uint16_t h16 = (uint16_t)b;
        _Float16 h;
        memcpy(&h, &h16, sizeof h);
        float want = (float)h, got = rt_half_to_float(h16);
        bad_back += isnan(want) ? !isnan(got) : memcmp(&want, &got, sizeof got) != 0;
    }
    CHECK(!bad_back, "every binary16 value converts back to float exactly (%d differ)", bad_back);
    static const float edge[] = {0.0f, -0.0f, 1.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f,
                                 1e10f, INFINITY, -INFINITY, 6.103515625e-05f, 6.1e-05f,
                                 5.9604645e-08f, 2.98e-08f, 2.9802322e-08f, 1e-30f, FLT_MAX,
                                 1.00048828125f, 1.00146484375f, -2049.0f, 2051.0f};
    int n = (int)(sizeof edge / sizeof edge[0]);
    for (int i = 0; i < n + 400000; i++) {
        float x;
        if (i < n) {
            x = edge[i];
        } else {
            uint32_t r = (uint32_t)rand() << 16 ^ (uint32_t)rand();
            memcpy(&x, &r, sizeof x);
            if (i % 2) /* half of them inside binary16's range */
                x = ldexpf(frand(), rand() % 44 - 28);
        }
        uint16_t want = half_bits((_Float16)x), got = rt_float_to_half(x);
        bad_to += isnan(x) ? (got & 0x7C00u) != 0x7C00u || !(got & 0x3FFu) : want != got;
    }
    CHECK(!bad_to, "float -> binary16 rounds like _Float16 on %d values (%d differ)", n + 400000,
          bad_to);
}

/* ---- attention over a converted cache ----------------------------------- */

typedef struct {
    int64_t H, G, D, R, chunk, P, S;
} kv_case;

typedef struct {
    kv_case c;
    int dtype;
    float *q, *k, *v, *cs, *sn; /* rows for positions [0, P + S) */
    uint8_t *pool;
    uint32_t *slot;
    int64_t n_chunks;
    uint64_t slot_bytes;
} kv_data;

static float *rand_floats(int64_t n)
{
    float *p = malloc(sizeof *p * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

static void kv_make(kv_data *d, const kv_case *c, int dtype)
{
    int64_t ctx = c->P + c->S, R = c->R ? c->R : 1;
    d->c = *c;
    d->dtype = dtype;
    d->q = rand_floats(ctx * c->H * c->D);
    d->k = rand_floats(ctx * c->G * c->D);
    d->v = rand_floats(ctx * c->G * c->D);
    d->cs = malloc(sizeof(float) * (size_t)(ctx * R));
    d->sn = malloc(sizeof(float) * (size_t)(ctx * R));
    for (int64_t p = 0; p < ctx; p++)
        for (int64_t i = 0; i < c->R; i++) {
            double theta = (double)p * pow(10000.0, -2.0 * (double)(i % (c->R / 2)) / (double)c->R);
            d->cs[p * c->R + i] = (float)cos(theta);
            d->sn[p * c->R + i] = (float)sin(theta);
        }
    d->n_chunks = (ctx + c->chunk - 1) / c->chunk;
    d->slot_bytes = (c->chunk * rt_kv_position_bytes(dtype, c->G, c->D) + 63) / 64 * 64;
    d->pool = malloc((size_t)(d->slot_bytes * (uint64_t)d->n_chunks));
    d->slot = malloc(sizeof *d->slot * (size_t)d->n_chunks);
    for (int64_t i = 0; i < d->n_chunks; i++) /* slots out of order */
        d->slot[i] = (uint32_t)(d->n_chunks - 1 - i);
}

static void kv_free(kv_data *d)
{
    free(d->q);
    free(d->k);
    free(d->v);
    free(d->cs);
    free(d->sn);
    free(d->pool);
    free(d->slot);
}

/* One call over positions [P0, P0 + S) (rows of d at those positions):
 * k_attention_kernels, or k_attention_loops with *kv when kv is not NULL. */
static llmc_rt_status kv_call(const rt_kernels *kt, const llmc_rt_kv_fn *kv, kv_data *d,
                              int64_t P0, int64_t S, float *o, const rt_parallel *par)
{
    const kv_case *c = &d->c;
    rt_kv_cache cache = {d->pool, d->slot, d->slot_bytes, c->chunk, d->dtype};
    rt_attention_attrs a = {c->H, c->G, c->D, c->R, 1.0f / sqrtf((float)c->D), NULL, NULL, 0.0f, 0, 0.0f};
    rt_view vq = {LLMC_RT_F32, 3, {1, S, c->H * c->D}, d->q + P0 * c->H * c->D},
            vk = {LLMC_RT_F32, 3, {1, S, c->G * c->D}, d->k + P0 * c->G * c->D},
            vv = {LLMC_RT_F32, 3, {1, S, c->G * c->D}, d->v + P0 * c->G * c->D},
            vc = {LLMC_RT_F32, 2, {c->P + c->S, c->R}, d->cs},
            vs = {LLMC_RT_F32, 2, {c->P + c->S, c->R}, d->sn},
            vo = {LLMC_RT_F32, 3, {1, S, c->H * c->D}, o};
    if (kv)
        return k_attention_loops(kt, *kv, &a, &vq, &vk, &vv, c->R ? &vc : NULL,
                                 c->R ? &vs : NULL, &cache, P0, &vo, par, &err);
    return k_attention_kernels(kt, &a, &vq, &vk, &vv, c->R ? &vc : NULL, c->R ? &vs : NULL,
                               &cache, P0, &vo, par, &err);
}

/* A fresh cache: the prefix [0, P) in one call, then the S rows at P into o. */
static bool kv_run(const rt_kernels *kt, kv_data *d, float *o, const rt_parallel *par)
{
    const kv_case *c = &d->c;
    float *prefix = malloc(sizeof *prefix * (size_t)(c->P * c->H * c->D + 1));
    memset(d->pool, 0xA5, (size_t)(d->slot_bytes * (uint64_t)d->n_chunks));
    bool ok = (c->P == 0 || kv_call(kt, NULL, d, 0, c->P, prefix, par) == LLMC_RT_OK) &&
              kv_call(kt, NULL, d, c->P, c->S, o, par) == LLMC_RT_OK;
    free(prefix);
    return ok;
}

/* Row x [D] as the cache stores it, back in double: binary16 through
 * _Float16; int8 as round(x * 127 / max|x|) times max|x| / 127. */
static void stored_ref(const float *x, int64_t D, int row_dtype, double *y)
{
    float amax = 0.0f;
    for (int64_t i = 0; i < D; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    for (int64_t i = 0; i < D; i++) {
        if (row_dtype == LLMC_RT_F16)
            y[i] = (double)(float)(_Float16)x[i];
        else if (row_dtype == LLMC_RT_I8)
            y[i] = amax > 0.0f ? (double)nearbyintf(x[i] * (127.0f / amax)) * (double)(amax / 127.0f)
                               : 0.0;
        else
            y[i] = x[i];
    }
}

/* K (rotated by the kernel's own k_rope_row) or V row of head g at t. */
static void kv_ref(const kv_data *d, int which, int64_t g, int64_t t, double *y)
{
    const kv_case *c = &d->c;
    float rot[1024];
    const float *x = (which ? d->v : d->k) + (t * c->G + g) * c->D;
    if (!which && c->R) {
        k_rope_row(x, rot, c->D, c->R, d->cs + t * c->R, d->sn + t * c->R);
        x = rot;
    }
    stored_ref(x, c->D, rt_kv_row_dtype(d->dtype, which), y);
}

/* softmax(scale q.K) V of the S rows at P, double, max subtracted. */
static double *attention_ref(const kv_data *d)
{
    const kv_case *c = &d->c;
    int64_t D = c->D, ctx = c->P + c->S;
    double *o = calloc((size_t)(c->S * c->H * D), sizeof *o), kv[1024];
    double *sc = malloc(sizeof *sc * (size_t)ctx), scale = 1.0f / sqrtf((float)D);
    float q[1024];
    for (int64_t s = 0; s < c->S; s++)
        for (int64_t h = 0; h < c->H; h++) {
            int64_t g = h / (c->H / c->G), pos = c->P + s;
            const float *qs = d->q + (pos * c->H + h) * D;
            double mx = -INFINITY, l = 0.0, *out = o + (s * c->H + h) * D;
            if (c->R)
                k_rope_row(qs, q, D, c->R, d->cs + pos * c->R, d->sn + pos * c->R);
            else
                memcpy(q, qs, sizeof(float) * (size_t)D);
            for (int64_t t = 0; t <= pos; t++) {
                kv_ref(d, 0, g, t, kv);
                sc[t] = 0.0;
                for (int64_t i = 0; i < D; i++)
                    sc[t] += q[i] * scale * kv[i];
                mx = fmax(mx, sc[t]);
            }
            for (int64_t t = 0; t <= pos; t++) {
                double p = exp(sc[t] - mx);
                l += p;
                kv_ref(d, 1, g, t, kv);
                for (int64_t i = 0; i < D; i++)
                    out[i] += p * kv[i];
            }
            for (int64_t i = 0; i < D; i++)
                out[i] /= l;
        }
    free(sc);
    return o;
}

static const char *dtype_name(int dtype)
{
    return dtype == LLMC_RT_F16 ? "f16" : dtype == LLMC_RT_I8 ? "int8" : "f32";
}

static void test_case(const rt_kernels *kt, const kv_case *c, int dtype)
{
    kv_data d;
    kv_make(&d, c, dtype);
    int64_t n = c->S * c->H * c->D;
    float *want = malloc(sizeof *want * (size_t)n), *got = malloc(sizeof *got * (size_t)n);
    bool ok = kv_run(kt, &d, want, NULL);
    double *ref = attention_ref(&d), worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(want[i] - ref[i]);
        worst = e == e ? fmax(worst, e) : INFINITY;
    }
    CHECK(ok && worst <= 2e-5, "%s cache, %s loops: H %d G %d D %d R %d chunk %d P %d S %d: "
          "max err %.2g vs double over the stored rows", dtype_name(dtype),
          kt ? kt->target : "portable", (int)c->H, (int)c->G, (int)c->D, (int)c->R, (int)c->chunk,
          (int)c->P, (int)c->S, worst);
    bool same = true;
    for (int i = 0; i < PARALLELS; i++) {
        rt_parallel par = parallel_number(i);
        memset(got, 0, sizeof *got * (size_t)n);
        same = same && kv_run(kt, &d, got, &par) && !memcmp(got, want, sizeof *got * (size_t)n);
        parallel_done(&par);
    }
    CHECK(ok && same, "%s cache, %s loops, P %d S %d: fake 1/2/3 threads and a pool of 2 give "
          "the serial bits", dtype_name(dtype), kt ? kt->target : "portable", (int)c->P, (int)c->S);
    free(want);
    free(got);
    free(ref);
    kv_free(&d);
}

/* The int8 row of head 0 at position 0 (K plane first): values, then the
 * scale at rt_kv_scale_offset; and an unknown cache dtype is refused. */
static void test_layout(void)
{
    kv_case c = {2, 1, 5, 0, 4, 0, 3};
    kv_data d;
    kv_make(&d, &c, LLMC_RT_I8);
    float o[2 * 5 * 3];
    bool ok = kv_run(NULL, &d, o, NULL);
    const uint8_t *row = d.pool + d.slot[0] * d.slot_bytes;
    float amax = 0.0f, scale;
    for (int i = 0; i < 5; i++)
        amax = fmaxf(amax, fabsf(d.k[i]));
    memcpy(&scale, row + 8, sizeof scale);
    bool values = true;
    for (int i = 0; i < 5; i++)
        values = values && (int8_t)row[i] == (int8_t)nearbyintf(d.k[i] * 127.0f / amax);
    CHECK(ok && rt_kv_row_bytes(LLMC_RT_I8, 0, 5) == 12 && rt_kv_row_bytes(LLMC_RT_I8, 1, 5) == 10 &&
              rt_kv_row_bytes(LLMC_RT_F16, 0, 5) == 10 && rt_kv_row_bytes(LLMC_RT_F32, 1, 5) == 20 &&
              scale == amax / 127.0f && values && (int8_t)row[5] == 0,
          "int8 K row: 5 values, padding, the scale at byte 8 (12 bytes a row; V rows fp16, 10)");
    d.dtype = 7;
    CHECK(!kv_run(NULL, &d, o, NULL) && strstr(err.msg, "dtype 7"),
          "a cache dtype the kernel does not know is refused: %s", err.msg);
    kv_free(&d);
}

static void test_all(const rt_kernels *kt)
{
    static const kv_case cases[] = {
        {14, 2, 64, 64, 64, 300, 1},  /* Qwen2-like decode: the key split */
        {4, 2, 33, 16, 16, 37, 1},    /* odd head dim, partial rope */
        {8, 2, 40, 40, 16, 50, 21},   /* prefill after a prefix, P % chunk != 0 */
        {4, 4, 24, 0, 32, 0, 70},     /* prefill from 0, MHA, no rope */
        {2, 1, 200, 100, 64, 90, 3},  /* a 64-column sweep plus an 8 and a tail */
        {3, 1, 300, 0, 16, 20, 2},    /* head_dim > 256: fewer rows widened at once */
    };
    static const int dtypes[] = {LLMC_RT_F32, LLMC_RT_F16, LLMC_RT_I8};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int t = 0; t < 3; t++)
            test_case(kt, &cases[i], dtypes[t]);
}

/* k_attention_loops takes the cache dtype's loops (the op resolver's KV
 * cache entry) and refuses another dtype's, or none. */
static void test_resolver_loops(void)
{
    static const kv_case c = {4, 2, 16, 0, 8, 0, 5};
    static const llmc_rt_kv_fn f16 = llmc_rt_kv_Float16, f32 = llmc_rt_kv_Float32;
    static const llmc_rt_kv_fn none = NULL;
    kv_data d;
    kv_make(&d, &c, LLMC_RT_F16);
    float want[5 * 4 * 16], got[5 * 4 * 16];
    llmc_rt_status st = kv_call(NULL, NULL, &d, 0, c.S, want, NULL);
    st = st ? st : kv_call(NULL, &f16, &d, 0, c.S, got, NULL);
    CHECK(st == LLMC_RT_OK && !memcmp(want, got, sizeof want),
          "k_attention_loops with llmc_rt_kv_Float16 on a float16 cache: k_attention_kernels' bits");
    st = kv_call(NULL, &f32, &d, 0, c.S, got, NULL);
    CHECK(st == LLMC_RT_E_EXEC && strstr(err.msg, "KV cache dtype 10 without its loops"),
          "the float32 loops on a float16 cache are refused: %s", err.msg);
    st = kv_call(NULL, &none, &d, 0, c.S, got, NULL);
    CHECK(st == LLMC_RT_E_EXEC, "no loops are refused: %s", err.msg);
    kv_free(&d);
}

int main(void)
{
    srand(17);
    test_resolver_loops();
    test_f16_conversions();
    test_layout();
    test_all(NULL);
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c"))
        test_all(&rt_kernels_avx2);
    else
        CHECK(true, "# SKIP this CPU has no AVX2/FMA/F16C: the AVX2 loops are not tested");
#endif
    return TAP_DONE();
}
