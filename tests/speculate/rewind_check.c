/* llmc_rt_session_rewind on real plans (tests/t_speculate.sh): a session
 * that fed a prompt, then r tokens it forgets (rewind), then a continuation
 * must produce the continuation's logits bitwise equal to a session that
 * fed the prompt and the continuation only; for prompt lengths FIRST,
 * FIRST + STEP, ... LAST (crossing a sliding window and the cache's chunk
 * edges) and r up to llmc_rt_session_rewind_span.  An odd STEP is coprime
 * to the windows and chunks, powers of two, so a range of STEP * W lengths
 * lands at every offset of a W-position window.  A
 * windowed cache must refuse a rewind after span + 1 positions (its ring
 * reused rows the rewind needs).
 * usage: rewind_check PLAN FIRST LAST STEP [PLAN ...]; prints TAP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc_rt.h"
#include "tap.h"

#define CONT 3 /* tokens of the continuation */

typedef struct {
    llmc_rt_plan plan;
    llmc_rt_plan_info info;
    llmc_rt_session a, b;
    void *mem_a, *mem_b, *bytes;
    int64_t *ids;
    float *rows_a, *rows_b;
} fixture;

static void *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    void *buf = NULL;
    long n = -1;
    if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET))
        buf = aligned_alloc(64, ((size_t)n + 63) / 64 * 64);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (f)
        fclose(f);
    *size = (size_t)n;
    return buf;
}

static int open_fixture(fixture *x, const char *path)
{
    size_t size, mem;
    llmc_rt_error err = {0};
    memset(x, 0, sizeof *x);
    x->bytes = read_file(path, &size);
    if (!x->bytes || llmc_rt_plan_open(&x->plan, x->bytes, size, 0, &err) ||
        llmc_rt_plan_info_of(&x->plan, &x->info)) {
        printf("# %s: %s\n", path, err.msg);
        return -1;
    }
    mem = llmc_rt_session_memory(&x->plan);
    x->mem_a = malloc(mem);
    x->mem_b = malloc(mem);
    x->ids = malloc(sizeof(int64_t) * x->info.max_context);
    x->rows_a = malloc(sizeof(float) * CONT * x->info.vocab_size);
    x->rows_b = malloc(sizeof(float) * CONT * x->info.vocab_size);
    if (!x->mem_a || !x->mem_b || !x->ids || !x->rows_a || !x->rows_b ||
        llmc_rt_session_init(&x->a, &x->plan, x->mem_a, mem, &err) ||
        llmc_rt_session_init(&x->b, &x->plan, x->mem_b, mem, &err)) {
        printf("# %s: %s\n", path, err.msg);
        return -1;
    }
    for (uint32_t i = 0; i < x->info.max_context; i++) /* ids every vocabulary has */
        x->ids[i] = (int64_t)((i * 37u + 11u) % x->info.vocab_size);
    return 0;
}

static void close_fixture(fixture *x)
{
    free(x->mem_a);
    free(x->mem_b);
    free(x->ids);
    free(x->rows_a);
    free(x->rows_b);
    free(x->bytes);
}

/* Session a: prompt of n, r forgotten tokens, rewind to n, continuation;
 * session b: prompt, continuation.  1 when the rows are bitwise equal;
 * -1 when a refused the rewind. */
static int rewound_equal(fixture *x, uint32_t n, uint32_t r, llmc_rt_error *err)
{
    const int64_t *prompt = x->ids, *forgotten = x->ids + n + CONT, *cont = x->ids + n;
    llmc_rt_session_reset(&x->a);
    llmc_rt_session_reset(&x->b);
    if (llmc_rt_session_feed(&x->a, prompt, n, NULL, err) ||
        llmc_rt_session_feed(&x->a, forgotten, r, NULL, err))
        return 0;
    if (llmc_rt_session_rewind(&x->a, n, err))
        return -1;
    if (llmc_rt_session_feed_rows(&x->a, cont, CONT, x->rows_a, err) ||
        llmc_rt_session_feed(&x->b, prompt, n, NULL, err) ||
        llmc_rt_session_feed_rows(&x->b, cont, CONT, x->rows_b, err))
        return 0;
    return !memcmp(x->rows_a, x->rows_b, sizeof(float) * CONT * x->info.vocab_size);
}

/* The span after a prompt of n (a fresh session). */
static uint32_t span_after(fixture *x, uint32_t n)
{
    llmc_rt_session_reset(&x->a);
    if (llmc_rt_session_feed(&x->a, x->ids, n, NULL, NULL))
        return 0;
    return llmc_rt_session_rewind_span(&x->a);
}

static void check_plan(const char *path, uint32_t first, uint32_t last, uint32_t step)
{
    fixture x;
    if (open_fixture(&x, path)) {
        CHECK(0, "%s opens", path);
        close_fixture(&x);
        return;
    }
    uint32_t equal = 0, tried = 0, refused_ok = 0, windowed = 0, min_span = UINT32_MAX;
    llmc_rt_error err = {0};
    for (uint32_t n = first; n <= last; n += step) {
        uint32_t span = span_after(&x, n), room = x.info.max_context - n - CONT;
        uint32_t dist[3] = {1, 7, span < room ? span : room};
        min_span = span < min_span ? span : min_span;
        for (int i = 0; i < 3; i++, tried++)
            equal += rewound_equal(&x, n, dist[i], &err) == 1;
        if (span != UINT32_MAX && span + 1 <= room) {
            windowed++;
            refused_ok += rewound_equal(&x, n, span + 1, &err) == -1 &&
                          err.code == LLMC_RT_E_BOUNDS && strstr(err.msg, "sliding window");
        }
    }
    CHECK(equal == tried, "%s: rewind then feed gives the logits of a session that never saw "
          "the forgotten tokens, bitwise (%u of %u prompts x distances, prompts %u..%u step %u, "
          "distances 1, 7 and the span)", path, equal, tried, first, last, step);
    if (windowed)
        CHECK(refused_ok == windowed, "%s: sliding window: a rewind after span + 1 positions is "
              "refused (%u of %u; smallest span %u): %s", path, refused_ok, windowed, min_span,
              err.msg);
    close_fixture(&x);
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 3 < argc; i += 4) {
        uint32_t step = (uint32_t)atoi(argv[i + 3]);
        check_plan(argv[i], (uint32_t)atoi(argv[i + 1]), (uint32_t)atoi(argv[i + 2]),
                   step ? step : 1);
    }
    return TAP_DONE();
}
