/* The smallest program that keeps every part of the runtime core a device
 * uses: open and verify a plan, run a session (prefill, decode, sampling)
 * and, with SIZE_PROBE_TOKENIZER, encode and detokenize text.  The session
 * has every op (llmc_rt_session_init), or with SIZE_PROBE_RESOLVER (a
 * header from `llmc inspect --resolver`) only the ops of that plan, whose
 * checks are then the only ones the plan is opened with
 * (llmc_rt_plan_open_ops).
 * Linked with --gc-sections by scripts/firmware_core.sh to measure what the
 * core costs in .text once the linker has dropped everything unreferenced;
 * it is never run (the firmware demo runs the real thing). */
#include <stddef.h>
#include <stdint.h>

#include "llmc_rt_resolver.h"
#ifdef SIZE_PROBE_RESOLVER
#include SIZE_PROBE_RESOLVER /* defines LLMC_RESOLVER_ENTRIES */
static LLMC_RT_RESOLVER(plan_ops, LLMC_RESOLVER_ENTRIES);
#endif

extern const uint8_t probe_plan[];
extern const size_t probe_plan_size;
extern uint8_t probe_arena[];
extern const size_t probe_arena_size;

static int run_text(const llmc_rt_plan *plan, int64_t *ids, size_t max_ids, size_t *n,
                    llmc_rt_error *err)
{
#ifdef SIZE_PROBE_TOKENIZER
    static const char prompt[] = "In the beginning";
    llmc_rt_tokenizer tok;
    llmc_rt_detok d;
    char out[64];
    size_t n_out;
    if (llmc_rt_encode(plan, prompt, sizeof prompt - 1, 1, probe_arena, probe_arena_size, ids,
                       max_ids, n, err) ||
        llmc_rt_plan_tokenizer(plan, &tok, err))
        return 1;
    llmc_rt_detok_init(&tok, &d);
    return llmc_rt_detok_token(&tok, &d, ids[0], out, sizeof out, &n_out, err) ||
           llmc_rt_detok_finish(&tok, &d, out, sizeof out, &n_out, err);
#else
    (void)plan, (void)max_ids, (void)err;
    ids[0] = 1;
    *n = 1;
    return 0;
#endif
}

static llmc_rt_status open_plan(llmc_rt_plan *plan, llmc_rt_error *err)
{
#ifdef SIZE_PROBE_RESOLVER
    return llmc_rt_plan_open_ops(plan, probe_plan, probe_plan_size, LLMC_RT_VERIFY_HASHES,
                                 &plan_ops, err);
#else
    return llmc_rt_plan_open(plan, probe_plan, probe_plan_size, LLMC_RT_VERIFY_HASHES, err);
#endif
}

static llmc_rt_status init_session(llmc_rt_session *s, const llmc_rt_plan *plan,
                                   llmc_rt_error *err)
{
#ifdef SIZE_PROBE_RESOLVER
    llmc_rt_plan_info info;
    if (llmc_rt_plan_info_of(plan, &info))
        return LLMC_RT_E_ARG;
    return llmc_rt_session_init_ops(s, plan, info.max_context, &plan_ops, probe_arena,
                                    probe_arena_size, err);
#else
    return llmc_rt_session_init(s, plan, probe_arena, probe_arena_size, err);
#endif
}

int probe_entry(void)
{
    static llmc_rt_plan plan;
    static llmc_rt_session session;
    static float logits[4096];
    static uint32_t sample_scratch[2 * 4096];
    llmc_rt_error err;
    int64_t ids[16], next;
    size_t n;
    llmc_sampler sm;
    if (open_plan(&plan, &err) ||
        init_session(&session, &plan, &err) ||
        run_text(&plan, ids, 16, &n, &err) ||
        llmc_rt_session_feed(&session, ids, (uint32_t)n, logits, &err))
        return 1;
    llmc_sampler_init(&sm, 0.8f, 40, 0.9f, 1);
    if (llmc_sample(&sm, logits, 4096, sample_scratch, sizeof sample_scratch, &next, &err))
        return 1;
    return llmc_rt_session_feed(&session, &next, 1, logits, &err) != LLMC_RT_OK;
}
