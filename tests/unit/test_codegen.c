/* codegen: lowering, memory planning and the plan file, on small graphs
 * built by hand (shapes and sym set as shape inference would).  Plans are
 * decoded with a tiny FlatBuffers reader below and, for numerics, executed
 * with the runtime and compared with plain C loops.
 *
 *   test_codegen                  run the checks (TAP)
 *   test_codegen --write-plan F   write the sample plan used by
 *                                 tests/t_plan_schema.sh to F */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "codegen/codegen.h"
#include "codegen/plan_model.h"
#include "ir/io_roles.h"
#include "ir/ir.h"
#include "llmc_rt.h"
#include "onnx/onnx_ops.h"
#include "tap.h"

#define MAX_CONTEXT 32

/* ---- graph building ---- */

#define C_(c) ((llmc_affine){(c), 0, 0})
#define S_ ((llmc_affine){0, 1, 0})
#define P_ ((llmc_affine){0, 0, 1})
#define PS_ ((llmc_affine){0, 1, 1})

static int value(llmc_graph *g, const char *name, int dtype, int rank, const llmc_affine *dims)
{
    int v = llmc_graph_add_value(g, name, dtype);
    g->values[v].shape.rank = rank;
    for (int k = 0; k < rank; k++)
        g->values[v].shape.dims[k] = dims[k];
    return v;
}

static int input(llmc_graph *g, const char *name, int dtype, int rank, const llmc_affine *dims)
{
    int v = value(g, name, dtype, rank, dims);
    g->values[v].is_graph_input = true;
    g->inputs = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1));
    g->inputs[g->n_inputs++] = v;
    return v;
}

static void output(llmc_graph *g, int v)
{
    g->values[v].is_graph_output = true;
    g->outputs = realloc(g->outputs, sizeof(int) * (size_t)(g->n_outputs + 1));
    g->outputs[g->n_outputs++] = v;
}

static int constant(llmc_graph *g, const char *name, int dtype, int rank, const int64_t *dims,
                    const void *data)
{
    llmc_shape s = {.rank = rank};
    uint64_t n = 1;
    for (int k = 0; k < rank; k++) {
        s.dims[k] = C_(dims[k]);
        n *= (uint64_t)dims[k];
    }
    int v = llmc_graph_add_value(g, name, dtype);
    llmc_graph_set_const(g, v, dtype, &s, data, n * llmc_dtype_size(dtype));
    return v;
}

static int const_i64(llmc_graph *g, const char *name, int n, const int64_t *data)
{
    int64_t dims[1] = {n};
    return constant(g, name, LLMC_DT_INT64, 1, dims, data);
}

static int node(llmc_graph *g, const char *op, const char *name, int n_in, const int *in,
                int n_out, const int *out)
{
    return llmc_graph_add_node(g, op, name, in, n_in, out, n_out);
}

static void attr_int(llmc_graph *g, int n, const char *name, int64_t v)
{
    llmc_attr a = {.name = (char *)name, .type = LLMC_ATTR_INT, .i = v};
    llmc_node_add_attr(g, n, &a);
}

static void attr_float(llmc_graph *g, int n, const char *name, float v)
{
    llmc_attr a = {.name = (char *)name, .type = LLMC_ATTR_FLOAT, .f = v};
    llmc_node_add_attr(g, n, &a);
}

static void attr_ints(llmc_graph *g, int n, const char *name, int count, const int64_t *v)
{
    llmc_attr a = {.name = (char *)name, .type = LLMC_ATTR_INTS, .n_ints = count,
                   .ints = (int64_t *)v};
    llmc_node_add_attr(g, n, &a);
}

/* ---- a tiny FlatBuffers reader (independent of the builder) ---- */

static uint32_t u16_at(const uint8_t *b, size_t pos) { return b[pos] | b[pos + 1] << 8; }
static uint32_t u32_at(const uint8_t *b, size_t pos)
{
    return (uint32_t)b[pos] | (uint32_t)b[pos + 1] << 8 | (uint32_t)b[pos + 2] << 16 |
           (uint32_t)b[pos + 3] << 24;
}
static uint64_t u64_at(const uint8_t *b, size_t pos)
{
    return u32_at(b, pos) | (uint64_t)u32_at(b, pos + 4) << 32;
}

static size_t root(const uint8_t *b) { return u32_at(b, 0); }

/* Position of a table's field, 0 if absent. */
static size_t field(const uint8_t *b, size_t table, int id)
{
    size_t vt = table - (size_t)(int32_t)u32_at(b, table);
    if (4 + 2 * (size_t)id >= u16_at(b, vt))
        return 0;
    uint32_t off = u16_at(b, vt + 4 + 2 * (size_t)id);
    return off ? table + off : 0;
}

static uint64_t scalar(const uint8_t *b, size_t table, int id, int size, uint64_t dflt)
{
    size_t pos = field(b, table, id);
    if (!pos)
        return dflt;
    return size == 1 ? b[pos] : size == 4 ? u32_at(b, pos) : u64_at(b, pos);
}

/* Start of the vector/string/table a uoffset field points to, 0 if absent. */
static size_t target(const uint8_t *b, size_t table, int id)
{
    size_t pos = field(b, table, id);
    return pos ? pos + u32_at(b, pos) : 0;
}

static uint32_t vec_len(const uint8_t *b, size_t table, int id)
{
    size_t v = target(b, table, id);
    return v ? u32_at(b, v) : 0;
}

static size_t vec_elem(const uint8_t *b, size_t table, int id, uint32_t i, size_t size)
{
    return target(b, table, id) + 4 + i * size;
}

static size_t vec_table(const uint8_t *b, size_t table, int id, uint32_t i)
{
    size_t e = vec_elem(b, table, id, i, 4);
    return e + u32_at(b, e);
}

static const char *string(const uint8_t *b, size_t table, int id)
{
    size_t s = target(b, table, id);
    return s ? (const char *)b + s + 4 : "";
}

static llmc_affine affine_at(const uint8_t *b, size_t pos)
{
    return (llmc_affine){(int64_t)u64_at(b, pos), (int64_t)u64_at(b, pos + 8),
                         (int64_t)u64_at(b, pos + 16)};
}

enum { FIELD_TENSORS = 6, FIELD_OPS = 7, FIELD_INPUTS = 8, FIELD_OUTPUTS = 9, FIELD_SEGMENTS = 10 };

static size_t plan_op(const uint8_t *b, uint32_t i) { return vec_table(b, root(b), FIELD_OPS, i); }
static size_t plan_tensor(const uint8_t *b, uint32_t i)
{
    return vec_table(b, root(b), FIELD_TENSORS, i);
}
static int op_code(const uint8_t *b, uint32_t i) { return (int)scalar(b, plan_op(b, i), 0, 1, 0); }
static uint32_t n_ops(const uint8_t *b) { return vec_len(b, root(b), FIELD_OPS); }

/* "Copy,MatMul,..." for quick comparisons. */
static const char *op_codes(const uint8_t *b)
{
    static const char *const names[] = {"Copy", "Reshape", "Unary", "Binary", "Where",
                                        "Cast", "MatMul", "Reduce", "Softmax", "LayerNorm",
                                        "Gather", "Fill", "Range", "Symbols"};
    static char text[512];
    text[0] = 0;
    for (uint32_t i = 0; i < n_ops(b); i++) {
        strcat(text, i ? "," : "");
        strcat(text, names[op_code(b, i)]);
    }
    return text;
}

static size_t region(const uint8_t *b, uint32_t op, uint32_t i)
{
    return vec_table(b, plan_op(b, op), 11, i);
}

static llmc_affine region_affine(const uint8_t *b, size_t r, int id, uint32_t k)
{
    return affine_at(b, vec_elem(b, r, id, k, 24));
}

static bool aff_is(llmc_affine a, int64_t c, int64_t s, int64_t p)
{
    return a.c == c && a.s == s && a.p == p;
}

static int8_t region_src_axis(const uint8_t *b, size_t r, uint32_t k)
{
    return (int8_t)b[vec_elem(b, r, 5, k, 1)];
}

static int64_t region_src_step(const uint8_t *b, size_t r, uint32_t k)
{
    return (int64_t)u64_at(b, vec_elem(b, r, 6, k, 8));
}

/* ---- compiling ---- */

static uint8_t *compile(const llmc_graph *g, size_t *size, llmc_error *err)
{
    llmc_codegen_options opt = {.max_context = MAX_CONTEXT};
    uint8_t *plan = NULL;
    memset(err, 0, sizeof *err);
    if (llmc_codegen_to_memory(g, &opt, &plan, size, NULL, err))
        return NULL;
    return plan;
}

/* ---- running plans (runtime) ---- */

typedef struct {
    llmc_rt_plan plan;
    llmc_rt_session session;
    void *memory;
} runner;

static int run_plan(runner *r, const uint8_t *bytes, size_t size, uint32_t S, uint32_t P,
                    const llmc_rt_tensor *inputs, char *msg)
{
    llmc_rt_error e = {0};
    memset(r, 0, sizeof *r);
    int st = llmc_rt_plan_open(&r->plan, bytes, size, LLMC_RT_VERIFY_HASHES, &e);
    if (!st) {
        size_t need = llmc_rt_session_memory(&r->plan);
        r->memory = aligned_alloc(64, (need + 63) / 64 * 64);
        st = llmc_rt_session_init(&r->session, &r->plan, r->memory, need, &e);
    }
    if (!st)
        st = llmc_rt_session_run(&r->session, S, P, inputs, &e);
    strcpy(msg, st ? e.msg : "");
    return st;
}

static const float *run_output(runner *r, uint32_t index)
{
    llmc_rt_tensor out;
    llmc_rt_error e;
    return llmc_rt_session_output(&r->session, index, &out, &e) ? NULL : out.data;
}

static bool close_to(const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i++)
        if (fabsf(a[i] - b[i]) > 1e-5f * (1 + fabsf(b[i])))
            return false;
    return true;
}

static void fill_pattern(float *x, int n, float scale)
{
    for (int i = 0; i < n; i++)
        x[i] = scale * (float)((i * 7) % 11 - 5);
}

/* ---- graph 1: x[1,S,8] -> Transpose -> MatMul W -> Add bias -> Softmax ---- */

static float W1[8 * 4], B1[4];

static void build_attention_like(llmc_graph *g)
{
    llmc_graph_init(g);
    g->opset = 17;
    g->source_hash = 0x1234;
    fill_pattern(W1, 32, 0.1f);
    fill_pattern(B1, 4, 0.2f);
    llmc_affine xd[3] = {C_(1), S_, C_(8)}, td[3] = {S_, C_(1), C_(8)}, yd[3] = {S_, C_(1), C_(4)};
    int x = input(g, "x", LLMC_DT_FLOAT, 3, xd);
    int64_t wd[2] = {8, 4}, bd[1] = {4};
    int w = constant(g, "W", LLMC_DT_FLOAT, 2, wd, W1);
    int b = constant(g, "bias", LLMC_DT_FLOAT, 1, bd, B1);
    int t = value(g, "xt", LLMC_DT_FLOAT, 3, td);
    int m = value(g, "mm", LLMC_DT_FLOAT, 3, yd);
    int a = value(g, "biased", LLMC_DT_FLOAT, 3, yd);
    int y = value(g, "y", LLMC_DT_FLOAT, 3, yd);
    int64_t perm[3] = {1, 0, 2};
    int n = node(g, "Transpose", "tr", 1, &x, 1, &t);
    attr_ints(g, n, "perm", 3, perm);
    node(g, "MatMul", "mm", 2, (int[]){t, w}, 1, &m);
    node(g, "Add", "add", 2, (int[]){m, b}, 1, &a);
    node(g, "Softmax", "sm", 1, &a, 1, &y);
    output(g, y);
}

static void reference_attention_like(const float *x, int S, float *y)
{
    for (int s = 0; s < S; s++) {
        float row[4], mx = -INFINITY, sum = 0;
        for (int j = 0; j < 4; j++) {
            row[j] = B1[j];
            for (int k = 0; k < 8; k++)
                row[j] += x[s * 8 + k] * W1[k * 4 + j];
            mx = row[j] > mx ? row[j] : mx;
        }
        for (int j = 0; j < 4; j++)
            sum += row[j] = expf(row[j] - mx);
        for (int j = 0; j < 4; j++)
            y[s * 4 + j] = row[j] / sum;
    }
}

static void test_attention_like(void)
{
    llmc_graph g;
    llmc_error err;
    size_t size;
    build_attention_like(&g);
    uint8_t *p = compile(&g, &size, &err);
    CHECK(p != NULL, "transpose/matmul/add/softmax compiles (%s)", err.msg);
    if (!p)
        return;
    CHECK(memcmp(p + 4, "LLMC", 4) == 0, "file identifier LLMC at bytes 4..7");
    CHECK(strcmp(op_codes(p), "Copy,MatMul,Binary,Softmax") == 0, "ops: %s", op_codes(p));
    size_t r = region(p, 0, 0);
    CHECK(vec_len(p, plan_op(p, 0), 11) == 1 && region_src_axis(p, r, 0) == 1 &&
              region_src_axis(p, r, 1) == 0 && region_src_axis(p, r, 2) == 2,
          "Transpose is one region with src_axis = perm");
    CHECK(aff_is(region_affine(p, r, 3, 0), 0, 1, 0), "region size follows S");
    CHECK(scalar(p, plan_op(p, 3), 5, 4, 99) == 2, "Softmax axis -1 normalized to 2");
    CHECK(scalar(p, plan_op(p, 2), 4, 1, 0) == 0, "Add is BinaryKind Add");
    CHECK(vec_len(p, root(p), FIELD_TENSORS) == 7, "7 tensors (x, xt, W, mm, bias, biased, y)");
    CHECK(scalar(p, root(p), 0, 4, 0) == 3 && strcmp(string(p, root(p), 1), "generic") == 0,
          "format_version 3, target generic");
    CHECK(scalar(p, root(p), 2, 8, 0) == 0x1234, "source_hash from the graph");
    CHECK(vec_len(p, root(p), FIELD_SEGMENTS) == 2, "one segment per constant");
    bool segments_ok = true;
    for (uint32_t i = 0; i < 2; i++) {
        size_t s = vec_table(p, root(p), FIELD_SEGMENTS, i);
        uint64_t off = scalar(p, s, 0, 8, 0), len = scalar(p, s, 1, 8, 0);
        segments_ok &= off % 64 == 0 && off + len <= size &&
                       XXH64(p + off, len, 0) == scalar(p, s, 2, 8, 0);
    }
    CHECK(segments_ok, "segments 64-aligned, in the file, XXH64 matches");
    size_t w = plan_tensor(p, 2);
    CHECK(scalar(p, w, 3, 1, 0) == 1 && strcmp(string(p, w, 0), "W") == 0,
          "constant W is a Weight tensor");

    float x[3 * 8], want[3 * 4];
    fill_pattern(x, 24, 0.3f);
    reference_attention_like(x, 3, want);
    llmc_rt_tensor in = {LLMC_RT_F32, 3, {1, 3, 8}, x};
    runner run;
    char msg[256];
    int st = run_plan(&run, p, size, 3, 0, &in, msg);
    CHECK(st == 0, "runtime runs it at S=3 (%s)", msg);
    const float *y = st ? NULL : run_output(&run, 0);
    CHECK(y && close_to(y, want, 12), "runtime output matches plain C");
    free(run.memory);
    free(p);
    llmc_graph_free(&g);
}

/* ---- graph 2: KV-cache style: Concat(past, cur) on the P axis, Slice from P ---- */

static void build_kv(llmc_graph *g)
{
    llmc_graph_init(g);
    g->opset = 17;
    llmc_affine pd[4] = {C_(1), C_(2), P_, C_(4)}, cd[4] = {C_(1), C_(2), S_, C_(4)};
    llmc_affine kd[4] = {C_(1), C_(2), PS_, C_(4)};
    int past = input(g, "past_key_values.0.key", LLMC_DT_FLOAT, 4, pd);
    int cur = input(g, "cur", LLMC_DT_FLOAT, 4, cd);
    input(g, "past_key_values.0.value", LLMC_DT_FLOAT, 4, pd);   /* unread; a key needs its value */
    int present = value(g, "present.0.key", LLMC_DT_FLOAT, 4, kd);
    int tail = value(g, "tail", LLMC_DT_FLOAT, 4, cd);
    int n = node(g, "Concat", "cat", 2, (int[]){past, cur}, 1, &present);
    attr_int(g, n, "axis", -2);
    /* Slice(present, starts=[P], ends=[INT64_MAX], axes=[2]): starts known only symbolically */
    int starts = value(g, "starts", LLMC_DT_INT64, 1, (llmc_affine[]){C_(1)});
    g->values[starts].n_sym = 1;
    g->values[starts].sym[0] = P_;
    int sym = node(g, "Symbols", "starts_sym", 0, NULL, 1, &starts);
    free(g->nodes[sym].domain);
    g->nodes[sym].domain = strdup("llmc");
    attr_ints(g, sym, "values", 3, (int64_t[]){0, 0, 1});
    int ends = const_i64(g, "ends", 1, (int64_t[]){INT64_MAX});
    int axes = const_i64(g, "axes", 1, (int64_t[]){2});
    node(g, "Slice", "slice", 4, (int[]){present, starts, ends, axes}, 1, &tail);
    output(g, present);
    output(g, tail);
}

static void test_kv(void)
{
    llmc_graph g;
    llmc_error err;
    size_t size;
    build_kv(&g);
    uint8_t *p = compile(&g, &size, &err);
    CHECK(p != NULL, "concat/slice on symbolic axes compiles (%s)", err.msg);
    if (!p)
        return;
    CHECK(strcmp(op_codes(p), "Copy,Symbols,Copy") == 0, "ops: %s", op_codes(p));
    size_t r0 = region(p, 0, 0), r1 = region(p, 0, 1);
    CHECK(aff_is(region_affine(p, r0, 2, 2), 0, 0, 0) && aff_is(region_affine(p, r1, 2, 2), 0, 0, 1),
          "Concat: second input lands at dst_start P on axis 2");
    CHECK(aff_is(region_affine(p, r1, 3, 2), 0, 1, 0), "Concat: its size is S");
    size_t rs = region(p, 2, 0);
    CHECK(aff_is(region_affine(p, rs, 4, 2), 0, 0, 1), "Slice: src_start P on axis 2");
    size_t sym_op = plan_op(p, 1);
    CHECK(vec_len(p, sym_op, 10) == 1 && aff_is(affine_at(p, vec_elem(p, sym_op, 10, 0, 24)), 0, 0, 1),
          "llmc.Symbols lowers to Symbols [P]");
    size_t in0 = vec_table(p, root(p), FIELD_INPUTS, 0), out0 = vec_table(p, root(p), FIELD_OUTPUTS, 0);
    CHECK(scalar(p, in0, 1, 1, 0) == LLMC_ROLE_PAST_KEY && scalar(p, out0, 1, 1, 0) == LLMC_ROLE_PRESENT_KEY,
          "IoBinding roles PastKey / PresentKey");
    CHECK(scalar(p, root(p), 13, 4, 0) == 1, "n_layers = number of PastKey inputs");

    enum { S = 2, P = 3 };
    float past[2 * P * 4], cur[2 * S * 4], want[2 * (P + S) * 4];
    fill_pattern(past, 2 * P * 4, 1.0f);
    fill_pattern(cur, 2 * S * 4, -0.5f);
    for (int h = 0; h < 2; h++)
        for (int t = 0; t < P + S; t++)
            for (int d = 0; d < 4; d++)
                want[(h * (P + S) + t) * 4 + d] = t < P ? past[(h * P + t) * 4 + d]
                                                        : cur[(h * S + t - P) * 4 + d];
    llmc_rt_tensor in[3] = {{LLMC_RT_F32, 4, {1, 2, P, 4}, past}, {LLMC_RT_F32, 4, {1, 2, S, 4}, cur},
                            {LLMC_RT_F32, 4, {1, 2, P, 4}, past}};
    runner run;
    char msg[256];
    int st = run_plan(&run, p, size, S, P, in, msg);
    CHECK(st == 0, "runtime runs it at S=2, P=3 (%s)", msg);
    const float *present = st ? NULL : run_output(&run, 0);
    const float *tail = st ? NULL : run_output(&run, 1);
    CHECK(present && close_to(present, want, 2 * (P + S) * 4), "present = concat(past, cur)");
    CHECK(tail && close_to(tail, cur, 2 * S * 4), "slice from P gives back cur");
    free(run.memory);
    free(p);
    llmc_graph_free(&g);
}

/* ---- graph 3: Gemm with transB, alpha, beta and C ---- */

static float GA[2 * 3], GB[4 * 3], GC[4];

static void build_gemm(llmc_graph *g, float alpha, float beta)
{
    llmc_graph_init(g);
    g->opset = 17;
    fill_pattern(GB, 12, 0.25f);
    fill_pattern(GC, 4, 1.5f);
    int a = input(g, "a", LLMC_DT_FLOAT, 2, (llmc_affine[]){C_(2), C_(3)});
    int b = constant(g, "b", LLMC_DT_FLOAT, 2, (int64_t[]){4, 3}, GB);
    int c = constant(g, "c", LLMC_DT_FLOAT, 1, (int64_t[]){4}, GC);
    int y = value(g, "y", LLMC_DT_FLOAT, 2, (llmc_affine[]){C_(2), C_(4)});
    int n = node(g, "Gemm", "gemm", 3, (int[]){a, b, c}, 1, &y);
    attr_int(g, n, "transB", 1);
    attr_float(g, n, "alpha", alpha);
    attr_float(g, n, "beta", beta);
    output(g, y);
}

static void test_gemm(void)
{
    llmc_graph g;
    llmc_error err;
    size_t size;
    build_gemm(&g, 2.0f, 0.5f);
    uint8_t *p = compile(&g, &size, &err);
    CHECK(p != NULL, "Gemm compiles (%s)", err.msg);
    if (!p)
        return;
    CHECK(strcmp(op_codes(p), "Copy,MatMul,Binary,Binary,Binary") == 0, "Gemm ops: %s",
          op_codes(p));
    size_t r = region(p, 0, 0);
    CHECK(region_src_axis(p, r, 0) == 1 && region_src_axis(p, r, 1) == 0,
          "transB is a transposing Copy");
    CHECK(scalar(p, plan_op(p, 2), 4, 1, 0) == 2 && scalar(p, plan_op(p, 4), 4, 1, 0) == 0,
          "alpha/beta are Mul, C is Add");
    fill_pattern(GA, 6, 0.5f);
    float want[8];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            float acc = 0;
            for (int k = 0; k < 3; k++)
                acc += GA[i * 3 + k] * GB[j * 3 + k];
            want[i * 4 + j] = 2.0f * acc + 0.5f * GC[j];
        }
    llmc_rt_tensor in = {LLMC_RT_F32, 2, {2, 3}, GA};
    runner run;
    char msg[256];
    int st = run_plan(&run, p, size, 1, 0, &in, msg);
    CHECK(st == 0, "runtime runs Gemm (%s)", msg);
    const float *y = st ? NULL : run_output(&run, 0);
    CHECK(y && close_to(y, want, 8), "Gemm output matches plain C");
    free(run.memory);
    free(p);
    llmc_graph_free(&g);

    build_gemm(&g, 1.0f, 0.0f);
    p = compile(&g, &size, &err);
    CHECK(p && strcmp(op_codes(p), "Copy,MatMul") == 0, "Gemm alpha 1, beta 0: Copy,MatMul (%s)",
          p ? op_codes(p) : err.msg);
    free(p);
    llmc_graph_free(&g);
}

/* ---- smaller lowerings ---- */

static void test_reduce_axes(void)
{
    llmc_graph g;
    llmc_error err;
    size_t size;
    llmc_graph_init(&g);
    g.opset = 13;
    int x = input(&g, "x", LLMC_DT_FLOAT, 3, (llmc_affine[]){C_(2), S_, C_(4)});
    int axes = const_i64(&g, "axes", 2, (int64_t[]){-1, 0});
    int y = value(&g, "y", LLMC_DT_FLOAT, 1, (llmc_affine[]){S_});
    int n = node(&g, "ReduceSum", "rs", 2, (int[]){x, axes}, 1, &y);
    attr_int(&g, n, "keepdims", 0);
    int empty = const_i64(&g, "none", 0, NULL);
    int z = value(&g, "z", LLMC_DT_FLOAT, 1, (llmc_affine[]){S_});
    n = node(&g, "ReduceSum", "noop", 2, (int[]){y, empty}, 1, &z);
    attr_int(&g, n, "noop_with_empty_axes", 1);
    int m = value(&g, "m", LLMC_DT_FLOAT, 3, (llmc_affine[]){C_(1), C_(1), C_(1)});
    n = node(&g, "ReduceMax", "rm", 1, &x, 1, &m);
    output(&g, z);
    output(&g, m);
    uint8_t *p = compile(&g, &size, &err);
    CHECK(p && strcmp(op_codes(p), "Reduce,Reshape,Reduce") == 0,
          "ReduceSum / noop / ReduceMax: %s", p ? op_codes(p) : err.msg);
    if (p) {
        size_t op = plan_op(p, 0);
        CHECK(vec_len(p, op, 6) == 2 && u32_at(p, vec_elem(p, op, 6, 0, 4)) == 0 &&
                  u32_at(p, vec_elem(p, op, 6, 1, 4)) == 2 && scalar(p, op, 7, 1, 1) == 0,
              "ReduceSum axes [-1, 0] -> [0, 2], keepdims false");
        op = plan_op(p, 2);
        CHECK(vec_len(p, op, 6) == 3 && scalar(p, op, 4, 1, 0) == 2,
              "ReduceMax without axes reduces all 3 axes");
    }
    free(p);
    llmc_graph_free(&g);
}

static void test_gather_and_shape(void)
{
    llmc_graph g;
    llmc_error err;
    size_t size;
    llmc_graph_init(&g);
    g.opset = 17;
    int x = input(&g, "x", LLMC_DT_FLOAT, 3, (llmc_affine[]){C_(1), S_, C_(6)});
    int ids = input(&g, "input_ids", LLMC_DT_INT64, 2, (llmc_affine[]){C_(1), S_});
    int shape = value(&g, "shape", LLMC_DT_INT64, 1, (llmc_affine[]){C_(3)});
    node(&g, "Shape", "shape", 1, &x, 1, &shape);
    int i1 = constant(&g, "one", LLMC_DT_INT64, 0, NULL, (int64_t[]){1});
    int seq = value(&g, "seq", LLMC_DT_INT64, 0, NULL);
    node(&g, "Gather", "g_scalar", 2, (int[]){shape, i1}, 1, &seq);
    int evens = const_i64(&g, "evens", 3, (int64_t[]){0, 2, 4});
    int ev = value(&g, "ev", LLMC_DT_FLOAT, 3, (llmc_affine[]){C_(1), S_, C_(3)});
    int n = node(&g, "Gather", "g_prog", 2, (int[]){x, evens}, 1, &ev);
    attr_int(&g, n, "axis", -1);
    int table = constant(&g, "table", LLMC_DT_FLOAT, 2, (int64_t[]){10, 6},
                         (float[60]){0});
    int emb = value(&g, "emb", LLMC_DT_FLOAT, 3, (llmc_affine[]){C_(1), S_, C_(6)});
    node(&g, "Gather", "g_emb", 2, (int[]){table, ids}, 1, &emb);
    int mixed = const_i64(&g, "mixed", 3, (int64_t[]){5, -6, 3});
    int mx = value(&g, "mx", LLMC_DT_FLOAT, 3, (llmc_affine[]){C_(1), S_, C_(3)});
    n = node(&g, "Gather", "g_mixed", 2, (int[]){x, mixed}, 1, &mx);
    attr_int(&g, n, "axis", 2);
    output(&g, seq);
    output(&g, ev);
    output(&g, emb);
    output(&g, mx);
    uint8_t *p = compile(&g, &size, &err);
    CHECK(p && strcmp(op_codes(p), "Symbols,Copy,Copy,Gather,Copy") == 0,
          "Shape/Gather ops: %s", p ? op_codes(p) : err.msg);
    if (p) {
        size_t sym = plan_op(p, 0);
        CHECK(vec_len(p, sym, 10) == 3 &&
                  aff_is(affine_at(p, vec_elem(p, sym, 10, 1, 24)), 0, 1, 0),
              "Shape -> Symbols [1, S, 6]");
        size_t r = region(p, 1, 0);
        CHECK(vec_len(p, r, 2) == 0 && aff_is(region_affine(p, r, 4, 0), 1, 0, 0),
              "scalar Gather: rank-0 dst, src_start 1");
        r = region(p, 2, 0);
        CHECK(vec_len(p, plan_op(p, 2), 11) == 1 && region_src_step(p, r, 2) == 2,
              "indices 0,2,4 -> one region with step 2");
        CHECK(scalar(p, plan_op(p, 3), 5, 4, 0) == 0 && vec_len(p, plan_op(p, 3), 2) == 2,
              "runtime indices -> Gather op (axis 0, data and indices)");
        r = region(p, 4, 1);
        CHECK(vec_len(p, plan_op(p, 4), 11) == 3 && aff_is(region_affine(p, r, 4, 2), 0, 0, 0) &&
                  aff_is(region_affine(p, r, 2, 2), 1, 0, 0),
              "indices 5,-6,3 on extent 6 -> one region each; -6 wraps to 0");
    }
    free(p);
    llmc_graph_free(&g);
}

static void test_split_expand_io(void)
{
    llmc_graph g;
    llmc_error err;
    size_t size;
    llmc_graph_init(&g);
    g.opset = 17;
    int x = input(&g, "x", LLMC_DT_FLOAT, 2, (llmc_affine[]){S_, C_(6)});
    int a = value(&g, "a", LLMC_DT_FLOAT, 2, (llmc_affine[]){S_, C_(2)});
    int b = value(&g, "b", LLMC_DT_FLOAT, 2, (llmc_affine[]){S_, C_(4)});
    int sizes = const_i64(&g, "sizes", 2, (int64_t[]){2, 4});
    int n = node(&g, "Split", "split", 2, (int[]){x, sizes}, 2, (int[]){a, b});
    attr_int(&g, n, "axis", 1);
    int shape = const_i64(&g, "eshape", 3, (int64_t[]){3, 1, 4});
    int e = value(&g, "e", LLMC_DT_FLOAT, 3, (llmc_affine[]){C_(3), S_, C_(4)});
    node(&g, "Expand", "expand", 2, (int[]){b, shape}, 1, &e);
    int k = constant(&g, "k", LLMC_DT_FLOAT, 1, (int64_t[]){2}, (float[]){1, 2});
    output(&g, e);
    output(&g, x);
    output(&g, k);
    uint8_t *p = compile(&g, &size, &err);
    CHECK(p && strcmp(op_codes(p), "Copy,Copy,Reshape,Reshape") == 0,
          "Split/Expand/outputs: %s", p ? op_codes(p) : err.msg);
    if (p) {
        size_t op = plan_op(p, 0);
        CHECK(vec_len(p, op, 3) == 1 && aff_is(region_affine(p, region(p, 0, 0), 4, 1), 2, 0, 0),
              "Split skips unused 'a'; 'b' starts at column 2");
        size_t r = region(p, 1, 0);
        CHECK(region_src_axis(p, r, 0) == -1 && region_src_axis(p, r, 1) == 0 &&
                  region_src_axis(p, r, 2) == 1,
              "Expand: new leading axis broadcasts");
        CHECK(vec_len(p, root(p), FIELD_OUTPUTS) == 3, "3 output bindings");
        size_t o1 = vec_table(p, root(p), FIELD_OUTPUTS, 1), o2 = vec_table(p, root(p), FIELD_OUTPUTS, 2);
        size_t t1 = plan_tensor(p, (uint32_t)scalar(p, o1, 0, 4, 0));
        size_t t2 = plan_tensor(p, (uint32_t)scalar(p, o2, 0, 4, 0));
        CHECK(scalar(p, o1, 0, 4, 0) != 0 && scalar(p, t2, 3, 1, 0) == 0 &&
                  scalar(p, t2, 5, 8, 0) == 64 && strcmp(string(p, t1, 0), "x") == 0,
              "input-as-output and constant output get their own Arena tensors");
    }
    free(p);
    llmc_graph_free(&g);
}

/* LayerNorm x[S,4] -> y, mean (InvStdDev absent); mean a graph output iff
 * mean_is_output. */
static void build_layernorm(llmc_graph *g, bool mean_is_output)
{
    llmc_graph_init(g);
    g->opset = 17;
    int x = input(g, "x", LLMC_DT_FLOAT, 2, (llmc_affine[]){S_, C_(4)});
    int sc = constant(g, "scale", LLMC_DT_FLOAT, 1, (int64_t[]){4}, (float[]){1, 1, 1, 1});
    int y = value(g, "y", LLMC_DT_FLOAT, 2, (llmc_affine[]){S_, C_(4)});
    int mean = value(g, "mean", LLMC_DT_FLOAT, 2, (llmc_affine[]){S_, C_(1)});
    node(g, "LayerNormalization", "ln", 2, (int[]){x, sc}, 2, (int[]){y, mean});
    output(g, y);
    if (mean_is_output)
        output(g, mean);
}

static void test_layernorm_stats(void)
{
    llmc_graph g;
    llmc_error err;
    size_t size;
    build_layernorm(&g, false);
    uint8_t *p = compile(&g, &size, &err);
    CHECK(p && vec_len(p, plan_op(p, 0), 3) == 1, "LayerNorm with Mean unused: 1 output (%s)",
          err.msg);
    free(p);
    llmc_graph_free(&g);

    build_layernorm(&g, true);
    p = compile(&g, &size, &err);
    CHECK(p && strcmp(op_codes(p), "LayerNorm") == 0 && vec_len(p, plan_op(p, 0), 3) == 3,
          "Mean used: y, mean and a scratch inv_std_dev (%s)", p ? op_codes(p) : err.msg);
    float x[2 * 4] = {1, 2, 3, 4, -1, -1, 5, 5}, want_mean[2] = {2.5f, 2};
    llmc_rt_tensor in = {LLMC_RT_F32, 2, {2, 4}, x};
    runner run = {0};
    char msg[256] = "no plan";
    int st = p ? run_plan(&run, p, size, 2, 0, &in, msg) : -1;
    const float *mean = st ? NULL : run_output(&run, 1);
    CHECK(mean && close_to(mean, want_mean, 2), "runtime writes each row's mean (%s)", msg);
    free(run.memory);
    free(p);
    llmc_graph_free(&g);
}

static void test_errors(void)
{
    llmc_graph g;
    llmc_error err;
    size_t size;
    llmc_graph_init(&g);
    int x = input(&g, "x", LLMC_DT_FLOAT, 2, (llmc_affine[]){S_, C_(4)});
    int y = value(&g, "y", LLMC_DT_FLOAT, -1, NULL);
    node(&g, "Relu", "relu", 1, &x, 1, &y);
    output(&g, y);
    uint8_t *p = compile(&g, &size, &err);
    CHECK(!p && err.code == LLMC_E_UNSUPPORTED && strstr(err.msg, "'y'") &&
              strstr(err.msg, "unknown"),
          "unknown shape: unsupported (%s)", err.msg);
    llmc_graph_free(&g);

    llmc_graph_init(&g);
    x = input(&g, "x", LLMC_DT_FLOAT, 2, (llmc_affine[]){{8, -1, 0}, C_(4)});
    y = value(&g, "y", LLMC_DT_FLOAT, 2, (llmc_affine[]){{8, -1, 0}, C_(4)});
    node(&g, "Relu", "relu", 1, &x, 1, &y);
    output(&g, y);
    p = compile(&g, &size, &err);
    CHECK(!p && err.code == LLMC_E_UNSUPPORTED && strstr(err.msg, "shrinks"),
          "negative S coefficient: error (%s)", err.msg);
    llmc_graph_free(&g);
}

static void test_every_op_lowers(void)
{
    int missing = 0;
    char names[512] = "";
#define CHECK_OP_(op, ...)                                                              \
    if (!cg_can_lower(#op)) {                                                           \
        missing++;                                                                      \
        strcat(names, " " #op);                                                         \
    }
    LLMC_ONNX_OP_LIST(CHECK_OP_)
#undef CHECK_OP_
    CHECK(missing == 0, "every op in onnx_ops.h has a lowering (missing:%s)", names);
}

/* ---- memory planning ---- */

/* A chain of n Relu/Add over [1, S, 64] with a skip connection every 3. */
static void build_chain(llmc_graph *g, int n)
{
    llmc_graph_init(g);
    g->opset = 17;
    llmc_affine d[3] = {C_(1), S_, C_(64)};
    int prev = input(g, "x", LLMC_DT_FLOAT, 3, d), skip = prev;
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "v%d", i);
        int v = value(g, name, LLMC_DT_FLOAT, 3, d);
        if (i % 3 == 2) {
            node(g, "Add", name, 2, (int[]){prev, skip}, 1, &v);
            skip = v;
        } else {
            node(g, "Relu", name, 1, &prev, 1, &v);
        }
        prev = v;
    }
    output(g, prev);
}

static void check_plan_invariants(const cg_plan *p, const char *what)
{
    int overlaps = 0;
    uint64_t sum = 0;
    bool aligned = true, inside = true;
    for (int i = 0; i < p->n_tensors; i++) {
        const cg_tensor *a = &p->tensors[i];
        if (a->is_weight)
            continue;
        sum += a->max_bytes;
        aligned &= a->arena_offset % 64 == 0 && a->max_bytes % 64 == 0;
        inside &= a->arena_offset + a->max_bytes <= p->arena_size;
        for (int j = i + 1; j < p->n_tensors; j++) {
            const cg_tensor *b = &p->tensors[j];
            if (b->is_weight || a->max_bytes == 0 || b->max_bytes == 0)
                continue;
            bool live_together = a->first_op <= b->last_op && b->first_op <= a->last_op;
            bool share_bytes = a->arena_offset < b->arena_offset + b->max_bytes &&
                               b->arena_offset < a->arena_offset + a->max_bytes;
            overlaps += live_together && share_bytes;
        }
    }
    CHECK(overlaps == 0, "%s: no two live tensors share bytes (pairwise)", what);
    CHECK(aligned && inside, "%s: offsets/sizes 64-aligned and inside the arena", what);
    CHECK(p->arena_size < sum, "%s: arena %llu < sum of sizes %llu (reuse)", what,
          (unsigned long long)p->arena_size, (unsigned long long)sum);
}

static void test_memory_plan(void)
{
    llmc_graph g;
    llmc_error err = {0};
    cg_plan p;
    build_chain(&g, 40);
    int rc = cg_lower(&g, NULL, &p, &err);
    if (!rc)
        rc = cg_memory_plan(&p, MAX_CONTEXT, &err);
    CHECK(rc == 0, "chain of 40 plans (%s)", err.msg);
    CHECK(p.tensors[0].max_bytes == MAX_CONTEXT * 64 * 4, "[1,S,64] float: max_bytes at S = %d",
          MAX_CONTEXT);
    CHECK(p.tensors[0].first_op == -1 && p.tensors[p.outputs[0].tensor].last_op == p.n_ops,
          "graph input lives from the start, output to the end");
    check_plan_invariants(&p, "chain");
    /* at an Add, its two inputs and its output are live: 3 buffers is optimal */
    CHECK(p.arena_size == 3 * MAX_CONTEXT * 64 * 4, "chain with skips fits in 3 buffers (%llu)",
          (unsigned long long)p.arena_size);
    cg_plan_free(&p);
    llmc_graph_free(&g);

    /* Scores [1, 2, S, P+S]: the product peaks on S + P = max_context at S = max. */
    llmc_graph_init(&g);
    int x = input(&g, "x", LLMC_DT_FLOAT, 4, (llmc_affine[]){C_(1), C_(2), S_, PS_});
    input(&g, "z", LLMC_DT_INT8, 2, (llmc_affine[]){{3, 0, 1}, {1, 1, 1}});
    int y = value(&g, "y", LLMC_DT_FLOAT, 4, (llmc_affine[]){C_(1), C_(2), S_, PS_});
    node(&g, "Exp", "exp", 1, &x, 1, &y);
    output(&g, y);
    memset(&err, 0, sizeof err);
    rc = cg_lower(&g, NULL, &p, &err);
    if (!rc)
        rc = cg_memory_plan(&p, MAX_CONTEXT, &err);
    CHECK(rc == 0, "scores graph plans (%s)", err.msg);
    if (!rc) {
        CHECK(p.tensors[0].max_bytes == 2 * MAX_CONTEXT * MAX_CONTEXT * 4,
              "[1,2,S,P+S] worst case = 2*max^2 floats");
        /* (3+P)(1+S+P) with S+P = 32: (3+32-S)(33), max at S = 1 */
        CHECK(p.tensors[1].max_bytes == (uint64_t)(34 * 33 + 63) / 64 * 64,
              "[3+P, 1+S+P] int8 worst case at S = 1, rounded to 64 (%llu)",
              (unsigned long long)p.tensors[1].max_bytes);
    }
    cg_plan_free(&p);
    llmc_graph_free(&g);
}

/* ---- the file ---- */

static void test_determinism_and_files(void)
{
    llmc_graph g;
    llmc_error err;
    size_t size1, size2;
    build_attention_like(&g);
    uint8_t *a = compile(&g, &size1, &err), *b = compile(&g, &size2, &err);
    CHECK(a && b && size1 == size2 && memcmp(a, b, size1) == 0,
          "same graph twice: byte-identical plans");
    CHECK(a && (uintptr_t)a % 64 == 0, "to_memory buffer is 64-byte aligned");

    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/test-data/codegen", build);
    mkdir(build, 0777);
    snprintf(path, sizeof path, "%s/test-data", build);
    mkdir(path, 0777);
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/x.plan", dir);
    llmc_codegen_options opt = {.max_context = MAX_CONTEXT};
    llmc_codegen_stats stats;
    memset(&err, 0, sizeof err);
    int rc = llmc_codegen_to_file(&g, &opt, path, &stats, &err);
    CHECK(rc == 0, "to_file writes %s (%s)", path, err.msg);
    FILE *f = fopen(path, "rb");
    uint8_t *c = malloc(size1 + 1);
    size_t got = f ? fread(c, 1, size1 + 1, f) : 0;
    if (f)
        fclose(f);
    CHECK(a && got == size1 && memcmp(a, c, size1) == 0, "file bytes == to_memory bytes");
    CHECK(stats.n_ops == 4 && stats.op_counts[LLMC_RT_OP_MatMul] == 1 && stats.file_bytes == size1 &&
              stats.weight_bytes == sizeof W1 + sizeof B1 && stats.arena_bytes > 0,
          "stats filled");
    free(c);

    snprintf(path, sizeof path, "%s/readonly", dir);
    mkdir(path, 0777);
    chmod(path, 0555);
    snprintf(path, sizeof path, "%s/readonly/y.plan", dir);
    memset(&err, 0, sizeof err);
    rc = llmc_codegen_to_file(&g, &opt, path, NULL, &err);
    bool root_user = geteuid() == 0;   /* root writes anyway: then only check cleanup */
    CHECK(root_user || (rc == LLMC_E_OUTPUT && strstr(err.msg, "cannot write '") &&
                        strstr(err.msg, "y.plan': Permission denied")),
          "unwritable directory: LLMC_E_OUTPUT (%s)", err.msg);
    unlink(path);   /* written only when running as root */
    snprintf(path, sizeof path, "%s/readonly", dir);
    chmod(path, 0755);
    memset(&err, 0, sizeof err);
    rc = llmc_codegen_to_file(&g, &opt, path, NULL, &err);
    struct stat st;
    CHECK(rc == LLMC_E_OUTPUT && strstr(err.msg, "readonly': Is a directory") &&
              stat(path, &st) == 0 && S_ISDIR(st.st_mode),
          "path is a directory: LLMC_E_OUTPUT, directory untouched (%s)", err.msg);
    snprintf(path, sizeof path, "%s/no/such/dir/z.plan", dir);
    memset(&err, 0, sizeof err);
    rc = llmc_codegen_to_file(&g, &opt, path, NULL, &err);
    CHECK(rc == LLMC_E_OUTPUT && access(path, F_OK) != 0, "missing directory: error, nothing left");
    int leftovers = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        leftovers += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    CHECK(leftovers == 0, "no temporary files left behind");
    snprintf(path, sizeof path, "%s/readonly", dir);
    rmdir(path);
    free(a);
    free(b);
    llmc_graph_free(&g);
}

static void test_builder_many_vtables(void)
{
    /* A FlatBuffer well past 64 KiB: vtables shared across long distances and
     * a string longer than 64 KiB. */
    llmc_graph g;
    llmc_error err;
    size_t size;
    llmc_graph_init(&g);
    g.opset = 17;
    int prev = input(&g, "x", LLMC_DT_FLOAT, 1, (llmc_affine[]){C_(4)});
    char *long_name = malloc(70000);
    memset(long_name, 'n', 69999);
    long_name[69999] = 0;
    for (int i = 0; i < 3000; i++) {
        char name[32];
        snprintf(name, sizeof name, "v%d", i);
        int v = value(&g, i == 1500 ? long_name : name, LLMC_DT_FLOAT, 1, (llmc_affine[]){C_(4)});
        node(&g, "Neg", name, 1, &prev, 1, &v);
        prev = v;
    }
    output(&g, prev);
    uint8_t *p = compile(&g, &size, &err);
    CHECK(p && n_ops(p) == 3000 && strlen(string(p, plan_tensor(p, 1501), 0)) == 69999,
          "3000 ops and a 70 kB name encode and decode (%s)", p ? "" : err.msg);
    free(p);
    free(long_name);
    llmc_graph_free(&g);
}

static int write_sample_plan(const char *path)
{
    llmc_graph g;
    llmc_error err = {0};
    build_attention_like(&g);
    llmc_pass_record passes[2] = {{"shape-inference", 4, 0xabc, ""}, {"dead-code", 4, 0xdef, ""}};
    llmc_codegen_options opt = {.max_context = MAX_CONTEXT, .n_passes = 2, .passes = passes};
    int rc = llmc_codegen_to_file(&g, &opt, path, NULL, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    llmc_graph_free(&g);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-plan") == 0)
        return write_sample_plan(argv[2]) ? 1 : 0;
    test_every_op_lowers();
    test_attention_like();
    test_kv();
    test_gemm();
    test_reduce_axes();
    test_gather_and_shape();
    test_split_expand_io();
    test_layernorm_stats();
    test_errors();
    test_memory_plan();
    test_determinism_and_files();
    test_builder_many_vtables();
    return TAP_DONE();
}
