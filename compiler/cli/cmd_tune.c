/* llmc tune PLAN [-t N] [--max-rows M] [--prefill-rows P] [-r R]: measures
 * on this machine where a quantized Linear should switch from the GEMV work
 * split to the GEMM one (paper 001 §5: the flat shapes of decode and short
 * prompts want tasks that stream weight blocks, longer prompts activations
 * blocked for the cache), and which kernel its GEMM should run (the
 * int8 one, or fp32 FMA on dequantized weight panels: which is faster
 * follows from the target's int8 and fp32 peaks), and writes both into the
 * plan's gemm_min_rows and prefill_kernel, in place and atomically.
 *
 * For each row count m in 2..M it times a prefill of m tokens with every
 * Linear forced onto the GEMV path and again forced onto the GEMM, medians
 * of R runs each; the crossover is the smallest m from which the GEMM wins
 * at every m measured.  Then it times a prefill of P tokens (default 512,
 * at most max_context) with each prefill kernel and keeps the faster; a
 * target without fp32 tiles keeps int8 unmeasured. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "support/file_map.h"
#include "llmc_threads.h"
#include "support/out_file.h"
#include "plan_format.h"
#include "npu/npu_prefill.h"
#include "tools/roofline.h"
#include "npu/tune_npu.h"

#define TUNE_MAX_ROWS 64
#define TUNE_MAX_REPEATS 31
#define TUNE_PREFILL_ROWS 512

static const char tune_help[] =
    "usage: llmc tune PLAN [-t THREADS] [--max-rows M] [--prefill-rows P]\n"
    "                 [--prefill-kernel int8|f32-dequant] [-r REPEATS]\n"
    "       llmc tune PLAN --npu [--delegate ref|cpu] [--npu-rows N] [-r REPEATS]\n"
    "\n"
    "Times prefills of 2..M tokens (default 16) with the quantized Linears on\n"
    "their GEMV work split and on their GEMM split, R times each (default 5,\n"
    "medians), prints both and writes the crossover row count into PLAN\n"
    "(gemm_min_rows: Linears with fewer rows take the GEMV split).  Then times\n"
    "a prefill of P tokens (default 512, at most the plan's max_context) with\n"
    "the GEMM on the int8 kernel and on fp32 tiles of dequantized weights, and\n"
    "writes the faster into PLAN (prefill_kernel; targets without fp32 tiles\n"
    "keep int8); --prefill-kernel writes the one named instead of measuring.\n"
    "The plan is rewritten atomically; nothing else in it changes.\n"
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
    bool npu;               /* --npu: node costs instead */
    llmc_tune_npu_options npu_options;
} tune_args;

/* What tune measured: the two fields it writes. */
typedef struct {
    uint32_t gemm_min_rows, prefill_kernel;
} tune_result;

static int prefill_kernel_index(const char *name)
{
    for (uint32_t k = 0; k < PREFILL_KERNEL_COUNT; k++)
        if (!strcmp(name, rt_prefill_kernel_name(k)))
            return (int)k;
    return -1;
}

static int parse_args(int argc, char **argv, tune_args *a)
{
    *a = (tune_args){NULL, 1, 16, TUNE_PREFILL_ROWS, 5, -1, false, {LLMC_NPU_REF, 256, 5}};
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

/* The GEMV/GEMM crossover: smallest m from which GEMM beats GEMV at every
 * m <= max_rows (max_rows + 1 if none). */
static int measure_crossover(llmc_rt_session *s, llmc_rt_plan *plan, const tune_args *a,
                             const int64_t *tokens, uint32_t *crossover, llmc_rt_error *rt,
                             llmc_error *err)
{
    *crossover = a->max_rows + 1;
    printf("%6s %14s %14s\n", "rows", "gemv ms", "gemm ms");
    for (uint32_t m = 2; m <= a->max_rows; m++) {
        double gemv, gemm;
        rt_plan_of(plan)->gemm_min_rows = m + 1;
        if (time_prefill(s, tokens, m, a->repeats, &gemv, rt) == 0) {
            rt_plan_of(plan)->gemm_min_rows = m;
            if (time_prefill(s, tokens, m, a->repeats, &gemm, rt) == 0) {
                printf("%6u %14.3f %14.3f\n", m, 1e3 * gemv, 1e3 * gemm);
                if (gemm >= gemv)
                    *crossover = a->max_rows + 1;
                else if (*crossover > m)
                    *crossover = m;
                continue;
            }
        }
        return llmc_fail(err, LLMC_E_RUNTIME, "'%s': prefill of %u tokens: %s", a->plan, m, rt->msg);
    }
    return LLMC_OK;
}

/* The prefill kernel: the faster of int8 and f32-dequant on a prefill of
 * `rows` tokens (GEMM split from gemm_min_rows); int8 when the target has
 * no fp32 tiles. */
static int measure_prefill_kernel(llmc_rt_session *s, llmc_rt_plan *plan, const tune_args *a,
                                  const int64_t *tokens, uint32_t rows, uint32_t *kernel,
                                  llmc_rt_error *rt, llmc_error *err)
{
    double ms[PREFILL_KERNEL_COUNT];
    *kernel = PREFILL_INT8;
    if (a->pinned_kernel >= 0) {
        *kernel = (uint32_t)a->pinned_kernel;
        return LLMC_OK;
    }
    const rt_target_info *info = rt_target_info_of(rt_target_index(rt_plan_of(plan)->target));
    if (!info || !info->f_hp) {
        printf("target %s has no fp32 tiles: prefill stays on the int8 kernel\n", rt_plan_of(plan)->target);
        return LLMC_OK;
    }
    for (uint32_t k = 0; k < PREFILL_KERNEL_COUNT; k++) {
        rt_plan_of(plan)->prefill_kernel = k;
        if (time_prefill(s, tokens, rows, a->repeats, &ms[k], rt))
            return llmc_fail(err, LLMC_E_RUNTIME, "'%s': prefill of %u tokens on the %s kernel: "
                             "%s", a->plan, rows, rt_prefill_kernel_name(k), rt->msg);
        printf("prefill of %u tokens, %-12s %10.3f ms (%.1f tok/s)\n", rows,
               rt_prefill_kernel_name(k), 1e3 * ms[k], rows / ms[k]);
        if (ms[k] < ms[*kernel])
            *kernel = k;
    }
    return LLMC_OK;
}

/* Both measurements on one session sized for the longer prefill. */
static int measure(llmc_rt_plan *plan, const tune_args *a, tune_result *out, llmc_error *err)
{
    llmc_rt_error rt = {0};
    llmc_rt_session s;
    uint32_t prefill_rows = a->prefill_rows < rt_plan_of(plan)->max_context ? a->prefill_rows : rt_plan_of(plan)->max_context;
    uint32_t rows = prefill_rows > a->max_rows ? prefill_rows : a->max_rows;
    size_t size = llmc_rt_session_memory_for(plan, rows);
    void *mem = llmc_alloc_huge(size);
    int64_t *tokens = malloc(sizeof *tokens * rows);
    llmc_threads *pool = a->threads > 1 ? llmc_threads_create(a->threads) : NULL;
    int rc = LLMC_OK;
    if (!mem || !tokens || (a->threads > 1 && !pool))
        rc = llmc_fail(err, LLMC_E_NOMEM, "out of memory for the session");
    else if (llmc_rt_session_init_for(&s, plan, rows, mem, size, &rt) != LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "'%s': %s", a->plan, rt.msg);
    if (!rc) {
        llmc_rt_session_set_parallel(&s, pool ? llmc_threads_parallel : NULL, pool);
        for (uint32_t i = 0; i < rows; i++)
            tokens[i] = (int64_t)((i * 7919u + 13u) % (rt_plan_of(plan)->vocab_size ? rt_plan_of(plan)->vocab_size : 1));
        rc = measure_crossover(&s, plan, a, tokens, &out->gemm_min_rows, &rt, err);
    }
    if (!rc) {
        rt_plan_of(plan)->gemm_min_rows = out->gemm_min_rows;
        rc = measure_prefill_kernel(&s, plan, a, tokens, prefill_rows, &out->prefill_kernel, &rt,
                                    err);
    }
    llmc_threads_destroy(pool);
    free(tokens);
    llmc_free_huge(mem, size);
    return rc;
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
    uint32_t gemm = field_pos(plan, PLAN_GEMM_MIN_ROWS);
    uint32_t kernel = field_pos(plan, PLAN_PREFILL_KERNEL);
    if (!gemm || !kernel)
        return llmc_fail(err, LLMC_E_INPUT, "'%s' has no %s field to rewrite; recompile it "
                         "with this llmc", a->plan, gemm ? "prefill_kernel" : "gemm_min_rows");
    uint8_t *copy = malloc(rt_plan_of(plan)->size);
    if (!copy)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory copying the plan");
    memcpy(copy, rt_plan_of(plan)->base, rt_plan_of(plan)->size);
    put_u32(copy + gemm, res->gemm_min_rows);
    put_u32(copy + kernel, res->prefill_kernel);
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
    tune_result res = {0, PREFILL_INT8};
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
        rc = measure(&plan, &a, &res, &err);
    if (!rc)
        rc = write_plan(&a, &plan, &res, &err);
    if (!rc)
        printf("gemm_min_rows = %u, prefill_kernel = %s written to %s%s\n", res.gemm_min_rows,
               rt_prefill_kernel_name(res.prefill_kernel), a.plan,
               res.gemm_min_rows > a.max_rows ? " (GEMV won at every row count measured)" : "");
    llmc_unmap_file(&file);
    return rc ? llmc_cli_report(&err) : 0;
}
