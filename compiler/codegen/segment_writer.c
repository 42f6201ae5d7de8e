/* Weight segments streamed into the plan (see segment_writer.h). */
#include "segment_writer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

/* The sink's buffer: big enough that write(2) calls cost nothing next to
 * the bytes, small next to the resident-set budget. */
#define SINK_BUFFER ((size_t)4 << 20)
/* A view is read about this many bytes of rows at a time: L2-sized, so
 * the rows are still cached when the sink hashes them. */
#define READ_TILE ((uint64_t)256 << 10)
#define WRITE_CHUNK ((size_t)1 << 26)
#define ALIGN 64
/* Progress is reported at most every this many bytes. */
#define PROGRESS_STEP ((uint64_t)32 << 20)
/* The read-back is hashed in windows this large, their pages dropped after. */
#define HASH_WINDOW ((uint64_t)64 << 20)

struct cg_sink {
    const cg_sink_target *target;
    uint64_t pos;               /* plan offset of the next byte appended */
    /* file: the pending bytes are buf[lead, lead + used); lead is their
     * offset % ALIGN, so addresses match offsets modulo ALIGN */
    uint8_t *buf;
    size_t cap, lead, used;
    XXH64_state_t *hash;        /* of the segment being written */
    uint64_t seg_end;           /* its end: a producer may not append past it */
    bool in_segment;            /* padding is neither hashed nor counted */
    int error;                  /* errno of the first failure, 0 while fine */
    uint64_t done, total, reported;   /* segment bytes, for progress */
};

static int fail_sink(cg_sink *s, int error)
{
    if (!s->error)
        s->error = error ? error : EIO;
    return -1;
}

int cg_write_all(int fd, const void *data, uint64_t n)
{
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n < WRITE_CHUNK ? (size_t)n : WRITE_CHUNK);
        if (w < 0 && errno == EINTR)
            continue;
        if (w == 0)
            errno = EIO;
        if (w <= 0)
            return -1;
        p += w;
        n -= (uint64_t)w;
    }
    return 0;
}

static void report(cg_sink *s, bool last)
{
    const cg_sink_target *t = s->target;
    if (t->progress && (last || s->done - s->reported >= PROGRESS_STEP)) {
        s->reported = s->done;
        t->progress(t->progress_ctx, "writing weights", s->done, s->total);
    }
}

/* Writes the pending bytes; the next ones start at buf + pos % ALIGN. */
static int flush(cg_sink *s)
{
    if (s->used && cg_write_all(s->target->fd, s->buf + s->lead, s->used))
        return fail_sink(s, errno);
    s->lead = (size_t)(s->pos % ALIGN);
    s->used = 0;
    return 0;
}

/* A buffer of at least `need` bytes, 64-byte aligned. */
static int grow(cg_sink *s, size_t need)
{
    void *p = NULL;
    if (need <= s->cap)
        return 0;
    if (posix_memalign(&p, ALIGN, need))
        return fail_sink(s, ENOMEM);
    free(s->buf);
    s->buf = p;
    s->cap = need;
    return 0;
}

/* Room for n more bytes in the segment (EFBIG: a producer overran it). */
static bool fits(cg_sink *s, size_t n)
{
    if (!s->error && n > s->seg_end - s->pos)
        fail_sink(s, EFBIG);
    return !s->error;
}

void *cg_sink_reserve(cg_sink *s, size_t n)
{
    if (!fits(s, n))
        return NULL;
    if (s->target->fd < 0)
        return s->target->mem + s->pos;
    if (s->lead + s->used + n > s->cap && flush(s))
        return NULL;
    if (grow(s, s->lead + n))
        return NULL;
    return s->buf + s->lead + s->used;
}

/* Counts n bytes appended at `bytes` (already where they belong). */
static void appended(cg_sink *s, const void *bytes, size_t n)
{
    s->pos += n;
    if (s->in_segment) {
        XXH64_update(s->hash, bytes, n);
        s->done += n;
        report(s, false);
    }
}

int cg_sink_commit(cg_sink *s, size_t n)
{
    if (!fits(s, n))
        return -1;
    if (s->target->fd < 0) {
        appended(s, s->target->mem + s->pos, n);
        return 0;
    }
    appended(s, s->buf + s->lead + s->used, n);
    s->used += n;
    return 0;
}

int cg_sink_put(cg_sink *s, const void *bytes, size_t n)
{
    if (!fits(s, n))
        return -1;
    if (s->target->fd >= 0 && n >= SINK_BUFFER / 2) {
        /* big runs (a weight used as it is) go straight to the file */
        if (flush(s) || cg_write_all(s->target->fd, bytes, n))
            return fail_sink(s, errno);
        appended(s, bytes, n);
        s->lead = (size_t)(s->pos % ALIGN);
        return 0;
    }
    void *at = cg_sink_reserve(s, n);
    if (!at)
        return -1;
    if (n)
        memcpy(at, bytes, n);
    return cg_sink_commit(s, n);
}

static int put_zeros(cg_sink *s, uint64_t n)
{
    static const uint8_t zeros[4096];
    for (uint64_t k; n > 0; n -= k) {
        k = n < sizeof zeros ? n : sizeof zeros;
        if (cg_sink_put(s, zeros, (size_t)k))
            return -1;
    }
    return 0;
}

/* ---- producers ---- */

int cg_produce_bytes(const cg_tensor *t, cg_sink *sink)
{
    if (t->data || !t->view)
        return cg_sink_put(sink, t->data, (size_t)t->nbytes);
    int64_t rows = llmc_view_rows(t->view), cols = llmc_view_cols(t->view);
    int64_t step = llmc_view_rows_per(t->view, READ_TILE);
    for (int64_t r = 0; r < rows; r += step) {
        int64_t n = rows - r < step ? rows - r : step;
        size_t bytes = sizeof(float) * (size_t)(n * cols);
        float *dst = cg_sink_reserve(sink, bytes);
        if (!dst)
            return -1;
        llmc_view_read_rows(t->view, r, r + n, dst);
        if (cg_sink_commit(sink, bytes))
            return -1;
    }
    return 0;
}

int cg_weight_share_const(cg_tensor *x, const llmc_value *val)
{
    const llmc_const *k = &val->konst;
    if (k->data && (!k->file_backed || val->dtype != LLMC_DT_FLOAT))
        return 0;
    /* rows x cols: the view's own dims, else the last dim as cols */
    int64_t cols = val->shape.rank > 0 ? val->shape.dims[val->shape.rank - 1].c : 1;
    int64_t rows = cols > 0 ? (int64_t)(k->nbytes / sizeof(float) / (uint64_t)cols) : 0;
    if (k->view) {
        rows = llmc_view_rows(k->view);
        cols = llmc_view_cols(k->view);
    }
    x->view = llmc_const_share_view(k, rows, cols);
    return x->view || !k->nbytes ? 0 : -1;
}

llmc_const cg_weight_source(const cg_tensor *t)
{
    if (!t->view)
        return (llmc_const){.data = t->data, .nbytes = t->nbytes};
    uint64_t bytes = sizeof(float) * (uint64_t)llmc_view_rows(t->view) * (uint64_t)llmc_view_cols(t->view);
    return (llmc_const){.data = llmc_view_dense_data(t->view), .nbytes = bytes, .view = t->view};
}

/* ---- writing ---- */

static int write_segment(cg_sink *s, const cg_tensor *t, uint32_t i, uint64_t *hash, llmc_error *err)
{
    uint64_t start = s->pos;
    if (t->produce && !t->view)
        return llmc_fail(err, LLMC_E_INTERNAL, "segment %" PRIu32 " ('%s'): a producer without a view to read",
                         i, t->name);
    XXH64_reset(s->hash, 0);
    s->seg_end = start + t->nbytes;
    s->in_segment = true;
    int rc = (t->produce ? t->produce : cg_produce_bytes)(t, s);
    s->in_segment = false;
    s->seg_end = UINT64_MAX;
    if (s->error == EFBIG)
        return llmc_fail(err, LLMC_E_INTERNAL, "segment %" PRIu32 " ('%s'): its producer wrote past the %" PRIu64
                         " bytes the plan has room for", i, t->name, t->nbytes);
    if (!rc && !s->error && s->pos - start != t->nbytes)
        return llmc_fail(err, LLMC_E_INTERNAL, "segment %" PRIu32 " ('%s'): its producer wrote %" PRIu64
                         " bytes, the plan has room for %" PRIu64, i, t->name, s->pos - start, t->nbytes);
    if (rc || s->error)
        return -1;
    *hash = XXH64_digest(s->hash);
    if (t->view)
        llmc_view_release_pages(t->view);
    return LLMC_OK;
}

static int sink_failed(const cg_sink *s, llmc_error *err)
{
    if (s->error == ENOMEM)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory writing the weights of '%s'", s->target->path);
    return llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", s->target->path, strerror(s->error));
}

static int write_all_segments(cg_sink *s, const cg_tensor *const *weights, uint32_t n, const uint64_t *offsets,
                              uint64_t end, uint64_t *hashes, llmc_error *err)
{
    int rc = LLMC_OK;
    for (uint32_t i = 0; i < n && !rc; i++) {
        rc = offsets[i] < s->pos || put_zeros(s, offsets[i] - s->pos) ? -1 : LLMC_OK;
        if (!rc)
            rc = write_segment(s, weights[i], i, &hashes[i], err);
    }
    if (!rc)
        rc = put_zeros(s, end - s->pos);
    if (!rc && s->target->fd >= 0)
        rc = flush(s);
    if (rc == -1 && s->error)
        return sink_failed(s, err);
    if (rc == -1)
        return llmc_fail(err, LLMC_E_INTERNAL, "plan segments out of order, or a producer failed without saying why");
    report(s, true);
    return rc;
}

int cg_write_segments(const cg_sink_target *target, const cg_tensor *const *weights, uint32_t n,
                      const uint64_t *offsets, uint64_t start, uint64_t end, uint64_t *hashes, llmc_error *err)
{
    cg_sink s = {.target = target, .pos = start, .lead = (size_t)(start % ALIGN), .seg_end = UINT64_MAX};
    for (uint32_t i = 0; i < n; i++)
        s.total += weights[i]->nbytes;
    s.hash = XXH64_createState();
    if (!s.hash || (target->fd >= 0 && grow(&s, SINK_BUFFER)))
        s.error = ENOMEM;
    if (!s.error && target->fd >= 0 && lseek(target->fd, (off_t)start, SEEK_SET) < 0)
        s.error = errno;
    int rc = s.error ? sink_failed(&s, err) : write_all_segments(&s, weights, n, offsets, end, hashes, err);
    XXH64_freeState(s.hash);
    free(s.buf);
    return rc;
}

uint64_t cg_hash_mapped(const uint8_t *data, uint64_t size)
{
    XXH64_state_t *st = XXH64_createState();
    if (!st)
        return XXH64(data, (size_t)size, 0);   /* still right, only resident */
    XXH64_reset(st, 0);
    for (uint64_t at = 0; at < size; at += HASH_WINDOW) {
        uint64_t n = size - at < HASH_WINDOW ? size - at : HASH_WINDOW;
        XXH64_update(st, data + at, (size_t)n);
        llmc_release_file_pages(data + at, n);
    }
    uint64_t h = XXH64_digest(st);
    XXH64_freeState(st);
    return h;
}
