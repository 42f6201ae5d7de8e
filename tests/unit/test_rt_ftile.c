/* fp32 weight tiles and the tiled Attention kernel:
 *   - the ftile micro-kernels (portable rt_ftile_generic at several hp, and
 *     rt_ftile_avx2 when this CPU has AVX2 + FMA) against a double-precision
 *     product written from the tile layout in quant_format.h, for every
 *     rows count, odd k, a row stride wider than k and a padded last tile;
 *   - k_linear_tiles through local kernel tables: m 1..13, n not a multiple
 *     of hp, col0 inside a tile, bias, residual, rank-3 x, against double;
 *     bitwise the same under fake 1/2/3-thread parallel-fors (tasks run in
 *     other orders) and a real 2-thread pool; its shape checks;
 *   - k_attention on hand-filled chunked caches (slots out of order) for
 *     decode (the key range split across tasks, contexts up to 1000 over
 *     16 chunks), a few-token step and prefill (tiled), MHA and GQA, head
 *     dims 64, 33 and 256, scores far beyond the unified offset (the exact
 *     fallback), against double; bitwise the same for any thread count. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_table.h"
#if defined(__x86_64__)
#include "kernels/x86/x86_simd.h"
#endif
#include "llmc_threads.h"
#include "parallel_orders.h"
#include "tap.h"

static llmc_rt_error err;

static float frand(void)
{
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static float *rand_floats(int64_t n)
{
    float *p = malloc(sizeof *p * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

static double rel_err(double got, double want)
{
    double d = fabs(got - want) / fmax(1.0, fabs(want));
    return d == d ? d : INFINITY; /* NaN counts as an error */
}

static bool have_avx2(void)
{
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

/* ---- fp32 tiles ---------------------------------------------------------- */

/* W [n, k] into row tiles of hp: (r, c) of tile ht at (ht * k + c) * hp + r. */
static float *pack_tiles(const float *w, int64_t n, int64_t k, int hp)
{
    int64_t np = (n + hp - 1) / hp * hp;
    float *t = calloc((size_t)(np * k > 0 ? np * k : 1), sizeof *t);
    for (int64_t j = 0; j < n; j++)
        for (int64_t c = 0; c < k; c++)
            t[(j / hp * k + c) * hp + j % hp] = w[j * k + c];
    return t;
}

static double dot_ref(const float *x, const float *w, int64_t k)
{
    double s = 0.0;
    for (int64_t c = 0; c < k; c++)
        s += (double)x[c] * w[c];
    return s;
}

typedef void (*ftile_fn)(const float *, int64_t, const float *, int, int64_t, int, float *);

/* Rows e0.. of x against row tile ht over the whole reduction, as two
 * panels [0, split) and [split, k) into out (zeroed first). */
static void ftile_split(ftile_fn fn, const float *x, int64_t stride, const float *t, int hp,
                        int64_t k, int64_t split, int64_t e0, int rows, int64_t ht, float *out)
{
    const float *tile = t + ht * k * hp, *xe = x + e0 * stride;
    memset(out, 0, sizeof *out * (size_t)(rows * hp));
    fn(xe, stride, tile, hp, split, rows, out);
    fn(xe + split, stride, tile + split * hp, hp, k - split, rows, out);
}

/* Every rows count 1..ep on tile ht = 1 and on the padded last tile, the
 * reduction as one panel and split in two: against double, and rows >= 2
 * bitwise the same either way (sums continued in c order). */
static void test_ftile(const char *name, ftile_fn fn, int hp, int ep)
{
    static const int64_t ks[] = {1, 3, 17, 130, 301};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        int64_t k = ks[ki], n = 3 * hp - (hp > 1), m = ep + 2, stride = k + 3, split = k / 3;
        float *x = rand_floats(m * stride), *w = rand_floats(n * k), *t = pack_tiles(w, n, k, hp);
        double worst = 0.0;
        bool pad_zero = true, same_split = true;
        float *out = malloc(sizeof *out * (size_t)(ep * hp));
        float *whole = malloc(sizeof *whole * (size_t)(ep * hp));
        for (int rows = 1; rows <= ep; rows++)
            for (int64_t ht = 1; ht < 3; ht++) {
                int64_t e0 = m - rows - (ht == 1); /* rows not from 0 either */
                ftile_split(fn, x, stride, t, hp, k, 0, e0, rows, ht, whole);
                ftile_split(fn, x, stride, t, hp, k, split, e0, rows, ht, out);
                if (rows >= 2)
                    same_split = same_split && !memcmp(out, whole, sizeof *out * (size_t)(rows * hp));
                for (int e = 0; e < rows; e++)
                    for (int h = 0; h < hp; h++) {
                        int64_t j = ht * hp + h;
                        if (j >= n)
                            pad_zero = pad_zero && out[e * hp + h] == 0.0f;
                        else
                            worst = fmax(worst, rel_err(out[e * hp + h],
                                                        dot_ref(x + (e0 + e) * stride, w + j * k, k)));
                    }
            }
        CHECK(worst <= 1e-5 && pad_zero && same_split, "%s hp %d: rows 1..%d, k %d (panels of "
              "%d and %d), stride %d: max rel err %.2g, padding rows 0, rows >= 2 bitwise one "
              "panel", name, hp, ep, (int)k, (int)split, (int)(k - split), (int)stride, worst);
        free(out);
        free(whole);
        free(x);
        free(w);
        free(t);
    }
}

typedef struct {
    int64_t m, k, n, col0, n_y;
    bool bias, residual;
} linear_case;

/* y[e][j - col0] for j in [col0, col0 + n_y), in double. */
static double *linear_ref(const linear_case *c, const float *x, const float *w, const float *b,
                          const float *r)
{
    double *z = malloc(sizeof *z * (size_t)(c->m * c->n_y));
    for (int64_t e = 0; e < c->m; e++)
        for (int64_t j = 0; j < c->n_y; j++) {
            double v = dot_ref(x + e * c->k, w + (c->col0 + j) * c->k, c->k);
            if (b)
                v += b[c->col0 + j];
            if (r)
                v += r[e * c->n_y + j];
            z[e * c->n_y + j] = v;
        }
    return z;
}

static void run_linear_case(const rt_kernels *kt, const linear_case *c)
{
    float *x = rand_floats(c->m * c->k), *w = rand_floats(c->n * c->k);
    float *b = c->bias ? rand_floats(c->n) : NULL;
    float *r = c->residual ? rand_floats(c->m * c->n_y) : NULL;
    float *t = pack_tiles(w, c->n, c->k, kt->f_hp), *y = rand_floats(c->m * c->n_y);
    rt_ftile_shape ws;
    rt_ftile_shape_init(&ws, kt->f_hp, c->n, c->k);
    /* x as [1, m, k] to cover leading dims */
    rt_view vx = {LLMC_RT_F32, 3, {1, c->m, c->k}, x}, vb = {LLMC_RT_F32, 1, {c->n}, b},
            vr = {LLMC_RT_F32, 3, {1, c->m, c->n_y}, r}, vy = {LLMC_RT_F32, 3, {1, c->m, c->n_y}, y};
    llmc_rt_status st = k_linear_tiles(kt, &vx, t, &ws, b ? &vb : NULL, r ? &vr : NULL, c->col0,
                                       &vy, 1, NULL, &err);
    double *want = linear_ref(c, x, w, b, r), worst = 0.0;
    for (int64_t i = 0; i < c->m * c->n_y; i++)
        worst = fmax(worst, rel_err(y[i], want[i]));
    CHECK(st == LLMC_RT_OK && worst <= 1e-5, "k_linear_tiles %s (hp %d, ep %d): m %d, k %d, "
          "W [%d, %d] columns [%d, %d)%s%s: max rel err %.2g", kt->target, kt->f_hp, kt->f_ep,
          (int)c->m, (int)c->k, (int)c->n, (int)c->k, (int)c->col0, (int)(c->col0 + c->n_y),
          b ? " + bias" : "", r ? " + residual" : "", worst);
    free(x);
    free(w);
    free(b);
    free(r);
    free(t);
    free(y);
    free(want);
}

/* Two micro-kernels that must give the same bits (the AVX-512 table's and
 * the AVX2 one's): every rows count 1..ep, reductions of 1..301 steps split
 * in two panels, the tiles of a padded W. */
static void test_ftile_same(const char *name, ftile_fn a, ftile_fn b, int hp, int ep)
{
    static const int64_t ks[] = {1, 3, 4, 17, 130, 301};
    bool same = true;
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        int64_t k = ks[ki], n = 3 * hp - 1, m = ep + 2, stride = k + 3, split = k / 3;
        float *x = rand_floats(m * stride), *w = rand_floats(n * k), *t = pack_tiles(w, n, k, hp);
        float *ya = malloc(sizeof *ya * (size_t)(ep * hp)), *yb = malloc(sizeof *yb * (size_t)(ep * hp));
        for (int rows = 1; rows <= ep; rows++)
            for (int64_t ht = 0; ht < 3; ht++) {
                ftile_split(a, x, stride, t, hp, k, split, m - rows, rows, ht, ya);
                ftile_split(b, x, stride, t, hp, k, split, m - rows, rows, ht, yb);
                same = same && !memcmp(ya, yb, sizeof *ya * (size_t)(rows * hp));
            }
        free(ya);
        free(yb);
        free(x);
        free(w);
        free(t);
    }
    CHECK(same, "%s: bitwise the AVX2 kernel's sums, rows 1..%d, k 1..301 in two panels", name, ep);
}

#if defined(__x86_64__)
/* ftile_pair on tiles ht, ht + 1 (the second one padded) against ftile on
 * each, byte for byte: every rows count 1..6, reductions of 1..301 steps
 * split in two panels, rows not from 0. */
static void test_ftile_pair_same(void)
{
    static const int64_t ks[] = {1, 3, 4, 17, 130, 301};
    const int hp = 16, ep = 6;
    bool same = true;
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        int64_t k = ks[ki], n = 2 * hp - 3, m = ep + 2, stride = k + 3, split = k / 3;
        float *x = rand_floats(m * stride), *w = rand_floats(n * k), *t = pack_tiles(w, n, k, hp);
        float pa[6 * 16], pb[6 * 16], a[6 * 16], b[6 * 16];
        for (int rows = 1; rows <= ep; rows++) {
            const float *xe = x + (m - rows) * stride, *ta = t, *tb = t + k * hp;
            memset(pa, 0, sizeof pa);
            memset(pb, 0, sizeof pb);
            rt_ftile_pair_avx512(xe, stride, ta, tb, hp, split, rows, pa, pb);
            rt_ftile_pair_avx512(xe + split, stride, ta + split * hp, tb + split * hp, hp,
                                 k - split, rows, pa, pb);
            ftile_split(rt_ftile_avx512, x, stride, t, hp, k, split, m - rows, rows, 0, a);
            ftile_split(rt_ftile_avx512, x, stride, t, hp, k, split, m - rows, rows, 1, b);
            same = same && !memcmp(pa, a, sizeof *a * (size_t)(rows * hp)) &&
                   !memcmp(pb, b, sizeof *b * (size_t)(rows * hp));
        }
        free(x);
        free(w);
        free(t);
    }
    CHECK(same, "rt_ftile_pair_avx512: each panel bitwise rt_ftile_avx512's, rows 1..6, k 1..301 "
          "in two panels");
}

/* The fp32 Linear with the table's ftile_pair bitwise the same without it:
 * m 1..40 (passes of one row, short row blocks, more than one pass), an
 * odd and an even number of tiles, reductions of one panel and of three,
 * columns from inside a tile, bias and residual. */
static void test_linear_pairs(const rt_kernels *kt)
{
    static const int64_t shapes[][4] = {{1, 70, 83, 5},   {2, 300, 96, 0},  {7, 53, 77, 11},
                                        {13, 600, 64, 3}, {40, 131, 45, 0}, {130, 70, 150, 7}};
    rt_kernels single = *kt;
    single.ftile_pair = NULL;
    bool same = true;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        int64_t m = shapes[i][0], k = shapes[i][1], n = shapes[i][2], col0 = shapes[i][3];
        int64_t n_y = n - col0;
        float *x = rand_floats(m * k), *w = rand_floats(n * k), *b = rand_floats(n);
        float *r = rand_floats(m * n_y), *t = pack_tiles(w, n, k, kt->f_hp);
        float *ya = rand_floats(m * n_y), *yb = rand_floats(m * n_y);
        rt_ftile_shape ws;
        rt_ftile_shape_init(&ws, kt->f_hp, n, k);
        rt_view vx = {LLMC_RT_F32, 2, {m, k}, x}, vb = {LLMC_RT_F32, 1, {n}, b},
                vr = {LLMC_RT_F32, 2, {m, n_y}, r}, va = {LLMC_RT_F32, 2, {m, n_y}, ya},
                vy = {LLMC_RT_F32, 2, {m, n_y}, yb};
        bool resid = i % 2 == 1;
        same = same &&
               k_linear_tiles(kt, &vx, t, &ws, &vb, resid ? &vr : NULL, col0, &va, 1, NULL,
                              &err) == LLMC_RT_OK &&
               k_linear_tiles(&single, &vx, t, &ws, &vb, resid ? &vr : NULL, col0, &vy, 1, NULL,
                              &err) == LLMC_RT_OK &&
               !memcmp(ya, yb, sizeof *ya * (size_t)(m * n_y));
        free(x);
        free(w);
        free(b);
        free(r);
        free(t);
        free(ya);
        free(yb);
    }
    CHECK(same, "k_linear_tiles %s: with ftile_pair bitwise without it on 6 shapes (m 1..130, "
          "k 53..600, odd and even tile counts)", kt->isa);
}
#endif

static void test_linear_tiles(const rt_kernels *kt)
{
    static const int64_t ms[] = {1, 2, 5, 6, 7, 13};
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
        linear_case c = {ms[i], 37 + 2 * (int64_t)i, 53, 5, 41, i % 2 == 0, i % 3 != 2};
        run_linear_case(kt, &c);
    }
    linear_case whole = {4, 131, 70, 0, 70, true, false}; /* every column, n % 16 = 6 */
    run_linear_case(kt, &whole);
    linear_case tail = {3, 9, 50, 49, 1, false, true};    /* one column in the padded tile */
    run_linear_case(kt, &tail);
    linear_case empty_k = {2, 0, 20, 3, 10, true, false}; /* k = 0: bias only */
    run_linear_case(kt, &empty_k);
}

/* The columns of `want` [M, NY] as three outputs of one call: their bits. */
static bool outputs_match(const rt_kernels *kt, const rt_view *vx, const float *t,
                          const rt_ftile_shape *ws, const rt_view *vb, int64_t col0,
                          const float *want, int64_t m, int64_t n_y, const rt_parallel *par)
{
    const int64_t widths[3] = {100, 7, n_y - 107};
    float *parts = malloc(sizeof *parts * (size_t)(m * n_y));
    rt_view ys[3];
    for (int j = 0, at = 0; j < 3; at += (int)(m * widths[j]), j++)
        ys[j] = (rt_view){LLMC_RT_F32, 2, {m, widths[j]}, parts + at};
    bool ok = k_linear_tiles(kt, vx, t, ws, vb, NULL, col0, ys, 3, par, &err) == LLMC_RT_OK;
    const float *part = parts;
    for (int j = 0, col = 0; ok && j < 3; col += (int)widths[j], j++)
        for (int64_t e = 0; e < m; e++, part += widths[j])
            ok &= !memcmp(part, want + e * n_y + col, sizeof *part * (size_t)widths[j]);
    free(parts);
    return ok;
}

/* The same output bits for a serial call, fake 1/2/3-thread parallel-fors
 * and a real 2-thread pool, as one output and as three. */
static void test_linear_threads(const rt_kernels *kt)
{
    enum { M = 7, K = 131, N = 301, COL0 = 11, NY = 277 };
    float *x = rand_floats(M * K), *w = rand_floats(N * K), *b = rand_floats(N);
    float *r = rand_floats(M * NY), *t = pack_tiles(w, N, K, kt->f_hp);
    float *want = malloc(sizeof *want * M * NY), *got = malloc(sizeof *got * M * NY);
    rt_ftile_shape ws;
    rt_ftile_shape_init(&ws, kt->f_hp, N, K);
    rt_view vx = {LLMC_RT_F32, 2, {M, K}, x}, vb = {LLMC_RT_F32, 1, {N}, b},
            vr = {LLMC_RT_F32, 2, {M, NY}, r}, vw = {LLMC_RT_F32, 2, {M, NY}, want},
            vg = {LLMC_RT_F32, 2, {M, NY}, got};
    float *plain = malloc(sizeof *plain * M * NY); /* without the residual */
    rt_view vp = {LLMC_RT_F32, 2, {M, NY}, plain};
    bool ok = k_linear_tiles(kt, &vx, t, &ws, &vb, &vr, COL0, &vw, 1, NULL, &err) == LLMC_RT_OK &&
              k_linear_tiles(kt, &vx, t, &ws, &vb, NULL, COL0, &vp, 1, NULL, &err) == LLMC_RT_OK;
    for (int i = 0; i < PARALLELS; i++) {
        rt_parallel par = parallel_number(i);
        memset(got, 0, sizeof *got * M * NY);
        bool ran =
            k_linear_tiles(kt, &vx, t, &ws, &vb, &vr, COL0, &vg, 1, &par, &err) == LLMC_RT_OK;
        CHECK(ok && ran && !memcmp(got, want, sizeof *got * M * NY),
              "k_linear_tiles %s [%d, %d] x W [%d, %d] columns %d..: %s %d: bitwise serial",
              kt->target, M, K, N, K, COL0, i < 3 ? "fake threads" : "real pool of",
              i < 3 ? i + 1 : 2);
        CHECK(ok && outputs_match(kt, &vx, t, &ws, &vb, COL0, plain, M, NY, &par),
              "k_linear_tiles %s: columns %d.. as outputs of 100, 7 and 170 in one call, %s "
              "%d: the bits of one output", kt->target, COL0,
              i < 3 ? "fake threads" : "real pool of", i < 3 ? i + 1 : 2);
        parallel_done(&par);
    }
    free(x);
    free(w);
    free(b);
    free(r);
    free(t);
    free(want);
    free(got);
    free(plain);
}

static void expect_fail(llmc_rt_status st, const char *what)
{
    CHECK(st == LLMC_RT_E_EXEC && err.msg[0], "k_linear_tiles refuses %s: %s", what, err.msg);
    memset(&err, 0, sizeof err);
}

static void test_linear_checks(const rt_kernels *kt)
{
    float x[6 * 10] = {0}, t[32 * 10] = {0}, y[6 * 16] = {0}, b[32] = {0};
    rt_ftile_shape ws, ws8;
    rt_ftile_shape_init(&ws, kt->f_hp, 20, 10);
    rt_ftile_shape_init(&ws8, 8, 20, 10);
    rt_view vx = {LLMC_RT_F32, 2, {6, 10}, x}, vy = {LLMC_RT_F32, 2, {6, 16}, y},
            vx9 = {LLMC_RT_F32, 2, {6, 9}, x}, vy7 = {LLMC_RT_F32, 2, {7, 16}, y},
            vb = {LLMC_RT_F32, 1, {19}, b}, vr = {LLMC_RT_F32, 2, {6, 15}, y},
            vxi = {LLMC_RT_I32, 2, {6, 10}, x};
    rt_kernels none = {.target = "dense-only"};
    expect_fail(k_linear_tiles(&none, &vx, t, &ws, NULL, NULL, 0, &vy, 1, NULL, &err),
                "a table without ftile");
    expect_fail(k_linear_tiles(kt, &vx, t, &ws8, NULL, NULL, 0, &vy, 1, NULL, &err),
                "tiles of another hp");
    expect_fail(k_linear_tiles(kt, &vx9, t, &ws, NULL, NULL, 0, &vy, 1, NULL, &err),
                "x whose last dim is not k");
    expect_fail(k_linear_tiles(kt, &vx, t, &ws, NULL, NULL, 0, &vy7, 1, NULL, &err),
                "y with other leading dims");
    expect_fail(k_linear_tiles(kt, &vx, t, &ws, NULL, NULL, 5, &vy, 1, NULL, &err),
                "columns past W's rows (col0 5 + 16 > 20)");
    expect_fail(k_linear_tiles(kt, &vx, t, &ws, NULL, NULL, -1, &vy, 1, NULL, &err),
                "a negative col0");
    expect_fail(k_linear_tiles(kt, &vx, t, &ws, &vb, NULL, 0, &vy, 1, NULL, &err),
                "a bias of 19 for 20 rows");
    expect_fail(k_linear_tiles(kt, &vx, t, &ws, NULL, &vr, 0, &vy, 1, NULL, &err),
                "a residual of other dims");
    expect_fail(k_linear_tiles(kt, &vxi, t, &ws, NULL, NULL, 0, &vy, 1, NULL, &err),
                "int32 x");
    rt_view half = {LLMC_RT_F32, 2, {6, 8}, y}, halves[2] = {half, half};
    llmc_rt_status st = k_linear_tiles(kt, &vx, t, &ws, NULL, &half, 0, halves, 2, NULL, &err);
    CHECK(st == LLMC_RT_E_EXEC && strstr(err.msg, "a residual needs exactly one output, not 2"),
          "k_linear_tiles refuses a residual with two outputs: %s", err.msg);
    halves[1].dims[0] = 7;
    st = k_linear_tiles(kt, &vx, t, &ws, NULL, NULL, 0, halves, 2, NULL, &err);
    CHECK(st == LLMC_RT_E_EXEC && !strncmp(err.msg, "output 1: ", 10),
          "k_linear_tiles names the output of other leading dims: %s", err.msg);
}

/* ---- Attention --------------------------------------------------------- */

typedef struct {
    int64_t H, G, D, R, chunk, P, S;
    float scale;
} attn_case;

typedef struct {
    attn_case c;
    float *pool, *q, *k, *v, *cs, *sn;
    uint32_t *slot;
    int64_t n_chunks;
    uint64_t slot_bytes;
} attn_data;

/* Cache row of kv head g at position t (kernels.h: per chunk K then V, each
 * [kv_heads, chunk, head_dim]). */
static float *cache_at(const attn_data *d, int which, int64_t g, int64_t t)
{
    const attn_case *c = &d->c;
    float *chunk = (float *)((uint8_t *)d->pool + d->slot[t / c->chunk] * d->slot_bytes);
    return chunk + which * c->G * c->chunk * c->D + (g * c->chunk + t % c->chunk) * c->D;
}

/* Random history at [0, P), random new q, k, v; slots in reverse order. */
static void attn_make(attn_data *d, const attn_case *c, float k_boost)
{
    d->c = *c;
    int64_t ctx = c->P + c->S;
    d->n_chunks = (ctx + c->chunk - 1) / c->chunk;
    d->slot_bytes = (uint64_t)(2 * c->G * c->chunk * c->D * 4 + 63) / 64 * 64;
    d->pool = calloc((size_t)(d->slot_bytes * (uint64_t)d->n_chunks / 4), sizeof(float));
    d->slot = malloc(sizeof *d->slot * (size_t)d->n_chunks);
    for (int64_t i = 0; i < d->n_chunks; i++)
        d->slot[i] = (uint32_t)(d->n_chunks - 1 - i);
    for (int64_t t = 0; t < c->P; t++)
        for (int64_t g = 0; g < c->G; g++)
            for (int64_t i = 0; i < c->D; i++) {
                /* some keys much larger than the rest: scores far above phi */
                float boost = t % 97 == 50 ? k_boost : 1.0f;
                cache_at(d, 0, g, t)[i] = frand() * boost;
                cache_at(d, 1, g, t)[i] = frand();
            }
    d->q = rand_floats(c->S * c->H * c->D);
    d->k = rand_floats(c->S * c->G * c->D);
    d->v = rand_floats(c->S * c->G * c->D);
    int64_t R = c->R ? c->R : 1;
    d->cs = malloc(sizeof(float) * (size_t)(ctx * R));
    d->sn = malloc(sizeof(float) * (size_t)(ctx * R));
    for (int64_t p = 0; p < ctx; p++)
        for (int64_t i = 0; i < c->R; i++) {
            double theta = (double)p * pow(10000.0, -2.0 * (double)(i % (c->R / 2)) / (double)c->R);
            d->cs[p * c->R + i] = (float)cos(theta);
            d->sn[p * c->R + i] = (float)sin(theta);
        }
}

static void attn_free(attn_data *d)
{
    free(d->pool);
    free(d->slot);
    free(d->q);
    free(d->k);
    free(d->v);
    free(d->cs);
    free(d->sn);
}

static llmc_rt_status attn_run(const rt_kernels *kt, const attn_data *d, float *o,
                               const rt_parallel *par)
{
    const attn_case *c = &d->c;
    rt_kv_cache cache = {(uint8_t *)d->pool, d->slot, d->slot_bytes, c->chunk, LLMC_RT_F32};
    rt_attention_attrs a = {c->H, c->G, c->D, c->R, c->scale, NULL, NULL, 0.0f, 0, 0.0f};
    rt_view vq = {LLMC_RT_F32, 3, {1, c->S, c->H * c->D}, d->q},
            vk = {LLMC_RT_F32, 3, {1, c->S, c->G * c->D}, d->k},
            vv = {LLMC_RT_F32, 3, {1, c->S, c->G * c->D}, d->v},
            vc = {LLMC_RT_F32, 2, {c->P + c->S, c->R}, d->cs},
            vs = {LLMC_RT_F32, 2, {c->P + c->S, c->R}, d->sn},
            vo = {LLMC_RT_F32, 3, {1, c->S, c->H * c->D}, o};
    return k_attention_kernels(kt, &a, &vq, &vk, &vv, c->R ? &vc : NULL, c->R ? &vs : NULL,
                               &cache, c->P, &vo, par, &err);
}

/* Rotate-half RoPE of x [D] at position p, in double. */
static void rope_ref(const attn_data *d, const float *x, int64_t p, double *y)
{
    int64_t R = d->c.R, h = R / 2;
    for (int64_t i = 0; i < d->c.D; i++)
        y[i] = x[i];
    for (int64_t i = 0; i < R; i++) {
        double rot = i < h ? -(double)x[i + h] : x[i - h];
        y[i] = x[i] * (double)d->cs[p * R + i] + rot * d->sn[p * R + i];
    }
}

/* Key (which 0, rotated) or value row of kv head g at position t, double;
 * history from the cache as filled by attn_make, new rows from k, v. */
static void kv_ref(const attn_data *d, int which, int64_t g, int64_t t, double *y)
{
    const attn_case *c = &d->c;
    if (t < c->P) {
        for (int64_t i = 0; i < c->D; i++)
            y[i] = cache_at(d, which, g, t)[i];
        return;
    }
    const float *src = (which ? d->v : d->k) + ((t - c->P) * c->G + g) * c->D;
    if (which)
        for (int64_t i = 0; i < c->D; i++)
            y[i] = src[i];
    else
        rope_ref(d, src, t, y);
}

/* softmax(scale q.K) V for every (s, h), in double, with the max subtracted. */
static double *attn_ref(const attn_data *d)
{
    const attn_case *c = &d->c;
    int64_t D = c->D, ctx = c->P + c->S;
    double *o = calloc((size_t)(c->S * c->H * D), sizeof *o), *q = malloc(sizeof *q * (size_t)D);
    double *kv = malloc(sizeof *kv * (size_t)D), *sc = malloc(sizeof *sc * (size_t)ctx);
    for (int64_t s = 0; s < c->S; s++)
        for (int64_t h = 0; h < c->H; h++) {
            int64_t g = h / (c->H / c->G), n = c->P + s + 1;
            double mx = -INFINITY, l = 0.0, *out = o + (s * c->H + h) * D;
            rope_ref(d, d->q + (s * c->H + h) * D, c->P + s, q);
            for (int64_t t = 0; t < n; t++) {
                kv_ref(d, 0, g, t, kv);
                sc[t] = 0.0;
                for (int64_t i = 0; i < D; i++)
                    sc[t] += q[i] * c->scale * kv[i];
                mx = fmax(mx, sc[t]);
            }
            for (int64_t t = 0; t < n; t++) {
                double p = exp(sc[t] - mx);
                l += p;
                kv_ref(d, 1, g, t, kv);
                for (int64_t i = 0; i < D; i++)
                    out[i] += p * kv[i];
            }
            for (int64_t i = 0; i < D; i++)
                out[i] /= l;
        }
    free(q);
    free(kv);
    free(sc);
    return o;
}

static void test_attention_case(const rt_kernels *kt, const attn_case *c, float k_boost,
                                const char *what)
{
    const char *loops = kt ? kt->target : "portable";
    attn_data d;
    attn_make(&d, c, k_boost);
    int64_t n = c->S * c->H * c->D;
    float *want = malloc(sizeof *want * (size_t)n), *got = malloc(sizeof *got * (size_t)n);
    bool ok = attn_run(kt, &d, want, NULL) == LLMC_RT_OK;
    double *ref = attn_ref(&d), worst = 0.0;
    for (int64_t i = 0; i < n; i++)
        worst = fmax(worst, rel_err(want[i], ref[i]));
    CHECK(ok && worst <= 1e-5, "Attention (%s) %s: H %d G %d D %d R %d, chunk %d, P %d, S %d, "
          "scale %g: max rel err %.2g vs double", loops, what, (int)c->H, (int)c->G, (int)c->D, (int)c->R,
          (int)c->chunk, (int)c->P, (int)c->S, c->scale, worst);
    bool same = true;
    for (int i = 0; i < PARALLELS; i++) {
        rt_parallel par = parallel_number(i);
        memset(got, 0, sizeof *got * (size_t)n);
        same = same && attn_run(kt, &d, got, &par) == LLMC_RT_OK &&
               !memcmp(got, want, sizeof *got * (size_t)n);
        parallel_done(&par);
    }
    CHECK(ok && same, "Attention (%s) %s P %d S %d: fake 1/2/3 threads and a pool of 2 give the "
          "serial bits", loops, what, (int)c->P, (int)c->S);
    free(want);
    free(got);
    free(ref);
    attn_free(&d);
}

/* A NaN or an infinity in one query head: that head's output is NaN (no
 * undefined float-to-int conversion on the way), the others keep their bits. */
static void test_attention_nan(const rt_kernels *kt)
{
    static const float bad[] = {NAN, INFINITY};
    attn_case c = {14, 2, 64, 64, 64, 300, 1, 0.125f};
    for (int b = 0; b < 2; b++) {
        attn_data d;
        attn_make(&d, &c, 1.0f);
        int64_t n = c.H * c.D;
        float *want = malloc(sizeof *want * (size_t)n), *got = malloc(sizeof *got * (size_t)n);
        bool ok = attn_run(kt, &d, want, NULL) == LLMC_RT_OK;
        d.q[3] = bad[b]; /* head 0 */
        ok = ok && attn_run(kt, &d, got, NULL) == LLMC_RT_OK;
        bool head0_nan = true;
        for (int64_t i = 0; i < c.D; i++)
            head0_nan = head0_nan && isnan(got[i]);
        CHECK(ok && head0_nan && !memcmp(got + c.D, want + c.D, sizeof *got * (size_t)(n - c.D)),
              "Attention (%s): %s in head 0's query gives NaN there, the other heads unchanged",
              kt ? kt->target : "portable", b ? "an infinity" : "a NaN");
        free(want);
        free(got);
        attn_free(&d);
    }
}

static void test_attention(const rt_kernels *kt)
{
    static const struct {
        attn_case c;
        float k_boost;
        const char *what;
    } cases[] = {
        {{14, 2, 64, 64, 64, 0, 1, 0.125f}, 1.0f, "decode (GQA 14/2)"},
        {{14, 2, 64, 64, 64, 1, 1, 0.125f}, 1.0f, "decode (GQA 14/2)"},
        {{14, 2, 64, 64, 64, 100, 1, 0.125f}, 1.0f, "decode (GQA 14/2)"},
        {{14, 2, 64, 64, 64, 255, 1, 0.125f}, 1.0f, "decode (GQA 14/2)"},
        {{14, 2, 64, 64, 64, 256, 1, 0.125f}, 1.0f, "decode (GQA 14/2)"},
        {{14, 2, 64, 64, 64, 1000, 1, 0.125f}, 1.0f, "decode (GQA 14/2)"},
        {{14, 2, 64, 32, 64, 700, 3, 0.125f}, 1.0f, "3-token step"},
        {{4, 4, 33, 16, 16, 130, 50, 0.17f}, 1.0f, "chunked prefill (MHA, odd head_dim)"},
        {{14, 2, 64, 64, 64, 0, 150, 0.125f}, 1.0f, "prefill"},
        {{4, 1, 256, 0, 32, 600, 1, 0.0625f}, 1.0f, "decode head_dim 256 (MQA)"},
        {{4, 1, 256, 0, 32, 40, 45, 0.0625f}, 1.0f, "prefill head_dim 256"},
        /* boosted keys: their scores reach phi + 32 and more (fallback) */
        {{14, 2, 64, 64, 64, 1000, 1, 0.125f}, 60.0f, "decode, keys x60 every 97"},
        {{4, 2, 64, 64, 64, 300, 40, 0.125f}, 60.0f, "prefill, keys x60 every 97"},
        /* every score large: most are far from phi, and exp(s - phi) would
         * overflow without the fallback */
        {{14, 2, 64, 64, 64, 1000, 1, 40.0f}, 1.0f, "decode, scale 40"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        test_attention_case(kt, &cases[i].c, cases[i].k_boost, cases[i].what);
    test_attention_nan(kt);
}

#if defined(__x86_64__)
/* The AVX2 attention loops on their own: a key's score has the same bits
 * alone as in a group (phi relies on it), both loops against double. */
static void test_attention_loops_avx2(void)
{
    enum { NK = 13, DIM = 37 };
    float *q = rand_floats(DIM), *k = rand_floats(NK * DIM), *p = rand_floats(NK);
    float *o = rand_floats(DIM), scores[NK], alone;
    double worst = 0.0, worst_o = 0.0;
    bool same = true;
    rt_attn_scores_avx2(q, k, NK, DIM, scores);
    for (int t = 0; t < NK; t++) {
        rt_attn_scores_avx2(q, k + t * DIM, 1, DIM, &alone);
        same = same && alone == scores[t];
        worst = fmax(worst, rel_err(scores[t], dot_ref(q, k + t * DIM, DIM)));
    }
    double want[DIM];
    for (int i = 0; i < DIM; i++) {
        want[i] = o[i];
        for (int t = 0; t < NK; t++)
            want[i] += (double)p[t] * k[t * DIM + i];
    }
    rt_attn_accumulate_avx2(o, k, p, NK, DIM);
    for (int i = 0; i < DIM; i++)
        worst_o = fmax(worst_o, rel_err(o[i], want[i]));
    CHECK(same && worst <= 1e-5 && worst_o <= 1e-5, "rt_attn_scores_avx2 / accumulate, %d keys "
          "of %d: a score alone = in its group; max rel err %.2g, %.2g", NK, DIM, worst, worst_o);
    free(q);
    free(k);
    free(p);
    free(o);
}

/* rt_attn_exp_avx2 against double exp over [-87, 88] (n not a multiple of
 * 8: the masked tail), and the portable loop's edges: below -87 (and -inf)
 * 0, above 88 (and +inf) exp(88), NaN NaN. */
static void test_attn_exp_avx2(void)
{
    enum { N = 1003 };
    static float p[N], x[N];
    const float off = 0.75f;
    for (int t = 0; t < N; t++) {
        p[t] = off - 87.0f + 175.0f * (float)t / (N - 1);
        x[t] = p[t] - off; /* the argument, rounded as the kernel rounds it */
    }
    rt_attn_exp_avx2(p, N, off);
    double worst = 0.0;
    for (int t = 0; t < N; t++)
        worst = fmax(worst, rel_err(p[t], exp((double)x[t])));
    float edge[] = {-90.0f, -INFINITY, 89.0f, INFINITY, NAN, 0.0f, -87.5f};
    rt_attn_exp_avx2(edge, 7, 0.0f);
    bool edges = edge[0] == 0.0f && edge[1] == 0.0f && rel_err(edge[2], exp(88.0)) <= 3e-7 &&
                 rel_err(edge[3], exp(88.0)) <= 3e-7 && isnan(edge[4]) && edge[5] == 1.0f &&
                 edge[6] == 0.0f;
    CHECK(worst <= 2.4e-7 && edges, "rt_attn_exp_avx2: %d values of [-87, 88] within %.2g of "
          "double exp; below -87 0, above 88 exp(88), NaN NaN", N, worst);
}
#endif

int main(void)
{
    srand(11);
    test_ftile("rt_ftile_generic", rt_ftile_generic, 16, 6);
    test_ftile("rt_ftile_generic", rt_ftile_generic, 5, 3);
    test_ftile("rt_ftile_generic", rt_ftile_generic, 1, 4);
    rt_kernels generic16 = {.target = "generic hp 16", .f_hp = 16, .f_ep = 6,
                            .ftile = rt_ftile_generic};
    rt_kernels generic5 = {.target = "generic hp 5", .f_hp = 5, .f_ep = 3,
                           .ftile = rt_ftile_generic};
    test_linear_tiles(&generic16);
    test_linear_tiles(&generic5);
    test_linear_threads(&generic5);
    test_linear_checks(&generic16);
#if defined(__x86_64__)
    if (have_avx2()) {
        rt_kernels avx2 = {.target = "avx2", .f_hp = 16, .f_ep = 6, .ftile = rt_ftile_avx2,
                           .attn_scores = rt_attn_scores_avx2,
                           .attn_accumulate = rt_attn_accumulate_avx2,
                           .attn_exp = rt_attn_exp_avx2};
        test_ftile("rt_ftile_avx2", rt_ftile_avx2, 16, 6);
        test_linear_tiles(&avx2);
        test_linear_threads(&avx2);
        test_attention_loops_avx2();
        test_attn_exp_avx2();
        test_attention(&avx2);
    } else
        CHECK(true, "# SKIP this CPU has no AVX2/FMA: rt_ftile_avx2 not tested");
#endif
    test_attention(NULL);
#if defined(__x86_64__)
    /* last: the random draws of the tests above stay those they were tuned on */
    if (rt_cpu_x86_avx512_vnni_ok()) {
        test_ftile("rt_ftile_avx512", rt_ftile_avx512, 16, 6);
        test_ftile_same("rt_ftile_avx512", rt_ftile_avx512, rt_ftile_avx2, 16, 6);
        test_linear_tiles(&rt_kernels_avx2_avx512);
        test_linear_threads(&rt_kernels_avx2_avx512);
        test_ftile_pair_same();
        test_linear_pairs(&rt_kernels_avx2_avx512);
    } else
        CHECK(true, "# SKIP this CPU has no AVX-512 VNNI: rt_ftile_avx512 not tested");
#endif
    return TAP_DONE();
}
