/* llmc run PLAN --prompt-ids 5,17,42 --max-new N [--logits-out FILE]
 * Greedy decoding: argmax of each logits row, ties to the lowest id. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "llmc_rt.h"

#define MAX_PROMPT 65536

static const char run_help[] =
    "usage: llmc run PLAN --prompt-ids ID,ID,... --max-new N [--logits-out FILE]\n"
    "\n"
    "Feeds the prompt, then generates N tokens greedily (argmax, ties to the lowest id)\n"
    "and prints the generated ids space-separated on one line.\n"
    "\n"
    "options:\n"
    "  --prompt-ids LIST   comma-separated token ids (required)\n"
    "  --max-new N         tokens to generate (default 16)\n"
    "  --logits-out FILE   raw little-endian float32 rows of vocab size, one per generated\n"
    "                      token: row 0 = logits at the last prompt position, row k = logits\n"
    "                      after feeding generated token k-1\n";

typedef struct {
    const char *plan, *logits_out;
    int64_t *prompt;
    uint32_t n_prompt;
    uint32_t max_new;
} run_args;

static int parse_ids(const char *text, run_args *a)
{
    a->prompt = malloc(sizeof(int64_t) * MAX_PROMPT);
    if (!a->prompt)
        return -1;
    const char *p = text;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || a->n_prompt == MAX_PROMPT || (*end && *end != ','))
            return -1;
        a->prompt[a->n_prompt++] = v;
        p = *end ? end + 1 : end;
    }
    return a->n_prompt ? 0 : -1;
}

static int parse_args(int argc, char **argv, run_args *a)
{
    memset(a, 0, sizeof *a);
    a->max_new = 16;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(arg, "--prompt-ids") && has_value) {
            if (a->prompt || parse_ids(argv[++i], a))
                return llmc_cli_usage("run", "--prompt-ids wants comma-separated non-negative ids, got '%s'", argv[i]);
        } else if (!strcmp(arg, "--max-new") && has_value) {
            int64_t v = llmc_cli_parse_count(argv[++i]);
            if (v < 1 || v > 1 << 24)
                return llmc_cli_usage("run", "--max-new wants an integer >= 1, got '%s'", argv[i]);
            a->max_new = (uint32_t)v;
        } else if (!strcmp(arg, "--logits-out") && has_value) {
            a->logits_out = argv[++i];
        } else if (arg[0] == '-') {
            return llmc_cli_usage("run", "unknown option or missing value: '%s'", arg);
        } else if (!a->plan) {
            a->plan = arg;
        } else {
            return llmc_cli_usage("run", "unexpected argument '%s'", arg);
        }
    }
    if (!a->plan)
        return llmc_cli_usage("run", "missing PLAN");
    if (!a->prompt)
        return llmc_cli_usage("run", "missing --prompt-ids");
    return LLMC_OK;
}

static int64_t argmax(const float *x, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

static int runtime_error(llmc_error *err, const char *what, const llmc_rt_error *rt)
{
    return llmc_fail(err, LLMC_E_RUNTIME, "%s: %s", what, rt->msg[0] ? rt->msg : llmc_rt_status_text(rt->code));
}

/* Runs the greedy loop; writes ids to stdout and logits rows to `logits_file`. */
static int generate(const llmc_rt_plan *plan, const run_args *a, FILE *logits_file, llmc_error *err)
{
    if (!plan->vocab_size)
        return llmc_fail(err, LLMC_E_RUNTIME, "'%s' has no logits output: it is not a language model plan", a->plan);
    if ((uint64_t)a->n_prompt + a->max_new - 1 > plan->max_context)
        return llmc_fail(err, LLMC_E_USAGE, "prompt (%u) + generated tokens (%u) exceed the plan's max context %u",
                         a->n_prompt, a->max_new, plan->max_context);
    for (uint32_t i = 0; i < a->n_prompt; i++)
        if (a->prompt[i] >= plan->vocab_size)
            return llmc_fail(err, LLMC_E_USAGE, "prompt id %lld (position %u) is outside the vocabulary [0, %u) of '%s'",
                             (long long)a->prompt[i], i, plan->vocab_size, a->plan);
    size_t mem_size = llmc_rt_session_memory(plan);
    void *mem = malloc(mem_size);
    float *logits = malloc(sizeof(float) * plan->vocab_size);
    int rc = LLMC_OK;
    llmc_rt_session s;
    llmc_rt_error rt = {0};
    if (!mem || !logits) {
        rc = llmc_fail(err, LLMC_E_NOMEM, "cannot allocate %zu bytes of working memory", mem_size);
    } else if (llmc_rt_session_init(&s, plan, mem, mem_size, &rt) != LLMC_RT_OK) {
        rc = runtime_error(err, "session", &rt);
    } else if (llmc_rt_session_feed(&s, a->prompt, a->n_prompt, logits, &rt) != LLMC_RT_OK) {
        rc = runtime_error(err, "prompt", &rt);
    }
    for (uint32_t k = 0; !rc && k < a->max_new; k++) {
        int64_t token = argmax(logits, plan->vocab_size);
        printf(k ? " %lld" : "%lld", (long long)token);
        if (logits_file && fwrite(logits, sizeof(float), plan->vocab_size, logits_file) != plan->vocab_size)
            rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", a->logits_out, strerror(errno));
        if (!rc && k + 1 < a->max_new && llmc_rt_session_feed(&s, &token, 1, logits, &rt) != LLMC_RT_OK)
            rc = runtime_error(err, "decode", &rt);
    }
    printf("\n");
    free(mem);
    free(logits);
    return rc;
}

int llmc_cmd_run(int argc, char **argv)
{
    if (llmc_cli_wants_help(argc, argv)) {
        fputs(run_help, stdout);
        return 0;
    }
    run_args a;
    int rc = parse_args(argc, argv, &a);
    llmc_error err = {0};
    llmc_mapped_file file = {0, 0};
    llmc_rt_plan plan;
    llmc_rt_error rt = {0};
    llmc_output logits = {0};
    if (!rc)
        rc = llmc_cli_map(a.plan, &file, &err);
    if (!rc && llmc_rt_plan_open(&plan, file.map, file.size, 0, &rt) != LLMC_RT_OK)
        rc = llmc_fail(&err, LLMC_E_RUNTIME, "'%s': %s", a.plan, rt.msg);
    if (!rc && a.logits_out && !llmc_out_create(a.logits_out, &logits, &err))
        rc = err.code;
    if (!rc)
        rc = generate(&plan, &a, logits.file, &err);
    rc = llmc_out_finish(&logits, rc, &err);
    llmc_unmap_file(&file);
    free(a.prompt);
    if (rc == LLMC_E_USAGE && !err.msg[0])
        return rc;
    return rc ? llmc_cli_report(&err) : 0;
}
