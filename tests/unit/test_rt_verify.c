/* The plan verifier: a valid plan, every truncation, every single-bit flip
 * (a flipped plan that still opens is also run), and targeted corruptions. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc_rt.h"
#include "kernels/kernel_table.h"
#include "llmc_rt_internal.h"
#include "plan_format.h"
#include "rt_testplan.h"
#include "tap.h"

enum {
    V_VALID, V_VERSION, V_TARGET, V_BAD_SRC, V_BAD_INPUT, V_ARITY, V_DTYPE, V_REGION_LEN,
    V_ROLE_DTYPE, V_LAYER, V_WEIGHT_OUTPUT, V_AXES, V_LAYERNORM_2_OUTPUTS,
    V_LAYERNORM_STATS_DTYPE, V_DECODE_ISA_OTHER_TARGET, V_PREFILL_ISA_UNKNOWN, V_TUNED_GENERIC,
    V_GEMV_PREFETCH_4K, V_GEMV_PREFETCH_ODD, V_GEMV_PREFETCH_FAR
};

static tp_plan tp;
static float wt[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, bias[3] = {0.5f, -1, 2};

/* LayerNorm(z, b) after the mlp: with outputs y, mean (no inv_std_dev), or
 * with an int64 mean. */
static void add_layernorm(int variant, int z, int b)
{
    int n = tp_tensor(&tp, "n", "Float32", "S,3");
    int mean = tp_tensor(&tp, "mean", variant == V_LAYERNORM_2_OUTPUTS ? "Float32" : "Int64", "S,1");
    int inv = tp_tensor(&tp, "inv", "Float32", "S,1");
    if (variant == V_LAYERNORM_2_OUTPUTS)
        tp_op(&tp, "code: \"LayerNorm\", name: \"ln\", axis: 1, inputs: [%d, %d], "
              "outputs: [%d, %d]", z, b, n, mean);
    else
        tp_op(&tp, "code: \"LayerNorm\", name: \"ln\", axis: 1, inputs: [%d, %d], "
              "outputs: [%d, %d, %d]", z, b, n, mean, inv);
}

/* The mlp of test_rt_session (Softmax(x Transpose(wt) + b)), with one defect. */
static uint8_t *build(int variant, size_t *size)
{
    tp_init(&tp, 8);
    if (variant == V_VERSION)
        tp.format_version = LLMC_RT_FORMAT_VERSION + 1;
    if (variant == V_TARGET)
        tp.target = "cuda-f16";
    if (variant == V_DECODE_ISA_OTHER_TARGET)
        snprintf(tp.extra, sizeof tp.extra, "decode_isa: %d,", KISA_AVX2_AVX512VNNI);
    if (variant == V_PREFILL_ISA_UNKNOWN)
        snprintf(tp.extra, sizeof tp.extra, "prefill_isa: %d,", KISA_COUNT);
    if (variant == V_TUNED_GENERIC)
        snprintf(tp.extra, sizeof tp.extra, "decode_isa: %d, prefill_isa: %d,", KISA_GENERIC,
                 KISA_GENERIC);
    if (variant == V_GEMV_PREFETCH_4K || variant == V_GEMV_PREFETCH_ODD ||
        variant == V_GEMV_PREFETCH_FAR)
        snprintf(tp.extra, sizeof tp.extra, "gemv_prefetch: %d,",
                 variant == V_GEMV_PREFETCH_4K ? 4096 : variant == V_GEMV_PREFETCH_ODD ? 4100
                                                                                      : 65600);
    int x = tp_tensor(&tp, "x", "Float32", "S,4");
    int t_wt = tp_weight(&tp, "wt", "Float32", "3,4", wt, sizeof wt);
    int w = tp_tensor(&tp, "w", "Float32", "4,3");
    int b = tp_weight(&tp, "b", "Float32", "3", bias, sizeof bias);
    int xw = tp_tensor(&tp, "xw", "Float32", "S,3");
    int z = tp_tensor(&tp, "z", variant == V_DTYPE ? "Int64" : "Float32", "S,3");
    int y = tp_tensor(&tp, "y", "Float32", "S,3");
    tp_op(&tp, "code: \"Copy\", name: \"model/Transpose_3\", inputs: [%d], outputs: [%d], "
          "regions: [{src: %d, dst: %d, dst_start: %s, size: %s, src_start: %s, "
          "src_axis: [1, 0], src_step: [1, 1]}]",
          t_wt, w, variant == V_BAD_SRC ? 999 : t_wt, w, tp_affs("0,0"),
          tp_affs(variant == V_REGION_LEN ? "4,3,1" : "4,3"), tp_affs("0,0"));
    tp_op(&tp, "code: \"MatMul\", name: \"model/MatMul\", inputs: [%d, %d], outputs: [%d]",
          x, variant == V_BAD_INPUT ? 99 : w, variant == V_WEIGHT_OUTPUT ? b : xw);
    if (variant == V_ARITY)
        tp_op(&tp, "code: \"Binary\", name: \"model/Add\", inputs: [%d], outputs: [%d]", xw, z);
    else
        tp_op(&tp, "code: \"Binary\", name: \"model/Add\", inputs: [%d, %d], outputs: [%d]",
              xw, b, z);
    tp_op(&tp, "code: \"Softmax\", name: \"model/Softmax\", axis: 1, inputs: [%d], "
          "outputs: [%d]", z, y);
    if (variant == V_AXES)
        tp_op(&tp, "code: \"Reduce\", name: \"r\", axes: [1, 0], inputs: [%d], outputs: [%d]",
              z, y);
    if (variant == V_LAYERNORM_2_OUTPUTS || variant == V_LAYERNORM_STATS_DTYPE)
        add_layernorm(variant, z, b);
    tp_io(&tp, 0, x, variant == V_ROLE_DTYPE ? "InputIds" : "Generic", 0);
    tp_io(&tp, 1, y, variant == V_LAYER ? "PresentKey" : "Generic", 3);
    return tp_finish(&tp, "rt_verify", size);
}

static llmc_rt_status open_copy(const uint8_t *bytes, size_t size, unsigned flags,
                                llmc_rt_error *err)
{
    /* an exact-size copy, so reading past the end is caught by ASan/valgrind */
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, bytes, size);
    llmc_rt_plan plan;
    llmc_rt_status st = llmc_rt_plan_open(&plan, copy, size, flags, err);
    free(copy);
    return st;
}

static void test_valid(const uint8_t *bytes, size_t size)
{
    llmc_rt_plan plan;
    llmc_rt_error err;
    CHECK(llmc_rt_plan_open(&plan, bytes, size, LLMC_RT_VERIFY_HASHES, &err) == LLMC_RT_OK,
          "valid plan opens with hashes: %s", err.msg);
    CHECK(rt_plan_of(&plan)->n_tensors == 7 && rt_plan_of(&plan)->n_ops == 4 && rt_plan_of(&plan)->n_segments == 2 &&
          rt_plan_of(&plan)->n_inputs == 1 && rt_plan_of(&plan)->n_outputs == 1 && rt_plan_of(&plan)->arena_size > 0,
          "plan counts");
    CHECK(llmc_rt_plan_open(&plan, NULL, size, 0, &err) == LLMC_RT_E_ARG, "NULL bytes");
    uint8_t *shifted = aligned_alloc(64, (size + 64 + 63) / 64 * 64);
    memcpy(shifted + 4, bytes, size);
    char where[64];
    snprintf(where, sizeof where, "address %llu is not 8-byte aligned",
             (unsigned long long)(uintptr_t)(shifted + 4));
    CHECK(llmc_rt_plan_open(&plan, shifted + 4, size, 0, &err) == LLMC_RT_E_ARG &&
          strstr(err.msg, where), "bytes not 8-aligned, the message names the address: %s", err.msg);
    free(shifted);
}

static void test_truncations(const uint8_t *bytes, size_t size)
{
    size_t accepted = 0;
    llmc_rt_error err;
    for (size_t n = 0; n < size; n++)
        accepted += open_copy(bytes, n, 0, &err) == LLMC_RT_OK;
    CHECK(accepted == 0, "all %zu truncated prefixes rejected (%zu accepted)", size, accepted);
}

/* Opens the plan; if it opens, runs it at a few S to prove execution of a
 * corrupted-but-valid plan stays in bounds too. */
static llmc_rt_status open_and_run(uint8_t *bytes, size_t size, unsigned flags)
{
    llmc_rt_plan plan;
    llmc_rt_error err;
    llmc_rt_status st = llmc_rt_plan_open(&plan, bytes, size, flags, &err);
    if (st)
        return st;
    size_t mem_size = llmc_rt_session_memory(&plan);
    if (mem_size > (1u << 24))
        return st;
    void *mem = calloc(1, mem_size); /* ops of a corrupted plan may read unwritten tensors */
    llmc_rt_session s;
    float x[8 * 4] = {0};
    if (llmc_rt_session_init(&s, &plan, mem, mem_size, &err) == LLMC_RT_OK)
        for (uint32_t S = 1; S <= 8; S += 3) {
            llmc_rt_tensor in = {LLMC_RT_F32, 2, {S, 4}, x};
            llmc_rt_io io;
            if (llmc_rt_plan_io(&plan, 0, 0, &io) == LLMC_RT_OK)
                in.dtype = io.dtype;
            llmc_rt_session_run(&s, S, 0, rt_plan_of(&plan)->n_inputs ? &in : NULL, &err);
        }
    free(mem);
    return st;
}

static void test_bit_flips(const uint8_t *bytes, size_t size)
{
    uint8_t *copy = aligned_alloc(64, (size + 63) / 64 * 64);
    size_t opened = 0, weight_flips = 0, weight_caught = 0, codes_ok = 1;
    size_t wbase = size - 64 - sizeof bias; /* wt at wbase, b at wbase + 64 */
    for (size_t i = 0; i < size; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(copy, bytes, size);
            copy[i] ^= (uint8_t)(1u << bit);
            llmc_rt_status st = open_and_run(copy, size, LLMC_RT_VERIFY_HASHES);
            codes_ok &= st < LLMC_RT_STATUS_COUNT;
            opened += st == LLMC_RT_OK;
            bool in_weights = (i >= wbase && i < wbase + sizeof wt) ||
                              (i >= wbase + 64 && i < wbase + 64 + sizeof bias);
            weight_flips += in_weights;
            weight_caught += in_weights && st == LLMC_RT_E_HASH;
        }
    free(copy);
    CHECK(codes_ok, "%zu single-bit flips each gave a status (%zu still open and ran)",
          size * 8, opened);
    CHECK(weight_flips == 8 * (sizeof wt + sizeof bias) && weight_caught == weight_flips,
          "all %zu flips inside weight segments caught by VERIFY_HASHES", weight_flips);
}

static void expect_code(int variant, llmc_rt_status code, const char *needle, const char *what)
{
    size_t size;
    llmc_rt_error err = {LLMC_RT_OK, ""};
    uint8_t *bytes = build(variant, &size);
    llmc_rt_status st = bytes ? open_copy(bytes, size, 0, &err) : LLMC_RT_E_ARG;
    CHECK(st == code && strstr(err.msg, needle), "%s: %s (%s)", what, llmc_rt_status_text(st),
          err.msg);
    free(bytes);
}

static void expect_patched(const uint8_t *bytes, size_t size, uint64_t from, uint64_t to,
                           unsigned flags, llmc_rt_status code, const char *needle,
                           const char *what)
{
    uint8_t *copy = malloc(size);
    llmc_rt_error err = {LLMC_RT_OK, ""};
    memcpy(copy, bytes, size);
    int found = tp_patch_u64(copy, size, from, to);
    llmc_rt_status st = found == 1 ? open_copy(copy, size, flags, &err) : LLMC_RT_E_ARG;
    CHECK(found == 1 && st == code && strstr(err.msg, needle), "%s: %s (%s)", what,
          llmc_rt_status_text(st), err.msg);
    free(copy);
}

static void test_defects(const uint8_t *bytes, size_t size)
{
    size_t wbase = size - 64 - sizeof bias;
    llmc_rt_error err;
    uint8_t *copy = malloc(size);
    memcpy(copy, bytes, size);
    copy[5] = 'X';
    CHECK(open_copy(copy, size, 0, &err) == LLMC_RT_E_MAGIC, "bad identifier: %s", err.msg);
    free(copy);
    expect_code(V_VERSION, LLMC_RT_E_VERSION, "format_version 4", "wrong version");
    expect_code(V_TARGET, LLMC_RT_E_TARGET, "cuda-f16", "wrong target");
    expect_code(V_BAD_SRC, LLMC_RT_E_CORRUPT,
                "op 0 (Copy 'model/Transpose_3'): region 0 src tensor 999 >= 7 tensors",
                "region source out of range");
    expect_code(V_BAD_INPUT, LLMC_RT_E_CORRUPT, "op 1 (MatMul 'model/MatMul'): input 1: "
                "tensor 99 >= 7 tensors", "op input out of range");
    expect_code(V_ARITY, LLMC_RT_E_CORRUPT, "op 2 (Binary 'model/Add'): 1 inputs", "arity");
    expect_code(V_DTYPE, LLMC_RT_E_CORRUPT, "op 2 (Binary", "Binary f32 + f32 -> i64");
    expect_code(V_REGION_LEN, LLMC_RT_E_CORRUPT, "lengths 2/3/2/2", "region size length");
    expect_code(V_ROLE_DTYPE, LLMC_RT_E_CORRUPT, "input 0: role 1", "InputIds on float");
    expect_code(V_LAYER, LLMC_RT_E_CORRUPT, "output 0: role 7", "PresentKey on a rank-2 tensor");
    expect_code(V_WEIGHT_OUTPUT, LLMC_RT_E_CORRUPT, "tensor 3 is a weight", "op writes a weight");
    expect_code(V_AXES, LLMC_RT_E_CORRUPT, "axes must ascend", "Reduce axes order");
    expect_code(V_LAYERNORM_2_OUTPUTS, LLMC_RT_E_CORRUPT, "op 4 (LayerNorm 'ln'): LayerNorm "
                "has 1 output or 3", "LayerNorm with y and mean only");
    expect_code(V_LAYERNORM_STATS_DTYPE, LLMC_RT_E_CORRUPT, "LayerNorm mean and inv_std_dev "
                "float32", "LayerNorm int64 mean");
    expect_patched(bytes, size, wbase + 64, wbase, 0, LLMC_RT_E_CORRUPT, "overlap",
                   "overlapping segments");
    expect_patched(bytes, size, wbase + 64, wbase + 72, 0, LLMC_RT_E_CORRUPT, "aligned",
                   "misaligned segment");
    expect_patched(bytes, size, wbase + 64, 64, 0, LLMC_RT_E_CORRUPT, "inside the FlatBuffer",
                   "segment inside the FlatBuffer");
    expect_patched(bytes, size, wbase + 64, 1ull << 40, 0, LLMC_RT_E_TRUNCATED, "segment 1",
                   "segment beyond the file");
    expect_patched(bytes, size, wbase + 64, UINT64_MAX - 63, 0, LLMC_RT_E_TRUNCATED,
                   "segment 1", "segment offset near 2^64 (overflow)");
    expect_patched(bytes, size, sizeof bias, 16, 0, LLMC_RT_E_CORRUPT, "segment 1 has 16",
                   "segment size != weight bytes");
    uint8_t *bad = malloc(size);
    memcpy(bad, bytes, size);
    bad[wbase + 3] ^= 1;
    CHECK(open_copy(bad, size, LLMC_RT_VERIFY_HASHES, &err) == LLMC_RT_E_HASH &&
          strstr(err.msg, "segment 0"), "weight byte changed: %s", err.msg);
    CHECK(open_copy(bad, size, 0, &err) == LLMC_RT_OK, "without VERIFY_HASHES it opens");
    memcpy(bad, bytes, size);
    bad[3] = 0x7F; /* root offset far outside */
    CHECK(open_copy(bad, size, 0, &err) == LLMC_RT_E_TRUNCATED, "root offset out of range: %s",
          err.msg);
    free(bad);
}

/* Plan.decode_isa and prefill_isa name a table of the plan's target (where a
 * target has several: x86-64 builds); a step of fewer than gemm_min_rows
 * rows runs the decode one. */
static void test_tuned_kernels(void)
{
    size_t size;
    uint8_t *bytes = build(V_TUNED_GENERIC, &size);
    llmc_rt_plan plan;
    llmc_rt_error err;
    CHECK(bytes && llmc_rt_plan_open(&plan, bytes, size, 0, &err) == LLMC_RT_OK &&
          !strcmp(llmc_rt_plan_step_isa(&plan, 1), "generic") &&
          !strcmp(llmc_rt_plan_step_isa(&plan, 64), "generic"),
          "decode_isa and prefill_isa generic on a generic plan: both steps on generic");
    free(bytes);
    if (!RT_KERNELS_TUNABLE)
        return;
    expect_code(V_DECODE_ISA_OTHER_TARGET, LLMC_RT_E_CORRUPT, "Plan.decode_isa 4 "
                "(avx2+avx512vnni) is not a kernel table of target \"generic\"",
                "decode_isa of another target's table");
    char past[64];
    snprintf(past, sizeof past, "Plan.prefill_isa %d (?) is not a kernel table", KISA_COUNT);
    expect_code(V_PREFILL_ISA_UNKNOWN, LLMC_RT_E_CORRUPT, past, "prefill_isa past the list");
}

/* Plan.gemv_prefetch: the plan's distance where it gives one (a multiple
 * of 64 up to 65536), else this CPU's default. */
static void test_gemv_prefetch(void)
{
    size_t size;
    llmc_rt_plan plan;
    llmc_rt_error err;
    const int variants[2] = {V_VALID, V_GEMV_PREFETCH_4K};
    const uint32_t want[2] = {rt_gemv_prefetch_default(), 4096};
    for (int i = 0; i < 2; i++) {
        uint8_t *bytes = build(variants[i], &size);
        CHECK(bytes && llmc_rt_plan_open(&plan, bytes, size, 0, &err) == LLMC_RT_OK &&
              rt_plan_of(&plan)->gemv_prefetch == want[i],
              "gemv_prefetch %s: %u bytes ahead", i ? "4096" : "absent", want[i]);
        free(bytes);
    }
    expect_code(V_GEMV_PREFETCH_ODD, LLMC_RT_E_CORRUPT,
                "Plan.gemv_prefetch 4100 is not a multiple of 64 up to 65536",
                "gemv_prefetch not a multiple of 64");
    expect_code(V_GEMV_PREFETCH_FAR, LLMC_RT_E_CORRUPT,
                "Plan.gemv_prefetch 65600 is not a multiple of 64 up to 65536",
                "gemv_prefetch past 65536");
}

static void test_arena_overflow(const uint8_t *bytes, size_t size)
{
    llmc_rt_plan plan;
    llmc_rt_error err;
    llmc_rt_plan_open(&plan, bytes, size, 0, &err);
    expect_patched(bytes, size, rt_plan_of(&plan)->arena_size, rt_plan_of(&plan)->arena_size - 64, 0, LLMC_RT_E_CORRUPT,
                   "exceed arena_size", "arena tensor past arena_size");
}

int main(void)
{
    size_t size;
    uint8_t *bytes = build(V_VALID, &size);
    CHECK(bytes != NULL, "plan built with flatc (%zu bytes)", size);
    if (!bytes)
        return TAP_DONE();
    test_valid(bytes, size);
    test_truncations(bytes, size);
    test_bit_flips(bytes, size);
    test_defects(bytes, size);
    test_arena_overflow(bytes, size);
    test_tuned_kernels();
    test_gemv_prefetch();
    free(bytes);
    return TAP_DONE();
}
