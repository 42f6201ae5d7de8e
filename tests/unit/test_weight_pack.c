/* A pre-quantized file's weights in QWeightTiles: the packer
 * (cg_qpack_row_tile_values) writes the file's q values with float32
 * scales and zero points, or binary16 scales and mins, at the places
 * runtime/quant_format.h's opening comment gives, so that reading them back
 * by that comment's formula gives ONNX DequantizeLinear's
 * (q - zero_point) * scale computed here from the file's values; padding is
 * zero.  And llmc_quant_weight_form picks the format that holds a
 * DequantizeLinear's values bit for bit (binary16 only when it does). */
#include <string.h>

#include "codegen/weight_pack.h"
#include "graph_util.h"
#include "passes/quant_weight.h"
#include "tap.h"

enum { HP = 8, LP = 4, N = 11, K = 80, GROUP = 32, GROUPS = 3 }; /* kp 96: padding rows and columns */

/* A file's weight W^T [N, K] as its q values, zero points and scales per
 * (row, group) (w = (q - zero) * scale, the caller's stored forms). */
typedef struct {
    int q[N][K], zero[N][GROUPS];
    float scale[N][GROUPS];
} file_weight;

static float dequantized(int q, int z, float s)
{
    return (float)(q - z) * s;
}

/* Deterministic values in [lo, hi]. */
static int spread(int64_t i, int lo, int hi)
{
    return lo + (int)((i * 2654435761u) % (uint64_t)(hi - lo + 1));
}

static void make_weight(file_weight *w, int lo, int hi, bool half_scales)
{
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++)
            w->q[n][k] = spread(n * K + k, lo, hi);
        for (int g = 0; g < GROUPS; g++) {
            w->zero[n][g] = spread(7 * n + g + 3, lo, hi);
            /* float32 scales with low bits no binary16 holds, or halves (some negative) */
            w->scale[n][g] = half_scales ? (float)((n + 1) * (g % 2 ? -1 : 1)) / 1024.0f
                                         : 0.001f * (1.0f + 0.0137f * (float)(n * GROUPS + g));
        }
    }
}

/* ---- reading a packed tensor back by quant_format.h ---- */

static int read_q(const rt_qweight_shape *s, const uint8_t *block, int r, int64_t j)
{
    int64_t t = j / s->lp, at = (int64_t)r * s->lp + j % s->lp, tile = (int64_t)s->hp * s->lp;
    if (s->bits == 8)
        return (int8_t)block[t * tile + at];
    return block[t / 2 * tile + at] >> (t % 2 ? 4 : 0) & 15;
}

/* Coefficient c (0 scale, 1 zero or min) of row r of a block. */
static float read_coef(const rt_qweight_shape *s, const uint8_t *block, int c, int r)
{
    const uint8_t *p = block + rt_qweight_data_bytes(s) + (uint64_t)s->coef * (uint64_t)(c * s->hp + r);
    if (s->coef == RT_QCOEF_HALF)
        return rt_half_at(p);
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Element (n, k) of the tensor as the format defines it. */
static float read_weight(const rt_qweight_shape *s, const uint8_t *w, int64_t n, int64_t k)
{
    const uint8_t *block = w + rt_qweight_block_offset(s, n / s->hp, k / s->group);
    int r = (int)(n % s->hp), q = read_q(s, block, r, k % s->group);
    float scale = read_coef(s, block, 0, r);
    if (s->coef == RT_QCOEF_FLOAT)
        return dequantized(q, (int)read_coef(s, block, 1, r), scale);
    return s->bits == 8 ? scale * (float)q : scale * (float)q + read_coef(s, block, 1, r);
}

/* The whole tensor, packed tile by tile from stored q and coefficients
 * (malloc'ed). */
static uint8_t *pack(const rt_qweight_shape *s, const uint8_t *q, const float *scale, const float *second)
{
    uint8_t *w = malloc(rt_qweight_bytes(s));
    for (int64_t ht = 0; ht < s->np / s->hp; ht++) {
        int64_t rows = s->n - ht * s->hp < s->hp ? s->n - ht * s->hp : s->hp;
        cg_qpack_row_tile_values(q + ht * s->hp * s->k, scale + ht * s->hp * GROUPS, second + ht * s->hp * GROUPS,
                                 rows, s, w + rt_qweight_block_offset(s, ht, 0));
    }
    return w;
}

/* Every element equal to the file's (values: a zero's sign aside), and the
 * padding rows' and columns' bytes zero. */
static bool equals_file(const rt_qweight_shape *s, const uint8_t *w, const file_weight *f, int64_t *bad)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            if (read_weight(s, w, n, k) != dequantized(f->q[n][k], f->zero[n][k / GROUP], f->scale[n][k / GROUP])) {
                *bad = n * K + k;
                return false;
            }
    for (int64_t n = 0; n < s->np; n++)
        for (int64_t k = 0; k < s->kp; k++) {
            const uint8_t *block = w + rt_qweight_block_offset(s, n / s->hp, k / s->group);
            int r = (int)(n % s->hp);
            bool pad_row = n >= N, pad = pad_row || k >= K;
            if ((pad && read_q(s, block, r, k % s->group)) ||
                (pad_row && (read_coef(s, block, 0, r) != 0 || read_coef(s, block, 1, r) != 0))) {
                *bad = -1 - n * s->kp - k;
                return false;
            }
        }
    return true;
}

/* Packs f in `bits` with float32 coefficients (q and zero stored minus
 * `offset`: 128 for a uint8 file's 8-bit values) and checks it. */
static void check_float_coef(const char *what, int bits, const file_weight *f, int offset)
{
    rt_qweight_shape s;
    static uint8_t q[N * K];
    static float scale[N * GROUPS], zero[N * GROUPS];
    CHECK(rt_qweight_shape_init_coef(&s, bits, HP, LP, N, K, GROUP, RT_QCOEF_FLOAT), "%s: a valid shape", what);
    CHECK(rt_qweight_block_bytes(&s) == (uint64_t)(HP * GROUP * bits / 8 + 8 * HP),
          "%s: a block is its values, then hp float32 scales and hp float32 zero points", what);
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++)
            q[n * K + k] = (uint8_t)(f->q[n][k] - offset);
        for (int g = 0; g < GROUPS; g++) {
            scale[n * GROUPS + g] = f->scale[n][g];
            zero[n * GROUPS + g] = (float)(f->zero[n][g] - offset);
        }
    }
    uint8_t *w = pack(&s, q, scale, zero);
    int64_t bad = 0;
    CHECK(w && equals_file(&s, w, f, &bad), "%s: (q - zero) * scale read back equals the file's, padding 0 (%lld)",
          what, (long long)bad);
    free(w);
}

static void check_packer(void)
{
    static file_weight f;
    make_weight(&f, 0, 15, false);
    check_float_coef("4-bit, float32 scales, zero points 0..15", 4, &f, 0);
    make_weight(&f, -128, 127, false);
    check_float_coef("int8 with -128, float32 scales and zero points", 8, &f, 0);
    make_weight(&f, 0, 255, false);
    check_float_coef("uint8 q and zero points 0..255 (stored minus 128)", 8, &f, 128);

    /* binary16: 4-bit q as they are, min = -scale * zero point */
    make_weight(&f, 0, 15, true);
    for (int n = 0; n < N; n++)
        for (int g = 0; g < GROUPS; g++)
            f.zero[n][g] = 8;
    rt_qweight_shape s;
    static uint8_t q[N * K];
    static float scale[N * GROUPS], min[N * GROUPS];
    CHECK(rt_qweight_shape_init(&s, 4, HP, LP, N, K, GROUP), "4-bit, binary16: a valid shape");
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++)
            q[n * K + k] = (uint8_t)f.q[n][k];
        for (int g = 0; g < GROUPS; g++) {
            scale[n * GROUPS + g] = f.scale[n][g];
            min[n * GROUPS + g] = rt_half_to_float(llmc_quant_half_min(f.scale[n][g], 8));
        }
    }
    uint8_t *w = pack(&s, q, scale, min);
    int64_t bad = 0;
    CHECK(w && equals_file(&s, w, &f, &bad), "4-bit, binary16 scales, zero point 8: scale * q + min equals the "
          "file's (%lld)", (long long)bad);
    free(w);
}

/* ---- llmc_quant_weight_form ---- */

/* DequantizeLinear(Wq [K, N], scale [G, N], zp [G, N], axis 0, block) of
 * f's values (W^T's transpose), Wq of `dtype`; its form. */
static llmc_quant_tile_form form_of(const file_weight *f, int dtype)
{
    llmc_graph g;
    llmc_graph_init(&g);
    static uint8_t q[K * N], zp[GROUPS * N];
    static float scale[GROUPS * N];
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++)
            q[k * N + n] = (uint8_t)f->q[n][k];
        for (int gr = 0; gr < GROUPS; gr++) {
            zp[gr * N + n] = (uint8_t)f->zero[n][gr];
            scale[gr * N + n] = f->scale[n][gr];
        }
    }
    int wq = g_const(&g, "wq", dtype, SHAPE(K(K), K(N)), q);
    int sc = g_const(&g, "scale", LLMC_DT_FLOAT, SHAPE(K(GROUPS), K(N)), scale);
    int z = g_const(&g, "zp", dtype, SHAPE(K(GROUPS), K(N)), zp);
    int w, dq = g_node(&g, "DequantizeLinear", "w", &w, 3, wq, sc, z);
    llmc_node_set_int(&g, dq, "axis", 0);
    llmc_node_set_int(&g, dq, "block_size", GROUP);
    llmc_quant_tile_form form = {0, 0};
    if (llmc_quant_weight(&g, w) != dq || llmc_quant_weight_form(&g, dq, &form))
        form.bits = -1;
    llmc_graph_free(&g);
    return form;
}

static void check_form(const char *what, const file_weight *f, int dtype, int bits, int coef)
{
    llmc_quant_tile_form form = form_of(f, dtype);
    CHECK(form.bits == bits && form.coef == coef, "%s: %d bits, %d-bit coefficients (got %d, %d)", what, bits, coef,
          form.bits, form.coef);
}

static void check_forms(void)
{
    static file_weight f;
    make_weight(&f, 0, 15, true);
    for (int n = 0; n < N; n++)
        for (int g = 0; g < GROUPS; g++)
            f.zero[n][g] = 8;
    check_form("q4f16 (binary16 scales, some negative, zero point 8)", &f, LLMC_DT_UINT8, 4, 16);
    f.scale[N - 1][GROUPS - 1] = 1e-5f; /* not a binary16 */
    check_form("one float32 scale no binary16 holds", &f, LLMC_DT_UINT8, 4, 32);
    make_weight(&f, 0, 15, true);
    f.scale[0][1] = 2047.0f / 1048576.0f; /* a binary16, but -15 * scale needs 15 bits: the min rounds */
    f.zero[0][1] = 15;
    check_form("4-bit zero points whose binary16 min rounds", &f, LLMC_DT_UINT8, 4, 32);
    make_weight(&f, -127, 127, true);
    for (int n = 0; n < N; n++)
        for (int g = 0; g < GROUPS; g++)
            f.zero[n][g] = 0;
    check_form("symmetric int8, binary16 scales", &f, LLMC_DT_INT8, 8, 16);
    f.q[3][5] = -128;
    check_form("int8 with a -128", &f, LLMC_DT_INT8, 8, 32);
    make_weight(&f, 0, 255, true);
    check_form("uint8 with zero points (q - zp beyond int8)", &f, LLMC_DT_UINT8, 8, 32);
    make_weight(&f, 0, 15, false);
    check_form("int4 (float32 scales, zero points 0..15)", &f, LLMC_DT_UINT8, 4, 32);
}

int main(void)
{
    check_packer();
    check_forms();
    return TAP_DONE();
}
