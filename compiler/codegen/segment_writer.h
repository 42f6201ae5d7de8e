/* Weight segments streamed into the plan: each segment's bytes are made in
 * order by its tensor's producer, a tile at a time, into a sink that hashes
 * them (XXH64, streaming) and writes them as they come.  Nothing holds a
 * whole weight: the plan writer lays the segments out from their sizes,
 * streams them, and writes the FlatBuffer (with the hashes) last, at
 * offset 0.
 *
 * A producer (plan_model.h: cg_segment_producer) is called once per
 * segment with the tensor that owns it and must append exactly t->nbytes
 * bytes.  The default, cg_produce_bytes, writes the tensor's data or its
 * view's rows as they are; a quantizing producer reads blocks of rows of
 * t->view (llmc_view_read_rows, const_view.h: a multiple of hp, 64 or so,
 * since small reads of a transposed view are slower) and appends the
 * packed tiles of each block:
 *
 *     for (int64_t r = 0; r < rows; r += block) {          // block % hp == 0
 *         int64_t n = rows - r < block ? rows - r : block;
 *         llmc_view_read_rows(t->view, r, r + n, rows_buf);  // pad a last partial tile
 *         size_t bytes = packed size of ceil(n / hp) row tiles;
 *         uint8_t *out = cg_sink_reserve(sink, bytes);
 *         if (!out) return -1;
 *         for (each tile of hp rows in rows_buf) cg_qpack_row_tile(..., out + its offset);
 *         if (cg_sink_commit(sink, bytes)) return -1;
 *     }
 */
#ifndef LLMC_SEGMENT_WRITER_H
#define LLMC_SEGMENT_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "codegen.h"
#include "ir/const_view.h"
#include "plan_model.h"

typedef struct cg_sink cg_sink;

/* Appends n bytes to the segment being written.  0, or -1 once the sink
 * has failed (a write error or out of memory; the writer reports it). */
int cg_sink_put(cg_sink *s, const void *bytes, size_t n);
/* Room for the next n bytes, to fill in place and then pass to
 * cg_sink_commit (no copy).  The address is congruent to the bytes' offset
 * in the plan modulo 64, so at the start of a segment it is 64-byte aligned
 * and stays float-aligned while whole floats are appended.  NULL once the
 * sink has failed. */
void *cg_sink_reserve(cg_sink *s, size_t n);
/* Appends the first n bytes of the last reservation. */
int cg_sink_commit(cg_sink *s, size_t n);

/* The default producer: t->data, else t->view's rows, unchanged. */
int cg_produce_bytes(const cg_tensor *t, cg_sink *sink);

/* ---- for lowering and weight sharing ---- */

/* Sets x->view when x is a Weight over a graph constant whose bytes are
 * lazy (required: x->data is then NULL) or file-backed (so the writer can
 * drop their pages once written).  0, or -1 on OOM. */
int cg_weight_share_const(cg_tensor *x, const llmc_value *val);
/* The bytes a weight's segment is made from: its view, else its data. */
llmc_const cg_weight_source(const cg_tensor *t);

/* ---- for the plan writer ---- */

typedef struct {
    int fd;                             /* >= 0: written at the file's current position */
    uint8_t *mem;                       /* else: the plan's bytes, the whole file */
    const char *path;                   /* for messages */
    llmc_progress_fn progress;          /* NULL: none */
    void *progress_ctx;
} cg_sink_target;

/* Bytes [start, end) of the plan: zero padding, then segment i (made by
 * weights[i]'s producer) at offsets[i] (ascending, >= start), zeros up to
 * end.  hashes[i] gets segment i's XXH64; each weight's view pages are
 * dropped once written. */
int cg_write_segments(const cg_sink_target *target, const cg_tensor *const *weights, uint32_t n,
                      const uint64_t *offsets, uint64_t start, uint64_t end, uint64_t *hashes, llmc_error *err);

/* write(2) until all n bytes are written; 0, or -1 with errno. */
int cg_write_all(int fd, const void *data, uint64_t n);

/* XXH64 of `size` bytes of a read-only file mapping, dropping the pages
 * behind it as it goes, so reading a plan back does not keep it resident. */
uint64_t cg_hash_mapped(const uint8_t *data, uint64_t size);

#endif
