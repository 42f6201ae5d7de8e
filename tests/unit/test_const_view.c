/* Lazy constants (compiler/ir/const_view.h) and the streaming segment writer
 * (compiler/codegen/segment_writer.h): views read tile by tile against matrices
 * built element by element here, on odd shapes and tile boundaries; the
 * sink's bytes, padding and hashes against XXH64 of the expected bytes;
 * plans written lazily byte-identical to plans of the same graph with
 * every constant materialized. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "codegen/codegen.h"
#include "codegen/plan_model.h"
#include "codegen/segment_writer.h"
#include "ir/const_view.h"
#include "support/file_map.h"
#include "graph_util.h"
#include "passes/pipeline.h"
#include "tap.h"
#include "codegen/evaluate.h"

/* ---- reference matrices ---- */

typedef struct {
    int64_t rows, cols;
    float *v;           /* rows * cols, row-major */
} matrix;

static matrix mat_new(int64_t rows, int64_t cols)
{
    matrix m = {rows, cols, calloc((size_t)(rows * cols) + 1, sizeof(float))};
    return m;
}

/* Distinct values: element (r, c) of matrix `id` */
static matrix mat_pattern(int64_t rows, int64_t cols, int id)
{
    matrix m = mat_new(rows, cols);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            m.v[r * cols + c] = (float)id * 100000.0f + (float)r * 100.0f + (float)c;
    return m;
}

static matrix mat_transpose(matrix a)
{
    matrix t = mat_new(a.cols, a.rows);
    for (int64_t r = 0; r < a.rows; r++)
        for (int64_t c = 0; c < a.cols; c++)
            t.v[c * a.rows + r] = a.v[r * a.cols + c];
    return t;
}

/* a and b side by side (axis 1) or one under the other (axis 0) */
static matrix mat_concat(matrix a, matrix b, int axis)
{
    matrix m = axis ? mat_new(a.rows, a.cols + b.cols) : mat_new(a.rows + b.rows, a.cols);
    for (int64_t r = 0; r < m.rows; r++)
        for (int64_t c = 0; c < m.cols; c++) {
            bool in_a = axis ? c < a.cols : r < a.rows;
            m.v[r * m.cols + c] = in_a ? a.v[r * a.cols + c]
                                  : axis ? b.v[r * b.cols + c - a.cols] : b.v[(r - a.rows) * b.cols + c];
        }
    return m;
}

/* A leaf over a copy of m at an odd address (constants need not be
 * aligned); the leaf owns the copy. */
static llmc_view *unaligned_leaf(matrix m)
{
    size_t n = sizeof(float) * (size_t)(m.rows * m.cols);
    uint8_t *buf = malloc(n + 1);
    memcpy(buf + 1, m.v, n);
    return llmc_view_dense(buf + 1, m.rows, m.cols, buf, false);
}

/* Every row tiling of step `step` and a few blocks read back equal m. */
static bool reads_equal(const llmc_view *v, matrix m, int64_t step)
{
    if (llmc_view_rows(v) != m.rows || llmc_view_cols(v) != m.cols)
        return false;
    float *got = calloc((size_t)(m.rows * m.cols) + 1, sizeof(float));
    for (int64_t r = 0; r < m.rows; r += step) {
        int64_t n = m.rows - r < step ? m.rows - r : step;
        llmc_view_read_rows(v, r, r + n, got + r * m.cols);
    }
    bool same = memcmp(got, m.v, sizeof(float) * (size_t)(m.rows * m.cols)) == 0;
    /* a block at odd corners, into a wider buffer */
    int64_t r0 = m.rows / 3, r1 = m.rows - m.rows / 4, c0 = m.cols / 5, c1 = m.cols - 1, stride = m.cols + 3;
    float *block = calloc((size_t)((r1 - r0) * stride) + 1, sizeof(float));
    llmc_view_read_block(v, r0, r1, c0, c1, block, stride);
    for (int64_t r = r0; same && r < r1; r++)
        for (int64_t c = c0; same && c < c1; c++)
            same = block[(r - r0) * stride + c - c0] == m.v[r * m.cols + c];
    free(block);
    free(got);
    return same;
}

static void mat_free(matrix *m)
{
    free(m->v);
    m->v = NULL;
}

/* ---- views ---- */

static void test_view_reads(void)
{
    /* 70 x 131: past the 64-column transpose block, not a multiple of it */
    matrix a = mat_pattern(70, 131, 1), b = mat_pattern(70, 5, 2), c = mat_pattern(70, 1, 3);
    llmc_view *va = unaligned_leaf(a);
    CHECK(reads_equal(va, a, 1) && reads_equal(va, a, 7) && reads_equal(va, a, 70), "dense leaf, unaligned bytes");

    matrix at = mat_transpose(a);
    llmc_view *vt = llmc_view_transpose(llmc_view_ref(va));
    CHECK(reads_equal(vt, at, 1) && reads_equal(vt, at, 3) && reads_equal(vt, at, 64) && reads_equal(vt, at, 131),
          "transpose [131, 70]: tiles of 1, 3, 64 and all rows");

    matrix ab = mat_concat(a, b, 1), abc = mat_concat(ab, c, 1);
    llmc_view *parts[3] = {llmc_view_ref(va), unaligned_leaf(b), unaligned_leaf(c)};
    llmc_view *vabc = llmc_view_concat(parts, 3, 1);
    CHECK(reads_equal(vabc, abc, 1) && reads_equal(vabc, abc, 9), "three matrices side by side [70, 137] (q|k|v)");

    /* what lowering makes of a merged Linear weight: (W_q | W_k | W_v)^T */
    matrix abct = mat_transpose(abc);
    llmc_view *vabct = llmc_view_transpose(llmc_view_ref(vabc));
    CHECK(reads_equal(vabct, abct, 1) && reads_equal(vabct, abct, 8) && reads_equal(vabct, abct, 137),
          "the transposed concatenation [137, 70], tiles of 1, 8 and all rows");

    /* rows stacked, of a transpose and a dense matrix: a tree three deep */
    matrix d = mat_pattern(4, 70, 4), stacked = mat_concat(at, d, 0), stacked_t = mat_transpose(stacked);
    llmc_view *two[2] = {llmc_view_ref(vt), unaligned_leaf(d)};
    llmc_view *vstack = llmc_view_concat(two, 2, 0);
    llmc_view *vstack_t = llmc_view_transpose(llmc_view_ref(vstack));
    CHECK(reads_equal(vstack, stacked, 5) && reads_equal(vstack_t, stacked_t, 11),
          "[A^T; D] [135, 70] and its transpose: nested views");

    llmc_view *bad[2] = {llmc_view_ref(va), llmc_view_ref(vt)};
    CHECK(llmc_view_concat(bad, 2, 1) == NULL, "side by side with unequal rows: refused");
    CHECK(llmc_view_rows_per(vabct, 1 << 10) == 3 && llmc_view_rows_per(vabct, 8) == 1,
          "rows per 1 KB of 70 floats: 3; never 0");

    llmc_view_unref(vstack_t);
    llmc_view_unref(vstack);
    llmc_view_unref(vabct);
    llmc_view_unref(vabc);
    llmc_view_unref(vt);
    llmc_view_unref(va);
    matrix *all[] = {&a, &b, &c, &at, &ab, &abc, &abct, &d, &stacked, &stacked_t};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mat_free(all[i]);
}

/* A float [rows, cols] constant whose bytes are a lazy transpose of m^T. */
static llmc_const lazy_const(matrix m)
{
    matrix t = mat_transpose(m);
    llmc_view *v = llmc_view_transpose(unaligned_leaf(t));
    mat_free(&t);
    return (llmc_const){.nbytes = sizeof(float) * (uint64_t)(m.rows * m.cols), .view = v};
}

static void test_const_access(void)
{
    matrix m = mat_pattern(9, 23, 5);
    uint64_t nbytes = sizeof(float) * (uint64_t)(m.rows * m.cols);
    llmc_const lazy = lazy_const(m);
    llmc_const dense = {.data = m.v, .nbytes = nbytes};
    uint64_t want = XXH64(m.v, (size_t)nbytes, 0);
    CHECK(llmc_const_hash(&lazy) == want && lazy.hashed && llmc_const_hash(&dense) == want,
          "hash of a lazy constant = XXH64 of its bytes, cached");

    /* byte ranges that start and end inside rows */
    float got[64] = {0};
    bool same = true;
    for (uint64_t off = 0; off + 37 * 4 <= nbytes && same; off += 4 * 17)
        same = llmc_const_read(&lazy, off, got, 37 * 4) == 0 && memcmp(got, m.v + off / 4, 37 * 4) == 0;
    CHECK(same, "byte ranges across row boundaries");
    CHECK(llmc_const_read(&lazy, nbytes - 4, got, 8) == -1 && llmc_const_read(&lazy, 2, got, 4) == -1,
          "past the end, or not whole floats: refused");

    CHECK(llmc_const_equal(&lazy, &dense) && llmc_const_compare(&lazy, &dense) == 0, "lazy == dense, same bytes");
    matrix m2 = mat_pattern(9, 23, 5);
    m2.v[9 * 23 - 1] += 1.0f;   /* the very last byte differs: the compare reads to the end */
    llmc_const other = lazy_const(m2), other_dense = {.data = m2.v, .nbytes = nbytes};
    int c = llmc_const_compare(&lazy, &other), want_c = memcmp(m.v, m2.v, (size_t)nbytes);
    CHECK(!llmc_const_equal(&lazy, &other) && (c < 0) == (want_c < 0) && c != 0 &&
              llmc_const_compare(&other, &dense) == -c && llmc_const_compare(&other, &other_dense) == 0,
          "a difference in the last float: unequal, memcmp's order");

    const float *bytes = llmc_const_bytes(&lazy);
    CHECK(bytes && memcmp(bytes, m.v, (size_t)nbytes) == 0 && lazy.owned && !lazy.view && lazy.hashed,
          "materialized: owned bytes, view released, hash kept");
    llmc_const_release(&lazy);
    llmc_const_release(&other);
    CHECK(!lazy.data && !lazy.view && !lazy.nbytes, "released and cleared");
    mat_free(&m);
    mat_free(&m2);
}

static void test_graph_views(void)
{
    llmc_graph g;
    llmc_graph_init(&g);
    matrix w = mat_pattern(6, 4, 6);
    int wv = g_const(&g, "w", LLMC_DT_FLOAT, SHAPE(K(6), K(4)), w.v);
    llmc_view *v = llmc_graph_const_view(&g, wv);
    CHECK(v && !g.values[wv].konst.owned && g.values[wv].konst.view && g.values[wv].konst.data,
          "an owned constant's bytes move into the view's leaf, which the constant shares");
    int tv = llmc_graph_add_value(&g, "w.T", LLMC_DT_FLOAT);
    llmc_shape ts = SHAPE(K(4), K(6));
    CHECK(llmc_graph_set_const_view(&g, tv, &ts, llmc_view_transpose(v)) == 0 && g.values[tv].konst.nbytes == 96,
          "a value defined by a lazy transpose");
    llmc_graph_drop_const(&g, wv);   /* dead code would: the view must keep the bytes */
    matrix wt = mat_transpose(w);
    float rows[24];
    CHECK(llmc_const_read_rows(&g.values[tv], 1, 3, rows) == 0 && memcmp(rows, wt.v + 6, 12 * sizeof(float)) == 0,
          "rows 1..3 of the transpose, after its source was dropped");
    CHECK(llmc_const_read_rows(&g.values[tv], 3, 5, rows) == -1, "rows past the end: refused");
    llmc_shape wrong = SHAPE(K(6), K(4));
    int uv = llmc_graph_add_value(&g, "wrong", LLMC_DT_FLOAT);
    CHECK(llmc_graph_set_const_view(&g, uv, &wrong, llmc_view_ref(g.values[tv].konst.view)) == -1,
          "a shape that is not the view's: refused");
    llmc_graph_free(&g);
    mat_free(&w);
    mat_free(&wt);
}

/* ---- the sink ---- */

/* A producer appending -x for every float of its view, in tiles of 3 rows
 * and odd-sized reservations. */
static int negating_producer(const struct cg_tensor *t, struct cg_sink *sink)
{
    int64_t rows = llmc_view_rows(t->view), cols = llmc_view_cols(t->view);
    float tile[3 * 64];
    for (int64_t r = 0; r < rows; r += 3) {
        int64_t n = rows - r < 3 ? rows - r : 3;
        llmc_view_read_rows(t->view, r, r + n, tile);
        for (int64_t i = 0; i < n * cols; i++)
            tile[i] = -tile[i];
        float *out = cg_sink_reserve(sink, sizeof(float) * (size_t)(n * cols));
        if (!out || (uintptr_t)out % sizeof(float))
            return -1;
        memcpy(out, tile, sizeof(float) * (size_t)(n * cols));
        if (cg_sink_commit(sink, sizeof(float) * (size_t)(n * cols)))
            return -1;
    }
    return 0;
}

static int overrunning_producer(const struct cg_tensor *t, struct cg_sink *sink)
{
    static const uint8_t junk[128];
    return cg_sink_put(sink, junk, (size_t)t->nbytes + 1);
}

typedef struct {
    matrix m[3];
    cg_tensor t[3];
    const cg_tensor *w[3];
    uint64_t offsets[3], start, end;
    uint8_t *want;       /* the bytes [start, end) should be */
} sink_case;

/* Three segments: dense bytes, a lazy transpose, a producer's. */
static void sink_case_init(sink_case *k)
{
    memset(k, 0, sizeof *k);
    k->m[0] = mat_pattern(5, 7, 7);
    k->m[1] = mat_pattern(11, 13, 8);
    k->m[2] = mat_pattern(10, 17, 9);
    matrix t1 = mat_transpose(k->m[1]);
    k->t[0] = (cg_tensor){.name = "dense", .is_weight = true, .data = k->m[0].v, .nbytes = 140};
    k->t[1] = (cg_tensor){.name = "lazy", .is_weight = true, .nbytes = 572,
                          .view = llmc_view_transpose(unaligned_leaf(t1))};
    k->t[2] = (cg_tensor){.name = "negated", .is_weight = true, .nbytes = 680, .view = unaligned_leaf(k->m[2]),
                          .produce = negating_producer};
    mat_free(&t1);
    k->start = 100;                                  /* after a 100-byte FlatBuffer */
    k->offsets[0] = 128, k->offsets[1] = 320, k->offsets[2] = 896;
    k->end = 896 + 680 + 40;
    k->want = calloc((size_t)(k->end - k->start), 1);
    memcpy(k->want + 128 - 100, k->m[0].v, 140);
    memcpy(k->want + 320 - 100, k->m[1].v, 572);
    float *neg = (float *)(k->want + 896 - 100);
    for (int i = 0; i < 170; i++)
        neg[i] = -k->m[2].v[i];
    for (int i = 0; i < 3; i++)
        k->w[i] = &k->t[i];
}

static void sink_case_free(sink_case *k)
{
    for (int i = 0; i < 3; i++) {
        llmc_view_unref(k->t[i].view);
        mat_free(&k->m[i]);
    }
    free(k->want);
}

static bool hashes_right(const sink_case *k, const uint64_t *h)
{
    return h[0] == XXH64(k->want + 28, 140, 0) && h[1] == XXH64(k->want + 220, 572, 0) &&
           h[2] == XXH64(k->want + 796, 680, 0);
}

static void test_sink_memory_and_file(void)
{
    sink_case k;
    sink_case_init(&k);
    uint8_t *mem = calloc((size_t)k.end, 1);
    uint64_t h[3] = {0};
    llmc_error err = {0};
    cg_sink_target to_mem = {.fd = -1, .mem = mem, .path = "memory"};
    int rc = cg_write_segments(&to_mem, k.w, 3, k.offsets, k.start, k.end, h, &err);
    CHECK(rc == 0 && memcmp(mem + k.start, k.want, (size_t)(k.end - k.start)) == 0,
          "memory: dense, lazy and produced segments with zero padding (%s)", err.msg);
    CHECK(hashes_right(&k, h), "memory: each segment's XXH64");

    char path[] = "/tmp/llmc_sink_XXXXXX";
    int fd = mkstemp(path);
    uint64_t hf[3] = {0};
    cg_sink_target to_file = {.fd = fd, .path = path};
    rc = fd >= 0 ? cg_write_segments(&to_file, k.w, 3, k.offsets, k.start, k.end, hf, &err) : -1;
    llmc_mapped_file f = {0};
    CHECK(rc == 0 && llmc_map_file(path, &f) == 0 && f.size == k.end &&
              memcmp(f.map + k.start, k.want, (size_t)(k.end - k.start)) == 0 &&
              memcmp(h, hf, sizeof h) == 0,
          "file: the same bytes at the same offsets, the same hashes (%s)", err.msg);
    CHECK(f.map && cg_hash_mapped(f.map + 320, 572) == h[1], "hash of a mapped range read back");
    llmc_unmap_file(&f);

    k.t[1].produce = overrunning_producer;
    memset(&err, 0, sizeof err);
    rc = cg_write_segments(&to_mem, k.w, 3, k.offsets, k.start, k.end, h, &err);
    CHECK(rc == LLMC_E_INTERNAL && strstr(err.msg, "segment 1 ('lazy'): its producer wrote past the 572 bytes"),
          "a producer writing past its segment: internal error (%s)", err.msg);
    k.t[1].produce = NULL;
    k.t[1].nbytes = 576;
    memset(&err, 0, sizeof err);
    rc = cg_write_segments(&to_mem, k.w, 3, k.offsets, k.start, k.end, h, &err);
    CHECK(rc == LLMC_E_INTERNAL && strstr(err.msg, "wrote 572 bytes, the plan has room for 576"),
          "a producer writing less than its segment: internal error (%s)", err.msg);

    close(fd);
    unlink(path);
    free(mem);
    sink_case_free(&k);
}

static void test_sharing_lazy(void)
{
    /* a dense [N, K] and the lazy transpose of its transpose share a segment
     * (tied embedding and LM head); a producer's tensor over the same view
     * does not share with the raw bytes */
    matrix e = mat_pattern(12, 5, 10), et = mat_transpose(e), f = mat_pattern(12, 5, 11);
    cg_tensor t[4] = {
        {.is_weight = true, .data = e.v, .nbytes = 240},
        {.is_weight = true, .nbytes = 240, .view = llmc_view_transpose(unaligned_leaf(et))},
        {.is_weight = true, .data = f.v, .nbytes = 240},
        {.is_weight = true, .nbytes = 240, .view = unaligned_leaf(e), .produce = negating_producer},
    };
    cg_plan p = {.n_tensors = 4, .tensors = t};
    llmc_error err = {0};
    CHECK(cg_share_weights(&p, &err) == 0 && p.n_segments == 3 && t[0].segment == 0 && t[1].segment == 0 &&
              t[2].segment == 1 && t[3].segment == 2,
          "dense and lazy equal bytes share; other bytes or another producer do not (%u segments)",
          p.n_segments);
    for (int i = 0; i < 4; i++)
        llmc_view_unref(t[i].view);
    mat_free(&e);
    mat_free(&et);
    mat_free(&f);
}

/* ---- whole plans: lazy == eager ---- */

/* x [2, 13] -> three MatMuls (q/k/v-like, N = 7, 5, 9) and a Gemm with
 * transB; linear-fusion merges the three into one lazy [13, 21] weight,
 * the Gemm's B^T is a lazy transpose, lowering transposes both again. */
static void build_projections(llmc_graph *g)
{
    llmc_graph_init(g);
    g->opset = 17;
    int x = g_input(g, "x", LLMC_DT_FLOAT, SHAPE(K(2), K(13)));
    const int64_t n[3] = {7, 5, 9};
    const char *names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        matrix w = mat_pattern(13, n[i], 20 + i);
        char wname[16];
        snprintf(wname, sizeof wname, "W%s", names[i]);
        int wv = g_const(g, wname, LLMC_DT_FLOAT, SHAPE(K(13), K(n[i])), w.v);
        g_output(g, OP(g, "MatMul", names[i], x, wv));
        mat_free(&w);
    }
    matrix b = mat_pattern(6, 13, 30);
    int bv = g_const(g, "B", LLMC_DT_FLOAT, SHAPE(K(6), K(13)), b.v);
    int gemm = g_node(g, "Gemm", "y", NULL, 2, x, bv);
    attr_int(g, gemm, "transB", 1);
    g_output(g, op_value(g, gemm));
    mat_free(&b);
}

static uint8_t *compile_graph(llmc_graph *g, bool materialize, size_t *size)
{
    llmc_error err = {0};
    llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = 16};
    int rc = llmc_pass_shape_inference.run(g, &ctx, &err);
    if (!rc)
        rc = llmc_pass_linear_fusion.run(g, &ctx, &err);
    for (int v = 0; !rc && materialize && v < g->n_values; v++)
        if (g->values[v].is_const)
            llmc_const_bytes(&g->values[v].konst);
    uint8_t *plan = NULL;
    llmc_codegen_options opt = {.max_context = 16};
    if (!rc)
        rc = llmc_codegen_to_memory(g, &opt, &plan, size, NULL, &err);
    if (rc)
        printf("# %s\n", err.msg);
    return plan;
}

static void test_lazy_plan_equals_eager(void)
{
    llmc_graph lazy, eager;
    build_projections(&lazy);
    build_projections(&eager);
    size_t n_lazy = 0, n_eager = 0;
    uint8_t *a = compile_graph(&lazy, false, &n_lazy), *b = compile_graph(&eager, true, &n_eager);
    int merged = llmc_graph_find_value(&lazy, "Wq.merged");
    CHECK(merged >= 0 && lazy.values[merged].konst.view && !lazy.values[merged].konst.data,
          "linear-fusion's merged weight is lazy");
    CHECK(a && b && n_lazy == n_eager && memcmp(a, b, n_lazy) == 0,
          "the plan from lazy weights is byte-identical to the plan from materialized ones (%zu bytes)", n_lazy);

    llmc_codegen_options opt = {.max_context = 16, .threads = 2};
    llmc_error err = {0};
    char path[] = "/tmp/llmc_lazy_plan_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0)
        close(fd);
    int rc = fd >= 0 ? llmc_codegen_to_file(&lazy, &opt, path, NULL, &err) : -1;
    llmc_mapped_file f = {0};
    CHECK(rc == 0 && llmc_map_file(path, &f) == 0 && a && f.size == n_lazy && memcmp(f.map, a, n_lazy) == 0,
          "written to a file (FlatBuffer last, read back on 2 threads): the same bytes (%s)", err.msg);
    llmc_unmap_file(&f);
    unlink(path);
    free(a);
    free(b);
    llmc_graph_free(&lazy);
    llmc_graph_free(&eager);
}

int main(void)
{
    test_view_reads();
    test_const_access();
    test_graph_views();
    test_sink_memory_and_file();
    test_sharing_lazy();
    test_lazy_plan_equals_eager();
    return TAP_DONE();
}
