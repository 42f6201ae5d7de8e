/* make bench-f32: fp32 Linear and Attention kernels on the Qwen2-0.5B shapes
 * (a measurement to read, not a test; the machine may be shared, so every
 * figure is the median of 5 runs).
 *
 *   decode   the 4 Linear shapes of a layer x 24 layers at m = 1, weights as
 *            fp32 tiles (k_linear_tiles + the AVX2 ftile) and dense
 *            (k_linear): GB/s of weights streamed, next to a plain AVX2 sum
 *            over the same bytes (what the memory system gives);
 *   prefill  the same shapes of one layer at m = 128 and 512: GFLOPS, and
 *            their fraction of the fp32 FMA peak (the loop of `llmc bench
 *            --roofline`) measured right before on as many threads;
 *   attention  head_dim 64, 14 heads / 2 kv heads: one decode step at
 *            P = 128, 512, 2048 and a prefill of S = 512 (us per call);
 *            and a decode step at depth 4096 over 24 layers' caches
 *            (2 MiB pages; float32, float16 and int8 caches; each sweep
 *            over another copy of them, 1 GiB in all, so that they come
 *            from memory), against its compute alone and a plain read of
 *            as many bytes (what the call would take if the two
 *            overlapped).
 * Each at 1 and 2 threads (llmc_threads).  `bench_f32 linear` or
 * `bench_f32 attention` runs one half, `bench_f32 depth` the decode at
 * depth 4096 alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernel_table.h"
#include "llmc_threads.h"
#include "support/file_map.h"
#include "tools/roofline.h"

enum { LAYERS = 24, SHAPES = 4, RUNS = 5 };
static const int64_t shape_n[SHAPES] = {1152, 896, 9728, 896};
static const int64_t shape_k[SHAPES] = {896, 896, 896, 4864};
static llmc_rt_error err;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static void fill(float *p, size_t n)
{
    uint32_t s = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        p[i] = (float)(s >> 8) * (1.0f / 8388608.0f) - 1.0f;
    }
}

/* ---- Linear ------------------------------------------------------------ */

typedef struct {
    const rt_kernels *kt;   /* NULL: dense k_linear */
    float *w;               /* all layers' weights, one after the other */
    int64_t layers;
    float *x, *y;
    const rt_parallel *par;
} linear_bench;

static int64_t weight_floats(int s, int hp)
{
    return (shape_n[s] + hp - 1) / hp * hp * shape_k[s];
}

/* Every shape of every layer once at m rows; seconds. */
static double linear_sweep(const linear_bench *B, int64_t m)
{
    int hp = B->kt ? B->kt->f_hp : 1;
    double t0 = now();
    float *w = B->w;
    for (int64_t l = 0; l < B->layers; l++)
        for (int s = 0; s < SHAPES; s++) {
            rt_view vx = {LLMC_RT_F32, 2, {m, shape_k[s]}, B->x},
                    vy = {LLMC_RT_F32, 2, {m, shape_n[s]}, B->y};
            llmc_rt_status st;
            if (B->kt) {
                rt_ftile_shape ws;
                rt_ftile_shape_init(&ws, hp, shape_n[s], shape_k[s]);
                st = k_linear_tiles(B->kt, &vx, w, &ws, NULL, NULL, 0, &vy, 1, B->par, &err);
            } else {
                rt_view vw = {LLMC_RT_F32, 2, {shape_n[s], shape_k[s]}, w};
                st = k_linear(&vx, &vw, NULL, NULL, 0, &vy, B->par, &err);
            }
            if (st) {
                fprintf(stderr, "bench: %s\n", err.msg);
                exit(1);
            }
            w += weight_floats(s, hp);
        }
    return now() - t0;
}

static double sweep_median(const linear_bench *B, int64_t m)
{
    double t[RUNS];
    linear_sweep(B, m); /* warm-up */
    for (int r = 0; r < RUNS; r++)
        t[r] = linear_sweep(B, m);
    return median(t, RUNS);
}

/* The plain read: an AVX2 sum over a range of the weights, in tasks. */
typedef struct {
    const float *p;
    int64_t n, per_task;
    uint64_t sums[4096];
} read_job;

/* The words of n floats at p summed by `llmc bench --roofline`'s indexed
 * read loop (its faster shape on Intel Xeon family 6 model 167), whole
 * 128-byte blocks only; a plain loop without AVX2. */
static uint64_t read_sum(const float *p, int64_t n)
{
    const uint64_t *w = (const uint64_t *)(const void *)p;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2"))
        return llmc_roofline_avx2.read_sum[1](w, (size_t)n / 32 * 16);
#endif
    uint64_t s = 0;
    for (int64_t i = 0; i < n / 2; i++)
        s += w[i];
    return s;
}

static void read_task(void *ctx, uint32_t i)
{
    read_job *J = ctx;
    int64_t i0 = (int64_t)i * J->per_task;
    int64_t n = J->n - i0 < J->per_task ? J->n - i0 : J->per_task;
    J->sums[i % 4096] += read_sum(J->p + i0, n);
}

static double read_median(const float *p, int64_t n, const rt_parallel *par)
{
    static read_job J;
    double t[RUNS];
    J.p = p;
    J.n = n;
    J.per_task = 1 << 18; /* 1 MiB */
    uint32_t tasks = (uint32_t)((n + J.per_task - 1) / J.per_task);
    for (int r = 0; r <= RUNS; r++) {
        double t0 = now();
        rt_parallel_for(par, tasks, read_task, &J);
        if (r)
            t[r - 1] = now() - t0;
    }
    return median(t, RUNS);
}

/* The AVX2 table when this runtime and CPU run it, else the portable
 * ftile under the same tile sizes. */
static const rt_kernels *tile_table(void)
{
    llmc_rt_error e;
    const rt_kernels *avx2 = rt_kernels_for_target("avx2", &e);
    if (avx2)
        return avx2;
    static const rt_kernels generic = {.target = "generic", .f_hp = 16, .f_ep = 6,
                                       .ftile = rt_ftile_generic};
    return &generic;
}

/* The fp32 FMA peak on par's threads (threads tasks of the roofline's
 * chains at once), GFLOPS, median of RUNS. */
typedef struct {
    const llmc_roofline_loops *loops;
    uint64_t iters;
    float sink[2];
} peak_job;

static void peak_task(void *ctx, uint32_t i)
{
    peak_job *J = ctx;
    J->sink[i % 2] += J->loops->fma_loop(J->iters);
}

static double fp32_peak(const rt_parallel *par, uint32_t threads)
{
#if defined(__x86_64__)
    static peak_job J = {&llmc_roofline_avx2, 1 << 22, {0}};
    double t[RUNS];
    for (int r = 0; r <= RUNS; r++) {
        double t0 = now();
        rt_parallel_for(par, threads, peak_task, &J);
        if (r)
            t[r - 1] = now() - t0;
    }
    return (double)threads * (double)J.iters * llmc_roofline_ops_per_iter(&J.loops->fma) / median(t, RUNS) / 1e9;
#else
    (void)par;
    (void)threads;
    return 0.0;
#endif
}

/* Decode over all layers, then prefill over one layer, for one layout. */
static void bench_linear_layout(const rt_kernels *kt, const rt_parallel *pars, float *x,
                                float *y)
{
    int hp = kt ? kt->f_hp : 1;
    int64_t per_layer = 0;
    for (int s = 0; s < SHAPES; s++)
        per_layer += weight_floats(s, hp);
    float *w = malloc(sizeof *w * (size_t)(per_layer * LAYERS));
    if (!w) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    fill(w, (size_t)(per_layer * LAYERS));
    const char *name = kt ? kt->target : "dense";
    double gb = 4.0 * (double)(per_layer * LAYERS) / 1e9;
    for (int th = 0; th < 2; th++) {
        linear_bench B = {kt, w, LAYERS, x, y, &pars[th]};
        double t = sweep_median(&B, 1);
        printf("decode   %-8s %d thr: %7.1f ms per token, %5.1f GB/s", name, th + 1, 1e3 * t,
               gb / t);
        if (kt)
            printf("   (plain AVX2 read: %5.1f GB/s)",
                   gb / read_median(w, per_layer * LAYERS, &pars[th]));
        printf("\n");
    }
    double macs = 0.0;
    for (int s = 0; s < SHAPES; s++)
        macs += (double)shape_n[s] * (double)shape_k[s];
    static const int64_t ms[] = {128, 512};
    for (int mi = 0; mi < 2; mi++)
        for (int th = 0; th < 2; th++) {
            linear_bench B = {kt, w, 1, x, y, &pars[th]};
            double peak = fp32_peak(&pars[th], (uint32_t)th + 1);
            double t = sweep_median(&B, ms[mi]), gflops = 2.0 * macs * (double)ms[mi] / t / 1e9;
            printf("prefill  %-8s %d thr: m %3d: %7.1f ms per layer, %6.1f GFLOPS = %4.1f %% of "
                   "the fp32 peak (%.1f GFLOPS)\n", name, th + 1, (int)ms[mi], 1e3 * t, gflops,
                   peak > 0.0 ? 100.0 * gflops / peak : 0.0, peak);
        }
    free(w);
}

/* ---- Attention --------------------------------------------------------- */

enum { H = 14, G = 2, D = 64, CHUNK = 64, MAX_CTX = 2048 + 512 };

/* A call's operands: q, k, v and o of up to the rows a bench calls with,
 * cos and sin of rope_rows positions. */
typedef struct {
    float *q, *k, *v, *o, *cs, *sn;
    int64_t rope_rows;
} attn_io;

/* One float32 attention call of S rows after P cached positions of cache,
 * on table kt (NULL: the portable loops). */
static void attend(const attn_io *io, const rt_kernels *kt, const rt_kv_cache *cache, int64_t P,
                   int64_t S, const rt_parallel *par)
{
    rt_attention_attrs a = {H, G, D, D, 0.125f, NULL, NULL, 0.0f, 0, 0.0f};
    rt_view vq = {LLMC_RT_F32, 3, {1, S, H * D}, io->q}, vk = {LLMC_RT_F32, 3, {1, S, G * D}, io->k},
            vv = {LLMC_RT_F32, 3, {1, S, G * D}, io->v},
            vc = {LLMC_RT_F32, 2, {io->rope_rows, D}, io->cs},
            vs = {LLMC_RT_F32, 2, {io->rope_rows, D}, io->sn},
            vo = {LLMC_RT_F32, 3, {1, S, H * D}, io->o};
    if (k_attention_kernels(kt, &a, &vq, &vk, &vv, &vc, &vs, cache, P, &vo, par, &err)) {
        fprintf(stderr, "bench: %s\n", err.msg);
        exit(1);
    }
}

typedef struct {
    float *pool;
    attn_io io;
    uint32_t slot[MAX_CTX / CHUNK + 1];
} attn_bench;

/* One call at (P, S); seconds. */
static double attn_call(attn_bench *A, const rt_kernels *kt, int64_t P, int64_t S,
                        const rt_parallel *par)
{
    uint64_t slot_bytes = 2u * G * CHUNK * D * sizeof(float);
    rt_kv_cache cache = {(uint8_t *)A->pool, A->slot, slot_bytes, CHUNK, LLMC_RT_F32};
    double t0 = now();
    attend(&A->io, kt, &cache, P, S, par);
    return now() - t0;
}

/* Seconds of one test on table kt: decode (S 1) at P as the mean of 24
 * layers' calls, or the 512-token prefill (P 0). */
static double attn_test(attn_bench *A, const rt_kernels *kt, int64_t P, const rt_parallel *par)
{
    if (!P)
        return attn_call(A, kt, 0, 512, par);
    double s = 0.0;
    for (int l = 0; l < LAYERS; l++)
        s += attn_call(A, kt, P, 1, par);
    return s / LAYERS;
}

/* The attention tests on the n <= 2 tables kts (NULL: the portable loops), the
 * tables taking turns run by run (the order rotating), so that a shared
 * machine's slow minutes fall on all of them: each table's median and,
 * against the first table, the median of the run-by-run time ratios. */
static void bench_attention(const rt_kernels *const *kts, int n, const rt_parallel *pars)
{
    attn_bench A;
    size_t chunks = MAX_CTX / CHUNK + 1, chunk_floats = 2u * G * CHUNK * D;
    A.pool = malloc(sizeof(float) * chunks * chunk_floats);
    A.io.q = malloc(sizeof(float) * 512 * H * D);
    A.io.o = malloc(sizeof(float) * 512 * H * D);
    A.io.k = malloc(sizeof(float) * 512 * G * D);
    A.io.v = malloc(sizeof(float) * 512 * G * D);
    A.io.cs = malloc(sizeof(float) * MAX_CTX * D);
    A.io.sn = malloc(sizeof(float) * MAX_CTX * D);
    A.io.rope_rows = MAX_CTX;
    fill(A.pool, chunks * chunk_floats);
    fill(A.io.q, 512 * H * D);
    fill(A.io.k, 512 * G * D);
    fill(A.io.v, 512 * G * D);
    fill(A.io.cs, MAX_CTX * D);
    fill(A.io.sn, MAX_CTX * D);
    for (size_t c = 0; c < chunks; c++)
        A.slot[c] = (uint32_t)c;
    static const int64_t Ps[] = {128, 512, 2048, 0}; /* 0: the prefill */
    for (int th = 0; th < 2; th++)
        for (int i = 0; i < 4; i++) {
            double t[2][RUNS], ratio[2][RUNS];
            for (int r = 0; r <= RUNS; r++) /* run 0 warms up */
                for (int v = 0; v < n; v++) {
                    int j = (v + r) % n;
                    double s = attn_test(&A, kts[j], Ps[i], &pars[th]);
                    if (r)
                        t[j][r - 1] = s;
                }
            for (int j = 0; j < n; j++) {
                for (int r = 0; r < RUNS; r++)
                    ratio[j][r] = t[0][r] / t[j][r];
                const char *name = kts[j] ? kts[j]->isa : "portable";
                double m = median(t[j], RUNS);
                if (Ps[i]) {
                    double kv_gb = 2.0 * G * (double)(Ps[i] + 1) * D * 4 / 1e9;
                    printf("attention %-15s decode  P %4d, %d thr: %7.1f us per call (KV %.1f "
                           "GB/s)", name, (int)Ps[i], th + 1, 1e6 * m, kv_gb / m);
                } else {
                    double macs = 2.0 * H * D * 512.0 * 513.0 / 2.0;
                    printf("attention %-15s prefill S  512, %d thr: %7.1f ms per call (%.1f "
                           "GFLOPS)", name, th + 1, 1e3 * m, 2.0 * macs / m / 1e9);
                }
                if (j)
                    printf(", %.2fx %s (paired median)", median(ratio[j], RUNS),
                           kts[0] ? kts[0]->isa : "portable");
                printf("\n");
            }
        }
    free(A.pool);
    free(A.io.q);
    free(A.io.o);
    free(A.io.k);
    free(A.io.v);
    free(A.io.cs);
    free(A.io.sn);
}

/* ---- Decode attention at depth ------------------------------------------ */

/* The caches of a sweep from memory span at least DEEP_POOL bytes (copies
 * of the 24 layers' caches, a sweep over the next copy): a host's last-level
 * cache can hold one copy (a VM of family 6 model 167 reports 480 MiB),
 * and a plan's decode reads its weights between two visits of a layer's
 * cache. */
enum { DEEP = 4096, DEEP_CHUNKS = DEEP / CHUNK + 1 };
#define DEEP_POOL (1ull << 30)

typedef struct {
    uint8_t *pool;    /* copies of LAYERS caches of DEEP_CHUNKS slots, one after the other */
    size_t slot_bytes, set_bytes, pool_bytes; /* set: one copy's */
    int dtype;        /* the caches' dtype: LLMC_RT_F32, F16 or I8 */
    uint32_t copies, next;                    /* copies in the pool; the next sweep's */
    uint32_t own[DEEP_CHUNKS], one[DEEP_CHUNKS]; /* slot tables: a cache's own, all on slot 0 */
    attn_io io;
} deep_bench;

/* One decode call (S 1 at P = DEEP) a layer over every layer's cache of
 * the next copy (slot table own), or over the first copy's with every
 * chunk on slot 0 (one: the compute alone); seconds a call. */
static double deep_sweep(deep_bench *B, const rt_kernels *kt, bool own, const rt_parallel *par)
{
    uint8_t *set = B->pool + (own ? B->next++ % B->copies : 0) * B->set_bytes;
    double t0 = now();
    for (int l = 0; l < LAYERS; l++) {
        rt_kv_cache cache = {set + (size_t)l * DEEP_CHUNKS * B->slot_bytes, own ? B->own : B->one,
                             B->slot_bytes, CHUNK, B->dtype};
        attend(&B->io, kt, &cache, DEEP, 1, par);
    }
    return (now() - t0) / LAYERS;
}

/* Rows of the cache's dtype with finite values: float16 magnitudes in
 * [0.5, 1), int8 K rows with a scale of 1/127 after their values. */
static void fill_rows(uint8_t *pool, size_t bytes, int dtype, uint64_t k_row)
{
    if (dtype == LLMC_RT_F32) {
        fill((float *)(void *)pool, bytes / sizeof(float));
        return;
    }
    uint32_t s = 2463534242u;
    for (size_t i = 0; i + 1 < bytes; i += 2) {
        s ^= s << 13, s ^= s >> 17, s ^= s << 5;
        uint16_t h = (uint16_t)((s & 0x83FFu) | 0x3800u);
        memcpy(pool + i, &h, sizeof h);
    }
    if (dtype != LLMC_RT_I8)
        return;
    /* K planes: each slot's first G * CHUNK rows; the rest are V (float16) */
    size_t slot = (size_t)rt_kv_position_bytes(dtype, G, D) * CHUNK;
    float scale = 1.0f / 127.0f;
    for (size_t base = 0; base + slot <= bytes; base += slot)
        for (size_t r = 0; r < (size_t)G * CHUNK; r++)
            memcpy(pool + base + r * k_row + rt_kv_scale_offset(D), &scale, sizeof scale);
}

/* The call from memory, its compute alone (each cache's chunks all on its
 * first slot, which stays in L1 and L2) and a plain read of as many bytes
 * as the call reads (the whole pool's read time over its calls), taking
 * turns run by run; the medians, us a call. */
static void bench_attention_depth(const rt_kernels *kt, const rt_parallel *pars, int dtype)
{
    deep_bench B;
    B.dtype = dtype;
    B.slot_bytes = (size_t)rt_kv_position_bytes(dtype, G, D) * CHUNK;
    B.set_bytes = (size_t)LAYERS * DEEP_CHUNKS * B.slot_bytes;
    B.copies = (uint32_t)((DEEP_POOL + B.set_bytes - 1) / B.set_bytes);
    B.next = 0;
    B.pool_bytes = B.copies * B.set_bytes;
    B.pool = llmc_alloc_huge(B.pool_bytes);
    float *buf = malloc(sizeof(float) * (size_t)(3 * H * D + 2 * G * D + 2 * (DEEP + 1) * D));
    if (!B.pool || !buf) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    attn_io *io = &B.io;
    io->q = buf, io->o = io->q + H * D, io->k = io->o + H * D, io->v = io->k + G * D;
    io->cs = io->v + G * D, io->sn = io->cs + (DEEP + 1) * D, io->rope_rows = DEEP + 1;
    fill_rows(B.pool, B.pool_bytes, dtype, rt_kv_row_bytes(dtype, 0, D));
    fill(buf, 3 * H * D + 2 * G * D + 2 * (DEEP + 1) * D);
    for (uint32_t c = 0; c < DEEP_CHUNKS; c++)
        B.own[c] = c, B.one[c] = 0;
    double kv_bytes = (double)DEEP * (double)rt_kv_position_bytes(dtype, G, D);
    const char *dname = dtype == LLMC_RT_F32 ? "float32" : dtype == LLMC_RT_F16 ? "float16" : "int8";
    for (int th = 0; th < 2; th++) {
        double t[3][RUNS];
        for (int r = 0; r <= RUNS; r++) /* run 0 warms up */
            for (int v = 0; v < 3; v++) {
                int j = (v + r) % 3;
                double s = j == 0   ? deep_sweep(&B, kt, true, &pars[th])
                           : j == 1 ? deep_sweep(&B, kt, false, &pars[th])
                                    : read_median((const float *)(const void *)B.pool,
                                                  (int64_t)(B.pool_bytes / sizeof(float)),
                                                  &pars[th]) / (LAYERS * B.copies);
                if (r)
                    t[j][r - 1] = s;
            }
        double mem = median(t[0], RUNS), cpu = median(t[1], RUNS), rd = median(t[2], RUNS);
        printf("attention %-15s decode  P %d, 24 layers' %s caches, %d thr: %7.1f us per call "
               "(KV %.1f GB/s); compute alone %.1f us, plain read %.1f us (%.1f GB/s)\n",
               kt ? kt->isa : "portable", DEEP, dname, th + 1, 1e6 * mem, kv_bytes / mem / 1e9,
               1e6 * cpu, 1e6 * rd, kv_bytes / rd / 1e9);
    }
    llmc_free_huge(B.pool, B.pool_bytes);
    free(buf);
}

int main(int argc, char **argv)
{
    bool only_attention = argc > 1 && !strcmp(argv[1], "attention");
    bool only_linear = argc > 1 && !strcmp(argv[1], "linear");
    bool only_depth = argc > 1 && !strcmp(argv[1], "depth");
    llmc_threads *two = llmc_threads_create(2);
    rt_parallel pars[2] = {{NULL, NULL}, {llmc_threads_parallel, two}};
    if (!only_linear) {
        /* the portable loops, then the AVX2 table and the faster one this
         * CPU runs for avx2 plans, if any, in turns */
        const rt_kernels *portable = NULL, *avx2 = rt_kernels_for_isa("avx2", "avx2", NULL);
        const rt_kernels *tables[2] = {avx2, tile_table()};
        int n = avx2 && avx2 != tables[1] ? 2 : 1;
        static const int dtypes[] = {LLMC_RT_F32, LLMC_RT_F16, LLMC_RT_I8};
        if (!only_depth) {
            bench_attention(&portable, 1, pars);
            bench_attention(tables + 2 - n, n, pars);
        }
        for (int i = 2 - n; i < 2; i++)
            for (int d = 0; d < 3; d++)
                bench_attention_depth(tables[i], pars, dtypes[d]);
    }
    if (!only_attention && !only_depth) {
        float *x = malloc(sizeof(float) * 512 * 9728), *y = malloc(sizeof(float) * 512 * 9728);
        fill(x, 512 * 9728);
        bench_linear_layout(tile_table(), pars, x, y);
        bench_linear_layout(NULL, pars, x, y);
        free(x);
        free(y);
    }
    llmc_threads_destroy(two);
    return 0;
}
