/* Prepare once (tests/t_prepare.sh runs this on tiny zoo plans):
 *   prepare_check PLAN...
 * For each plan, two copies in malloc'd memory, a session on each and the
 * same prompt prefilled; then the FlatBuffer part of one copy, bytes
 * [0, first weight segment), is overwritten with garbage (the weights stay)
 * and 8 more tokens are decoded on both: the logits and the outputs must
 * stay bitwise equal, since a decode step reads only the tables session
 * init prepared.  Also: the op observer sees every op exactly once per call,
 * in plan order, begin before end; llmc_rt_plan_op names every op. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc_rt_internal.h"
#include "plan_format.h"
#include "tap.h"

#define CONTEXT 64
#define PROMPT 5
#define DECODE 8

typedef struct {
    uint8_t *bytes;
    size_t size;
    llmc_rt_plan plan;
    llmc_rt_session s;
    void *mem;
    float *logits;
} copy;

static uint8_t *read_plan(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    uint8_t *bytes = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (bytes = aligned_alloc(64, ((size_t)n + 63) / 64 * 64)) &&
        fread(bytes, 1, (size_t)n, f) != (size_t)n) {
        free(bytes);
        bytes = NULL;
    }
    if (f)
        fclose(f);
    *size = n > 0 ? (size_t)n : 0;
    return bytes;
}

static bool open_copy(const char *path, copy *c)
{
    llmc_rt_error err;
    memset(c, 0, sizeof *c);
    c->bytes = read_plan(path, &c->size);
    if (!c->bytes || llmc_rt_plan_open(&c->plan, c->bytes, c->size, 0, &err))
        return false;
    size_t need = llmc_rt_session_memory_for(&c->plan, CONTEXT);
    c->mem = malloc(need);
    c->logits = malloc(sizeof(float) * rt_plan_of(&c->plan)->vocab_size);
    return c->mem && c->logits &&
           llmc_rt_session_init_for(&c->s, &c->plan, CONTEXT, c->mem, need, &err) == LLMC_RT_OK;
}

static void close_copy(copy *c)
{
    free(c->bytes);
    free(c->mem);
    free(c->logits);
}

/* Where the weights start: the FlatBuffer ends before every segment. */
static uint64_t flatbuffer_end(const llmc_rt_plan *p)
{
    fb_reader r = rt_reader(p);
    uint64_t end = rt_plan_of(p)->size;
    for (uint32_t i = 0; i < rt_plan_of(p)->n_segments; i++) {
        rt_segment_desc seg;
        if (rt_read_segment(&r, p, i, &seg, NULL) == LLMC_RT_OK && seg.size && seg.offset < end)
            end = seg.offset;
    }
    return end;
}

static void scribble(uint8_t *bytes, uint64_t n)
{
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        bytes[i] = (uint8_t)x;
    }
}

static int64_t argmax(const float *v, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        best = v[i] > v[best] ? i : best;
    return best;
}

/* Output 0 of both sessions after their last feed: same dims, same bytes. */
static bool same_output(const copy *a, const copy *b)
{
    llmc_rt_tensor x, y;
    llmc_rt_error err;
    if (llmc_rt_session_output(&a->s, 0, &x, &err) || llmc_rt_session_output(&b->s, 0, &y, &err) ||
        x.rank != y.rank || memcmp(x.dims, y.dims, sizeof x.dims) || x.dtype != y.dtype)
        return false;
    size_t bytes = x.dtype == LLMC_RT_F32 || x.dtype == LLMC_RT_I32 ? 4 : x.dtype == LLMC_RT_I64 ? 8 : 1;
    for (int k = 0; k < x.rank; k++)
        bytes *= (size_t)x.dims[k];
    return memcmp(x.data, y.data, bytes) == 0;
}

static void check_garbled(const char *path)
{
    copy a, b;
    llmc_rt_error err;
    int64_t prompt[PROMPT] = {3, 1, 4, 1, 5};
    bool opened = open_copy(path, &a) && open_copy(path, &b);
    CHECK(opened, "%s: two copies opened, sessions initialized", path);
    if (!opened)
        return;
    bool ok = !llmc_rt_session_feed(&a.s, prompt, PROMPT, a.logits, &err) &&
              !llmc_rt_session_feed(&b.s, prompt, PROMPT, b.logits, &err);
    uint64_t fb_end = flatbuffer_end(&a.plan);
    scribble(a.bytes, fb_end);
    llmc_rt_plan reopened;
    CHECK(ok && fb_end > 64 && fb_end < a.size &&
              llmc_rt_plan_open(&reopened, a.bytes, a.size, 0, &err) != LLMC_RT_OK,
          "%s: prefilled; FlatBuffer bytes [0, %llu) garbled (the plan no longer opens)", path,
          (unsigned long long)fb_end);
    int equal = 0;
    for (int k = 0; ok && k < DECODE; k++) {
        int64_t token = argmax(b.logits, rt_plan_of(&b.plan)->vocab_size);
        ok = !llmc_rt_session_feed(&a.s, &token, 1, a.logits, &err) &&
             !llmc_rt_session_feed(&b.s, &token, 1, b.logits, &err);
        equal += ok && !memcmp(a.logits, b.logits, sizeof(float) * rt_plan_of(&b.plan)->vocab_size);
    }
    CHECK(ok && equal == DECODE, "%s: %d of %d decode steps on the garbled copy give bitwise the "
          "logits of the untouched one (%s)", path, equal, DECODE, ok ? "ok" : err.msg);
    CHECK(same_output(&a, &b), "%s: llmc_rt_session_output reads the same output 0 too", path);
    close_copy(&a);
    close_copy(&b);
}

/* What the observer saw: (op, end) pairs in order. */
typedef struct {
    uint32_t n, cap;
    uint32_t *op;
    int *end;
} observed;

static void observe(void *ctx, uint32_t op_index, int end)
{
    observed *o = ctx;
    if (o->n < o->cap) {
        o->op[o->n] = op_index;
        o->end[o->n] = end;
    }
    o->n++;
}

/* Op i's begin at 2i and its end at 2i + 1, for every op once. */
static bool in_plan_order(const observed *o, uint32_t n_ops)
{
    if (o->n != 2 * n_ops)
        return false;
    for (uint32_t k = 0; k < o->n; k++)
        if (o->op[k] != k / 2 || o->end[k] != (int)(k % 2))
            return false;
    return true;
}

static bool ops_named(const llmc_rt_plan *p, uint32_t *linears)
{
    *linears = 0;
    for (uint32_t i = 0; i < rt_plan_of(p)->n_ops; i++) {
        llmc_rt_op_info info;
        const char *code = llmc_rt_plan_op(p, i, &info) ? "" : llmc_rt_op_name(info.code);
        if (!code[0] || !strcmp(code, "?") || !info.name)
            return false;
        *linears += info.code == LLMC_RT_OP_Linear && info.weight_dtype != 0;
    }
    llmc_rt_op_info info;
    return llmc_rt_plan_op(p, rt_plan_of(p)->n_ops, &info) == LLMC_RT_E_ARG;
}

static void check_observer(const char *path)
{
    copy c;
    llmc_rt_error err;
    int64_t prompt[PROMPT] = {2, 7, 1, 8, 2};
    if (!open_copy(path, &c)) {
        CHECK(0, "%s: opened", path);
        return;
    }
    uint32_t cap = 2 * rt_plan_of(&c.plan)->n_ops + 8, linears;
    observed o = {0, cap, malloc(sizeof(uint32_t) * cap), malloc(sizeof(int) * cap)};
    llmc_rt_session_set_observer(&c.s, observe, &o);
    bool ok = o.op && o.end && !llmc_rt_session_feed(&c.s, prompt, PROMPT, c.logits, &err);
    CHECK(ok && in_plan_order(&o, rt_plan_of(&c.plan)->n_ops), "%s: a prefill: each of the %u ops observed "
          "once, begin then end, in plan order (%u calls)", path, rt_plan_of(&c.plan)->n_ops, o.n);
    o.n = 0;
    ok = ok && !llmc_rt_session_feed(&c.s, &(int64_t){6}, 1, c.logits, &err);
    CHECK(ok && in_plan_order(&o, rt_plan_of(&c.plan)->n_ops), "%s: a decode step likewise (%u calls)", path, o.n);
    llmc_rt_session_set_observer(&c.s, NULL, &o);
    o.n = 0;
    ok = ok && !llmc_rt_session_feed(&c.s, &(int64_t){6}, 1, c.logits, &err);
    CHECK(ok && o.n == 0, "%s: without an observer nothing is called", path);
    CHECK(ops_named(&c.plan, &linears) && linears > 0, "%s: llmc_rt_plan_op names every op "
          "(%u Linear with W's format), refuses index n_ops", path, linears);
    free(o.op);
    free(o.end);
    close_copy(&c);
}

int main(int argc, char **argv)
{
    CHECK(argc > 1, "plans given");
    for (int i = 1; i < argc; i++) {
        check_garbled(argv[i]);
        check_observer(argv[i]);
    }
    return TAP_DONE();
}
