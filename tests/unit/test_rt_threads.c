/* Threads: the pthread pool (runtime/platform/llmc_threads.h) runs every
 * task exactly once, call after call; a Linear-heavy hand-built plan and the
 * Attention and MatMul kernels give bitwise the serial outputs with 1, 2, 3
 * and 4 threads, and the session really hands them tasks. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "llmc_threads.h"
#include "rt_testplan.h"
#include "tap.h"

static llmc_rt_error err;

static float frand(void)
{
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = frand();
}

/* ---- the pool ------------------------------------------------------------ */

typedef struct {
    uint32_t *runs;     /* per task: times it ran */
} count_job;

static void count_task(void *ctx, uint32_t i)
{
    count_job *J = ctx;
    __atomic_fetch_add(&J->runs[i], 1u, __ATOMIC_RELAXED);
}

/* Many back-to-back jobs of 2-5 tasks (the workers poll between them and
 * race the caller for the claims), then jobs far enough apart that the
 * workers block on the condition variable and must be woken. */
static void test_pool_stress(void)
{
    static uint32_t runs[5];
    for (uint32_t threads = 1; threads <= 4; threads++) {
        llmc_threads *pool = llmc_threads_create(threads);
        bool ok = pool != NULL;
        for (uint32_t job = 0; job < 100000 && ok; job++) {
            uint32_t n = 2 + job % 4;
            memset(runs, 0, sizeof runs);
            count_job J = {runs};
            llmc_threads_parallel(pool, n, count_task, &J);
            for (uint32_t i = 0; i < 5; i++)
                ok &= runs[i] == (i < n);
        }
        CHECK(ok, "%u threads: 100000 jobs of 2-5 tasks back to back, each task run once",
              threads);
        for (uint32_t job = 0; job < 6 && ok; job++) {
            struct timespec gap = {0, 5000000}; /* 5 ms: longer than the workers poll */
            nanosleep(&gap, NULL);
            memset(runs, 0, sizeof runs);
            count_job J = {runs};
            llmc_threads_parallel(pool, 5, count_task, &J);
            for (uint32_t i = 0; i < 5; i++)
                ok &= runs[i] == 1;
        }
        CHECK(ok, "%u threads: jobs after the workers went to sleep, each task run once",
              threads);
        llmc_threads_destroy(pool);
    }
}

/* The order a pool of 2 runs 1000 tasks in: each thread takes its own
 * half (the caller [0, 500), the worker [500, 1000)) from the front, in
 * ascending order, and whatever it takes of the other half from the back,
 * in descending order, whoever ends up running what. */
#define ORDER_TASKS 1000
static _Thread_local bool is_caller;

typedef struct {
    uint32_t log[2][ORDER_TASKS]; /* [caller, worker]: indices in the order run */
    uint32_t n[2];
    uint32_t runs[ORDER_TASKS];
} order_job;

static void order_task(void *ctx, uint32_t i)
{
    order_job *J = ctx;
    int who = is_caller ? 0 : 1;
    J->log[who][J->n[who]++] = i;
    J->runs[i]++;
    for (volatile int spin = 0; spin < 2000; spin++) /* long enough for both to take part */
        ;
}

/* Whether thread `who`'s indices in half h run ascending (its own half)
 * or descending (the other's). */
static bool half_in_order(const order_job *J, int who, int h)
{
    bool ascending = who == h, ok = true, first = true;
    uint32_t last = 0;
    for (uint32_t k = 0; k < J->n[who]; k++) {
        uint32_t i = J->log[who][k];
        if ((int)(i / (ORDER_TASKS / 2)) != h)
            continue;
        ok &= first || (ascending ? i > last : i < last);
        first = false;
        last = i;
    }
    return ok;
}

static void test_pool_order(void)
{
    static order_job J;
    llmc_threads *pool = llmc_threads_create(2);
    bool ok = pool != NULL, both = false;
    is_caller = true;
    for (int rep = 0; rep < 200 && ok; rep++) {
        memset(&J, 0, sizeof J);
        llmc_threads_parallel(pool, ORDER_TASKS, order_task, &J);
        for (uint32_t i = 0; i < ORDER_TASKS; i++)
            ok &= J.runs[i] == 1;
        for (int who = 0; who < 2; who++)
            for (int h = 0; h < 2; h++)
                ok &= half_in_order(&J, who, h);
        both |= J.n[0] && J.n[1];
    }
    is_caller = false;
    CHECK(ok, "a pool of 2 runs each thread's half front to back and the other's back to "
              "front, 200 times over");
    CHECK(both, "both threads ran tasks in at least one of those calls");
    llmc_threads_destroy(pool);
}

/* More tasks than a call's ranges hold (65535 a thread) run in rounds,
 * through llmc_threads_parallel and llmc_threads_start alike. */
static void test_pool_rounds(void)
{
    enum { MANY = 300000 };
    static uint32_t runs[MANY];
    for (uint32_t threads = 2; threads <= 4; threads++) {
        llmc_threads *pool = llmc_threads_create(threads);
        bool ok = pool != NULL;
        for (int started = 0; started < 2 && ok; started++) {
            memset(runs, 0, sizeof runs);
            count_job J = {runs};
            if (started) {
                llmc_threads_start(pool, MANY, count_task, &J);
                ok &= llmc_threads_finished(pool, 1) == 1;
            } else {
                llmc_threads_parallel(pool, MANY, count_task, &J);
            }
            for (uint32_t i = 0; i < MANY; i++)
                ok &= runs[i] == 1;
        }
        CHECK(ok, "a pool of %u threads runs each of 300000 tasks once, called and started",
              threads);
        llmc_threads_destroy(pool);
    }
}

static void test_pool(void)
{
    static const uint32_t sizes[] = {0, 1, 2, 3, 7, 64, 1000, 20000};
    static uint32_t runs[20000];
    for (uint32_t threads = 1; threads <= 4; threads++) {
        llmc_threads *pool = llmc_threads_create(threads);
        bool ok = pool && llmc_threads_count(pool) == threads;
        for (int rep = 0; rep < 50 && ok; rep++)
            for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
                uint32_t n = sizes[k];
                memset(runs, 0, sizeof runs);
                count_job J = {runs};
                llmc_threads_parallel(pool, n, count_task, &J);
                for (uint32_t i = 0; i < n; i++)
                    ok &= runs[i] == 1;
                for (uint32_t i = n; i < sizeof runs / sizeof *runs; i++)
                    ok &= runs[i] == 0;
            }
        CHECK(ok, "a pool of %u threads runs each of 0..20000 tasks exactly once, 50 times over",
              threads);
        llmc_threads_destroy(pool);
    }
    CHECK(llmc_threads_create(0) == NULL, "a pool of 0 threads is refused");
    test_pool_stress();
    test_pool_order();
    test_pool_rounds();
    memset(runs, 0, sizeof runs);
    count_job J = {runs};
    llmc_threads_parallel(NULL, 5, count_task, &J);
    CHECK(runs[0] == 1 && runs[4] == 1 && runs[5] == 0, "a NULL pool runs the tasks serially");
    llmc_threads_destroy(NULL);
}

/* ---- a Linear-heavy plan --------------------------------------------------- */

/* x [S, 128] -> Linear W1 [384, 128] + b1 -> h1 [S, 256], h2 [S, 128]
 *            -> Linear W2 [128, 256] (h1) + b2 + residual h2 -> z [S, 128]
 *            -> MatMul Wm [128, 300] -> out [S, 300]
 * Every op is above the kernels' one-task threshold even at S = 1. */
#define CTX 8
static float w1[384 * 128], b1[384], w2[128 * 256], b2[128], wm[128 * 300];

static uint8_t *linear_plan(size_t *size)
{
    tp_plan *tp = malloc(sizeof *tp);
    if (!tp)
        return NULL;
    tp_init(tp, CTX);
    int x = tp_tensor(tp, "x", "Float32", "S,128");
    int tw1 = tp_weight(tp, "w1", "Float32", "384,128", w1, sizeof w1);
    int tb1 = tp_weight(tp, "b1", "Float32", "384", b1, sizeof b1);
    int tw2 = tp_weight(tp, "w2", "Float32", "128,256", w2, sizeof w2);
    int tb2 = tp_weight(tp, "b2", "Float32", "128", b2, sizeof b2);
    int twm = tp_weight(tp, "wm", "Float32", "128,300", wm, sizeof wm);
    int h1 = tp_tensor(tp, "h1", "Float32", "S,256");
    int h2 = tp_tensor(tp, "h2", "Float32", "S,128");
    int z = tp_tensor(tp, "z", "Float32", "S,128");
    int out = tp_tensor(tp, "out", "Float32", "S,300");
    tp_op(tp, "code: \"Linear\", name: \"fc1\", kind: 1, inputs: [%d, %d, %d], "
          "outputs: [%d, %d]", x, tw1, tb1, h1, h2);
    tp_op(tp, "code: \"Linear\", name: \"fc2\", kind: 3, inputs: [%d, %d, %d, %d], "
          "outputs: [%d]", h1, tw2, tb2, h2, z);
    tp_op(tp, "code: \"MatMul\", name: \"proj\", inputs: [%d, %d], outputs: [%d]", z, twm, out);
    tp_io(tp, 0, x, "Generic", 0);
    tp_io(tp, 1, z, "Generic", 0);
    tp_io(tp, 1, out, "Generic", 0);
    uint8_t *bytes = tp_finish(tp, "rt_threads", size);
    free(tp);
    return bytes;
}

/* Counts the calls that reach the pool, then hands them on. */
typedef struct {
    llmc_threads *pool;
    uint32_t calls, tasks;
} counting_pool;

static void counting_parallel(void *pool, uint32_t n, llmc_rt_task_fn task, void *ctx)
{
    counting_pool *c = pool;
    c->calls++;
    c->tasks += n;
    llmc_threads_parallel(c->pool, n, task, ctx);
}

/* Runs the plan at (S, P) with `threads` (0 = no hook); z then out into y. */
static bool run_plan(const llmc_rt_plan *plan, void *mem, size_t mem_size, uint32_t threads,
                     uint32_t S, uint32_t P, const float *x, float *y, counting_pool *c)
{
    llmc_rt_session s;
    c->pool = threads ? llmc_threads_create(threads) : NULL;
    c->calls = c->tasks = 0;
    llmc_rt_tensor in = {LLMC_RT_F32, 2, {S, 128}, (void *)x}, z, out;
    bool ok = llmc_rt_session_init(&s, plan, mem, mem_size, &err) == 0;
    if (ok && threads)
        llmc_rt_session_set_parallel(&s, counting_parallel, c);
    ok = ok && llmc_rt_session_run(&s, S, P, &in, &err) == 0 &&
         llmc_rt_session_output(&s, 0, &z, &err) == 0 &&
         llmc_rt_session_output(&s, 1, &out, &err) == 0;
    if (ok) {
        memcpy(y, z.data, sizeof(float) * S * 128);
        memcpy(y + S * 128, out.data, sizeof(float) * S * 300);
    }
    llmc_threads_destroy(c->pool);
    return ok;
}

static void test_linear_plan(void)
{
    fill(w1, 384 * 128);
    fill(b1, 384);
    fill(w2, 128 * 256);
    fill(b2, 128);
    fill(wm, 128 * 300);
    size_t size;
    llmc_rt_plan plan;
    uint8_t *bytes = linear_plan(&size);
    CHECK(bytes && llmc_rt_plan_open(&plan, bytes, size, LLMC_RT_VERIFY_HASHES, &err) == 0,
          "the Linear/MatMul plan opens: %s", err.msg);
    if (!bytes)
        return;
    size_t mem_size = llmc_rt_session_memory(&plan);
    void *mem = malloc(mem_size);
    static const uint32_t shapes[][2] = {{1, 0}, {5, 1}, {8, 0}}; /* (S, P) */
    for (size_t k = 0; k < 3; k++) {
        uint32_t S = shapes[k][0], P = shapes[k][1];
        size_t n = (size_t)S * (128 + 300);
        float x[CTX * 128], *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
        fill(x, (size_t)S * 128);
        counting_pool c;
        bool ok = want && got && run_plan(&plan, mem, mem_size, 0, S, P, x, want, &c);
        CHECK(ok && c.calls == 0, "S=%u: the plan runs serially without a hook: %s", S, err.msg);
        for (uint32_t threads = 1; ok && threads <= 4; threads++) {
            memset(got, 0, n * sizeof *got);
            bool ran = run_plan(&plan, mem, mem_size, threads, S, P, x, got, &c);
            /* fc1 (h1; h2 too from S = 2), fc2 and the MatMul go through the hook */
            CHECK(ran && c.calls == (S == 1 ? 3u : 4u) && c.tasks > c.calls && !memcmp(got, want, n * sizeof *got),
                  "S=%u, %u threads: z and out bitwise the serial ones (%u calls, %u tasks)",
                  S, threads, c.calls, c.tasks);
        }
        free(want);
        free(got);
    }
    free(mem);
    free(bytes);
}

/* ---- Attention and MatMul kernels ------------------------------------------ */

enum { HEADS = 8, KV_HEADS = 2, D = 64, ROT = 32, CHUNK = 16, POS = 64, AS = 4, AP = 60 };

static void test_attention(void)
{
    static float pool[POS / CHUNK * 2 * KV_HEADS * CHUNK * D], q[AS * HEADS * D],
        k[AS * KV_HEADS * D], v[AS * KV_HEADS * D], cs[POS * ROT], sn[POS * ROT],
        want[AS * HEADS * D], got[AS * HEADS * D];
    static const uint32_t slot[POS / CHUNK] = {2, 0, 3, 1};
    fill(pool, sizeof pool / sizeof *pool);
    fill(q, sizeof q / sizeof *q);
    fill(k, sizeof k / sizeof *k);
    fill(v, sizeof v / sizeof *v);
    for (int i = 0; i < POS * ROT; i++) {
        cs[i] = cosf(0.01f * (float)i);
        sn[i] = sinf(0.01f * (float)i);
    }
    rt_kv_cache cache = {(uint8_t *)pool, slot, 2u * KV_HEADS * CHUNK * D * sizeof(float), CHUNK,
                         LLMC_RT_F32};
    rt_attention_attrs a = {HEADS, KV_HEADS, D, ROT, 0.125f, NULL, NULL, 0.0f, 0, 0.0f};
    rt_view vq = {LLMC_RT_F32, 3, {1, AS, HEADS * D}, q}, vk = {LLMC_RT_F32, 3, {1, AS, KV_HEADS * D}, k},
            vv = {LLMC_RT_F32, 3, {1, AS, KV_HEADS * D}, v}, vc = {LLMC_RT_F32, 2, {POS, ROT}, cs},
            vs = {LLMC_RT_F32, 2, {POS, ROT}, sn}, vw = {LLMC_RT_F32, 3, {1, AS, HEADS * D}, want},
            vg = {LLMC_RT_F32, 3, {1, AS, HEADS * D}, got};
    /* appending the same new rows again leaves the cache as it was */
    bool ok = k_attention(&a, &vq, &vk, &vv, &vc, &vs, &cache, AP, &vw, NULL, &err) == 0;
    for (uint32_t threads = 2; ok && threads <= 4; threads++) {
        rt_parallel par = {llmc_threads_parallel, llmc_threads_create(threads)};
        memset(got, 0, sizeof got);
        bool ran = k_attention(&a, &vq, &vk, &vv, &vc, &vs, &cache, AP, &vg, &par, &err) == 0;
        CHECK(ran && !memcmp(got, want, sizeof got),
              "Attention S=%d P=%d, %u threads (a task per head): bitwise the serial output",
              AS, AP, threads);
        llmc_threads_destroy(par.pool);
    }
    CHECK(ok, "serial Attention runs: %s", err.msg);
}

static void test_matmul(void)
{
    /* batch 3 of [20, 70] x [70, 600]: row and column blocks, ragged */
    enum { B = 3, M = 20, K = 70, N = 600 };
    float *a = malloc(sizeof(float) * B * M * K), *b = malloc(sizeof(float) * K * N);
    float *want = malloc(sizeof(float) * B * M * N), *got = malloc(sizeof(float) * B * M * N);
    if (!a || !b || !want || !got)
        return;
    fill(a, B * M * K);
    fill(b, K * N);
    rt_view va = {LLMC_RT_F32, 3, {B, M, K}, a}, vb = {LLMC_RT_F32, 2, {K, N}, b},
            vw = {LLMC_RT_F32, 3, {B, M, N}, want}, vg = {LLMC_RT_F32, 3, {B, M, N}, got};
    bool ok = k_matmul(&va, &vb, &vw, NULL, &err) == 0;
    for (uint32_t threads = 2; ok && threads <= 4; threads++) {
        rt_parallel par = {llmc_threads_parallel, llmc_threads_create(threads)};
        memset(got, 0, sizeof(float) * B * M * N);
        bool ran = k_matmul(&va, &vb, &vg, &par, &err) == 0;
        CHECK(ran && !memcmp(got, want, sizeof(float) * B * M * N),
              "MatMul [%d, %d, %d] x [%d, %d], %u threads: bitwise the serial output", B, M, K,
              K, N, threads);
        llmc_threads_destroy(par.pool);
    }
    CHECK(ok, "serial MatMul runs: %s", err.msg);
    free(a);
    free(b);
    free(want);
    free(got);
}

int main(void)
{
    srand(7);
    test_pool();
    test_linear_plan();
    test_attention();
    test_matmul();
    return TAP_DONE();
}
