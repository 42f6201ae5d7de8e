/* Lazy constants: float32 matrices defined by transposing and concatenating
 * other matrices, read tile by tile, never built whole.
 *
 * A 2.5 GB model's weights are mapped from its external data files.  Linear
 * fusion puts q/k/v (and gate/up) side by side, and lowering transposes
 * every Linear weight from ONNX's [K, N] to the plan's [N, K]; done eagerly
 * each step is another copy of the weights.  Instead each step makes a
 * view, and the plan writer (compiler/codegen/segment_writer.h) reads the final
 * matrix a block of rows at a time straight into the file, quantizing or
 * packing it on the way if the tensor says so.
 *
 * A view is a tree: leaves are dense row-major matrices (bytes in a file
 * mapping, or owned by the leaf), inner nodes transpose one child or
 * concatenate children along rows (axis 0) or columns (axis 1).  Views are
 * immutable and reference-counted, so one matrix can appear in several
 * views (the IR's merged W and the plan's transposed tensor share it). */
#ifndef LLMC_CONST_VIEW_H
#define LLMC_CONST_VIEW_H

#include <stdbool.h>
#include <stdint.h>

/* A float32 matrix defined lazily by transposing and concatenating other
 * matrices (below): how linear fusion and lowering move big
 * weights without copying them. */
typedef struct llmc_view llmc_view;

/* Constant tensor data.  `data` points either into memory the graph owns
 * (owned=true, freed with the graph) or into a mapping/buffer that outlives
 * the graph (the importer's mmap of external data or the unpacked protobuf).
 * A lazy constant has data == NULL and its bytes in `view` (a float32
 * matrix, row-major); a constant may also hold a view AND data, when the
 * view is a plain matrix over those very bytes.  Read bytes through
 * the functions below (llmc_const_bytes, llmc_const_read_rows,
 * llmc_const_hash) unless the constant cannot be lazy (integers). */
typedef struct {
    const void *data;
    uint64_t nbytes;
    bool owned;
    bool file_backed;       /* data lies in a read-only file mapping (external
                             * data): its pages may be dropped after use */
    llmc_view *view;        /* a reference, released with the constant */
    bool hashed;            /* `hash` is XXH64 (seed 0) of the bytes: computed */
    uint64_t hash;          /* once, by llmc_const_hash, for dumps and CSE */
} llmc_const;

/* ---- views ---- */

/* A leaf over rows * cols float32 values at `data` (any alignment).  If
 * `owned` is not NULL the leaf frees it when the last reference goes (it is
 * normally `data` itself); otherwise the bytes must outlive the view.
 * file_backed: `data` lies in a read-only file mapping whose pages
 * llmc_view_release_pages may drop.  NULL on OOM. */
llmc_view *llmc_view_dense(const void *data, int64_t rows, int64_t cols, void *owned, bool file_backed);
/* part^T; takes over the caller's reference to `part` (also on failure). */
llmc_view *llmc_view_transpose(llmc_view *part);
/* parts[0..n) stacked along `axis` (0: one under the other, equal cols;
 * 1: side by side, equal rows); takes over the caller's references (also
 * on failure).  NULL on OOM or mismatched dims. */
llmc_view *llmc_view_concat(llmc_view *const *parts, int n, int axis);
llmc_view *llmc_view_ref(llmc_view *v);           /* v (NULL is fine) */
void llmc_view_unref(llmc_view *v);               /* NULL is fine */

int64_t llmc_view_rows(const llmc_view *v);
int64_t llmc_view_cols(const llmc_view *v);
/* The bytes of a leaf (row-major, maybe unaligned); NULL for a transpose or
 * a concatenation. */
const void *llmc_view_dense_data(const llmc_view *v);

/* Rows [r0, r1) of the matrix, row-major: out[(r - r0) * cols + c].
 * 0 <= r0 <= r1 <= rows; out needs (r1 - r0) * cols floats. */
void llmc_view_read_rows(const llmc_view *v, int64_t r0, int64_t r1, float *out);
/* The block [r0, r1) x [c0, c1): out[(r - r0) * out_stride + (c - c0)]. */
void llmc_view_read_block(const llmc_view *v, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *out,
                          int64_t out_stride);
/* Rows per call that keep a read_rows buffer near `bytes` (at least 1).
 * A transposed view visits every source row for the rows asked, so a
 * block of rows per call is faster than one tile: reading the [896, 4864]
 * transpose of a [4864, 896] matrix ran at 2 GB/s 8 rows at a time and
 * 4 GB/s 64 at a time (one core here). */
int64_t llmc_view_rows_per(const llmc_view *v, uint64_t bytes);
/* Drops this process's pages of the file-backed leaves (the bytes stay in
 * the page cache and fault back in if read again): after a matrix is
 * hashed or written, its pages need not count in the resident set. */
void llmc_view_release_pages(const llmc_view *v);

/* Drops this process's pages of [data, data + n), which must lie in a
 * read-only file mapping (on anonymous memory it would lose the bytes). */
void llmc_release_file_pages(const void *data, uint64_t n);

/* ---- constants ---- */

/* Frees what `k` owns (bytes, its view reference) and clears it. */
void llmc_const_release(llmc_const *k);
/* XXH64 (seed 0) of the constant's bytes, views streamed a tile at a time;
 * computed once and cached in `k` (a cache: the bytes do not change, which
 * is why a const constant may fill it). */
uint64_t llmc_const_hash(const llmc_const *k);
/* Same length and bytes (hashes compared first when both are cached). */
bool llmc_const_equal(const llmc_const *a, const llmc_const *b);
/* Shorter first, then memcmp order of the bytes (views read a chunk at a
 * time, so unequal ones stop early). */
int llmc_const_compare(const llmc_const *a, const llmc_const *b);
/* The bytes, contiguous.  A lazy constant is materialized first into
 * memory it then owns (its view is released; the bytes do not change,
 * which is why a pass holding a const graph may call it).  Meant for the
 * small constants passes read values from; NULL if out of memory or empty. */
const void *llmc_const_bytes(const llmc_const *k);
/* Copies bytes [offset, offset + n) of the constant into out; views need
 * offset and n multiples of 4 and a float-aligned out.  0, or -1 out of
 * range. */
int llmc_const_read(const llmc_const *k, uint64_t offset, void *out, uint64_t n);
/* A reference to the constant as a float32 matrix [rows, cols]: its view,
 * or a leaf over its bytes that does not own them (so valid while `k`'s
 * bytes are: codegen, which reads a graph that outlives its plan).  NULL
 * on OOM or when rows * cols floats are not the constant's size. */
llmc_view *llmc_const_share_view(const llmc_const *k, int64_t rows, int64_t cols);
/* Drops this process's pages of the constant's file-backed bytes. */
void llmc_const_release_pages(const llmc_const *k);

#endif
