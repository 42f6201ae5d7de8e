/* Token sampling: greedy, temperature, top-k, top-p (nucleus), seeded.
 * No globals, no allocation: the caller owns the sampler and the scratch. */
#include <math.h>
#include <string.h>

#include "llmc_rt.h"
#include "rt_msg.h"
#include "rt_sampler.h"

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

int llmc_sampler_is_stop(const llmc_sampler *sm, int64_t token)
{
    for (uint32_t i = 0; sm && sm->stop && i < sm->n_stop; i++)
        if (sm->stop[i] == token)
            return 1;
    return 0;
}

llmc_rt_status llmc_sample(llmc_sampler *sm, const float *logits, uint32_t n, void *scratch,
                           size_t scratch_size, int64_t *token, llmc_rt_error *err)
{
    if (!sm || !logits || !token || n == 0)
        return rt_fail(err, LLMC_RT_E_ARG, "sampler, logits and token must not be NULL, n >= 1",
                       NULL, NULL);
    if (rt_sampler_greedy(sm)) {
        *token = rt_argmax(logits, n);
        return LLMC_RT_OK;
    }
    if (!scratch || scratch_size < LLMC_SAMPLER_SCRATCH_BYTES(n) || (uintptr_t)scratch % 4)
        return rt_fail(err, LLMC_RT_E_MEMORY, "sampling %u ids needs %u bytes of 4-aligned "
                       "scratch", RT_N(n, (int64_t)LLMC_SAMPLER_SCRATCH_BYTES(n)), NULL);
    uint32_t *ids = scratch;
    float *prob = (float *)(void *)(ids + n), sum;
    uint32_t k = rt_sampler_candidates(sm, logits, n, ids, prob, &sum);
    *token = rt_sampler_draw(sm, ids, prob, k, sum);
    return LLMC_RT_OK;
}
