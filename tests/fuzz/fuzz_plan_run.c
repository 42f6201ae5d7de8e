/* A plan that verifies, executed for a few steps.  Input: the plan bytes
 * followed by an 8-byte little-endian seed that picks the token ids, the
 * sequence lengths and the input values (fuzz_seeds.sh appends one to
 * every seed plan).
 *
 * LLM plans (InputIds and Logits bindings) get a prompt of 1..4 tokens and
 * 3 decode steps through llmc_rt_session_feed; token ids range over
 * -1..vocab_size, one past each end, which the runtime must refuse.  Other
 * plans get 3 llmc_rt_session_run calls with random S, P and inputs of the
 * dims the plan states at (S, P).  Plans needing more than
 * FUZZ_MAX_SESSION_BYTES of working memory, or steps needing more than
 * MAX_INPUT_BYTES of input data, are skipped: size bugs live in the dims
 * arithmetic, which runs before either cap. */
#include "fuzz_common.h"
#include "llmc_rt.h"
#include "plan_format.h"

#define STEPS 3
#define MAX_INPUT_BYTES ((uint64_t)1 << 20)

static int has_role(const llmc_rt_plan *p, int is_output, int role)
{
    uint32_t n = is_output ? rt_plan_of(p)->n_outputs : rt_plan_of(p)->n_inputs;
    llmc_rt_io io;
    for (uint32_t i = 0; i < n; i++)
        if (llmc_rt_plan_io(p, is_output, i, &io) == LLMC_RT_OK && io.role == role)
            return 1;
    return 0;
}

static void run_llm(llmc_rt_session *s, uint64_t *rng)
{
    /* A plan's vocab_size is any uint32: the harness never asks for more
     * than a session may use (the feed refuses logits whose rows are not
     * vocab_size). */
    uint64_t vocab = rt_plan_of(llmc_rt_session_plan(s))->vocab_size;
    if (vocab > FUZZ_MAX_SESSION_BYTES / sizeof(float))
        return;
    float *logits = malloc((size_t)vocab * sizeof(float) + 1);
    if (!logits)
        return;
    int64_t tokens[4];
    uint32_t n = 1 + (uint32_t)(fuzz_next(rng) % 4);
    llmc_rt_error err;
    for (int step = 0; step <= STEPS; step++, n = 1) {
        for (uint32_t i = 0; i < n; i++)
            tokens[i] = (int64_t)(fuzz_next(rng) % (vocab + 2)) - 1;
        if (llmc_rt_session_feed(s, tokens, n, logits, &err) != LLMC_RT_OK)
            break;
    }
    free(logits);
}

/* Random contents: small integers (indices, shapes, booleans) mostly, any
 * bit pattern sometimes.  The harness's own loop is not code under test:
 * instrumented, its compares and per-element memcpy took over half of every
 * execution (perf) and fed libFuzzer features that say nothing about the
 * runtime. */
__attribute__((no_sanitize("coverage", "address")))
static void fill_random(uint8_t *p, uint64_t bytes, int dtype, uint64_t *rng)
{
    int wild = fuzz_next(rng) % 4 == 0;
    size_t elem = dtype == LLMC_RT_I64 ? 8 : dtype == LLMC_RT_I32 || dtype == LLMC_RT_F32 ? 4 : 1;
    for (uint64_t i = 0; i + elem <= bytes; i += elem) {
        uint64_t v = fuzz_next(rng);
        if (!wild && dtype == LLMC_RT_F32) {
            float f = (float)((int64_t)(v % 2001) - 1000) / 100.0f;
            memcpy(p + i, &f, 4);
        } else {
            if (!wild && dtype != LLMC_RT_F32)
                v = dtype == LLMC_RT_BOOL ? v % 2 : (uint64_t)((int64_t)(v % 9) - 2);
            memcpy(p + i, &v, elem);
        }
    }
}

/* Inputs of the plan at (S, P) with random contents; 0, or -1 if the dims
 * cannot be evaluated or are too large. */
static int make_inputs(const llmc_rt_plan *p, uint32_t S, uint32_t P, llmc_rt_tensor *in,
                       uint64_t *rng)
{
    fb_reader r = rt_reader(p);
    uint64_t total = 0;
    for (uint32_t i = 0; i < rt_plan_of(p)->n_inputs; i++) {
        rt_io_desc io;
        rt_tensor_desc d;
        uint64_t bytes;
        llmc_rt_error err;
        memset(&in[i], 0, sizeof in[i]);
        if (rt_read_io(&r, p, 0, i, &io, &err) || rt_read_tensor(&r, p, io.tensor, &d, &err) ||
            d.dims.len > LLMC_RT_MAX_RANK ||
            rt_eval_dims(&r, &d, S, P, in[i].dims, &bytes, LLMC_RT_E_BOUNDS, &err) ||
            bytes > MAX_INPUT_BYTES - total)
            return -1;
        total += bytes;
        in[i].dtype = d.dtype;
        in[i].rank = (int)d.dims.len;
        in[i].data = malloc(bytes ? bytes : 1);
        if (!in[i].data)
            return -1;
        fill_random(in[i].data, bytes, d.dtype, rng);
    }
    return 0;
}

static void run_generic(llmc_rt_session *s, uint64_t *rng)
{
    const llmc_rt_plan *p = llmc_rt_session_plan(s);
    if (rt_plan_of(p)->n_inputs > 4096)
        return;
    llmc_rt_tensor *in = calloc(rt_plan_of(p)->n_inputs + 1, sizeof *in);
    if (!in)
        return;
    for (int step = 0; step < STEPS; step++) {
        uint32_t S = 1 + (uint32_t)(fuzz_next(rng) % 3), P = (uint32_t)(fuzz_next(rng) % 3);
        llmc_rt_error err;
        int ok = make_inputs(p, S, P, in, rng) == 0 &&
                 llmc_rt_session_run(s, S, P, in, &err) == LLMC_RT_OK;
        for (uint32_t i = 0; i < rt_plan_of(p)->n_inputs; i++) {
            free(in[i].data);
            in[i].data = NULL;
        }
        llmc_rt_tensor out;
        for (uint32_t i = 0; ok && i < rt_plan_of(p)->n_outputs; i++)
            llmc_rt_session_output(s, i, &out, &err);
    }
    free(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t plan_size;
    uint64_t rng;
    uint8_t *bytes = fuzz_plan_and_seed(data, size, &plan_size, &rng);
    llmc_rt_plan plan;
    llmc_rt_error err;
    if (!bytes || llmc_rt_plan_open(&plan, bytes, plan_size, 0, &err) != LLMC_RT_OK ||
        llmc_rt_session_memory(&plan) > FUZZ_MAX_SESSION_BYTES) {
        free(bytes);
        return 0;
    }
    size_t mem_size = llmc_rt_session_memory(&plan);
    void *mem = malloc(mem_size);
    llmc_rt_session s;
    if (mem && llmc_rt_session_init(&s, &plan, mem, mem_size, &err) == LLMC_RT_OK) {
        if (has_role(&plan, 0, ROLE_INPUT_IDS) && has_role(&plan, 1, ROLE_LOGITS))
            run_llm(&s, &rng);
        else
            run_generic(&s, &rng);
    }
    free(mem);
    free(bytes);
    return 0;
}
