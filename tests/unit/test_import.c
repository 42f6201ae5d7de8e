/* ONNX importer tests on the models tests/make_onnx_cases.py writes into
 * $BUILD/test-data/import (the generator runs first, from the repo root). */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "onnx/onnx_import.h"
#include "tap.h"

static char data_dir[1024];

static const char *case_path(const char *name)
{
    static char paths[4][2048];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s", data_dir, name);
    return p;
}

static int generate_cases(void)
{
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    snprintf(data_dir, sizeof data_dir, "%s/test-data/import", build);
    char cmd[2300];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/make_onnx_cases.py '%s'", data_dir);
    return system(cmd);
}

static int import_case(const char *name, const llmc_import_options *opt, llmc_graph *g, llmc_error *err)
{
    memset(err, 0, sizeof *err);
    return llmc_import_onnx(case_path(name), opt, g, err);
}

static const llmc_value *value(const llmc_graph *g, const char *name)
{
    int id = llmc_graph_find_value(g, name);
    return id >= 0 ? &g->values[id] : NULL;
}

static int node_by_name(const llmc_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0)
            return i;
    return -1;
}

static bool shape_is(const llmc_shape *s, int rank, const llmc_affine *dims)
{
    if (s->rank != rank)
        return false;
    for (int i = 0; i < rank; i++)
        if (!llmc_aff_eq(s->dims[i], dims[i]))
            return false;
    return true;
}

static bool const_bytes_are(const llmc_value *v, int dtype, const void *bytes, uint64_t n)
{
    return v && v->is_const && v->dtype == dtype && v->konst.nbytes == n &&
           (n == 0 || memcmp(v->konst.data, bytes, n) == 0);
}

/* Imports a model that must fail: the code, the graph left empty, and the
 * message naming what is wrong (every needle present). */
static void expect_failure(const char *path, const llmc_import_options *opt, int code,
                           const char *const *needles, int n_needles)
{
    llmc_graph g;
    llmc_error err = {0};
    int rc = llmc_import_onnx(path, opt, &g, &err);
    bool named = true;
    for (int i = 0; i < n_needles; i++)
        named = named && strstr(err.msg, needles[i]) != NULL;
    CHECK(rc == code && err.code == code && named && g.n_values == 0 && !g.import_state,
          "%s fails with %s: %.600s", strrchr(path, '/') + 1, llmc_status_name(code), err.msg);
    llmc_graph_free(&g);
}

#define EXPECT_FAILURE(name, code, ...)                                                            \
    do {                                                                                           \
        const char *const needles_[] = {__VA_ARGS__};                                              \
        expect_failure(case_path(name), NULL, code, needles_, sizeof needles_ / sizeof *needles_); \
    } while (0)

/* ---- the small LLM-shaped model ---- */

static void check_small_inputs(const llmc_graph *g)
{
    static const llmc_affine one = {1, 0, 0}, S = {0, 1, 0}, P = {0, 0, 1}, PS = {0, 1, 1};
    const llmc_affine ids[] = {one, S}, mask[] = {one, PS}, past[] = {one, {2, 0, 0}, P, {4, 0, 0}},
                      extra[] = {{5, 0, 0}, {3, 0, 0}};
    static const char *const names[] = {"input_ids", "attention_mask", "position_ids",
                                        "past_key_values.0.key", "past_key_values.0.value", "extra"};
    bool in_order = g->n_inputs == 6;
    for (int i = 0; in_order && i < 6; i++)
        in_order = strcmp(g->values[g->inputs[i]].name, names[i]) == 0 && g->values[g->inputs[i]].is_graph_input;
    CHECK(in_order, "6 graph inputs in ONNX order; the initializer listed as input 'W' is not one");
    CHECK(shape_is(&value(g, "input_ids")->shape, 2, ids) && value(g, "input_ids")->dtype == LLMC_DT_INT64,
          "input_ids is int64 [1, S]");
    CHECK(shape_is(&value(g, "position_ids")->shape, 2, ids), "position_ids is [1, S]");
    CHECK(shape_is(&value(g, "attention_mask")->shape, 2, mask), "attention_mask 'total' is [1, P+S]");
    CHECK(shape_is(&value(g, "past_key_values.0.key")->shape, 4, past) &&
          shape_is(&value(g, "past_key_values.0.value")->shape, 4, past), "past key/value are [1, 2, P, 4]");
    CHECK(shape_is(&value(g, "extra")->shape, 2, extra), "--dim foo=5 binds extra to [5, 3]");
}

static void check_small_initializers(const llmc_graph *g)
{
    float w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (float)i * 0.5f;
    const llmc_value *W = value(g, "W");
    const llmc_affine four_by_four[] = {{4, 0, 0}, {4, 0, 0}};
    CHECK(const_bytes_are(W, LLMC_DT_FLOAT, w, sizeof w) && !W->is_graph_input && W->producer == -1 &&
          shape_is(&W->shape, 2, four_by_four), "raw_data initializer W: float [4,4], bytes exact");
    CHECK(!W->konst.owned, "raw_data is used in place, not copied");
    const int64_t bias[] = {-1, 0, (int64_t)1 << 40};
    CHECK(const_bytes_are(value(g, "bias"), LLMC_DT_INT64, bias, sizeof bias), "raw int64 initializer");
    const float scalar = -3;
    CHECK(const_bytes_are(value(g, "scalar"), LLMC_DT_FLOAT, &scalar, 4) && value(g, "scalar")->shape.rank == 0,
          "raw scalar initializer has rank 0");
}

static void check_typed_initializers(const llmc_graph *g)
{
    float f[6];
    for (int i = 0; i < 6; i++)
        f[i] = 1.5f * (float)i - 2;
    const int32_t i32[] = {-7, 0, 7, INT32_MAX};
    const int64_t i64[] = {-((int64_t)1 << 40), 5};
    const double d[] = {0.1, -2.5, 1e300};
    const uint8_t b[] = {1, 0, 1, 1}, u8[] = {0, 128, 255};
    const uint16_t u16[] = {65535, 1};
    const float f16[] = {1.0f, -2.0f}, bf16[] = {1.0f};   /* widened to float32 */
    const int8_t i8[] = {-128, -1, 127};
    const int16_t i16[] = {-300, 300};
    const uint32_t u32[] = {4294967295u, 7};
    const uint64_t u64[] = {(1ull << 63) + 5};
    CHECK(const_bytes_are(value(g, "t_float"), LLMC_DT_FLOAT, f, sizeof f) && value(g, "t_float")->konst.owned,
          "float_data -> owned float buffer");
    CHECK(const_bytes_are(value(g, "t_int32"), LLMC_DT_INT32, i32, sizeof i32), "int32_data -> int32");
    CHECK(const_bytes_are(value(g, "t_int64"), LLMC_DT_INT64, i64, sizeof i64), "int64_data -> int64");
    CHECK(const_bytes_are(value(g, "t_double"), LLMC_DT_DOUBLE, d, sizeof d), "double_data -> double");
    CHECK(const_bytes_are(value(g, "t_bool"), LLMC_DT_BOOL, b, sizeof b), "int32_data -> bool bytes");
    CHECK(const_bytes_are(value(g, "t_float16"), LLMC_DT_FLOAT, f16, sizeof f16),
          "int32_data float16 bits -> float32");
    CHECK(const_bytes_are(value(g, "t_bfloat16"), LLMC_DT_FLOAT, bf16, sizeof bf16),
          "int32_data bfloat16 bits -> float32");
    CHECK(const_bytes_are(value(g, "t_uint8"), LLMC_DT_UINT8, u8, sizeof u8), "int32_data -> uint8");
    CHECK(const_bytes_are(value(g, "t_int8"), LLMC_DT_INT8, i8, sizeof i8), "int32_data -> int8");
    CHECK(const_bytes_are(value(g, "t_int16"), LLMC_DT_INT16, i16, sizeof i16), "int32_data -> int16");
    CHECK(const_bytes_are(value(g, "t_uint16"), LLMC_DT_UINT16, u16, sizeof u16), "int32_data -> uint16");
    CHECK(const_bytes_are(value(g, "t_uint32"), LLMC_DT_UINT32, u32, sizeof u32), "uint64_data -> uint32");
    CHECK(const_bytes_are(value(g, "t_uint64"), LLMC_DT_UINT64, u64, sizeof u64), "uint64_data -> uint64");
    const llmc_affine zero_by_three[] = {{0, 0, 0}, {3, 0, 0}};
    CHECK(const_bytes_are(value(g, "t_empty"), LLMC_DT_FLOAT, NULL, 0) &&
          shape_is(&value(g, "t_empty")->shape, 2, zero_by_three), "empty [0,3] initializer without data");
}

static void check_small_constants(const llmc_graph *g)
{
    const float half = 0.5f, floats[] = {1, 2, 3};
    const int64_t perm[] = {1, 0}, ints[] = {3, 1}, seven = 7;
    const llmc_affine two[] = {{2, 0, 0}}, three[] = {{3, 0, 0}};
    CHECK(const_bytes_are(value(g, "half"), LLMC_DT_FLOAT, &half, 4) && value(g, "half")->shape.rank == 0,
          "Constant value_float -> float scalar 0.5");
    CHECK(const_bytes_are(value(g, "perm_c"), LLMC_DT_INT64, perm, sizeof perm) &&
          shape_is(&value(g, "perm_c")->shape, 1, two), "Constant value (tensor) -> int64 [2]");
    CHECK(const_bytes_are(value(g, "ints_c"), LLMC_DT_INT64, ints, sizeof ints), "Constant value_ints");
    CHECK(const_bytes_are(value(g, "int_c"), LLMC_DT_INT64, &seven, 8) && value(g, "int_c")->shape.rank == 0,
          "Constant value_int -> int64 scalar");
    CHECK(const_bytes_are(value(g, "floats_c"), LLMC_DT_FLOAT, floats, sizeof floats) &&
          shape_is(&value(g, "floats_c")->shape, 1, three), "Constant value_floats -> float [3]");
    bool constant_nodes = false;
    for (int i = 0; i < g->n_nodes; i++)
        constant_nodes |= strcmp(g->nodes[i].op_type, "Constant") == 0;
    CHECK(g->n_nodes == 8 && !constant_nodes, "Constant nodes are not added as nodes (8 nodes left)");
}

static void check_small_nodes(const llmc_graph *g)
{
    int gather = node_by_name(g, "gather");
    CHECK(gather >= 0 && g->nodes[gather].n_inputs == 2 &&
          g->nodes[gather].inputs[0] == llmc_graph_find_value(g, "W") &&
          g->nodes[gather].inputs[1] == llmc_graph_find_value(g, "input_ids") &&
          g->nodes[gather].opset == 17 && strcmp(g->nodes[gather].domain, "") == 0 &&
          llmc_node_attr_int(g, gather, "axis", 99) == 0, "Gather: inputs, opset 17, axis=0");
    CHECK(value(g, "emb")->producer == gather, "Gather produces emb");
    int mul = node_by_name(g, "mul");
    const llmc_attr *coeffs = mul >= 0 ? llmc_node_attr(g, mul, "coeffs") : NULL;
    CHECK(coeffs && coeffs->type == LLMC_ATTR_FLOATS && coeffs->n_floats == 2 && coeffs->floats[0] == 0.5f &&
          coeffs->floats[1] == 1.5f, "FLOATS attribute");
    int tr = node_by_name(g, "transpose");
    const llmc_attr *perm = llmc_node_attr(g, tr, "perm"), *note = llmc_node_attr(g, tr, "note"),
                    *tags = llmc_node_attr(g, tr, "tags");
    CHECK(perm && perm->type == LLMC_ATTR_INTS && perm->n_ints == 3 && perm->ints[0] == 0 && perm->ints[1] == 2 &&
          perm->ints[2] == 1, "INTS attribute perm=[0,2,1]");
    CHECK(note && note->type == LLMC_ATTR_STRING && strcmp(note->s, "hello") == 0, "STRING attribute");
    CHECK(tags && tags->type == LLMC_ATTR_STRINGS, "STRINGS attribute kept by name and type");
    CHECK(llmc_node_attr_int(g, node_by_name(g, "softmax"), "axis", 0) == -1, "INT attribute axis=-1");
    int ln = node_by_name(g, "ln");
    CHECK(ln >= 0 && fabsf(llmc_node_attr_float(g, ln, "epsilon", 0) - 1e-5f) < 1e-12f, "FLOAT attribute epsilon");
    CHECK(g->nodes[ln].n_inputs == 3 && g->nodes[ln].inputs[2] == -1, "omitted optional input '' is -1");
    const llmc_attr *v = llmc_node_attr(g, node_by_name(g, "cos"), "value");
    const float quarter = 0.25f;
    CHECK(v && v->type == LLMC_ATTR_TENSOR && v->t_dtype == LLMC_DT_FLOAT && v->t_rank == 1 && v->t_dims[0] == 1 &&
          v->t_data.nbytes == 4 && memcmp(v->t_data.data, &quarter, 4) == 0, "TENSOR attribute decoded");
}

static void check_small_outputs(const llmc_graph *g)
{
    const llmc_affine logits[] = {{1, 0, 0}, {0, 1, 0}, {4, 0, 0}},
                      present[] = {{1, 0, 0}, {2, 0, 0}, {0, 1, 1}, {4, 0, 0}};
    const llmc_value *lg = value(g, "logits"), *pr = value(g, "present.0.key"), *probs = value(g, "probs"),
                     *filled = value(g, "filled");
    CHECK(g->n_outputs == 4 && g->outputs[0] == llmc_graph_find_value(g, "logits") &&
          g->outputs[3] == llmc_graph_find_value(g, "filled"), "4 graph outputs in order");
    CHECK(lg->is_graph_output && lg->dtype == LLMC_DT_FLOAT && shape_is(&lg->shape, 3, logits) &&
          lg->producer == node_by_name(g, "cast"), "logits: float [1, S, 4], produced by Cast");
    CHECK(shape_is(&pr->shape, 4, present), "present.0.key 'total' is P+S like the mask");
    CHECK(probs->is_graph_output && probs->shape.rank == -1, "output with an unknown dim_param stays unknown");
    CHECK(filled->dtype == LLMC_DT_FLOAT && filled->shape.rank == -1, "output dtype from its type, no shape");
}

static uint64_t file_hash(const char *path)
{
    FILE *f = fopen(path, "rb");
    static char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    return XXH64(buf, n, 0);
}

static void test_small_model(void)
{
    llmc_graph g;
    llmc_error err;
    const llmc_dim_binding foo = {"foo", 5};
    const llmc_import_options opt = {1, &foo, NULL};
    int rc = import_case("small.onnx", &opt, &g, &err);
    CHECK(rc == LLMC_OK, "small.onnx imports: %s", err.msg);
    if (rc != LLMC_OK)
        return;
    CHECK(g.opset == 17, "opset 17 recorded");
    CHECK(g.source_hash == file_hash(case_path("small.onnx")), "source_hash is XXH64 of the file");
    check_small_inputs(&g);
    check_small_initializers(&g);
    check_typed_initializers(&g);
    check_small_constants(&g);
    check_small_nodes(&g);
    check_small_outputs(&g);
    llmc_graph_free(&g);
}

static void test_dim_bindings(void)
{
    llmc_graph g;
    llmc_error err;
    const llmc_affine S = {0, 1, 0}, three = {3, 0, 0};
    int rc = import_case("mask_seq.onnx", NULL, &g, &err);
    CHECK(rc == LLMC_OK && llmc_aff_eq(value(&g, "attention_mask")->shape.dims[1], S) &&
          llmc_aff_eq(value(&g, "y")->shape.dims[1], S), "mask named like input_ids axis 1 is S: %s", err.msg);
    llmc_graph_free(&g);
    const llmc_dim_binding b[] = {{"foo", 5}, {"seq", 3}};
    const llmc_import_options opt = {2, b, NULL};
    rc = import_case("small.onnx", &opt, &g, &err);
    CHECK(rc == LLMC_OK && llmc_aff_eq(value(&g, "input_ids")->shape.dims[1], three),
          "--dim seq=3 wins over the S role");
    llmc_graph_free(&g);
    const llmc_dim_binding neg = {"foo", -1};
    const llmc_import_options bad = {1, &neg, NULL};
    const char *const needles[] = {"foo=-1"};
    expect_failure(case_path("small.onnx"), &bad, LLMC_E_USAGE, needles, 1);
    EXPECT_FAILURE("small.onnx", LLMC_E_UNSUPPORTED, "input 'extra' axis 0 has symbolic dim 'foo'", "--dim foo=N");
    EXPECT_FAILURE("unbound_dim.onnx", LLMC_E_UNSUPPORTED, "input 'x' axis 1 has symbolic dim 'foo'");
    EXPECT_FAILURE("unsized_dim.onnx", LLMC_E_UNSUPPORTED, "input 'x' axis 1");
    EXPECT_FAILURE("negative_dim_input.onnx", LLMC_E_INPUT, "input 'x' axis 0", "-2");
}

/* ---- external data ---- */

static void check_external_contents(const llmc_graph *g, const char *layout)
{
    float a[6], c[5];
    for (int i = 0; i < 6; i++)
        a[i] = (float)i - 2.5f;
    for (int i = 0; i < 5; i++)
        c[i] = (float)i * 0.25f;
    const int64_t b[] = {10, -20, 30, (int64_t)1 << 50};
    const llmc_value *A = value(g, "A"), *B = value(g, "B"), *C = value(g, "C");
    CHECK(const_bytes_are(A, LLMC_DT_FLOAT, a, sizeof a) && A->shape.rank == 2, "%s: A bytes exact", layout);
    CHECK(const_bytes_are(B, LLMC_DT_INT64, b, sizeof b), "%s: B bytes exact", layout);
    CHECK(const_bytes_are(C, LLMC_DT_FLOAT, c, sizeof c), "%s: C bytes exact", layout);
    CHECK(!A->konst.owned && !B->konst.owned && !C->konst.owned, "%s: constants point into the mapping", layout);
}

static void test_external_data(void)
{
    llmc_graph g;
    llmc_error err;
    int rc = import_case("ext_single/model.onnx", NULL, &g, &err);
    CHECK(rc == LLMC_OK, "single-file external data imports: %s", err.msg);
    if (rc == LLMC_OK) {
        check_external_contents(&g, "location/offset/length");
        /* A at offset 3 (24 bytes), B at offset 30: one mapping of weights.bin. */
        CHECK((const char *)value(&g, "B")->konst.data - (const char *)value(&g, "A")->konst.data == 27,
              "tensors sharing weights.bin share one mapping");
    }
    llmc_graph_free(&g);
    rc = import_case("ext_per_tensor/model.onnx", NULL, &g, &err);
    CHECK(rc == LLMC_OK, "one-file-per-tensor external data imports: %s", err.msg);
    if (rc == LLMC_OK)
        check_external_contents(&g, "file per tensor");
    llmc_graph_free(&g);
}

static void test_external_data_errors(void)
{
    EXPECT_FAILURE("ext_bad/dotdot.onnx", LLMC_E_INPUT, "w_dotdot", "'../outside.bin'");
    EXPECT_FAILURE("ext_bad/absolute.onnx", LLMC_E_INPUT, "w_absolute", "'/etc/passwd'");
    EXPECT_FAILURE("ext_bad/symlink.onnx", LLMC_E_INPUT, "w_symlink", "'link.bin'", "outside the model folder");
    EXPECT_FAILURE("ext_bad/missing.onnx", LLMC_E_INPUT, "w_missing", "'nope.bin'", "offset 0",
                   "No such file or directory");
    EXPECT_FAILURE("ext_bad/short.onnx", LLMC_E_INPUT, "w_short", "'data.bin'", "length 16", "(10 bytes)");
    EXPECT_FAILURE("ext_bad/offset.onnx", LLMC_E_INPUT, "w_offset", "'data.bin'", "offset 100");
    EXPECT_FAILURE("ext_bad/length.onnx", LLMC_E_INPUT, "w_length", "'data.bin'", "has 8 bytes", "needs 16");
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0, c;
    while (f && (c = fgetc(f)) != EOF)
        n += c == '\n';
    if (f)
        fclose(f);
    return n;
}

static int count_open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) != -1;
    return n;
}

/* Mappings and descriptors are not heap blocks: valgrind cannot see them. */
static void test_no_leaked_mappings(void)
{
    int maps = count_lines("/proc/self/maps"), fds = count_open_fds();
    for (int i = 0; i < 3; i++) {
        llmc_graph g;
        llmc_error err;
        import_case("ext_single/model.onnx", NULL, &g, &err);
        llmc_graph_free(&g);
        import_case("ext_bad/short.onnx", NULL, &g, &err);
        llmc_graph_free(&g);
    }
    CHECK(count_lines("/proc/self/maps") == maps && count_open_fds() == fds,
          "no mapping or file descriptor outlives the graph (maps %d, fds %d)", maps, fds);
}

/* ---- malformed files ---- */

static int write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static void test_truncated(void)
{
    static char buf[1 << 16];
    FILE *f = fopen(case_path("small.onnx"), "rb");
    size_t size = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    const size_t cuts[] = {1, 2, 7, 40, size / 3, size / 2, size - 30, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        const char *path = case_path("truncated.onnx");
        int w = write_file(path, buf, cuts[i]);
        const char *const needles[] = {"truncated.onnx"};
        CHECK(w == 0, "wrote the first %zu of %zu bytes", cuts[i], size);
        expect_failure(path, NULL, LLMC_E_INPUT, needles, 1);
    }
    const char *empty = case_path("empty.onnx");
    write_file(empty, "", 0);
    const char *const empty_needles[] = {"empty.onnx", "not a valid ONNX model"};
    expect_failure(empty, NULL, LLMC_E_INPUT, empty_needles, 2);
}

static void test_bad_files(void)
{
    EXPECT_FAILURE("does_not_exist.onnx", LLMC_E_INPUT, "cannot open", "does_not_exist.onnx'",
                   "No such file or directory");
    EXPECT_FAILURE("ext_single", LLMC_E_INPUT, "cannot open", "ext_single'");
    EXPECT_FAILURE("not_onnx.onnx", LLMC_E_INPUT,
                   "not_onnx.onnx' is not a valid ONNX model (byte 0, field #1107296255: wire type 7");
    EXPECT_FAILURE("no_graph.onnx", LLMC_E_INPUT, "no_graph.onnx", "no graph");
    EXPECT_FAILURE("no_default_opset.onnx", LLMC_E_UNSUPPORTED, "no_default_opset.onnx' imports no opset of domain ''");
    /* Sparse, so it costs no disk space. */
    const char *big = case_path("big.onnx");
    int fd = open(big, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    bool made = fd >= 0 && ftruncate(fd, ((off_t)2 << 30) + 1) == 0;
    if (fd >= 0)
        close(fd);
    CHECK(made, "made a sparse 2 GiB + 1 file");
    EXPECT_FAILURE("big.onnx", LLMC_E_INPUT, "big.onnx", "2147483649 bytes", "2 GiB");
    unlink(big);
}

static void test_model_errors(void)
{
    EXPECT_FAILURE("opset12.onnx", LLMC_E_UNSUPPORTED, "opset 12 of domain '' is outside the supported range 13..21");
    EXPECT_FAILURE("opset22.onnx", LLMC_E_UNSUPPORTED, "opset 22 of domain '' is outside the supported range 13..21");
    EXPECT_FAILURE("unsupported.onnx", LLMC_E_UNSUPPORTED, "unsupported operators (4): ",
                   "node 'fused' (#0) com.microsoft::FusedMatMul opset 1", "node 'modder' (#1) Mod opset 17",
                   "node 'nz' (#3) NonZero opset 17", "node 'frob' (#4) x.custom::Frobnicate opset (domain not imported)");
    EXPECT_FAILURE("many_unsupported.onnx", LLMC_E_UNSUPPORTED, "unsupported operators (300): ",
                   "node 'mod_node_with_a_long_name_000' (#0) Mod opset 17", "more");
    EXPECT_FAILURE("undefined_input.onnx", LLMC_E_INPUT,
                   "node 'adder' (#0, Add) input 1 'foo' is not defined by any node, input or initializer");
    EXPECT_FAILURE("duplicate_producer.onnx", LLMC_E_INPUT, "'y' is defined twice", "node 'first' (#0, Relu)",
                   "node 'second' (#1, Neg)");
    EXPECT_FAILURE("cycle.onnx", LLMC_E_INPUT, "cycle", "cyc_");
    EXPECT_FAILURE("undefined_output.onnx", LLMC_E_INPUT, "graph output 'ghost' is not defined");
    EXPECT_FAILURE("subgraph.onnx", LLMC_E_UNSUPPORTED, "node 'branchy' (#0, If): the condition is graph input 'cond'",
                   "neither branch reads the past key/values");
    EXPECT_FAILURE("constant_sparse.onnx", LLMC_E_UNSUPPORTED, "node 'sparse_c'", "'sparse_value'");
    EXPECT_FAILURE("constant_string.onnx", LLMC_E_UNSUPPORTED, "node 'string_c'", "'value_string'");
    EXPECT_FAILURE("negative_dim_init.onnx", LLMC_E_INPUT, "initializer 'neg'", "negative dim -1 at axis 1");
    EXPECT_FAILURE("overflow_shape.onnx", LLMC_E_INPUT, "initializer 'huge'", "[1099511627776,1099511627776]");
    EXPECT_FAILURE("short_raw.onnx", LLMC_E_INPUT, "initializer 'short_raw'", "8 bytes of raw_data", "needs 12");
    EXPECT_FAILURE("short_typed.onnx", LLMC_E_INPUT, "initializer 'few_typed'", "2 elements in int64_data",
                   "needs 3");
}

static void test_many_unsupported_fits(void)
{
    llmc_graph g;
    llmc_error err;
    import_case("many_unsupported.onnx", NULL, &g, &err);
    size_t len = strlen(err.msg);
    CHECK(strstr(err.msg, "; ... and ") && len > 5 && strcmp(err.msg + len - 5, " more") == 0 &&
              len < sizeof err.msg - 1,
          "a long list ends with '... and N more' inside the buffer (%zu chars)", len);
    llmc_graph_free(&g);
}

/* ---- tensor files ---- */

static void test_tensor_files(void)
{
    llmc_tensor_file t;
    llmc_error err = {0};
    float x[6];
    for (int i = 0; i < 6; i++)
        x[i] = (float)i * 1.25f - 1;
    int rc = llmc_read_tensor_pb(case_path("input_0.pb"), &t, &err);
    CHECK(rc == LLMC_OK && strcmp(t.name, "x") == 0 && t.dtype == LLMC_DT_FLOAT && t.rank == 2 && t.dims[0] == 2 &&
          t.dims[1] == 3 && t.nbytes == sizeof x && memcmp(t.data, x, sizeof x) == 0,
          "raw float tensor file read byte-exact: %s", err.msg);
    llmc_tensor_file_free(&t);
    const int64_t y[] = {4, -5, (int64_t)1 << 45};
    rc = llmc_read_tensor_pb(case_path("output_0.pb"), &t, &err);
    CHECK(rc == LLMC_OK && t.dtype == LLMC_DT_INT64 && t.rank == 2 && t.dims[0] == 3 && t.dims[1] == 1 &&
          t.nbytes == sizeof y && memcmp(t.data, y, sizeof y) == 0, "int64_data tensor file read: %s", err.msg);
    llmc_tensor_file_free(&t);
    memset(&err, 0, sizeof err);
    rc = llmc_read_tensor_pb(case_path("missing_0.pb"), &t, &err);
    CHECK(rc == LLMC_E_INPUT && strstr(err.msg, "missing_0.pb") && !t.data && !t.name, "missing tensor file: %s",
          err.msg);
    memset(&err, 0, sizeof err);
    rc = llmc_read_tensor_pb(case_path("not_onnx.onnx"), &t, &err);
    CHECK(rc == LLMC_E_INPUT && strstr(err.msg, "not_onnx.onnx"), "garbage tensor file: %s", err.msg);
}

/* The float32 bits of float16 / bfloat16 `h`, from the value's definition
 * (ldexp of the integer mantissa) rather than by moving bit fields. */
static uint32_t expected_bits(uint16_t h, int exp_bits)
{
    int man_bits = 15 - exp_bits, bias = (1 << (exp_bits - 1)) - 1;
    uint32_t sign = h >> 15, e = (h >> man_bits) & ((1u << exp_bits) - 1), m = h & ((1u << man_bits) - 1);
    uint32_t bits;
    if (e == (1u << exp_bits) - 1) {            /* inf, NaN: payload at the top of the float32 mantissa */
        bits = (sign << 31) | 0x7f800000u | (m << (23 - man_bits));
    } else {
        double v = ldexp(e ? (double)((1u << man_bits) + m) : (double)m, (e ? (int)e : 1) - bias - man_bits);
        float f = (float)(sign ? -v : v);       /* exact: every such value is a float */
        memcpy(&bits, &f, 4);
    }
    return bits;
}

static uint32_t float_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static void test_half_conversion(void)
{
    int bad_f16 = 0, bad_bf16 = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        bad_f16 += float_bits(llmc_half_to_float((uint16_t)h)) != expected_bits((uint16_t)h, 5);
        bad_bf16 += float_bits(llmc_bfloat16_to_float((uint16_t)h)) != expected_bits((uint16_t)h, 8);
    }
    CHECK(bad_f16 == 0, "all 65536 float16 values widen exactly (%d differ)", bad_f16);
    CHECK(bad_bf16 == 0, "all 65536 bfloat16 values widen exactly (%d differ)", bad_bf16);
    CHECK(llmc_half_to_float(0x0001) == ldexpf(1, -24) && llmc_half_to_float(0x03ff) == ldexpf(1023, -24) &&
          llmc_half_to_float(0x7bff) == 65504.0f && isinf(llmc_half_to_float(0xfc00)) &&
          llmc_half_to_float(0xfc00) < 0 && float_bits(llmc_half_to_float(0x8000)) == 0x80000000u &&
          float_bits(llmc_half_to_float(0x7e01)) == 0x7fc02000u,
          "float16 subnormals, max, -inf, -0 and a NaN payload");
}

static void test_half_model(void)
{
    llmc_graph g;
    llmc_error err;
    llmc_import_report rep;
    memset(&rep, 0xff, sizeof rep);
    llmc_import_options opt = {0, NULL, &rep};
    int rc = import_case("half.onnx", &opt, &g, &err);
    CHECK(rc == LLMC_OK, "16-bit float model imports (%s)", err.msg);
    if (rc)
        return;
    const llmc_value *f16 = value(&g, "f16_all"), *bf16 = value(&g, "bf16_all");
    int bad = 0;
    if (f16 && f16->dtype == LLMC_DT_FLOAT && f16->konst.nbytes == 65536 * 4 && f16->konst.owned &&
        bf16 && bf16->dtype == LLMC_DT_FLOAT && bf16->konst.nbytes == 65536 * 4 && bf16->konst.owned) {
        const float *a = f16->konst.data, *b = bf16->konst.data;
        for (uint32_t h = 0; h < 65536; h++)
            bad += float_bits(a[h]) != expected_bits((uint16_t)h, 5) ||
                   float_bits(b[h]) != expected_bits((uint16_t)h, 8);
    } else {
        bad = -1;
    }
    CHECK(bad == 0, "raw_data float16 and bfloat16 initializers are owned float32, every value exact (%d)", bad);
    const float c16[] = {0.5f, -65504.0f, ldexpf(1, -24)};
    CHECK(const_bytes_are(value(&g, "c16"), LLMC_DT_FLOAT, c16, sizeof c16), "float16 Constant -> float32");
    const llmc_value *x = value(&g, "x"), *y = value(&g, "y"), *z = value(&g, "z"), *sum = value(&g, "sum");
    CHECK(x && x->is_graph_input && x->dtype == LLMC_DT_FLOAT, "float16 graph input -> float32");
    CHECK(y && z && y->dtype == LLMC_DT_FLOAT && y->declared_dtype == LLMC_DT_FLOAT &&
          z->declared_dtype == LLMC_DT_FLOAT, "float16/bfloat16 graph outputs -> float32");
    CHECK(sum && sum->declared_dtype == LLMC_DT_FLOAT, "float16 value_info -> float32");
    int to16 = node_by_name(&g, "to16"), tobf16 = node_by_name(&g, "tobf16"), cos = node_by_name(&g, "cos");
    CHECK(to16 >= 0 && tobf16 >= 0 && llmc_node_attr_int(&g, to16, "to", 0) == LLMC_DT_FLOAT &&
          llmc_node_attr_int(&g, tobf16, "to", 0) == LLMC_DT_FLOAT, "Cast to float16/bfloat16 -> to float");
    const llmc_attr *cv = cos >= 0 ? llmc_node_attr(&g, cos, "value") : NULL;
    const float one_and_half = 1.5f;
    CHECK(cv && cv->t_dtype == LLMC_DT_FLOAT && cv->t_data.nbytes == 4 &&
          memcmp(cv->t_data.data, &one_and_half, 4) == 0, "float16 ConstantOfShape value -> float32");
    CHECK(rep.consts[0] == 3 && rep.consts[1] == 1 && rep.inputs[0] == 1 && rep.inputs[1] == 0 &&
          rep.outputs[0] == 2 && rep.outputs[1] == 1 && rep.value_infos[0] == 1 && rep.value_infos[1] == 0 &&
          rep.casts[0] == 1 && rep.casts[1] == 1 && rep.const_bytes == 2 * 65536 * 4 + 3 * 4 + 4,
          "the import report counts what was widened");
    char line[512];
    llmc_import_report_line(&rep, line, sizeof line);
    CHECK(strstr(line, "import: 7 float16 and 2 bfloat16 tensors widened to float32 (4 constants") &&
          strstr(line, "2 Casts to float16 or bfloat16 now cast to float32"), "report line: %s", line);
    llmc_graph_free(&g);
    llmc_import_report none = {0};
    llmc_import_report_line(&none, line, sizeof line);
    CHECK(line[0] == 0, "no report line when nothing was widened");
}

int main(void)
{
    if (generate_cases() != 0) {
        CHECK(0, "tests/make_onnx_cases.py wrote the test models (run from the repo root)");
        return TAP_DONE();
    }
    test_small_model();
    test_dim_bindings();
    test_external_data();
    test_external_data_errors();
    test_no_leaked_mappings();
    test_truncated();
    test_bad_files();
    test_model_errors();
    test_many_unsupported_fits();
    test_tensor_files();
    test_half_conversion();
    test_half_model();
    return TAP_DONE();
}
