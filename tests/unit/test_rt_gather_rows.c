/* Gather of rows of a packed weight (embedding tables, --embed-bits and
 * tied LM heads): the kernel on QWeightTiles (8 and 4 bits, odd shapes),
 * FWeightTiles and Half against the float rows they were packed from,
 * within each format's rounding step; and the verifier on hand-built plans
 * (a consistent packed Gather runs; inconsistent shapes, a wrong axis and a
 * packed table read by another op are refused). */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "codegen/weight_pack.h"
#include "llmc_rt.h"
#include "rt_testplan.h"
#include "tap.h"

static float value_at(int64_t r, int64_t c)
{
    return (float)sin(0.37 * (double)r + 0.11 * (double)c * (double)c) * (1.0f + (float)(r % 5));
}

static float *make_rows(int64_t n, int64_t k)
{
    float *w = malloc(sizeof *w * (size_t)(n * k));
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++)
            w[r * k + c] = value_at(r, c);
    return w;
}

/* The largest error rounding to a group's grid may make: half a step. */
static double group_step(const float *row, int64_t c0, int64_t c1, int bits)
{
    double lo = 0, hi = 0, amax = 0;
    for (int64_t c = c0; c < c1; c++) {
        lo = fmin(lo, row[c]);
        hi = fmax(hi, row[c]);
        amax = fmax(amax, fabs(row[c]));
    }
    return bits == 8 ? amax / 127.0 : (hi - lo) / 15.0;
}

static const int64_t IDX[] = {0, 28, -1, 5, 5, 13};
#define N_IDX 6

static bool rows_within(const float *w, int64_t n, int64_t k, const float *y, int bits,
                        int64_t group)
{
    for (int i = 0; i < N_IDX; i++) {
        int64_t r = IDX[i] < 0 ? IDX[i] + n : IDX[i];
        for (int64_t c = 0; c < k; c++) {
            int64_t g0 = c / group * group, g1 = g0 + group < k ? g0 + group : k;
            double bound = bits ? 0.51 * group_step(w + r * k, g0, g1, bits) * 1.002 + 1e-6 : 0.0;
            if (fabs((double)y[i * k + c] - w[r * k + c]) > bound)
                return false;
        }
    }
    return true;
}

static void check_qweight(int bits, int hp, int lp, int64_t n, int64_t k, int64_t group)
{
    rt_qweight_shape s;
    rt_qweight_shape_init(&s, bits, hp, lp, n, k, group);
    float *w = make_rows(n, k), *y = calloc((size_t)(N_IDX * k), sizeof *y);
    uint8_t *packed = calloc(1, rt_qweight_bytes(&s));
    for (int64_t ht = 0; ht < s.np / hp; ht++)
        cg_qpack_row_tile(w + ht * hp * k, k, n - ht * hp < hp ? n - ht * hp : hp, &s,
                          packed + rt_qweight_block_offset(&s, ht, 0));
    rt_tensor_format f = {bits == 8 ? LLMC_RT_I8 : LLMC_RT_U4, LLMC_RT_LAYOUT_QWeightTiles, (uint32_t)group, hp,
                          lp, LLMC_RT_F16};
    llmc_rt_tensor data = {f.dtype, 2, {n, k}, packed}, idx = {LLMC_RT_I64, 1, {N_IDX}, (void *)IDX};
    llmc_rt_tensor out = {LLMC_RT_F32, 2, {N_IDX, k}, y};
    llmc_rt_error e = {LLMC_RT_OK, ""};
    llmc_rt_status st = k_gather_rows(&f, &data, &idx, &out, &e);
    CHECK(!st && rows_within(w, n, k, y, bits, group),
          "QWeightTiles %d-bit [%lld, %lld] hp %d lp %d group %lld: rows within half a step (%s)",
          bits, (long long)n, (long long)k, hp, lp, (long long)group, e.msg);
    free(w);
    free(y);
    free(packed);
}

/* Float32 scales and zero points (a pre-quantized file's, stored as they
 * are): q, scale and zero point of (r, c) from the indices alone, written
 * at the places of quant_format.h's layout; rows must be (float)(q -
 * zero) * scale bit for bit (ONNX DequantizeLinear). */
static int q_at(int bits, int64_t r, int64_t c)
{
    return bits == 4 ? (int)((r * 7 + c * 3) % 16) : (int)((r * 37 + c * 11) % 256) - 128;
}

static float scale_at(int64_t r, int64_t g)
{
    return 0.001f * (float)(1 + (r * 5 + g) % 9) + 1e-7f * (float)r;
}

static int zero_at(int bits, int64_t r, int64_t g)
{
    return bits == 4 ? (int)((r + g) % 16) : (int)((r * 13 + g * 29) % 256) - 128;
}

static void check_qweight_float(int bits, int hp, int lp, int64_t n, int64_t k, int64_t group)
{
    rt_qweight_shape s;
    rt_qweight_shape_init_coef(&s, bits, hp, lp, n, k, group, RT_QCOEF_FLOAT);
    float *y = calloc((size_t)(N_IDX * k), sizeof *y);
    uint8_t *packed = calloc(1, rt_qweight_bytes(&s));
    int64_t data = hp * group * bits / 8, block = data + 8 * hp;
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            int64_t g = c / group, j = c % group, t = j / lp, h = r % hp;
            uint8_t *b = packed + ((r / hp) * (s.kp / group) + g) * block;
            float scale = scale_at(r, g), zero = (float)zero_at(bits, r, g);
            memcpy(b + data + 4 * h, &scale, 4);
            memcpy(b + data + 4 * (hp + h), &zero, 4);
            int q = q_at(bits, r, c);
            if (bits == 8)
                b[t * hp * lp + h * lp + j % lp] = (uint8_t)(int8_t)q;
            else
                b[(t / 2) * hp * lp + h * lp + j % lp] |= (uint8_t)(q << (t % 2 ? 4 : 0));
        }
    rt_tensor_format f = {bits == 8 ? LLMC_RT_I8 : LLMC_RT_U4, LLMC_RT_LAYOUT_QWeightTiles,
                          (uint32_t)group, hp, lp, LLMC_RT_F32};
    llmc_rt_tensor data_t = {f.dtype, 2, {n, k}, packed}, idx = {LLMC_RT_I64, 1, {N_IDX}, (void *)IDX};
    llmc_rt_tensor out = {LLMC_RT_F32, 2, {N_IDX, k}, y};
    llmc_rt_error e = {LLMC_RT_OK, ""};
    bool ok = !k_gather_rows(&f, &data_t, &idx, &out, &e);
    for (int i = 0; ok && i < N_IDX; i++) {
        int64_t r = IDX[i] < 0 ? IDX[i] + n : IDX[i];
        for (int64_t c = 0; c < k; c++) {
            float want = (float)(q_at(bits, r, c) - zero_at(bits, r, c / group)) *
                         scale_at(r, c / group);
            ok &= !memcmp(&y[i * k + c], &want, sizeof want);
        }
    }
    CHECK(ok, "QWeightTiles %d-bit float32 coefficients [%lld, %lld] hp %d lp %d group %lld: "
          "rows (float)(q - zero) * scale bit for bit (%s)", bits, (long long)n, (long long)k,
          hp, lp, (long long)group, e.msg);
    free(y);
    free(packed);
}

static void check_ftiles(int hp, int64_t n, int64_t k)
{
    rt_ftile_shape s;
    rt_ftile_shape_init(&s, hp, n, k);
    float *w = make_rows(n, k), *y = calloc((size_t)(N_IDX * k), sizeof *y);
    float *packed = calloc(1, rt_ftile_bytes(&s));
    for (int64_t ht = 0; ht < s.np / hp; ht++)
        cg_fpack_row_tile(w + ht * hp * k, k, n - ht * hp < hp ? n - ht * hp : hp, &s,
                          packed + ht * hp * k);
    rt_tensor_format f = {LLMC_RT_F32, LLMC_RT_LAYOUT_FWeightTiles, 0, hp, 0, 0};
    llmc_rt_tensor data = {LLMC_RT_F32, 2, {n, k}, packed}, idx = {LLMC_RT_I64, 1, {N_IDX}, (void *)IDX};
    llmc_rt_tensor out = {LLMC_RT_F32, 2, {N_IDX, k}, y};
    llmc_rt_error e = {LLMC_RT_OK, ""};
    CHECK(!k_gather_rows(&f, &data, &idx, &out, &e) && rows_within(w, n, k, y, 0, k),
          "FWeightTiles hp %d [%lld, %lld]: rows exact", hp, (long long)n, (long long)k);
    free(w);
    free(y);
    free(packed);
}

/* Half rows: binary16 of 2^-14 .. 2^15 integers and halves are exact, other
 * values within 2^-11 relative. */
static void check_half(void)
{
    enum { N = 29, K = 40 };
    static float w[N * K], y[N_IDX * K];
    static uint8_t bytes[2 * N * K];
    for (int i = 0; i < N * K; i++) {
        w[i] = i % 3 ? value_at(i / K, i % K) : (float)(i % 200) * 0.5f - 50.0f;
        uint16_t h = rt_float_to_half(w[i]);
        bytes[2 * i] = (uint8_t)(h & 255u);
        bytes[2 * i + 1] = (uint8_t)(h >> 8);
    }
    rt_tensor_format f = {LLMC_RT_F32, LLMC_RT_LAYOUT_Half, 0, 0, 0, 0};
    llmc_rt_tensor data = {LLMC_RT_F32, 2, {N, K}, bytes}, idx = {LLMC_RT_I64, 1, {N_IDX}, (void *)IDX};
    llmc_rt_tensor out = {LLMC_RT_F32, 2, {N_IDX, K}, y};
    llmc_rt_error e = {LLMC_RT_OK, ""};
    bool ok = !k_gather_rows(&f, &data, &idx, &out, &e);
    for (int i = 0; ok && i < N_IDX; i++) {
        int64_t r = IDX[i] < 0 ? IDX[i] + N : IDX[i];
        for (int c = 0; c < K; c++) {
            float want = w[r * K + c], got = y[i * K + c];
            ok = ok && ((r * K + c) % 3 ? fabsf(got - want) <= fabsf(want) * 0x1p-11f : got == want);
        }
    }
    CHECK(ok, "Half rows: exact where binary16 holds the value, else within 2^-11 (%s)", e.msg);
    static const int64_t bad[] = {3, 29};
    llmc_rt_tensor bad_idx = {LLMC_RT_I64, 1, {2}, (void *)bad}, out2 = {LLMC_RT_F32, 2, {2, K}, y};
    CHECK(k_gather_rows(&f, &data, &bad_idx, &out2, &e) == LLMC_RT_E_EXEC && strstr(e.msg, "outside"),
          "an index past the table fails the call: %s", e.msg);
}

/* ---- plans ---- */

enum { V_OK, V_BAD_K, V_AXIS_1, V_UNARY_READS_TABLE, V_HALF_TILES };
enum { TV = 6, TK = 8 };
static uint8_t table_bytes[2 * TV * TK];

static uint8_t *build_plan(int v, size_t *size)
{
    tp_plan tp;
    tp_init(&tp, 16);
    for (int i = 0; i < TV * TK; i++) {
        uint16_t h = rt_float_to_half((float)i * 0.25f - 3.0f);
        table_bytes[2 * i] = (uint8_t)(h & 255u);
        table_bytes[2 * i + 1] = (uint8_t)(h >> 8);
    }
    int ids = tp_tensor(&tp, "ids", "Int64", "1,S");
    int table = tp_weight(&tp, "table", "Float32", "6,8", table_bytes, sizeof table_bytes);
    strcat(tp.tensors[table], v == V_HALF_TILES ? ", layout: \"Half\", tile_rows: 8" : ", layout: \"Half\"");
    int rows = tp_tensor(&tp, "rows", "Float32", v == V_BAD_K ? "1,S,7" : "1,S,8");
    tp_op(&tp, "code: \"Gather\", name: \"embed\", axis: %d, inputs: [%d, %d], outputs: [%d]",
          v == V_AXIS_1 ? 1 : 0, table, ids, rows);
    if (v == V_UNARY_READS_TABLE) {
        int neg = tp_tensor(&tp, "neg", "Float32", "6,8");
        tp_op(&tp, "code: \"Unary\", name: \"neg\", kind: 1, inputs: [%d], outputs: [%d]", table, neg);
        tp_io(&tp, 1, neg, "Generic", 0);
    }
    tp_io(&tp, 0, ids, "Generic", 0);
    tp_io(&tp, 1, rows, "Generic", 0);
    return tp_finish(&tp, "gather_rows", size);
}

/* Variant v's plan opened with hash checks; *bytes to free afterwards. */
static llmc_rt_status open_plan(int v, llmc_rt_plan *plan, uint8_t **bytes, llmc_rt_error *e)
{
    size_t size;
    *bytes = build_plan(v, &size);
    return *bytes ? llmc_rt_plan_open(plan, *bytes, size, LLMC_RT_VERIFY_HASHES, e) : LLMC_RT_E_ARG;
}

static void expect_defect(int v, const char *needle, const char *what)
{
    llmc_rt_plan plan;
    uint8_t *bytes;
    llmc_rt_error e = {LLMC_RT_OK, ""};
    CHECK(open_plan(v, &plan, &bytes, &e) == LLMC_RT_E_CORRUPT && strstr(e.msg, needle),
          "verifier: %s: %s", what, e.msg);
    free(bytes);
}

static void run_packed_plan(void)
{
    llmc_rt_plan plan;
    llmc_rt_session s;
    uint8_t *bytes;
    llmc_rt_error e = {LLMC_RT_OK, ""};
    llmc_rt_status st = open_plan(V_OK, &plan, &bytes, &e);
    void *mem = st ? NULL : malloc(llmc_rt_session_memory(&plan));
    int64_t ids[3] = {5, 0, -2};
    llmc_rt_tensor in = {LLMC_RT_I64, 2, {1, 3}, ids}, out;
    if (!st)
        st = llmc_rt_session_init(&s, &plan, mem, llmc_rt_session_memory(&plan), &e);
    if (!st)
        st = llmc_rt_session_run(&s, 3, 0, &in, &e);
    if (!st)
        st = llmc_rt_session_output(&s, 0, &out, &e);
    bool ok = !st && out.rank == 3 && out.dims[1] == 3 && out.dims[2] == TK;
    for (int i = 0; ok && i < 3; i++)
        for (int c = 0; c < TK; c++) {
            int64_t r = ids[i] < 0 ? ids[i] + TV : ids[i];
            ok = ok && ((const float *)out.data)[i * TK + c] == (float)(r * TK + c) * 0.25f - 3.0f;
        }
    CHECK(ok, "a plan whose Gather reads a Half table verifies and gives its rows (%s)", e.msg);
    free(mem);
    free(bytes);
}

int main(void)
{
    check_qweight(8, 8, 4, 29, 77, 32);
    check_qweight(4, 8, 4, 29, 77, 32);
    check_qweight(8, 12, 8, 29, 64, 64);
    check_qweight(4, 8, 8, 30, 130, 128);
    check_qweight_float(8, 8, 4, 29, 77, 32);
    check_qweight_float(4, 8, 4, 29, 77, 32);
    check_qweight_float(8, 12, 8, 29, 130, 64);
    check_ftiles(16, 29, 13);
    check_ftiles(6, 30, 1);
    check_half();
    run_packed_plan();
    expect_defect(V_BAD_K, "packed Gather must be [indices dims..., 8]", "output rows of 7, table K 8");
    expect_defect(V_AXIS_1, "reads rows (axis 0)", "a packed Gather on axis 1");
    expect_defect(V_UNARY_READS_TABLE, "only Linear's x, W and tiles, Gather's data", "a Unary reading a Half table");
    expect_defect(V_HALF_TILES, "layout Half as kind", "a Half table with tile rows");
    return TAP_DONE();
}
