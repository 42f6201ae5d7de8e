/* Moving a session back (llmc_rt.h, "speculative decoding"): the position
 * returns to an earlier p, and the next feed writes its rows over the ones
 * fed after p, in the KV store and in the fused caches alike (an Attention
 * op appends at its call's P).  Also a feed that returns the logits of
 * every fed token, which verifying drafted tokens needs.  A file of its own
 * so that a firmware that never calls them links none of it
 * (-ffunction-sections, --gc-sections). */
#include <string.h>

#include "llmc_rt.h"

#include "llmc_rt_internal.h"
#include "rt_msg.h"
#include "session.h"

/* The first chunk of a windowed cache whose slot is the one of chunk
 * lo(p) / kv_chunk (lo: rt_window_low, the first key the first query fed
 * after the rewind reads): taking it wrote over positions a rewind to p needs.
 * UINT32_MAX for a cache without a ring (every chunk its own slot). */
static uint32_t reused_chunk(const llmc_rt_session *s, const rt_prep_op *op, uint32_t p)
{
    const rt_plan *plan = rt_plan_of(rt_state(s)->plan);
    uint32_t chunks = rt_state(s)->chunks_per_cache;
    uint32_t ring = rt_kv_ring(op->window, plan->kv_chunk, chunks);
    if (ring >= chunks)
        return UINT32_MAX;
    return rt_window_low(op->window, p) / plan->kv_chunk + ring;
}

static uint32_t *cache_table(const llmc_rt_session *s, uint32_t cache)
{
    return rt_state(s)->caches + (uint64_t)cache * (1u + rt_state(s)->chunks_per_cache);
}

/* The windowed Attention op whose ring no longer holds what a rewind to p
 * needs, or NULL.  Chunks are taken in order, so chunk c was written iff
 * its table entry holds a slot. */
static const rt_prep_op *lost_window(const llmc_rt_session *s, uint32_t p)
{
    const rt_prepared *pr = rt_state(s)->prepared;
    for (uint32_t i = 0; i < rt_plan_of(rt_state(s)->plan)->n_ops; i++) {
        const rt_prep_op *op = &pr->ops[i];
        if (op->code != LLMC_RT_OP_Attention)
            continue;
        uint32_t c = reused_chunk(s, op, p);
        if (c < rt_state(s)->chunks_per_cache && cache_table(s, op->cache)[1 + c] != NO_SLOT)
            return op;
    }
    return NULL;
}

static llmc_rt_status check_fed(const llmc_rt_session *s, llmc_rt_error *err)
{
    if (!s || !rt_state(s)->plan || !rt_state(s)->prepared || !rt_state(s)->caches)
        return rt_fail(err, LLMC_RT_E_ARG, "session not initialized", NULL, NULL);
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_session_rewind(llmc_rt_session *s, uint32_t p, llmc_rt_error *err)
{
    llmc_rt_status st = check_fed(s, err);
    if (st)
        return st;
    if (p > rt_state(s)->position)
        return rt_fail(err, LLMC_RT_E_BOUNDS, "cannot rewind to position %u: the session "
                       "holds %u", RT_N(p, rt_state(s)->position), NULL);
    const rt_prep_op *op = lost_window(s, p);
    if (op)
        return rt_fail(err, LLMC_RT_E_BOUNDS, "cannot rewind to position %u: Attention '%s' "
                       "(sliding window %u) has written over cache rows of positions %u.. that "
                       "the next query reads; feed at most llmc_rt_session_rewind_span "
                       "positions past a point to rewind to", RT_N(p, op->window,
                       rt_window_low(op->window, p)), RT_S(op->name));
    for (uint32_t c = 0; c < rt_plan_of(rt_state(s)->plan)->n_caches; c++) {
        uint32_t *held = cache_table(s, c);
        *held = *held < p ? *held : p;
    }
    rt_state(s)->position = p;
    return LLMC_RT_OK;
}

uint32_t llmc_rt_session_rewind_span(const llmc_rt_session *s)
{
    if (check_fed(s, NULL))
        return 0;
    const rt_prepared *pr = rt_state(s)->prepared;
    uint32_t p = rt_state(s)->position, span = UINT32_MAX;
    uint32_t kv_chunk = rt_plan_of(rt_state(s)->plan)->kv_chunk;
    for (uint32_t i = 0; i < rt_plan_of(rt_state(s)->plan)->n_ops; i++) {
        uint32_t c = pr->ops[i].code == LLMC_RT_OP_Attention ? reused_chunk(s, &pr->ops[i], p)
                                                             : UINT32_MAX;
        /* positions [p, c * kv_chunk) stay in chunks below c: >= 2 of them
         * (rt_kv_ring keeps one chunk past the window) */
        if (c != UINT32_MAX && c * kv_chunk - p < span)
            span = c * kv_chunk - p;
    }
    return span;
}

/* The Logits output of a feed of S tokens at P, viewed in the arena. */
static llmc_rt_status logits_view(const llmc_rt_session *s, int64_t S, int64_t P, rt_view *v,
                                  llmc_rt_error *err)
{
    const rt_prepared *pr = rt_state(s)->prepared;
    for (uint32_t i = 0; i < rt_plan_of(rt_state(s)->plan)->n_outputs; i++)
        if (pr->outputs[i].role == ROLE_LOGITS)
            return rt_session_view(s, NULL, pr->outputs[i].tensor, S, P, v, err);
    return rt_fail(err, LLMC_RT_E_ARG, "feed needs a plan with InputIds and Logits bindings",
                   NULL, NULL);
}

llmc_rt_status llmc_rt_session_feed_rows(llmc_rt_session *s, const int64_t *tokens, uint32_t n,
                                         float *logits, llmc_rt_error *err)
{
    rt_view v;
    llmc_rt_status st = check_fed(s, err);
    if (!st && !logits)
        st = rt_fail(err, LLMC_RT_E_ARG, "logits is NULL", NULL, NULL);
    if (!st) /* two tokens' logits: two rows, or one (--logits last) */
        st = logits_view(s, 2, rt_state(s)->position, &v, err);
    if (!st && v.dims[1] != 2)
        return rt_fail(err, LLMC_RT_E_ARG, "the plan's logits have the last position's row "
                       "only (llmc compile --logits last); every fed token's row needs a plan "
                       "compiled with --logits all", NULL, NULL);
    if (!st)
        st = llmc_rt_session_feed_checked(s, tokens, n, NULL, err);
    if (!st) /* the arena still holds the feed's outputs */
        st = logits_view(s, n, rt_state(s)->position - n, &v, err);
    if (!st)
        memcpy(logits, v.data, (size_t)n * rt_plan_of(rt_state(s)->plan)->vocab_size * sizeof(float));
    return st;
}
