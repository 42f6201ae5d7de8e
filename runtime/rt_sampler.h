/* The steps of llmc_sample, shared by sampler.c and speculate.c (which
 * needs the probability the sampler gives one token, and draws from what is
 * left without it).  Static inline: each file compiles its own copy, so a
 * firmware that samples but never speculates links exactly llmc_sample. */
#ifndef LLMC_RT_SAMPLER_H
#define LLMC_RT_SAMPLER_H

#include <math.h>

#include "llmc_rt.h"

/* Greedy: temperature <= 0 or top_k == 1 (argmax, ties to the lowest id). */
static inline int rt_sampler_greedy(const llmc_sampler *sm)
{
    return !(sm->temperature > 0.0f) || sm->top_k == 1;
}

/* The next uniform float in [0, 1) from the sampler's PRNG: xorshift64*
 * (Vigna 2016, shifts 12, 25, 27); the top 24 bits make the float, every
 * value of which is exact (single precision on the device). */
static inline float rt_sampler_uniform(llmc_sampler *sm)
{
    uint64_t x = sm->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    sm->rng = x;
    return (float)(uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 40) * (1.0f / 16777216.0f);
}

static inline uint32_t rt_argmax(const float *x, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* Candidate a ranks before b: higher logit, then lower id. */
static inline int rt_before(const float *logits, uint32_t a, uint32_t b)
{
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
}

/* Sift-down of a heap whose root is the candidate ranked last (a min-heap
 * in rank order), so heapsort leaves ids best first. */
static inline void rt_sift(const float *logits, uint32_t *ids, uint32_t root, uint32_t n)
{
    for (;;) {
        uint32_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && rt_before(logits, ids[child], ids[child + 1]))
            child++;
        if (!rt_before(logits, ids[root], ids[child]))
            return;
        uint32_t t = ids[root];
        ids[root] = ids[child];
        ids[child] = t;
        root = child;
    }
}

static inline void rt_sort_by_logit(const float *logits, uint32_t *ids, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        ids[i] = i;
    for (uint32_t i = n / 2; i-- > 0;)
        rt_sift(logits, ids, i, n);
    for (uint32_t end = n; end-- > 1;) {
        uint32_t t = ids[0];
        ids[0] = ids[end];
        ids[end] = t;
        rt_sift(logits, ids, 0, end);
    }
}

/* A sampling (not greedy) sampler's candidates for logits[0, n): returns
 * their count k, ids[0, k) best first, prob[0, k) their weights
 * exp((logit - top) / temperature) and *sum the weights' total, so token
 * ids[i] has probability prob[i] / *sum.  ids and prob hold n each. */
static inline uint32_t rt_sampler_candidates(const llmc_sampler *sm, const float *logits,
                                             uint32_t n, uint32_t *ids, float *prob, float *sum)
{
    rt_sort_by_logit(logits, ids, n);
    uint32_t k = sm->top_k && sm->top_k < n ? sm->top_k : n;
    float inv_t = 1.0f / sm->temperature, top = logits[ids[0]], total = 0.0f;
    for (uint32_t i = 0; i < k; i++)
        total += prob[i] = expf((logits[ids[i]] - top) * inv_t);
    if (sm->top_p > 0.0f && sm->top_p < 1.0f) {
        float cum = 0.0f, want = sm->top_p * total;
        uint32_t keep = 0;
        while (keep < k && cum < want)
            cum += prob[keep++];
        k = keep ? keep : 1;
        total = cum > 0.0f ? cum : prob[0];
    }
    *sum = total;
    return k;
}

/* Draws one of the k candidates, ids[i] with probability prob[i] / sum. */
static inline uint32_t rt_sampler_draw(llmc_sampler *sm, const uint32_t *ids, const float *prob,
                                       uint32_t k, float sum)
{
    float u = rt_sampler_uniform(sm) * sum, acc = 0.0f;
    for (uint32_t i = 0; i < k; i++) {
        acc += prob[i];
        if (u < acc)
            return ids[i];
    }
    return ids[k - 1]; /* rounding left u at the very top */
}

#endif
