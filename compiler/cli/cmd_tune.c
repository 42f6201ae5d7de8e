/* llmc tune PLAN [-t N] [--max-rows M] [--prefill-rows P] [-r R]: measures
 * on this machine which of the plan target's kernel tables runs its decode
 * steps and its prefills fastest (on x86-64 an "avx2" plan runs on the
 * AVX2, AVX-VNNI and AVX-512 VNNI tables, with the same bits: which is
 * faster depends on the core, e.g. 512-bit instructions on Zen 4's
 * double-pumped 256-bit units), which kernel a prefill's GEMM should run
 * (the int8 one, or fp32 FMA on dequantized weight panels: which is faster
 * follows from the target's int8 and fp32 peaks), and where a quantized
 * Linear should switch from the GEMV work split to the GEMM one (paper 001
 * §5: the flat shapes of decode and short prompts want tasks that stream
 * weight blocks, longer prompts activations blocked for the cache), and
 * writes them into the plan's decode_isa, prefill_isa, prefill_kernel and
 * gemm_min_rows, and how far ahead of its weight stream the decode GEMV
 * prefetches (the best distance differs by core, through how far the
 * hardware prefetchers run ahead) into gemv_prefetch, in place and
 * atomically.
 *
 * All times are medians of R runs after one warm-up.  The decode table:
 * TUNE_DECODE_STEPS one-token steps on each table, then on the fastest with
 * the GEMV prefetching each of prefetch_candidates bytes ahead.  The prefill table: a
 * prefill of P tokens (default 512, at most max_context) on each table
 * with the int8 kernel, then the other kernels on the faster table (a
 * target without fp32 tiles keeps int8).  Last, for each row count m in
 * 2..M, a prefill of m tokens with every Linear on the GEMV split (and the
 * decode table) and again on the GEMM split (and the prefill table); the
 * crossover is the smallest m from which the GEMM wins at every m
 * measured. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "support/file_map.h"
#include "llmc_threads.h"
#include "support/out_file.h"
#include "kernels/kernel_table.h"
#include "plan_format.h"
#include "npu/npu_prefill.h"
#include "tools/roofline.h"
#include "npu/tune_npu.h"

#define TUNE_MAX_ROWS 64
#define TUNE_MAX_REPEATS 31
#define TUNE_PREFILL_ROWS 512
#define TUNE_DECODE_STEPS 32

/* Distances the decode GEMV's prefetch is timed at: the best measured on
 * the machines of docs/benchmarks.md lie in 2-8 KiB. */
static const uint32_t prefetch_candidates[] = {1024, 2048, 4096, 8192};
#define N_PREFETCH_CANDIDATES (sizeof prefetch_candidates / sizeof *prefetch_candidates)

static const char tune_help[] =
    "usage: llmc tune PLAN [-t THREADS] [--max-rows M] [--prefill-rows P] [-r REPEATS]\n"
    "                 [--decode-isa NAME] [--prefill-isa NAME] [--prefill-kernel int8|f32-dequant]\n"
    "                 [--gemv-prefetch BYTES]\n"
    "       llmc tune PLAN --npu [--delegate ref|cpu] [--npu-rows N] [-r REPEATS]\n"
    "\n"
    "Times, R times each (default 5, medians), 32 decode steps on each kernel\n"
    "table of the plan's target this CPU runs (on x86-64: avx2, avx2+avxvnni,\n"
    "avx2+avx512vnni; they compute the same bits), then on the fastest with the\n"
    "GEMV prefetching 1, 2, 4 and 8 KiB ahead of its weights, and a prefill of P tokens\n"
    "(default 512, at most the plan's max_context) on each, with the int8 kernel\n"
    "and then, on the faster table, on fp32 tiles of dequantized weights\n"
    "(targets with fp32 tiles).  Then times prefills of 2..M tokens (default 16)\n"
    "with the quantized Linears on their GEMV work split and on their GEMM\n"
    "split.  Writes into PLAN the decode table (decode_isa: steps of fewer rows\n"
    "than gemm_min_rows), the prefill table and kernel (prefill_isa,\n"
    "prefill_kernel) and the crossover row count (gemm_min_rows: Linears with\n"
    "fewer rows take the GEMV split) and the prefetch distance (gemv_prefetch).\n"
    "A CPU without a plan's table runs its fastest one instead.  --decode-isa,\n"
    "--prefill-isa (a table or fastest), --prefill-kernel and --gemv-prefetch (a\n"
    "multiple of 64 up to 65536, or 0: the runtime's default for the CPU it runs\n"
    "on) write the value given instead of measuring.  The plan is\n"
    "rewritten atomically; nothing else in it changes.\n"
    "\n"
    "--npu (a plan compiled with --npu-chunk): instead, times every node of a chunk\n"
    "(each subgraph on the delegate, default ref, and each run of the other ops on\n"
    "the CPU) over R chunked prefills of N tokens (default 256, at most the plan's\n"
    "max_context), one node at a time, and writes the medians (ns) into the plan's\n"
    "npu_costs, which the out-of-order schedule weighs (paper 003 Eq. 6).\n";

typedef struct {
    const char *plan;
    uint32_t threads, max_rows, prefill_rows, repeats;
    int pinned_kernel;      /* --prefill-kernel, or -1: measure */
    int decode_isa, prefill_isa; /* --decode-isa, --prefill-isa (KISA_*), or -1: measure */
    int64_t gemv_prefetch;  /* --gemv-prefetch, or -1: measure */
    bool npu;               /* --npu: node costs instead */
    llmc_tune_npu_options npu_options;
} tune_args;

/* What tune measured: the fields it writes. */
typedef struct {
    uint32_t gemm_min_rows, prefill_kernel, decode_isa, prefill_isa, gemv_prefetch;
} tune_result;

static int prefill_kernel_index(const char *name)
{
    for (uint32_t k = 0; k < PREFILL_KERNEL_COUNT; k++)
        if (!strcmp(name, rt_prefill_kernel_name(k)))
            return (int)k;
    return -1;
}

static int kernel_isa_index(const char *name)
{
    for (uint32_t k = 0; k < KISA_COUNT; k++)
        if (!strcmp(name, rt_kernel_isa_name(k)))
            return (int)k;
    return -1;
}

/* "avx2, avx2+avxvnni, ...": the tables after KISA_FASTEST. */
static const char *kernel_isa_names(void)
{
    static char names[256];
    names[0] = 0;
    for (uint32_t k = 1; k < KISA_COUNT; k++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k > 1 ? ", " : "",
                 rt_kernel_isa_name(k));
    return names;
}

static int parse_args(int argc, char **argv, tune_args *a)
{
    *a = (tune_args){NULL, 1, 16, TUNE_PREFILL_ROWS, 5, -1, -1, -1, -1, false,
                     {LLMC_NPU_REF, 256, 5}};
    for (int i = 1; i < argc; i++) {
        int has_value = i + 1 < argc;
        int64_t v;
        if (!strcmp(argv[i], "--npu")) {
            a->npu = true;
        } else if (!strcmp(argv[i], "--delegate") && has_value) {
            i++;
            a->npu_options.delegate = !strcmp(argv[i], "cpu") ? LLMC_NPU_CPU : LLMC_NPU_REF;
            if (strcmp(argv[i], "cpu") && strcmp(argv[i], "ref"))
                return llmc_cli_usage("tune", "--delegate wants ref or cpu, got '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--npu-rows") && has_value) {
            v = llmc_cli_parse_count(argv[++i]);
            if (v < 1 || v > UINT32_MAX)
                return llmc_cli_usage("tune", "--npu-rows wants 1 or more, got '%s'", argv[i]);
            a->npu_options.rows = (uint32_t)v;
        } else if ((!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) && has_value) {
            if (llmc_cli_parse_threads("tune", argv[++i], &a->threads))
                return LLMC_E_USAGE;
        } else if (!strcmp(argv[i], "--max-rows") && has_value) {
            v = llmc_cli_parse_count(argv[++i]);
            if (v < 2 || v > TUNE_MAX_ROWS)
                return llmc_cli_usage("tune", "--max-rows wants 2..%d, got '%s'", TUNE_MAX_ROWS, argv[i]);
            a->max_rows = (uint32_t)v;
        } else if (!strcmp(argv[i], "--prefill-rows") && has_value) {
            v = llmc_cli_parse_count(argv[++i]);
            if (v < 2 || v > UINT32_MAX)
                return llmc_cli_usage("tune", "--prefill-rows wants 2 or more, got '%s'", argv[i]);
            a->prefill_rows = (uint32_t)v;
        } else if (!strcmp(argv[i], "--prefill-kernel") && has_value) {
            a->pinned_kernel = prefill_kernel_index(argv[++i]);
            if (a->pinned_kernel < 0)
                return llmc_cli_usage("tune", "--prefill-kernel wants int8 or f32-dequant, got "
                                      "'%s'", argv[i]);
        } else if ((!strcmp(argv[i], "--decode-isa") || !strcmp(argv[i], "--prefill-isa")) &&
                   has_value) {
            int *isa = argv[i][2] == 'd' ? &a->decode_isa : &a->prefill_isa;
            *isa = kernel_isa_index(argv[++i]);
            if (*isa < 0)
                return llmc_cli_usage("tune", "%s wants fastest or a kernel table (%s), got '%s'",
                                      argv[i - 1], kernel_isa_names(), argv[i]);
        } else if (!strcmp(argv[i], "--gemv-prefetch") && has_value) {
            a->gemv_prefetch = llmc_cli_parse_count(argv[++i]);
            if (a->gemv_prefetch < 0 || a->gemv_prefetch % 64 ||
                a->gemv_prefetch > RT_GEMV_PREFETCH_MAX)
                return llmc_cli_usage("tune", "--gemv-prefetch wants a multiple of 64 up to %u, "
                                      "got '%s'", RT_GEMV_PREFETCH_MAX, argv[i]);
        } else if (!strcmp(argv[i], "-r") && has_value) {
            v = llmc_cli_parse_count(argv[++i]);
            if (v < 1 || v > TUNE_MAX_REPEATS)
                return llmc_cli_usage("tune", "-r wants 1..%d, got '%s'", TUNE_MAX_REPEATS, argv[i]);
            a->repeats = a->npu_options.repeats = (uint32_t)v;
        } else if (argv[i][0] == '-' || a->plan) {
            return llmc_cli_usage("tune", "unexpected argument '%s'", argv[i]);
        } else {
            a->plan = argv[i];
        }
    }
    return a->plan ? LLMC_OK : llmc_cli_usage("tune", "missing PLAN");
}

/* A session over `mem` with the plan's fields as they stand (the op
 * resolver reads prefill_kernel at init); serial unless pool. */
static int open_session(llmc_rt_session *s, llmc_rt_plan *plan, uint32_t rows, void *mem,
                        size_t size, llmc_threads *pool, llmc_rt_error *rt)
{
    if (llmc_rt_session_init_for(s, plan, rows, mem, size, rt) != LLMC_RT_OK)
        return -1;
    llmc_rt_session_set_parallel(s, pool ? llmc_threads_parallel : NULL, pool);
    return 0;
}

/* Median seconds of `repeats` prefills of m tokens from position 0. */
static int time_prefill(llmc_rt_session *s, const int64_t *tokens, uint32_t m, uint32_t repeats,
                        double *median, llmc_rt_error *rt)
{
    double t[TUNE_MAX_REPEATS];
    for (uint32_t r = 0; r <= repeats; r++) { /* run 0 warms caches up */
        llmc_rt_session_reset(s);
        double t0 = llmc_seconds_now();
        if (llmc_rt_session_feed(s, tokens, m, NULL, rt) != LLMC_RT_OK)
            return -1;
        if (r)
            t[r - 1] = llmc_seconds_now() - t0;
    }
    *median = llmc_median(t, repeats);
    return 0;
}

/* Median seconds per step of `repeats` runs of `steps` one-token decode
 * steps after a one-token prompt. */
static int time_decode(llmc_rt_session *s, const int64_t *tokens, uint32_t steps,
                       uint32_t repeats, double *median, llmc_rt_error *rt)
{
    double t[TUNE_MAX_REPEATS];
    for (uint32_t r = 0; r <= repeats; r++) { /* run 0 warms caches up */
        llmc_rt_session_reset(s);
        if (llmc_rt_session_feed(s, tokens, 1, NULL, rt) != LLMC_RT_OK)
            return -1;
        double t0 = llmc_seconds_now();
        for (uint32_t i = 1; i <= steps; i++)
            if (llmc_rt_session_feed(s, tokens + i, 1, NULL, rt) != LLMC_RT_OK)
                return -1;
        if (r)
            t[r - 1] = (llmc_seconds_now() - t0) / steps;
    }
    *median = llmc_median(t, repeats);
    return 0;
}

/* What measure() works with: the plan, a session's memory and the tokens. */
typedef struct {
    llmc_rt_plan *plan;
    const tune_args *a;
    llmc_rt_session s;
    void *mem;
    size_t size;
    uint32_t rows;          /* the session's bound: the longest run */
    uint32_t prefill_rows;  /* --prefill-rows, at most max_context */
    int64_t *tokens;
    llmc_threads *pool;
    llmc_rt_error rt;
} tune_bench;

/* The GEMV/GEMM crossover: smallest m from which GEMM beats GEMV at every
 * m <= max_rows (max_rows + 1 if none).  A step of fewer rows than
 * gemm_min_rows runs the decode table too, so each side runs on its own. */
static int measure_crossover(tune_bench *b, uint32_t *crossover, llmc_error *err)
{
    const tune_args *a = b->a;
    rt_plan *P = rt_plan_of(b->plan);
    *crossover = a->max_rows + 1;
    if (open_session(&b->s, b->plan, b->rows, b->mem, b->size, b->pool, &b->rt))
        return llmc_fail(err, LLMC_E_RUNTIME, "'%s': %s", a->plan, b->rt.msg);
    printf("%6s %14s %14s\n", "rows", "gemv ms", "gemm ms");
    for (uint32_t m = 2; m <= a->max_rows; m++) {
        double gemv, gemm;
        P->gemm_min_rows = m + 1;
        if (time_prefill(&b->s, b->tokens, m, a->repeats, &gemv, &b->rt) == 0) {
            P->gemm_min_rows = m;
            if (time_prefill(&b->s, b->tokens, m, a->repeats, &gemm, &b->rt) == 0) {
                printf("%6u %14.3f %14.3f\n", m, 1e3 * gemv, 1e3 * gemm);
                if (gemm >= gemv)
                    *crossover = a->max_rows + 1;
                else if (*crossover > m)
                    *crossover = m;
                continue;
            }
        }
        return llmc_fail(err, LLMC_E_RUNTIME, "'%s': prefill of %u tokens: %s", a->plan, m,
                         b->rt.msg);
    }
    return LLMC_OK;
}

/* The table a step tuned to `isa` (KISA_*) runs on this CPU, as the
 * runtime resolves Plan.decode_isa and prefill_isa. */
static const rt_kernels *table_of(const rt_plan *P, uint32_t isa)
{
    return rt_kernels_tuned(P->target, rt_kernels_for_target(P->target, NULL), isa);
}

/* The kernel tables of the plan's target this CPU runs (KISA_*), the
 * fastest first, so that a tie keeps the runtime's choice. */
static uint32_t runnable_tables(const llmc_rt_plan *plan, uint32_t *isa)
{
    const char *target = rt_plan_of(plan)->target;
    const rt_kernels *fastest = rt_kernels_for_target(target, NULL);
    uint32_t n = 0;
    for (uint32_t i = 1; i < KISA_COUNT; i++) {
        const rt_kernels *k = NULL;
        if (rt_kernel_isa_target(i) == rt_target_index(target))
            k = rt_kernels_for_isa(target, rt_kernel_isa_name(i), NULL);
        if (k == fastest)
            memmove(isa + 1, isa, n * sizeof *isa), isa[0] = i, n++;
        else if (k)
            isa[n++] = i;
    }
    return n;
}

/* One-token steps a decode measurement times: TUNE_DECODE_STEPS, fewer if
 * the session's rows do not hold them after the prompt. */
static uint32_t decode_steps(const tune_bench *b)
{
    return b->rows - 1 < TUNE_DECODE_STEPS ? b->rows - 1 : TUNE_DECODE_STEPS;
}

/* The decode table: the fastest per step of `steps` one-token steps. */
static int measure_decode_table(tune_bench *b, const uint32_t *isa, uint32_t n, uint32_t *best,
                                llmc_error *err)
{
    const tune_args *a = b->a;
    rt_plan *P = rt_plan_of(b->plan);
    uint32_t steps = decode_steps(b);
    double ms[KISA_COUNT];
    if (open_session(&b->s, b->plan, b->rows, b->mem, b->size, b->pool, &b->rt))
        return llmc_fail(err, LLMC_E_RUNTIME, "'%s': %s", a->plan, b->rt.msg);
    *best = isa[0];
    for (uint32_t i = 0; i < n; i++) {
        P->decode_kernels = table_of(P, isa[i]);
        if (time_decode(&b->s, b->tokens, steps, a->repeats, &ms[isa[i]], &b->rt))
            return llmc_fail(err, LLMC_E_RUNTIME, "'%s': decode on the %s kernels: %s", a->plan,
                             rt_kernel_isa_name(isa[i]), b->rt.msg);
        printf("decode, %u steps,      %-19s %12s %10.3f ms a step (%.1f tok/s)\n", steps,
               P->decode_kernels->isa, "", 1e3 * ms[isa[i]], 1 / ms[isa[i]]);
        if (ms[isa[i]] < ms[*best])
            *best = isa[i];
    }
    P->decode_kernels = table_of(P, *best);
    return LLMC_OK;
}

/* The GEMV's prefetch distance: the fastest per decode step of
 * prefetch_candidates, on the decode table chosen. */
static int measure_gemv_prefetch(tune_bench *b, uint32_t *best, llmc_error *err)
{
    rt_plan *P = rt_plan_of(b->plan);
    uint32_t steps = decode_steps(b);
    double ms[N_PREFETCH_CANDIDATES];
    if (open_session(&b->s, b->plan, b->rows, b->mem, b->size, b->pool, &b->rt))
        return llmc_fail(err, LLMC_E_RUNTIME, "'%s': %s", b->a->plan, b->rt.msg);
    uint32_t at = 0;
    for (uint32_t i = 0; i < N_PREFETCH_CANDIDATES; i++) {
        P->gemv_prefetch = prefetch_candidates[i];
        if (time_decode(&b->s, b->tokens, steps, b->a->repeats, &ms[i], &b->rt))
            return llmc_fail(err, LLMC_E_RUNTIME, "'%s': decode with the GEMV prefetching %u "
                             "bytes ahead: %s", b->a->plan, P->gemv_prefetch, b->rt.msg);
        printf("GEMV prefetch %5u B ahead, %u decode steps on %-19s %10.3f ms a step "
               "(%.1f tok/s)\n", P->gemv_prefetch, steps, P->decode_kernels->isa, 1e3 * ms[i],
               1 / ms[i]);
        if (ms[i] < ms[at])
            at = i;
    }
    *best = P->gemv_prefetch = prefetch_candidates[at];
    return LLMC_OK;
}

/* Median seconds of a prefill of `rows` tokens on table isa and kernel k
 * (a session of its own: the op resolver reads prefill_kernel at init). */
static int time_prefill_on(tune_bench *b, uint32_t isa, uint32_t k, uint32_t rows, double *ms,
                           llmc_error *err)
{
    rt_plan *P = rt_plan_of(b->plan);
    P->kernels = table_of(P, isa);
    P->prefill_kernel = k;
    if (open_session(&b->s, b->plan, b->rows, b->mem, b->size, b->pool, &b->rt) ||
        time_prefill(&b->s, b->tokens, rows, b->a->repeats, ms, &b->rt))
        return llmc_fail(err, LLMC_E_RUNTIME, "'%s': prefill of %u tokens on the %s kernels, "
                         "%s: %s", b->a->plan, rows, P->kernels->isa, rt_prefill_kernel_name(k),
                         b->rt.msg);
    printf("prefill of %u tokens, %-19s %-12s %10.3f ms (%.1f tok/s)\n", rows, P->kernels->isa,
           rt_prefill_kernel_name(k), 1e3 * *ms, rows / *ms);
    return LLMC_OK;
}

/* The prefill table, the fastest on a prefill of `rows` tokens (GEMM split
 * from gemm_min_rows) with the int8 kernel (or --prefill-kernel's); then,
 * on that table, the faster prefill kernel, unless --prefill-kernel names
 * one or the target has no fp32 tiles. */
static int measure_prefill(tune_bench *b, const uint32_t *isa, uint32_t n, uint32_t rows,
                           tune_result *best, llmc_error *err)
{
    const tune_args *a = b->a;
    rt_plan *P = rt_plan_of(b->plan);
    const rt_target_info *info = rt_target_info_of(rt_target_index(P->target));
    double best_ms = 0, ms;
    best->prefill_kernel = a->pinned_kernel >= 0 ? (uint32_t)a->pinned_kernel : PREFILL_INT8;
    for (uint32_t i = 0; i < n; i++) {
        if (time_prefill_on(b, isa[i], best->prefill_kernel, rows, &ms, err))
            return err->code;
        if (!i || ms < best_ms)
            best_ms = ms, best->prefill_isa = isa[i];
    }
    if (a->pinned_kernel < 0 && !(info && info->f_hp))
        printf("target %s has no fp32 tiles: prefill stays on the int8 kernel\n", P->target);
    for (uint32_t k = 0; a->pinned_kernel < 0 && info && info->f_hp && k < PREFILL_KERNEL_COUNT; k++) {
        if (k == PREFILL_INT8)
            continue;
        if (time_prefill_on(b, best->prefill_isa, k, rows, &ms, err))
            return err->code;
        if (ms < best_ms)
            best_ms = ms, best->prefill_kernel = k;
    }
    P->kernels = table_of(P, best->prefill_isa);
    P->prefill_kernel = best->prefill_kernel;
    return LLMC_OK;
}

/* The tables first (decode, then prefill with its kernel), then the
 * crossover between the two, on sessions sized for the longest run. */
static int measure_all(tune_bench *b, tune_result *out, llmc_error *err)
{
    const tune_args *a = b->a;
    uint32_t isa[KISA_COUNT];
    uint32_t n = runnable_tables(b->plan, isa);
    printf("kernel tables of target %s on this CPU:", rt_plan_of(b->plan)->target);
    for (uint32_t i = 0; i < n; i++)
        printf(" %s", rt_kernel_isa_name(isa[i]));
    printf("\n");
    int rc = LLMC_OK;
    if (a->decode_isa >= 0) {
        out->decode_isa = (uint32_t)a->decode_isa;
        rt_plan_of(b->plan)->decode_kernels = table_of(rt_plan_of(b->plan), out->decode_isa);
    } else
        rc = measure_decode_table(b, isa, n, &out->decode_isa, err);
    if (!rc && a->gemv_prefetch >= 0)
        out->gemv_prefetch = (uint32_t)a->gemv_prefetch;
    else if (!rc)
        rc = measure_gemv_prefetch(b, &out->gemv_prefetch, err);
    if (!rc && a->prefill_isa >= 0)
        isa[0] = (uint32_t)a->prefill_isa, n = 1;
    if (!rc)
        rc = measure_prefill(b, isa, n, b->prefill_rows, out, err);
    if (!rc)
        rc = measure_crossover(b, &out->gemm_min_rows, err);
    return rc;
}

/* Every measurement on one block of session memory. */
static int measure(llmc_rt_plan *plan, const tune_args *a, tune_result *out, llmc_error *err)
{
    tune_bench b = {.plan = plan, .a = a};
    uint32_t max_context = rt_plan_of(plan)->max_context;
    b.rows = b.prefill_rows = a->prefill_rows < max_context ? a->prefill_rows : max_context;
    if (b.rows < a->max_rows)
        b.rows = a->max_rows;
    if (b.rows < TUNE_DECODE_STEPS + 1)
        b.rows = TUNE_DECODE_STEPS + 1 < max_context ? TUNE_DECODE_STEPS + 1 : max_context;
    b.size = llmc_rt_session_memory_for(plan, b.rows);
    b.mem = llmc_alloc_huge(b.size);
    b.tokens = malloc(sizeof *b.tokens * b.rows);
    b.pool = a->threads > 1 ? llmc_threads_create(a->threads) : NULL;
    int rc = LLMC_OK;
    if (!b.mem || !b.tokens || (a->threads > 1 && !b.pool))
        rc = llmc_fail(err, LLMC_E_NOMEM, "out of memory for the session");
    uint32_t vocab = rt_plan_of(plan)->vocab_size ? rt_plan_of(plan)->vocab_size : 1;
    for (uint32_t i = 0; !rc && i < b.rows; i++)
        b.tokens[i] = (int64_t)((i * 7919u + 13u) % vocab);
    if (!rc)
        rc = measure_all(&b, out, err);
    llmc_threads_destroy(b.pool);
    free(b.tokens);
    llmc_free_huge(b.mem, b.size);
    return rc;
}

/* --decode-isa and --prefill-isa name tables of the plan's target (which
 * this CPU need not run: the plan may be tuned for another machine). */
static int check_pinned_tables(const llmc_rt_plan *plan, const tune_args *a, llmc_error *err)
{
    const int pinned[2] = {a->decode_isa, a->prefill_isa};
    const char *target = rt_plan_of(plan)->target;
    for (int i = 0; i < 2; i++)
        if (pinned[i] > 0 && rt_kernel_isa_target((uint32_t)pinned[i]) != rt_target_index(target))
            return llmc_fail(err, LLMC_E_USAGE, "--%s-isa %s: not a kernel table of the plan's "
                             "target %s", i ? "prefill" : "decode",
                             rt_kernel_isa_name((uint32_t)pinned[i]), target);
    return LLMC_OK;
}

/* Byte position of the Plan's uint field `field` (written by every
 * compiler that knows it), or 0 if the plan has none. */
static uint32_t field_pos(const llmc_rt_plan *plan, int field)
{
    fb_reader r = rt_reader(plan);
    fb_table t;
    if (fb_table_at(&r, rt_plan_of(plan)->root, "Plan", &t, NULL) || field >= (int)t.n_fields)
        return 0;
    const uint8_t *slot = rt_plan_of(plan)->base + t.vtable + 4 + 2 * field;
    uint16_t off = (uint16_t)(slot[0] | slot[1] << 8);
    return off ? t.pos + off : 0;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static int write_plan(const tune_args *a, const llmc_rt_plan *plan, const tune_result *res,
                      llmc_error *err)
{
    static const int fields[5] = {PLAN_GEMM_MIN_ROWS, PLAN_PREFILL_KERNEL, PLAN_DECODE_ISA,
                                  PLAN_PREFILL_ISA, PLAN_GEMV_PREFETCH};
    static const char *const names[5] = {"gemm_min_rows", "prefill_kernel", "decode_isa",
                                         "prefill_isa", "gemv_prefetch"};
    const uint32_t values[5] = {res->gemm_min_rows, res->prefill_kernel, res->decode_isa,
                                res->prefill_isa, res->gemv_prefetch};
    uint32_t pos[5];
    for (int i = 0; i < 5; i++)
        if (!(pos[i] = field_pos(plan, fields[i])))
            return llmc_fail(err, LLMC_E_INPUT, "'%s' has no %s field to rewrite; recompile it "
                             "with this llmc", a->plan, names[i]);
    uint8_t *copy = malloc(rt_plan_of(plan)->size);
    if (!copy)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory copying the plan");
    memcpy(copy, rt_plan_of(plan)->base, rt_plan_of(plan)->size);
    for (int i = 0; i < 5; i++)
        put_u32(copy + pos[i], values[i]);
    llmc_output out = {0};
    int rc = llmc_out_create(a->plan, &out, err) ? LLMC_OK : err->code;
    if (!rc && fwrite(copy, 1, rt_plan_of(plan)->size, out.file) != rt_plan_of(plan)->size)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "'%s': %s", a->plan, strerror(errno));
    rc = llmc_out_finish(&out, rc, err);
    free(copy);
    return rc;
}

int llmc_cmd_tune(int argc, char **argv)
{
    if (llmc_cli_wants_help(argc, argv)) {
        fputs(tune_help, stdout);
        return 0;
    }
    tune_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    llmc_error err = {0};
    llmc_mapped_file file = {0};
    llmc_rt_plan plan;
    llmc_rt_error rt = {0};
    tune_result res = {0, PREFILL_INT8, KISA_FASTEST, KISA_FASTEST, 0};
    rc = llmc_open_input(a.plan, false, &file, &err);
    if (!rc && llmc_rt_plan_open(&plan, file.map, file.size, 0, &rt) != LLMC_RT_OK)
        rc = llmc_fail(&err, LLMC_E_RUNTIME, "'%s': %s", a.plan, rt.msg);
    if (!rc && a.npu) {
        rc = llmc_tune_npu(a.plan, &plan, &a.npu_options, &err);
        llmc_unmap_file(&file);
        return rc ? llmc_cli_report(&err) : 0;
    }
    if (!rc && a.max_rows > rt_plan_of(&plan)->max_context)
        rc = llmc_fail(&err, LLMC_E_USAGE, "--max-rows %u exceeds the plan's max_context %u",
                       a.max_rows, rt_plan_of(&plan)->max_context);
    if (!rc)
        rc = check_pinned_tables(&plan, &a, &err);
    if (!rc)
        rc = measure(&plan, &a, &res, &err);
    if (!rc)
        rc = write_plan(&a, &plan, &res, &err);
    if (!rc)
        printf("gemm_min_rows = %u, prefill_kernel = %s, decode_isa = %s, prefill_isa = %s, "
               "gemv_prefetch = %u written to %s%s\n", res.gemm_min_rows,
               rt_prefill_kernel_name(res.prefill_kernel), rt_kernel_isa_name(res.decode_isa),
               rt_kernel_isa_name(res.prefill_isa), res.gemv_prefetch, a.plan,
               res.gemm_min_rows > a.max_rows ? " (GEMV won at every row count measured)" : "");
    llmc_unmap_file(&file);
    return rc ? llmc_cli_report(&err) : 0;
}
