/* Prompt-lookup drafting (llmc_rt.h, "speculative decoding"): the tokens
 * that followed an earlier occurrence of the sequence's last n-gram
 * (Saxena 2023, "prompt lookup decoding"; the n-gram drafter of vLLM and
 * transformers' prompt_lookup_num_tokens).  No model, no memory of its
 * own: it reads the caller's sequence and the drafts it wrote. */
#include "llmc_rt.h"

/* 1 when seq[a, a + n) equals seq[b, b + n). */
static int same(const int64_t *seq, uint32_t a, uint32_t b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (seq[a + i] != seq[b + i])
            return 0;
    return 1;
}

uint32_t llmc_rt_draft_lookup(const int64_t *seq, uint32_t n_seq, uint32_t ngram_max,
                              uint32_t ngram_min, int64_t *draft, uint32_t max_draft)
{
    if (!seq || !draft || ngram_min < 1 || n_seq < 2)
        return 0;
    for (uint32_t n = ngram_max < n_seq ? ngram_max : n_seq - 1; n >= ngram_min; n--) {
        uint32_t tail = n_seq - n;
        /* the most recent earlier occurrence, start at most tail - 1, so
         * that at least one token follows it */
        for (uint32_t start = tail; start-- > 0;) {
            if (!same(seq, start, tail, n))
                continue;
            /* past the sequence's end the drafts so far continue it: a
             * pattern of period tail - start repeats (from - n_seq < k) */
            for (uint32_t k = 0, from = start + n; k < max_draft; k++, from++)
                draft[k] = from < n_seq ? seq[from] : draft[from - n_seq];
            return max_draft;
        }
    }
    return 0;
}
