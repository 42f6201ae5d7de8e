/* fuzz_chunked_input(): see fuzz_chunked.h. */
#include "fuzz_chunked.h"
#include "fuzz_common.h"
#include "llmc_rt_internal.h"

#define MAX_CONTEXT 16
/* Prompts of up to 6 tokens: with the seeds' chunks of 2 and 4 that is up
 * to 3 chunks (every lane in flight), a short last chunk, and a full chunk
 * of 4 rows (the int8 kernel's GEMM path); longer prompts only repeat those
 * paths, and their cost grows with the prompt. */
#define MAX_PROMPT 6
#define MAX_LANES 3

/* Sizes out of range must come back as SIZE_MAX, never crash. */
static void measure_edges(const llmc_rt_plan *p)
{
    static const uint32_t contexts[] = {0, 1, UINT32_MAX};
    for (size_t i = 0; i < sizeof contexts / sizeof *contexts; i++)
        (void)llmc_rt_chunked_memory(p, contexts[i], 1);
    (void)llmc_rt_chunked_memory(p, rt_plan_of(p)->max_context + 1, 1);
    (void)llmc_rt_chunked_memory(p, rt_plan_of(p)->max_context, 0);
    (void)llmc_rt_chunked_memory(p, rt_plan_of(p)->max_context, 9);
}

static void list_nodes(const llmc_rt_chunked *c)
{
    llmc_rt_chunk_event e;
    uint32_t n = llmc_rt_chunked_nodes(c);
    for (uint32_t k = 0; k <= n; k++) /* one past the end is refused */
        (void)llmc_rt_chunked_node(c, k, &e);
}

/* A prompt of 1..MAX_PROMPT (at most context) ids in -1..vocab, then one
 * decode step. */
static void prefill(llmc_rt_chunked *c, llmc_rt_session *s, uint32_t context, uint64_t *rng)
{
    uint32_t vocab = rt_plan_of(llmc_rt_session_plan(s))->vocab_size;
    if ((size_t)vocab * sizeof(float) > FUZZ_MAX_SESSION_BYTES)
        return; /* a fuzzed vocab_size of 2^30 would have the harness allocate 4 GB of logits */
    int64_t tokens[MAX_PROMPT];
    float *logits = malloc((size_t)vocab * sizeof(float) + 1);
    uint32_t n = 1 + (uint32_t)(fuzz_next(rng) % (context < MAX_PROMPT ? context : MAX_PROMPT));
    for (uint32_t i = 0; i < n; i++)
        tokens[i] = (int64_t)(fuzz_next(rng) % ((uint64_t)vocab + 2)) - 1;
    llmc_rt_error err;
    if (logits && llmc_rt_chunked_prefill(c, tokens, n, logits, &err) == LLMC_RT_OK && n < context)
        (void)llmc_rt_session_feed(s, tokens, 1, logits, &err);
    free(logits);
}

static void run(llmc_rt_plan *p, const llmc_rt_delegate *delegate, uint64_t *rng)
{
    uint32_t context = rt_plan_of(p)->max_context < MAX_CONTEXT ? rt_plan_of(p)->max_context
                                                                  : MAX_CONTEXT;
    uint32_t lanes = 1 + (uint32_t)(fuzz_next(rng) % MAX_LANES);
    size_t session_size = llmc_rt_session_memory_for(p, context);
    size_t chunked_size = llmc_rt_chunked_memory(p, context, lanes);
    if (session_size > FUZZ_MAX_SESSION_BYTES || chunked_size > FUZZ_MAX_SESSION_BYTES)
        return;
    void *session_mem = malloc(session_size ? session_size : 1);
    void *chunked_mem = malloc(chunked_size ? chunked_size : 1);
    llmc_rt_session s;
    llmc_rt_chunked *c;
    llmc_rt_error err;
    if (session_mem && chunked_mem &&
        llmc_rt_session_init_for(&s, p, context, session_mem, session_size, &err) == LLMC_RT_OK &&
        llmc_rt_chunked_init(&c, &s, delegate, lanes, chunked_mem, chunked_size, &err) == LLMC_RT_OK) {
        llmc_rt_chunked_set_schedule(c, (int)(fuzz_next(rng) % 2), NULL);
        list_nodes(c);
        prefill(c, &s, context, rng);
        llmc_rt_chunked_release(c);
    }
    free(chunked_mem);
    free(session_mem);
}

void fuzz_chunked_input(const uint8_t *data, size_t size, const llmc_rt_delegate *delegate)
{
    size_t plan_size;
    uint64_t rng;
    uint8_t *bytes = fuzz_plan_and_seed(data, size, &plan_size, &rng);
    llmc_rt_plan plan;
    llmc_rt_error err;
    if (bytes && llmc_rt_plan_open(&plan, bytes, plan_size, 0, &err) == LLMC_RT_OK) {
        measure_edges(&plan);
        run(&plan, delegate, &rng);
    }
    free(bytes);
}
