/* make bench-kernels: the AVX2 quantized Linear kernels on Qwen2-0.5B's
 * Linear shapes, against this machine's read bandwidth.  A measurement,
 * not a test: machines like this one vary 2-3x from day to day, so compare
 * the ratios printed in one run.
 *
 *   (a) decode: one token through 24 layers' Linears (per layer qkv
 *       [1152, 896], o [896, 896], gate+up [9728, 896], down [896, 4864]),
 *       each input quantized once (QuantizeRows) then QLinear at m = 1:
 *       GB/s of packed weight bytes and tok/s, for w4a8 (groups of 64) and
 *       w8a8 (groups of 32), the compiler's default groups;
 *   (b) a STREAM-like read of the same byte count (the roofline's
 *       indexed read loop, in tasks of 1 MiB);
 *   (c) prefill: QLinear at m = 512 over one layer's Linears, GOPS
 *       (2 m n k per second, 2 ops per u8 x s8 product as the roofline
 *       loops count them), against the int8 peak of the weights' mix in
 *       `llmc bench --roofline` on as many threads (w4: 8 vpmaddubsw per
 *       vpmaddwd, w8: one each, on AVX2);
 *   (d) the GEMV's compute ceiling: layer 0's o projection [896, 896]
 *       (w4 460 KB, w8 860 KB: in L2) at m = 1 again and again, GB/s of
 *       weights; decode reaches the read bandwidth only if this is well
 *       above it;
 *   (e) a layer's q, k and v at m = 1 as one call of three outputs (the
 *       runtime's merged Linear: one parallel job) against three calls,
 *       within decode tokens (2 threads);
 *   (f) the prefill micro-kernel (qtile_block) alone, its operands in L1,
 *       at groups of 32 to 256, and the split of its time into the
 *       multiply-add loop and the groups' ends (1 thread);
 *   (g) decode through the table's qlinear_gemv_pair (two W row tiles per
 *       kernel call) against qtile per tile, alternated, as a model and
 *       with the weights in L2 as in (d);
 *   (h) where a decode GEMV's time goes on 2 threads: each Linear shape
 *       alone through the 24 layers (weights from DRAM), every task timed:
 *       the threads' busy share of the calls, the weights' GB/s while a
 *       thread runs a task (against the same on 1 thread), and per call
 *       the medians of how late the last thread starts its first task and
 *       how far apart the threads finish their last.
 * Weights and the read buffer in 2 MiB pages (llmc_alloc_huge), as a
 * plan under `llmc bench --hugepages`.  Median of 5 runs, on 1 and 2
 * threads (llmc_threads).  The kernels are the table this CPU runs "avx2"
 * plans with, or BENCH_ISA's (`BENCH_ISA=avx2+avxvnni make bench-kernels`),
 * the peaks those of its loops; the GEMV prefetches this CPU's default
 * distance ahead of its weights, or BENCH_PREFETCH bytes (`BENCH_PREFETCH=8192
 * make bench-kernels`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/file_map.h"
#include "kernels/kernel_table.h"
#include "llmc_threads.h"
#include "tools/roofline.h"

#define LAYERS 24
#define HIDDEN 896
#ifndef RUNS
#define RUNS 5
#endif

static const int64_t shapes[4][2] = {{1152, HIDDEN}, {HIDDEN, HIDDEN}, {9728, HIDDEN},
                                     {HIDDEN, 4864}};

typedef struct {
    rt_qweight_shape ws[4];
    uint8_t *w[LAYERS][4];
    uint64_t bytes;          /* all packed weights */
} model;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n ? v[n / 2] : 0;
}

static double median(double *v)
{
    return median_of(v, RUNS);
}

static uint64_t rng = 88172645463325252ull;

static uint8_t next_byte(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 32);
}

/* Random q, scales around 0.01 and mins around -0.1: the kernels do the
 * same work whatever the values. */
static uint8_t *random_weights(const rt_qweight_shape *s)
{
    uint64_t bytes = rt_qweight_bytes(s), block = rt_qweight_block_bytes(s);
    uint64_t data = (uint64_t)s->hp * (uint64_t)s->group * (uint64_t)s->bits / 8u;
    uint8_t *w = llmc_alloc_huge(bytes);
    if (!w)
        return NULL;
    for (uint64_t i = 0; i < bytes; i++)
        w[i] = next_byte();
    for (uint64_t b = 0; b < bytes; b += block)
        for (uint64_t h = 0; h < (s->bits == 4 ? 2u : 1u) * (uint64_t)s->hp; h++) {
            uint16_t half = h < (uint64_t)s->hp ? rt_float_to_half(0.01f) : rt_float_to_half(-0.1f);
            w[b + data + 2 * h] = (uint8_t)half;
            w[b + data + 2 * h + 1] = (uint8_t)(half >> 8);
        }
    return w;
}

/* Weights per scale: `llmc compile`'s default for these bits
 * (default_group in compiler/cli/cmd_compile.c), so that the figures are those
 * of a default plan. */
static int64_t group_of(int bits)
{
    return bits == 4 ? 64 : 32;
}

static bool model_init(model *M, int bits, const rt_kernels *kt)
{
    M->bytes = 0;
    for (int i = 0; i < 4; i++)
        rt_qweight_shape_init(&M->ws[i], bits, kt->q_hp, kt->q_lp, shapes[i][0], shapes[i][1],
                              group_of(bits));
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < 4; i++) {
            M->w[l][i] = random_weights(&M->ws[i]);
            if (!M->w[l][i])
                return false;
            M->bytes += rt_qweight_bytes(&M->ws[i]);
        }
    return true;
}

static void model_free(model *M)
{
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < 4; i++)
            llmc_free_huge(M->w[l][i], rt_qweight_bytes(&M->ws[i]));
}

/* Activations of m rows for every shape: x floats, tiles, output. */
typedef struct {
    float *x, *y;
    uint8_t *xq[4];
    rt_qact_shape xs[4];
} acts;

static bool acts_init(acts *A, const model *M, const rt_kernels *kt, int64_t m)
{
    /* 64-byte aligned as a session's arena tensors are: the GEMM walks
     * stream whole output lines only into aligned rows */
    A->x = aligned_alloc(64, (size_t)(m * 9728) * sizeof(float));
    A->y = aligned_alloc(64, (size_t)(m * 9728) * sizeof(float));
    if (!A->x || !A->y)
        return false;
    for (int64_t i = 0; i < m * 9728; i++)
        A->x[i] = (float)(next_byte() - 128) / 64.0f;
    for (int i = 0; i < 4; i++) {
        rt_qact_shape_init(&A->xs[i], kt->q_ep, kt->q_lp, m, M->ws[i].k, M->ws[i].group);
        A->xq[i] = aligned_alloc(64, (rt_qact_bytes(&A->xs[i]) + 63) / 64 * 64);
        if (!A->xq[i])
            return false;
    }
    return true;
}

static void acts_free(acts *A)
{
    free(A->x);
    free(A->y);
    for (int i = 0; i < 4; i++)
        free(A->xq[i]);
}

static void check(llmc_rt_status st, const llmc_rt_error *err)
{
    if (st != LLMC_RT_OK) {
        fprintf(stderr, "bench_qlinear: %s\n", err->msg);
        exit(1);
    }
}

/* Bytes ahead the GEMV prefetches: BENCH_PREFETCH (a multiple of 64 up
 * to RT_GEMV_PREFETCH_MAX), else this CPU's default.  Found once, as the
 * runtime does when it opens a plan: the default asks cpuid, which in
 * a VM exits to the hypervisor (6.5 us a call measured on a KVM Xeon, half
 * the time of a GEMV of a [896, 896] w4 Linear in L2). */
static uint32_t gemv_prefetch(void)
{
    static uint32_t bytes;
    static bool known;
    if (!known) {
        const char *v = getenv("BENCH_PREFETCH");
        long n = v ? strtol(v, NULL, 10) : -1;
        bytes = n >= 0 && n % 64 == 0 && n <= (long)RT_GEMV_PREFETCH_MAX
                    ? (uint32_t)n
                    : rt_gemv_prefetch_default();
        known = true;
    }
    return bytes;
}

/* One Linear of layer l: quantize its input (when `quantize`), then QLinear. */
static void linear(const rt_kernels *kt, const model *M, acts *A, int l, int i, bool quantize,
                   int64_t m, const rt_parallel *par)
{
    llmc_rt_error err;
    int64_t k = M->ws[i].k, n = M->ws[i].n;
    rt_view x = {LLMC_RT_F32, 2, {m, k}, A->x};
    rt_view xq = {LLMC_RT_I8, 2, {m, k}, A->xq[i]};
    rt_view y = {LLMC_RT_F32, 2, {m, n}, A->y};
    if (quantize)
        check(k_quantize_rows(kt, &x, &A->xs[i], 0.0f, &xq, par, &err), &err);
    check(k_qlinear(kt, &xq, &A->xs[i], M->w[l][i], &M->ws[i], NULL, NULL, 0, &y, 1, 2,
                    gemv_prefetch(), par, &err),
          &err);
}

/* Layer l's q, k and v projections ([896, 896], [128, 896], [128, 896]:
 * W of qkv) at m = 1, as one k_qlinear call of three outputs (joined, as
 * the runtime runs a merged Linear) or as three calls; seconds. */
static double qkv(const rt_kernels *kt, const model *M, acts *A, int l, bool joined,
                  const rt_parallel *par)
{
    llmc_rt_error err;
    static const int64_t widths[3] = {HIDDEN, 128, 128};
    rt_view xq = {LLMC_RT_I8, 2, {1, HIDDEN}, A->xq[0]}, ys[3];
    for (int j = 0, at = 0; j < 3; at += (int)widths[j], j++)
        ys[j] = (rt_view){LLMC_RT_F32, 2, {1, widths[j]}, A->y + at};
    double t0 = now();
    if (joined)
        check(k_qlinear(kt, &xq, &A->xs[0], M->w[l][0], &M->ws[0], NULL, NULL, 0, ys, 3, 2,
                        gemv_prefetch(), par, &err),
              &err);
    for (int j = 0, col0 = 0; !joined && j < 3; col0 += (int)widths[j], j++)
        check(k_qlinear(kt, &xq, &A->xs[0], M->w[l][0], &M->ws[0], NULL, NULL, col0, &ys[j], 1,
                        2, gemv_prefetch(), par, &err), &err);
    return now() - t0;
}

/* Seconds of one decode token's q, k and v projections (joined or not),
 * every other Linear run in between untimed, so that each layer's weights
 * come from DRAM as in a model. */
static double qkv_in_token(const rt_kernels *kt, const model *M, acts *A, bool joined,
                           const rt_parallel *par)
{
    double t = 0;
    for (int l = 0; l < LAYERS; l++) {
        t += qkv(kt, M, A, l, joined, par);
        for (int i = 1; i < 4; i++)
            linear(kt, M, A, l, i, true, 1, par);
    }
    return t;
}

/* Seconds for one decode token (every layer, every Linear). */
static double decode_token(const rt_kernels *kt, const model *M, acts *A, const rt_parallel *par)
{
    double t0 = now();
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < 4; i++)
            linear(kt, M, A, l, i, true, 1, par);
    return now() - t0;
}

/* Seconds for m = 512 through layer 0's Linears (QLinear only). */
static double prefill_layer(const rt_kernels *kt, const model *M, acts *A, const rt_parallel *par)
{
    for (int i = 0; i < 4; i++)
        linear(kt, M, A, 0, i, true, 512, par);
    double t0 = now();
    for (int i = 0; i < 4; i++)
        linear(kt, M, A, 0, i, false, 512, par);
    return now() - t0;
}

/* Seconds per GEMV of layer 0's o projection, its weights in cache. */
static double gemv_in_cache(const rt_kernels *kt, const model *M, acts *A, const rt_parallel *par)
{
    enum { CALLS = 400 };
    linear(kt, M, A, 0, 1, true, 1, par);
    double t0 = now();
    for (int c = 0; c < CALLS; c++)
        linear(kt, M, A, 0, 1, false, 1, par);
    return (now() - t0) / CALLS;
}

/* ---- the prefill micro-kernel alone --------------------------------------- */

/* qtile_block on four activation tiles by one W row tile pair (16 x 16
 * outputs on x86) of depth L1_DEPTH, called again and again: its operands
 * stay in L1, so this is the micro-kernel without the walk around it.
 * Timed at several group sizes, it separates the kernel's two costs: a
 * group's multiply-adds take time in proportion to the group, its end (the
 * float scaling) a fixed time per group, so seconds per op = a + b /
 * group, fitted by least squares over L1_GROUPS; 1 / a is the multiply-add
 * loop's own rate. */
#define L1_DEPTH 1024
#define L1_CALLS 20000
#define L1_TILES 4    /* activation tiles per call */
#define L1_OUT 256    /* outputs a call may write (q_avx512_pairs.c's buffer) */

static const int64_t l1_groups[] = {32, 64, 128, 256};
#define L1_GROUPS (int)(sizeof l1_groups / sizeof l1_groups[0])

/* GOPS of qtile_block at this group size (median of RUNS). */
static double kernel_in_l1(const rt_kernels *kt, int bits, int64_t group)
{
    int64_t rows = L1_TILES * kt->q_ep, cols = 2 * kt->q_hp;
    rt_qweight_shape ws;
    rt_qact_shape xs;
    rt_qweight_shape_init(&ws, bits, kt->q_hp, kt->q_lp, cols, L1_DEPTH, group);
    rt_qact_shape_init(&xs, kt->q_ep, kt->q_lp, rows, L1_DEPTH, group);
    uint8_t *w = random_weights(&ws);
    uint8_t *xq = aligned_alloc(64, (rt_qact_bytes(&xs) + 63) / 64 * 64);
    float *x = aligned_alloc(64, sizeof(float) * (size_t)(rows * L1_DEPTH));
    if (!w || !xq || !x) {
        fprintf(stderr, "bench_qlinear: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < rows * L1_DEPTH; i++)
        x[i] = (float)(next_byte() - 128) / 64.0f;
    kt->quantize_rows(x, L1_DEPTH, &xs, 0, rows, 0.0f, xq);
    rt_qtile_args a = {xq, xs, w, ws, 0};
    float out[L1_OUT];
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now();
        for (int c = 0; c < L1_CALLS; c++)
            kt->qtile_block(&a, 0, L1_TILES, 0, out);
        t[r] = now() - t0;
    }
    free(x);
    free(xq);
    llmc_free_huge(w, rt_qweight_bytes(&ws));
    return 2.0 * (double)(rows * cols) * L1_DEPTH * L1_CALLS / median(t) / 1e9;
}

/* The GEMM micro-kernel's rate at each group size, and the fit that splits
 * it into the multiply-add loop and the groups' ends (one thread; tables
 * without qtile_block have no such kernel). */
static void report_kernel_in_l1(const rt_kernels *kt, int bits, double peak)
{
    if (!kt->qtile_block || L1_TILES * kt->q_ep * 2 * kt->q_hp > L1_OUT)
        return;
    double gops[L1_GROUPS], sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < L1_GROUPS; i++) {
        gops[i] = kernel_in_l1(kt, bits, l1_groups[i]);
        double u = 1.0 / (double)l1_groups[i], v = 1.0 / gops[i];
        sx += u;
        sy += v;
        sxx += u * u;
        sxy += u * v;
    }
    double b = (L1_GROUPS * sxy - sx * sy) / (L1_GROUPS * sxx - sx * sx);
    double a = (sy - b * sx) / L1_GROUPS;
    printf("w%da8 %s 1 thread : GEMM kernel in L1 (%d x %d outputs, depth %d), GOPS at groups of",
           bits, kt->isa, L1_TILES * kt->q_ep, 2 * kt->q_hp, L1_DEPTH);
    for (int i = 0; i < L1_GROUPS; i++)
        printf(" %d: %.1f (%.0f%%)%s", (int)l1_groups[i], gops[i], 100.0 * gops[i] / peak,
               i + 1 < L1_GROUPS ? "," : ";");
    printf(" fit: multiply-adds alone %.1f GOPS (%.0f%% of the peak %.0f), a group's end %.0f%% "
           "of the time at group 64\n", 1.0 / a, 100.0 / a / peak, peak,
           100.0 * (b / 64.0) / (a + b / 64.0));
}

/* ---- STREAM-like read ------------------------------------------------------ */

/* Read tasks of 1 MiB: on a Zen 5 machine two threads read 43-45 GB/s in
 * 64 KiB tasks handed out one at a time and 65-67 in 1 MiB ones (the
 * roofline's 64 MiB tasks: 63-68). */
#define READ_TASK_BYTES 1048576

typedef struct {
    const uint8_t *p;
    uint64_t bytes;
    uint64_t sums[8192];
} read_job;

/* Task i's bytes (whole 128-byte blocks) by `llmc bench --roofline`'s
 * indexed read loop, the faster of its two shapes on Intel Xeon family 6
 * model 167. */
static void read_task(void *ctx, uint32_t i)
{
    read_job *J = ctx;
    uint64_t at = (uint64_t)i * READ_TASK_BYTES, end = at + READ_TASK_BYTES;
    end = end < J->bytes ? end : J->bytes;
    J->sums[i % 8192] = llmc_roofline_avx2.read_sum[1](
        (const uint64_t *)(const void *)(J->p + at), (size_t)(end - at) / 128 * 16);
}

static double read_all(const uint8_t *p, uint64_t bytes, const rt_parallel *par)
{
    static read_job J;
    J.p = p;
    J.bytes = bytes;
    double t0 = now();
    par->fn(par->pool, (uint32_t)((bytes + READ_TASK_BYTES - 1) / READ_TASK_BYTES), read_task, &J);
    return now() - t0;
}

/* ---- where a GEMV call's time goes (h) ---------------------------------------- */

#define SPLIT_THREADS 2
#define SPLIT_CALLS (RUNS * LAYERS)

/* Task times of one parallel call, by thread: slot 0 the caller's, 1 the
 * worker's (a thread is told by the address of its own `thread_mark`). */
typedef struct {
    llmc_rt_task_fn task;
    void *ctx;
    const char *caller;
    double first[SPLIT_THREADS], last[SPLIT_THREADS], busy[SPLIT_THREADS];
} split_call;

static _Thread_local char thread_mark;

static void timed_task(void *ctx, uint32_t i)
{
    split_call *c = ctx;
    double t0 = now();
    c->task(c->ctx, i);
    double t1 = now();
    int s = &thread_mark == c->caller ? 0 : 1;
    if (c->first[s] == 0)
        c->first[s] = t0;
    c->last[s] = t1;
    c->busy[s] += t1 - t0;
}

/* Per call: lag, the last thread's first task start after the call's;
 * gap, how far apart the threads' last tasks end (calls that ran on one
 * thread have none); busy, the threads' summed task time. */
typedef struct {
    llmc_threads *pool;
    double call, busy;
    double lag[SPLIT_CALLS], gap[SPLIT_CALLS];
    int n_lag, n_one;
} split_stats;

static void split_parallel(void *pool, uint32_t n, llmc_rt_task_fn task, void *ctx)
{
    split_stats *S = pool;
    split_call c = {task, ctx, &thread_mark, {0}, {0}, {0}};
    double t0 = now();
    llmc_threads_parallel(S->pool, n, timed_task, &c);
    S->call += now() - t0;
    double lag = 0, end_hi = 0, end_lo = 1e300;
    int ran = 0;
    for (uint32_t s = 0; s < SPLIT_THREADS; s++) {
        S->busy += c.busy[s];
        if (c.first[s] == 0)
            continue;
        ran++;
        lag = c.first[s] - t0 > lag ? c.first[s] - t0 : lag;
        end_hi = c.last[s] > end_hi ? c.last[s] : end_hi;
        end_lo = c.last[s] < end_lo ? c.last[s] : end_lo;
    }
    if (ran < 2 || S->n_lag == SPLIT_CALLS) {
        S->n_one += ran < 2;
        return;
    }
    S->lag[S->n_lag] = lag;
    S->gap[S->n_lag++] = end_hi - end_lo;
}

/* Shape i of every layer, RUNS rounds, each after a read of `big` that
 * evicts the weights; the quantized input is made once. */
static void split_shape(const rt_kernels *kt, const model *M, acts *A, int i,
                        const uint8_t *big, uint64_t big_bytes, split_stats *S)
{
    rt_parallel serial = {llmc_threads_parallel, S->pool};
    rt_parallel timed = {split_parallel, S};
    linear(kt, M, A, 0, i, true, 1, &serial);
    for (int r = 0; r < RUNS; r++) {
        read_all(big, big_bytes, &serial);
        for (int l = 0; l < LAYERS; l++)
            linear(kt, M, A, l, i, false, 1, &timed);
    }
}

static void report_call_split(const rt_kernels *kt, const model *M, acts *A, int bits,
                              const uint8_t *big, uint64_t big_bytes)
{
    static split_stats S[SPLIT_THREADS];
    for (int i = 0; i < 4; i++) {
        double bytes = (double)RUNS * LAYERS * (double)rt_qweight_bytes(&M->ws[i]);
        for (uint32_t t = 1; t <= SPLIT_THREADS; t++) {
            memset(&S[t - 1], 0, sizeof S[t - 1]);
            S[t - 1].pool = llmc_threads_create(t);
            split_shape(kt, M, A, i, big, big_bytes, &S[t - 1]);
            llmc_threads_destroy(S[t - 1].pool);
        }
        split_stats *one = &S[0], *two = &S[1];
        printf("w%da8 %s [%lld, %lld] %.0f KB: 1 thread %.1f us a call, in tasks %.2f GB/s; "
               "2 threads %.1f us, busy %.0f%%, in tasks %.2f GB/s a thread, median lag "
               "%.2f us, median gap %.2f us (%d calls on one thread)\n",
               bits, kt->isa, (long long)shapes[i][0], (long long)shapes[i][1],
               (double)rt_qweight_bytes(&M->ws[i]) / 1e3, 1e6 * one->call / SPLIT_CALLS,
               bytes / one->busy / 1e9, 1e6 * two->call / SPLIT_CALLS,
               100.0 * two->busy / (SPLIT_THREADS * two->call), bytes / two->busy / 1e9,
               1e6 * median_of(two->lag, two->n_lag), 1e6 * median_of(two->gap, two->n_lag),
               two->n_one);
        fflush(stdout);
    }
}

/* ---- report ------------------------------------------------------------------- */

static void bench_bits(const rt_kernels *kt, int bits, const uint8_t *big, uint64_t big_bytes,
                       const llmc_roofline_peaks *peaks)
{
    model M;
    acts A1, A512;
    if (!model_init(&M, bits, kt) || !acts_init(&A1, &M, kt, 1) || !acts_init(&A512, &M, kt, 512)) {
        fprintf(stderr, "bench_qlinear: out of memory\n");
        exit(1);
    }
    report_kernel_in_l1(kt, bits, peaks[0].int8[bits == 4 ? LLMC_INT8_W4 : LLMC_INT8_W8].rate);
    double ops = 0;
    for (int i = 0; i < 4; i++)
        ops += 2.0 * 512 * (double)shapes[i][0] * (double)shapes[i][1];
    for (uint32_t threads = 1; threads <= 2; threads++) {
        llmc_threads *pool = llmc_threads_create(threads);
        rt_parallel par = {llmc_threads_parallel, pool};
        double dec[RUNS], rd[RUNS], pre[RUNS], ratio[RUNS], l2[RUNS];
        decode_token(kt, &M, &A1, &par); /* warm up: page faults, pool */
        for (int r = 0; r < RUNS; r++) {
            dec[r] = decode_token(kt, &M, &A1, &par);
            rd[r] = read_all(big, M.bytes < big_bytes ? M.bytes : big_bytes, &par);
            pre[r] = prefill_layer(kt, &M, &A512, &par);
            l2[r] = gemv_in_cache(kt, &M, &A1, &par);
            ratio[r] = rd[r] / dec[r];
        }
        double t_dec = median(dec), t_rd = median(rd), t_pre = median(pre);
        llmc_int8_mix mix = bits == 4 ? LLMC_INT8_W4 : LLMC_INT8_W8;
        double peak = peaks[threads - 1].int8[mix].rate;
        double gemv_gbs = (double)M.bytes / t_dec / 1e9, read_gbs = (double)M.bytes / t_rd / 1e9;
        /* the ratio is taken run by run (a read right after each token),
         * which the load of a shared machine disturbs less */
        printf("w%da8 g%d %s %u thread%s: decode %.1f tok/s, GEMV %.2f GB/s of %.0f MB, read "
               "%.2f GB/s, GEMV/read %.0f%%, GEMV in L2 %.1f GB/s; prefill m=512 GEMM %.1f "
               "GOPS (%.0f%% of int8 %s peak %.0f)\n",
               bits, (int)M.ws[0].group, kt->isa, threads, threads > 1 ? "s" : " ",
               1.0 / t_dec, gemv_gbs,
               (double)M.bytes / 1e6, read_gbs, 100.0 * median(ratio),
               (double)rt_qweight_bytes(&M.ws[1]) / median(l2) / 1e9, ops / t_pre / 1e9,
               100.0 * ops / t_pre / 1e9 / peak, llmc_int8_mix_name(mix), peak);
        if (kt->qlinear_gemv_pair) {
            rt_kernels per_tile = *kt;
            per_tile.qlinear_gemv_pair = NULL;
            double paired[RUNS], single[RUNS], gain[RUNS], l2_paired[RUNS], l2_single[RUNS];
            for (int r = 0; r < RUNS; r++) { /* which goes first alternates */
                if (r & 1)
                    single[r] = decode_token(&per_tile, &M, &A1, &par);
                paired[r] = decode_token(kt, &M, &A1, &par);
                if (!(r & 1))
                    single[r] = decode_token(&per_tile, &M, &A1, &par);
                gain[r] = single[r] / paired[r];
                l2_paired[r] = gemv_in_cache(kt, &M, &A1, &par);
                l2_single[r] = gemv_in_cache(&per_tile, &M, &A1, &par);
            }
            double o_bytes = (double)rt_qweight_bytes(&M.ws[1]);
            printf("w%da8 g%d %s %u thread%s: decode with qlinear_gemv_pair %.1f tok/s, qtile "
                   "per tile %.1f tok/s (paired median ratio %.3f); in L2 %.1f and %.1f GB/s\n",
                   bits, (int)M.ws[0].group, kt->isa, threads, threads > 1 ? "s" : " ",
                   1.0 / median(paired), 1.0 / median(single), median(gain),
                   o_bytes / median(l2_paired) / 1e9, o_bytes / median(l2_single) / 1e9);
        }
        if (threads > 1) {
            double joined[RUNS], three[RUNS], gain[RUNS];
            for (int r = 0; r < RUNS; r++) { /* which goes first alternates */
                if (r & 1)
                    three[r] = qkv_in_token(kt, &M, &A1, false, &par);
                joined[r] = qkv_in_token(kt, &M, &A1, true, &par);
                if (!(r & 1))
                    three[r] = qkv_in_token(kt, &M, &A1, false, &par);
                gain[r] = three[r] / joined[r];
            }
            printf("w%da8 g%d %s %u threads: q, k and v of a layer (%.0f KB) in one call %.1f us, "
                   "in three calls %.1f us (paired median ratio %.3f)\n",
                   bits, (int)M.ws[0].group, kt->isa, threads,
                   (double)rt_qweight_bytes(&M.ws[0]) / 1e3, 1e6 * median(joined) / LAYERS,
                   1e6 * median(three) / LAYERS, median(gain));
        }
        fflush(stdout);
        llmc_threads_destroy(pool);
    }
    report_call_split(kt, &M, &A1, bits, big, big_bytes);
    acts_free(&A1);
    acts_free(&A512);
    model_free(&M);
}

int main(void)
{
    llmc_rt_error err;
    /* BENCH_ISA names one of the tables "avx2" plans run here (llmc run
     * --isa); unset, the one this CPU picks */
    const rt_kernels *kt = rt_kernels_for_isa("avx2", getenv("BENCH_ISA"), &err);
    if (!kt) {
        fprintf(stderr, "bench_qlinear: %s\n", err.msg);
        return 1;
    }
    printf("the GEMV prefetches %u bytes ahead\n", gemv_prefetch());
    uint64_t big_bytes = 400ull << 20;
    uint8_t *big = llmc_alloc_huge(big_bytes);
    if (!big)
        return 1;
    for (uint64_t i = 0; i < big_bytes; i++)
        big[i] = (uint8_t)i;
    llmc_roofline_peaks peaks[2];
    for (uint32_t threads = 1; threads <= 2; threads++) {
        if (llmc_roofline_measure(threads, kt->isa, &peaks[threads - 1]) != 0) {
            fprintf(stderr, "bench_qlinear: the roofline measurement failed\n");
            return 1;
        }
    }
    bench_bits(kt, 4, big, big_bytes, peaks);
    bench_bits(kt, 8, big, big_bytes, peaks);
    llmc_free_huge(big, big_bytes);
    return 0;
}
