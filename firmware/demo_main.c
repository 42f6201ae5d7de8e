/* The firmware demo: a plan linked into flash and executed in place.
 *
 * Opens the plan where it lies (no copy into RAM), encodes the prompt with
 * the plan's tokenizer, generates DEMO_NEW_TOKENS greedy tokens, streams
 * their text through the plan's detokenizer, then prints the prompt's and
 * the generated ids and the RAM it used: the session's static arena (sized
 * by `llmc inspect`, demo_config.h) and the stack's high-water mark.  The
 * plan is opened and the session run with the ops of the plan only (its op
 * resolver, from `llmc inspect --resolver`), so the image carries no other
 * op's checks or kernels. */
#include <stddef.h>
#include <stdint.h>

#include "demo_config.h" /* generated: DEMO_SESSION_BYTES, DEMO_VOCAB, DEMO_PROMPT, ...,
                            LLMC_RESOLVER_ENTRIES */
#include "llmc_rt_resolver.h"
#include "semihost.h"
#include "stack_paint.h"

extern const uint8_t llmc_plan_start[], llmc_plan_end[];

/* The checks and kernels of the plan's ops, in flash. */
static LLMC_RT_RESOLVER(plan_ops, LLMC_RESOLVER_ENTRIES);
extern uint32_t __stack_bottom[], __stack_top[];

/* The session's memory; before the session exists it is the tokenizer's
 * scratch (encoding happens first). */
static uint8_t arena[DEMO_SESSION_BYTES] __attribute__((aligned(64)));
static float logits[DEMO_VOCAB];
static int64_t prompt_ids[DEMO_MAX_PROMPT_IDS];
static int64_t new_ids[DEMO_NEW_TOKENS];

static int fail(const char *what, const llmc_rt_error *err)
{
    sh_write0("firmware: ");
    sh_write0(what);
    sh_write0(": ");
    sh_write0(err->msg);
    sh_write0("\n");
    return 1;
}

static void write_ids(const char *label, const int64_t *ids, size_t n)
{
    sh_write0(label);
    for (size_t i = 0; i < n; i++) {
        sh_write0(i ? " " : "");
        sh_write_u((uint64_t)ids[i]);
    }
    sh_write0("\n");
}

static int encode_prompt(const llmc_rt_plan *plan, size_t *n_ids, llmc_rt_error *err)
{
    static const char prompt[] = DEMO_PROMPT;
    if (llmc_rt_tokenizer_memory(plan, sizeof prompt - 1) > sizeof arena) {
        sh_write0("firmware: the tokenizer's scratch does not fit the arena\n");
        return 1;
    }
    if (llmc_rt_encode(plan, prompt, sizeof prompt - 1, 1, arena, sizeof arena, prompt_ids,
                       DEMO_MAX_PROMPT_IDS, n_ids, err))
        return fail("encode", err);
    sh_write0("prompt: " DEMO_PROMPT "\n");
    return 0;
}

/* Greedy generation, the text streamed as it comes. */
static int generate(const llmc_rt_plan *plan, llmc_rt_session *s, size_t n_prompt,
                    llmc_rt_error *err)
{
    llmc_rt_tokenizer tok;
    llmc_rt_detok d;
    llmc_sampler greedy;
    char text[64];
    size_t n_text;
    if (llmc_rt_plan_tokenizer(plan, &tok, err))
        return fail("tokenizer", err);
    if (llmc_rt_detok_max_bytes(&tok) > sizeof text) {
        sh_write0("firmware: a token's text does not fit the buffer\n");
        return 1;
    }
    llmc_rt_detok_init(&tok, &d);
    llmc_sampler_init(&greedy, 0.0f, 1, 1.0f, 0);
    if (llmc_rt_session_feed(s, prompt_ids, (uint32_t)n_prompt, logits, err))
        return fail("prefill", err);
    sh_write0("text:");
    for (int i = 0; i < DEMO_NEW_TOKENS; i++) {
        if (llmc_sample(&greedy, logits, DEMO_VOCAB, NULL, 0, &new_ids[i], err) ||
            llmc_rt_detok_token(&tok, &d, new_ids[i], text, sizeof text, &n_text, err))
            return fail("sample", err);
        sh_write(text, n_text);
        if (i + 1 < DEMO_NEW_TOKENS && llmc_rt_session_feed(s, &new_ids[i], 1, logits, err))
            return fail("decode", err);
    }
    if (llmc_rt_detok_finish(&tok, &d, text, sizeof text, &n_text, err))
        return fail("detok", err);
    sh_write(text, n_text);
    sh_write0("\n");
    return 0;
}

int main(void)
{
    static llmc_rt_plan plan;
    static llmc_rt_session session;
    llmc_rt_error err;
    size_t n_prompt;
    size_t plan_bytes = (size_t)(llmc_plan_end - llmc_plan_start);
    if (llmc_rt_plan_open_ops(&plan, llmc_plan_start, plan_bytes, LLMC_RT_VERIFY_HASHES,
                              &plan_ops, &err))
        return fail("plan", &err);
    sh_write0("plan: ");
    sh_write_u(plan_bytes);
    sh_write0(" bytes in place at flash address ");
    sh_write_u((uintptr_t)llmc_plan_start);
    sh_write0(", hashes verified\n");
    if (encode_prompt(&plan, &n_prompt, &err))
        return 1;
    llmc_rt_plan_info info;
    if (llmc_rt_plan_info_of(&plan, &info) ||
        llmc_rt_session_init_ops(&session, &plan, info.max_context, &plan_ops, arena,
                                 sizeof arena, &err))
        return fail("session", &err);
    if (generate(&plan, &session, n_prompt, &err))
        return 1;
    write_ids("prompt ids: ", prompt_ids, n_prompt);
    write_ids("generated ids: ", new_ids, DEMO_NEW_TOKENS);
    size_t stack = stack_used(__stack_bottom, __stack_top);
    sh_write0("ram: arena ");
    sh_write_u(sizeof arena);
    sh_write0(" bytes + stack ");
    sh_write_u(stack);
    sh_write0(" bytes (high-water of ");
    sh_write_u((size_t)((char *)__stack_top - (char *)__stack_bottom));
    sh_write0(") = ");
    sh_write_u(sizeof arena + stack);
    sh_write0(" bytes\n");
    return 0;
}
