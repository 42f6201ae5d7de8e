/* Token sampling: greedy, temperature, top-k, top-p (nucleus), seeded.
 * No globals, no allocation: the caller owns the sampler and the scratch. */
#include <math.h>
#include <string.h>

#include "llmc_rt.h"
#include "rt_msg.h"

/* splitmix64 (Steele, Lea, Flood 2014): spreads any seed, including 0, into
 * a well-mixed non-zero xorshift state. */
static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void llmc_sampler_init(llmc_sampler *sm, float temperature, uint32_t top_k, float top_p,
                       uint64_t seed)
{
    if (!sm)
        return;
    memset(sm, 0, sizeof *sm);
    sm->temperature = temperature;
    sm->top_k = top_k;
    sm->top_p = top_p;
    sm->rng = splitmix64(seed);
    if (!sm->rng)
        sm->rng = 0x9E3779B97F4A7C15ull;
}

/* The next uniform float in [0, 1) from the sampler's PRNG: xorshift64*
 * (Vigna 2016, shifts 12, 25, 27); the top 24 bits make the float, every
 * value of which is exact (single precision on the device). */
static float uniform(llmc_sampler *sm)
{
    uint64_t x = sm->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    sm->rng = x;
    return (float)(uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 40) * (1.0f / 16777216.0f);
}

int llmc_sampler_is_stop(const llmc_sampler *sm, int64_t token)
{
    for (uint32_t i = 0; sm && sm->stop && i < sm->n_stop; i++)
        if (sm->stop[i] == token)
            return 1;
    return 0;
}

static uint32_t argmax(const float *x, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* Candidate a ranks before b: higher logit, then lower id. */
static int before(const float *logits, uint32_t a, uint32_t b)
{
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
}

/* Sift-down of a heap whose root is the candidate ranked last (a min-heap
 * in rank order), so heapsort leaves ids best first. */
static void sift(const float *logits, uint32_t *ids, uint32_t root, uint32_t n)
{
    for (;;) {
        uint32_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && before(logits, ids[child], ids[child + 1]))
            child++;
        if (!before(logits, ids[root], ids[child]))
            return;
        uint32_t t = ids[root];
        ids[root] = ids[child];
        ids[child] = t;
        root = child;
    }
}

static void sort_by_logit(const float *logits, uint32_t *ids, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        ids[i] = i;
    for (uint32_t i = n / 2; i-- > 0;)
        sift(logits, ids, i, n);
    for (uint32_t end = n; end-- > 1;) {
        uint32_t t = ids[0];
        ids[0] = ids[end];
        ids[end] = t;
        sift(logits, ids, 0, end);
    }
}

llmc_rt_status llmc_sample(llmc_sampler *sm, const float *logits, uint32_t n, void *scratch,
                           size_t scratch_size, int64_t *token, llmc_rt_error *err)
{
    if (!sm || !logits || !token || n == 0)
        return rt_fail(err, LLMC_RT_E_ARG, "sampler, logits and token must not be NULL, n >= 1",
                       NULL, NULL);
    if (!(sm->temperature > 0.0f) || sm->top_k == 1) {
        *token = argmax(logits, n);
        return LLMC_RT_OK;
    }
    if (!scratch || scratch_size < LLMC_SAMPLER_SCRATCH_BYTES(n) || (uintptr_t)scratch % 4)
        return rt_fail(err, LLMC_RT_E_MEMORY, "sampling %u ids needs %u bytes of 4-aligned "
                       "scratch", RT_N(n, (int64_t)LLMC_SAMPLER_SCRATCH_BYTES(n)), NULL);
    uint32_t *ids = scratch;
    float *prob = (float *)(void *)(ids + n);
    sort_by_logit(logits, ids, n);
    uint32_t k = sm->top_k && sm->top_k < n ? sm->top_k : n;
    float inv_t = 1.0f / sm->temperature, top = logits[ids[0]], sum = 0.0f;
    for (uint32_t i = 0; i < k; i++)
        sum += prob[i] = expf((logits[ids[i]] - top) * inv_t);
    if (sm->top_p > 0.0f && sm->top_p < 1.0f) {
        float cum = 0.0f, want = sm->top_p * sum;
        uint32_t keep = 0;
        while (keep < k && cum < want)
            cum += prob[keep++];
        k = keep ? keep : 1;
        sum = cum > 0.0f ? cum : prob[0];
    }
    float u = uniform(sm) * sum, acc = 0.0f;
    for (uint32_t i = 0; i < k; i++) {
        acc += prob[i];
        if (u < acc) {
            *token = ids[i];
            return LLMC_RT_OK;
        }
    }
    *token = ids[k - 1]; /* rounding left u at the very top */
    return LLMC_RT_OK;
}
