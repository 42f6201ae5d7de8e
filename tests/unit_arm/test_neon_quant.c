/* The NEON kernel tables (runtime/kernels/arm_neon/) against a reference
 * written here from the format spec in quant_format.h: plain scalar C, no
 * code shared with the kernels.  Built by `make aarch64-tests` and run
 * under qemu-aarch64 by tests/t_neon.sh.
 *
 *   test_neon_quant [DOT I8MM]   the CPU checks must say DOT / I8MM (0 or 1;
 *                                default 1 1); a table's qtile is tested only
 *                                where its CPU check holds (elsewhere its
 *                                instructions raise SIGILL)
 *
 * quantize_rows: bytes exact (a scale per (row, group)), including that
 * nothing outside its rows' values, scales and sums is written.  qtile:
 * every (activation tile, weight tile) of odd shapes, with rows == 1 as
 * well on each, binary16 scales (and mins) or float32 scales and zero
 * points (bits 8 q -128 included); unit scales (activation scales 1,
 * binary16 mins 1, any zero point) make the output the exact int32 sums,
 * so those must match to the bit; random scales must match the fp64
 * reference within 1e-5 of the magnitude of the terms summed.
 *
 * Attention over float16 and int8 KV rows: scores and weighted sums
 * against fp64 sums of the values the rows hold (decoded here from the
 * binary16 and int8+scale layouts of tensor_traits.h), within 1e-5 of the
 * magnitude of the terms, on head_dims that are not multiples of the
 * vector width; a key's score must not depend on the keys beside it.
 * SwiGLU: within 4 ulp of silu(g) * u computed with libm's expf in double,
 * and NaN, infinities and underflow as the portable loop has them.
 * RMSNorm rows: bit for bit the row the kernel_table.h entry specifies
 * (element j's square into compensated lane j % 8, then the lanes in
 * order), written out here in scalar C, on lengths around the 8 lanes and
 * values over 60 binades; within 2 ulp of the row computed in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "q_neon.h"
#include "tap.h"
#include "tensor_traits.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

static int rnd_int(int lo, int hi) /* inclusive */
{
    return lo + (int)(rnd() % (uint32_t)(hi - lo + 1));
}

static float rnd_float(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rnd() >> 8) / 16777216.0f;
}

/* ---- reference activations: quantized per (row, group), then tiles ---- */

typedef struct {
    int64_t m, k, groups, group;
    int8_t *q;      /* [m][k] */
    float *scale;   /* [m][groups] */
    int32_t *sums;  /* [m][groups] */
} ref_act;

/* Per (row, group) abs-max (127 / amax overflowing: zeros), or (scale > 0)
 * the static scale: q = x / scale clamped to +-127 before the rounding. */
static void ref_quantize(const float *x, int64_t stride, const rt_qact_shape *s, float scale,
                         ref_act *r)
{
    r->m = s->m, r->k = s->k, r->group = s->group, r->groups = s->kp / s->group;
    r->q = calloc((size_t)(s->m * s->k) + 1, 1);
    r->scale = calloc((size_t)(s->m * r->groups) + 1, sizeof(float));
    r->sums = calloc((size_t)(s->m * r->groups) + 1, sizeof(int32_t));
    for (int64_t i = 0; i < s->m; i++)
        for (int64_t g = 0; g < r->groups; g++) {
            const float *row = x + i * stride;
            int64_t c0 = g * s->group, c1 = c0 + s->group < s->k ? c0 + s->group : s->k;
            float amax = 0.0f;
            for (int64_t c = c0; c < c1; c++)
                amax = fmaxf(amax, fabsf(row[c]));
            float inv = scale > 0.0f ? 1.0f / scale : amax > 0.0f ? 127.0f / amax : 0.0f;
            if (isinf(inv))
                inv = 0.0f;
            r->scale[i * r->groups + g] = scale > 0.0f ? scale : inv > 0.0f ? amax / 127.0f : 0.0f;
            for (int64_t c = c0; c < c1; c++) {
                float v = fmaxf(fminf(row[c] * inv, 127.0f), -127.0f);
                int8_t q = (int8_t)rintf(v); /* default mode: ties to even */
                r->q[i * s->k + c] = q;
                r->sums[i * r->groups + g] += q;
            }
        }
}

static void ref_act_free(ref_act *r)
{
    free(r->q);
    free(r->scale);
    free(r->sums);
}

/* Rows [r0, r1) of r into the activation format: data [mp/ep][kp/lp][ep][lp]
 * (columns < k only), scales, sums. */
static void ref_write_act(const ref_act *r, const rt_qact_shape *s, int64_t r0, int64_t r1,
                          uint8_t *buf)
{
    for (int64_t i = r0; i < r1; i++) {
        int64_t et = i / s->ep, e = i % s->ep;
        for (int64_t c = 0; c < s->k; c++) {
            int64_t t = c / s->lp, l = c % s->lp;
            buf[((et * (s->kp / s->lp) + t) * s->ep + e) * s->lp + l] =
                (uint8_t)r->q[i * s->k + c];
        }
        memcpy(buf + rt_qact_scales_offset(s) + 4 * i * r->groups, &r->scale[i * r->groups],
               4 * (size_t)r->groups);
        memcpy(buf + rt_qact_sums_offset(s) + 4 * i * r->groups, &r->sums[i * r->groups],
               4 * (size_t)r->groups);
    }
}

/* ---- reference weights: q values and coefficients, written as blocks ---- */

typedef struct {
    int bits;
    bool float_coef;    /* float32 scales and zero points, else binary16 */
    int64_t np, kp, groups;
    int *q;             /* [np][kp], 0 in padding */
    float *scale;       /* [np][groups], 0 in padding rows (binary16 values) */
    float *min;         /* [np][groups]: binary16 bits 4 min, or float32 zero point */
} ref_w;

/* Random q (uint4, int8, or int8 with -128 for float32 coefficients);
 * unit: scale 1 and min 1 (binary16 bits 4) or any zero point, so the
 * output is the exact integer sum. */
static void ref_make_weights(const rt_qweight_shape *s, bool unit, ref_w *w)
{
    w->bits = s->bits, w->np = s->np, w->kp = s->kp, w->groups = s->kp / s->group;
    w->float_coef = s->coef == RT_QCOEF_FLOAT;
    w->q = calloc((size_t)(s->np * s->kp) + 1, sizeof(int));
    w->scale = calloc((size_t)(s->np * w->groups) + 1, sizeof(float));
    w->min = calloc((size_t)(s->np * w->groups) + 1, sizeof(float));
    int lo = s->bits == 4 ? 0 : w->float_coef ? -128 : -127, hi = s->bits == 4 ? 15 : 127;
    for (int64_t h = 0; h < s->n; h++) {
        for (int64_t c = 0; c < s->k; c++)
            w->q[h * s->kp + c] = rnd_int(lo, hi);
        for (int64_t g = 0; g < w->groups; g++) {
            float scale = unit ? 1.0f : rnd_float(0.001f, 0.05f);
            float min = unit ? 1.0f : rnd_float(-0.4f, 0.1f);
            if (w->float_coef) {
                w->scale[h * w->groups + g] = scale;
                w->min[h * w->groups + g] = (float)rnd_int(lo, hi);
            } else {
                w->scale[h * w->groups + g] = rt_half_to_float(rt_float_to_half(scale));
                w->min[h * w->groups + g] =
                    s->bits == 4 ? rt_half_to_float(rt_float_to_half(min)) : 0.0f;
            }
        }
    }
}

static void ref_w_free(ref_w *w)
{
    free(w->q);
    free(w->scale);
    free(w->min);
}

static void put_nibble(uint8_t *b, int high, int v)
{
    *b = (uint8_t)(high ? (*b & 0x0f) | (v << 4) : (*b & 0xf0) | v);
}

/* Coefficient f at p: binary16 or float32. */
static void put_coef(uint8_t *p, float f, bool float_coef)
{
    uint16_t h = rt_float_to_half(f);
    if (float_coef)
        memcpy(p, &f, 4);
    else
        memcpy(p, &h, 2);
}

/* Block (ht, g): group/lp tiles of [hp][lp] (bits 4: tiles 2u, 2u+1 in the
 * low and high nibbles of the same hp*lp bytes), hp scales, hp mins or
 * zero points. */
static void ref_write_block(const ref_w *w, const rt_qweight_shape *s, int64_t ht, int64_t g,
                            uint8_t *block)
{
    int64_t hp = s->hp, lp = s->lp, bytes = w->float_coef ? 4 : 2;
    for (int64_t t = 0; t < s->group / lp; t++)
        for (int64_t r = 0; r < hp; r++)
            for (int64_t l = 0; l < lp; l++) {
                int v = w->q[(ht * hp + r) * s->kp + g * s->group + t * lp + l];
                if (s->bits == 8)
                    block[t * hp * lp + r * lp + l] = (uint8_t)(int8_t)v;
                else
                    put_nibble(block + (t / 2) * hp * lp + r * lp + l, (int)(t & 1), v);
            }
    uint8_t *coefs = block + hp * s->group * s->bits / 8;
    for (int64_t r = 0; r < hp; r++) {
        int64_t at = (ht * hp + r) * w->groups + g;
        put_coef(coefs + bytes * r, w->scale[at], w->float_coef);
        if (s->bits == 4 || w->float_coef)
            put_coef(coefs + bytes * (hp + r), w->min[at], w->float_coef);
    }
}

static uint8_t *ref_pack_weights(const ref_w *w, const rt_qweight_shape *s)
{
    uint64_t block_bytes = (uint64_t)(s->hp * s->group * s->bits / 8) +
                           (w->float_coef ? 4u : 2u) * (uint64_t)s->hp *
                               (s->bits == 4 || w->float_coef ? 2u : 1u);
    uint8_t *buf = calloc((size_t)(block_bytes * (uint64_t)(s->np / s->hp * w->groups)) + 1, 1);
    for (int64_t ht = 0; ht < s->np / s->hp; ht++)
        for (int64_t g = 0; g < w->groups; g++)
            ref_write_block(w, s, ht, g,
                            buf + (uint64_t)(ht * w->groups + g) * block_bytes);
    return buf;
}

/* z[row][h] in fp64: per group sx times scale * acc + min * sum (binary16)
 * or scale * (acc - zero * sum) (float32); *mag = the sum of the terms'
 * magnitudes. */
static double ref_z(const ref_act *a, const ref_w *w, int64_t row, int64_t h, double *mag)
{
    double z = 0.0;
    *mag = 0.0;
    for (int64_t g = 0; g < w->groups; g++) {
        int64_t acc = 0;
        for (int64_t c = g * a->group; c < (g + 1) * a->group && c < a->k; c++)
            acc += (int64_t)a->q[row * a->k + c] * w->q[h * w->kp + c];
        double sx = a->scale[row * a->groups + g], sum = a->sums[row * a->groups + g];
        double scale = w->scale[h * w->groups + g], min = w->min[h * w->groups + g];
        double t1 = sx * scale * (double)acc;
        double t2 = sx * (w->float_coef ? -scale * min * sum : min * sum);
        z += t1 + t2;
        *mag += fabs(t1) + fabs(t2);
    }
    return z;
}

/* ---- cases ---- */

typedef struct {
    int64_t m, n, k;
} shape;

static float *random_x(int64_t m, int64_t k, int64_t stride)
{
    float *x = calloc((size_t)(m * stride) + 1, sizeof(float));
    for (int64_t i = 0; i < m; i++) {
        float range = rnd_float(0.01f, 100.0f);
        for (int64_t c = 0; c < k; c++)
            x[i * stride + c] = rnd_float(-range, range);
    }
    return x;
}

/* Rows that test the edges: all zero (amax 0), exact halves (amax 127, so
 * x * 127 / amax = x: ties to even), tiny values. */
static void edge_rows(float *x, int64_t m, int64_t k, int64_t stride)
{
    for (int64_t c = 0; c < k; c++) {
        if (m > 1)
            x[stride + c] = 0.0f;
        if (m > 2)
            x[2 * stride + c] = c == 0 ? -127.0f : (float)((c * 37) % 254 - 127) + 0.5f;
        if (m > 3)
            x[3 * stride + c] = rnd_float(-1e-20f, 1e-20f);
    }
}

#define GUARD 8
#define SENTINEL 0x7fc0abcdu /* a NaN no kernel computes */

static bool is_sentinel(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u == SENTINEL;
}

static bool close_enough(float got, double want, double mag, bool exact)
{
    if (exact)
        return (double)got == want;
    return fabs((double)got - want) <= 1e-5 * mag + 1e-30;
}

typedef struct {
    const rt_kernels *kt;
    const rt_qtile_args *a;
    const ref_act *ra;
    const ref_w *rw;
    bool exact;
    char *why;
} tile_check;

/* One qtile call against the reference; writes the first problem to why. */
static bool check_tile(const tile_check *tc, int64_t et, int rows, int64_t ht)
{
    int hp = tc->kt->q_hp, ep = tc->kt->q_ep;
    float out[64 * 64 + GUARD];
    uint32_t sentinel = SENTINEL;
    for (int i = 0; i < ep * hp + GUARD; i++)
        memcpy(&out[i], &sentinel, 4);
    tc->kt->qtile(tc->a, et, rows, ht, out);
    for (int e = 0; e < rows; e++)
        for (int h = 0; h < hp; h++) {
            double mag, want = ref_z(tc->ra, tc->rw, et * ep + e, ht * hp + h, &mag);
            float got = out[e * hp + h];
            if (!close_enough(got, want, mag, tc->exact)) {
                sprintf(tc->why, "et %ld rows %d ht %ld: out[%d][%d] = %.9g, want %.9g (mag %.3g)",
                        (long)et, rows, (long)ht, e, h, got, want, mag);
                return false;
            }
        }
    for (int i = rows * hp; i < ep * hp + GUARD; i++)
        if (!is_sentinel(out[i])) {
            sprintf(tc->why, "et %ld rows %d ht %ld: wrote out[%d] past rows * hp", (long)et,
                    rows, (long)ht, i);
            return false;
        }
    return true;
}

/* Every (et, ht) of x [m, k] by W [n, k], with the tile's rows and with
 * rows == 1 (the GEMV path). */
static bool qtile_case(const rt_kernels *kt, int bits, rt_qcoef coef, int64_t group, shape sh,
                       bool exact, char *why)
{
    rt_qweight_shape ws;
    rt_qact_shape xs;
    if (!rt_qweight_shape_init_coef(&ws, bits, kt->q_hp, kt->q_lp, sh.n, sh.k, group, coef) ||
        !rt_qact_shape_init(&xs, kt->q_ep, kt->q_lp, sh.m, sh.k, group)) {
        sprintf(why, "shape rejected");
        return false;
    }
    int64_t stride = sh.k + 3;
    float *x = random_x(sh.m, sh.k, stride);
    edge_rows(x, sh.m, sh.k, stride);
    ref_act ra;
    ref_w rw;
    ref_quantize(x, stride, &xs, 0.0f, &ra);
    for (int64_t i = 0; exact && i < sh.m * ra.groups; i++)
        ra.scale[i] = 1.0f; /* integer outputs */
    uint8_t *xq = calloc((size_t)rt_qact_bytes(&xs) + 1, 1);
    ref_write_act(&ra, &xs, 0, sh.m, xq);
    ref_make_weights(&ws, exact, &rw);
    uint8_t *w = ref_pack_weights(&rw, &ws);
    rt_qtile_args a = {xq, xs, w, ws, 0};
    tile_check tc = {kt, &a, &ra, &rw, exact, why};
    bool ok = true;
    for (int64_t et = 0; ok && et < xs.mp / xs.ep; et++) {
        int rows = (int)(sh.m - et * xs.ep < xs.ep ? sh.m - et * xs.ep : xs.ep);
        for (int64_t ht = 0; ok && ht < ws.np / ws.hp; ht++)
            ok = check_tile(&tc, et, rows, ht) && (rows == 1 || check_tile(&tc, et, 1, ht));
    }
    free(x);
    free(xq);
    free(w);
    ref_act_free(&ra);
    ref_w_free(&rw);
    return ok;
}

/* Group sizes 32, 64, 128 and per channel (0: k rounded up to 2 * lp). */
static const int64_t GROUPS[] = {32, 64, 128, 0};

static int64_t group_of(int64_t g, int64_t k, int lp)
{
    return g ? g : rt_qround_up(k < 1 ? 1 : k, 2 * lp);
}

static void test_qtile(const rt_kernels *kt)
{
    int ep = kt->q_ep;
    const shape shapes[] = {
        {1, 8, 32}, {1, 20, 100}, {5, 17, 77}, {ep, 24, 200},
        {ep + 1, 9, 130}, {2 * ep + 7, 33, 45}, {ep - 1, 16, 259},
    };
    char why[256];
    for (int coef = RT_QCOEF_HALF; coef <= RT_QCOEF_FLOAT; coef += 2)
        for (int bits = 8; bits >= 4; bits -= 4)
            for (size_t gi = 0; gi < sizeof GROUPS / sizeof GROUPS[0]; gi++)
                for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
                    for (int exact = 0; exact < 2; exact++) {
                        shape sh = shapes[si];
                        int64_t group = group_of(GROUPS[gi], sh.k, kt->q_lp);
                        why[0] = 0;
                        CHECK(qtile_case(kt, bits, (rt_qcoef)coef, group, sh, exact, why),
                              "%s qtile bits %d float%d coefficients group %ld m %ld n %ld k "
                              "%ld, %s scales %s", kt->target, bits, coef * 8, (long)group,
                              (long)sh.m, (long)sh.n, (long)sh.k,
                              exact ? "unit (exact int32)" : "random", why);
                    }
}

/* quantize_rows over [0, split) and [split, m) into a buffer of 0xa5: the
 * bytes must be the reference's there and 0xa5 everywhere else; scale > 0:
 * a static scale. */
static bool quantize_case(const rt_kernels *kt, int64_t m, int64_t k, int64_t group,
                          int64_t split, float scale, char *why)
{
    rt_qact_shape xs;
    if (!rt_qact_shape_init(&xs, kt->q_ep, kt->q_lp, m, k, group)) {
        sprintf(why, "shape rejected");
        return false;
    }
    int64_t stride = k + 5;
    float *x = random_x(m, k, stride);
    edge_rows(x, m, k, stride);
    ref_act ra;
    ref_quantize(x, stride, &xs, scale, &ra);
    size_t bytes = (size_t)rt_qact_bytes(&xs);
    uint8_t *want = malloc(bytes + 1), *got = malloc(bytes + 1);
    memset(want, 0xa5, bytes + 1);
    memset(got, 0xa5, bytes + 1);
    ref_write_act(&ra, &xs, 0, m, want);
    kt->quantize_rows(x, stride, &xs, 0, split, scale, got);
    kt->quantize_rows(x, stride, &xs, split, m, scale, got);
    size_t i = 0;
    while (i < bytes + 1 && got[i] == want[i])
        i++;
    if (i <= bytes)
        sprintf(why, "byte %zu of %zu is 0x%02x, want 0x%02x (scales at %lu, sums at %lu)", i,
                bytes, got[i], want[i], (unsigned long)rt_qact_scales_offset(&xs),
                (unsigned long)rt_qact_sums_offset(&xs));
    free(x);
    free(want);
    free(got);
    ref_act_free(&ra);
    return i > bytes;
}

static void test_quantize(const rt_kernels *kt)
{
    int ep = kt->q_ep;
    const int64_t ms[] = {1, 4, ep + 1, 2 * ep + 3}, ks[] = {1, 7, 33, 100, 259};
    char why[256];
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (size_t gi = 0; gi < sizeof GROUPS / sizeof GROUPS[0]; gi += 2) {
                int64_t m = ms[mi], k = ks[ki], group = group_of(GROUPS[gi], k, kt->q_lp);
                why[0] = 0;
                CHECK(quantize_case(kt, m, k, group, m / 2, 0.0f, why),
                      "%s quantize_rows m %ld k %ld group %ld (rows [0,%ld) then [%ld,%ld)) %s",
                      kt->target, (long)m, (long)k, (long)group, (long)(m / 2), (long)(m / 2),
                      (long)m, why);
            }
    /* a static scale small enough that many values clamp */
    bool same = true;
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            int64_t group = group_of(GROUPS[0], ks[ki], kt->q_lp);
            why[0] = 0;
            if (!quantize_case(kt, ms[mi], ks[ki], group, ms[mi] / 2, 0.004f, why)) {
                printf("# m %ld k %ld: %s\n", (long)ms[mi], (long)ks[ki], why);
                same = false;
            }
        }
    CHECK(same, "%s quantize_rows with a static scale (many values clamped): the reference's "
          "bytes on %zu shapes", kt->target, sizeof ms / sizeof ms[0] * (sizeof ks / sizeof ks[0]));
}

static void test_table(const rt_kernels *kt, const char *target, int hp, int lp, int ep)
{
    CHECK(strcmp(kt->target, target) == 0 && kt->q_hp == hp && kt->q_lp == lp &&
              kt->q_ep == ep && kt->f_hp == 0 && kt->f_ep == 0 && kt->quantize_rows &&
              kt->qtile && !kt->ftile,
          "table %s: hp %d lp %d ep %d, quantize_rows and qtile set, no fp32 tiles", target,
          hp, lp, ep);
}


/* binary16 bits to float, from the format (1 sign, 5 exponent, 10 mantissa). */
static double half_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h >> 15 ? -v : v;
}

static uint16_t rnd_half(void)
{
    /* finite halves of magnitude < 4: exponents 0..16 */
    return (uint16_t)((rnd() & 0x8000u) | (uint32_t)rnd_int(0, 16) << 10 | (rnd() & 1023u));
}

static bool close_to(double got, double want, double magnitude)
{
    return fabs(got - want) <= 1e-5 * (magnitude + 1e-30);
}

static void test_attention_f16(const rt_kernels *kt, int64_t d, int64_t nk)
{
    float *q = malloc(sizeof(float) * (size_t)d), *scores = malloc(sizeof(float) * (size_t)nk);
    uint16_t *k = malloc(sizeof(uint16_t) * (size_t)(d * nk));
    float *o = malloc(sizeof(float) * (size_t)d), *p = malloc(sizeof(float) * (size_t)nk);
    for (int64_t i = 0; i < d; i++)
        q[i] = rnd_float(-2, 2), o[i] = rnd_float(-1, 1);
    for (int64_t i = 0; i < d * nk; i++)
        k[i] = rnd_half();
    for (int64_t t = 0; t < nk; t++)
        p[t] = rnd_float(0, 1);
    kt->attn_scores_f16(q, k, nk, d, scores);
    int bad = 0, moved = 0;
    for (int64_t t = 0; t < nk; t++) {
        double want = 0, mag = 0, alone;
        for (int64_t i = 0; i < d; i++) {
            want += q[i] * half_value(k[t * d + i]);
            mag += fabs(q[i] * half_value(k[t * d + i]));
        }
        bad += !close_to(scores[t], want, mag);
        float one;
        kt->attn_scores_f16(q, k + t * d, 1, d, &one);
        alone = one;
        moved += alone != scores[t];
    }
    CHECK(bad == 0, "[%s] float16 scores, d %lld, %lld keys: %d off", kt->target, (long long)d,
          (long long)nk, bad);
    CHECK(moved == 0, "[%s] float16 score of a key alone = its score in the block", kt->target);
    double *want = malloc(sizeof(double) * (size_t)d), *mag = malloc(sizeof(double) * (size_t)d);
    for (int64_t i = 0; i < d; i++) {
        want[i] = o[i], mag[i] = fabs(o[i]);
        for (int64_t t = 0; t < nk; t++) {
            want[i] += p[t] * half_value(k[t * d + i]);
            mag[i] += fabs(p[t] * half_value(k[t * d + i]));
        }
    }
    kt->attn_accumulate_f16(o, k, p, nk, d);
    bad = 0;
    for (int64_t i = 0; i < d; i++)
        bad += !close_to(o[i], want[i], mag[i]);
    CHECK(bad == 0, "[%s] float16 weighted sum, d %lld, %lld keys: %d off", kt->target,
          (long long)d, (long long)nk, bad);
    free(q), free(scores), free(k), free(o), free(p), free(want), free(mag);
}

static void test_attention_i8(const rt_kernels *kt, int64_t d, int64_t nk)
{
    uint64_t row = rt_kv_row_bytes(LLMC_RT_I8, 0, d), at = rt_kv_scale_offset(d);
    uint8_t *k = calloc((size_t)(row * (uint64_t)nk), 1);
    float *q = malloc(sizeof(float) * (size_t)d), *scores = malloc(sizeof(float) * (size_t)nk);
    for (int64_t i = 0; i < d; i++)
        q[i] = rnd_float(-2, 2);
    for (int64_t t = 0; t < nk; t++) {
        float scale = rnd_float(0.001f, 0.05f);
        for (int64_t i = 0; i < d; i++)
            k[(uint64_t)t * row + (uint64_t)i] = (uint8_t)(int8_t)rnd_int(-127, 127);
        memcpy(k + (uint64_t)t * row + at, &scale, sizeof scale);
    }
    kt->attn_scores_i8(q, k, nk, d, scores);
    int bad = 0;
    for (int64_t t = 0; t < nk; t++) {
        float scale;
        double want = 0, mag = 0;
        memcpy(&scale, k + (uint64_t)t * row + at, sizeof scale);
        for (int64_t i = 0; i < d; i++) {
            double term = q[i] * (double)(int8_t)k[(uint64_t)t * row + (uint64_t)i] * scale;
            want += term, mag += fabs(term);
        }
        bad += !close_to(scores[t], want, mag);
    }
    CHECK(bad == 0, "[%s] int8 scores (value * row scale), d %lld, %lld keys: %d off",
          kt->target, (long long)d, (long long)nk, bad);
    free(k), free(q), free(scores);
}

static int64_t ulp_distance(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    ia = ia < 0 ? INT32_MIN - ia : ia;
    ib = ib < 0 ? INT32_MIN - ib : ib;
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

static float silu_reference(float x)
{
    return (float)(x / (1.0 + exp(-(double)x)));
}

static void test_swiglu(const rt_kernels *kt)
{
    enum { N = 4099 };
    static float g[N], u[N], y[N];
    for (int i = 0; i < N; i++)
        g[i] = rnd_float(-30, 30), u[i] = rnd_float(-2, 2);
    g[0] = 0.0f, g[1] = -0.0f, g[2] = 90.0f, g[3] = -110.0f, g[4] = 1e-30f, g[5] = -87.0f;
    kt->swiglu(g, u, y, N);
    int64_t worst = 0;
    for (int i = 0; i < N; i++) {
        int64_t dist = ulp_distance(y[i], silu_reference(g[i]) * u[i]);
        worst = dist > worst ? dist : worst;
    }
    CHECK(worst <= 4, "[%s] swiglu within 4 ulp of silu(g) * u on %d values (worst %lld)",
          kt->target, N, (long long)worst);
    float gs[5] = {NAN, INFINITY, -INFINITY, -200.0f, 3.0f}, us[5] = {1, 1, 1, 1, NAN}, ys[5];
    kt->swiglu(gs, us, ys, 5);
    CHECK(ys[0] != ys[0] && ys[1] == INFINITY && ys[2] != ys[2] && ys[3] == 0.0f &&
              ys[4] != ys[4],
          "[%s] swiglu of NaN, +inf, -inf (NaN, as -inf * 0), underflow and NaN up",
          kt->target);
}

/* One compensated sum (Neumaier): s + c carries what s lost. */
static void neumaier_add(float *s, float *c, float v)
{
    float t = *s + v;
    *c += fabsf(*s) >= fabsf(v) ? (*s - t) + v : (v - t) + *s;
    *s = t;
}

/* The RMSNorm row of the entry's contract, in scalar C. */
static void rmsnorm_reference(const float *x, const float *scale, float *y, int n, float eps)
{
    float s[8] = {0}, c[8] = {0}, ts = 0, tc = 0;
    for (int j = 0; j < n; j++)
        neumaier_add(&s[j % 8], &c[j % 8], x[j] * x[j]);
    for (int l = 0; l < 8; l++) {
        neumaier_add(&ts, &tc, s[l]);
        neumaier_add(&ts, &tc, c[l]);
    }
    float total = ts - ts == 0 ? ts + tc : ts;
    float inv = 1.0f / sqrtf(total / (float)n + eps);
    for (int j = 0; j < n; j++)
        y[j] = x[j] * inv * scale[j];
}

static void test_rmsnorm(const rt_kernels *kt)
{
    enum { N = 4867 };
    static float x[N], scale[N], want[N], got[N];
    static const int lengths[] = {1, 3, 7, 8, 9, 15, 16, 17, 896, N};
    bool bits = true, close = true;
    for (size_t k = 0; k < sizeof lengths / sizeof *lengths; k++) {
        int n = lengths[k];
        for (int i = 0; i < n; i++) {
            x[i] = ldexpf(rnd_float(0.5f, 1.0f), (int)(rnd() % 61) - 30) *
                   (rnd() % 2 ? 1.0f : -1.0f);
            scale[i] = rnd_float(-2, 2);
        }
        rmsnorm_reference(x, scale, want, n, 1e-5f);
        kt->rmsnorm_row(x, scale, got, n, 1e-5f, (float)n);
        bits &= memcmp(want, got, sizeof(float) * (size_t)n) == 0;
        double ss = 0;
        for (int i = 0; i < n; i++)
            ss += (double)x[i] * x[i];
        double inv = 1.0 / sqrt(ss / n + 1e-5);
        for (int i = 0; i < n; i++) {
            double ref = x[i] * inv * scale[i];
            close &= fabs(got[i] - ref) <= fabs(ref) * 2.4e-7 + 1e-37;
        }
    }
    CHECK(bits, "[%s] rmsnorm_row: the 8-lane compensated row's bits on 10 lengths",
          kt->target);
    CHECK(close, "[%s] rmsnorm_row within 2 ulp of the row in double", kt->target);
    float odd[9] = {1, 2, NAN, 4, 5, 6, 7, 8, 9}, ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, y9[9];
    kt->rmsnorm_row(odd, ones, y9, 9, 1e-6f, 9.0f);
    bool all_nan = true;
    for (int i = 0; i < 9; i++)
        all_nan &= y9[i] != y9[i];
    CHECK(all_nan, "[%s] rmsnorm_row: a NaN in the row makes every output NaN", kt->target);
}

static void test_float_loops(const rt_kernels *kt)
{
    static const int64_t dims[] = {1, 3, 4, 7, 16, 21, 64, 67, 128};
    for (size_t i = 0; i < sizeof dims / sizeof *dims; i++) {
        test_attention_f16(kt, dims[i], 1 + (int64_t)i * 3);
        test_attention_i8(kt, dims[i], 2 + (int64_t)i * 2);
    }
    test_swiglu(kt);
    test_rmsnorm(kt);
}

int main(int argc, char **argv)
{
    int want_dot = argc > 1 ? atoi(argv[1]) : 1, want_i8mm = argc > 2 ? atoi(argv[2]) : 1;
    bool dot = rt_cpu_arm_dotprod_ok(), i8mm = rt_cpu_arm_i8mm_ok();
    CHECK(dot == (want_dot != 0), "rt_cpu_arm_dotprod_ok() is %d (expected %d)", dot, want_dot);
    CHECK(i8mm == (want_i8mm != 0), "rt_cpu_arm_i8mm_ok() is %d (expected %d)", i8mm,
          want_i8mm);
    test_table(&rt_kernels_neon_dot, "neon-dot", 8, 4, 12);
    test_table(&rt_kernels_neon_i8mm, "neon-i8mm", 8, 8, 10);
    test_quantize(&rt_kernels_neon_dot);
    test_quantize(&rt_kernels_neon_i8mm);
    test_float_loops(&rt_kernels_neon_dot);
    test_float_loops(&rt_kernels_neon_i8mm);
    if (dot)
        test_qtile(&rt_kernels_neon_dot);
    else
        printf("# no dotprod on this CPU: neon-dot qtile not run\n");
    if (i8mm)
        test_qtile(&rt_kernels_neon_i8mm);
    else
        printf("# no i8mm on this CPU: neon-i8mm qtile not run\n");
    return TAP_DONE();
}
