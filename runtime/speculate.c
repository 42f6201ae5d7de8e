/* Speculative decoding (llmc_rt.h, "speculative decoding"): drafted tokens
 * are fed in one call after the pending token, each row of logits judges
 * the draft token after it, the accepted prefix and one token of the first
 * rejecting row (or of the row after the last draft) are kept, and the
 * session is rewound over the rest.  A file of its own so that a firmware
 * that never calls it links none of it. */
#include <string.h>

#include "llmc_rt.h"

#include "llmc_rt_internal.h"
#include "rt_msg.h"
#include "rt_sampler.h"
#include "session_prepared.h"

static uint32_t vocab_of(const llmc_rt_session *s)
{
    return rt_plan_of(rt_state(s)->plan)->vocab_size;
}

size_t llmc_rt_speculate_scratch(const llmc_rt_plan *plan, uint32_t max_draft)
{
    if (!plan || max_draft > LLMC_RT_SPEC_MAX_DRAFT)
        return 0;
    size_t vocab = rt_plan_of(plan)->vocab_size;
    return (max_draft + 1u) * vocab * sizeof(float) + LLMC_SAMPLER_SCRATCH_BYTES(vocab);
}

/* Judges draft token x against the target's row: 1 to keep it, else 0
 * and *next the token to emit instead.
 *
 * Speculative sampling (Leviathan, Kalman, Matias 2023, "Fast Inference
 * from Transformers via Speculative Decoding", Algorithm 1; Chen et al.
 * 2023, "Accelerating Large Language Model Decoding with Speculative
 * Sampling", Algorithm 2): x drawn from the draft distribution q is kept
 * with probability min(1, p(x) / q(x)), p the target's distribution (here
 * the sampler's: temperature, top-k, top-p); on rejection the token is
 * drawn from norm(max(0, p - q)).  A drafter that proposes one token
 * (prompt lookup, a greedy draft model) has q = the point mass on x, so x
 * is kept with probability p(x) and the replacement is drawn from p
 * without x, renormalized: P(x) = p(x) and P(y) = (1 - p(x)) p(y) / (1 -
 * p(x)) = p(y), the target's distribution exactly.  Greedy: p is the point
 * mass on the argmax, so x is kept iff it is the argmax, which is emitted
 * otherwise. */
static int judge(llmc_sampler *sm, const float *row, uint32_t vocab, int64_t x, uint32_t *ids,
                 float *prob, int64_t *next)
{
    if (rt_sampler_greedy(sm)) {
        *next = rt_argmax(row, vocab);
        return *next == x;
    }
    float sum, rest = 0.0f;
    uint32_t k = rt_sampler_candidates(sm, row, vocab, ids, prob, &sum), at = k;
    for (uint32_t i = 0; i < k; i++)
        if (ids[i] == x)
            at = i;
    if (at < k && rt_sampler_uniform(sm) * sum < prob[at])
        return 1;
    if (at < k) { /* p without x */
        memmove(ids + at, ids + at + 1, (k - at - 1) * sizeof *ids);
        memmove(prob + at, prob + at + 1, (k - at - 1) * sizeof *prob);
        k--;
    }
    for (uint32_t i = 0; i < k; i++)
        rest += prob[i];
    if (!(rest > 0.0f)) /* x was the only candidate: p(x) = 1, never rejected */
        return 1;
    *next = rt_sampler_draw(sm, ids, prob, k, rest);
    return 0;
}

static llmc_rt_status check_verify(const llmc_rt_session *s, const int64_t *seq, uint32_t n_seq,
                                   uint32_t n_draft, size_t need, const void *scratch,
                                   size_t scratch_size, llmc_rt_error *err)
{
    if (!s || !rt_state(s)->plan || !seq || n_seq < 1 || n_draft > LLMC_RT_SPEC_MAX_DRAFT)
        return rt_fail(err, LLMC_RT_E_ARG, "speculate: session, sequence and at most %u drafted "
                       "tokens needed", RT_N(LLMC_RT_SPEC_MAX_DRAFT), NULL);
    if (rt_state(s)->position != n_seq - 1)
        return rt_fail(err, LLMC_RT_E_ARG, "speculate: the session holds %u positions; a "
                       "sequence of %u has its last token pending, so %u",
                       RT_N(rt_state(s)->position, n_seq, n_seq - 1), NULL);
    if (!scratch || scratch_size < need || (uintptr_t)scratch % 4)
        return rt_fail(err, LLMC_RT_E_MEMORY, "speculate: %u drafted tokens need %u bytes of "
                       "4-aligned scratch", RT_N(n_draft, (int64_t)need), NULL);
    for (uint32_t i = 0; i < n_draft; i++)
        if (seq[n_seq + i] < 0 || seq[n_seq + i] >= vocab_of(s))
            return rt_fail(err, LLMC_RT_E_ARG, "speculate: drafted token %d is outside the "
                           "vocabulary [0, %u)", RT_N(seq[n_seq + i], vocab_of(s)), NULL);
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_speculate_accept(llmc_sampler *sm, const float *rows, uint32_t vocab,
                                        const int64_t *draft, uint32_t n_draft, void *scratch,
                                        size_t scratch_size, uint32_t *accepted, int64_t *next,
                                        llmc_rt_error *err)
{
    if (!sm || !rows || !vocab || (!draft && n_draft) || !accepted || !next)
        return rt_fail(err, LLMC_RT_E_ARG, "speculate: sampler, rows, drafts and results must "
                       "not be NULL", NULL, NULL);
    if (!rt_sampler_greedy(sm) &&
        (!scratch || scratch_size < LLMC_SAMPLER_SCRATCH_BYTES(vocab) || (uintptr_t)scratch % 4))
        return rt_fail(err, LLMC_RT_E_MEMORY, "speculate: sampling %u ids needs %u bytes of "
                       "4-aligned scratch", RT_N(vocab, (int64_t)LLMC_SAMPLER_SCRATCH_BYTES(vocab)),
                       NULL);
    uint32_t *ids = scratch, a = 0;
    float *prob = ids ? (float *)(void *)(ids + vocab) : NULL;
    while (a < n_draft && judge(sm, rows + (size_t)a * vocab, vocab, draft[a], ids, prob, next))
        a++;
    *accepted = a;
    if (a < n_draft) /* every draft kept: the row after the last one gives a token more */
        return LLMC_RT_OK;
    return llmc_sample(sm, rows + (size_t)a * vocab, vocab, scratch, scratch_size, next, err);
}

llmc_rt_status llmc_rt_speculate_verify(llmc_rt_session *s, llmc_sampler *sm, int64_t *seq,
                                        uint32_t n_seq, uint32_t n_draft, void *scratch,
                                        size_t scratch_size, uint32_t *accepted,
                                        llmc_rt_error *err)
{
    size_t need = s && rt_state(s)->plan ? llmc_rt_speculate_scratch(rt_state(s)->plan, n_draft)
                                         : 0;
    llmc_rt_status st = check_verify(s, seq, n_seq, n_draft, need, scratch, scratch_size, err);
    if (!st && !sm)
        st = rt_fail(err, LLMC_RT_E_ARG, "speculate: sampler is NULL", NULL, NULL);
    if (st)
        return st;
    uint32_t vocab = vocab_of(s), a = 0;
    size_t rows_bytes = (size_t)(n_draft + 1) * vocab * sizeof(float);
    int64_t next = 0;
    st = llmc_rt_session_feed_rows(s, seq + n_seq - 1, n_draft + 1, scratch, err);
    if (!st)
        st = llmc_rt_speculate_accept(sm, scratch, vocab, seq + n_seq, n_draft,
                                      (uint8_t *)scratch + rows_bytes, scratch_size - rows_bytes,
                                      &a, &next, err);
    if (!st && a < n_draft)
        st = llmc_rt_session_rewind(s, n_seq + a, err);
    if (st)
        return st;
    seq[n_seq + a] = next;
    if (accepted)
        *accepted = a;
    return LLMC_RT_OK;
}

uint32_t llmc_rt_speculate_room(const llmc_rt_session *s, uint32_t max_draft, uint32_t n_seq,
                                uint32_t cap)
{
    if (!s || !rt_state(s)->plan || rt_state(s)->position >= rt_state(s)->context || n_seq >= cap)
        return 0;
    uint32_t k = max_draft < LLMC_RT_SPEC_MAX_DRAFT ? max_draft : LLMC_RT_SPEC_MAX_DRAFT;
    uint32_t pos = rt_state(s)->position, context = rt_state(s)->context;
    uint32_t span = llmc_rt_session_rewind_span(s); /* feeds 1 + k from pos */
    uint32_t bounds[3] = {context - pos - 1, cap - n_seq - 1, span - 1};
    for (int i = 0; i < 3; i++)
        k = bounds[i] < k ? bounds[i] : k;
    return k;
}

llmc_rt_status llmc_rt_speculate_step(llmc_rt_session *s, llmc_sampler *sm, uint32_t max_draft,
                                      int64_t *seq, uint32_t *n_seq, uint32_t cap, void *scratch,
                                      size_t scratch_size, llmc_rt_spec_step *out,
                                      llmc_rt_error *err)
{
    if (!s || !rt_state(s)->plan || !rt_state(s)->prepared || !n_seq || *n_seq < 1 ||
        *n_seq >= cap || rt_state(s)->position >= rt_state(s)->context)
        return rt_fail(err, LLMC_RT_E_ARG, "speculate: needs a session with room for a token "
                       "and a sequence of 1 <= n < cap tokens", NULL, NULL);
    uint32_t n = *n_seq, k = llmc_rt_speculate_room(s, max_draft, n, cap), a = 0;
    uint32_t drafted = llmc_rt_draft_lookup(seq, n, LLMC_RT_DRAFT_NGRAM_MAX,
                                            LLMC_RT_DRAFT_NGRAM_MIN, seq + n, k);
    llmc_rt_status st = llmc_rt_speculate_verify(s, sm, seq, n, drafted, scratch, scratch_size,
                                                 &a, err);
    if (st)
        return st;
    *n_seq = n + a + 1;
    if (out) {
        out->drafted = drafted;
        out->accepted = a;
    }
    return LLMC_RT_OK;
}
