/* llmc run PLAN --prompt-ids 5,17,42 | --prompt TEXT --max-new N [--logits-out FILE]
 *          [--temp T] [--top-k K] [--top-p P] [--seed N] [--stop ID,ID] [--stats]
 *          [--threads N] [--reverify N] [--speculate K [--draft PLAN]]
 * Greedy decoding (argmax of each logits row, ties to the lowest id) unless
 * a sampling flag is given; both go through the runtime's llmc_sampler. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "support/file_map.h"
#include "llmc_rt.h"
#include "llmc_rt_internal.h"
#include "llmc_threads.h"
#include "npu_options.h"

#define MAX_PROMPT 65536

static const char run_help[] =
    "usage: llmc run PLAN --prompt-ids ID,ID,... | --prompt TEXT --max-new N [--logits-out FILE]\n"
    "                [--temp T] [--top-k K] [--top-p P] [--seed N] [--stop ID,ID,...] [--stats]\n"
    "                [--threads N] [--hugepages] [--isa NAME] [--reverify N]\n"
    "                [--speculate K [--draft PLAN]]\n"
    "                [--delegate ref|cpu [--lanes N] [--in-order] [--trace FILE.json]]\n"
    "\n"
    "Feeds the prompt, then generates N tokens and prints the generated ids\n"
    "space-separated on one line (with --prompt: streams their text as it is\n"
    "produced).  Without --temp, --top-k, --top-p and --seed the\n"
    "tokens are greedy (argmax, ties to the lowest id); with any of them they are\n"
    "sampled (temperature 1 unless --temp says otherwise).\n"
    "\n"
    "options:\n"
    "  --prompt-ids LIST   comma-separated token ids\n"
    "  --prompt TEXT       text, encoded with the plan's tokenizer (llmc compile\n"
    "                      --tokenizer) and its special tokens (BOS); the generated\n"
    "                      tokens are printed as text, and generation stops at the\n"
    "                      tokenizer's eos unless --stop says otherwise\n"
    "  --max-new N         tokens to generate (default 16)\n"
    "  --logits-out FILE   raw little-endian float32 rows of vocab size, one per generated\n"
    "                      token: row 0 = logits at the last prompt position, row k = logits\n"
    "                      after feeding generated token k-1\n"
    "  --temp T            sampling temperature (0 = greedy)\n"
    "  --top-k K           sample among the K most likely ids (0 = all)\n"
    "  --top-p P           sample among the most likely ids whose probability reaches P\n"
    "                      (0 < P <= 1; 1 = all)\n"
    "  --seed N            seed of the sampler's PRNG (default 0): same seed, same ids\n"
    "  --stop LIST         comma-separated ids: generation ends after printing one of them\n"
    "  --stats             after the prompt and each decode step, print to stderr the\n"
    "                      position, the bytes the runtime moved (written by ops, copied,\n"
    "                      appended to the KV cache; not the cache rows attention reads)\n"
    "                      and the KV chunks in use\n"
    "  --threads N         threads the runtime may use, the caller included (default 1):\n"
    "                      Linear, MatMul and Attention are split into tasks fixed by the\n"
    "                      shapes, so ids and logits are bitwise identical for every N\n"
    "  --hugepages         read the plan into 2 MiB pages instead of mapping it (the\n"
    "                      same bytes; fewer TLB misses over a big plan, much faster on\n"
    "                      VMs with shadow paging; the page cache copy is not kept mapped)\n"
    "  --isa NAME          run with the kernels NAME of the plan's target instead of the\n"
    "                      fastest this CPU has (\"avx2\" on an AVX-512 VNNI CPU, whose\n"
    "                      default is \"avx2+avx512vnni\"): the same ids and logits\n"
    "  --reverify N        hash the plan's weights when it is opened and again every N\n"
    "                      tokens fed (llmc_rt_session_set_reverify): bytes changed since\n"
    "                      the plan was opened stop generation with an error naming the\n"
    "                      segment and its tensor; the same ids and logits otherwise\n"
    "  --speculate K       speculative decoding: each step drafts up to K tokens (1..32) by\n"
    "                      prompt lookup (what followed an earlier occurrence of the last\n"
    "                      3, 2 or 1 tokens), verifies them in one feed and keeps the ones\n"
    "                      the model confirms: greedy, the same ids as without it; sampling,\n"
    "                      the same distribution (speculative sampling), other ids for a\n"
    "                      seed.  Needs a plan compiled with --logits all (the default);\n"
    "                      --stats adds the steps, drafted and accepted tokens\n"
    "  --draft PLAN        with --speculate: the drafts are PLAN's greedy tokens (a small\n"
    "                      model of the same vocabulary) instead of prompt lookup\n"
    "%s";

typedef struct {
    const char *plan, *logits_out;
    const char *prompt_text;  /* --prompt */
    int64_t *prompt, *stop;
    uint32_t n_prompt, n_stop;
    uint32_t max_new;
    uint32_t threads;         /* --threads */
    uint32_t reverify;        /* --reverify: tokens between weight re-verifications, 0 never */
    uint32_t speculate;       /* --speculate: most tokens drafted a step, 0 plain decoding */
    const char *draft;        /* --draft: the draft model's plan, or NULL (prompt lookup) */
    bool sampling;            /* any of --temp --top-k --top-p --seed */
    bool stats;               /* --stats */
    bool hugepages;           /* --hugepages */
    const char *isa;          /* --isa, or NULL */
    bool has_temp;
    float temp, top_p;
    uint32_t top_k;
    uint64_t seed;
    llmc_npu_options npu;     /* --delegate, --lanes, --in-order, --trace */
} run_args;

static int parse_ids(const char *text, int64_t **ids, uint32_t *n)
{
    *ids = malloc(sizeof(int64_t) * MAX_PROMPT);
    if (!*ids)
        return -1;
    const char *p = text;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || *n == MAX_PROMPT || (*end && *end != ','))
            return -1;
        (*ids)[(*n)++] = v;
        p = *end ? end + 1 : end;
    }
    return *n ? 0 : -1;
}

/* A finite float in [lo, hi]; -1 if the text is not one. */
static int parse_float(const char *text, float lo, float hi, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(text, &end);
    if (end == text || *end || errno || !isfinite(v) || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || *end || errno || text[0] == '-')
        return -1;
    *out = v;
    return 0;
}

/* The sampling flags; 1 if `arg` is not one of them. */
static int parse_sampling(const char *arg, const char *value, run_args *a)
{
    int64_t k;
    if (!strcmp(arg, "--temp")) {
        a->has_temp = true;
        if (parse_float(value, 0.0f, 1e6f, &a->temp))
            return llmc_cli_usage("run", "--temp wants a number >= 0, got '%s'", value);
    } else if (!strcmp(arg, "--top-k")) {
        if ((k = llmc_cli_parse_count(value)) < 0 || k > UINT32_MAX)
            return llmc_cli_usage("run", "--top-k wants an integer >= 0, got '%s'", value);
        a->top_k = (uint32_t)k;
    } else if (!strcmp(arg, "--top-p")) {
        if (parse_float(value, 0.0f, 1.0f, &a->top_p) || a->top_p <= 0.0f)
            return llmc_cli_usage("run", "--top-p wants a number in (0, 1], got '%s'", value);
    } else if (!strcmp(arg, "--seed")) {
        if (parse_u64(value, &a->seed))
            return llmc_cli_usage("run", "--seed wants an integer >= 0, got '%s'", value);
    } else {
        return 1;
    }
    a->sampling = true;
    return LLMC_OK;
}

static int parse_args(int argc, char **argv, run_args *a)
{
    memset(a, 0, sizeof *a);
    a->max_new = 16;
    a->threads = 1;
    a->top_p = 1.0f;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int has_value = i + 1 < argc, rc = has_value ? parse_sampling(arg, argv[i + 1], a) : 1;
        if (rc != 1) {
            if (rc)
                return rc;
            i++;
        } else if ((rc = llmc_npu_parse_option("run", argc, argv, &i, &a->npu)) != 1) {
            if (rc)
                return rc;
        } else if (!strcmp(arg, "--stop") && has_value) {
            if (a->stop || parse_ids(argv[++i], &a->stop, &a->n_stop))
                return llmc_cli_usage("run", "--stop wants comma-separated non-negative ids, got '%s'", argv[i]);
        } else if (!strcmp(arg, "--prompt-ids") && has_value) {
            if (a->prompt || parse_ids(argv[++i], &a->prompt, &a->n_prompt))
                return llmc_cli_usage("run", "--prompt-ids wants comma-separated non-negative ids, got '%s'", argv[i]);
        } else if (!strcmp(arg, "--prompt") && has_value) {
            a->prompt_text = argv[++i];
        } else if (!strcmp(arg, "--max-new") && has_value) {
            int64_t v = llmc_cli_parse_count(argv[++i]);
            if (v < 1 || v > 1 << 24)
                return llmc_cli_usage("run", "--max-new wants an integer >= 1, got '%s'", argv[i]);
            a->max_new = (uint32_t)v;
        } else if (!strcmp(arg, "--threads") && has_value) {
            if (llmc_cli_parse_threads("run", argv[++i], &a->threads))
                return LLMC_E_USAGE;
        } else if (!strcmp(arg, "--reverify") && has_value) {
            int64_t v = llmc_cli_parse_count(argv[++i]);
            if (v < 1 || v > UINT32_MAX)
                return llmc_cli_usage("run", "--reverify wants an integer >= 1, got '%s'", argv[i]);
            a->reverify = (uint32_t)v;
        } else if (!strcmp(arg, "--speculate") && has_value) {
            int64_t v = llmc_cli_parse_count(argv[++i]);
            if (v < 1 || v > LLMC_RT_SPEC_MAX_DRAFT)
                return llmc_cli_usage("run", "--speculate wants an integer in [1, %u], got '%s'",
                                      LLMC_RT_SPEC_MAX_DRAFT, argv[i]);
            a->speculate = (uint32_t)v;
        } else if (!strcmp(arg, "--draft") && has_value) {
            a->draft = argv[++i];
        } else if (!strcmp(arg, "--stats")) {
            a->stats = true;
        } else if (!strcmp(arg, "--hugepages")) {
            a->hugepages = true;
        } else if (!strcmp(arg, "--isa") && has_value) {
            a->isa = argv[++i];
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
    if (!a->prompt == !a->prompt_text)
        return llmc_cli_usage("run", "give one of --prompt-ids and --prompt");
    if (a->draft && !a->speculate)
        return llmc_cli_usage("run", "--draft needs --speculate K");
    if (!a->npu.mode && (a->npu.trace || a->npu.lanes || a->npu.in_order))
        return llmc_cli_usage("run", "--trace, --lanes and --in-order need --delegate ref|cpu");
    return LLMC_OK;
}

static int runtime_error(llmc_error *err, const char *what, const llmc_rt_error *rt)
{
    return llmc_fail(err, LLMC_E_RUNTIME, "%s: %s", what, rt->msg[0] ? rt->msg : llmc_rt_status_text(rt->code));
}

/* Greedy, or the sampling the flags ask for (temperature 1 by default). */
static void sampler_for(const run_args *a, llmc_sampler *sm)
{
    if (!a->sampling)
        llmc_sampler_init(sm, 0.0f, 0, 1.0f, 0);
    else
        llmc_sampler_init(sm, a->has_temp ? a->temp : 1.0f, a->top_k, a->top_p, a->seed);
    sm->stop = a->stop;
    sm->n_stop = a->n_stop;
}

/* --stats: one line per run (the prompt, then each decode step). */
static void print_stats(const llmc_rt_session *s, const char *what)
{
    llmc_rt_stats st;
    if (llmc_rt_session_stats(s, &st) == LLMC_RT_OK)
        fprintf(stderr, "llmc run: %s tokens_cached=%u bytes_moved=%llu kv_chunks=%u/%u\n", what, st.position,
                (unsigned long long)st.bytes_last, st.kv_chunks_used, st.kv_chunks);
}

/* A session on mem whose ops run on pool's threads (NULL: serial), which
 * re-verifies the plan every `reverify` tokens (0: never). */
static llmc_rt_status session_start(llmc_rt_session *s, const llmc_rt_plan *plan, void *mem,
                                    size_t mem_size, llmc_threads *pool, uint32_t reverify,
                                    llmc_rt_error *rt)
{
    llmc_rt_status st = llmc_rt_session_init(s, plan, mem, mem_size, rt);
    if (!st) {
        llmc_rt_session_set_parallel(s, pool ? llmc_threads_parallel : NULL, pool);
        llmc_rt_session_set_reverify(s, reverify);
    }
    return st;
}

/* Generated tokens on stdout: ids, or (with a tokenizer) their text as it
 * completes, flushed token by token. */
typedef struct {
    const llmc_rt_tokenizer *tok;   /* NULL: print ids */
    llmc_rt_detok detok;
    char *text;
    uint32_t printed;
} token_printer;

static int print_token(token_printer *tp, int64_t token, llmc_error *err)
{
    if (!tp->tok) {
        printf(tp->printed++ ? " %lld" : "%lld", (long long)token);
        return LLMC_OK;
    }
    size_t n;
    llmc_rt_error rt = {0};
    if (llmc_rt_detok_token(tp->tok, &tp->detok, token, tp->text, llmc_rt_detok_max_bytes(tp->tok), &n, &rt))
        return runtime_error(err, "decode text", &rt);
    fwrite(tp->text, 1, n, stdout);
    fflush(stdout);
    return LLMC_OK;
}

static void print_end(token_printer *tp)
{
    size_t n = 0;
    if (tp->tok && !llmc_rt_detok_finish(tp->tok, &tp->detok, tp->text, llmc_rt_detok_max_bytes(tp->tok), &n, NULL))
        fwrite(tp->text, 1, n, stdout);
    printf("\n");
}

/* The prompt: one llmc_rt_session_feed, or chunks through the plan's subgraphs
 * (--delegate); --stats prints what it moved and, chunked, the delegate's
 * utilization and bubble rate. */
static int prefill(llmc_rt_session *s, const run_args *a, llmc_npu **npu, float *logits,
                   llmc_error *err)
{
    llmc_rt_error rt = {0};
    if (!a->npu.mode) {
        if (llmc_rt_session_feed_checked(s, a->prompt, a->n_prompt, logits, &rt) != LLMC_RT_OK)
            return runtime_error(err, "prompt", &rt);
    } else {
        int rc = llmc_npu_start(npu, s, &a->npu, err);
        if (!rc)
            rc = llmc_npu_prefill(*npu, a->prompt, a->n_prompt, logits, err);
        if (rc)
            return rc;
    }
    if (a->stats)
        print_stats(s, "prompt");
    if (a->stats && *npu) {
        llmc_npu_figures f;
        llmc_npu_last(*npu, &f);
        fprintf(stderr, "llmc run: chunked prefill %.3f ms, %u delegate nodes, %u cpu nodes, "
                "delegate utilization %.1f%%, bubble rate %.1f%%\n", f.wall_ns / 1e6,
                f.delegate_nodes, f.cpu_nodes, 100 * llmc_npu_utilization(&f),
                100 * llmc_npu_bubble_rate(&f));
    }
    return LLMC_OK;
}

/* Where generated tokens go: stdout (ids or text), the logits rows of
 * --logits-out, the count, and whether generation ended (a stop token or
 * max_new tokens). */
typedef struct {
    const run_args *a;
    token_printer *tp;
    FILE *logits_file;
    uint32_t vocab, emitted;
    bool done;
} token_sink;

/* One generated token and the logits row it was chosen from. */
static int emit(token_sink *o, const llmc_sampler *sm, int64_t token, const float *row,
                llmc_error *err)
{
    int rc = print_token(o->tp, token, err);
    if (!rc && o->logits_file && fwrite(row, sizeof(float), o->vocab, o->logits_file) != o->vocab)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", o->a->logits_out, strerror(errno));
    o->emitted++;
    o->done = rc || llmc_sampler_is_stop(sm, token) || o->emitted == o->a->max_new;
    return rc;
}

/* Plain decoding: one feed per token after the first. */
static int decode_plain(llmc_rt_session *s, llmc_sampler *sm, token_sink *o, float *logits,
                        void *scratch, size_t scratch_size, llmc_error *err)
{
    llmc_rt_error rt = {0};
    int rc = LLMC_OK;
    while (!rc && !o->done) {
        int64_t token = 0;
        if (llmc_sample(sm, logits, o->vocab, scratch, scratch_size, &token, &rt) != LLMC_RT_OK)
            return runtime_error(err, "sampling", &rt);
        rc = emit(o, sm, token, logits, err);
        if (!rc && !o->done && llmc_rt_session_feed_checked(s, &token, 1, logits, &rt) != LLMC_RT_OK)
            rc = runtime_error(err, "decode", &rt);
        else if (!rc && !o->done && o->a->stats)
            print_stats(s, "decode");
    }
    return rc;
}

/* --draft PLAN: a second session that holds seq[0, pos) of the sequence and
 * proposes its greedy tokens. */
typedef struct {
    llmc_mapped_file file;
    llmc_rt_plan plan;
    llmc_rt_plan_info info;
    llmc_rt_session s;
    void *mem;
    size_t mem_size;
    float *logits;
    llmc_sampler greedy;
    uint32_t pos;
} draft_model;

static int draft_open(draft_model *d, const run_args *a, const llmc_rt_plan *target, llmc_threads *pool,
                      llmc_error *err)
{
    llmc_rt_error rt = {0};
    uint32_t vocab = rt_plan_of(target)->vocab_size;
    int rc = llmc_open_input(a->draft, a->hugepages, &d->file, err);
    if (!rc && (llmc_rt_plan_open(&d->plan, d->file.map, d->file.size, 0, &rt) ||
                llmc_rt_plan_info_of(&d->plan, &d->info)))
        return llmc_fail(err, LLMC_E_RUNTIME, "--draft '%s': %s", a->draft, rt.msg);
    if (!rc && d->info.vocab_size != vocab)
        return llmc_fail(err, LLMC_E_USAGE, "--draft '%s' has a vocabulary of %u ids; '%s' has %u: a draft "
                         "model must share the target's vocabulary", a->draft, d->info.vocab_size, a->plan, vocab);
    if (!rc && (uint64_t)a->n_prompt + a->max_new + a->speculate > d->info.max_context)
        return llmc_fail(err, LLMC_E_USAGE, "--draft '%s': prompt (%u) + generated tokens (%u) + --speculate %u "
                         "exceed its max context %u", a->draft, a->n_prompt, a->max_new, a->speculate,
                         d->info.max_context);
    d->mem_size = rc ? 0 : llmc_rt_session_memory(&d->plan);
    d->mem = rc ? NULL : llmc_alloc_huge(d->mem_size);
    d->logits = malloc(sizeof(float) * vocab);
    llmc_sampler_init(&d->greedy, 0.0f, 0, 1.0f, 0);
    if (!rc && (!d->mem || !d->logits))
        rc = llmc_fail(err, LLMC_E_NOMEM, "cannot allocate %zu bytes for --draft", d->mem_size);
    if (!rc && session_start(&d->s, &d->plan, d->mem, d->mem_size, pool, 0, &rt))
        rc = runtime_error(err, "--draft session", &rt);
    return rc;
}

static void draft_close(draft_model *d)
{
    llmc_free_huge(d->mem, d->mem_size);
    free(d->logits);
    llmc_unmap_file(&d->file);
}

/* Up to k greedy tokens of the draft model after seq[0, n) into seq + n:
 * it first feeds what it has not seen (at least the pending seq[n - 1]). */
static llmc_rt_status draft_tokens(draft_model *d, int64_t *seq, uint32_t n, uint32_t k, uint32_t *drafted,
                                   llmc_rt_error *rt)
{
    llmc_rt_status st = llmc_rt_session_feed(&d->s, seq + d->pos, n - d->pos, d->logits, rt);
    uint32_t span = llmc_rt_session_rewind_span(&d->s), i = 0;
    d->pos = n;
    k = span - 1 < k ? span - 1 : k; /* it feeds k - 1 of them and rewinds back to n at most */
    for (; !st && i < k; i++) {
        st = llmc_sample(&d->greedy, d->logits, d->info.vocab_size, NULL, 0, &seq[n + i], rt);
        if (!st && i + 1 < k && !(st = llmc_rt_session_feed(&d->s, &seq[n + i], 1, d->logits, rt)))
            d->pos++;
    }
    *drafted = i;
    return st;
}

/* One step with the draft model's tokens; the draft session is rewound to
 * the tokens it shares with the sequence. */
static llmc_rt_status draft_step(draft_model *d, llmc_rt_session *s, llmc_sampler *sm, uint32_t k, int64_t *seq,
                                 uint32_t *n, uint32_t cap, float *rows, size_t rows_size, llmc_rt_spec_step *step,
                                 llmc_rt_error *rt)
{
    uint32_t drafted = 0, a = 0;
    llmc_rt_status st = draft_tokens(d, seq, *n, llmc_rt_speculate_room(s, k, *n, cap), &drafted, rt);
    if (!st)
        st = llmc_rt_speculate_verify(s, sm, seq, *n, drafted, rows, rows_size, &a, rt);
    if (!st && d->pos > *n + a && !(st = llmc_rt_session_rewind(&d->s, *n + a, rt)))
        d->pos = *n + a;
    *n += st ? 0 : a + 1;
    step->drafted = drafted;
    step->accepted = a;
    return st;
}

/* --speculate K: the first token from the prompt's logits as without it,
 * then steps of llmc_rt_speculate_step over prompt + generated tokens. */
static int decode_speculative(const llmc_rt_plan *plan, llmc_rt_session *s, llmc_sampler *sm,
                              token_sink *o, const float *logits, void *scratch, size_t scratch_size,
                              draft_model *draft, llmc_error *err)
{
    const run_args *a = o->a;
    uint32_t cap = a->n_prompt + a->max_new + LLMC_RT_SPEC_MAX_DRAFT + 1, n = a->n_prompt;
    size_t spec_size = llmc_rt_speculate_scratch(plan, a->speculate);
    int64_t *seq = malloc(sizeof(int64_t) * cap);
    float *rows = malloc(spec_size);
    uint64_t steps = 0, drafted = 0, accepted = 0;
    llmc_rt_error rt = {0};
    int rc = seq && rows ? LLMC_OK : llmc_fail(err, LLMC_E_NOMEM, "out of memory for --speculate");
    if (!rc) {
        memcpy(seq, a->prompt, sizeof(int64_t) * n);
        if (llmc_sample(sm, logits, o->vocab, scratch, scratch_size, &seq[n], &rt) != LLMC_RT_OK)
            rc = runtime_error(err, "sampling", &rt);
    }
    if (!rc)
        rc = emit(o, sm, seq[n++], logits, err);
    while (!rc && !o->done) {
        llmc_rt_spec_step step;
        uint32_t first = n;
        llmc_rt_status st = draft ? draft_step(draft, s, sm, a->speculate, seq, &n, cap, rows, spec_size, &step, &rt)
                                  : llmc_rt_speculate_step(s, sm, a->speculate, seq, &n, cap, rows, spec_size, &step,
                                                           &rt);
        if (st != LLMC_RT_OK) {
            rc = runtime_error(err, "speculative decode", &rt);
            break;
        }
        steps++;
        drafted += step.drafted;
        accepted += step.accepted;
        for (uint32_t i = first; !rc && !o->done && i < n; i++)
            rc = emit(o, sm, seq[i], rows + (size_t)(i - first) * o->vocab, err);
        if (!rc && a->stats)
            print_stats(s, "speculate");
    }
    if (a->stats)
        fprintf(stderr, "llmc run: speculate %u: %llu steps, %llu drafted, %llu accepted (%.1f%%), "
                "%.2f tokens per step\n", a->speculate, (unsigned long long)steps,
                (unsigned long long)drafted, (unsigned long long)accepted,
                drafted ? 100.0 * (double)accepted / (double)drafted : 0.0,
                steps ? (double)(o->emitted - 1) / (double)steps : 0.0);
    free(seq);
    free(rows);
    return rc;
}

/* Runs the generation loop; writes ids (or text) to stdout and logits rows to `logits_file`. */
static int generate(const llmc_rt_plan *plan, const run_args *a, token_printer *tp, FILE *logits_file,
                    llmc_error *err)
{
    if (!rt_plan_of(plan)->vocab_size)
        return llmc_fail(err, LLMC_E_RUNTIME, "'%s' has no logits output: it is not a language model plan", a->plan);
    if ((uint64_t)a->n_prompt + a->max_new - 1 > rt_plan_of(plan)->max_context)
        return llmc_fail(err, LLMC_E_USAGE, "prompt (%u) + generated tokens (%u) exceed the plan's max context %u",
                         a->n_prompt, a->max_new, rt_plan_of(plan)->max_context);
    for (uint32_t i = 0; i < a->n_prompt; i++)
        if (a->prompt[i] >= rt_plan_of(plan)->vocab_size)
            return llmc_fail(err, LLMC_E_USAGE, "prompt id %lld (position %u) is outside the vocabulary [0, %u) of '%s'",
                             (long long)a->prompt[i], i, rt_plan_of(plan)->vocab_size, a->plan);
    size_t mem_size = llmc_rt_session_memory(plan);
    size_t scratch_size = LLMC_SAMPLER_SCRATCH_BYTES(rt_plan_of(plan)->vocab_size);
    void *mem = llmc_alloc_huge(mem_size), *scratch = malloc(scratch_size);
    llmc_threads *pool = a->threads > 1 ? llmc_threads_create(a->threads) : NULL;
    float *logits = malloc(sizeof(float) * rt_plan_of(plan)->vocab_size);
    int rc = LLMC_OK;
    llmc_rt_session s;
    llmc_rt_error rt = {0};
    llmc_sampler sm;
    llmc_npu *npu = NULL;
    token_sink out = {a, tp, logits_file, rt_plan_of(plan)->vocab_size, 0, false};
    sampler_for(a, &sm);
    if (!mem || !logits || !scratch) {
        rc = llmc_fail(err, LLMC_E_NOMEM, "cannot allocate %zu bytes of working memory", mem_size);
    } else if (a->threads > 1 && !pool) {
        rc = llmc_fail(err, LLMC_E_NOMEM, "cannot start %u threads", a->threads);
    } else if (session_start(&s, plan, mem, mem_size, pool, a->reverify, &rt) != LLMC_RT_OK) {
        rc = runtime_error(err, "session", &rt);
    } else {
        rc = prefill(&s, a, &npu, logits, err);
    }
    draft_model draft = {0};
    if (!rc && a->draft)
        rc = draft_open(&draft, a, plan, pool, err);
    if (!rc && a->speculate)
        rc = decode_speculative(plan, &s, &sm, &out, logits, scratch, scratch_size, a->draft ? &draft : NULL, err);
    else if (!rc)
        rc = decode_plain(&s, &sm, &out, logits, scratch, scratch_size, err);
    print_end(tp);
    draft_close(&draft);
    int stop_rc = llmc_npu_stop(npu, err);
    rc = rc ? rc : stop_rc;
    llmc_threads_destroy(pool);
    llmc_free_huge(mem, mem_size);
    free(scratch);
    free(logits);
    return rc;
}

/* --prompt: the plan's tokenizer encodes the text (with its special
 * tokens) and will print the generated tokens; its eos stops generation
 * unless --stop was given. */
static int encode_prompt(const llmc_rt_plan *plan, run_args *a, llmc_rt_tokenizer *tok, token_printer *tp,
                         llmc_error *err)
{
    llmc_rt_error rt = {0};
    size_t len = strlen(a->prompt_text), n = 0;
    if (llmc_rt_plan_tokenizer(plan, tok, &rt))
        return llmc_fail(err, LLMC_E_USAGE, "'%s': --prompt needs a plan compiled with --tokenizer", a->plan);
    size_t scratch_size = llmc_rt_tokenizer_scratch(tok, len);
    void *scratch = malloc(scratch_size);
    a->prompt = malloc(sizeof(int64_t) * MAX_PROMPT);
    tp->tok = tok;
    tp->text = malloc(llmc_rt_detok_max_bytes(tok));
    llmc_rt_detok_init(tok, &tp->detok);
    int rc = scratch && a->prompt && tp->text ? LLMC_OK : llmc_fail(err, LLMC_E_NOMEM, "out of memory for the prompt");
    if (!rc && llmc_rt_tokenizer_encode(tok, a->prompt_text, len, 1, scratch, scratch_size, a->prompt, MAX_PROMPT,
                                        &n, &rt))
        rc = runtime_error(err, "--prompt", &rt);
    if (!rc && n == 0)
        rc = llmc_fail(err, LLMC_E_USAGE, "--prompt encodes to no tokens");
    a->n_prompt = (uint32_t)n;
    uint32_t eos;
    llmc_rt_tokenizer_ids(tok, NULL, NULL, &eos);
    if (!rc && !a->stop && eos != UINT32_MAX) {
        a->stop = malloc(sizeof(int64_t));
        if (a->stop) {
            a->stop[0] = eos;
            a->n_stop = 1;
        }
    }
    free(scratch);
    return rc;
}

int llmc_cmd_run(int argc, char **argv)
{
    if (llmc_cli_wants_help(argc, argv)) {
        printf(run_help, llmc_npu_help);
        return 0;
    }
    run_args a;
    int rc = parse_args(argc, argv, &a);
    llmc_error err = {0};
    llmc_mapped_file file = {0};
    llmc_rt_plan plan;
    llmc_rt_error rt = {0};
    llmc_output logits = {0};
    if (!rc)
        rc = llmc_open_input(a.plan, a.hugepages, &file, &err);
    if (!rc && llmc_rt_plan_open(&plan, file.map, file.size,
                                   a.reverify ? LLMC_RT_VERIFY_HASHES : 0, &rt) != LLMC_RT_OK)
        rc = llmc_fail(&err, LLMC_E_RUNTIME, "'%s': %s", a.plan, rt.msg);
    if (!rc)
        rc = llmc_cli_use_isa(&plan, a.isa, a.plan, &err);
    if (!rc && a.logits_out && !llmc_out_create(a.logits_out, &logits, &err))
        rc = err.code;
    llmc_rt_tokenizer tok;
    token_printer tp = {0};
    if (!rc && a.prompt_text)
        rc = encode_prompt(&plan, &a, &tok, &tp, &err);
    if (!rc)
        rc = generate(&plan, &a, &tp, logits.file, &err);
    free(tp.text);
    rc = llmc_out_finish(&logits, rc, &err);
    llmc_unmap_file(&file);
    free(a.prompt);
    free(a.stop);
    if (rc == LLMC_E_USAGE && !err.msg[0])
        return rc;
    return rc ? llmc_cli_report(&err) : 0;
}
