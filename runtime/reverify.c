/* Re-verification of an open plan's segments (llmc_rt.h, "re-verification"):
 * the weights and the tokenizer hashed again against the XXH64 the plan
 * stores, to catch bytes that changed after llmc_rt_plan_open (a bit flipped
 * in flash or RAM).  A file of its own so that a firmware that never calls
 * it links none of it (-ffunction-sections, --gc-sections). */
#include "llmc_rt.h"

#include "llmc_rt_internal.h"
#include "plan_format.h"
#include "rt_msg.h"
#include "session_prepared.h"

/* The name of what segment `seg` holds: the first weight tensor stored in
 * it, "the tokenizer", or "no tensor". */
static const char *segment_owner(const llmc_rt_plan *plan, uint32_t seg)
{
    fb_reader r = rt_reader(plan);
    if (seg == rt_plan_of(plan)->tokenizer_segment)
        return "the tokenizer";
    for (uint32_t i = 0; i < rt_plan_of(plan)->n_tensors; i++) {
        rt_tensor_desc d;
        if (!rt_read_tensor(&r, plan, i, &d, NULL) && d.kind == KIND_WEIGHT && d.segment == seg)
            return d.name; /* verified by plan_open: NUL-terminated in the plan */
    }
    return "no tensor";
}

llmc_rt_status llmc_rt_plan_reverify(const llmc_rt_plan *plan, llmc_rt_error *err)
{
    if (!plan || !rt_plan_of(plan)->base)
        return rt_fail(err, LLMC_RT_E_ARG, "plan not open", NULL, NULL);
    fb_reader r = rt_reader(plan);
    for (uint32_t i = 0; i < rt_plan_of(plan)->n_segments; i++) {
        rt_segment_desc s;
        llmc_rt_status st = rt_read_segment(&r, plan, i, &s, err);
        if (st)
            return st;
        if (llmc_rt_xxh64(r.base + s.offset, (size_t)s.size, 0) != s.xxhash64)
            return rt_fail(err, LLMC_RT_E_HASH, "segment %u (%s): xxhash64 of its %u bytes at "
                           "[%u, %u) of the plan no longer matches the hash the plan stores",
                           RT_N(i, (int64_t)s.size, (int64_t)s.offset, (int64_t)(s.offset + s.size)),
                           RT_S(segment_owner(plan, i)));
    }
    return LLMC_RT_OK;
}

void llmc_rt_session_set_reverify(llmc_rt_session *s, uint32_t every_tokens)
{
    rt_state(s)->reverify_every = every_tokens;
    rt_state(s)->reverify_since = 0;
}

llmc_rt_status llmc_rt_session_feed_checked(llmc_rt_session *s, const int64_t *tokens, uint32_t n,
                                            float *logits, llmc_rt_error *err)
{
    rt_session_state *st = s ? rt_state(s) : NULL;
    if (st && st->plan && st->reverify_every && st->reverify_since >= st->reverify_every) {
        llmc_rt_status rc = llmc_rt_plan_reverify(st->plan, err);
        if (rc)
            return rt_prefix(err, rc, "re-verified after %u tokens: ", RT_N(st->reverify_since),
                             NULL);
        st->reverify_since = 0;
    }
    llmc_rt_status rc = llmc_rt_session_feed(s, tokens, n, logits, err);
    if (!rc && st)
        st->reverify_since = n > UINT32_MAX - st->reverify_since ? UINT32_MAX
                                                                 : st->reverify_since + n;
    return rc;
}
