/* Reference fused Attention: RoPE on q and the new k, append to the chunked
 * KV cache, causal softmax(scale q.K) V per head, fp32.
 *
 * The softmax is the one-pass "online" form (Milakov & Gimelshein 2018; the
 * safe baseline FlashDecoding++ §3 starts from): a running maximum m and sum
 * l per query row; when a score exceeds m, the accumulated sum and the
 * output row are rescaled by exp(m_old - m_new), so no exp ever sees a
 * positive argument and nothing overflows for any score.  The output row
 * itself is the accumulator, so the kernel needs no scratch beyond one
 * head_dim row on the stack (the rotated, scaled query). */
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "rt_msg.h"

void k_rope_row(const float *x, float *y, int64_t d, int64_t rotary_dim, const float *cos,
                const float *sin)
{
    int64_t h = rotary_dim / 2;
    for (int64_t i = 0; i < rotary_dim; i++) {
        float rot = i < h ? -x[i + h] : x[i - h];
        y[i] = x[i] * cos[i] + rot * sin[i];
    }
    for (int64_t i = rotary_dim; i < d; i++)
        y[i] = x[i];
}

static bool dims_are(const rt_view *t, int64_t d0, int64_t d1, int64_t d2)
{
    return t->dtype == LLMC_RT_F32 && t->rank == 3 && t->dims[0] == d0 && t->dims[1] == d1 &&
           t->dims[2] == d2;
}

static llmc_rt_status check_views(const rt_attention_attrs *a, const rt_view *q,
                                  const rt_view *k, const rt_view *v, const rt_view *cos,
                                  const rt_view *sin, int64_t P, const rt_view *o,
                                  llmc_rt_error *err)
{
    int64_t S = q->rank == 3 ? q->dims[1] : 0;
    if (a->heads < 1 || a->kv_heads < 1 || a->heads % a->kv_heads || a->head_dim < 1 ||
        a->head_dim > RT_ATTN_MAX_HEAD_DIM || a->rotary_dim < 0 || a->rotary_dim % 2 ||
        a->rotary_dim > a->head_dim)
        return rt_fail(err, LLMC_RT_E_EXEC, "heads %d, kv_heads %d, head_dim %d, rotary_dim "
                       "%d are inconsistent", RT_N(a->heads, a->kv_heads, a->head_dim,
                                                   a->rotary_dim), NULL);
    if (!dims_are(q, 1, S, a->heads * a->head_dim) || !dims_are(o, 1, S, a->heads * a->head_dim) ||
        !dims_are(k, 1, S, a->kv_heads * a->head_dim) ||
        !dims_are(v, 1, S, a->kv_heads * a->head_dim))
        return rt_fail(err, LLMC_RT_E_EXEC, "q, o must be float [1, S, %d] and k, v float "
                       "[1, S, %d]", RT_N(a->heads * a->head_dim, a->kv_heads * a->head_dim),
                       NULL);
    if (a->rotary_dim == 0)
        return LLMC_RT_OK;
    if (!cos || !sin || cos->dtype != LLMC_RT_F32 || sin->dtype != LLMC_RT_F32 ||
        cos->rank != 2 || !k_same_dims(cos, sin) || cos->dims[0] < P + S ||
        cos->dims[1] != a->rotary_dim)
        return rt_fail(err, LLMC_RT_E_EXEC, "cos and sin must be float [>= P+S = %d, "
                       "rotary_dim %d]", RT_N(P + S, a->rotary_dim), NULL);
    return LLMC_RT_OK;
}

/* Row of kv head g at position t: K (which = 0) or V (which = 1). */
static float *cache_row(const rt_kv_cache *c, const rt_attention_attrs *a, int which,
                        int64_t g, int64_t t)
{
    float *chunk = (float *)(void *)(c->pool + c->slot[t / c->chunk] * c->slot_bytes);
    int64_t plane = a->kv_heads * c->chunk * a->head_dim;
    return chunk + which * plane + (g * c->chunk + t % c->chunk) * a->head_dim;
}

static void append_rows(const rt_attention_attrs *a, const rt_view *k, const rt_view *v,
                        const rt_view *cos, const rt_view *sin, const rt_kv_cache *c,
                        int64_t S, int64_t P)
{
    int64_t D = a->head_dim, width = a->kv_heads * D, rot = a->rotary_dim;
    for (int64_t s = 0; s < S; s++)
        for (int64_t g = 0; g < a->kv_heads; g++) {
            const float *ks = (const float *)k->data + s * width + g * D;
            const float *vs = (const float *)v->data + s * width + g * D;
            float *kd = cache_row(c, a, 0, g, P + s);
            if (rot)
                k_rope_row(ks, kd, D, rot, (const float *)cos->data + (P + s) * rot,
                           (const float *)sin->data + (P + s) * rot);
            else
                memcpy(kd, ks, (size_t)D * sizeof *kd);
            memcpy(cache_row(c, a, 1, g, P + s), vs, (size_t)D * sizeof *kd);
        }
}

/* o = softmax_t(q . K[t]) V over t in [0, n), q already scaled; online. */
static void attend_row(const rt_attention_attrs *a, const rt_kv_cache *c, int64_t g,
                       const float *q, int64_t n, float *o)
{
    int64_t D = a->head_dim;
    float m = -INFINITY, l = 0.0f;
    memset(o, 0, (size_t)D * sizeof *o);
    for (int64_t t = 0; t < n; t++) {
        const float *kt = cache_row(c, a, 0, g, t), *vt = cache_row(c, a, 1, g, t);
        float score = 0.0f;
        for (int64_t i = 0; i < D; i++)
            score += q[i] * kt[i];
        if (score > m) { /* new maximum: rescale what was accumulated against the old one */
            float corr = expf(m - score);
            for (int64_t i = 0; i < D; i++)
                o[i] *= corr;
            l *= corr;
            m = score;
        }
        float p = expf(score - m);
        l += p;
        for (int64_t i = 0; i < D; i++)
            o[i] += p * vt[i];
    }
    for (int64_t i = 0; i < D; i++)
        o[i] /= l;
}

/* Tasks: one per query head (each writes only its own columns of o and
 * reads the cache, which append_rows filled before), every row s in order;
 * one task for all heads when the op is under PARALLEL_MIN_MACS
 * multiply-adds in all. */
#define PARALLEL_MIN_MACS (1 << 15)

typedef struct {
    const rt_attention_attrs *a;
    const rt_view *q, *cos, *sin;
    const rt_kv_cache *cache;
    int64_t S, P, heads_per_task;
    float *o;
} attention_job;

static void attention_heads(const attention_job *J, int64_t h0, int64_t h1)
{
    const rt_attention_attrs *a = J->a;
    int64_t D = a->head_dim, rot = a->rotary_dim, P = J->P;
    int64_t group = a->heads / a->kv_heads, width = a->heads * D;
    float qrow[RT_ATTN_MAX_HEAD_DIM];
    for (int64_t s = 0; s < J->S; s++)
        for (int64_t h = h0; h < h1; h++) {
            const float *qs = (const float *)J->q->data + s * width + h * D;
            if (rot)
                k_rope_row(qs, qrow, D, rot, (const float *)J->cos->data + (P + s) * rot,
                           (const float *)J->sin->data + (P + s) * rot);
            else
                memcpy(qrow, qs, (size_t)D * sizeof *qrow);
            for (int64_t i = 0; i < D; i++)
                qrow[i] *= a->scale;
            attend_row(a, J->cache, h / group, qrow, P + s + 1, J->o + s * width + h * D);
        }
}

static void attention_task(void *ctx, uint32_t i)
{
    const attention_job *J = ctx;
    int64_t h0 = (int64_t)i * J->heads_per_task;
    attention_heads(J, h0, h0 + J->heads_per_task);
}

llmc_rt_status k_attention(const rt_attention_attrs *a, const rt_view *q, const rt_view *k,
                           const rt_view *v, const rt_view *cos, const rt_view *sin,
                           const rt_kv_cache *cache, int64_t P, rt_view *o,
                           const rt_parallel *par, llmc_rt_error *err)
{
    llmc_rt_status st = check_views(a, q, k, v, cos, sin, P, o, err);
    if (st)
        return st;
    int64_t S = q->dims[1];
    /* causal: row s reads positions <= P + s, so all new rows can go in first */
    append_rows(a, k, v, cos, sin, cache, S, P);
    attention_job J = {a, q, cos, sin, cache, S, P, 1, o->data};
    /* 2 D multiply-adds per cached position per (row, head) */
    bool small = 2 * S * (P + S) * a->heads * a->head_dim < PARALLEL_MIN_MACS;
    J.heads_per_task = small ? a->heads : 1;
    rt_parallel_for(par, (uint32_t)(a->heads / J.heads_per_task), attention_task, &J);
    return LLMC_RT_OK;
}
