/* `llmc bench --roofline`: measures this machine's read bandwidth and fp32 /
 * int8 peaks (roofline.h) with the AVX2 loops of roofline_x86.c when the CPU
 * has them, else with the portable loops below, and checks each compute
 * peak against what the cores can issue. */
#include "roofline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/file_map.h"
#include "support/limits.h"
#include "kernels/kernel_table.h"
#include "llmc_threads.h"

/* ---- portable loops (scalar C the compiler may vectorize) ---- */

static uint64_t read_sum_portable(const uint64_t *words, size_t n)
{
    uint64_t s[8] = {0};
    for (size_t i = 0; i < n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += words[i + k];
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

/* 16 independent multiply-add chains (2 flops each per iteration), each
 * from its own starting value with its own multiplicand (tending to
 * 1e-6 / (1 - m_k) = 1 / (k + 1)), so that no two compute the same thing. */
#define PORTABLE_FMA_CHAINS 16
static float fma_loop_portable(uint64_t iters)
{
    float c[PORTABLE_FMA_CHAINS], m[PORTABLE_FMA_CHAINS], sum = 0.0f;
    for (int k = 0; k < PORTABLE_FMA_CHAINS; k++) {
        c[k] = 0.5f + 0.01f * (float)k;
        m[k] = 1.0f - (float)(k + 1) * 1e-6f;
    }
    for (uint64_t i = 0; i < iters; i++)
        for (int k = 0; k < PORTABLE_FMA_CHAINS; k++)
            c[k] = c[k] * m[k] + 1e-6f;
    for (int k = 0; k < PORTABLE_FMA_CHAINS; k++)
        sum += c[k];
    return sum;
}

/* 32 u8 x s8 multiply-adds into int32 per iteration, each lane its own
 * operands and starting value.  The empty asm tells the compiler the u8
 * operands may have changed, so the products are computed every iteration
 * instead of being hoisted out of the loop. */
#define PORTABLE_INT8_LANES 32
static int32_t int8_loop_portable(uint64_t iters)
{
    uint8_t x[PORTABLE_INT8_LANES];
    int8_t w[PORTABLE_INT8_LANES];
    int32_t acc[PORTABLE_INT8_LANES];
    for (int k = 0; k < PORTABLE_INT8_LANES; k++) {
        x[k] = (uint8_t)(3 + k);
        w[k] = (int8_t)(k % 2 ? -k : k + 1);
        acc[k] = k;
    }
    for (uint64_t i = 0; i < iters; i++) {
        __asm__ volatile("" : : "r"(x) : "memory");
        for (int k = 0; k < PORTABLE_INT8_LANES; k++)
            acc[k] += (int32_t)x[k] * w[k];
    }
    uint32_t sum = 0;
    for (int k = 0; k < PORTABLE_INT8_LANES; k++)
        sum += (uint32_t)acc[k];
    return (int32_t)(sum & 0x7fffffff);
}

/* Scalar C the compiler vectorizes as it likes: no instruction to count
 * and no issue rate, so no bound; one int8 loop for every mix. */
#define PORTABLE_INT8 {.insns_per_iter = PORTABLE_INT8_LANES, .bits = 8, .elem_bits = 8}
static const llmc_roofline_loops roofline_portable = {
    .isa = "portable",
    .read_sum = {read_sum_portable, NULL},
    .fma_loop = fma_loop_portable,
    .int8_loop = {[LLMC_INT8_W8] = int8_loop_portable, [LLMC_INT8_W4] = int8_loop_portable},
    .fma = {.insns_per_iter = PORTABLE_FMA_CHAINS, .bits = 32, .elem_bits = 32},
    .int8 = {[LLMC_INT8_W8] = PORTABLE_INT8, [LLMC_INT8_W4] = PORTABLE_INT8},
};

/* The loops of the kernels named by isa (rt_kernels.isa; NULL: those this
 * CPU runs "avx2" plans with); a table this CPU does not run gets the AVX2
 * loops (the report names the loops that ran). */
static const llmc_roofline_loops *pick_loops(const char *isa)
{
#if defined(__x86_64__)
    const rt_kernels *kt = rt_kernels_for_isa("avx2", isa, NULL);
    if (kt && !strcmp(kt->isa, llmc_roofline_avx2_avx512.isa))
        return &llmc_roofline_avx2_avx512;
    if (kt && !strcmp(kt->isa, llmc_roofline_avx2_avxvnni.isa))
        return &llmc_roofline_avx2_avxvnni;
    if (kt && !strcmp(kt->isa, llmc_roofline_avx2_avx512ymm.isa))
        return &llmc_roofline_avx2_avx512ymm;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return &llmc_roofline_avx2;
#endif
    return &roofline_portable;
}

/* ---- driver ---- */

/* Enough tasks per thread that a thread waking late does not leave the
 * others idle at the end (the pool hands tasks out one at a time). */
#define TASKS_PER_THREAD 8
#define READ_PASSES 7      /* timed passes over the buffer, after one warm-up */
#define COMPUTE_RUNS 5     /* timed runs of each compute loop */
#define COMPUTE_SECONDS 0.1
#define MAX_TASKS (LLMC_MAX_THREADS * TASKS_PER_THREAD)

typedef struct {
    const llmc_roofline_loops *loops;
    llmc_int8_mix mix;  /* the int8 loop int8_task runs */
    int read_loop;      /* the read_sum loop read_task runs */
    const uint64_t *words;
    size_t words_per_task;
    uint64_t iters_per_task;
    uint64_t results[MAX_TASKS]; /* per task: keeps every loop's result alive */
} roofline_job;

double llmc_seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void read_task(void *ctx, uint32_t i)
{
    roofline_job *j = ctx;
    j->results[i] = j->loops->read_sum[j->read_loop](j->words + (size_t)i * j->words_per_task,
                                                    j->words_per_task);
}

static void fma_task(void *ctx, uint32_t i)
{
    roofline_job *j = ctx;
    j->results[i] = (uint64_t)(j->loops->fma_loop(j->iters_per_task) * 1000.0f);
}

static void int8_task(void *ctx, uint32_t i)
{
    roofline_job *j = ctx;
    j->results[i] = (uint64_t)j->loops->int8_loop[j->mix](j->iters_per_task);
}

static double timed_parallel(llmc_threads *pool, uint32_t n_tasks, llmc_rt_task_fn fn, roofline_job *j)
{
    double t0 = llmc_seconds_now();
    llmc_threads_parallel(pool, n_tasks, fn, j);
    return llmc_seconds_now() - t0;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double llmc_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* 8x the last-level cache, within [64 MiB, 1 GiB]: every pass comes from DRAM. */
static size_t read_buffer_bytes(void)
{
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0)
        llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (llc <= 0)
        llc = 32L << 20;
    size_t bytes = 8u * (size_t)llc;
    if (bytes < (64u << 20))
        bytes = 64u << 20;
    return bytes > (1u << 30) ? 1u << 30 : bytes;
}

static int measure_read(llmc_threads *pool, uint32_t n_tasks, roofline_job *j, llmc_roofline_peaks *out)
{
    size_t words = read_buffer_bytes() / sizeof(uint64_t);
    j->words_per_task = words / n_tasks / 64 * 64;
    size_t bytes = j->words_per_task * n_tasks * sizeof(uint64_t);
    /* 2 MiB pages, as the arena and a --hugepages plan get */
    uint64_t *buf = llmc_alloc_huge(bytes);
    if (!buf)
        return ENOMEM;
    memset(buf, 0x5a, bytes); /* non-zero: every page is really backed */
    j->words = buf;
    /* the loops take turns pass by pass; the faster's median */
    double gbs[LLMC_READ_LOOPS][READ_PASSES];
    int loops = j->loops->read_sum[1] ? 2 : 1;
    for (int k = -1; k < READ_PASSES; k++) /* pass -1 warms up */
        for (j->read_loop = 0; j->read_loop < loops; j->read_loop++) {
            double gb_s = (double)bytes / timed_parallel(pool, n_tasks, read_task, j) / 1e9;
            if (k >= 0)
                gbs[j->read_loop][k] = gb_s;
        }
    llmc_free_huge(buf, bytes);
    out->read_bytes = bytes;
    out->read_gb_s = 0.0;
    for (int l = 0; l < loops; l++) {
        double m = llmc_median(gbs[l], READ_PASSES);
        out->read_gb_s = m > out->read_gb_s ? m : out->read_gb_s;
    }
    return 0;
}

/* Median rate (1e9 ops/s) of a compute loop of `loops` (FMA, or the int8
 * loop of j->mix) whose runs last about COMPUTE_SECONDS; iterations
 * calibrated on growing trial runs. */
static double measure_compute(llmc_threads *pool, uint32_t n_tasks, llmc_rt_task_fn fn,
                              const llmc_roofline_loops *loops, roofline_job *j)
{
    double ops_per_iter = llmc_roofline_ops_per_iter(fn == fma_task ? &loops->fma : &loops->int8[j->mix]);
    j->loops = loops;
    j->iters_per_task = 1024;
    double t;
    while ((t = timed_parallel(pool, n_tasks, fn, j)) < COMPUTE_SECONDS / 8)
        j->iters_per_task *= 4;
    j->iters_per_task = (uint64_t)((double)j->iters_per_task * COMPUTE_SECONDS / t) + 1;
    double rates[COMPUTE_RUNS];
    for (int k = 0; k < COMPUTE_RUNS; k++) {
        t = timed_parallel(pool, n_tasks, fn, j);
        rates[k] = ops_per_iter * (double)j->iters_per_task * n_tasks / t / 1e9;
    }
    return llmc_median(rates, COMPUTE_RUNS);
}

/* 8 dependent register adds per iteration, x = 8 * iters * one: one cycle
 * each on every x86 and Arm core (the empty asm keeps each add apart, and
 * the register operand keeps Golden Cove's renamer from folding immediate
 * adds). */
#define ADD1 do { x += one; __asm__ volatile("" : "+r"(x)); } while (0)
static uint64_t add_chain(uint64_t iters, uint64_t one)
{
    uint64_t x = 0;
    for (uint64_t i = 0; i < iters; i++) {
        ADD1; ADD1; ADD1; ADD1; ADD1; ADD1; ADD1; ADD1;
    }
    return x;
}

/* The calling thread's clock in MHz: adds per second of its own CPU time
 * (time the thread spent descheduled does not count), the best of
 * CLOCK_RUNS runs of about 2 ms. */
#define CLOCK_RUNS 9
#define CLOCK_ITERS 500000
static double measured_mhz(void)
{
    double best = 0;
    for (int k = 0; k < CLOCK_RUNS; k++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        double adds = (double)(add_chain(CLOCK_ITERS, (uint64_t)k + 1) / ((uint64_t)k + 1));
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (s > 0 && adds / s / 1e6 > best)
            best = adds / s / 1e6;
    }
    return best;
}

/* rate against threads (at most the online CPUs) x clock (the larger of
 * the stated and the measured one) x the instruction's ops per cycle per
 * core: suspect if more than BOUND_SLACK above (boost moves the clock by a
 * percent or two between the clock's runs and the loop's; a merged chain
 * or a wrong count is 10% or more). */
#define BOUND_SLACK 1.05
static llmc_roofline_peak checked(double rate, const llmc_roofline_insn *in, uint32_t threads,
                                  const llmc_cpu_info *cpu)
{
    double per_cycle = in->per_cycle[cpu->core] ? in->per_cycle[cpu->core] : in->per_cycle[LLMC_CORE_OTHER];
    uint32_t cores = threads < cpu->cpus ? threads : cpu->cpus;
    double mhz = cpu->max_mhz > cpu->measured_mhz ? cpu->max_mhz : cpu->measured_mhz;
    double bound = cores * mhz * 1e6 * per_cycle * llmc_roofline_ops_per_issue(in) / 1e9;
    return (llmc_roofline_peak){rate, bound, bound > 0 && rate > BOUND_SLACK * bound};
}

/* The int8 peak of each mix of `loops` into peak[] (a loop serving
 * several mixes runs once). */
static void measure_int8(llmc_threads *pool, uint32_t n_tasks, const llmc_roofline_loops *loops,
                         roofline_job *j, llmc_roofline_peak peak[LLMC_INT8_MIXES])
{
    for (int m = 0; m < LLMC_INT8_MIXES; m++) {
        int same = 0;
        while (same < m && loops->int8_loop[same] != loops->int8_loop[m])
            same++;
        j->mix = (llmc_int8_mix)m;
        peak[m].rate = same < m ? peak[same].rate : measure_compute(pool, n_tasks, int8_task, loops, j);
    }
}

/* Each mix's peak checked against its bound. */
static void check_int8(llmc_roofline_peak peak[LLMC_INT8_MIXES], const llmc_roofline_loops *loops,
                       const llmc_roofline_peaks *out)
{
    for (int m = 0; m < LLMC_INT8_MIXES; m++)
        peak[m] = checked(peak[m].rate, &loops->int8[m], out->threads, &out->cpu);
}

/* The compute peaks: the loops' own, then the x86 int8 loops they do not
 * run where the CPU has them (the AVX2 mixes beside vpdpbusd and the
 * reverse); each checked against its bound once the clock is known. */
static void measure_peaks(llmc_threads *pool, uint32_t n_tasks, const llmc_roofline_loops *loops,
                          roofline_job *j, llmc_roofline_peaks *out)
{
    double mhz = measured_mhz(); /* before and after the loops: the higher */
    out->fp32.rate = measure_compute(pool, n_tasks, fma_task, loops, j);
    measure_int8(pool, n_tasks, loops, j, out->int8);
#if defined(__x86_64__)
    const llmc_roofline_loops *avx2 = &llmc_roofline_avx2, *vnni = &llmc_roofline_avx2_avx512;
    const rt_kernels *kt = rt_kernels_for_target("avx2", NULL);
    if (loops == vnni) {
        measure_int8(pool, n_tasks, avx2, j, out->int8_avx2);
        out->int8_vnni.rate = out->int8[LLMC_INT8_W8].rate;
    } else if (loops == &llmc_roofline_avx2_avxvnni || loops == &llmc_roofline_avx2_avx512ymm) {
        measure_int8(pool, n_tasks, avx2, j, out->int8_avx2);
    } else if (loops == avx2) {
        memcpy(out->int8_avx2, out->int8, sizeof out->int8);
        j->mix = LLMC_INT8_W8;
        if (kt && !strcmp(kt->isa, vnni->isa))
            out->int8_vnni.rate = measure_compute(pool, n_tasks, int8_task, vnni, j);
    }
#endif
    double after = measured_mhz();
    out->cpu.measured_mhz = after > mhz ? after : mhz;
#if defined(__x86_64__)
    if (out->int8_avx2[LLMC_INT8_W8].rate) {
        check_int8(out->int8_avx2, avx2, out);
        out->int8_vnni = checked(out->int8_vnni.rate, &vnni->int8[LLMC_INT8_W8], out->threads, &out->cpu);
    }
#endif
    out->fp32 = checked(out->fp32.rate, &loops->fma, out->threads, &out->cpu);
    check_int8(out->int8, loops, out);
}

int llmc_roofline_measure(uint32_t threads, const char *isa, llmc_roofline_peaks *out)
{
    memset(out, 0, sizeof *out);
    uint32_t n_tasks = threads * TASKS_PER_THREAD;
    if (!threads || n_tasks > MAX_TASKS)
        return EINVAL;
    roofline_job *j = calloc(1, sizeof *j);
    llmc_threads *pool = llmc_threads_create(threads);
    int rc = j && pool ? 0 : ENOMEM;
    const llmc_roofline_loops *loops = pick_loops(isa);
    if (!rc) {
        llmc_cpu_info_read(&out->cpu);
        j->loops = loops;
        out->isa = loops->isa;
        out->threads = threads;
        rc = measure_read(pool, n_tasks, j, out);
    }
    if (!rc)
        measure_peaks(pool, n_tasks, loops, j, out);
    llmc_threads_destroy(pool);
    free(j);
    return rc;
}
