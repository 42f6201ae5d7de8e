/* Lazy float32 matrices and the constant accessors built on them (see
 * const_view.h). */
#include "const_view.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

typedef enum { VIEW_DENSE, VIEW_TRANSPOSE, VIEW_CONCAT } view_kind;

struct llmc_view {
    int refs;
    view_kind kind;
    int64_t rows, cols;
    /* VIEW_DENSE */
    const uint8_t *data;
    void *owned;
    bool file_backed;
    /* VIEW_TRANSPOSE (one part, [cols, rows]) and VIEW_CONCAT */
    int axis;
    int n_parts;
    llmc_view **parts;
};

/* A transposed read writes each source row's elements down output columns:
 * this many columns at a time keep the output lines being filled (64 of
 * them, 4 KB) in L1 while the source is read in 256-byte runs. */
#define TRANSPOSE_BLOCK 64
/* Tiles for hashing and comparing: large enough that a call costs nothing
 * next to the bytes, small enough to stay in L2. */
#define TILE_BYTES ((uint64_t)1 << 18)

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* ---- building ---- */

static llmc_view *new_view(view_kind kind, int64_t rows, int64_t cols)
{
    llmc_view *v = calloc(1, sizeof *v);
    if (v) {
        v->refs = 1;
        v->kind = kind;
        v->rows = rows;
        v->cols = cols;
    }
    return v;
}

llmc_view *llmc_view_dense(const void *data, int64_t rows, int64_t cols, void *owned, bool file_backed)
{
    llmc_view *v = rows >= 0 && cols >= 0 ? new_view(VIEW_DENSE, rows, cols) : NULL;
    if (!v)
        return NULL;
    v->data = data;
    v->owned = owned;
    v->file_backed = file_backed;
    return v;
}

/* An inner node owning the references in parts[0..n). */
static llmc_view *inner_view(view_kind kind, int64_t rows, int64_t cols, llmc_view *const *parts, int n,
                             int axis)
{
    llmc_view *v = new_view(kind, rows, cols);
    llmc_view **copy = v ? malloc(sizeof *copy * (size_t)n) : NULL;
    if (!copy) {
        free(v);
        for (int i = 0; i < n; i++)
            llmc_view_unref(parts[i]);
        return NULL;
    }
    memcpy(copy, parts, sizeof *copy * (size_t)n);
    v->parts = copy;
    v->n_parts = n;
    v->axis = axis;
    return v;
}

llmc_view *llmc_view_transpose(llmc_view *part)
{
    return part ? inner_view(VIEW_TRANSPOSE, part->cols, part->rows, &part, 1, 0) : NULL;
}

static bool concat_dims(llmc_view *const *parts, int n, int axis, int64_t *rows, int64_t *cols)
{
    *rows = axis == 0 ? 0 : parts[0]->rows;
    *cols = axis == 0 ? parts[0]->cols : 0;
    for (int i = 0; i < n; i++) {
        if (axis == 0 && parts[i]->cols != *cols)
            return false;
        if (axis == 1 && parts[i]->rows != *rows)
            return false;
        *rows += axis == 0 ? parts[i]->rows : 0;
        *cols += axis == 0 ? 0 : parts[i]->cols;
    }
    return true;
}

llmc_view *llmc_view_concat(llmc_view *const *parts, int n, int axis)
{
    bool all = n > 0 && (axis == 0 || axis == 1);
    for (int i = 0; i < n; i++)
        all = all && parts[i];
    int64_t rows = 0, cols = 0;
    if (all && concat_dims(parts, n, axis, &rows, &cols))
        return inner_view(VIEW_CONCAT, rows, cols, parts, n, axis);
    for (int i = 0; i < n; i++)
        llmc_view_unref(parts[i]);
    return NULL;
}

llmc_view *llmc_view_ref(llmc_view *v)
{
    if (v)
        v->refs++;
    return v;
}

void llmc_view_unref(llmc_view *v)
{
    if (!v || --v->refs > 0)
        return;
    for (int i = 0; i < v->n_parts; i++)
        llmc_view_unref(v->parts[i]);
    free(v->parts);
    free(v->owned);
    free(v);
}

int64_t llmc_view_rows(const llmc_view *v)
{
    return v->rows;
}

int64_t llmc_view_cols(const llmc_view *v)
{
    return v->cols;
}

const void *llmc_view_dense_data(const llmc_view *v)
{
    return v->kind == VIEW_DENSE ? v->data : NULL;
}

/* ---- reading ---- */

/* Element (r, c) of the block [r0, r1) x [c0, c1) goes to
 * out[(r - r0) * rs + (c - c0) * cs]: a transpose swaps the strides, so
 * one walk serves every tree. */
static void read_into(const llmc_view *v, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *out, int64_t rs,
                      int64_t cs);

/* Four source rows r..r+3, columns [0, width), into four consecutive
 * output floats per column (rs == 1: the output is the transpose): one
 * 16-byte store per column instead of four scattered ones. */
static void transpose_4_rows(const uint8_t *row0, size_t row_bytes, int64_t width, float *dst, int64_t cs)
{
    const uint8_t *row1 = row0 + row_bytes, *row2 = row1 + row_bytes, *row3 = row2 + row_bytes;
    for (int64_t c = 0; c < width; c++) {
        float q[4];   /* memcpy: the bytes need not be aligned */
        memcpy(&q[0], row0 + sizeof(float) * (size_t)c, sizeof(float));
        memcpy(&q[1], row1 + sizeof(float) * (size_t)c, sizeof(float));
        memcpy(&q[2], row2 + sizeof(float) * (size_t)c, sizeof(float));
        memcpy(&q[3], row3 + sizeof(float) * (size_t)c, sizeof(float));
        memcpy(dst + c * cs, q, sizeof q);
    }
}

static void read_dense(const llmc_view *v, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *out, int64_t rs,
                       int64_t cs)
{
    const uint8_t *base = v->data;
    size_t row_bytes = sizeof(float) * (size_t)v->cols;
    if (cs == 1) {
        for (int64_t r = r0; r < r1; r++)
            memcpy(out + (r - r0) * rs, base + (size_t)r * row_bytes + sizeof(float) * (size_t)c0,
                   sizeof(float) * (size_t)(c1 - c0));
        return;
    }
    for (int64_t cb = c0; cb < c1; cb += TRANSPOSE_BLOCK) {
        int64_t width = min64(TRANSPOSE_BLOCK, c1 - cb), r = r0;
        const uint8_t *src = base + sizeof(float) * (size_t)cb;
        float *dst = out + (cb - c0) * cs;
        for (; rs == 1 && r + 4 <= r1; r += 4)
            transpose_4_rows(src + (size_t)r * row_bytes, row_bytes, width, dst + (r - r0), cs);
        for (; r < r1; r++)
            for (int64_t c = 0; c < width; c++)
                memcpy(dst + (r - r0) * rs + c * cs, src + (size_t)r * row_bytes + sizeof(float) * (size_t)c,
                       sizeof(float));
    }
}

static void read_concat(const llmc_view *v, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *out, int64_t rs,
                        int64_t cs)
{
    int64_t at = 0;
    for (int i = 0; i < v->n_parts; i++) {
        const llmc_view *p = v->parts[i];
        if (v->axis == 0) {
            int64_t lo = max64(r0, at), hi = min64(r1, at + p->rows);
            if (lo < hi)
                read_into(p, lo - at, hi - at, c0, c1, out + (lo - r0) * rs, rs, cs);
            at += p->rows;
        } else {
            int64_t lo = max64(c0, at), hi = min64(c1, at + p->cols);
            if (lo < hi)
                read_into(p, r0, r1, lo - at, hi - at, out + (lo - c0) * cs, rs, cs);
            at += p->cols;
        }
    }
}

static void read_into(const llmc_view *v, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *out, int64_t rs,
                      int64_t cs)
{
    switch (v->kind) {
    case VIEW_DENSE:
        read_dense(v, r0, r1, c0, c1, out, rs, cs);
        break;
    case VIEW_TRANSPOSE:
        read_into(v->parts[0], c0, c1, r0, r1, out, cs, rs);
        break;
    case VIEW_CONCAT:
        read_concat(v, r0, r1, c0, c1, out, rs, cs);
        break;
    }
}

void llmc_view_read_block(const llmc_view *v, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *out,
                          int64_t out_stride)
{
    if (r0 < r1 && c0 < c1)
        read_into(v, r0, r1, c0, c1, out, out_stride, 1);
}

void llmc_view_read_rows(const llmc_view *v, int64_t r0, int64_t r1, float *out)
{
    llmc_view_read_block(v, r0, r1, 0, v->cols, out, v->cols);
}

int64_t llmc_view_rows_per(const llmc_view *v, uint64_t bytes)
{
    uint64_t row = sizeof(float) * (uint64_t)v->cols;
    return row && bytes / row > 1 ? (int64_t)(bytes / row) : 1;
}

void llmc_release_file_pages(const void *data, uint64_t n)
{
    if (!data || !n)
        return;
    /* Page-aligned outwards: the first and last pages belong to the same
     * mapping (mappings are whole pages), and dropping a neighbour's pages
     * only means they fault back in from the page cache. */
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)data & ~(page - 1);
    uintptr_t end = ((uintptr_t)data + n + page - 1) & ~(page - 1);
    madvise((void *)start, end - start, MADV_DONTNEED);
}

void llmc_view_release_pages(const llmc_view *v)
{
    if (v->kind == VIEW_DENSE && v->file_backed)
        llmc_release_file_pages(v->data, sizeof(float) * (uint64_t)v->rows * (uint64_t)v->cols);
    for (int i = 0; i < v->n_parts; i++)
        llmc_view_release_pages(v->parts[i]);
}

/* ---- constants ---- */

void llmc_const_release(llmc_const *k)
{
    if (k->owned)
        free((void *)k->data);
    llmc_view_unref(k->view);
    memset(k, 0, sizeof *k);
}

/* Elements [e0, e0 + n) of the row-major view into out. */
static void view_read_elems(const llmc_view *v, uint64_t e0, uint64_t n, float *out)
{
    uint64_t cols = (uint64_t)v->cols;
    while (n > 0) {
        int64_t r = (int64_t)(e0 / cols), c = (int64_t)(e0 % cols);
        if (c == 0 && n >= cols) {   /* whole rows */
            int64_t rows = (int64_t)(n / cols);
            llmc_view_read_rows(v, r, r + rows, out);
            e0 += (uint64_t)rows * cols, out += (uint64_t)rows * cols, n -= (uint64_t)rows * cols;
            continue;
        }
        int64_t width = min64(v->cols - c, (int64_t)n);
        llmc_view_read_block(v, r, r + 1, c, c + width, out, v->cols);
        e0 += (uint64_t)width, out += width, n -= (uint64_t)width;
    }
}

int llmc_const_read(const llmc_const *k, uint64_t offset, void *out, uint64_t n)
{
    if (offset > k->nbytes || n > k->nbytes - offset)
        return -1;
    if (n == 0)
        return 0;
    if (k->data) {
        memcpy(out, (const uint8_t *)k->data + offset, (size_t)n);
        return 0;
    }
    if (!k->view || offset % sizeof(float) || n % sizeof(float))
        return -1;
    view_read_elems(k->view, offset / sizeof(float), n / sizeof(float), out);
    return 0;
}

void llmc_const_release_pages(const llmc_const *k)
{
    if (k->data && k->file_backed)
        llmc_release_file_pages(k->data, k->nbytes);
    else if (!k->data && k->view)
        llmc_view_release_pages(k->view);
}

static uint64_t stream_hash(const llmc_const *k)
{
    XXH64_state_t *st = XXH64_createState();
    size_t tile = (size_t)(k->nbytes < TILE_BYTES ? k->nbytes : TILE_BYTES);
    float *buf = malloc(tile);
    uint64_t h = 0;
    if (st && buf && XXH64_reset(st, 0) == XXH_OK) {
        for (uint64_t at = 0; at < k->nbytes; at += tile) {
            uint64_t n = k->nbytes - at < tile ? k->nbytes - at : tile;
            llmc_const_read(k, at, buf, n);
            XXH64_update(st, buf, (size_t)n);
        }
        h = XXH64_digest(st);
    }
    free(buf);
    XXH64_freeState(st);
    return h;
}

uint64_t llmc_const_hash(const llmc_const *k)
{
    llmc_const *cache = (llmc_const *)k;   /* see const_view.h: a cache */
    if (cache->hashed)
        return cache->hash;
    if (k->nbytes == 0)
        cache->hash = XXH64("", 0, 0);
    else if (k->data)
        cache->hash = XXH64(k->data, (size_t)k->nbytes, 0);
    else
        cache->hash = stream_hash(k);
    /* an out-of-memory stream_hash (0) is not cached: it is tried again */
    cache->hashed = k->data || k->nbytes == 0 || cache->hash != 0;
    llmc_const_release_pages(k);
    return cache->hash;
}

/* memcmp order, chunk by chunk, growing from a few bytes: two different
 * weights of one size differ early, and a lazy one then reads little. */
static int stream_compare(const llmc_const *a, const llmc_const *b)
{
    uint64_t cap = a->nbytes < TILE_BYTES ? a->nbytes : TILE_BYTES;
    float *x = a->data ? NULL : malloc((size_t)cap), *y = b->data ? NULL : malloc((size_t)cap);
    int c = 0;
    if ((!a->data && !x) || (!b->data && !y))
        c = (uintptr_t)a < (uintptr_t)b ? -1 : 1;   /* out of memory: unequal, always safe */
    for (uint64_t at = 0, n = 64; c == 0 && at < a->nbytes; at += n, n = n * 4 < cap ? n * 4 : cap) {
        n = a->nbytes - at < n ? a->nbytes - at : n;
        const void *pa = a->data ? (const void *)((const uint8_t *)a->data + at) : (const void *)x;
        const void *pb = b->data ? (const void *)((const uint8_t *)b->data + at) : (const void *)y;
        if (!a->data)
            llmc_const_read(a, at, x, n);
        if (!b->data)
            llmc_const_read(b, at, y, n);
        c = memcmp(pa, pb, (size_t)n);
    }
    free(x);
    free(y);
    return c;
}

int llmc_const_compare(const llmc_const *a, const llmc_const *b)
{
    if (a->nbytes != b->nbytes)
        return a->nbytes < b->nbytes ? -1 : 1;
    if (a->nbytes == 0)
        return 0;
    if (a->data && b->data)
        return memcmp(a->data, b->data, (size_t)a->nbytes);
    return stream_compare(a, b);
}

bool llmc_const_equal(const llmc_const *a, const llmc_const *b)
{
    if (a->hashed && b->hashed && a->hash != b->hash)
        return false;
    return llmc_const_compare(a, b) == 0;
}

const void *llmc_const_bytes(const llmc_const *k)
{
    if (k->data || !k->view || k->nbytes == 0)
        return k->data;
    float *buf = malloc((size_t)k->nbytes);
    if (!buf)
        return NULL;
    llmc_view_read_rows(k->view, 0, k->view->rows, buf);
    llmc_const *m = (llmc_const *)k;       /* see const_view.h: same bytes */
    llmc_view_unref(m->view);
    m->view = NULL;
    m->data = buf;
    m->owned = true;
    m->file_backed = false;
    return buf;
}

llmc_view *llmc_const_share_view(const llmc_const *k, int64_t rows, int64_t cols)
{
    if (rows < 0 || cols < 0 || (uint64_t)rows * (uint64_t)cols * sizeof(float) != k->nbytes)
        return NULL;
    if (k->view)
        return k->view->rows == rows && k->view->cols == cols ? llmc_view_ref(k->view) : NULL;
    return llmc_view_dense(k->data, rows, cols, NULL, k->file_backed);
}
