/* llmc bench PLAN [-p 128,512] [-n 128] [-d 0,4096] [-t 2] [-r 3] [--json] [--roofline] [--profile]
 * llmc bench --roofline [-t 2] [--json]
 *
 * llama-bench-style throughput of a plan: ppN = one prefill of N tokens
 * from position 0, tgN = N single-token decode steps after a TG_PROMPT-token
 * prompt; at depth D (-d) both start from position D after an untimed
 * D-token prompt; tok/s = N / seconds of the timed calls, mean ± sd of r
 * runs after one untimed warm-up.  --roofline adds this machine's peaks (roofline.c)
 * and each test's fraction of the plan's roofline (plan_cost.c); --profile
 * the time of each op code in each test (bench_profile.c). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tools/bench_profile.h"
#include "bench_speculate.h"
#include "cli.h"
#include "support/file_map.h"
#include "kernels/kernel_table.h"
#include "llmc_rt.h"
#include "llmc_rt_internal.h"
#include "llmc_threads.h"
#include "tools/roofline.h"

#define TG_PROMPT 4            /* prompt tokens fed (untimed) before a tgN test */
#define MAX_LIST 16            /* entries of -p, -n, -t */
#define MAX_RESULTS (2 * MAX_LIST * MAX_LIST * MAX_LIST) /* pp and tg x -p/-n x -d x -t */
#define DEFAULT_MAX_THREADS 8  /* -t default: online CPUs, at most this */

static const char bench_help[] =
    "usage: llmc bench PLAN [-p N,N,...] [-n N,N,...] [-d N,N,...] [-t N,N,...] [-r N] [--json]\n"
    "                  [--roofline] [--profile] [--hugepages] [--isa NAME]\n"
    "       llmc bench --roofline [-t N,N,...] [--json]\n"
    "       llmc bench PLAN --speculate K [--prompt-file FILE]... [-n N] [-t N] [-r N]\n"
    "\n"
    "Measures a plan's throughput like llama-bench.  ppN: one prefill of N tokens\n"
    "from position 0; tgN: N decode steps of one token each after a 4-token prompt\n"
    "(untimed).  tok/s = N / seconds of the timed calls; each test runs once untimed,\n"
    "then r times: mean ± sample sd.  Token ids are fixed pseudo-random ids of the\n"
    "plan's vocabulary.  The plan is mapped read-only and used in place; the table\n"
    "ends with the working memory (llmc_rt_session_memory_for the longest test) and\n"
    "the process's peak RSS.\n"
    "\n"
    "options:\n"
    "  -p, --n-prompt LIST     prefill lengths (default 512; 0 = no pp test)\n"
    "  -n, --n-gen LIST        decode lengths (default 128; 0 = no tg test)\n"
    "  -d, --depth LIST        context depths (default 0): each test also runs after an\n"
    "                          untimed prompt of D tokens, ppN prefilling N more from\n"
    "                          position D and tgN decoding N steps from position D\n"
    "                          (depth 0: the 4-token prompt above)\n"
    "  -t, --threads LIST      thread counts, the caller included (default: online CPUs,\n"
    "                          at most 8); every test runs at each\n"
    "  -r, --repetitions N     timed runs per test (default 3)\n"
    "  --json                  one JSON object per line instead of the table:\n"
    "                          {\"test\": \"pp512\", \"tok_s\": 412.3, \"sd\": 2.1, \"threads\": 2, ...}\n"
    "  --roofline              also measure this machine's read bandwidth (a buffer 8x\n"
    "                          the last-level cache), fp32 FMA and int8 peaks on each\n"
    "                          thread count, int8 per instruction mix of the kernels\n"
    "                          (w8: a vpmaddwd per vpmaddubsw, w4: one per 8; the AVX2\n"
    "                          and vpdpbusd loops where the CPU has AVX-512 VNNI; a peak\n"
    "                          above threads x clock x what a core issues\n"
    "                          per cycle is marked (!), suspect), and with a PLAN each\n"
    "                          test's roofline against the peaks of its kernels:\n"
    "                          tgN: bandwidth / bytes read per token (weights of\n"
    "                          Linear/MatMul, one embedding row, K/V of the KV cache\n"
    "                          dtype at the average context, a sliding-window layer's\n"
    "                          at most its window); ppN: peak / operations per token (2*N*K per\n"
    "                          Linear, 4*heads*head_dim per cached position) at the fp32\n"
    "                          peak, and for a plan with int8 Linears each Linear's ops at\n"
    "                          the int8 peak of its mix (4- or 8-bit weights) plus the\n"
    "                          rest at fp32, which it is then held to\n"
    "  --profile               after the table, each test's time per op code (Linear by\n"
    "                          W's layout and dtype): share of the timed calls and us per\n"
    "                          token, from a clock read before and after every op\n"
    "                          (llmc_rt_session_set_observer; the reads cost ~50 ns per\n"
    "                          op); '(outside ops)' is the rest: placing inputs, taking\n"
    "                          logits, the interpreter between ops\n"
    "  --hugepages             read the plan into 2 MiB pages instead of mapping it (as\n"
    "                          llmc run --hugepages)\n"
    "  --isa NAME              run the plan with the kernels NAME of its target (as llmc run\n"
    "                          --isa), and measure --roofline with their loops\n"
    "  --speculate K           instead of the tests: greedy decoding of -n tokens (the first\n"
    "                          entry) after each prompt, plainly and with llmc run --speculate K:\n"
    "                          tok/s (medians of -r runs after one untimed, on the first -t),\n"
    "                          speed-up, drafts kept and tokens per step; the ids must match\n"
    "  --prompt-file FILE      with --speculate: a prompt (text, the plan's tokenizer), one\n"
    "                          row each (up to 8); default: a 16-id pattern repeated and\n"
    "                          pseudo-random ids, 128 of each\n"
    "\n"
    "A test (depth + N) longer than the plan's max_context is refused: recompile with\n"
    "`llmc compile MODEL -o PLAN --max-context N`.\n";

typedef struct {
    uint32_t v[MAX_LIST];
    uint32_t n;
} count_list;

typedef struct {
    const char *plan;
    count_list pp, tg, depth, threads;
    uint32_t reps;
    bool json, roofline, profile, hugepages;
    const char *isa;         /* --isa, or NULL */
    llmc_bench_spec_args spec; /* --speculate K, --prompt-file */
} bench_args;

typedef struct {
    char name[24];          /* "pp512", "tg128" */
    bool prefill;
    uint32_t tokens, depth, threads;
    double mean, sd, median; /* tok/s */
    double *samples;         /* tok/s of each timed run (reps) */
    double seconds;          /* of the timed calls, all runs */
    uint64_t *op_ns;         /* --profile: time in each op over the timed calls */
} bench_result;

typedef struct {
    const bench_args *a;
    const llmc_rt_plan *plan;
    uint64_t plan_bytes;
    uint32_t context;       /* positions the longest test needs */
    size_t mem_size;
    void *mem;
    int64_t *tokens;        /* context pseudo-random ids */
    float *logits;          /* vocab_size */
    llmc_rt_session s;
    bench_profile profile;  /* --profile */
    llmc_cpu_info cpu;      /* named in --json lines */
    bench_result results[MAX_RESULTS];
    uint32_t n_results;
} bench_state;

/* ---- arguments ---- */

/* "128,512" into list; entries in [0, max]. */
static int parse_list(const char *text, uint32_t min, uint32_t max, count_list *list)
{
    list->n = 0;
    for (const char *p = text; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[24];
        if (!len || len >= sizeof item || list->n == MAX_LIST)
            return -1;
        memcpy(item, p, len);
        item[len] = 0;
        int64_t v = llmc_cli_parse_count(item);
        if (v < (int64_t)min || v > (int64_t)max)
            return -1;
        list->v[list->n++] = (uint32_t)v;
        p += len + (comma != NULL);
        if (comma && !*p)
            return -1;
    }
    return list->n ? 0 : -1;
}

static uint32_t default_threads(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online < 1 ? 1 : online > DEFAULT_MAX_THREADS ? DEFAULT_MAX_THREADS : (uint32_t)online;
}

/* -p/-n/-t/-r and their long names; 1 if `arg` is none of them. */
static int parse_valued(const char *arg, const char *value, bench_args *a)
{
    if (!strcmp(arg, "-p") || !strcmp(arg, "--n-prompt")) {
        if (parse_list(value, 0, 1u << 24, &a->pp))
            return llmc_cli_usage("bench", "%s wants comma-separated token counts, got '%s'", arg, value);
    } else if (!strcmp(arg, "-n") || !strcmp(arg, "--n-gen")) {
        if (parse_list(value, 0, 1u << 24, &a->tg))
            return llmc_cli_usage("bench", "%s wants comma-separated token counts, got '%s'", arg, value);
    } else if (!strcmp(arg, "-d") || !strcmp(arg, "--depth")) {
        if (parse_list(value, 0, 1u << 24, &a->depth))
            return llmc_cli_usage("bench", "%s wants comma-separated token counts, got '%s'", arg, value);
    } else if (!strcmp(arg, "-t") || !strcmp(arg, "--threads")) {
        if (parse_list(value, 1, LLMC_MAX_THREADS, &a->threads))
            return llmc_cli_usage("bench", "%s wants comma-separated integers in 1..%d, got '%s'", arg,
                                  LLMC_MAX_THREADS, value);
    } else if (!strcmp(arg, "-r") || !strcmp(arg, "--repetitions")) {
        int64_t v = llmc_cli_parse_count(value);
        if (v < 1 || v > 1000)
            return llmc_cli_usage("bench", "%s wants an integer in 1..1000, got '%s'", arg, value);
        a->reps = (uint32_t)v;
    } else {
        return 1;
    }
    return LLMC_OK;
}

/* --speculate K and --prompt-file FILE; 1 if argv[*i] is neither. */
static int parse_speculate(int argc, char **argv, int *i, llmc_bench_spec_args *s)
{
    const char *arg = argv[*i];
    if (*i + 1 >= argc || (strcmp(arg, "--speculate") && strcmp(arg, "--prompt-file")))
        return 1;
    const char *value = argv[++*i];
    if (!strcmp(arg, "--prompt-file")) {
        if (s->n_prompt_files == LLMC_BENCH_MAX_PROMPTS)
            return llmc_cli_usage("bench", "at most %d --prompt-file", LLMC_BENCH_MAX_PROMPTS);
        s->prompt_files[s->n_prompt_files++] = value;
        return LLMC_OK;
    }
    int64_t v = llmc_cli_parse_count(value);
    if (v < 1 || v > LLMC_RT_SPEC_MAX_DRAFT)
        return llmc_cli_usage("bench", "--speculate wants an integer in [1, %u], got '%s'",
                              LLMC_RT_SPEC_MAX_DRAFT, value);
    s->k = (uint32_t)v;
    return LLMC_OK;
}

static int parse_args(int argc, char **argv, bench_args *a)
{
    memset(a, 0, sizeof *a);
    a->pp = (count_list){{512}, 1};
    a->tg = (count_list){{128}, 1};
    a->depth = (count_list){{0}, 1};
    a->threads = (count_list){{default_threads()}, 1};
    a->reps = 3;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int rc = i + 1 < argc ? parse_valued(arg, argv[i + 1], a) : 1;
        if (rc != 1) {
            if (rc)
                return rc;
            i++;
        } else if (!strcmp(arg, "--json")) {
            a->json = true;
        } else if (!strcmp(arg, "--roofline")) {
            a->roofline = true;
        } else if (!strcmp(arg, "--profile")) {
            a->profile = true;
        } else if (!strcmp(arg, "--hugepages")) {
            a->hugepages = true;
        } else if (!strcmp(arg, "--isa") && i + 1 < argc) {
            a->isa = argv[++i];
        } else if ((rc = parse_speculate(argc, argv, &i, &a->spec)) != 1) {
            if (rc)
                return rc;
        } else if (arg[0] == '-') {
            return llmc_cli_usage("bench", "unknown option or missing value: '%s'", arg);
        } else if (!a->plan) {
            a->plan = arg;
        } else {
            return llmc_cli_usage("bench", "unexpected argument '%s'", arg);
        }
    }
    if (!a->plan && !a->roofline)
        return llmc_cli_usage("bench", "missing PLAN");
    if ((a->spec.k || a->spec.n_prompt_files) && (!a->plan || !a->spec.k || !a->tg.v[0]))
        return llmc_cli_usage("bench", "--speculate K needs a PLAN and -n >= 1; --prompt-file needs --speculate");
    a->spec.plan = a->plan;
    a->spec.n_gen = a->tg.v[0];
    a->spec.reps = a->reps;
    a->spec.threads = a->threads.v[0];
    a->spec.hugepages = a->hugepages;
    return LLMC_OK;
}

/* ---- running the tests ---- */

static int runtime_error(llmc_error *err, const char *what, const llmc_rt_error *rt)
{
    return llmc_fail(err, LLMC_E_RUNTIME, "%s: %s", what, rt->msg[0] ? rt->msg : llmc_rt_status_text(rt->code));
}

static uint32_t max_of(const count_list *l)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < l->n; i++)
        m = l->v[i] > m ? l->v[i] : m;
    return m;
}

/* Tokens fed untimed before a test at depth D: D (at depth 0, a tgN test's
 * TG_PROMPT). */
static uint32_t prompt_of(bool prefill, uint32_t depth)
{
    return depth || prefill ? depth : TG_PROMPT;
}

/* A usage error naming the test, its depth, the positions it needs and the
 * plan's max_context. */
static int too_long(const bench_args *a, bool prefill, uint32_t n, uint32_t depth, uint32_t max, llmc_error *err)
{
    uint32_t prompt = prompt_of(prefill, depth);
    uint64_t need = (uint64_t)prompt + n;
    char at[32] = "", why[64] = "";
    if (depth)
        snprintf(at, sizeof at, " at depth %u", depth);
    if (prompt)
        snprintf(why, sizeof why, depth ? " (depth %u + %u)" : " (a %u-token prompt + %u)", prompt, n);
    return llmc_fail(err, LLMC_E_USAGE,
                     "%s%u%s needs %llu positions%s but '%s' has max_context %u: pass a smaller %s%s or "
                     "recompile with `llmc compile MODEL -o PLAN --max-context %llu`",
                     prefill ? "pp" : "tg", n, at, (unsigned long long)need, why, a->plan, max,
                     prefill ? "-p" : "-n", depth ? " or -d" : "", (unsigned long long)need);
}

/* The positions the longest test needs (depth + N); a usage error if beyond the plan. */
static int bench_context(const bench_args *a, const llmc_rt_plan *plan, uint32_t *context, llmc_error *err)
{
    uint32_t max = rt_plan_of(plan)->max_context;
    if (!max_of(&a->pp) && !max_of(&a->tg))
        return llmc_fail(err, LLMC_E_USAGE, "nothing to run: -p and -n are both 0");
    *context = 0;
    for (uint32_t i = 0; i < a->depth.n; i++)
        for (int prefill = 1; prefill >= 0; prefill--) {
            uint32_t n = max_of(prefill ? &a->pp : &a->tg), depth = a->depth.v[i];
            uint64_t need = (uint64_t)prompt_of(prefill, depth) + n;
            if (!n)
                continue;
            if (need > max)
                return too_long(a, prefill, n, depth, max, err);
            *context = need > *context ? (uint32_t)need : *context;
        }
    return LLMC_OK;
}

/* Fixed pseudo-random ids in [0, vocab): a 32-bit LCG (Numerical Recipes'
 * constants), the same sequence scripts/ort_bench.js feeds ONNX Runtime. */
static void fill_tokens(int64_t *tokens, uint32_t n, uint32_t vocab)
{
    uint32_t x = 12345;
    for (uint32_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        tokens[i] = (int64_t)((x >> 8) % vocab);
    }
}

static int bench_prepare(bench_state *b, llmc_error *err)
{
    const llmc_rt_plan *plan = b->plan;
    if (!rt_plan_of(plan)->vocab_size)
        return llmc_fail(err, LLMC_E_RUNTIME, "'%s' has no logits output: it is not a language model plan",
                         b->a->plan);
    int rc = bench_context(b->a, plan, &b->context, err);
    if (rc)
        return rc;
    b->mem_size = llmc_rt_session_memory_for(plan, b->context);
    b->mem = llmc_alloc_huge(b->mem_size);
    b->tokens = malloc(sizeof(int64_t) * b->context);
    b->logits = malloc(sizeof(float) * rt_plan_of(plan)->vocab_size);
    if (!b->mem || !b->tokens || !b->logits || (b->a->profile && bench_profile_init(&b->profile, plan)))
        return llmc_fail(err, LLMC_E_NOMEM, "cannot allocate %zu bytes of working memory", b->mem_size);
    fill_tokens(b->tokens, b->context, rt_plan_of(plan)->vocab_size);
    return LLMC_OK;
}

/* One run of test r: its timed seconds; with op_ns, the time of each op
 * in the timed calls added there.  The prompt (depth) is fed untimed. */
static llmc_rt_status run_once(bench_state *b, const bench_result *r, uint64_t *op_ns, double *seconds,
                               llmc_rt_error *rt)
{
    uint32_t prompt = prompt_of(r->prefill, r->depth), n = r->tokens;
    llmc_rt_session_reset(&b->s);
    llmc_rt_status st = prompt ? llmc_rt_session_feed(&b->s, b->tokens, prompt, b->logits, rt) : LLMC_RT_OK;
    b->profile.ns = op_ns;
    double t0 = llmc_seconds_now();
    if (!st && r->prefill)
        st = llmc_rt_session_feed(&b->s, b->tokens + prompt, n, b->logits, rt);
    for (uint32_t k = 0; !r->prefill && !st && k < n; k++)
        st = llmc_rt_session_feed(&b->s, &b->tokens[prompt + k], 1, b->logits, rt);
    *seconds = llmc_seconds_now() - t0;
    b->profile.ns = NULL;
    return st;
}

/* Mean, sample sd and median of r->samples. */
static void summarize(bench_result *r, uint32_t n)
{
    double sum = 0, sq = 0, *sorted = r->samples + n;
    for (uint32_t k = 0; k < n; k++)
        sum += r->samples[k];
    r->mean = sum / n;
    for (uint32_t k = 0; k < n; k++)
        sq += (r->samples[k] - r->mean) * (r->samples[k] - r->mean);
    r->sd = n > 1 ? sqrt(sq / (n - 1)) : 0.0;
    memcpy(sorted, r->samples, sizeof *sorted * n);
    r->median = llmc_median(sorted, n);
}

/* One warm-up, then reps timed runs. */
static int run_test(bench_state *b, bool prefill, uint32_t n, uint32_t depth, uint32_t threads, bench_result *r,
                    llmc_error *err)
{
    llmc_rt_error rt = {0};
    uint32_t reps = b->a->reps;
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s%u", prefill ? "pp" : "tg", n);
    r->prefill = prefill;
    r->tokens = n;
    r->depth = depth;
    r->threads = threads;
    if (!(r->samples = malloc(sizeof(double) * 2 * reps)) || /* samples, then sorted */
        (b->a->profile && !(r->op_ns = calloc(rt_plan_of(b->plan)->n_ops + 1u, sizeof *r->op_ns))))
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    for (uint32_t k = 0; k <= reps; k++) {
        double seconds;
        if (run_once(b, r, k ? r->op_ns : NULL, &seconds, &rt))
            return runtime_error(err, r->name, &rt);
        if (k) { /* run 0 is the warm-up */
            r->samples[k - 1] = n / (seconds > 1e-9 ? seconds : 1e-9);
            r->seconds += seconds;
        }
    }
    summarize(r, reps);
    return LLMC_OK;
}

static uint64_t peak_rss_bytes(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) ? 0 : (uint64_t)ru.ru_maxrss * 1024u; /* KiB on Linux */
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* "1.85 GiB" / "595.00 KiB" into buf. */
static const char *human_bytes(double bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    for (; bytes >= 1024.0 && u < 4; u++)
        bytes /= 1024.0;
    snprintf(buf, size, "%.2f %s", bytes, units[u]);
    return buf;
}

/* The rows of a timed step: the whole prompt of a ppN, one of a tgN. */
static uint32_t step_rows(const bench_result *r)
{
    return r->prefill ? r->tokens : 1;
}

static void print_result(const bench_state *b, const bench_result *r)
{
    char size[32];
    if (b->a->json) {
        printf("{\"test\": \"%s\", \"tok_s\": %.3f, \"sd\": %.3f, \"threads\": %u, \"depth\": %u, \"plan\": ",
               r->name, r->mean, r->sd, r->threads, r->depth);
        llmc_cli_json_string(b->a->plan);
        printf(", \"plan_bytes\": %llu, \"n_prompt\": %u, \"n_gen\": %u, \"reps\": %u, \"median_tok_s\": %.3f, "
               "\"samples_tok_s\": [",
               (unsigned long long)b->plan_bytes, prompt_of(r->prefill, r->depth) + (r->prefill ? r->tokens : 0),
               r->prefill ? 0 : r->tokens,
               b->a->reps, r->median);
        for (uint32_t k = 0; k < b->a->reps; k++)
            printf("%s%.3f", k ? ", " : "", r->samples[k]);
        printf("], \"context\": %u, \"working_memory_bytes\": %zu, \"peak_rss_bytes\": %llu, "
               "\"kernels\": \"%s\", \"cpu\": ", b->context, b->mem_size,
               (unsigned long long)peak_rss_bytes(), llmc_rt_plan_step_isa(b->plan, step_rows(r)));
        llmc_cli_json_string(b->cpu.model);
        printf("}\n");
    } else {
        printf("| %-30s | %10s | %7u | %5u | %13s | %11.2f ± %6.2f |\n", base_name(b->a->plan),
               human_bytes((double)b->plan_bytes, size, sizeof size), r->threads, r->depth, r->name, r->mean,
               r->sd);
    }
    fflush(stdout);
}

static void print_table_head(void)
{
    printf("| %-30s | %10s | %7s | %5s | %13s | %20s |\n", "plan", "size", "threads", "depth", "test", "t/s");
    printf("| %.30s | %.10s | %.7s | %.5s | %.13s | %.20s |\n", "------------------------------", "---------:",
           "------:", "----:", "------------:", "-------------------:");
}

static void print_table_foot(const bench_state *b)
{
    char mem[32], rss[32];
    printf("\nppN: N prompt tokens from position depth; tgN: N decode steps from position depth (at depth 0,\n"
           "after a %d-token prompt); fixed pseudo-random ids; mean ± sd of %u runs after 1 warm-up.\n",
           TG_PROMPT, b->a->reps);
    printf("plan mapped read-only; working memory %s (context %u); peak RSS %s\n",
           human_bytes((double)b->mem_size, mem, sizeof mem), b->context,
           human_bytes((double)peak_rss_bytes(), rss, sizeof rss));
    printf("kernels: steps of < %u rows (tgN) on %s, longer on %s\n",
           rt_plan_of(b->plan)->gemm_min_rows, llmc_rt_plan_step_isa(b->plan, 1),
           llmc_rt_plan_step_isa(b->plan, rt_plan_of(b->plan)->gemm_min_rows));
}

/* Every test at `threads` threads, appended to b->results and printed. */
static int run_at(bench_state *b, uint32_t threads, llmc_error *err)
{
    llmc_threads *pool = threads > 1 ? llmc_threads_create(threads) : NULL;
    llmc_rt_error rt = {0};
    int rc = LLMC_OK;
    if (threads > 1 && !pool)
        return llmc_fail(err, LLMC_E_NOMEM, "cannot start %u threads", threads);
    if (llmc_rt_session_init_for(&b->s, b->plan, b->context, b->mem, b->mem_size, &rt))
        rc = runtime_error(err, "session", &rt);
    else
        llmc_rt_session_set_parallel(&b->s, pool ? llmc_threads_parallel : NULL, pool);
    if (b->a->profile)
        llmc_rt_session_set_observer(&b->s, bench_profile_observe, &b->profile);
    for (uint32_t d = 0; d < b->a->depth.n && !rc; d++)
        for (int prefill = 1; prefill >= 0 && !rc; prefill--) {
            const count_list *l = prefill ? &b->a->pp : &b->a->tg;
            for (uint32_t i = 0; i < l->n && !rc; i++) {
                if (!l->v[i])
                    continue;
                bench_result *r = &b->results[b->n_results];
                if (!(rc = run_test(b, prefill, l->v[i], b->a->depth.v[d], threads, r, err))) {
                    b->n_results++;
                    print_result(b, r);
                }
            }
        }
    llmc_threads_destroy(pool);
    return rc;
}

static int run_tests(bench_state *b, llmc_error *err)
{
    int rc = bench_prepare(b, err);
    if (!rc && !b->a->json)
        print_table_head();
    for (uint32_t t = 0; !rc && t < b->a->threads.n; t++)
        rc = run_at(b, b->a->threads.v[t], err);
    if (!rc && !b->a->json)
        print_table_foot(b);
    for (uint32_t i = 0; !rc && b->a->profile && i < b->n_results; i++) {
        const bench_result *r = &b->results[i];
        char label[48]; /* "tg128 @ d4096" at a depth */
        snprintf(label, sizeof label, r->depth ? "%s @ d%u" : "%s", r->name, r->depth);
        bench_profile_print(&b->profile, label, r->threads, r->op_ns, r->seconds,
                            (uint64_t)r->tokens * b->a->reps, b->a->json);
    }
    return rc;
}

/* ---- roofline ---- */

typedef struct {
    double context, bytes, ops;          /* per token */
    double int8_ops[LLMC_INT8_MIXES];    /* of ops: the Linears of each int8 mix */
    double other_ops;                    /* the rest, at the fp32 peak in the int8 roofline */
    /* roofline tok/s of each limit; int8: each mix's Linears at their own
     * int8 peak and the other ops at the fp32 peak (0: no int8 Linears) */
    double read, fp32, int8;
    double roofline, pct;                /* the one that governs the test */
    const char *bound;
    /* the peak it is held to: GB/s or G ops/s, for int8 ops / the time of
     * its parts; suspect if one of the parts' peaks is */
    llmc_roofline_peak peak;
} test_roofline;

/* The int8 roofline: the time per token is the sum over the int8 mixes of
 * their Linears' ops / the mix's peak, plus the other ops / the fp32 peak. */
static void int8_roofline(test_roofline *t, const llmc_plan_cost *c, double per_call, const llmc_roofline_peaks *pk)
{
    double int8_ops = 0, seconds = 0;
    bool suspect = false;
    for (int m = 0; m < LLMC_INT8_MIXES; m++) {
        t->int8_ops[m] = (double)c->int8_ops[m] + (double)c->int8_ops_per_call[m] / per_call;
        if (t->int8_ops[m] > 0) {
            seconds += t->int8_ops[m] / (pk->int8[m].rate * 1e9);
            suspect |= pk->int8[m].suspect;
            int8_ops += t->int8_ops[m];
        }
    }
    t->other_ops = t->ops - int8_ops;
    seconds += t->other_ops / (pk->fp32.rate * 1e9);
    suspect |= t->other_ops > 0 && pk->fp32.suspect;
    t->int8 = int8_ops > 0 ? 1.0 / seconds : 0;
    t->peak = (llmc_roofline_peak){t->ops * t->int8 / 1e9, 0, suspect};
}

static test_roofline roofline_of(const bench_result *r, const llmc_plan_cost *c, const llmc_roofline_peaks *pk)
{
    test_roofline t;
    /* the timed tokens sit at positions [prompt, prompt + N) */
    uint32_t first = prompt_of(r->prefill, r->depth);
    double kv_bytes, attn_ops;
    llmc_plan_cost_at(c, first, r->tokens, &kv_bytes, &attn_ops);
    t.context = llmc_cost_positions(first, r->tokens, 0);
    t.bytes = (double)c->weight_bytes + kv_bytes;
    double per_call = r->prefill ? (double)r->tokens : 1.0;
    t.ops = (double)c->linear_ops + (double)c->linear_ops_per_call / per_call + attn_ops;
    t.read = pk->read_gb_s * 1e9 / t.bytes;
    t.fp32 = pk->fp32.rate * 1e9 / t.ops;
    int8_roofline(&t, c, per_call, pk);
    if (!r->prefill) {
        t.roofline = t.read, t.bound = "read";
        t.peak = (llmc_roofline_peak){pk->read_gb_s, 0, false};
    } else if (t.int8 > 0) {
        t.roofline = t.int8, t.bound = "int8";
    } else {
        t.roofline = t.fp32, t.bound = "fp32";
        t.peak = pk->fp32;
    }
    t.pct = 100.0 * r->mean / t.roofline;
    return t;
}

/* `"NAME_gops": R, "NAME_bound": B, "NAME_suspect": S` of one peak (bound
 * null: unknown); nothing for a peak not measured. */
static void json_peak(const char *name, const char *unit, const llmc_roofline_peak *p)
{
    if (!p->rate)
        return;
    printf(", \"%s_%s\": %.3f, \"%s_bound\": ", name, unit, p->rate, name);
    printf(p->bound > 0 ? "%.3f" : "null", p->bound);
    printf(", \"%s_suspect\": %s", name, p->suspect ? "true" : "false");
}

/* json_peak of each int8 mix's peak: PREFIX_w8_gops, PREFIX_w4_gops. */
static void json_mix_peaks(const char *prefix, const llmc_roofline_peak *p)
{
    for (int m = 0; m < LLMC_INT8_MIXES; m++) {
        char name[32];
        snprintf(name, sizeof name, "%s_%s", prefix, llmc_int8_mix_name((llmc_int8_mix)m));
        json_peak(name, "gops", &p[m]);
    }
}

/* A peak in a table cell: "-" if not measured, "(!)" after a suspect one. */
static const char *cell(const llmc_roofline_peak *p, char *buf, size_t size)
{
    if (!p->rate)
        return "-";
    snprintf(buf, size, "%.2f%s", p->rate, p->suspect ? " (!)" : "");
    return buf;
}

/* The loud part of the sanity check, on stderr. */
static void warn_suspect(const char *what, const llmc_roofline_peak *p, const llmc_roofline_peaks *pk)
{
    if (p->suspect)
        fprintf(stderr,
                "llmc bench: WARNING: the %s peak, %.2f G ops/s on %u threads, exceeds what %s can issue "
                "(%.2f: threads x %.0f MHz (%s; measured %.0f) x ops per cycle per core): the figure is suspect\n",
                what, p->rate, pk->threads, pk->cpu.model, p->bound, pk->cpu.max_mhz, pk->cpu.clock_source,
                pk->cpu.measured_mhz);
}

/* The int8 peaks of the table's AVX2 columns: the AVX2 loops' where they
 * ran beside vpdpbusd or are the plan's, else the plan's loops' (portable). */
static const llmc_roofline_peak *avx2_mixes(const llmc_roofline_peaks *pk)
{
    return pk->int8_avx2[LLMC_INT8_W8].rate ? pk->int8_avx2 : pk->int8;
}

/* The vpdpbusd peak of the last column: ZMM where it ran, else the plan's
 * loops' own where they are YMM vpdpbusd (loops avx2+avxvnni and
 * avx2+avx512vnni-ymm). */
static const llmc_roofline_peak *vpdpbusd_peak(const llmc_roofline_peaks *pk)
{
#if defined(__x86_64__)
    bool ymm = !pk->int8_vnni.rate && (!strcmp(pk->isa, llmc_roofline_avx2_avxvnni.isa) ||
                                       !strcmp(pk->isa, llmc_roofline_avx2_avx512ymm.isa));
#else
    bool ymm = false;
#endif
    return ymm ? &pk->int8[LLMC_INT8_W8] : &pk->int8_vnni;
}

static void print_peaks(const bench_args *a, const llmc_roofline_peaks *pk, uint32_t n)
{
    char buf[32], c[4][32];
    for (uint32_t i = 0; i < n; i++) {
        const llmc_roofline_peak *mix = avx2_mixes(&pk[i]);
        warn_suspect("fp32", &pk[i].fp32, &pk[i]);
        warn_suspect("int8 w8 (vpmaddubsw, a vpmaddwd each)", &mix[LLMC_INT8_W8], &pk[i]);
        warn_suspect("int8 w4 (8 vpmaddubsw per vpmaddwd)", &mix[LLMC_INT8_W4], &pk[i]);
        warn_suspect("int8 (vpdpbusd)", vpdpbusd_peak(&pk[i]), &pk[i]);
    }
    if (a->json) {
        for (uint32_t i = 0; i < n; i++) {
            printf("{\"roofline\": \"peaks\", \"threads\": %u, \"isa\": \"%s\", \"cpu\": ", pk[i].threads, pk[i].isa);
            llmc_cli_json_string(pk[i].cpu.model);
            printf(", \"max_mhz\": %.0f, \"clock_source\": \"%s\", \"measured_mhz\": %.0f, \"read_gb_s\": %.3f",
                   pk[i].cpu.max_mhz, pk[i].cpu.clock_source, pk[i].cpu.measured_mhz, pk[i].read_gb_s);
            json_peak("fp32", "gflops", &pk[i].fp32);
            json_mix_peaks("int8", pk[i].int8);
            json_mix_peaks("int8_avx2", pk[i].int8_avx2);
            json_peak("int8_avx512vnni", "gops", &pk[i].int8_vnni);
            printf(", \"read_buffer_bytes\": %llu}\n", (unsigned long long)pk[i].read_bytes);
        }
        return;
    }
    printf("\n| threads | loops               | read GB/s | fp32 GFLOPS | int8 w8 GOPS (1:1) | int8 w4 GOPS (8:1) | int8 GOPS (vpdpbusd) |\n"
           "| ------: | ------------------- | --------: | ----------: | -----------------: | -----------------: | -------------------: |\n");
    for (uint32_t i = 0; i < n; i++) {
        const llmc_roofline_peak *mix = avx2_mixes(&pk[i]);
        printf("| %7u | %-19s | %9.2f | %11s | %18s | %18s | %20s |\n", pk[i].threads, pk[i].isa, pk[i].read_gb_s,
               cell(&pk[i].fp32, c[0], sizeof c[0]), cell(&mix[LLMC_INT8_W8], c[1], sizeof c[1]),
               cell(&mix[LLMC_INT8_W4], c[2], sizeof c[2]), cell(vpdpbusd_peak(&pk[i]), c[3], sizeof c[3]));
    }
    printf("\nread: sum of a %s buffer, median of 7 passes, the faster of two loop shapes;\n"
           "fp32: FMA chains, 2 ops per lane;\n"
           "int8: u8 x s8 chains, 2 ops per product, in the mix of the kernels of each weight width:\n"
           "w8 (8-bit weights) a vpmaddwd per vpmaddubsw (1:1), w4 (4-bit) 8 vpmaddubsw added in int16\n"
           "per vpmaddwd (8:1), vpdpbusd for both on AVX-512 VNNI (ZMM) or AVX-VNNI (YMM: loops\n"
           "avx2+avxvnni); compute: median of 5 runs;\n"
           "a plan's Linears are held to the int8 peak of their mix in its loops (column loops).\n",
           n ? human_bytes((double)pk[0].read_bytes, buf, sizeof buf) : "?");
    if (n)
        printf("cpu: %s; clock %.0f MHz (%s), measured %.0f MHz (dependent adds);\n"
               "bound: threads x the larger clock x ops per cycle per core; (!) = above it, suspect.\n",
               pk[0].cpu.model, pk[0].cpu.max_mhz, pk[0].cpu.clock_source, pk[0].cpu.measured_mhz);
}

static void print_cost(const bench_state *b, const llmc_plan_cost *c)
{
    if (b->a->json) {
        printf("{\"roofline\": \"plan\", \"plan\": ");
        llmc_cli_json_string(b->a->plan);
        printf(", \"weight_bytes_per_token\": %llu, \"kv_bytes_per_pos\": %llu, \"linear_ops_per_token\": %llu, "
               "\"linear_ops_per_call\": %llu, \"attn_ops_per_pos\": %llu, \"linears\": %u, \"gathers\": %u, \"attentions\": %u, \"quantized\": %s",
               (unsigned long long)c->weight_bytes, (unsigned long long)c->kv_bytes_per_pos,
               (unsigned long long)c->linear_ops, (unsigned long long)c->linear_ops_per_call,
               (unsigned long long)c->attn_ops_per_pos, c->linears, c->gathers, c->attentions, c->quantized ? "true" : "false");
        for (int m = 0; m < LLMC_INT8_MIXES; m++) {
            const char *name = llmc_int8_mix_name((llmc_int8_mix)m);
            printf(", \"int8_%s_ops_per_token\": %llu, \"int8_%s_ops_per_call\": %llu", name,
                   (unsigned long long)c->int8_ops[m], name, (unsigned long long)c->int8_ops_per_call[m]);
        }
        printf(", \"windowed\": [");
        for (uint32_t i = 0; i < c->n_windowed; i++)
            printf("%s{\"window\": %u, \"kv_bytes_per_pos\": %llu, \"attn_ops_per_pos\": %llu}", i ? ", " : "",
                   c->windowed[i].window, (unsigned long long)c->windowed[i].kv_bytes_per_pos,
                   (unsigned long long)c->windowed[i].attn_ops_per_pos);
        printf("]}\n");
        return;
    }
    printf("\nper token: %.4g MB of weights (%u Linear/MatMul, %u Gather rows) + %.4g KB of K/V per cached position;\n"
           "           %.4g GOP in Linear/MatMul (+ %.4g GOP once per call) + %.4g kOP of attention per "
           "cached position\n",
           (double)c->weight_bytes / 1e6, c->linears, c->gathers, (double)c->kv_bytes_per_pos / 1e3,
           (double)c->linear_ops / 1e9, (double)c->linear_ops_per_call / 1e9,
           (double)c->attn_ops_per_pos / 1e3);
    for (int m = 0; m < LLMC_INT8_MIXES; m++)
        if (c->int8_ops[m] || c->int8_ops_per_call[m])
            printf("           of which %.4g GOP (+ %.4g GOP once per call) in Linears of int8 mix %s (%d-bit weights)\n",
                   (double)c->int8_ops[m] / 1e9, (double)c->int8_ops_per_call[m] / 1e9,
                   llmc_int8_mix_name((llmc_int8_mix)m), llmc_int8_mix_bits((llmc_int8_mix)m));
    for (uint32_t i = 0; i < c->n_windowed; i++)
        printf("           of which %.4g KB of K/V and %.4g kOP in layers with a sliding window of %u positions\n",
               (double)c->windowed[i].kv_bytes_per_pos / 1e3, (double)c->windowed[i].attn_ops_per_pos / 1e3,
               c->windowed[i].window);
}

/* `"peaks_used": [...]`: the peaks line's keys a test's roofline divides by. */
static void json_peaks_used(const test_roofline *t)
{
    printf(", \"peaks_used\": [");
    if (!strcmp(t->bound, "int8")) {
        const char *sep = "";
        for (int m = 0; m < LLMC_INT8_MIXES; m++)
            if (t->int8_ops[m] > 0) {
                printf("%s\"int8_%s_gops\"", sep, llmc_int8_mix_name((llmc_int8_mix)m));
                sep = ", ";
            }
        if (t->other_ops > 0)
            printf("%s\"fp32_gflops\"", sep);
    } else {
        printf(!strcmp(t->bound, "read") ? "\"read_gb_s\"" : "\"fp32_gflops\"");
    }
    printf("]");
}

static void print_achieved(const bench_state *b, const bench_result *r, const test_roofline *t,
                           const llmc_roofline_peaks *pk)
{
    if (b->a->json) {
        printf("{\"roofline\": \"%s\", \"threads\": %u, \"depth\": %u, \"tok_s\": %.3f, \"context\": %.1f, "
               "\"bytes_per_token\": %.0f, \"ops_per_token\": %.0f, \"read_tok_s\": %.3f, \"fp32_tok_s\": %.3f, ",
               r->name, r->threads, r->depth, r->mean, t->context, t->bytes, t->ops, t->read, t->fp32);
        printf(t->int8 > 0 ? "\"int8_tok_s\": %.3f" : "\"int8_tok_s\": null", t->int8);
        for (int m = 0; m < LLMC_INT8_MIXES; m++)
            printf(", \"int8_%s_ops_per_token\": %.0f", llmc_int8_mix_name((llmc_int8_mix)m), t->int8_ops[m]);
        printf(", \"roofline_tok_s\": %.3f, \"bound\": \"%s\", \"achieved_pct\": %.2f, \"isa\": \"%s\", \"peak\": %.3f, "
               "\"peak_suspect\": %s",
               t->roofline, t->bound, t->pct, pk->isa, t->peak.rate, t->peak.suspect ? "true" : "false");
        json_peaks_used(t);
        printf(", \"cpu\": ");
        llmc_cli_json_string(pk->cpu.model);
        printf("}\n");
        return;
    }
    char read_s[32] = "-", fp32[32] = "-", int8[32] = "-";
    if (r->prefill) {
        snprintf(fp32, sizeof fp32, "%.2f", t->fp32);
        if (t->int8 > 0)
            snprintf(int8, sizeof int8, "%.2f", t->int8);
    } else {
        snprintf(read_s, sizeof read_s, "%.2f", t->read);
    }
    printf("| %13s | %7u | %5u | %8.1f | %10.2f | %10s | %10s | %10s | %6.1f %% of %-4s%s |\n", r->name, r->threads,
           r->depth, t->context, r->mean, read_s, fp32, int8, t->pct, t->bound, t->peak.suspect ? " (!)" : "");
}

static void print_rooflines(const bench_state *b, const llmc_plan_cost *c, const llmc_roofline_peaks *pk)
{
    print_cost(b, c);
    if (!b->a->json)
        printf("\n| %13s | %7s | %5s | %8s | %10s | %10s | %10s | %10s | %17s |\n"
               "| ------------: | ------: | ----: | -------: | ---------: | ---------: | ---------: | ---------: | ----------------: |\n",
               "test", "threads", "depth", "context", "t/s", "read t/s", "fp32 t/s", "int8 t/s", "achieved");
    for (uint32_t i = 0; i < b->n_results; i++) {
        const bench_result *r = &b->results[i];
        uint32_t k = 0;
        while (b->a->threads.v[k] != r->threads)
            k++;
        test_roofline t = roofline_of(r, c, &pk[k]);
        print_achieved(b, r, &t, &pk[k]);
    }
    if (!b->a->json)
        printf("\nroofline t/s: tgN = read bandwidth / bytes per token (weights + K/V at the average context;\n"
               "a sliding-window layer's K/V at most its window),\n"
               "ppN fp32 = fp32 peak / operations per token; ppN int8 = 1 / the sum of each int8 mix's\n"
               "Linear operations per token / that mix's int8 peak of the plan's loops (columns w8, w4\n"
               "above) + the other operations / the fp32 peak;\n"
               "achieved against read (tg), int8 (pp of a plan with int8 Linears) or fp32 (other pp);\n"
               "(!) = held to a suspect peak.\n"
               "context = average cached positions attention reads (depth + (N + 1) / 2).\n");
}

static int roofline(bench_state *b, llmc_error *err)
{
    const bench_args *a = b->a;
    llmc_roofline_peaks pk[MAX_LIST];
    for (uint32_t i = 0; i < a->threads.n; i++)
        if (llmc_roofline_measure(a->threads.v[i], b->plan ? rt_plan_of(b->plan)->kernels->isa : a->isa, &pk[i]))
            return llmc_fail(err, LLMC_E_NOMEM, "roofline: cannot allocate the read buffer or start %u threads",
                             a->threads.v[i]);
    print_peaks(a, pk, a->threads.n);
    if (!b->plan)
        return LLMC_OK;
    llmc_plan_cost cost;
    llmc_rt_error rt = {0};
    if (llmc_plan_cost_of(b->plan, &cost, &rt))
        return llmc_fail(err, LLMC_E_RUNTIME, "'%s': %s", a->plan, rt.msg);
    print_rooflines(b, &cost, pk);
    return LLMC_OK;
}

static int bench_plan(bench_state *b, llmc_error *err)
{
    llmc_mapped_file file = {0};
    llmc_rt_plan plan;
    llmc_rt_error rt = {0};
    int rc = llmc_open_input(b->a->plan, b->a->hugepages, &file, err);
    if (!rc && llmc_rt_plan_open(&plan, file.map, file.size, 0, &rt) != LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "'%s': %s", b->a->plan, rt.msg);
    if (!rc)
        rc = llmc_cli_use_isa(&plan, b->a->isa, b->a->plan, err);
    if (!rc) {
        b->plan = &plan;
        b->plan_bytes = file.size;
        llmc_cpu_info_read(&b->cpu);
        rc = run_tests(b, err);
    }
    if (!rc && b->a->roofline)
        rc = roofline(b, err); /* after the tests: its buffer must not count in their peak RSS */
    b->plan = NULL;
    llmc_unmap_file(&file);
    return rc;
}

int llmc_cmd_bench(int argc, char **argv)
{
    if (llmc_cli_wants_help(argc, argv)) {
        fputs(bench_help, stdout);
        return 0;
    }
    bench_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    llmc_error err = {0};
    if (a.spec.k)
        return llmc_bench_speculate(&a.spec, &err) ? llmc_cli_report(&err) : 0;
    bench_state *b = calloc(1, sizeof *b);
    if (!b)
        return LLMC_E_NOMEM;
    b->a = &a;
    rc = a.plan ? bench_plan(b, &err) : roofline(b, &err);
    for (uint32_t i = 0; i <= b->n_results && i < MAX_RESULTS; i++) {
        free(b->results[i].samples); /* n_results: a test that failed midway */
        free(b->results[i].op_ns);
    }
    bench_profile_free(&b->profile);
    llmc_free_huge(b->mem, b->mem_size);
    free(b->tokens);
    free(b->logits);
    free(b);
    return rc ? llmc_cli_report(&err) : 0;
}
