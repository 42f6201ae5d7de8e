/* Quantized Linear: the compile-time packers (compiler/codegen/weight_pack.c), the
 * portable kernels and drivers (runtime/kernels/q_*.c) and every SIMD table
 * this CPU runs, against references written here from the formats of
 * runtime/quant_format.h:
 *   - packed weights dequantize (read back by this file's own reader) to
 *     within half a quantization step of the floats they came from;
 *   - QuantizeRows writes exactly the bytes of a scalar quantizer written
 *     here, padding included;
 *   - QLinear matches an fp64 product of the dequantized operands, on odd
 *     shapes, groups of 32/64/128/per-channel, bits 4 and 8, bias, residual
 *     and a column offset;
 *   - a SIMD table gives the portable bytes and (exactly, where the outputs
 *     are integers) the portable products;
 *   - the GEMV and GEMM paths and 1, 2, 3 threads give the same bits;
 *   - bad shapes fail with messages that say what is wrong. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/weight_pack.h"
#include "qweight_pack.h"
#include "kernels/kernel_table.h"
#if defined(__x86_64__)
#include "kernels/x86/x86_simd.h"
#endif
#include "llmc_threads.h"
#include "parallel_orders.h"
#include "plan_format.h"
#include "tap.h"

static llmc_rt_error err;

static float frand(void)
{
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static rt_view view(int dtype, void *data, int rank, const int64_t *dims)
{
    rt_view v = {dtype, rank, {0}, data};
    for (int i = 0; i < rank; i++)
        v.dims[i] = dims[i];
    return v;
}

/* ---- readers written from quant_format.h ---------------------------------- */

static int64_t coef_bytes(const rt_qweight_shape *s)
{
    return s->coef == RT_QCOEF_FLOAT ? 4 : 2;
}

static const uint8_t *block_of(const uint8_t *w, const rt_qweight_shape *s, int64_t row,
                               int64_t c)
{
    int64_t blocks_per_tile = s->kp / s->group;
    int64_t per_row = s->coef == RT_QCOEF_FLOAT || s->bits == 4 ? 2 : 1;
    int64_t block_bytes = s->hp * s->group * s->bits / 8 + coef_bytes(s) * s->hp * per_row;
    return w + ((row / s->hp) * blocks_per_tile + c / s->group) * block_bytes;
}

/* q of weight (row, c). */
static int weight_q(const uint8_t *w, const rt_qweight_shape *s, int64_t row, int64_t c)
{
    const uint8_t *b = block_of(w, s, row, c);
    int64_t j = c % s->group, t = j / s->lp, r = row % s->hp;
    if (s->bits == 8)
        return (int8_t)b[t * s->hp * s->lp + r * s->lp + j % s->lp];
    uint8_t byte = b[(t / 2) * s->hp * s->lp + r * s->lp + j % s->lp];
    return t % 2 ? byte >> 4 : byte & 15;
}

/* Coefficient i of the block holding (row, c): binary16 or float32. */
static double weight_coef(const uint8_t *w, const rt_qweight_shape *s, int64_t row, int64_t c,
                          int64_t i)
{
    const uint8_t *p = block_of(w, s, row, c) + s->hp * s->group * s->bits / 8 +
                       coef_bytes(s) * i;
    float f;
    if (s->coef == RT_QCOEF_HALF)
        return rt_half_at(p);
    memcpy(&f, p, 4);
    return f;
}

static double weight_scale(const uint8_t *w, const rt_qweight_shape *s, int64_t row, int64_t c)
{
    return weight_coef(w, s, row, c, row % s->hp);
}

/* The min (Float16 bits 4; 0 for bits 8) or the zero point (Float32). */
static double weight_min(const uint8_t *w, const rt_qweight_shape *s, int64_t row, int64_t c)
{
    if (s->bits == 8 && s->coef == RT_QCOEF_HALF)
        return 0;
    return weight_coef(w, s, row, c, s->hp + row % s->hp);
}

static double weight_value(const uint8_t *w, const rt_qweight_shape *s, int64_t row, int64_t c)
{
    if (s->coef == RT_QCOEF_FLOAT)
        return (weight_q(w, s, row, c) - weight_min(w, s, row, c)) * weight_scale(w, s, row, c);
    return weight_scale(w, s, row, c) * weight_q(w, s, row, c) + weight_min(w, s, row, c);
}

static int act_q(const uint8_t *xq, const rt_qact_shape *s, int64_t e, int64_t c)
{
    int64_t tile = (e / s->ep) * (s->kp / s->lp) + c / s->lp;
    return (int8_t)xq[(tile * s->ep + e % s->ep) * s->lp + c % s->lp];
}

/* The scale of row e's group holding column c: [mp][kp / group] floats. */
static float act_scale(const uint8_t *xq, const rt_qact_shape *s, int64_t e, int64_t c)
{
    float v;
    memcpy(&v, xq + ((s->mp * s->kp + 63) / 64 * 64) + 4 * (e * (s->kp / s->group) + c / s->group),
           4);
    return v;
}

/* Float32-coefficient weights (a pre-quantized file's): random q over the
 * whole range (bits 8: -128 included), float32 scales with all their
 * mantissa bits, integer zero points; padding rows' coefficients 0 and
 * padding q 0.  extreme: every q -128 (bits 8) or 15, zero points 0. */
static uint8_t *float_coef_weights(const rt_qweight_shape *s, bool extreme)
{
    uint64_t bytes = rt_qweight_bytes(s), block = rt_qweight_block_bytes(s);
    uint64_t data = (uint64_t)s->hp * (uint64_t)s->group * (uint64_t)s->bits / 8;
    uint8_t *w = calloc(bytes + 1, 1);
    for (uint64_t b = 0, i = 0; b < bytes; b += block, i++) {
        int64_t ht = (int64_t)(i / (uint64_t)(s->kp / s->group));
        int64_t g = (int64_t)(i % (uint64_t)(s->kp / s->group));
        for (int64_t r = 0; r < s->hp; r++) {
            bool real = ht * s->hp + r < s->n;
            float scale = real ? 0.003f * (1.0f + (float)rand() / (float)RAND_MAX) : 0.0f;
            float zero = !real || extreme ? 0.0f
                         : s->bits == 4 ? (float)(rand() % 16) : (float)(rand() % 256 - 128);
            memcpy(w + b + data + 4 * r, &scale, 4);
            memcpy(w + b + data + 4 * (s->hp + r), &zero, 4);
            for (int64_t j = 0; real && j < s->group && g * s->group + j < s->k; j++) {
                int q = extreme ? (s->bits == 8 ? -128 : 15)
                        : s->bits == 4 ? rand() % 16 : rand() % 256 - 128;
                int64_t t = j / s->lp, at = r * s->lp + j % s->lp;
                if (s->bits == 8)
                    w[b + t * s->hp * s->lp + at] = (uint8_t)(int8_t)q;
                else
                    w[b + (t / 2) * s->hp * s->lp + at] |= (uint8_t)(q << (t % 2 ? 4 : 0));
            }
        }
    }
    return w;
}

/* ---- packing ---------------------------------------------------------------- */


static float *random_matrix(int64_t rows, int64_t cols, float spread)
{
    float *m = malloc((size_t)(rows * cols + 1) * sizeof *m);
    for (int64_t i = 0; i < rows * cols; i++)
        m[i] = frand() * spread + (i % 7 == 0 ? 0.3f * spread : 0.0f);
    return m;
}

/* group 0 = per channel: k rounded up to 32 */
static int64_t group_for(int64_t group, int64_t k)
{
    return group ? group : rt_qround_up(k ? k : 1, 32);
}

/* Every value within half a step of its float, padding q = 0 and padding
 * rows' scale and min 0; bits 4's grid covers [min, max] of each group. */
static bool round_trip_ok(const float *W, const uint8_t *w, const rt_qweight_shape *s)
{
    for (int64_t row = 0; row < s->np; row++)
        for (int64_t c = 0; c < s->kp; c++) {
            double scale = weight_scale(w, s, row, c), min = weight_min(w, s, row, c);
            if (row >= s->n || c >= s->k) {
                if (weight_q(w, s, row, c) != 0 || (row >= s->n && (scale != 0 || min != 0)))
                    return false;
                continue;
            }
            double want = W[row * s->k + c], got = weight_value(w, s, row, c);
            /* bits 8 clamps at 127 when amax/127 rounded down: 2^-11 of amax */
            double slack = s->bits == 8 ? 127 * scale / 2048 : 1e-7 * fabs(want);
            if (fabs(got - want) > scale / 2 + slack + 1e-12)
                return false;
            if (s->bits == 4 && (min > want || min + 15 * scale < want))
                return false;
        }
    return true;
}

static void test_pack_round_trip(void)
{
    static const int64_t groups[] = {32, 64, 128, 0}, ks[] = {100, 64, 31, 300};
    for (int bits = 4; bits <= 8; bits += 4)
        for (int gi = 0; gi < 4; gi++)
            for (int ki = 0; ki < 4; ki++) {
                int64_t n = 13 + ki, k = ks[ki], group = group_for(groups[gi], k);
                rt_qweight_shape s;
                rt_qweight_shape_init(&s, bits, 8, 4, n, k, group);
                float *W = random_matrix(n, k, ki == 3 ? 40.0f : 0.05f);
                /* special groups: a constant row, a zero row, all positive */
                for (int64_t c = 0; c < k; c++) {
                    W[1 * k + c] = 0.7f;
                    W[2 * k + c] = 0.0f;
                    W[3 * k + c] = fabsf(W[3 * k + c]) + 1.0f;
                }
                uint8_t *w = pack_weights(W, &s);
                CHECK(round_trip_ok(W, w, &s), "pack bits %d group %d, W [%d, %d]: values within "
                      "half a step, padding zero", bits, (int)group, (int)n, (int)k);
                free(W);
                free(w);
            }
    /* other tile sizes of the format */
    rt_qweight_shape s;
    rt_qweight_shape_init(&s, 4, 12, 8, 29, 77, 32);
    float *W = random_matrix(29, 77, 1.0f);
    uint8_t *w = pack_weights(W, &s);
    CHECK(round_trip_ok(W, w, &s), "pack bits 4, hp 12, lp 8 round-trips");
    free(W);
    free(w);
}

static void test_fpack(void)
{
    rt_ftile_shape s;
    rt_ftile_shape_init(&s, 8, 11, 5);
    float W[11 * 5], out[16 * 5];
    for (int i = 0; i < 55; i++)
        W[i] = (float)i;
    bool ok = true;
    for (int64_t ht = 0; ht < 2; ht++) {
        cg_fpack_row_tile(W + ht * 8 * 5, 5, ht ? 3 : 8, &s, out + ht * 8 * 5);
        for (int64_t c = 0; c < 5; c++)
            for (int64_t r = 0; r < 8; r++) {
                int64_t row = ht * 8 + r;
                float want = row < 11 ? W[row * 5 + c] : 0.0f;
                ok &= out[(ht * 5 + c) * 8 + r] == want;
            }
    }
    CHECK(ok, "fp32 tiles: (r, c) of tile ht at (ht * k + c) * hp + r, padding rows 0");
}

/* ---- QuantizeRows ------------------------------------------------------------ */

/* The spec: per (row, group), sx = amax / 127, q = round-half-even(x *
 * (127 / amax)) in [-127, 127] (0 when amax is 0), group sums, padding
 * zero. */
static uint8_t *quantize_reference(const float *x, const rt_qact_shape *s)
{
    uint8_t *ref = calloc(rt_qact_bytes(s) + 1, 1);
    int64_t groups = s->kp / s->group;
    for (int64_t e = 0; e < s->m; e++)
        for (int64_t g = 0; g < groups; g++) {
            const float *row = x + e * s->k;
            int64_t c1 = (g + 1) * s->group < s->k ? (g + 1) * s->group : s->k;
            float amax = 0.0f;
            for (int64_t c = g * s->group; c < c1; c++)
                amax = fmaxf(amax, fabsf(row[c]));
            float sx = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
            if (isinf(inv))
                sx = inv = 0.0f;
            memcpy(ref + rt_qact_scales_offset(s) + 4 * (e * groups + g), &sx, 4);
            int32_t sum = 0;
            for (int64_t c = g * s->group; c < c1; c++) {
                float q = nearbyintf(row[c] * inv);
                q = fminf(fmaxf(q, -127.0f), 127.0f);
                int64_t tile = (e / s->ep) * (s->kp / s->lp) + c / s->lp;
                ref[(tile * s->ep + e % s->ep) * s->lp + c % s->lp] = (uint8_t)(int8_t)q;
                sum += (int32_t)q;
            }
            memcpy(ref + rt_qact_sums_offset(s) + 4 * (e * groups + g), &sum, 4);
        }
    return ref;
}

/* The activation tile buffer: 64-byte aligned, garbage-filled. */
static uint8_t *act_buffer(const rt_qact_shape *s)
{
    size_t bytes = (size_t)rt_qact_bytes(s);
    uint8_t *p = aligned_alloc(64, (bytes + 64) / 64 * 64);
    memset(p, 0xab, (bytes + 64) / 64 * 64);
    return p;
}

static uint8_t *quantize(const rt_kernels *kt, const float *x, const rt_qact_shape *s,
                         const rt_parallel *par)
{
    uint8_t *xq = act_buffer(s);
    rt_view xv = view(LLMC_RT_F32, (void *)x, 2, (int64_t[]){s->m, s->k});
    rt_view qv = view(LLMC_RT_I8, xq, 2, (int64_t[]){s->m, s->k});
    if (k_quantize_rows(kt, &xv, s, 0.0f, &qv, par, &err) != LLMC_RT_OK) {
        printf("# %s\n", err.msg);
        free(xq);
        return NULL;
    }
    return xq;
}

/* Rows with ties, a zero row, one large value, negative zero. */
static float *activation_rows(int64_t m, int64_t k)
{
    float *x = random_matrix(m, k, 3.0f);
    if (m > 2) {
        for (int64_t c = 0; c < k; c++)
            x[1 * k + c] = 0.0f;
        for (int64_t c = 0; c < k; c++) /* amax 127: inv 1, .5 ties round to even */
            x[2 * k + c] = c == 0 ? 127.0f : (float)(c % 9) - 4.5f;
        x[0] = -0.0f;
        x[3 % m * k + k / 2] = 1e4f;
    }
    return x;
}

static void test_quantize_rows(const rt_kernels *kt)
{
    static const int64_t ms[] = {1, 3, 4, 5, 17}, ks[] = {100, 37, 64, 257};
    static const int64_t groups[] = {32, 64, 128, 0};
    bool ok = true;
    int cases = 0;
    for (int mi = 0; mi < 5; mi++)
        for (int ki = 0; ki < 4; ki++)
            for (int gi = 0; gi < 4; gi++) {
                int64_t m = ms[mi], k = ks[ki], group = group_for(groups[gi], k);
                rt_qact_shape s;
                rt_qact_shape_init(&s, kt->q_ep, kt->q_lp, m, k, group);
                float *x = activation_rows(m, k);
                uint8_t *ref = quantize_reference(x, &s), *got = quantize(kt, x, &s, NULL);
                bool same = got && !memcmp(ref, got, (size_t)rt_qact_bytes(&s));
                if (!same) {
                    size_t at = 0;
                    while (got && at < rt_qact_bytes(&s) && ref[at] == got[at])
                        at++;
                    printf("# m %d k %d group %d differs at byte %d of %d\n", (int)m, (int)k,
                           (int)group, (int)at, (int)rt_qact_bytes(&s));
                }
                ok &= same;
                cases++;
                free(x);
                free(ref);
                free(got);
            }
    CHECK(ok, "%s QuantizeRows: %d shapes (m 1..15, k 37..257, 4 groups) byte for byte the "
          "scalar reference, padding zero", kt->isa, cases);

    /* a row too small for 127 / amax to exist quantizes to zeros */
    rt_qact_shape s;
    rt_qact_shape_init(&s, kt->q_ep, kt->q_lp, 1, 40, 32);
    float tiny[40];
    for (int c = 0; c < 40; c++)
        tiny[c] = c % 3 ? 1e-38f : -2e-38f;
    uint8_t *q = quantize(kt, tiny, &s, NULL);
    bool zeros = q && act_scale(q, &s, 0, 0) == 0.0f && act_scale(q, &s, 0, 39) == 0.0f;
    for (int c = 0; q && c < 40; c++)
        zeros &= act_q(q, &s, 0, c) == 0;
    CHECK(zeros, "%s: a row with amax 2e-38 (127 / amax overflows) quantizes to zeros",
          kt->isa);
    free(q);
}

/* One outlier in one group of a row changes that group's scale and q
 * only: every other group's bytes (q, scale, sum) stay as they were. */
static void test_group_outlier(const rt_kernels *kt)
{
    const int64_t m = kt->q_ep + 1, k = 200, group = 32;
    rt_qact_shape s;
    rt_qact_shape_init(&s, kt->q_ep, kt->q_lp, m, k, group);
    float *x = random_matrix(m, k, 1.0f);
    uint8_t *before = quantize(kt, x, &s, NULL);
    const int64_t row = m - 1, at = 2 * group + 5; /* group 2 */
    x[row * k + at] = 1e4f;
    uint8_t *after = quantize(kt, x, &s, NULL);
    bool others = before && after, changed = false;
    for (int64_t e = 0; others && e < m; e++)
        for (int64_t c = 0; c < k; c++) {
            bool same = act_q(before, &s, e, c) == act_q(after, &s, e, c) &&
                        act_scale(before, &s, e, c) == act_scale(after, &s, e, c);
            if (e == row && c / group == 2)
                changed |= !same;
            else
                others &= same;
        }
    uint8_t *ref = quantize_reference(x, &s);
    CHECK(others && changed && !memcmp(ref, after, (size_t)rt_qact_bytes(&s)),
          "%s QuantizeRows: an outlier in one group changes that group's scale and q only, "
          "the reference's bytes", kt->isa);
    free(x);
    free(before);
    free(after);
    free(ref);
}

static bool fails_with(llmc_rt_status st, const char *text);

/* QuantizeRows with a static per-tensor scale (calibrated activations). */
static uint8_t *quantize_static(const rt_kernels *kt, const float *x, const rt_qact_shape *s,
                                float scale, const rt_parallel *par, llmc_rt_status *st)
{
    uint8_t *xq = act_buffer(s);
    rt_view xv = view(LLMC_RT_F32, (void *)x, 2, (int64_t[]){s->m, s->k});
    rt_view qv = view(LLMC_RT_I8, xq, 2, (int64_t[]){s->m, s->k});
    *st = k_quantize_rows(kt, &xv, s, scale, &qv, par, &err);
    return xq;
}

/* Every value q = round half to even of x / scale, clamped to +-127; every
 * row's scale the static one; group sums of the q.  Hand-worked values,
 * then the thread counts against the serial bytes, then bad scales. */
static void test_quantize_static(const rt_kernels *kt)
{
    static const float x[12] = {1.0f, 0.75f, 0.25f, 100.0f, -100.0f, 63.5f,
                                -0.75f, 1.25f, -63.25f, 0.0f, 3.0f, -64.0f};
    static const int want[12] = {2, 2, 0, 127, -127, 127, -2, 2, -126, 0, 6, -127};
    float rows[3 * 12];
    for (int e = 0; e < 3; e++)
        for (int c = 0; c < 12; c++)
            rows[e * 12 + c] = e == 1 ? 0.0f : x[c]; /* row 1: zeros */
    rt_qact_shape s;
    rt_qact_shape_init(&s, kt->q_ep, kt->q_lp, 3, 12, group_for(0, 12));
    llmc_rt_status st;
    uint8_t *q = quantize_static(kt, rows, &s, 0.5f, NULL, &st);
    bool ok = st == LLMC_RT_OK;
    int32_t sum0 = 0, sum1 = 0;
    for (int c = 0; ok && c < 12; c++) {
        ok &= act_q(q, &s, 0, c) == want[c] && act_q(q, &s, 2, c) == want[c] &&
              act_q(q, &s, 1, c) == 0;
        sum0 += act_q(q, &s, 0, c);
        sum1 += act_q(q, &s, 1, c);
    }
    for (int e = 0; ok && e < 3; e++)
        for (int64_t c = 0; c < s.kp; c += s.group)
            ok &= act_scale(q, &s, e, c) == 0.5f;
    int32_t got0, got1;
    memcpy(&got0, q + rt_qact_sums_offset(&s), 4);
    memcpy(&got1, q + rt_qact_sums_offset(&s) + 4 * (s.kp / s.group), 4);
    CHECK(ok && got0 == sum0 && got1 == sum1 && sum0 == -116,
          "%s static scale 0.5: ties to even, beyond 63.5 clamped to +-127, every (row, "
          "group)'s scale 0.5 (a zero row too), group sums", kt->isa);
    free(q);

    int64_t m = 37, k = 300;
    float *big = random_matrix(m, k, 4.0f);
    rt_qact_shape_init(&s, kt->q_ep, kt->q_lp, m, k, group_for(64, k));
    uint8_t *serial = quantize_static(kt, big, &s, 0.02f, NULL, &st);
    bool same = st == LLMC_RT_OK;
    for (uint32_t threads = 1; threads <= 3; threads++) {
        rt_parallel fake = {fake_parallel, &threads};
        uint8_t *par = quantize_static(kt, big, &s, 0.02f, &fake, &st);
        same &= st == LLMC_RT_OK && !memcmp(serial, par, (size_t)rt_qact_bytes(&s));
        free(par);
    }
    CHECK(same, "%s static scale: 37 x 300 rows (many clamped) byte for byte on 1-3 fake "
          "threads", kt->isa);
    if (kt != &rt_kernels_generic) {
        uint8_t *portable = quantize_static(&rt_kernels_generic, big, &s, 0.02f, NULL, &st);
        CHECK(st == LLMC_RT_OK && !memcmp(serial, portable, (size_t)rt_qact_bytes(&s)),
              "%s static scale: the portable kernel's bytes", kt->isa);
        free(portable);
    }
    free(serial);
    free(big);
}

/* ---- ShadowLinear ---------------------------------------------------------- */

/* x [m, k] with injected outliers: channels 3 and k - 5 of every row, and
 * one lone value, far beyond 127 * scale (a synthetic form of the outlier
 * channels paper 003 Fig. 10 counts); `spread`: two more per row in
 * columns that differ from row to row (more than the kernel lists). */
static float *outlier_rows(int64_t m, int64_t k, float scale, bool spread)
{
    float *x = random_matrix(m, k, 60.0f * scale);
    for (int64_t e = 0; e < m; e++) {
        x[e * k + 3] = (e % 2 ? -1 : 1) * (300.0f + 17.0f * (float)e) * scale;
        x[e * k + k - 5] = 1000.0f * scale;
        if (spread) {
            x[e * k + (7 * e + 11) % k] = -700.0f * scale;
            x[e * k + (13 * e + 5) % k] = 900.0f * scale;
        }
    }
    x[(m - 1) * k + k / 2] = -5000.0f * scale;
    return x;
}

/* A hot table [2, n + 1] of columns 3 and k - 5 (outlier columns of
 * outlier_rows), W's values times `factor`. */
static float *hot_table(const uint8_t *w, const rt_qweight_shape *ws, float factor)
{
    int64_t cols[2] = {3, ws->k - 5}, width = ws->n + 1;
    float *hot = malloc(sizeof *hot * (size_t)(2 * width));
    for (int i = 0; i < 2; i++) {
        hot[i * width] = (float)cols[i];
        for (int64_t j = 0; j < ws->n; j++)
            hot[i * width + 1 + j] = factor * (float)weight_value(w, ws, j, cols[i]);
    }
    return hot;
}

/* ShadowLinear with hot channels' copies of two outlier columns (the rest
 * from W): the bytes of W alone (the same values); with a wrong copy
 * (doubled) other bytes, so the copy is what it reads; a table of another
 * width refused. */
static void test_shadow_hot(const rt_kernels *kt, const rt_view *xv, const uint8_t *w,
                            const rt_qweight_shape *ws, float scale, const rt_view *ys,
                            const float *z, int64_t split)
{
    int64_t m = xv->dims[0], n = ws->n;
    float *hot = hot_table(w, ws, 1.0f), *bad = hot_table(w, ws, 2.0f);
    float *t = malloc(sizeof *t * (size_t)(m * n));
    rt_view ts[2] = {view(LLMC_RT_F32, t, 2, (int64_t[]){m, split}),
                     view(LLMC_RT_F32, t + m * split, 2, (int64_t[]){m, n - split})};
    rt_view hv = view(LLMC_RT_F32, hot, 2, (int64_t[]){2, n + 1});
    rt_view bv = view(LLMC_RT_F32, bad, 2, (int64_t[]){2, n + 1});
    rt_view narrow = view(LLMC_RT_F32, hot, 2, (int64_t[]){2, n});
    bool same = !k_shadow_linear(xv, w, ws, scale, &hv, ys, ts, 2, NULL, &err) &&
                !memcmp(t, z, sizeof *t * (size_t)(m * n));
    bool differs = !k_shadow_linear(xv, w, ws, scale, &bv, ys, ts, 2, NULL, &err) &&
                   memcmp(t, z, sizeof *t * (size_t)(m * n));
    CHECK(same && differs && fails_with(k_shadow_linear(xv, w, ws, scale, &narrow, ys, ts, 2, NULL,
                                                         &err), "hot table"),
          "%s ShadowLinear with hot channels' copies: W's bytes; a wrong copy is read; "
          "a table of another width refused", kt->isa);
    free(hot);
    free(bad);
    free(t);
}

/* The int8 Linear of static-scale x, then ShadowLinear over two outputs
 * (columns split 11 | n - 11), against fp64: sum over c of xhat_c W[n, c]
 * with xhat = x on the outliers and scale * q elsewhere, W the dequantized
 * tiles.  Without the shadow the same reference is far off (the test
 * cannot pass by the Linear alone); in place (z = y) gives the same bytes.
 * `spread`: outliers in more columns than the kernel lists up front. */
static void test_shadow_linear(const rt_kernels *kt, bool spread)
{
    const int64_t m = 40, n = 40, k = 192, group = 64, split = 11; /* 40 > SHADOW_BATCH */
    const float scale = 0.01f;
    rt_qweight_shape ws;
    rt_qact_shape xs;
    rt_qweight_shape_init(&ws, 8, kt->q_hp, kt->q_lp, n, k, group);
    rt_qact_shape_init(&xs, kt->q_ep, kt->q_lp, m, k, group);
    float *x = outlier_rows(m, k, scale, spread), *W = random_matrix(n, k, 0.1f);
    uint8_t *w = pack_weights(W, &ws);
    llmc_rt_status st;
    uint8_t *xq = quantize_static(kt, x, &xs, scale, NULL, &st);
    float *y = calloc((size_t)(m * n), sizeof *y), *z = calloc((size_t)(m * n), sizeof *z);
    float *y0 = y, *y1 = y + m * split, *z0 = z, *z1 = z + m * split;
    rt_view xqv = view(LLMC_RT_I8, xq, 2, (int64_t[]){m, k});
    rt_view ys[2] = {view(LLMC_RT_F32, y0, 2, (int64_t[]){m, split}),
                     view(LLMC_RT_F32, y1, 2, (int64_t[]){m, n - split})};
    rt_view zs[2] = {view(LLMC_RT_F32, z0, 2, (int64_t[]){m, split}),
                     view(LLMC_RT_F32, z1, 2, (int64_t[]){m, n - split})};
    rt_view xv = view(LLMC_RT_F32, x, 2, (int64_t[]){m, k});
    if (!st)
        st = k_qlinear(kt, &xqv, &xs, w, &ws, NULL, NULL, 0, ys, 2, 4, 2048, NULL, &err);
    if (!st)
        st = k_shadow_linear(&xv, w, &ws, scale, NULL, ys, zs, 2, NULL, &err);
    double worst = 0, worst_linear = 0;
    int outliers = 0;
    for (int64_t e = 0; !st && e < m; e++)
        for (int64_t j = 0; j < n; j++) {
            double want = 0, mag = 0;
            for (int64_t c = 0; c < k; c++) {
                double q = act_q(xq, &xs, e, c), v = (double)x[e * k + c] / scale;
                double xhat = fabs(v) > 127 ? x[e * k + c] : scale * q;
                outliers += j == 0 && fabs(v) > 127;
                want += xhat * weight_value(w, &ws, j, c);
                mag += fabs(xhat * weight_value(w, &ws, j, c));
            }
            float got = j < split ? z0[e * split + j] : z1[e * (n - split) + j - split];
            float lin = j < split ? y0[e * split + j] : y1[e * (n - split) + j - split];
            worst = fmax(worst, fabs(got - want) / mag);
            worst_linear = fmax(worst_linear, fabs(lin - want) / mag);
        }
    CHECK(!st && outliers >= (spread ? 3 : 2) * (int)m && worst < 1e-5 && worst_linear > 1e-2,
          "%s ShadowLinear: %d injected outliers%s exact (worst %.2g of sum |terms|; the int8 "
          "Linear alone %.2g), two outputs %s", kt->isa, outliers,
          spread ? " in over 64 columns" : "", worst, worst_linear, st ? err.msg : "");
    if (!st)
        st = k_qlinear(kt, &xqv, &xs, w, &ws, NULL, NULL, 0, ys, 2, 4, 2048, NULL, &err);
    rt_view same[2] = {ys[0], ys[1]};
    if (!st)
        st = k_shadow_linear(&xv, w, &ws, scale, NULL, ys, same, 2, NULL, &err);
    CHECK(!st && !memcmp(y, z, sizeof *y * (size_t)(m * n)),
          "%s ShadowLinear in place (z = y): the same bytes", kt->isa);
    bool same_split = !k_qlinear(kt, &xqv, &xs, w, &ws, NULL, NULL, 0, ys, 2, 4, 2048, NULL, &err);
    float *t = malloc(sizeof *t * (size_t)(m * n));
    rt_view ts[2] = {view(LLMC_RT_F32, t, 2, (int64_t[]){m, split}),
                     view(LLMC_RT_F32, t + m * split, 2, (int64_t[]){m, n - split})};
    for (uint32_t threads = 1; threads <= 4; threads++) { /* 4: a real pool of 2 */
        llmc_threads *pool = threads == 4 ? llmc_threads_create(2) : NULL;
        rt_parallel fake = {fake_parallel, &threads}, real = {llmc_threads_parallel, pool};
        memset(t, 0, sizeof *t * (size_t)(m * n));
        same_split &= !k_shadow_linear(&xv, w, &ws, scale, NULL, ys, ts, 2, pool ? &real : &fake, &err) &&
                      !memcmp(t, z, sizeof *t * (size_t)(m * n));
        llmc_threads_destroy(pool);
    }
    free(t);
    CHECK(same_split, "%s ShadowLinear on 1-3 fake threads and a pool of 2: the serial bytes",
          kt->isa);
    test_shadow_hot(kt, &xv, w, &ws, scale, ys, z, split);
    rt_view wrong = view(LLMC_RT_F32, z1, 2, (int64_t[]){m, n - split - 1});
    rt_view short_zs[2] = {zs[0], wrong};
    CHECK(fails_with(k_shadow_linear(&xv, w, &ws, scale, NULL, ys, short_zs, 2, NULL, &err), "dims") &&
              fails_with(k_shadow_linear(&xv, w, &ws, 0.0f, NULL, ys, zs, 2, NULL, &err), "scale"),
          "%s ShadowLinear: an output of other dims, a zero scale refused", kt->isa);
    free(x);
    free(W);
    free(w);
    free(xq);
    free(y);
    free(z);
}

/* ---- QLinear against fp64 -------------------------------------------------- */

typedef struct {
    int bits;
    int64_t m, n, k, group, col0, n_y;
    bool bias, residual;
    bool float_coef;           /* Float32 scales and zero points (else binary16) */
} qcase;

typedef struct {
    qcase c;
    rt_qweight_shape ws;
    rt_qact_shape xs;
    float *x, *W, *b, *res;
    uint8_t *w, *xq;
    double *want, *mag;        /* [m, n_y]: the fp64 product and the sum of |terms| */
} qfixture;

static void fixture_reference(qfixture *f)
{
    const qcase *c = &f->c;
    for (int64_t e = 0; e < c->m; e++)
        for (int64_t j = 0; j < c->n_y; j++) {
            int64_t row = c->col0 + j;
            double z = 0, mag = 0;
            for (int64_t l = 0; l < c->k; l++) {
                double sx = act_scale(f->xq, &f->xs, e, l);
                double t = sx * act_q(f->xq, &f->xs, e, l) * weight_value(f->w, &f->ws, row, l);
                z += t;
                mag += fabs(t);
            }
            if (f->b) {
                z += f->b[row];
                mag += fabs(f->b[row]);
            }
            if (f->res) {
                z += f->res[e * c->n_y + j];
                mag += fabs(f->res[e * c->n_y + j]);
            }
            f->want[e * c->n_y + j] = z;
            f->mag[e * c->n_y + j] = mag;
        }
}

/* Weights packed, activations quantized by kt, the fp64 reference. */
static bool fixture_init(qfixture *f, const qcase *c, const rt_kernels *kt)
{
    memset(f, 0, sizeof *f);
    f->c = *c;
    rt_qcoef coef = c->float_coef ? RT_QCOEF_FLOAT : RT_QCOEF_HALF;
    if (!rt_qweight_shape_init_coef(&f->ws, c->bits, kt->q_hp, kt->q_lp, c->n, c->k, c->group,
                                    coef) ||
        !rt_qact_shape_init(&f->xs, kt->q_ep, kt->q_lp, c->m, c->k, c->group))
        return false;
    f->x = activation_rows(c->m, c->k);
    f->W = random_matrix(c->n, c->k, 0.1f);
    f->b = c->bias ? random_matrix(1, c->n, 1.0f) : NULL;
    f->res = c->residual ? random_matrix(c->m, c->n_y, 1.0f) : NULL;
    f->w = c->float_coef ? float_coef_weights(&f->ws, false) : pack_weights(f->W, &f->ws);
    f->xq = quantize(kt, f->x, &f->xs, NULL);
    f->want = malloc((size_t)(c->m * c->n_y + 1) * sizeof(double));
    f->mag = malloc((size_t)(c->m * c->n_y + 1) * sizeof(double));
    if (!f->xq)
        return false;
    fixture_reference(f);
    return true;
}

static void fixture_free(qfixture *f)
{
    free(f->x);
    free(f->W);
    free(f->b);
    free(f->res);
    free(f->w);
    free(f->xq);
    free(f->want);
    free(f->mag);
}

static llmc_rt_status run_qlinear(const rt_kernels *kt, const qfixture *f, int64_t gemm_min_rows,
                                  const rt_parallel *par, float *y)
{
    const qcase *c = &f->c;
    rt_view xv = view(LLMC_RT_I8, f->xq, 2, (int64_t[]){c->m, c->k});
    rt_view yv = view(LLMC_RT_F32, y, 2, (int64_t[]){c->m, c->n_y});
    rt_view bv = view(LLMC_RT_F32, f->b, 1, (int64_t[]){c->n});
    rt_view rv = view(LLMC_RT_F32, f->res, 2, (int64_t[]){c->m, c->n_y});
    return k_qlinear(kt, &xv, &f->xs, f->w, &f->ws, f->b ? &bv : NULL, f->res ? &rv : NULL,
                     c->col0, &yv, 1, gemm_min_rows, 2048, par, &err);
}

static bool close_to(const float *y, const double *want, const double *mag, int64_t count,
                     double tol)
{
    for (int64_t i = 0; i < count; i++)
        if (!(fabs(y[i] - want[i]) <= tol * mag[i] + 1e-30)) {
            printf("#   [%d] got %.9g want %.9g (|terms| %.3g)\n", (int)i, y[i], want[i], mag[i]);
            return false;
        }
    return true;
}

static int n_cases(void)
{
    return 5 * 4 * 2 * 2;
}

/* Case i: m in {1, 3, 4, 5, 15}, groups 32/64/128/per channel, bits 4/8,
 * binary16 or float32 coefficients; n = 37 or 45, k = 100 or 200 (never
 * multiples of the group), col0 3 or 11, bias and residual on alternate
 * cases. */
static qcase case_at(int i)
{
    static const int64_t ms[] = {1, 3, 4, 5, 15}, groups[] = {32, 64, 128, 0};
    qcase c;
    c.m = ms[i % 5];
    c.bits = (i / 20) % 2 ? 8 : 4;
    c.float_coef = i >= 40;
    c.k = i % 2 ? 200 : 100;
    c.group = group_for(groups[(i / 5) % 4], c.k);
    c.n = i % 3 ? 37 : 45;
    c.col0 = i % 4 ? 3 : 11;
    c.n_y = c.n - c.col0 - (i % 2 ? 5 : 0);
    c.bias = i % 2 == 0;
    c.residual = i % 3 != 1;
    return c;
}

static void print_case(const rt_kernels *kt, int i, const qcase *c)
{
    printf("# %s case %d: bits %d coef %s m %d n %d k %d group %d col0 %d\n", kt->isa, i,
           c->bits, c->float_coef ? "float32" : "float16", (int)c->m, (int)c->n, (int)c->k,
           (int)c->group, (int)c->col0);
}

static void test_qlinear_reference(const rt_kernels *kt)
{
    bool ok = true;
    for (int i = 0; i < n_cases(); i++) {
        qcase c = case_at(i);
        qfixture f;
        bool good = fixture_init(&f, &c, kt);
        float *y = malloc((size_t)(c.m * c.n_y + 1) * sizeof *y);
        for (int path = 0; good && path < 2; path++) {
            good &= run_qlinear(kt, &f, path ? 1000 : 0, NULL, y) == LLMC_RT_OK &&
                    close_to(y, f.want, f.mag, c.m * c.n_y, 1e-5);
        }
        if (!good)
            print_case(kt, i, &c);
        ok &= good;
        free(y);
        fixture_free(&f);
    }
    CHECK(ok, "%s QLinear: %d odd shapes (bits 4/8, float16/float32 coefficients, groups "
          "32/64/128/per channel, m 1..15, col0 3/11, bias, residual) within 1e-5 of fp64, GEMV "
          "and GEMM paths", kt->isa, n_cases());
}

/* ---- tables against each other --------------------------------------------- */

/* The SIMD table's QuantizeRows bytes and QLinear outputs against the
 * portable table's on the same packed operands. */
static void test_table_vs_generic(const rt_kernels *kt)
{
    bool bytes_ok = true, close_ok = true;
    for (int i = 0; i < n_cases(); i++) {
        qcase c = case_at(i);
        qfixture f;
        bool good = fixture_init(&f, &c, &rt_kernels_generic);
        uint8_t *xq = good ? quantize(kt, f.x, &f.xs, NULL) : NULL;
        bytes_ok &= xq && !memcmp(xq, f.xq, (size_t)rt_qact_bytes(&f.xs));
        float *y = malloc((size_t)(c.m * c.n_y + 1) * sizeof *y);
        float *yg = malloc((size_t)(c.m * c.n_y + 1) * sizeof *yg);
        double *ygd = malloc((size_t)(c.m * c.n_y + 1) * sizeof *ygd);
        good &= run_qlinear(kt, &f, 2, NULL, y) == LLMC_RT_OK &&
                run_qlinear(&rt_kernels_generic, &f, 2, NULL, yg) == LLMC_RT_OK;
        for (int64_t j = 0; good && j < c.m * c.n_y; j++)
            ygd[j] = yg[j];
        close_ok &= good && close_to(y, ygd, f.mag, c.m * c.n_y, 1e-5);
        free(xq);
        free(y);
        free(yg);
        free(ygd);
        fixture_free(&f);
    }
    CHECK(bytes_ok, "%s QuantizeRows: the portable bytes on %d shapes", kt->isa, n_cases());
    CHECK(close_ok, "%s QLinear: within 1e-5 of the portable table on %d shapes", kt->isa,
          n_cases());
}

/* Weights packed by hand with scale 1 and min 0 or 1: every product is an
 * integer below 2^24, so both tables must give it exactly.  extreme: all
 * |q| at the format's limits (15 / -127 weights, +-127 activations), the
 * int16 headroom the kernels rely on. */
static void fill_exact_weights(uint8_t *w, const rt_qweight_shape *s, bool extreme, int min_one)
{
    uint64_t block = rt_qweight_block_bytes(s), data = (uint64_t)s->hp * s->group * s->bits / 8;
    for (uint64_t b = 0; b < rt_qweight_bytes(s); b += block) {
        for (uint64_t i = 0; i < data; i++)
            w[b + i] = extreme ? (s->bits == 4 ? 0xff : 0x81) : (uint8_t)rand();
        if (s->bits == 8)
            for (uint64_t i = 0; i < data; i++)
                w[b + i] = w[b + i] == 0x80 ? 0x81 : w[b + i]; /* -128 is not a q */
        for (int h = 0; h < s->hp * (s->bits == 4 ? 2 : 1); h++) {
            uint16_t half = h < s->hp ? 0x3c00 : (min_one ? 0x3c00 : 0);
            w[b + data + 2 * h] = (uint8_t)half;
            w[b + data + 2 * h + 1] = (uint8_t)(half >> 8);
        }
    }
}

/* Float32 coefficients of scale 1 (zero points as they are). */
static void unit_float_scales(uint8_t *w, const rt_qweight_shape *s)
{
    uint64_t block = rt_qweight_block_bytes(s), data = rt_qweight_data_bytes(s);
    for (uint64_t b = 0; b < rt_qweight_bytes(s); b += block)
        for (int r = 0; r < s->hp; r++)
            memcpy(w + b + data + 4 * r, &(float){1.0f}, 4);
}

/* Activations whose every (row, group) has amax 127: sx = 1, q = x. */
static float *integer_rows(int64_t m, int64_t k, int64_t group, bool extreme)
{
    float *x = malloc((size_t)(m * k + 1) * sizeof *x);
    for (int64_t i = 0; i < m * k; i++)
        x[i] = extreme ? ((i / 4) % 2 ? -127.0f : 127.0f) : nearbyintf(126.0f * frand());
    for (int64_t e = 0; e < m; e++)
        for (int64_t c = 0; c < k; c += group)
            x[e * k + c] = 127.0f;
    return x;
}

static bool qtile_exact(const rt_kernels *kt, int bits, rt_qcoef coef, int64_t m, int64_t k,
                        int64_t group, bool extreme)
{
    rt_qweight_shape ws = {0};
    rt_qact_shape xs;
    rt_qweight_shape_init_coef(&ws, bits, kt->q_hp, kt->q_lp, 16, k, group, coef);
    rt_qact_shape_init(&xs, kt->q_ep, kt->q_lp, m, k, group);
    uint8_t *w;
    if (coef == RT_QCOEF_FLOAT) {
        w = float_coef_weights(&ws, extreme);
        unit_float_scales(w, &ws);
    } else {
        w = malloc(rt_qweight_bytes(&ws));
        fill_exact_weights(w, &ws, extreme, bits == 4);
    }
    float *x = integer_rows(m, k, group, extreme);
    uint8_t *xq = quantize(&rt_kernels_generic, x, &xs, NULL);
    rt_qtile_args a = {xq, xs, w, ws, 2048};
    bool ok = xq != NULL;
    for (int64_t et = 0; ok && et < xs.mp / xs.ep; et++)
        for (int64_t ht = 0; ht < ws.np / ws.hp; ht++) {
            int rows = m - et * xs.ep < xs.ep ? (int)(m - et * xs.ep) : xs.ep;
            float got[RT_QTILE_MAX_OUT], want[RT_QTILE_MAX_OUT];
            kt->qtile(&a, et, rows, ht, got);
            rt_kernels_generic.qtile(&a, et, rows, ht, want);
            ok &= !memcmp(got, want, (size_t)(rows * ws.hp) * sizeof *got);
            for (int i = 0; i < rows * ws.hp; i++)
                ok &= want[i] == floorf(want[i]);
        }
    free(w);
    free(x);
    free(xq);
    return ok;
}

static void test_qtile_exact(const rt_kernels *kt)
{
    static const int64_t groups[] = {16, 48, 32, 128, 0};
    bool ok = true;
    for (int bits = 4; bits <= 8; bits += 4)
        for (int coef = RT_QCOEF_HALF; coef <= RT_QCOEF_FLOAT; coef += 2)
            for (int gi = 0; gi < 5; gi++)
                for (int extreme = 0; extreme < 2; extreme++) {
                    int64_t k = 300, group = group_for(groups[gi], k);
                    for (int64_t m = 1; m <= kt->q_ep + 1; m += kt->q_ep > 2 ? kt->q_ep / 2 : 1)
                        ok &= qtile_exact(kt, bits, (rt_qcoef)coef, m, k, group, extreme);
                }
    CHECK(ok, "%s qtile: integer products (activation scales 1; float16 scale 1 and min 0/1, "
          "or float32 scale 1 and any zero point) equal the portable ones exactly, rows "
          "1..ep + 1, groups 16..per channel, extreme |q| (-128 weights) included", kt->isa);
}

/* ---- threads ------------------------------------------------------------------ */

static void test_threads_coef(const rt_kernels *kt, bool float_coef)
{
    qcase c = {4, 37, 203, 896, 32, 5, 190, true, true, float_coef};
    qfixture f;
    bool ok = fixture_init(&f, &c, kt);
    float *serial = malloc((size_t)(c.m * c.n_y) * sizeof(float));
    float *y = malloc((size_t)(c.m * c.n_y) * sizeof(float));
    ok &= run_qlinear(kt, &f, 1000, NULL, serial) == LLMC_RT_OK;
    for (uint32_t threads = 2; ok && threads <= 3; threads++) {
        rt_parallel fake = {fake_parallel, &threads};
        llmc_threads *pool = llmc_threads_create(threads);
        rt_parallel real = {llmc_threads_parallel, pool};
        for (int64_t gemm_min = 0; gemm_min <= 1000; gemm_min += 1000) {
            ok &= run_qlinear(kt, &f, gemm_min, &fake, y) == LLMC_RT_OK &&
                  !memcmp(y, serial, (size_t)(c.m * c.n_y) * sizeof *y);
            ok &= run_qlinear(kt, &f, gemm_min, &real, y) == LLMC_RT_OK &&
                  !memcmp(y, serial, (size_t)(c.m * c.n_y) * sizeof *y);
        }
        uint8_t *xq = quantize(kt, f.x, &f.xs, &fake);
        ok &= xq && !memcmp(xq, f.xq, (size_t)rt_qact_bytes(&f.xs));
        free(xq);
        llmc_threads_destroy(pool);
    }
    CHECK(ok, "%s: QLinear (both paths, float%d coefficients) and QuantizeRows bitwise the "
          "serial result on a fake and a real 2- and 3-thread parallel-for", kt->isa,
          float_coef ? 32 : 16);
    free(serial);
    free(y);
    fixture_free(&f);
}

static void test_threads(const rt_kernels *kt)
{
    test_threads_coef(kt, false);
    test_threads_coef(kt, true);
}

/* ---- a Linear's outputs in one job ------------------------------------------ */

/* Outputs of the given widths (consecutive columns from 0) in one k_qlinear
 * call: the bits of one output of all the columns, on every parallel-for,
 * both paths.  Widths that are not multiples of hp put one W row tile in
 * two outputs. */
static bool outputs_match_one(const rt_kernels *kt, int64_t m, const int64_t *widths,
                              uint32_t n_out)
{
    int64_t n = 0;
    for (uint32_t j = 0; j < n_out; j++)
        n += widths[j];
    qcase c = {4, m, n, 203, 32, 0, n, true, false, false};
    qfixture f;
    bool ok = fixture_init(&f, &c, kt);
    float *whole = malloc((size_t)(m * n) * sizeof(float));
    float *parts = malloc((size_t)(m * n) * sizeof(float));
    rt_view xv = view(LLMC_RT_I8, f.xq, 2, (int64_t[]){m, c.k});
    rt_view bv = view(LLMC_RT_F32, f.b, 1, (int64_t[]){n});
    rt_view ys[8];
    for (uint32_t j = 0, at = 0; j < n_out; at += (uint32_t)(m * widths[j]), j++)
        ys[j] = view(LLMC_RT_F32, parts + at, 2, (int64_t[]){m, widths[j]});
    ok &= run_qlinear(kt, &f, 1000, NULL, whole) == LLMC_RT_OK;
    for (int i = 0; ok && i < PARALLELS; i++) {
        rt_parallel par = parallel_number(i);
        for (int64_t gemm_min = 0; ok && gemm_min <= 1000; gemm_min += 1000) {
            memset(parts, 0, (size_t)(m * n) * sizeof(float));
            ok &= k_qlinear(kt, &xv, &f.xs, f.w, &f.ws, &bv, NULL, 0, ys, n_out, gemm_min, 2048, &par,
                            &err) == LLMC_RT_OK;
            const float *part = parts;
            for (uint32_t j = 0, col = 0; ok && j < n_out; col += (uint32_t)widths[j], j++)
                for (int64_t e = 0; e < m; e++, part += widths[j])
                    ok &= !memcmp(part, whole + e * n + col, (size_t)widths[j] * sizeof(float));
        }
        parallel_done(&par);
    }
    free(whole);
    free(parts);
    fixture_free(&f);
    return ok;
}

static void test_outputs(const rt_kernels *kt)
{
    static const int64_t qkv[] = {13, 3, 21}, more_than_a_job[] = {8, 8, 8, 8, 5};
    for (int64_t m = 1; m <= 5; m += 4) {
        CHECK(outputs_match_one(kt, m, qkv, 3), "%s: QLinear of %d rows into outputs of 13, 3 "
              "and 21 columns in one job: the bits of one output", kt->isa, (int)m);
        CHECK(outputs_match_one(kt, m, more_than_a_job, 5), "%s: QLinear of %d rows into 5 "
              "outputs (two jobs): the bits of one output", kt->isa, (int)m);
    }
}

/* ---- the fp32 prefill path (q_dequant.c) ------------------------------------ */

static llmc_rt_status run_dequant(const rt_kernels *kt, const qfixture *f, const rt_parallel *par,
                                  float *y)
{
    const qcase *c = &f->c;
    rt_view xv = view(LLMC_RT_I8, f->xq, 2, (int64_t[]){c->m, c->k});
    rt_view yv = view(LLMC_RT_F32, y, 2, (int64_t[]){c->m, c->n_y});
    rt_view bv = view(LLMC_RT_F32, f->b, 1, (int64_t[]){c->n});
    rt_view rv = view(LLMC_RT_F32, f->res, 2, (int64_t[]){c->m, c->n_y});
    return k_qlinear_dequant(kt, &xv, &f->xs, f->w, &f->ws, f->b ? &bv : NULL,
                             f->res ? &rv : NULL, c->col0, &yv, par, &err);
}

/* One case of test_gemv_pair: the table against per_tile, serial and on
 * the pool `real`. */
static bool gemv_pair_case(const rt_kernels *kt, const rt_kernels *per_tile, qcase c,
                           const rt_parallel *real)
{
    qfixture f;
    bool ok = fixture_init(&f, &c, kt);
    float *want = malloc((size_t)c.n_y * sizeof(float));
    float *got = malloc((size_t)c.n_y * sizeof(float));
    ok &= run_qlinear(per_tile, &f, 2, NULL, want) == LLMC_RT_OK &&
          run_qlinear(kt, &f, 2, NULL, got) == LLMC_RT_OK &&
          !memcmp(got, want, (size_t)c.n_y * sizeof *got);
    ok &= run_qlinear(kt, &f, 2, real, got) == LLMC_RT_OK &&
          !memcmp(got, want, (size_t)c.n_y * sizeof *got);
    free(want);
    free(got);
    fixture_free(&f);
    return ok;
}

/* The decode QLinear (m = 1) through the table's qlinear_gemv_pair: the
 * bits of qtile per tile (the table without it), every case_at shape (bits
 * 4 and 8, odd n, col0, groups), and for bits 4 groups of 16 and 48 as
 * well (2 and 6 nibble pairs: a group shorter than one chunk of 4 pairs,
 * and one with 2 left over), serial and on a real pool. */
static void test_gemv_pair(const rt_kernels *kt)
{
    rt_kernels per_tile = *kt;
    per_tile.qlinear_gemv_pair = NULL;
    llmc_threads *pool = llmc_threads_create(2);
    rt_parallel real = {llmc_threads_parallel, pool};
    bool ok = pool != NULL;
    int shapes = 0;
    for (int i = 0; ok && i < n_cases(); i++) {
        qcase c = case_at(i);
        c.m = 1;
        ok &= gemv_pair_case(kt, &per_tile, c, &real);
        shapes += c.n_y > 8;
        for (int64_t group = 16; c.bits == 4 && group <= 48; group += 32) {
            c.group = group;
            ok &= gemv_pair_case(kt, &per_tile, c, &real);
            shapes += c.n_y > 8;
        }
    }
    llmc_threads_destroy(pool);
    CHECK(ok && shapes > 0, "%s qlinear_gemv_pair: the decode QLinear (bits 4 and 8) bitwise "
          "qtile per tile on %d shapes (groups 16..per channel, col0, odd n), serial and 2 "
          "threads", kt->isa, shapes);
}

/* A pair GEMV's stream position of byte `at` of a task's weights (row
 * tiles of `tile` bytes, called in pairs): which tile of the pair, and
 * where along that stream (its tiles of every pair, in order). */
static void stream_of(uint64_t at, uint64_t tile, uint64_t *which, uint64_t *pos)
{
    *which = at / tile % 2;
    *pos = at / (2 * tile) * tile + at % tile;
}

/* rt_pair_prefetch over `pairs` pairs of tiles of `groups` blocks: every
 * block's two targets are exactly `ahead` bytes further along the stream
 * of the tile it reads (none past its tile into the other one). */
static bool pair_prefetch_walk(uint64_t block, int64_t groups, uint64_t ahead, int pairs)
{
    uint64_t tile = (uint64_t)groups * block;
    for (int p = 0; p < pairs; p++) {
        rt_pair_prefetch pf = rt_pair_prefetch_start(ahead, tile);
        for (int64_t g = 0; g < groups; g++) {
            uint64_t skip = rt_pair_prefetch_next(&pf, block);
            for (uint64_t t = 0; t < 2; t++) {
                uint64_t at = (2 * (uint64_t)p + t) * tile + (uint64_t)g * block;
                uint64_t which, pos, to_which, to_pos;
                stream_of(at, tile, &which, &pos);
                stream_of(at + skip + ahead, tile, &to_which, &to_pos);
                if (to_which != which || to_pos != pos + ahead)
                    return false;
            }
        }
    }
    return true;
}

/* The two-tile GEMV's prefetch targets on the decode shapes' tiles (w4
 * g64 and w8 g32 blocks of K 896 and 4864) and odd ones, `ahead` from
 * none to beyond two tiles. */
static void test_pair_prefetch(void)
{
    static const uint64_t blocks[] = {288, 272, 96};
    static const int64_t groups[] = {14, 76, 1, 3};
    static const uint64_t aheads[] = {0, 64, 1024, 2048, 4032, 8192, 20000};
    int bad = 0, cases = 0;
    for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++)
        for (size_t g = 0; g < sizeof groups / sizeof *groups; g++)
            for (size_t a = 0; a < sizeof aheads / sizeof *aheads; a++, cases++)
                bad += !pair_prefetch_walk(blocks[b], groups[g], aheads[a], 5);
    CHECK(bad == 0, "rt_pair_prefetch: each tile's targets `ahead` bytes along its own "
          "stream, never in the pair's other tile (%d of %d cases wrong)", bad, cases);
}

/* Within 1e-5 of the sum of |terms| of both the portable int8 path on the
 * same operands and fp64: every case_at shape, plus one of several row
 * passes, reduction panels and tasks. */
static void test_dequant_vs_int8(const rt_kernels *kt)
{
    bool ok = true;
    for (int i = 0; i <= n_cases(); i++) {
        qcase c = i < n_cases() ? case_at(i) : (qcase){4, 53, 203, 301, 64, 9, 190, true, true, i % 2};
        qfixture f;
        bool good = fixture_init(&f, &c, kt);
        size_t count = (size_t)(c.m * c.n_y + 1);
        float *y = malloc(count * sizeof *y), *yi = malloc(count * sizeof *yi);
        double *yid = malloc(count * sizeof *yid);
        good = good && run_dequant(kt, &f, NULL, y) == LLMC_RT_OK &&
               run_qlinear(&rt_kernels_generic, &f, 2, NULL, yi) == LLMC_RT_OK;
        for (int64_t j = 0; good && j < c.m * c.n_y; j++)
            yid[j] = yi[j];
        good = good && close_to(y, yid, f.mag, c.m * c.n_y, 1e-5) &&
               close_to(y, f.want, f.mag, c.m * c.n_y, 1e-5);
        if (!good)
            print_case(kt, i, &c);
        ok &= good;
        free(y);
        free(yi);
        free(yid);
        fixture_free(&f);
    }
    CHECK(ok, "%s QLinear on fp32 tiles (f_hp %d, f_ep %d): %d shapes (bits 4/8, m 1..53) "
          "within 1e-5 of the portable int8 path and of fp64", kt->isa, kt->f_hp, kt->f_ep,
          n_cases() + 1);
}

static void test_dequant_threads(const rt_kernels *kt, bool float_coef)
{
    qcase c = {8, 53, 203, 301, 32, 5, 190, true, true, float_coef};
    qfixture f;
    bool ok = fixture_init(&f, &c, kt);
    size_t bytes = (size_t)(c.m * c.n_y) * sizeof(float);
    float *serial = malloc(bytes), *y = malloc(bytes);
    ok = ok && run_dequant(kt, &f, NULL, serial) == LLMC_RT_OK;
    for (uint32_t threads = 1; ok && threads <= 3; threads++) {
        rt_parallel fake = {fake_parallel, &threads};
        llmc_threads *pool = llmc_threads_create(threads);
        rt_parallel real = {llmc_threads_parallel, pool};
        ok &= run_dequant(kt, &f, &fake, y) == LLMC_RT_OK && !memcmp(y, serial, bytes);
        ok &= run_dequant(kt, &f, &real, y) == LLMC_RT_OK && !memcmp(y, serial, bytes);
        llmc_threads_destroy(pool);
    }
    CHECK(ok, "%s QLinear on fp32 tiles (float%d coefficients): bitwise the serial result on "
          "fake and real 1-, 2- and 3-thread parallel-fors", kt->isa, float_coef ? 32 : 16);
    free(serial);
    free(y);
    fixture_free(&f);
}

/* Float32 coefficients: every dequantized value (float)(q - zero) * scale,
 * ONNX DequantizeLinear's bits. */
static bool float_dequant_exact(const uint8_t *block, const rt_qweight_shape *ws, int64_t i0,
                                int64_t i1, const float *got, int64_t stride)
{
    bool ok = true;
    for (int64_t i = i0; i < i1; i++)
        for (int r = 0; r < ws->hp; r++) {
            float scale = (float)weight_coef(block, ws, r, i, r);
            int zero = (int)weight_coef(block, ws, r, i, ws->hp + r);
            float want = (float)(weight_q(block, ws, r, i) - zero) * scale;
            ok &= !memcmp(&got[(i - i0) * stride + r], &want, sizeof want);
        }
    return ok;
}

/* A table's dequant_block against the portable loop, bit for bit: random
 * bytes (every q, fp16 scales and mins of both signs; or float32 scales and
 * zero points, bits 8 q -128 included), bits 4 and 8, groups 16..128,
 * every step range [i0, i1) that starts on a tile (the only ones
 * q_dequant.c asks for when KC and the group are multiples of lp) and some
 * that do not, into a panel wider than the block (stride). */
static bool dequant_block_matches(const rt_kernels *kt, int bits, rt_qcoef coef, int64_t group)
{
    rt_qweight_shape ws = {0};
    rt_qweight_shape_init_coef(&ws, bits, kt->q_hp, kt->q_lp, kt->q_hp, group, group, coef);
    uint64_t bytes = rt_qweight_block_bytes(&ws), data = (uint64_t)ws.hp * group * bits / 8;
    uint8_t *block = malloc(bytes);
    for (uint64_t i = 0; i < bytes; i++)
        block[i] = (uint8_t)rand();
    if (coef == RT_QCOEF_FLOAT) {
        free(block);
        block = float_coef_weights(&ws, false);
    }
    for (uint64_t i = data + 1; coef == RT_QCOEF_HALF && i < bytes; i += 2)
        block[i] = (uint8_t)((block[i] & 0x83) | 0x30); /* |half| in [2^-3, 2^4): finite */
    const int64_t stride = ws.hp + 3;
    float *got = malloc(sizeof(float) * (size_t)(group * stride));
    float *want = malloc(sizeof(float) * (size_t)(group * stride));
    bool ok = true;
    for (int64_t i0 = 0; i0 < group; i0++)
        for (int64_t i1 = i0 + 1; i1 <= group; i1 += (i0 % ws.lp ? 7 : 1)) {
            memset(got, 0, sizeof(float) * (size_t)(group * stride));
            memset(want, 0, sizeof(float) * (size_t)(group * stride));
            kt->dequant_block(block, &ws, i0, i1, got, stride);
            rt_dequant_block_generic(block, &ws, i0, i1, want, stride);
            ok &= !memcmp(got, want, sizeof(float) * (size_t)(group * stride));
            if (coef == RT_QCOEF_FLOAT)
                ok &= float_dequant_exact(block, &ws, i0, i1, want, stride);
        }
    free(block);
    free(got);
    free(want);
    return ok;
}

static void test_dequant_block(const rt_kernels *kt)
{
    static const int64_t groups[] = {16, 32, 48, 128};
    bool ok = true;
    for (int bits = 4; bits <= 8; bits += 4)
        for (int g = 0; g < 4; g++)
            for (int coef = RT_QCOEF_HALF; coef <= RT_QCOEF_FLOAT; coef += 2)
                ok &= dequant_block_matches(kt, bits, (rt_qcoef)coef, groups[g]);
    CHECK(ok, "%s dequant_block: the portable loop's floats bit for bit (bits 4/8, float16 "
          "and float32 coefficients, groups 16..128, every step range); float32 ones are "
          "(float)(q - zero) * scale exactly", kt->isa);
}

/* The fp32 prefill path on every table with fp32 tiles, and on the
 * portable kernels given fp32 tiles of 16 x 6 and 8 x 4. */
static void test_dequant(void)
{
    static const int tiles[][2] = {{16, 6}, {8, 4}};
    for (int i = 0; i < 2; i++) {
        rt_kernels t = rt_kernels_generic;
        t.f_hp = tiles[i][0];
        t.f_ep = tiles[i][1];
        t.target = "generic-ftiles";
        test_dequant_vs_int8(&t);
        test_dequant_threads(&t, false);
        test_dequant_threads(&t, true);
    }
    rt_kernels portable = rt_kernels_generic;
    portable.dequant_block = rt_dequant_block_generic;
    test_dequant_block(&portable);
    const rt_kernels *avx2 = rt_kernels_for_target("avx2", NULL);
    if (avx2) {
        test_dequant_block(avx2);
        test_dequant_vs_int8(avx2);
        test_dequant_threads(avx2, false);
        test_dequant_threads(avx2, true);
    }
    rt_qweight_shape ws;
    rt_qweight_shape_init(&ws, 8, 8, 4, 16, 64, 32);
    CHECK(!k_qlinear_dequant_runs(&rt_kernels_generic, &ws),
          "the generic table (f_hp 0) has no fp32 prefill path");
}

/* ---- errors ----------------------------------------------------------------- */

static bool fails_with(llmc_rt_status st, const char *text)
{
    bool ok = st == LLMC_RT_E_EXEC && strstr(err.msg, text);
    if (!ok)
        printf("#   status %d: %s\n", (int)st, err.msg);
    return ok;
}

static void test_errors(void)
{
    const rt_kernels *kt = &rt_kernels_generic;
    qcase c = {4, 5, 20, 70, 32, 0, 20, true, true, false};
    qfixture f;
    fixture_init(&f, &c, kt);
    float y[5 * 20];
    rt_view xv = view(LLMC_RT_I8, f.xq, 2, (int64_t[]){5, 70});
    rt_view yv = view(LLMC_RT_F32, y, 2, (int64_t[]){5, 20});
    rt_view bad_y = view(LLMC_RT_F32, y, 2, (int64_t[]){4, 20});
    rt_view bias = view(LLMC_RT_F32, f.b, 1, (int64_t[]){19});
    rt_view res = view(LLMC_RT_F32, f.res, 2, (int64_t[]){5, 21});
    rt_qweight_shape wk = f.ws, wg = f.ws, w_hp4;
    rt_qweight_shape_init(&wk, 4, 8, 4, 20, 71, 32);
    rt_qweight_shape_init(&wg, 4, 8, 4, 20, 70, 64);
    rt_qweight_shape_init(&w_hp4, 4, 4, 4, 20, 70, 32);
    CHECK(fails_with(k_qlinear(kt, &xv, &f.xs, f.w, &wk, NULL, NULL, 0, &yv, 1, 1, 2048, NULL, &err),
                     "activations of k 70 in groups of 32, weights of k 71"),
          "k mismatch: %s", err.msg);
    CHECK(fails_with(k_qlinear(kt, &xv, &f.xs, f.w, &wg, NULL, NULL, 0, &yv, 1, 1, 2048, NULL, &err),
                     "weights of k 70 in groups of 64"), "group mismatch: %s", err.msg);
    CHECK(fails_with(k_qlinear(kt, &xv, &f.xs, f.w, &f.ws, NULL, NULL, 1, &yv, 1, 1, 2048, NULL, &err),
                     "cannot give columns 1.. as [5, 20]"), "columns past n: %s", err.msg);
    CHECK(fails_with(k_qlinear(kt, &xv, &f.xs, f.w, &f.ws, NULL, NULL, 0, &bad_y, 1, 1, 2048, NULL,
                               &err), "[5, 70] by W [20, 70] cannot give columns 0.. as [4, 20]"),
          "rows mismatch: %s", err.msg);
    CHECK(fails_with(k_qlinear(kt, &xv, &f.xs, f.w, &f.ws, &bias, NULL, 0, &yv, 1, 1, 2048, NULL, &err),
                     "bias [19] is not [20]"), "bias: %s", err.msg);
    CHECK(fails_with(k_qlinear(kt, &xv, &f.xs, f.w, &f.ws, NULL, &res, 0, &yv, 1, 1, 2048, NULL, &err),
                     "residual [5, 21] does not match the output [5, 20]"), "residual: %s",
          err.msg);
    CHECK(fails_with(k_qlinear(kt, &xv, &f.xs, f.w, &w_hp4, NULL, NULL, 0, &yv, 1, 1, 2048, NULL, &err),
                     "weight tiles hp 4 lp 4, but target 'generic' uses hp 8 lp 4"),
          "tile size of another target: %s", err.msg);
    rt_view halves[2] = {view(LLMC_RT_F32, y, 2, (int64_t[]){5, 10}),
                         view(LLMC_RT_F32, y + 50, 2, (int64_t[]){4, 10})};
    CHECK(fails_with(k_qlinear(kt, &xv, &f.xs, f.w, &f.ws, NULL, NULL, 0, halves, 2, 1, 2048, NULL,
                               &err), "output 1: QLinear of [5, 70] by W [20, 70] cannot give "
                     "columns 10.. as [4, 10]"), "the second of two outputs: %s", err.msg);
    rt_view res_half = view(LLMC_RT_F32, f.res, 2, (int64_t[]){5, 10});
    halves[1].dims[0] = 5;
    CHECK(fails_with(k_qlinear(kt, &xv, &f.xs, f.w, &f.ws, NULL, &res_half, 0, halves, 2, 1, 2048,
                               NULL, &err), "a residual needs exactly one output, not 2"),
          "a residual with two outputs: %s", err.msg);
    rt_view x_bad = view(LLMC_RT_F32, f.x, 2, (int64_t[]){5, 69});
    rt_view q_bad = view(LLMC_RT_I8, f.xq, 2, (int64_t[]){5, 69});
    CHECK(fails_with(k_quantize_rows(kt, &x_bad, &f.xs, 0.0f, &q_bad, NULL, &err),
                     "QuantizeRows of [5, 69] into [5, 69]: both must be [..., k] with m = 5 "
                     "rows of k = 70"), "QuantizeRows k mismatch: %s", err.msg);
    rt_qweight_shape big;
    CHECK(rt_qweight_shape_init(&big, 8, 8, 4, 16, 131072, 131072) &&
              !rt_qweight_shape_init_coef(&big, 8, 8, 4, 16, 131072, 131072, RT_QCOEF_FLOAT) &&
              rt_qweight_shape_init_coef(&big, 8, 8, 4, 16, 65536, 65536, RT_QCOEF_FLOAT),
          "float32 coefficients in groups above %d (where acc - zero * sum could leave int32) "
          "are not a weight format", RT_QCOEF_FLOAT_MAX_GROUP);
    rt_qact_shape broken = f.xs;
    broken.mp = 4;
    CHECK(fails_with(k_quantize_rows(kt, &x_bad, &broken, 0.0f, &q_bad, NULL, &err),
                     "invalid activation tile shape"), "inconsistent shape: %s", err.msg);
    fixture_free(&f);
}

static void test_targets(void)
{
    CHECK(rt_kernels_for_target("generic", &err) == &rt_kernels_generic, "target generic");
    CHECK(!rt_kernels_for_target("sse9", &err) && err.code == LLMC_RT_E_TARGET &&
          strstr(err.msg, "target \"sse9\" unknown; this runtime knows generic avx2"), "%s",
          err.msg);
#if defined(__x86_64__)
    char missing[128] = "x";
    rt_cpu_x86_avx2_missing(missing, sizeof missing);
    const rt_kernels *avx2 = rt_kernels_for_target("avx2", &err);
    CHECK(avx2 ? !missing[0] && avx2->q_hp == 8 && avx2->q_lp == 4 && avx2->q_ep == 4
               : missing[0] && strstr(err.msg, missing),
          "avx2: a table with tiles 8/4/4 when the CPU check passes, else the missing "
          "features named (%s)", avx2 ? "present" : err.msg);
    CHECK(!rt_kernels_for_target("neon-dot", &err) && err.code == LLMC_RT_E_TARGET &&
          strstr(err.msg, "\"neon-dot\": this runtime was built without its kernels"), "%s",
          err.msg);
#endif
    /* every table this build has carries its target's tile sizes (plan_enums.h) */
    for (int i = 0; i < TARGET_COUNT; i++) {
        const rt_target_info *info = rt_target_info_of(i);
        const rt_kernels *kt = rt_kernels_for_target(info->name, NULL);
        if (kt)
            CHECK(kt->q_hp == info->q_hp && kt->q_lp == info->q_lp && kt->q_ep == info->q_ep &&
                  kt->f_hp == info->f_hp && kt->f_ep == info->f_ep && kt->ftile && kt->qtile &&
                  kt->quantize_rows, "kernel table %s has the tile sizes of plan_enums.h", info->name);
    }
}

/* The portable kernels at tile sizes of other targets (paper 002 Table 2:
 * sdot 12/8/4, i8mm 10/8/8, AVX-512 4/64/4) and odd ones. */
static void test_generic_tile_sizes(void)
{
    static const int sizes[][3] = {{8, 4, 12}, {8, 8, 10}, {64, 4, 4}, {3, 2, 5}, {1, 1, 1}};
    for (int i = 0; i < 5; i++) {
        rt_kernels t = rt_kernels_generic;
        t.q_hp = sizes[i][0];
        t.q_lp = sizes[i][1];
        t.q_ep = sizes[i][2];
        t.target = "generic-resized";
        bool ok = true;
        for (int ci = 0; ci < n_cases(); ci += 3) {
            qcase c = case_at(ci);
            qfixture f;
            float *y = malloc((size_t)(c.m * c.n_y + 1) * sizeof *y);
            ok &= fixture_init(&f, &c, &t) && run_qlinear(&t, &f, 2, NULL, y) == LLMC_RT_OK &&
                  close_to(y, f.want, f.mag, c.m * c.n_y, 1e-5);
            free(y);
            fixture_free(&f);
        }
        CHECK(ok, "portable kernels at hp %d lp %d ep %d match fp64", sizes[i][0], sizes[i][1],
              sizes[i][2]);
    }
}

/* An x86 table's QLinear GEMM walk (qlinear_pair_task) streams whole
 * output lines to y: bitwise the same table's qtile per tile and portable
 * stores (the table without its walk and qtile_block), on shapes where
 * every line streams (col0 and n_y multiples of 16, y 64-byte aligned,
 * whole activation tiles) and where only some do (a short last tile,
 * columns past n_y), with blocks of 4 and 2 activation tiles and single
 * ones (m 8..30), bits 4 and 8, with and without bias and residual, and on
 * a y that is not 64-byte aligned (no line streams). */
static void test_streamed_stores(const rt_kernels *fast)
{
    static const int64_t ms[] = {8, 13, 16, 24, 20, 30};
    rt_kernels plain = *fast;
    plain.qtile_block = NULL;
    plain.qlinear_pair_task = NULL;
    bool ok = true;
    for (int i = 0; i < 48; i++) {
        qcase c = {i % 2 ? 8 : 4, ms[i % 6], 80, i % 3 ? 96 : 200, 32, i % 8 < 4 ? 0 : 16, 0,
                   i % 4 < 2, i % 3 != 0, false};
        c.n_y = c.n - c.col0 - (i % 16 < 8 ? 0 : 16);
        c.float_coef = i % 5 == 0;
        qfixture f;
        size_t bytes = (size_t)(c.m * c.n_y) * sizeof(float) + 64;
        float *a = aligned_alloc(64, (bytes + 63) / 64 * 64);
        float *b = aligned_alloc(64, (bytes + 63) / 64 * 64);
        int shift = i >= 40; /* 4 bytes off a line: the portable stores only */
        ok &= fixture_init(&f, &c, fast) && a && b &&
              run_qlinear(fast, &f, 2, NULL, a + shift) == LLMC_RT_OK &&
              run_qlinear(&plain, &f, 2, NULL, b + shift) == LLMC_RT_OK &&
              !memcmp(a + shift, b + shift, (size_t)(c.m * c.n_y) * sizeof(float));
        fixture_free(&f);
        free(a);
        free(b);
    }
    CHECK(ok, "%s QLinear GEMM with streamed output lines: bitwise qtile per tile and the "
          "portable stores on 48 shapes (bits 4/8, float16/float32 coefficients, bias, residual, "
          "short tiles, unaligned y)",
          fast->isa);
}

/* The walks on deep reductions: many groups (group 8 and 32, k 600 and
 * 1100), more activation tile pairs than a cache block holds (80 rows),
 * and one group per row longer than 1024 elements (k 2600 and 4100);
 * bitwise qtile per tile and the portable stores, and qtile_block bitwise
 * qtile. */
static bool qtile_block_case(const rt_kernels *kt, const qcase *c);

static void test_deep_reductions(const rt_kernels *fast)
{
    static const int64_t shape[][4] = {{80, 600, 8, 16}, {13, 1100, 32, 32}, {24, 2600, 0, 16},
                                       {9, 4100, 0, 32}};
    rt_kernels plain = *fast;
    plain.qtile_block = NULL;
    plain.qlinear_pair_task = NULL;
    bool ok = true;
    for (int i = 0; i < 16; i++) {
        const int64_t *sh = shape[i % 4];
        qcase c = {i % 8 < 4 ? 4 : 8, sh[0], 48, sh[1], group_for(sh[2], sh[1]), sh[3], 0,
                   i % 2 == 0, i % 3 == 0, i >= 8};
        c.n_y = c.n - c.col0;
        qfixture f;
        size_t bytes = (size_t)(c.m * c.n_y) * sizeof(float);
        float *a = aligned_alloc(64, (bytes + 63) / 64 * 64);
        float *b = aligned_alloc(64, (bytes + 63) / 64 * 64);
        ok &= fixture_init(&f, &c, fast) && a && b &&
              run_qlinear(fast, &f, 2, NULL, a) == LLMC_RT_OK &&
              run_qlinear(&plain, &f, 2, NULL, b) == LLMC_RT_OK && !memcmp(a, b, bytes);
        fixture_free(&f);
        free(a);
        free(b);
        if (fast->qtile_block)
            ok &= qtile_block_case(fast, &c);
    }
    CHECK(ok, "%s QLinear GEMM walk and qtile_block on k 600..4100 (groups 8 and 32, one group "
          "per row): bitwise qtile per tile on 16 shapes (bits 4/8, float16/float32 "
          "coefficients)", fast->isa);
}

static void test_table(const rt_kernels *kt)
{
    CHECK(!kt->qtile_block || kt->qlinear_pair_task,
          "%s: a qtile_block comes with a pair walk (qlinear_pair_task)", kt->isa);
    test_quantize_rows(kt);
    test_group_outlier(kt);
    test_quantize_static(kt);
    test_shadow_linear(kt, false);
    test_shadow_linear(kt, true);
    test_qlinear_reference(kt);
    test_threads(kt);
    test_outputs(kt);
    if (kt != &rt_kernels_generic) {
        test_table_vs_generic(kt);
        test_qtile_exact(kt);
    }
    if (kt->qlinear_pair_task) {
        test_streamed_stores(kt);
        test_deep_reductions(kt);
    }
    if (kt->qlinear_gemv_pair)
        test_gemv_pair(kt);
}

/* Two tables for the same target: their qtile outputs byte for byte on
 * every case_at shape, row tile by row tile (both GEMV and GEMM rows). */
static void test_tables_bitwise(const rt_kernels *a, const rt_kernels *b)
{
    bool ok = true;
    for (int i = 0; ok && i < n_cases(); i++) {
        qcase c = case_at(i);
        qfixture f;
        ok &= fixture_init(&f, &c, a);
        rt_qtile_args args = {f.xq, f.xs, f.w, f.ws, 2048};
        for (int64_t et = 0; ok && et < f.xs.mp / f.xs.ep; et++)
            for (int64_t ht = 0; ht < f.ws.np / f.ws.hp; ht++) {
                int rows = c.m - et * f.xs.ep < f.xs.ep ? (int)(c.m - et * f.xs.ep) : f.xs.ep;
                float ya[RT_QTILE_MAX_OUT], yb[RT_QTILE_MAX_OUT];
                a->qtile(&args, et, rows, ht, ya);
                b->qtile(&args, et, rows, ht, yb);
                ok &= !memcmp(ya, yb, (size_t)(rows * f.ws.hp) * sizeof *ya);
            }
        fixture_free(&f);
    }
    ok &= a->quantize_rows == b->quantize_rows && a->q_hp == b->q_hp && a->q_lp == b->q_lp &&
          a->q_ep == b->q_ep;
    CHECK(ok, "%s and %s: the same tiles and QuantizeRows, qtile bitwise equal on %d shapes",
          a->isa, b->isa, n_cases());
}

/* qtile_block's 2 x 2 and 4 x 2 tiles against qtile's GEMM (all ep rows)
 * byte for byte, at every run of activation tiles and pair of W row tiles
 * of every case_at shape. */
static bool qtile_block_case(const rt_kernels *kt, const qcase *c)
{
    qfixture f;
    bool ok = fixture_init(&f, c, kt);
    rt_qtile_args args = {f.xq, f.xs, f.w, f.ws, 2048};
    int ep = f.xs.ep, tile = ep * f.ws.hp;
    for (int tiles = 2; tiles <= 4; tiles += 2)
        for (int64_t et = 0; ok && et + tiles <= f.xs.mp / ep; et++)
            for (int64_t ht = 0; ok && ht + 1 < f.ws.np / f.ws.hp; ht++) {
                float got[8 * RT_QTILE_MAX_OUT], want[RT_QTILE_MAX_OUT];
                kt->qtile_block(&args, et, tiles, ht, got);
                for (int i = 0; i < 2 * tiles; i++) {
                    kt->qtile(&args, et + i / 2, ep, ht + i % 2, want);
                    ok &= !memcmp(got + i * tile, want, (size_t)tile * sizeof *want);
                }
            }
    fixture_free(&f);
    return ok;
}

static void test_qtile_block(const rt_kernels *kt)
{
    bool ok = true;
    int blocks = 0;
    for (int i = 0; i < n_cases(); i++) {
        qcase c = case_at(i);
        blocks += c.m > 12;
        ok &= qtile_block_case(kt, &c);
    }
    CHECK(ok && blocks > 0, "%s qtile_block: the tiles of every 2 x 2 and 4 x 2 block bitwise qtile's on "
          "%d shapes (bits 4/8, every group)", kt->isa, blocks);
}

#if defined(__x86_64__)
typedef void qtile_pair_fn(const rt_qtile_args *a, int64_t et, int rows, int64_t ht,
                           float *out);

/* A table's qtile_pair (rt_q_avx2_qtile_pair, rt_q_avxvnni_qtile_pair)
 * against its qtile twice byte for byte, at every activation tile (1..4
 * rows) and pair of W row tiles of one case_at shape. */
static bool qtile_pair_case(const rt_kernels *kt, qtile_pair_fn *pair, const qcase *c)
{
    qfixture f;
    bool ok = fixture_init(&f, c, kt);
    rt_qtile_args args = {f.xq, f.xs, f.w, f.ws, 2048};
    int ep = f.xs.ep, hp = f.ws.hp;
    for (int64_t et = 0; ok && et < f.xs.mp / ep; et++)
        for (int64_t ht = 0; ok && ht + 1 < f.ws.np / hp; ht++) {
            int rows = c->m - et * ep < ep ? (int)(c->m - et * ep) : ep;
            float got[2 * RT_QTILE_MAX_OUT], want[RT_QTILE_MAX_OUT];
            pair(&args, et, rows, ht, got);
            for (int i = 0; i < 2; i++) {
                kt->qtile(&args, et, rows, ht + i, want);
                ok &= !memcmp(got + i * ep * hp, want, (size_t)(rows * hp) * sizeof *want);
            }
        }
    fixture_free(&f);
    return ok;
}
#endif

#if defined(__x86_64__)
/* A table's GEMM of two W row tiles per activation broadcast. */
static void test_qtile_pair(const rt_kernels *kt, qtile_pair_fn *pair)
{
    bool ok = true;
    for (int i = 0; i < n_cases(); i++) {
        qcase c = case_at(i);
        ok &= qtile_pair_case(kt, pair, &c);
    }
    CHECK(ok, "%s qtile_pair: both tiles of every W row tile pair bitwise qtile's on %d "
          "shapes (1..4 rows, bits 4/8, float16/float32 coefficients, every group)", kt->isa,
          n_cases());
}
#endif

/* On an AVX-512 VNNI CPU "avx2" plans run rt_kernels_avx2_avx512; the AVX2
 * table they would run elsewhere is checked here as well, and the two
 * against each other. */
static void test_avx512_table(void)
{
#if defined(__x86_64__)
    const rt_kernels *want = !rt_cpu_x86_avx2_ok()        ? NULL
                             : rt_cpu_x86_avx512_vnni_ok() ? &rt_kernels_avx2_avx512
                                                           : &rt_kernels_avx2;
    CHECK(rt_kernels_for_target("avx2", NULL) == want,
          "target avx2 runs the AVX-512 VNNI table exactly when the CPU has it");
    if (!rt_cpu_x86_avx512_vnni_ok()) {
        printf("# avx2+avx512vnni: this CPU lacks AVX-512 VNNI; its kernels are not run\n");
        return;
    }
    test_table(&rt_kernels_avx2);
    test_tables_bitwise(&rt_kernels_avx2_avx512, &rt_kernels_avx2);
    test_qtile_block(&rt_kernels_avx2_avx512);
#endif
}

/* A CPU with AVX-VNNI and without AVX-512 VNNI runs "avx2" plans with
 * rt_kernels_avx2_avxvnni; one with both still offers it (--isa).  Its
 * kernels against the portable ones and bitwise against the AVX2 table. */
static void test_avxvnni_table(void)
{
#if defined(__x86_64__)
    if (!rt_cpu_x86_avx2_ok())
        return;
    const rt_kernels *want = rt_cpu_x86_avx512_vnni_ok() ? &rt_kernels_avx2_avx512
                             : rt_cpu_x86_avxvnni_ok()   ? &rt_kernels_avx2_avxvnni
                                                         : &rt_kernels_avx2;
    CHECK(rt_kernels_for_target("avx2", NULL) == want,
          "target avx2 runs the AVX-VNNI table when the CPU has AVX-VNNI and not AVX-512 VNNI");
    llmc_rt_error e = {0};
    const rt_kernels *named = rt_kernels_for_isa("avx2", "avx2+avxvnni", &e);
    CHECK(rt_cpu_x86_avxvnni_ok() ? named == &rt_kernels_avx2_avxvnni
                                  : !named && strstr(e.msg, "no kernels \"avx2+avxvnni\""),
          "--isa avx2+avxvnni: its table exactly when the CPU has AVX-VNNI (%s)",
          named ? named->isa : e.msg);
    if (!rt_cpu_x86_avxvnni_ok()) {
        printf("# avx2+avxvnni: this CPU lacks AVX-VNNI; its kernels are not run\n");
        return;
    }
    test_table(&rt_kernels_avx2_avxvnni);
    test_tables_bitwise(&rt_kernels_avx2_avxvnni, &rt_kernels_avx2);
    test_qtile_pair(&rt_kernels_avx2_avxvnni, rt_q_avxvnni_qtile_pair);
#endif
}

/* Every table an "avx2" plan can run here has its Plan.decode_isa /
 * prefill_isa value (LLMC_PLAN_KERNEL_ISAS), which names it back: else
 * llmc tune could not write it. */
static void test_tables_tunable(void)
{
#if defined(__x86_64__)
    if (!rt_cpu_x86_avx2_ok())
        return;
    const rt_kernels *k = &rt_kernels_avx2;
    int named = 0, tables = 0;
    for (int i = 0; k; k = rt_cpu_x86_faster_table(i++), tables++)
        for (uint32_t v = 1; v < KISA_COUNT; v++)
            named += !strcmp(rt_kernel_isa_name(v), k->isa) &&
                     rt_kernel_isa_target(v) == TARGET_AVX2 &&
                     rt_kernels_tuned("avx2", &rt_kernels_avx2, v) == k;
    CHECK(named == tables, "each of the %d tables of avx2 plans on this CPU has a kernel-table "
          "value that resolves to it (%d do)", tables, named);
#endif
}

/* An AVX-512 VNNI CPU also offers the AVX-VNNI kernels EVEX-encoded
 * (rt_kernels_avx2_avx512ymm, --isa and llmc tune's choice): against the
 * portable ones and bitwise against the AVX2 table. */
static void test_avx512ymm_table(void)
{
#if defined(__x86_64__)
    if (!rt_cpu_x86_avx2_ok())
        return;
    llmc_rt_error e = {0};
    const rt_kernels *named = rt_kernels_for_isa("avx2", "avx2+avx512vnni-ymm", &e);
    CHECK(rt_cpu_x86_avx512_vnni_ok() ? named == &rt_kernels_avx2_avx512ymm
                                      : !named && strstr(e.msg, "no kernels \"avx2+avx512vnni-ymm\""),
          "--isa avx2+avx512vnni-ymm: its table exactly when the CPU has AVX-512 VNNI (%s)",
          named ? named->isa : e.msg);
    if (!rt_cpu_x86_avx512_vnni_ok()) {
        printf("# avx2+avx512vnni-ymm: this CPU lacks AVX-512 VNNI; its kernels are not run\n");
        return;
    }
    test_table(&rt_kernels_avx2_avx512ymm);
    test_tables_bitwise(&rt_kernels_avx2_avx512ymm, &rt_kernels_avx2);
    test_qtile_pair(&rt_kernels_avx2_avx512ymm, rt_q_avx512ymm_qtile_pair);
#endif
}

int main(void)
{
    srand(14);
    test_pack_round_trip();
    test_fpack();
    test_targets();
    test_errors();
    test_generic_tile_sizes();
    test_dequant();
    test_pair_prefetch();
    const char *names[] = {"generic", "avx2", "neon-dot", "neon-i8mm"};
    for (int i = 0; i < 4; i++) {
        const rt_kernels *kt = rt_kernels_for_target(names[i], &err);
        if (!kt) {
            printf("# %s: %s\n", names[i], err.msg);
            continue;
        }
        test_table(kt);
    }
#if defined(__x86_64__)
    if (rt_cpu_x86_avx2_ok())
        test_qtile_pair(&rt_kernels_avx2, rt_q_avx2_qtile_pair);
#endif
    test_avx512_table();
    test_avxvnni_table();
    test_avx512ymm_table();
    test_tables_tunable();
    return TAP_DONE();
}
