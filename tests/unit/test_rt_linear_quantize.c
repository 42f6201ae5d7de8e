/* A Linear that quantizes its own x (kind bit LINEAR_QUANTIZE, the tiles
 * its last output) on hand-built plans: for 8- and 4-bit W, per-row and
 * static scales, its two outputs are bitwise those of the QuantizeRows ->
 * Linear pair it replaces, and within the quantization error of the float
 * product x W^T computed here in double; the verifier refuses tiles of
 * another group or dims, a float32 W, a bad static scale, a static scale on
 * a Linear that does not quantize, no outputs besides the tiles, and Float32
 * tiles. */
#include <math.h>
#include <string.h>

#include "llmc_rt.h"
#include "qweight_pack.h"
#include "rt_testplan.h"
#include "tap.h"

enum { K = 64, N0 = 16, N1 = 8, N = N0 + N1, GROUP = 32, CTX = 16, S = 5 };
/* the generic target's tiles (runtime/plan_enums.h): W hp x lp, x ep rows */
enum { HP = 8, LP = 4, EP = 4 };

enum {
    V_PAIR, V_FOLD,
    D_TILES_GROUP, D_TILES_DIMS, D_FLOAT_W, D_BAD_SCALE, D_PLAIN_SCALE, D_NO_YS, D_F32_TILES
};

static float W[N * K], X[S * K];
static uint8_t *packed;
static size_t packed_bytes;

/* The tiles of x [1, S, K] (dims "1,S,64"), QActTiles of `group`, sized for
 * the context's rows. */
static int tiles_tensor(tp_plan *tp, const char *dims, int group)
{
    rt_qact_shape qs;
    int t = tp_tensor(tp, "x/quantized", "Int8", dims);
    char fields[128];
    snprintf(fields, sizeof fields, ", layout: \"QActTiles\", group: %d, tile_rows: %d, tile_depth: %d",
             group, EP, LP);
    strcat(tp->tensors[t], fields);
    if (rt_qact_shape_init(&qs, EP, LP, CTX, K, group))
        tp->tensor_bytes[t] = (long long)rt_qact_bytes(&qs);
    return t;
}

static int weight_tensor(tp_plan *tp, int bits, bool float_w)
{
    if (float_w)
        return tp_weight(tp, "W", "Float32", "24,64", W, sizeof W);
    int w = tp_weight(tp, "W", bits == 8 ? "Int8" : "Uint4", "24,64", packed, packed_bytes);
    char fields[128];
    snprintf(fields, sizeof fields, ", layout: \"QWeightTiles\", group: %d, tile_rows: %d, tile_depth: %d",
             GROUP, HP, LP);
    strcat(tp->tensors[w], fields);
    return w;
}

static uint8_t *build_plan(int v, int bits, float scale, size_t *size)
{
    tp_plan tp;
    tp_init(&tp, CTX);
    int x = tp_tensor(&tp, "x", "Float32", "1,S,64");
    int w = weight_tensor(&tp, bits, v == D_FLOAT_W);
    int y0 = tp_tensor(&tp, "y0", "Float32", "1,S,16"), y1 = tp_tensor(&tp, "y1", "Float32", "1,S,8");
    int xq = v == D_F32_TILES ? tp_tensor(&tp, "x/quantized", "Float32", "1,S,64")
                              : tiles_tensor(&tp, v == D_TILES_DIMS ? "S,64" : "1,S,64",
                                             v == D_TILES_GROUP ? 2 * GROUP : GROUP);
    float op_scale = v == D_BAD_SCALE ? -1.0f : scale;
    if (v == V_PAIR || v == D_PLAIN_SCALE) {
        tp_op(&tp, "code: \"QuantizeRows\", name: \"q\", scale: %g, inputs: [%d], outputs: [%d]", scale, x, xq);
        tp_op(&tp, "code: \"Linear\", name: \"fc\", scale: %g, inputs: [%d, %d], outputs: [%d, %d]",
              v == D_PLAIN_SCALE ? 0.5 : 0.0, xq, w, y0, y1);
    } else if (v == D_NO_YS) {
        tp_op(&tp, "code: \"Linear\", name: \"fc\", kind: 4, scale: %g, inputs: [%d, %d], outputs: [%d]",
              op_scale, x, w, xq);
    } else {
        tp_op(&tp, "code: \"Linear\", name: \"fc\", kind: 4, scale: %g, inputs: [%d, %d], outputs: [%d, %d, %d]",
              op_scale, x, w, y0, y1, xq);
    }
    tp_io(&tp, 0, x, "Generic", 0);
    tp_io(&tp, 1, y0, "Generic", 0);
    tp_io(&tp, 1, y1, "Generic", 0);
    return tp_finish(&tp, "rt_linear_quantize", size);
}

/* Runs variant v on X; y [S, N] (y0's columns, then y1's). */
static bool run(int v, int bits, float scale, float *y, llmc_rt_error *err)
{
    size_t size;
    uint8_t *bytes = build_plan(v, bits, scale, &size);
    llmc_rt_plan plan;
    llmc_rt_session s;
    void *mem = NULL;
    bool ok = bytes && llmc_rt_plan_open(&plan, bytes, size, LLMC_RT_VERIFY_HASHES, err) == LLMC_RT_OK;
    if (ok)
        mem = malloc(llmc_rt_session_memory(&plan));
    llmc_rt_tensor in = {LLMC_RT_F32, 3, {1, S, K}, X}, out[2];
    ok = ok && mem && llmc_rt_session_init(&s, &plan, mem, llmc_rt_session_memory(&plan), err) == LLMC_RT_OK &&
         llmc_rt_session_run(&s, S, 0, &in, err) == LLMC_RT_OK &&
         llmc_rt_session_output(&s, 0, &out[0], err) == LLMC_RT_OK &&
         llmc_rt_session_output(&s, 1, &out[1], err) == LLMC_RT_OK;
    for (int r = 0; ok && r < S; r++) {
        memcpy(y + r * N, (const float *)out[0].data + r * N0, sizeof(float) * N0);
        memcpy(y + r * N + N0, (const float *)out[1].data + r * N1, sizeof(float) * N1);
    }
    free(mem);
    free(bytes);
    return ok;
}

/* max |y - x W^T| over max |x W^T|, the product in double. */
static double rel_error(const float *y)
{
    double worst = 0.0, mag = 0.0;
    for (int r = 0; r < S; r++)
        for (int n = 0; n < N; n++) {
            double z = 0.0;
            for (int k = 0; k < K; k++)
                z += (double)X[r * K + k] * W[n * K + k];
            worst = fmax(worst, fabs(y[r * N + n] - z));
            mag = fmax(mag, fabs(z));
        }
    return worst / mag;
}

static void test_bitwise(int bits, float scale)
{
    rt_qweight_shape ws;
    rt_qweight_shape_init(&ws, bits, HP, LP, N, K, GROUP);
    packed = pack_weights(W, &ws);
    packed_bytes = rt_qweight_bytes(&ws);
    static float pair[S * N], fold[S * N];
    llmc_rt_error e1 = {LLMC_RT_OK, ""}, e2 = {LLMC_RT_OK, ""};
    bool ran = run(V_PAIR, bits, scale, pair, &e1) && run(V_FOLD, bits, scale, fold, &e2);
    double err = ran ? rel_error(fold) : 1.0, bound = bits == 8 ? 0.02 : 0.15;
    CHECK(ran && memcmp(pair, fold, sizeof pair) == 0,
          "%d-bit W, scale %g: the quantizing Linear's outputs bitwise the QuantizeRows -> Linear "
          "pair's %s%s", bits, scale, e1.msg, e2.msg);
    CHECK(err <= bound, "%d-bit W, scale %g: %.4f of max |x W^T| from the float product (<= %g)",
          bits, scale, err, bound);
    free(packed);
}

static void expect_refused(int v, const char *needle, const char *what)
{
    rt_qweight_shape ws;
    rt_qweight_shape_init(&ws, 8, HP, LP, N, K, GROUP);
    packed = pack_weights(W, &ws);
    packed_bytes = rt_qweight_bytes(&ws);
    size_t size;
    uint8_t *bytes = build_plan(v, 8, 0.0f, &size);
    llmc_rt_plan plan;
    llmc_rt_error e = {LLMC_RT_OK, ""};
    llmc_rt_status st = bytes ? llmc_rt_plan_open(&plan, bytes, size, 0, &e) : LLMC_RT_E_ARG;
    CHECK(st == LLMC_RT_E_CORRUPT && strstr(e.msg, "Linear 'fc'") && strstr(e.msg, needle),
          "refused: %s: %s", what, e.msg);
    free(bytes);
    free(packed);
}

int main(void)
{
    for (int i = 0; i < N * K; i++)
        W[i] = (float)sin(0.7 * i) * (1.0f + (float)(i % 7) * 0.1f);
    for (int i = 0; i < S * K; i++)
        X[i] = (float)cos(1.3 * i) * (i % 11 == 0 ? 4.0f : 1.0f);
    test_bitwise(8, 0.0f);
    test_bitwise(4, 0.0f);
    test_bitwise(8, 0.035f); /* 127 * 0.035 holds max |x| = 4 */
    test_bitwise(4, 0.035f);
    expect_refused(D_TILES_GROUP, "activation tiles of its group 32", "tiles of another group than W's");
    expect_refused(D_TILES_DIMS, "x's tiles must have x's dims", "tiles of other dims than x's");
    expect_refused(D_FLOAT_W, "float32 x by float32 W", "the quantize bit over a float32 W");
    expect_refused(D_BAD_SCALE, "static scale", "a static scale of -1");
    expect_refused(D_PLAIN_SCALE, "does not quantize x", "a scale on a Linear reading tiles");
    expect_refused(D_NO_YS, "sum to 0", "the tiles its only output");
    expect_refused(D_F32_TILES, "activation tiles of its group", "Float32 tiles");
    return TAP_DONE();
}
