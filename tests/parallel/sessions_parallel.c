/* Sessions in parallel on one plan (tests/t_sessions_parallel.sh runs this):
 *   sessions_parallel [--sessions N] [--pools T,...] [--steps G] PLAN...
 * Each plan is mapped read only and opened once, and every session shares it.
 * Session i has a prompt of its own (encoded from a text of its own by the
 * plan's shared tokenizer when the plan has one, else ids) and generates G
 * tokens greedily; first each session runs alone on the main thread, then
 * for n = 1..N sessions, without a parallel hook and with a pool of T
 * threads per session, n threads run sessions 0..n-1 at once: session i
 * starts its prefill once session i - 1 has decoded STAGGER tokens, and
 * session i - 1 decodes the rest only once session i has started, so every
 * prefill but the first overlaps another session's decode steps (even on a
 * plan so small that a whole session takes less than a thread's time
 * slice).  Every session's prompt ids, generated ids, logits (each row,
 * bitwise) and decoded text must equal its run alone.  Wall times
 * (reported, not asserted) go to "# summary:" lines. */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "llmc_rt.h"
#include "llmc_threads.h"
#include "tap.h"

#define MAX_SESSIONS 8
#define MAX_POOLS 4
#define MAX_STEPS 64
#define MAX_PROMPT 64
#define TEXT_CAP 4096
#define STAGGER 2 /* decode steps session i - 1 takes before session i starts */

/* The sessions' texts when the plan has a tokenizer: lengths from one word
 * to a verse, so prefills of 1 to ~25 tokens. */
static const char *const texts[MAX_SESSIONS] = {
    "And",
    "In the beginning God created the heaven and the earth.",
    "A fool and his money are soon parted.",
    "And the earth was without form, and void; and darkness was upon the face of the deep.",
    "You will be successful in your work.",
    "Blessed are the meek: for they shall inherit the earth.",
    "The best way to predict the future is to invent it.",
    "Let there be light,",
};

/* What sessions running at once share: who has started, who has decoded
 * how far. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t moved;
    uint32_t n;                     /* sessions */
    bool started[MAX_SESSIONS];     /* its prefill began, or it finished */
    uint32_t decoded[MAX_SESSIONS]; /* decode steps taken; UINT32_MAX once finished */
    uint32_t decoding;              /* sessions between their prefill and their end */
} stagger;

/* One session's job and what it produced. */
typedef struct {
    const llmc_rt_plan *plan;       /* shared by every session */
    const llmc_rt_tokenizer *tok;   /* shared; NULL: the prompt is ids */
    uint32_t index, vocab, steps;
    llmc_threads *pool;             /* this session's own; NULL: no hook */
    stagger *st;                    /* NULL: alone */
    /* results */
    bool ok, entered;               /* entered: counted in stagger.decoding */
    llmc_rt_error err;
    uint32_t n_prompt, decoding_at_prefill;
    int64_t prompt[MAX_PROMPT], ids[MAX_STEPS];
    float *logits;                  /* steps rows of vocab: the logits each id was picked from */
    char text[TEXT_CAP];
    size_t text_len;
} run;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The plan mapped read only: a session that wrote to it would fault. */
static const void *map_plan(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    void *bytes = MAP_FAILED;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0)
        bytes = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (fd >= 0)
        close(fd);
    *size = bytes == MAP_FAILED ? 0 : (size_t)st.st_size;
    return bytes == MAP_FAILED ? NULL : bytes;
}

/* ---- one session ----------------------------------------------------------- */

/* Session r->index's prompt: its text through the shared tokenizer (with the
 * thread's own scratch), else 1 + 7i mod 24 ids spread over the vocabulary. */
static bool make_prompt(run *r)
{
    if (!r->tok) {
        r->n_prompt = 1 + r->index * 7 % 24;
        for (uint32_t k = 0; k < r->n_prompt; k++)
            r->prompt[k] = (int64_t)((r->index * 37u + k * 11u + 5u) % r->vocab);
        return true;
    }
    const char *text = texts[r->index];
    size_t len = strlen(text), n = 0;
    size_t need = llmc_rt_tokenizer_scratch(r->tok, len);
    void *scratch = malloc(need ? need : 1);
    bool ok = scratch && !llmc_rt_tokenizer_encode(r->tok, text, len, 0, scratch, need, r->prompt,
                                                   MAX_PROMPT, &n, &r->err);
    free(scratch);
    r->n_prompt = (uint32_t)n;
    return ok && n > 0;
}

/* Appends id's text (the thread's own decoder state d). */
static bool detok(run *r, llmc_rt_detok *d, int64_t id, bool finish)
{
    size_t n = 0;
    size_t room = TEXT_CAP - 1 - r->text_len;
    if (room < llmc_rt_detok_max_bytes(r->tok))
        return false;
    char *out = r->text + r->text_len;
    llmc_rt_status st = finish ? llmc_rt_detok_finish(r->tok, d, out, room, &n, &r->err)
                               : llmc_rt_detok_token(r->tok, d, id, out, room, &n, &r->err);
    r->text_len += n;
    r->text[r->text_len] = 0;
    return st == LLMC_RT_OK;
}

/* Before the prefill: waits for session i - 1's first STAGGER steps. */
static void stagger_wait(run *r)
{
    stagger *st = r->st;
    pthread_mutex_lock(&st->mu);
    while (r->index > 0 && st->decoded[r->index - 1] < STAGGER)
        pthread_cond_wait(&st->moved, &st->mu);
    r->decoding_at_prefill = st->decoding++;
    r->entered = true;
    st->started[r->index] = true;
    pthread_cond_broadcast(&st->moved);
    pthread_mutex_unlock(&st->mu);
}

/* After decode step `decoded` (or once finished): at step STAGGER, waits
 * for session i + 1 to start. */
static void stagger_step(run *r, uint32_t decoded, bool finished)
{
    stagger *st = r->st;
    uint32_t next = r->index + 1;
    pthread_mutex_lock(&st->mu);
    st->decoded[r->index] = finished ? UINT32_MAX : decoded;
    st->decoding -= finished && r->entered;
    st->started[r->index] = true;
    pthread_cond_broadcast(&st->moved);
    while (!finished && decoded == STAGGER && next < st->n && !st->started[next])
        pthread_cond_wait(&st->moved, &st->mu);
    pthread_mutex_unlock(&st->mu);
}

/* Prefill, then steps - 1 decode steps: ids[k] is the greedy pick from
 * logits row k. */
static bool generate(run *r, llmc_rt_session *s)
{
    llmc_sampler sm;
    llmc_sampler_init(&sm, 0.0f, 1, 0.0f, 1);
    llmc_rt_detok d;
    if (r->tok)
        llmc_rt_detok_init(r->tok, &d);
    if (r->st)
        stagger_wait(r);
    bool ok = !llmc_rt_session_feed(s, r->prompt, r->n_prompt, r->logits, &r->err);
    for (uint32_t k = 0; ok && k < r->steps; k++) {
        float *row = r->logits + (size_t)k * r->vocab;
        ok = !llmc_sample(&sm, row, r->vocab, NULL, 0, &r->ids[k], &r->err) &&
             (!r->tok || detok(r, &d, r->ids[k], false)) &&
             (k + 1 == r->steps ||
              !llmc_rt_session_feed(s, &r->ids[k], 1, row + r->vocab, &r->err));
        if (r->st)
            stagger_step(r, k + 1, false);
    }
    return ok && (!r->tok || detok(r, &d, 0, true));
}

static void *session_main(void *arg)
{
    run *r = arg;
    llmc_rt_session s;
    uint32_t context = MAX_PROMPT + r->steps;
    size_t need = llmc_rt_session_memory_for(r->plan, context);
    void *mem = need != SIZE_MAX ? malloc(need) : NULL;
    r->text_len = 0;
    r->text[0] = 0;
    r->ok = mem && make_prompt(r) &&
            !llmc_rt_session_init_for(&s, r->plan, context, mem, need, &r->err);
    if (r->ok) {
        if (r->pool)
            llmc_rt_session_set_parallel(&s, llmc_threads_parallel, r->pool);
        r->ok = generate(r, &s);
    }
    if (r->st)
        stagger_step(r, 0, true);
    free(mem);
    return NULL;
}

/* ---- one plan -------------------------------------------------------------- */

typedef struct {
    const char *name;               /* the file's, for messages */
    llmc_rt_plan plan;
    llmc_rt_tokenizer tok;
    bool has_tok;
    uint32_t vocab, steps;
} shared_plan;

static void run_init(run *r, const shared_plan *p, uint32_t index, float *logits)
{
    memset(r, 0, sizeof *r);
    r->plan = &p->plan;
    r->tok = p->has_tok ? &p->tok : NULL;
    r->index = index;
    r->vocab = p->vocab;
    r->steps = p->steps;
    r->logits = logits;
}

/* Session r against its run alone: prompt, ids, every logit bit, text. */
static bool same_run(const run *r, const run *alone)
{
    return r->ok && r->n_prompt == alone->n_prompt &&
           !memcmp(r->prompt, alone->prompt, sizeof(int64_t) * r->n_prompt) &&
           !memcmp(r->ids, alone->ids, sizeof(int64_t) * r->steps) &&
           !memcmp(r->logits, alone->logits, sizeof(float) * r->steps * r->vocab) &&
           r->text_len == alone->text_len && !memcmp(r->text, alone->text, r->text_len);
}

/* n sessions at once, each with a pool of pool_threads (0: no hook); true
 * when every one equals its run alone.  *overlaps counts prefills that began
 * while another session was decoding. */
static bool run_parallel(const shared_plan *p, const run *alone, uint32_t n, uint32_t pool_threads,
                         float *logits, double *wall, uint32_t *overlaps)
{
    run *runs = calloc(n, sizeof *runs);
    pthread_t th[MAX_SESSIONS];
    stagger st = {.n = n};
    bool ok = runs != NULL;
    pthread_mutex_init(&st.mu, NULL);
    pthread_cond_init(&st.moved, NULL);
    for (uint32_t i = 0; ok && i < n; i++) {
        run_init(&runs[i], p, i, logits + (size_t)i * p->steps * p->vocab);
        runs[i].st = &st;
        runs[i].pool = pool_threads ? llmc_threads_create(pool_threads) : NULL;
        ok = !pool_threads || runs[i].pool;
    }
    uint32_t started = 0;
    double t0 = now();
    for (; ok && started < n; started++)
        ok = !pthread_create(&th[started], NULL, session_main, &runs[started]);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    *wall = now() - t0;
    *overlaps = 0;
    for (uint32_t i = 0; runs && i < n; i++) {
        ok = ok && same_run(&runs[i], &alone[i]);
        if (!runs[i].ok)
            printf("# session %u: %s\n", i, runs[i].err.msg);
        *overlaps += runs[i].decoding_at_prefill > 0;
        llmc_threads_destroy(runs[i].pool);
    }
    pthread_cond_destroy(&st.moved);
    pthread_mutex_destroy(&st.mu);
    free(runs);
    return ok;
}

/* No two sessions alone gave the same first logits row: a session that
 * read another's state would show. */
static bool all_distinct(const run *alone, uint32_t n, uint32_t vocab)
{
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = i + 1; j < n; j++)
            if (!memcmp(alone[i].logits, alone[j].logits, sizeof(float) * vocab))
                return false;
    return true;
}

typedef struct {
    uint32_t sessions, steps, n_pools;
    uint32_t pools[MAX_POOLS]; /* threads per session's pool; 0: no hook */
} options;

/* Every session alone on this thread, no hook: the references. */
static bool run_alone(const shared_plan *p, run *alone, uint32_t sessions, float *logits)
{
    uint32_t lo = MAX_PROMPT, hi = 0;
    bool ok = true;
    for (uint32_t i = 0; ok && i < sessions; i++) {
        run_init(&alone[i], p, i, logits + (size_t)i * p->steps * p->vocab);
        session_main(&alone[i]);
        ok = alone[i].ok;
        lo = alone[i].n_prompt < lo ? alone[i].n_prompt : lo;
        hi = alone[i].n_prompt > hi ? alone[i].n_prompt : hi;
        if (!ok)
            printf("# session %u alone: %s\n", i, alone[i].err.msg);
    }
    CHECK(ok && all_distinct(alone, sessions, p->vocab),
          "%s: %u sessions alone, prompts of %u..%u tokens (%s), %u greedy ids each, no two "
          "first logits rows equal", p->name, sessions, lo, hi,
          p->has_tok ? "texts through the plan's tokenizer" : "ids", p->steps);
    return ok;
}

/* 1..sessions at once with pools of pool_threads; a "# summary:" line of
 * their wall times. */
static void run_matrix_row(const shared_plan *p, const run *alone, uint32_t sessions,
                           uint32_t pool_threads, float *logits)
{
    char line[512];
    int len = 0;
    for (uint32_t n = 1; n <= sessions; n++) {
        double wall;
        uint32_t overlaps;
        bool same = run_parallel(p, alone, n, pool_threads, logits, &wall, &overlaps);
        CHECK(same && overlaps == n - 1, "%s: %u session%s at once, %s: every session's prompt, "
              "ids, logits (bitwise) and text equal its run alone; %u prefill%s began while "
              "another session was decoding", p->name, n, n > 1 ? "s" : "",
              pool_threads ? "each with a pool" : "no pool", overlaps, overlaps == 1 ? "" : "s");
        len += snprintf(line + len, sizeof line - (size_t)len, " %.1f", wall * 1e3);
    }
    printf("# summary: %s, pool threads %u: wall ms for 1..%u sessions:%s\n", p->name,
           pool_threads, sessions, line);
}

static void check_plan(const char *path, const options *o)
{
    const char *slash = strrchr(path, '/');
    shared_plan p = {.name = slash ? slash + 1 : path, .steps = o->steps};
    size_t size;
    const void *bytes = map_plan(path, &size);
    llmc_rt_error err = {0};
    llmc_rt_plan_info info;
    bool ok = bytes && !llmc_rt_plan_open(&p.plan, bytes, size, 0, &err) &&
              !llmc_rt_plan_info_of(&p.plan, &info) && info.max_context >= MAX_PROMPT + o->steps;
    CHECK(ok, "%s: opened once, max context >= %u (%s)", path, MAX_PROMPT + o->steps, err.msg);
    p.vocab = ok ? info.vocab_size : 0;
    p.has_tok = ok && !llmc_rt_plan_tokenizer(&p.plan, &p.tok, NULL);
    size_t rows = (size_t)o->steps * p.vocab;
    float *logits = ok ? malloc(sizeof(float) * rows * o->sessions * 2) : NULL;
    run *alone = calloc(o->sessions, sizeof *alone);
    if (logits && alone && run_alone(&p, alone, o->sessions, logits))
        for (uint32_t k = 0; k < o->n_pools; k++)
            run_matrix_row(&p, alone, o->sessions, o->pools[k], logits + rows * o->sessions);
    free(alone);
    free(logits);
    if (bytes)
        munmap((void *)bytes, size);
}

static bool parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    *out = (uint32_t)v;
    return end != s && *end == 0 && v >= lo && v <= hi;
}

static bool parse_pools(char *s, options *o)
{
    o->n_pools = 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ","))
        if (o->n_pools == MAX_POOLS || !parse_u32(tok, 0, 16, &o->pools[o->n_pools++]))
            return false;
    return o->n_pools > 0;
}

int main(int argc, char **argv)
{
    options o = {MAX_SESSIONS, 16, 2, {0, 2}};
    int i = 1;
    bool usage = true;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        if (!strcmp(argv[i], "--sessions"))
            usage &= parse_u32(argv[i + 1], 1, MAX_SESSIONS, &o.sessions);
        else if (!strcmp(argv[i], "--steps"))
            usage &= parse_u32(argv[i + 1], 1, MAX_STEPS, &o.steps);
        else if (!strcmp(argv[i], "--pools"))
            usage &= parse_pools(argv[i + 1], &o);
        else
            usage = false;
    }
    CHECK(usage && i < argc, "arguments: plans given, --sessions 1..%d, --steps 1..%d, "
          "--pools T,... (0..16 each)", MAX_SESSIONS, MAX_STEPS);
    for (; usage && i < argc; i++)
        check_plan(argv[i], &o);
    return TAP_DONE();
}
