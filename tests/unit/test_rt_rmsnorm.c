/* RMSNorm rows: each target's rt_kernels.rmsnorm_row bit for bit the
 * portable row (odd lengths, whole steps of RT_RMS_LANES and not, values
 * over 60 binades so both branches of the compensated sum run, NaN, inf,
 * zeros and subnormals), the portable row within 2 ulp of a double
 * reference, and k_rmsnorm with a table bitwise the same with 1-4 threads
 * as without one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_table.h"
#include "llmc_threads.h"
#include "rt_views.h"
#include "tap.h"

#define N_MAX 100003

static float x[N_MAX], scale[N_MAX], want[N_MAX], got[N_MAX];

static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
}

/* Magnitudes 2^-30 .. 2^30 with random signs: squares far apart, so the
 * compensation takes either branch of k_fsum_add. */
static void fill_wide(int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        x[i] = ldexpf(frand(0.5f, 1.0f), (int)(rand() % 61) - 30) * (rand() % 2 ? 1.0f : -1.0f);
        scale[i] = frand(-2.0f, 2.0f);
    }
}

static void fill_narrow(int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        x[i] = frand(-4.0f, 4.0f);
        scale[i] = frand(0.5f, 1.5f);
    }
}

static bool same_bits(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}

/* Each output within 2 ulp (relative 2.4e-7) of the row computed in double. */
static bool close_to_double(const float *y, int64_t n, float epsilon)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    double inv = 1.0 / sqrt(ss / (double)n + epsilon);
    for (int64_t i = 0; i < n; i++) {
        double ref = x[i] * inv * scale[i];
        if (!(fabs(y[i] - ref) <= fabs(ref) * 2.4e-7 + 1e-37))
            return false;
    }
    return true;
}

static void test_portable_accuracy(void)
{
    static const int64_t sizes[] = {1, 7, 8, 9, 896, 4864};
    bool ok = true;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        fill_narrow(sizes[k]);
        rt_rmsnorm_row_generic(x, scale, got, sizes[k], 1e-6f, (float)sizes[k]);
        ok &= close_to_double(got, sizes[k], 1e-6f);
    }
    CHECK(ok, "portable RMSNorm row within 2 ulp of double for n = 1, 7, 8, 9, 896, 4864");
}

static void test_row_bits(const rt_kernels *kt)
{
    static const int64_t sizes[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 896, 4864, N_MAX};
    for (int wide = 0; wide < 2; wide++)
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            int64_t n = sizes[k];
            if (wide)
                fill_wide(n);
            else
                fill_narrow(n);
            float fd = (float)n;
            rt_rmsnorm_row_generic(x, scale, want, n, 1e-5f, fd);
            memset(got, 0, sizeof(float) * (size_t)n);
            kt->rmsnorm_row(x, scale, got, n, 1e-5f, fd);
            CHECK(same_bits(want, got, n), "%s rmsnorm_row, n = %lld, %s values: the portable "
                  "row's bits", kt->target, (long long)n, wide ? "wide" : "narrow");
        }
}

static void test_special(const rt_kernels *kt)
{
    const float inf = INFINITY, tiny = 1e-40f; /* subnormal */
    static const float rows[4][11] = {
        {0, -0.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, NAN},
        {1, -2, 3, 1e30f, 5, 6, 7, 8, 9, 10, 11},
        {1e-40f, -1e-40f, 3e-39f, 0, 0, 0, 0, 0, 0, 0, 1e-40f},
    };
    bool ok = true;
    for (int r = 0; r < 4; r++) {
        memcpy(x, rows[r], sizeof rows[r]);
        for (int i = 0; i < 11; i++)
            scale[i] = i % 3 ? 1.0f : -0.5f;
        if (r == 2)
            x[3] = inf;
        if (r == 3)
            x[5] = tiny;
        rt_rmsnorm_row_generic(x, scale, want, 11, 1e-6f, 11.0f);
        kt->rmsnorm_row(x, scale, got, 11, 1e-6f, 11.0f);
        ok &= same_bits(want, got, 11);
    }
    CHECK(ok, "%s rmsnorm_row: zeros, NaN, inf, 1e30 and subnormals give the portable bits",
          kt->target);
}

/* 37 rows of 896: 2 tasks of 36 and 1 rows. */
static void test_op(const rt_kernels *kt)
{
    const int64_t rows = 37, cols = 896;
    for (int64_t i = 0; i < rows * cols; i++)
        x[i] = frand(-3.0f, 3.0f);
    for (int64_t i = 0; i < cols; i++)
        scale[i] = frand(0.5f, 1.5f);
    rt_view vx = test_view_f32(x, rows, cols), vs = test_view_f32(scale, 1, cols), vw = test_view_f32(want, rows, cols);
    rt_view vg = test_view_f32(got, rows, cols);
    vs.rank = 1;
    vs.dims[0] = cols;
    llmc_rt_error err;
    bool ok = k_rmsnorm(NULL, &vx, &vs, NULL, 1e-6f, &vw, NULL, &err) == LLMC_RT_OK;
    CHECK(ok, "RMSNorm [37, 896] without a table runs");
    for (uint32_t threads = 1; threads <= 4; threads++) {
        llmc_threads *pool = llmc_threads_create(threads);
        rt_parallel par = {llmc_threads_parallel, pool};
        memset(got, 0, sizeof(float) * (size_t)(rows * cols));
        ok = pool && k_rmsnorm(kt, &vx, &vs, NULL, 1e-6f, &vg, &par, &err) == LLMC_RT_OK;
        CHECK(ok && same_bits(want, got, rows * cols),
              "RMSNorm [37, 896] with %s on %u threads: the portable op's bits", kt->target,
              threads);
        llmc_threads_destroy(pool);
    }
}

int main(void)
{
    static const char *const targets[] = {"avx2", "neon-dot", "neon-i8mm"};
    llmc_rt_error err;
    int tested = 0;
    test_portable_accuracy();
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        const rt_kernels *kt = rt_kernels_for_target(targets[t], &err);
        if (!kt || !kt->rmsnorm_row)
            continue;
        tested++;
        test_row_bits(kt);
        test_special(kt);
        test_op(kt);
    }
    if (!tested)
        printf("# no table with an rmsnorm_row loop on this build/CPU\n");
    return TAP_DONE();
}
