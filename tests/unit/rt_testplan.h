/* Test plans for the runtime unit tests, built without the compiler: the
 * tests describe tensors and ops, this header writes the JSON form of
 * schemas/plan.fbs, runs `flatc -b` on it and appends 64-aligned weight
 * segments with their XXH64 (from libxxhash, independent of the runtime's).
 * Files land in $BUILD/test-data (default build/test-data); tests run from
 * the repository root (tests/run_all.sh does). */
#ifndef LLMC_RT_TESTPLAN_H
#define LLMC_RT_TESTPLAN_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "llmc_rt.h"

#define TP_MAX 64

typedef struct {
    unsigned max_context;
    int format_version;
    const char *target;
    char extra[512];               /* more Plan fields, e.g. "vocab_size: 7," */
    int n_tensors, n_ops, n_inputs, n_outputs, n_weights;
    char tensors[TP_MAX][1600];
    long long tensor_bytes[TP_MAX]; /* arena tensors: max_bytes; weights: -1 */
    char ops[TP_MAX][2048];
    char inputs[TP_MAX][128], outputs[TP_MAX][128];
    const void *weight_data[TP_MAX];
    size_t weight_bytes[TP_MAX];
} tp_plan;

static inline void tp_init(tp_plan *p, unsigned max_context)
{
    memset(p, 0, sizeof *p);
    p->max_context = max_context;
    p->format_version = LLMC_RT_FORMAT_VERSION;
    p->target = "generic";
}

/* One Affine from "3", "S", "P", "P+S", "2+S" ... */
static inline void tp_affine(const char *term, size_t len, long long *c, long long *s, long long *q)
{
    *c = *s = *q = 0;
    for (size_t i = 0; i < len;) {
        if (term[i] == 'S') {
            (*s)++;
            i++;
        } else if (term[i] == 'P') {
            (*q)++;
            i++;
        } else if (term[i] == '+' || term[i] == ' ') {
            i++;
        } else {
            char *end;
            *c += strtoll(term + i, &end, 10);
            i = (size_t)(end - term);
        }
    }
}

/* "1,S,4" -> JSON [Affine]; returns the element count at S = P = max. */
static inline long long tp_dims_json(const char *spec, char *out, size_t cap, long long max)
{
    long long count = 1;
    size_t n = (size_t)snprintf(out, cap, "[");
    while (spec && *spec) {
        size_t len = strcspn(spec, ",");
        long long c, s, q;
        tp_affine(spec, len, &c, &s, &q);
        count *= c + s * max + q * max;
        n += (size_t)snprintf(out + n, cap - n, "%s{c: %lld, s: %lld, p: %lld}",
                              n > 1 ? ", " : "", c, s, q);
        spec += len + (spec[len] == ',');
    }
    snprintf(out + n, cap - n, "]");
    return count;
}

/* JSON [Affine] for region fields, e.g. tp_affs("0,0,P,0"); 8 rotating buffers. */
static inline const char *tp_affs(const char *spec)
{
    static char bufs[8][512];
    static int next;
    char *b = bufs[next++ % 8];
    tp_dims_json(spec, b, sizeof bufs[0], 0);
    return b;
}

static inline int tp_dtype_size(const char *dtype)
{
    if (!strcmp(dtype, "Int64"))
        return 8;
    if (!strcmp(dtype, "Float32") || !strcmp(dtype, "Int32"))
        return 4;
    return 1;
}

/* An arena tensor; max_bytes is its size at S = P = max_context. */
static inline int tp_tensor(tp_plan *p, const char *name, const char *dtype, const char *dims)
{
    char d[1024];
    long long count = tp_dims_json(dims, d, sizeof d, p->max_context);
    int i = p->n_tensors++;
    p->tensor_bytes[i] = count * tp_dtype_size(dtype);
    snprintf(p->tensors[i], sizeof p->tensors[i], "name: \"%s\", dtype: \"%s\", dims: %s",
             name, dtype, d);
    return i;
}

static inline int tp_weight(tp_plan *p, const char *name, const char *dtype, const char *dims,
                     const void *data, size_t bytes)
{
    char d[1024];
    tp_dims_json(dims, d, sizeof d, 0);
    int i = p->n_tensors++;
    p->tensor_bytes[i] = -1;
    snprintf(p->tensors[i], sizeof p->tensors[i],
             "name: \"%s\", dtype: \"%s\", dims: %s, kind: \"Weight\", segment: %d", name,
             dtype, d, p->n_weights);
    p->weight_data[p->n_weights] = data;
    p->weight_bytes[p->n_weights++] = bytes;
    return i;
}

/* An Op table body in JSON, e.g. tp_op(p, "code: \"MatMul\", inputs: [%d, %d], ..."). */
__attribute__((format(printf, 2, 3))) static inline void tp_op(tp_plan *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->ops[p->n_ops++], sizeof p->ops[0], fmt, ap);
    va_end(ap);
}

static inline void tp_io(tp_plan *p, int is_output, int tensor, const char *role, int layer)
{
    char *dst = is_output ? p->outputs[p->n_outputs++] : p->inputs[p->n_inputs++];
    snprintf(dst, 128, "{tensor: %d, role: \"%s\", layer: %d}", tensor, role, layer);
}

static inline size_t tp_align64(size_t v)
{
    return (v + 63) & ~(size_t)63;
}

typedef struct {
    char *s;
    size_t len, cap;
} tp_buf;

__attribute__((format(printf, 2, 3))) static inline void tp_put(tp_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = (b->len + (size_t)n + 1) * 2;
        b->s = realloc(b->s, b->cap);
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static inline void tp_json(const tp_plan *p, size_t wbase, tp_buf *b)
{
    size_t arena = 0, seg = wbase;
    tp_put(b, "{ format_version: %d, target: \"%s\", max_context: %u, %s\n  tensors: [\n",
           p->format_version, p->target, p->max_context, p->extra);
    for (int i = 0; i < p->n_tensors; i++) {
        if (p->tensor_bytes[i] >= 0) {
            tp_put(b, "    {%s, arena_offset: %zu, max_bytes: %lld},\n", p->tensors[i], arena,
                   p->tensor_bytes[i]);
            arena = tp_align64(arena + (size_t)p->tensor_bytes[i]);
        } else {
            tp_put(b, "    {%s},\n", p->tensors[i]);
        }
    }
    tp_put(b, "  ],\n  arena_size: %zu,\n  ops: [\n", arena);
    for (int i = 0; i < p->n_ops; i++)
        tp_put(b, "    {%s},\n", p->ops[i]);
    tp_put(b, "  ],\n  inputs: [");
    for (int i = 0; i < p->n_inputs; i++)
        tp_put(b, "%s, ", p->inputs[i]);
    tp_put(b, "],\n  outputs: [");
    for (int i = 0; i < p->n_outputs; i++)
        tp_put(b, "%s, ", p->outputs[i]);
    tp_put(b, "],\n  segments: [\n");
    for (int i = 0; i < p->n_weights; i++) {
        tp_put(b, "    {offset: %zu, size: %zu, xxhash64: %llu},\n", seg, p->weight_bytes[i],
               (unsigned long long)XXH64(p->weight_data[i], p->weight_bytes[i], 0));
        seg = tp_align64(seg + p->weight_bytes[i]);
    }
    tp_put(b, "  ]\n}\n");
}

static inline const char *tp_dir(void)
{
    static char dir[512];
    const char *build = getenv("BUILD");
    snprintf(dir, sizeof dir, "%s/test-data", build && *build ? build : "build");
    return dir;
}

static inline void *tp_read(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *data = malloc(*size + 1);
    if (fread(data, 1, *size, f) != *size) {
        free(data);
        data = NULL;
    }
    fclose(f);
    return data;
}

/* Writes name.json, runs flatc; returns the FlatBuffer (malloc) or NULL. */
static inline void *tp_flatc(const tp_plan *p, const char *name, size_t wbase, size_t *size)
{
    char path[1024], cmd[2048];
    tp_buf b = {0, 0, 0};
    tp_json(p, wbase, &b);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tp_dir());
    if (system(cmd) != 0)
        return NULL;
    snprintf(path, sizeof path, "%s/%s.json", tp_dir(), name);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fputs(b.s, f);
    fclose(f);
    free(b.s);
    snprintf(cmd, sizeof cmd, "flatc -b -o '%s' schemas/plan.fbs '%s'", tp_dir(), path);
    if (system(cmd) != 0)
        return NULL;
    snprintf(path, sizeof path, "%s/%s.plan", tp_dir(), name);
    return tp_read(path, size);
}

/* The complete plan file (64-aligned malloc; free()), also written to
 * $BUILD/test-data/<name>.plan.  NULL if flatc failed. */
static uint8_t *tp_finish(const tp_plan *p, const char *name, size_t *size)
{
    size_t fb_size, wbase = 4096;
    void *fb = tp_flatc(p, name, wbase, &fb_size);
    if (fb && fb_size > wbase) { /* the segment offsets do not change its size */
        free(fb);
        wbase = tp_align64(fb_size);
        fb = tp_flatc(p, name, wbase, &fb_size);
    }
    if (!fb)
        return NULL;
    size_t total = p->n_weights ? wbase : fb_size;
    for (int i = 0; i < p->n_weights; i++)
        total = tp_align64(total) + p->weight_bytes[i];
    uint8_t *out = aligned_alloc(64, tp_align64(total));
    memset(out, 0, tp_align64(total));
    memcpy(out, fb, fb_size);
    free(fb);
    size_t seg = wbase;
    for (int i = 0; i < p->n_weights; i++) {
        memcpy(out + seg, p->weight_data[i], p->weight_bytes[i]);
        seg = tp_align64(seg + p->weight_bytes[i]);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.plan", tp_dir(), name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(out, 1, total, f);
        fclose(f);
    }
    *size = total;
    return out;
}

/* Replaces the one occurrence of the little-endian uint64 `from`; returns
 * how many occurrences there were (the patch happens only if exactly one). */
static inline int tp_patch_u64(uint8_t *buf, size_t size, uint64_t from, uint64_t to)
{
    int found = 0;
    size_t at = 0;
    for (size_t i = 0; i + 8 <= size; i += 4) { /* 64-bit fields are 8-aligned; 4 for safety */
        uint64_t v;
        memcpy(&v, buf + i, 8);
        if (v == from) {
            found++;
            at = i;
        }
    }
    if (found == 1)
        memcpy(buf + at, &to, 8);
    return found;
}

/* The session's stats (zeros if it is not one), for checks on its position
 * and KV chunks. */
static inline llmc_rt_stats tp_stats(const llmc_rt_session *s)
{
    llmc_rt_stats stats = {0};
    llmc_rt_session_stats(s, &stats);
    return stats;
}

#endif
