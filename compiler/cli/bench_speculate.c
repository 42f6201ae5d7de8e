/* llmc bench PLAN --speculate K (bench_speculate.h): each prompt is fed
 * (untimed), then n_gen tokens are decoded greedily, plainly (one feed a
 * token) and with llmc_rt_speculate_step (prompt lookup, up to K drafts a
 * feed); one untimed run of each, then reps timed ones, medians. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_speculate.h"
#include "cli.h"
#include "llmc_rt.h"
#include "llmc_threads.h"
#include "support/file_map.h"
#include "tools/roofline.h"

#define MAX_PROMPT_TOKENS 4096
#define SYNTHETIC_PATTERN 16 /* ids of the repeated pattern of the synthetic prompt */

typedef struct {
    const llmc_bench_spec_args *a;
    const llmc_rt_plan *plan;
    llmc_rt_plan_info info;
    llmc_rt_session s;
    llmc_sampler greedy;
    int64_t *seq, *plain_ids; /* prompt + generated; plain decoding's ids */
    uint32_t cap;
    float *logits, *rows;
    size_t rows_size;
} spec_bench;

/* What one prompt measured. */
typedef struct {
    char name[40];
    uint32_t n_prompt;
    double plain_tok_s, spec_tok_s;
    uint64_t steps, drafted, accepted;
    bool same_ids;
} spec_row;

static int rt_fail_cli(llmc_error *err, const char *what, const llmc_rt_error *rt)
{
    return llmc_fail(err, LLMC_E_RUNTIME, "%s: %s", what, rt->msg[0] ? rt->msg : llmc_rt_status_text(rt->code));
}

/* One greedy decode of n_gen tokens after seq[0, n_prompt); seconds of the
 * decode; speculative when row is not NULL (its counts filled). */
static int decode_once(spec_bench *b, uint32_t n_prompt, spec_row *row, double *seconds, llmc_error *err)
{
    llmc_rt_error rt = {0};
    uint32_t n = n_prompt, end = n_prompt + b->a->n_gen;
    llmc_rt_session_reset(&b->s);
    if (llmc_rt_session_feed(&b->s, b->seq, n, b->logits, &rt))
        return rt_fail_cli(err, "prompt", &rt);
    double t0 = llmc_seconds_now();
    llmc_sample(&b->greedy, b->logits, b->info.vocab_size, NULL, 0, &b->seq[n++], &rt);
    while (n < end) {
        llmc_rt_spec_step step;
        llmc_rt_status st;
        if (!row) {
            st = llmc_rt_session_feed(&b->s, &b->seq[n - 1], 1, b->logits, &rt);
            if (!st)
                st = llmc_sample(&b->greedy, b->logits, b->info.vocab_size, NULL, 0, &b->seq[n++], &rt);
        } else {
            st = llmc_rt_speculate_step(&b->s, &b->greedy, b->a->k, b->seq, &n, b->cap, b->rows,
                                        b->rows_size, &step, &rt);
            row->steps++;
            row->drafted += step.drafted;
            row->accepted += step.accepted;
        }
        if (st)
            return rt_fail_cli(err, row ? "speculative decode" : "decode", &rt);
    }
    *seconds = llmc_seconds_now() - t0;
    return LLMC_OK;
}

/* Median tok/s of reps timed runs after one untimed; the ids of the last. */
static int measure(spec_bench *b, uint32_t n_prompt, spec_row *row, double *tok_s, llmc_error *err)
{
    double *t = calloc(b->a->reps, sizeof *t), seconds = 0;
    int rc = t ? LLMC_OK : llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    for (uint32_t r = 0; !rc && r <= b->a->reps; r++) {
        if (row)
            row->steps = row->drafted = row->accepted = 0;
        rc = decode_once(b, n_prompt, row, &seconds, err);
        if (!rc && r)
            t[r - 1] = b->a->n_gen / (seconds > 1e-9 ? seconds : 1e-9);
    }
    if (!rc)
        *tok_s = llmc_median(t, b->a->reps);
    free(t);
    return rc;
}

static int bench_prompt(spec_bench *b, uint32_t n_prompt, spec_row *row, llmc_error *err)
{
    row->n_prompt = n_prompt;
    if ((uint64_t)n_prompt + b->a->n_gen + 1 > b->info.max_context)
        return llmc_fail(err, LLMC_E_USAGE, "%s: %u prompt tokens + %u generated exceed the plan's "
                         "max context %u", row->name, n_prompt, b->a->n_gen, b->info.max_context);
    int rc = measure(b, n_prompt, NULL, &row->plain_tok_s, err);
    if (!rc)
        memcpy(b->plain_ids, b->seq + n_prompt, sizeof(int64_t) * b->a->n_gen);
    if (!rc)
        rc = measure(b, n_prompt, row, &row->spec_tok_s, err);
    row->same_ids = !rc && !memcmp(b->plain_ids, b->seq + n_prompt, sizeof(int64_t) * b->a->n_gen);
    if (!rc && !row->same_ids)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "%s: speculative decoding's ids differ from plain "
                       "greedy decoding's", row->name);
    return rc;
}

/* A prompt file's text as ids of the plan's tokenizer (with its specials). */
static int encode_file(spec_bench *b, const char *path, uint32_t *n, llmc_error *err)
{
    llmc_mapped_file f = {0};
    llmc_rt_tokenizer tok;
    llmc_rt_error rt = {0};
    size_t got = 0;
    if (llmc_rt_plan_tokenizer(b->plan, &tok, &rt))
        return llmc_fail(err, LLMC_E_USAGE, "'%s': --prompt-file needs a plan compiled with --tokenizer", b->a->plan);
    int rc = llmc_open_input(path, false, &f, err);
    size_t scratch_size = rc ? 0 : llmc_rt_tokenizer_scratch(&tok, f.size);
    void *scratch = rc ? NULL : malloc(scratch_size);
    if (!rc && !scratch)
        rc = llmc_fail(err, LLMC_E_NOMEM, "out of memory for '%s'", path);
    if (!rc && llmc_rt_tokenizer_encode(&tok, (const char *)f.map, f.size, 1, scratch, scratch_size, b->seq,
                                        MAX_PROMPT_TOKENS, &got, &rt))
        rc = rt_fail_cli(err, path, &rt);
    *n = (uint32_t)got;
    free(scratch);
    llmc_unmap_file(&f);
    return rc;
}

/* The synthetic prompts: a pattern of ids repeated, and pseudo-random ids. */
static uint32_t synthetic(spec_bench *b, int repetitive, spec_row *row)
{
    uint32_t x = 12345, n = 128;
    for (uint32_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        b->seq[i] = (int64_t)((repetitive ? (i % SYNTHETIC_PATTERN) * 7919u : x >> 8) % b->info.vocab_size);
    }
    snprintf(row->name, sizeof row->name, "%s", repetitive ? "repeated ids" : "pseudo-random ids");
    return n;
}

static void print_rows(const spec_bench *b, const spec_row *rows, uint32_t n)
{
    printf("| prompt | tokens | plain tok/s | --speculate %u tok/s | speed-up | drafts kept | tokens per step |\n"
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n", b->a->k);
    for (uint32_t i = 0; i < n; i++) {
        const spec_row *r = &rows[i];
        printf("| %s | %u + %u | %.1f | %.1f | %.2fx | %llu of %llu (%.1f%%) | %.2f |\n", r->name, r->n_prompt,
               b->a->n_gen, r->plain_tok_s, r->spec_tok_s, r->spec_tok_s / r->plain_tok_s,
               (unsigned long long)r->accepted, (unsigned long long)r->drafted,
               r->drafted ? 100.0 * (double)r->accepted / (double)r->drafted : 0.0,
               (double)(b->a->n_gen - 1) / (double)(r->steps ? r->steps : 1));
    }
    printf("\ngreedy; %u timed runs after one untimed, medians; %u thread(s); ids identical to "
           "plain decoding in every run\n", b->a->reps, b->a->threads);
}

static int run_prompts(spec_bench *b, llmc_error *err)
{
    spec_row rows[LLMC_BENCH_MAX_PROMPTS];
    uint32_t n_rows = b->a->n_prompt_files ? b->a->n_prompt_files : 2;
    int rc = LLMC_OK;
    memset(rows, 0, sizeof rows);
    for (uint32_t i = 0; !rc && i < n_rows; i++) {
        uint32_t n = 0;
        if (b->a->n_prompt_files) {
            const char *path = b->a->prompt_files[i], *slash = strrchr(path, '/');
            snprintf(rows[i].name, sizeof rows[i].name, "%s", slash ? slash + 1 : path);
            rc = encode_file(b, path, &n, err);
        } else {
            n = synthetic(b, i == 0, &rows[i]);
        }
        if (!rc)
            rc = bench_prompt(b, n, &rows[i], err);
    }
    if (!rc)
        print_rows(b, rows, n_rows);
    return rc;
}

static int bench_open(spec_bench *b, llmc_threads *pool, llmc_error *err)
{
    llmc_rt_error rt = {0};
    size_t mem_size = llmc_rt_session_memory(b->plan);
    void *mem = llmc_alloc_huge(mem_size);
    llmc_rt_plan_info_of(b->plan, &b->info);
    b->cap = MAX_PROMPT_TOKENS + b->a->n_gen + LLMC_RT_SPEC_MAX_DRAFT + 1;
    b->rows_size = llmc_rt_speculate_scratch(b->plan, b->a->k);
    b->seq = malloc(sizeof(int64_t) * b->cap);
    b->plain_ids = malloc(sizeof(int64_t) * b->a->n_gen);
    b->logits = malloc(sizeof(float) * b->info.vocab_size);
    b->rows = malloc(b->rows_size);
    llmc_sampler_init(&b->greedy, 0.0f, 0, 1.0f, 0);
    int rc = mem && b->seq && b->plain_ids && b->logits && b->rows ? LLMC_OK
             : llmc_fail(err, LLMC_E_NOMEM, "cannot allocate %zu bytes of working memory", mem_size);
    if (!rc && llmc_rt_session_init(&b->s, b->plan, mem, mem_size, &rt))
        rc = rt_fail_cli(err, "session", &rt);
    if (!rc)
        llmc_rt_session_set_parallel(&b->s, pool ? llmc_threads_parallel : NULL, pool);
    if (!rc)
        rc = run_prompts(b, err);
    llmc_free_huge(mem, mem_size);
    free(b->seq);
    free(b->plain_ids);
    free(b->logits);
    free(b->rows);
    return rc;
}

int llmc_bench_speculate(const llmc_bench_spec_args *a, llmc_error *err)
{
    llmc_mapped_file file = {0};
    llmc_rt_plan plan;
    llmc_rt_error rt = {0};
    spec_bench b;
    llmc_threads *pool = a->threads > 1 ? llmc_threads_create(a->threads) : NULL;
    memset(&b, 0, sizeof b);
    b.a = a;
    b.plan = &plan;
    int rc = a->threads > 1 && !pool ? llmc_fail(err, LLMC_E_NOMEM, "cannot start %u threads", a->threads)
                                     : llmc_open_input(a->plan, a->hugepages, &file, err);
    if (!rc && llmc_rt_plan_open(&plan, file.map, file.size, 0, &rt) != LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "'%s': %s", a->plan, rt.msg);
    if (!rc)
        rc = bench_open(&b, pool, err);
    llmc_threads_destroy(pool);
    llmc_unmap_file(&file);
    return rc;
}
