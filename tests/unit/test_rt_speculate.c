/* Prompt-lookup drafts and the acceptance rule of speculative decoding
 * (llmc_rt_draft_lookup, llmc_rt_speculate_accept).  The rule is checked
 * on a bigram "model" of 4 tokens whose logits depend on the previous token
 * only: sequences of 3 tokens from speculative decoding (a drafter that
 * proposes the token after the previous one, right at times, wrong at
 * others) must follow the exact joint distribution the sampler defines
 * (chi-square, 64 cells, 200,000 sequences, fixed seeds), as plain sampling
 * does; accepting a draft when it is the row's argmax instead of with
 * probability p(draft) must fail the same test, and so must drawing the
 * replacement of a rejected draft from p instead of p without the draft. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llmc_rt.h"
#include "tap.h"

#define V 4          /* tokens */
#define LEN 3        /* tokens a sequence has */
#define CELLS 64     /* V^LEN joint outcomes */
#define DRAWS 200000
#define MAX_DRAFT 2
/* chi-square with 63 degrees of freedom exceeds 103.4 with probability 0.001 */
#define CHI2_CRITICAL 103.4

/* logits of the token after token `prev` */
static const float bigram[V][V] = {
    {1.0f, 0.5f, -0.5f, 0.2f},
    {0.1f, 0.3f, 1.2f, -1.0f},
    {0.8f, -0.3f, 0.0f, 0.9f},
    {-0.2f, 1.1f, 0.4f, 0.3f},
};

static int64_t drafter(int64_t prev)
{
    return (prev + 1) % V;
}

/* p(v | prev) as llmc_sample defines it: softmax(logits / t) over the top_k. */
static void probabilities(float t, uint32_t top_k, double p[V][V])
{
    for (int a = 0; a < V; a++) {
        double sum = 0;
        for (int v = 0; v < V; v++) {
            int rank = 0;
            for (int w = 0; w < V; w++)
                rank += bigram[a][w] > bigram[a][v] || (bigram[a][w] == bigram[a][v] && w < v);
            p[a][v] = top_k && (uint32_t)rank >= top_k ? 0 : exp(bigram[a][v] / t);
            sum += p[a][v];
        }
        for (int v = 0; v < V; v++)
            p[a][v] /= sum;
    }
}

typedef enum { PLAIN, SPECULATIVE, ARGMAX_ACCEPT, REDRAW_FROM_P } mode;

static double p_now[V][V]; /* the distribution of the running chi2 */

/* The next token(s) after *prev: one sampled (plain), or the kept drafts
 * and the token after them; returns how many were written to out. */
static uint32_t step(mode m, llmc_sampler *sm, int64_t prev, int64_t *out, void *scratch)
{
    float rows[(MAX_DRAFT + 1) * V];
    int64_t draft[MAX_DRAFT], next = 0;
    uint32_t a = 0;
    memcpy(rows, bigram[prev], sizeof bigram[prev]);
    if (m == PLAIN) {
        llmc_sample(sm, rows, V, scratch, LLMC_SAMPLER_SCRATCH_BYTES(V), &out[0], NULL);
        return 1;
    }
    for (int i = 0; i < MAX_DRAFT; i++) {
        draft[i] = drafter(i ? draft[i - 1] : prev);
        memcpy(rows + (i + 1) * V, bigram[draft[i]], sizeof bigram[0]);
    }
    if (m == SPECULATIVE) {
        llmc_rt_speculate_accept(sm, rows, V, draft, MAX_DRAFT, scratch,
                                 LLMC_SAMPLER_SCRATCH_BYTES(V), &a, &next, NULL);
    } else if (m == ARGMAX_ACCEPT) { /* wrong: keep a draft iff it is its row's argmax */
        while (a < MAX_DRAFT) {
            const float *row = rows + a * V;
            int64_t best = 0;
            for (int v = 1; v < V; v++)
                best = row[v] > row[best] ? v : best;
            if (best != draft[a])
                break;
            a++;
        }
        llmc_sample(sm, rows + a * V, V, scratch, LLMC_SAMPLER_SCRATCH_BYTES(V), &next, NULL);
    } else { /* wrong: keep with probability p(draft), else draw from all of p */
        while (a < MAX_DRAFT && rand() < p_now[a ? draft[a - 1] : prev][draft[a]] * RAND_MAX)
            a++;
        llmc_sample(sm, rows + a * V, V, scratch, LLMC_SAMPLER_SCRATCH_BYTES(V), &next, NULL);
    }
    memcpy(out, draft, a * sizeof *out);
    out[a] = next;
    return a + 1;
}

/* Chi-square of DRAWS sequences of LEN tokens after token 0 against p. */
static double chi2(mode m, float t, uint32_t top_k, uint64_t seed, double *accept_rate)
{
    static uint32_t scratch[2 * V];
    double p[V][V], stat = 0;
    long counts[CELLS] = {0}, kept = 0, drafted = 0;
    llmc_sampler sm;
    llmc_sampler_init(&sm, t, top_k, 1.0f, seed);
    probabilities(t, top_k, p);
    memcpy(p_now, p, sizeof p);
    srand((unsigned)seed);
    for (long d = 0; d < DRAWS; d++) {
        int64_t seq[LEN + MAX_DRAFT + 1], prev = 0;
        uint32_t n = 0;
        while (n < LEN) {
            uint32_t got = step(m, &sm, prev, seq + n, scratch);
            kept += got - 1;
            drafted += m == PLAIN ? 0 : MAX_DRAFT;
            n += got;
            prev = seq[n - 1];
        }
        counts[(seq[0] * V + seq[1]) * V + seq[2]]++;
    }
    for (int c = 0; c < CELLS; c++) {
        double expect = DRAWS * p[0][c / (V * V)] * p[c / (V * V)][c / V % V] * p[c / V % V][c % V];
        if (expect > 0)
            stat += (counts[c] - expect) * (counts[c] - expect) / expect;
        else if (counts[c])
            stat = INFINITY; /* a token outside the top_k */
    }
    *accept_rate = drafted ? (double)kept / (double)drafted : 0;
    return stat;
}

static void test_distribution(float t, uint32_t top_k)
{
    double rate, plain = chi2(PLAIN, t, top_k, 11, &rate);
    CHECK(plain < CHI2_CRITICAL, "t=%.1f top_k=%u: plain sampling matches the joint "
          "distribution (chi-square %.1f < %.1f, 63 df)", t, top_k, plain, CHI2_CRITICAL);
    double spec = chi2(SPECULATIVE, t, top_k, 12, &rate);
    CHECK(spec < CHI2_CRITICAL && rate > 0.1 && rate < 0.9,
          "t=%.1f top_k=%u: speculative sampling matches it too (chi-square %.1f; %.0f%% of "
          "drafts kept)", t, top_k, spec, 100 * rate);
    double wrong = chi2(ARGMAX_ACCEPT, t, top_k, 13, &rate);
    CHECK(wrong > 10 * CHI2_CRITICAL, "t=%.1f top_k=%u: keeping drafts that are the argmax "
          "fails it (chi-square %.1f)", t, top_k, wrong);
    wrong = chi2(REDRAW_FROM_P, t, top_k, 14, &rate);
    CHECK(wrong > 10 * CHI2_CRITICAL, "t=%.1f top_k=%u: drawing a rejected draft's "
          "replacement from p, the draft included, fails it (chi-square %.1f)", t, top_k, wrong);
}

/* Greedy: drafts equal to their row's argmax are kept, then the argmax. */
static void test_greedy(void)
{
    llmc_sampler sm;
    llmc_sampler_init(&sm, 0.0f, 0, 1.0f, 0);
    float rows[3 * V];
    for (int i = 0; i < 3; i++)
        memcpy(rows + i * V, bigram[i], sizeof bigram[i]);
    int64_t draft[2] = {0, 3}, next = -1; /* argmax of row 0 is 0, of row 1 is 2 */
    uint32_t a = 9;
    llmc_rt_status st = llmc_rt_speculate_accept(&sm, rows, V, draft, 2, NULL, 0, &a, &next, NULL);
    CHECK(st == LLMC_RT_OK && a == 1 && next == 2, "greedy keeps the matching draft and "
          "emits the first other argmax (kept %u, next %lld)", a, (long long)next);
    draft[1] = 2;
    st = llmc_rt_speculate_accept(&sm, rows, V, draft, 2, NULL, 0, &a, &next, NULL);
    CHECK(st == LLMC_RT_OK && a == 2 && next == 3, "greedy keeps every matching draft and "
          "adds the last row's argmax (kept %u, next %lld)", a, (long long)next);
    llmc_sampler_init(&sm, 1.0f, 0, 1.0f, 0);
    llmc_rt_error err = {0};
    st = llmc_rt_speculate_accept(&sm, rows, V, draft, 2, NULL, 0, &a, &next, &err);
    CHECK(st == LLMC_RT_E_MEMORY && strstr(err.msg, "scratch"), "sampling without scratch is "
          "refused: %s", err.msg);
}

static void test_lookup(void)
{
    /* 7 8 9 | 1 2 3 | 7 8 9 4 | 5 1 2 3 9 | ... 1 2 3 */
    const int64_t seq[] = {7, 8, 9, 1, 2, 3, 7, 8, 9, 4, 5, 1, 2, 3, 9, 6, 1, 2, 3};
    uint32_t n = sizeof seq / sizeof seq[0];
    int64_t d[8];
    uint32_t k = llmc_rt_draft_lookup(seq, n, 3, 1, d, 4);
    CHECK(k == 4 && d[0] == 9 && d[1] == 6 && d[2] == 1 && d[3] == 2,
          "the 3-gram 1 2 3 at its most recent earlier occurrence: 9 6 1 2 (%u drafted)", k);
    k = llmc_rt_draft_lookup(seq, n, 3, 1, d, 8);
    CHECK(k == 8 && d[4] == 3 && d[5] == 9 && d[6] == 6 && d[7] == 1,
          "past the sequence's end the pattern 9 6 1 2 3 repeats (%u drafted)", k);
    const int64_t run[] = {4, 7, 7, 7};
    k = llmc_rt_draft_lookup(run, 4, 3, 1, d, 5);
    CHECK(k == 5 && d[0] == 7 && d[4] == 7, "a run of one token drafts more of it (%u)", k);
    const int64_t tail2[] = {4, 5, 6, 9, 5, 6, 7, 1, 5, 6};
    k = llmc_rt_draft_lookup(tail2, 10, 3, 1, d, 2);
    CHECK(k == 2 && d[0] == 7 && d[1] == 1, "no earlier 1 5 6: the 2-gram 5 6's most recent "
          "occurrence drafts 7 1");
    k = llmc_rt_draft_lookup(tail2, 10, 3, 3, d, 2);
    CHECK(k == 0, "with n-grams of 3 only, nothing is drafted");
    const int64_t fresh[] = {1, 2, 3, 4};
    CHECK(llmc_rt_draft_lookup(fresh, 4, 3, 1, d, 4) == 0, "a token never seen before drafts "
          "nothing");
    CHECK(llmc_rt_draft_lookup(fresh, 1, 3, 1, d, 4) == 0, "a sequence of one token drafts "
          "nothing");
}

int main(void)
{
    test_lookup();
    test_greedy();
    test_distribution(1.0f, 0);
    test_distribution(0.7f, 3);
    return TAP_DONE();
}
