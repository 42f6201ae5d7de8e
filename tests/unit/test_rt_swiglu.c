/* SwiGLU: each table's rt_kernels.swiglu against silu(g) * u computed in
 * double precision (a few ulp), NaN and infinities as the portable loop has
 * them, a tail element's bits independent of n; the AVX-512 table's loop
 * bitwise the AVX2 table's where the CPU has both; the Binary op through
 * k_binary_kernels gives the portable k_binary's bits without a table and
 * bitwise the serial result with 1-4 threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_tables.h"
#include "llmc_threads.h"
#include "rt_views.h"
#include "plan_format.h"
#include "tap.h"

#define N_MAX 100003

static float gate[N_MAX], up[N_MAX], y[N_MAX], y2[N_MAX];

static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
}

static double silu_ref(double x)
{
    return x / (1.0 + exp(-x));
}

/* Finite results within 4 ulp (relative 2^-21) of the double reference. */
static bool close_to_ref(const float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double ref = silu_ref(gate[i]) * up[i];
        if (!(fabs(out[i] - ref) <= fabs(ref) * 4.8e-7 + 1e-37))
            return false;
    }
    return true;
}

static void test_accuracy(const rt_kernels *kt)
{
    static const int64_t sizes[] = {1, 7, 8, 9, 31, 4864, N_MAX};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int64_t n = sizes[k];
        for (int64_t i = 0; i < n; i++) {
            gate[i] = i % 5 ? frand(-20.0f, 20.0f) : frand(-90.0f, 90.0f);
            up[i] = frand(-3.0f, 3.0f);
        }
        kt->swiglu(gate, up, y, n);
        CHECK(close_to_ref(y, n), "%s swiglu, n = %lld: within 4 ulp of silu(g) * u",
              kt->target, (long long)n);
    }
    for (int64_t n = 1; n <= 16; n++) {
        kt->swiglu(gate, up, y2, n);
        CHECK(memcmp(y, y2, sizeof(float) * (size_t)n) == 0,
              "%s swiglu: the first %lld elements have the same bits alone", kt->target,
              (long long)n);
    }
}

static void test_special(const rt_kernels *kt)
{
    const float inf = INFINITY;
    float g[6] = {NAN, inf, -inf, -1000.0f, 0.0f, -0.0f}, u[6] = {1, 2, 1, 1, 5, 5};
    float want[6], got[6];
    rt_swiglu_generic(g, u, want, 6);
    kt->swiglu(g, u, got, 6);
    bool ok = true;
    for (int i = 0; i < 6; i++)
        ok &= isnan(want[i]) ? isnan(got[i]) : got[i] == want[i];
    CHECK(ok && isnan(got[0]) && got[1] == inf && isnan(got[2]) && got[3] == 0.0f,
          "%s swiglu: NaN, +inf, -inf, -1000 and zeros as the portable loop has them",
          kt->target);
}

static void test_binary_op(const rt_kernels *kt)
{
    const int64_t rows = 3, cols = 20011; /* 60033 elements: 4 tasks */
    for (int64_t i = 0; i < rows * cols; i++) {
        gate[i] = frand(-10.0f, 10.0f);
        up[i] = frand(-2.0f, 2.0f);
    }
    rt_view a = test_view_f32(gate, rows, cols), b = test_view_f32(up, rows, cols), vy = test_view_f32(y, rows, cols);
    rt_view vy2 = test_view_f32(y2, rows, cols);
    llmc_rt_error err;
    k_binary_loops loops = {llmc_rt_binary_SwiGLU, NULL};
    bool ok = k_binary(LLMC_RT_BINARY_SwiGLU, &loops, &a, &b, &vy, &err) == LLMC_RT_OK &&
              k_binary_kernels(NULL, LLMC_RT_BINARY_SwiGLU, &loops, &a, &b, &vy2, NULL, &err) ==
                  LLMC_RT_OK;
    CHECK(ok && memcmp(y, y2, sizeof(float) * (size_t)(rows * cols)) == 0,
          "SwiGLU without a table: k_binary's bits");
    ok = k_binary_kernels(kt, LLMC_RT_BINARY_SwiGLU, &loops, &a, &b, &vy, NULL, &err) == LLMC_RT_OK;
    CHECK(ok && close_to_ref(y, rows * cols), "SwiGLU [3, 20011] with %s, serial: silu(g) * u",
          kt->target);
    for (uint32_t threads = 1; threads <= 4; threads++) {
        llmc_threads *pool = llmc_threads_create(threads);
        rt_parallel par = {llmc_threads_parallel, pool};
        memset(y2, 0, sizeof y2);
        ok = pool && k_binary_kernels(kt, LLMC_RT_BINARY_SwiGLU, &loops, &a, &b, &vy2, &par, &err) == 0;
        CHECK(ok && memcmp(y, y2, sizeof(float) * (size_t)(rows * cols)) == 0,
              "SwiGLU [3, 20011] with %s on %u threads: bitwise the serial result",
              kt->target, threads);
        llmc_threads_destroy(pool);
    }
}

/* The AVX-512 loop against the AVX2 one, bit for bit: values across the
 * whole exp range (underflow, subnormal results, both signs), the specials,
 * and every length 1..40 (the 16-lane tail). */
static void test_same_bits(const rt_kernels *avx2, const rt_kernels *avx512)
{
    const int64_t n = N_MAX;
    for (int64_t i = 0; i < n; i++) {
        gate[i] = i % 3 ? frand(-120.0f, 120.0f) : frand(-2.0f, 2.0f);
        up[i] = frand(-1e3f, 1e3f);
    }
    const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, -103.97f, -104.0f, -87.5f, 88.7f,
                             1e-40f, -1e-40f};
    memcpy(gate, special, sizeof special);
    avx2->swiglu(gate, up, y, n);
    avx512->swiglu(gate, up, y2, n);
    CHECK(memcmp(y, y2, sizeof(float) * (size_t)n) == 0,
          "%s swiglu: the bits of %s's on %lld values", avx512->isa, avx2->isa, (long long)n);
    bool same = true;
    const uint8_t fill[sizeof(float)] = {0xA5, 0xA5, 0xA5, 0xA5};
    for (int64_t len = 1; len <= 40; len++) {
        memset(y2, 0xA5, sizeof(float) * 48);
        avx512->swiglu(gate + 3, up + 3, y2, len);
        same &= memcmp(y + 3, y2, sizeof(float) * (size_t)len) == 0 &&
                memcmp(y2 + len, fill, sizeof fill) == 0;
    }
    CHECK(same, "%s swiglu: lengths 1-40 give the AVX2 bits and store nothing past n",
          avx512->isa);
}

int main(void)
{
    const rt_kernels *tables[5];
    int n = x86_tables(tables);
    static const char *const arm[] = {"neon-dot", "neon-i8mm"};
    for (size_t t = 0; t < sizeof arm / sizeof *arm; t++)
        if (rt_kernels_for_target(arm[t], NULL))
            tables[n++] = rt_kernels_for_target(arm[t], NULL);
    int tested = 0;
    for (int t = 0; t < n; t++) {
        const rt_kernels *kt = tables[t];
        if (!kt || !kt->swiglu)
            continue;
        tested++;
        test_accuracy(kt);
        test_special(kt);
        test_binary_op(kt);
    }
    const rt_kernels *avx2 = rt_kernels_for_isa("avx2", "avx2", NULL);
    const rt_kernels *best = rt_kernels_for_target("avx2", NULL);
    if (avx2 && best && best != avx2)
        test_same_bits(avx2, best);
    else
        printf("# no AVX-512 table on this build/CPU: its SwiGLU is not compared\n");
    if (!tested)
        printf("# no table with a swiglu loop on this build/CPU\n");
    return TAP_DONE();
}
