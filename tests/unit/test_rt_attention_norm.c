/* The fused Attention kernel's q/k RMSNorm, per head ([head_dim] weights,
 * Qwen3) and over the whole q and k rows ([heads*head_dim] and
 * [kv_heads*head_dim], OLMo2), with each kernel table this CPU runs:
 *   - against a double-precision reference written out plainly here
 *     (normalize, rotate-half RoPE, causal softmax attention), over calls
 *     that prefill, decode and cross cache chunk boundaries, for odd head
 *     dims, GQA and MQA, partial rotary;
 *   - bitwise the same as the RMSNorm op's kernel (k_rmsnorm) applied to
 *     q and k first, then the kernel without norms: the unfused graph's
 *     numbers;
 *   - bitwise the same on a thread pool as on one thread. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "kernel_tables.h"
#include "parallel_orders.h"
#include "tap.h"

enum { CHUNK = 8, ROWS = 24, MAXW = 128 }; /* positions per cache chunk, table rows, widest row */
#define EPS 1e-6f

typedef struct {
    int H, G, D, R;
    bool whole; /* norms over the whole rows, else per head */
    const char *what;
} norm_case;

/* A kernel cache of ROWS positions in chunks of CHUNK. */
typedef struct {
    uint8_t *pool;
    uint32_t slot[ROWS / CHUNK];
    uint64_t slot_bytes;
} cache_mem;

static float frand(void)
{
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static void cache_init(cache_mem *m, const norm_case *c)
{
    m->slot_bytes = ((uint64_t)2 * c->G * CHUNK * c->D * sizeof(float) + 63) / 64 * 64;
    m->pool = calloc(ROWS / CHUNK, m->slot_bytes);
    for (int i = 0; i < ROWS / CHUNK; i++) /* chunks in reverse order */
        m->slot[i] = (uint32_t)(ROWS / CHUNK - 1 - i);
}

/* The norm span of a row of `heads` heads: one head, or the whole row. */
static int span_of(const norm_case *c, int heads)
{
    return c->whole ? heads * c->D : c->D;
}

/* A row of `heads` heads in double: RMS-normalized by spans with w, then
 * each head rotated at position pos (cos, sin [ROWS][R]). */
static void ref_row(const norm_case *c, const float *x, int heads, const float *w, int pos,
                    const float *cos_t, const float *sin_t, double *y)
{
    int D = c->D, R = c->R, span = span_of(c, heads);
    double n[MAXW];
    for (int s0 = 0; s0 < heads * D; s0 += span) {
        double ss = 0;
        for (int i = 0; i < span; i++)
            ss += (double)x[s0 + i] * x[s0 + i];
        double inv = 1.0 / sqrt(ss / span + (double)EPS);
        for (int i = 0; i < span; i++)
            n[s0 + i] = x[s0 + i] * inv * w[i];
    }
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < D; i++) {
            const double *xh = n + h * D;
            double rot = i < R / 2 ? -xh[i + R / 2] : i < R ? xh[i - R / 2] : 0;
            y[h * D + i] = i < R ? xh[i] * cos_t[pos * R + i] + rot * sin_t[pos * R + i] : xh[i];
        }
}

/* o [S, H*D] in double for rows appended at P; K, V [ROWS][G*D] grow. */
static void ref_call(const norm_case *c, const float *q, const float *k, const float *v,
                     const float *qw, const float *kw, const float *cos_t, const float *sin_t,
                     int S, int P, double *K, double *V, double *o)
{
    int H = c->H, G = c->G, D = c->D;
    double qr[MAXW], score[ROWS];
    for (int s = 0; s < S; s++) {
        ref_row(c, k + s * G * D, G, kw, P + s, cos_t, sin_t, K + (P + s) * G * D);
        for (int i = 0; i < G * D; i++)
            V[(P + s) * G * D + i] = v[s * G * D + i];
    }
    for (int s = 0; s < S; s++) {
        ref_row(c, q + s * H * D, H, qw, P + s, cos_t, sin_t, qr);
        for (int h = 0; h < H; h++) {
            int g = h / (H / G);
            double mx = -INFINITY, sum = 0;
            for (int t = 0; t <= P + s; t++) {
                score[t] = 0;
                for (int i = 0; i < D; i++)
                    score[t] += qr[h * D + i] * K[(t * G + g) * D + i];
                score[t] /= sqrt((double)D);
                mx = fmax(mx, score[t]);
            }
            for (int t = 0; t <= P + s; t++)
                sum += score[t] = exp(score[t] - mx);
            for (int i = 0; i < D; i++) {
                double acc = 0;
                for (int t = 0; t <= P + s; t++)
                    acc += score[t] * V[(t * G + g) * D + i];
                o[(s * H + h) * D + i] = acc / sum;
            }
        }
    }
}

typedef struct {
    const norm_case *c;
    const rt_kernels *kt;
    float *cos_t, *sin_t, qw[MAXW], kw[MAXW];
} norm_run;

/* One kernel call: with the norms (qn, kn non-NULL) or without. */
static llmc_rt_status kernel_call(const norm_run *n, cache_mem *m, const rt_view *qn,
                                  const rt_view *kn, float *q, float *k, float *v, int S, int P,
                                  float *o, const rt_parallel *par, llmc_rt_error *err)
{
    const norm_case *c = n->c;
    rt_kv_cache cache = {m->pool, m->slot, m->slot_bytes, CHUNK, LLMC_RT_F32};
    rt_attention_attrs a = {c->H, c->G, c->D, c->R, 1.0f / sqrtf((float)c->D), qn, kn, EPS, 0, 0};
    rt_view qv = {LLMC_RT_F32, 3, {1, S, c->H * c->D}, q}, kv = {LLMC_RT_F32, 3, {1, S, c->G * c->D}, k},
            vv = {LLMC_RT_F32, 3, {1, S, c->G * c->D}, v}, ov = {LLMC_RT_F32, 3, {1, S, c->H * c->D}, o},
            cs = {LLMC_RT_F32, 2, {ROWS, c->R}, n->cos_t}, sn = {LLMC_RT_F32, 2, {ROWS, c->R}, n->sin_t};
    return k_attention_kernels(n->kt, &a, &qv, &kv, &vv, c->R ? &cs : NULL, c->R ? &sn : NULL,
                               &cache, P, &ov, par, err);
}

/* x [rows of heads*D] normalized by the RMSNorm op's kernel into y. */
static llmc_rt_status op_norm(const norm_run *n, const float *x, int rows, int heads, const float *w,
                              float *y, llmc_rt_error *err)
{
    int span = span_of(n->c, heads), count = rows * heads * n->c->D / span;
    rt_view xv = {LLMC_RT_F32, 2, {count, span}, (void *)x}, wv = {LLMC_RT_F32, 1, {span}, (void *)w},
            yv = {LLMC_RT_F32, 2, {count, span}, y};
    return k_rmsnorm(n->kt, &xv, &wv, NULL, EPS, &yv, NULL, err);
}

static void test_case(const rt_kernels *kt, const norm_case *c)
{
    static const int calls[][2] = {{7, 0}, {1, 7}, {5, 8}, {5, 13}, {1, 18}}; /* (S, P) */
    norm_run n = {c, kt, malloc(sizeof(float) * ROWS * (size_t)c->R + 1),
                  malloc(sizeof(float) * ROWS * (size_t)c->R + 1), {0}, {0}};
    for (int p = 0; p < ROWS; p++)
        for (int i = 0; i < c->R / 2; i++) {
            double ang = p * pow(100.0, -2.0 * i / c->R);
            n.cos_t[p * c->R + i] = n.cos_t[p * c->R + i + c->R / 2] = (float)cos(ang);
            n.sin_t[p * c->R + i] = n.sin_t[p * c->R + i + c->R / 2] = (float)sin(ang);
        }
    int qs = span_of(c, c->H), ks = span_of(c, c->G), HD = c->H * c->D, GD = c->G * c->D;
    for (int i = 0; i < MAXW; i++) { /* weights near 1, as trained ones are */
        n.qw[i] = 1 + 0.5f * frand();
        n.kw[i] = 1 + 0.5f * frand();
    }
    rt_view qn = {LLMC_RT_F32, 1, {qs}, n.qw}, kn = {LLMC_RT_F32, 1, {ks}, n.kw};
    cache_mem fused, unfused, pooled;
    cache_init(&fused, c);
    cache_init(&unfused, c);
    cache_init(&pooled, c);
    double *K = malloc(sizeof(double) * ROWS * (size_t)GD), *V = malloc(sizeof(double) * ROWS * (size_t)GD);
    double worst = 0;
    bool ok = true, same_op = true, same_pool = true;
    llmc_rt_error err = {0};
    rt_parallel par = parallel_number(PARALLELS - 1);
    for (size_t i = 0; ok && i < sizeof calls / sizeof *calls; i++) {
        int S = calls[i][0], P = calls[i][1];
        float q[8 * MAXW], k[8 * MAXW], v[8 * MAXW], qn_x[8 * MAXW], kn_x[8 * MAXW];
        float o[8 * MAXW], o_op[8 * MAXW], o_pool[8 * MAXW];
        double want[8 * MAXW];
        for (int j = 0; j < S * HD; j++)
            q[j] = 3 * frand();
        for (int j = 0; j < S * GD; j++) {
            k[j] = 3 * frand();
            v[j] = frand();
        }
        ok = !kernel_call(&n, &fused, &qn, &kn, q, k, v, S, P, o, NULL, &err) &&
             !kernel_call(&n, &pooled, &qn, &kn, q, k, v, S, P, o_pool, &par, &err) &&
             !op_norm(&n, q, S, c->H, n.qw, qn_x, &err) && !op_norm(&n, k, S, c->G, n.kw, kn_x, &err) &&
             !kernel_call(&n, &unfused, NULL, NULL, qn_x, kn_x, v, S, P, o_op, NULL, &err);
        if (!ok)
            break;
        ref_call(c, q, k, v, n.qw, n.kw, n.cos_t, n.sin_t, S, P, K, V, want);
        for (int j = 0; j < S * HD; j++)
            worst = fmax(worst, fabs(o[j] - want[j]) / (1 + fabs(want[j])));
        same_op = same_op && !memcmp(o, o_op, sizeof(float) * (size_t)(S * HD));
        same_pool = same_pool && !memcmp(o, o_pool, sizeof(float) * (size_t)(S * HD));
    }
    CHECK(ok && worst < 2e-5, "%s (%s): H %d G %d D %d rotary %d, norms [%d] [%d]: within %.2g of "
          "double over prefill and decode calls %s", c->what, kt ? kt->isa : "portable", c->H, c->G,
          c->D, c->R, qs, ks, worst, ok ? "" : err.msg);
    CHECK(ok && same_op, "%s (%s): the bits of the RMSNorm op then Attention without norms", c->what,
          kt ? kt->isa : "portable");
    CHECK(ok && same_pool, "%s (%s): the same bits on a pool of 2 threads", c->what, kt ? kt->isa : "portable");
    parallel_done(&par);
    free(fused.pool);
    free(unfused.pool);
    free(pooled.pool);
    free(K);
    free(V);
    free(n.cos_t);
    free(n.sin_t);
}

int main(void)
{
    static const norm_case cases[] = {
        {6, 2, 10, 6, true, "GQA 6/2, odd rows of 60/20, partial rotary 6 of 10, whole rows"},
        {3, 3, 7, 4, true, "MHA 3, head_dim 7 (rows of 21), rotary 4, whole rows"},
        {4, 1, 12, 12, true, "MQA 4/1, full rotary, whole rows"},
        {5, 1, 9, 0, true, "MQA 5/1, no RoPE, whole rows"},
        {6, 2, 10, 6, false, "GQA 6/2, head_dim 10, partial rotary, per head"},
    };
    /* the portable loops and the x86 tables; the norm is the shared
     * driver's, so NEON's table runs the same code */
    const rt_kernels *tables[3];
    int n_tables = x86_tables(tables);
    srand(11);
    for (int t = 0; t < n_tables; t++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            test_case(tables[t], &cases[i]);
    return TAP_DONE();
}
