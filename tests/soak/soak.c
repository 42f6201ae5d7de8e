/* llmc-soak: a long run of one plan through the runtime API, to show that
 * a session neither leaks memory nor drifts (scripts/soak.sh, `make soak`),
 * and a driver for the weight re-verification tests (tests/t_reverify.sh).
 *
 *   llmc-soak PLAN [--tokens N] [--sample K] [--prompt-ids LIST]
 *                  [--reverify N] [--flip-tensor NAME --flip-after T]
 *   llmc-soak PLAN --bench-reverify R
 *
 * The soak fills the session to the plan's max context, resets it and
 * fills it again until N tokens (default 100,000) have been generated.  The
 * first context and one more after the last are greedy from the same prompt
 * (the reference contexts); the ones between sample (temperature 0.8,
 * top-k 40, a seed per context) so that they differ.  Every K generated
 * tokens (default 1,000) it prints the process's resident set size
 * ("rss TOKENS BYTES ANON_BYTES", from /proc/self/statm); the warm-up is
 * the first two contexts (the sampler's code and scratch are first touched
 * in the second), and a sample at their end is the baseline.  It fails
 * (exit 1) when
 *   - the anonymous RSS samples (memory no file backs: what a leak grows)
 *     after the warm-up differ by more than one page; file-backed pages
 *     (libc and libm code, mapped 16 at a time by the kernel's fault-around
 *     when first executed, dropped again under memory pressure) are
 *     reported beside them, or
 *   - the last reference context's ids or logits differ from the first's.
 * The plan is mapped as `llmc run` maps it (private and read-only: its
 * pages are file-backed, and a test that flips a bit makes that page
 * writable, so the change stays in this process).
 *
 * --reverify N feeds through llmc_rt_session_feed_checked with the session
 * option "re-verify every N tokens".  --flip-tensor flips bit 0 of the
 * middle byte of weight tensor NAME once T tokens have been generated,
 * prints what llmc_rt_plan_reverify says right after, and generation goes
 * on (stopping with the error if --reverify is on).  --bench-reverify times
 * R re-verifications of the plan.  A runtime error exits 6 with its
 * message. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "llmc_rt.h"
#include "llmc_rt_internal.h"
#include "plan_format.h"
#include "support/file_map.h"

#define MAX_IDS 64

typedef struct {
    const char *plan_path, *flip_tensor;
    uint64_t tokens, sample, flip_after, bench;
    uint32_t reverify;
    int64_t prompt[MAX_IDS];
    uint32_t n_prompt;
} soak_args;

/* What a run keeps: the session, the reference context, the RSS samples. */
typedef struct {
    llmc_rt_plan plan;
    llmc_mapped_file file;    /* the plan's bytes, mapped private: a flip stays ours */
    llmc_rt_session s;
    uint32_t vocab, context;
    float *logits;
    void *scratch;
    uint64_t generated, contexts;
    int64_t *ref_ids;         /* the first context's generated ids */
    uint64_t ref_hash;        /* XXH64 chain over its logits rows */
    uint32_t n_ref;
    long rss[3], anon[3];     /* RSS at the end of the warm-up, then min and max; anonymous */
    uint64_t samples;
} soak_run;

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double now(void)
{
    return seconds(CLOCK_MONOTONIC);
}

static int runtime_failed(const char *what, llmc_rt_status st, const llmc_rt_error *err)
{
    fprintf(stderr, "llmc-soak: %s: %s: %s\n", what, llmc_rt_status_text(st), err->msg);
    return 6;
}

/* Resident bytes, all of them and the anonymous ones (statm's resident
 * minus shared: pages no file backs), read without allocating (no FILE, no
 * malloc); -1 if /proc cannot tell. */
static void rss_bytes(long *total, long *anon)
{
    char buf[128];
    long size = 0, resident = 0, shared = 0, page = sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/statm", O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = 0;
    int ok = n > 0 && sscanf(buf, "%ld %ld %ld", &size, &resident, &shared) == 3;
    *total = ok ? resident * page : -1;
    *anon = ok ? (resident - shared) * page : -1;
}

static void sample_rss(soak_run *r, int warm_up_end)
{
    long total, anon;
    rss_bytes(&total, &anon);
    printf("rss %llu %ld %ld%s\n", (unsigned long long)r->generated, total, anon,
           warm_up_end ? " warm-up" : "");
    if (warm_up_end) {
        r->rss[0] = r->rss[1] = r->rss[2] = total;
        r->anon[0] = r->anon[1] = r->anon[2] = anon;
    } else if (r->rss[0]) {
        r->rss[1] = total < r->rss[1] ? total : r->rss[1];
        r->rss[2] = total > r->rss[2] ? total : r->rss[2];
        r->anon[1] = anon < r->anon[1] ? anon : r->anon[1];
        r->anon[2] = anon > r->anon[2] ? anon : r->anon[2];
    }
    r->samples++;
}

static int parse_ids(const char *text, soak_args *a)
{
    for (const char *p = text; *p;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || a->n_prompt == MAX_IDS || (*end && *end != ','))
            return -1;
        a->prompt[a->n_prompt++] = v;
        p = *end ? end + 1 : end;
    }
    return a->n_prompt ? 0 : -1;
}

static int parse_args(int argc, char **argv, soak_args *a)
{
    static const int64_t default_prompt[] = {913, 431, 423, 44, 1145, 410, 298}; /* "And God said, Let there be" */
    memset(a, 0, sizeof *a);
    a->tokens = 100000;
    a->sample = 1000;
    for (int i = 2; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        uint64_t n = v ? strtoull(v, &end, 10) : 0;
        int numeric = v && end != v && !*end;
        if (!strcmp(argv[i], "--prompt-ids") && v) {
            if (parse_ids(v, a))
                return -1;
        } else if (!strcmp(argv[i], "--flip-tensor") && v) {
            a->flip_tensor = v;
        } else if (numeric && !strcmp(argv[i], "--tokens")) {
            a->tokens = n;
        } else if (numeric && n && !strcmp(argv[i], "--sample")) {
            a->sample = n;
        } else if (numeric && n <= UINT32_MAX && !strcmp(argv[i], "--reverify")) {
            a->reverify = (uint32_t)n;
        } else if (numeric && !strcmp(argv[i], "--flip-after")) {
            a->flip_after = n;
        } else if (numeric && n && !strcmp(argv[i], "--bench-reverify")) {
            a->bench = n;
        } else {
            return -1;
        }
        i++;
    }
    if (!a->n_prompt) {
        memcpy(a->prompt, default_prompt, sizeof default_prompt);
        a->n_prompt = sizeof default_prompt / sizeof default_prompt[0];
    }
    a->plan_path = argv[1];
    return 0;
}

/* The plan mapped as llmc run maps it (private, read-only but for a flip)
 * and opened with its hashes checked. */
static int open_plan(soak_run *r, const char *path)
{
    llmc_error lerr = {0};
    llmc_rt_error err = {0};
    if (llmc_open_input(path, false, &r->file, &lerr)) {
        fprintf(stderr, "llmc-soak: %s\n", lerr.msg);
        return 3;
    }
    llmc_rt_status st = llmc_rt_plan_open(&r->plan, r->file.map, r->file.size, LLMC_RT_VERIFY_HASHES,
                                          &err);
    return st ? runtime_failed(path, st, &err) : 0;
}

/* The session, its buffers and the re-verification option. */
static int start_session(soak_run *r, const soak_args *a)
{
    llmc_rt_error err = {0};
    llmc_rt_plan_info info;
    llmc_rt_plan_info_of(&r->plan, &info);
    r->vocab = info.vocab_size;
    r->context = info.max_context;
    size_t mem = llmc_rt_session_memory(&r->plan);
    void *memory = aligned_alloc(64, (mem + 63) / 64 * 64);
    r->logits = malloc(sizeof(float) * r->vocab);
    r->scratch = malloc(LLMC_SAMPLER_SCRATCH_BYTES(r->vocab));
    r->ref_ids = malloc(sizeof(int64_t) * r->context);
    if (!memory || !r->logits || !r->scratch || !r->ref_ids)
        return 3;
    llmc_rt_status st = llmc_rt_session_init(&r->s, &r->plan, memory, mem, &err);
    if (st)
        return runtime_failed("session init", st, &err);
    llmc_rt_session_set_reverify(&r->s, a->reverify);
    return 0;
}

/* Flips bit 0 of the middle byte of weight tensor `name` in the plan's
 * bytes and says what llmc_rt_plan_reverify finds. */
static int flip_weight(soak_run *r, const char *name)
{
    fb_reader fr = rt_reader(&r->plan);
    for (uint32_t i = 0; i < rt_plan_of(&r->plan)->n_tensors; i++) {
        rt_tensor_desc d;
        rt_segment_desc seg;
        if (rt_read_tensor(&fr, &r->plan, i, &d, NULL) || d.kind != KIND_WEIGHT ||
            strcmp(d.name, name) || rt_read_segment(&fr, &r->plan, d.segment, &seg, NULL))
            continue;
        uint64_t at = seg.offset + seg.size / 2;
        long size = sysconf(_SC_PAGESIZE);
        uint8_t *page = (uint8_t *)r->file.map + at / (uint64_t)size * (uint64_t)size;
        if (mprotect(page, (size_t)size, PROT_READ | PROT_WRITE))
            return 3;
        page[at % (uint64_t)size] ^= 1;
        llmc_rt_error err = {0};
        llmc_rt_status st = llmc_rt_plan_reverify(&r->plan, &err);
        printf("flipped bit 0 of byte %llu (tensor %s) after %llu tokens\n",
               (unsigned long long)at, name, (unsigned long long)r->generated);
        printf("reverify: %s: %s\n", llmc_rt_status_text(st), st ? err.msg : "all segments match");
        return 0;
    }
    fprintf(stderr, "llmc-soak: no weight tensor named '%s'\n", name);
    return 2;
}

/* One context: reset, the prompt, then one token at a time up to max
 * context.  The reference contexts (greedy) record or compare their ids
 * and logits; *same tells whether a compared one matched. */
static int run_context(soak_run *r, const soak_args *a, int reference, int *same)
{
    llmc_rt_error err = {0};
    llmc_sampler sm;
    llmc_sampler_init(&sm, reference ? 0.0f : 0.8f, reference ? 1 : 40, 1.0f, r->contexts + 1);
    uint64_t hash = 0;
    uint32_t n = 0;
    int record = reference && r->contexts == 0;
    *same = 1;
    llmc_rt_session_reset(&r->s);
    llmc_rt_status st = llmc_rt_session_feed_checked(&r->s, a->prompt, a->n_prompt, r->logits, &err);
    for (uint32_t pos = a->n_prompt; !st && pos < r->context; pos++) {
        int64_t next;
        if (reference)
            hash = llmc_rt_xxh64(r->logits, sizeof(float) * r->vocab, hash);
        st = llmc_sample(&sm, r->logits, r->vocab, r->scratch,
                         LLMC_SAMPLER_SCRATCH_BYTES(r->vocab), &next, &err);
        if (record)
            r->ref_ids[n] = next;
        else if (reference)
            *same &= n < r->n_ref && r->ref_ids[n] == next;
        n++;
        if (!st)
            st = llmc_rt_session_feed_checked(&r->s, &next, 1, r->logits, &err);
        if (st)
            break;
        r->generated++;
        if (r->generated % a->sample == 0)
            sample_rss(r, 0);
        if (a->flip_tensor && r->generated == a->flip_after && flip_weight(r, a->flip_tensor))
            return 2;
    }
    if (st) {
        fprintf(stderr, "llmc-soak: generation stopped after %llu tokens\n",
                (unsigned long long)r->generated);
        return runtime_failed("feed", st, &err);
    }
    if (record) {
        r->n_ref = n;
        r->ref_hash = hash;
    } else if (reference) {
        *same &= n == r->n_ref && hash == r->ref_hash;
    }
    r->contexts++;
    return 0;
}

static void print_ids(const char *what, const int64_t *ids, uint32_t n)
{
    printf("%s", what);
    for (uint32_t i = 0; i < n; i++)
        printf(" %lld", (long long)ids[i]);
    printf("\n");
}

static int soak(soak_run *r, const soak_args *a)
{
    int same, rc;
    double t0 = now();
    if ((rc = run_context(r, a, 1, &same)))
        return rc;
    print_ids("ids first context:", r->ref_ids, r->n_ref);
    if ((rc = run_context(r, a, 0, &same)))
        return rc;
    sample_rss(r, 1);
    while (r->generated < a->tokens)
        if ((rc = run_context(r, a, 0, &same)))
            return rc;
    if ((rc = run_context(r, a, 1, &same)))
        return rc;
    sample_rss(r, 0);
    double wall = now() - t0;
    printf("tokens %llu in %llu contexts of %u positions, %.1f s, %.0f tokens/s\n",
           (unsigned long long)r->generated, (unsigned long long)r->contexts, r->context, wall,
           (double)r->generated / wall);
    printf("rss after warm-up %ld, then min %ld max %ld over %llu samples (max - min %ld bytes)\n",
           r->rss[0], r->rss[1], r->rss[2], (unsigned long long)r->samples - 1, r->rss[2] - r->rss[1]);
    printf("anonymous rss after warm-up %ld, then min %ld max %ld (max - min %ld bytes)\n",
           r->anon[0], r->anon[1], r->anon[2], r->anon[2] - r->anon[1]);
    printf("last reference context: %s\n", same ? "same ids and bitwise the same logits" : "DIFFERS");
    int flat = r->anon[2] - r->anon[1] <= sysconf(_SC_PAGESIZE);
    printf("%s\n", flat && same ? "soak ok" : "soak FAILED");
    return flat && same ? 0 : 1;
}

static int bench_reverify(soak_run *r, uint64_t times)
{
    llmc_rt_error err = {0};
    uint64_t bytes = 0;
    fb_reader fr = rt_reader(&r->plan);
    for (uint32_t i = 0; i < rt_plan_of(&r->plan)->n_segments; i++) {
        rt_segment_desc seg;
        if (!rt_read_segment(&fr, &r->plan, i, &seg, NULL))
            bytes += seg.size;
    }
    double best = 1e30, best_cpu = 1e30; /* wall, and the thread's CPU time */
    for (uint64_t k = 0; k < times; k++) {
        double t = now(), c = seconds(CLOCK_THREAD_CPUTIME_ID);
        llmc_rt_status st = llmc_rt_plan_reverify(&r->plan, &err);
        c = seconds(CLOCK_THREAD_CPUTIME_ID) - c;
        t = now() - t;
        if (st)
            return runtime_failed("reverify", st, &err);
        best = t < best ? t : best;
        best_cpu = c < best_cpu ? c : best_cpu;
    }
    printf("reverify: %llu bytes in %u segments, best of %llu: %.3f ms wall (%.2f GB/s), "
           "%.3f ms CPU (%.2f GB/s)\n", (unsigned long long)bytes, rt_plan_of(&r->plan)->n_segments,
           (unsigned long long)times, best * 1e3, (double)bytes / best / 1e9, best_cpu * 1e3,
           (double)bytes / best_cpu / 1e9);
    return 0;
}

int main(int argc, char **argv)
{
    soak_args a;
    if (argc < 2 || parse_args(argc, argv, &a)) {
        fprintf(stderr, "usage: llmc-soak PLAN [--tokens N] [--sample K] [--prompt-ids LIST]\n"
                        "                      [--reverify N] [--flip-tensor NAME --flip-after T]\n"
                        "       llmc-soak PLAN --bench-reverify R\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* a long run's samples show as they come */
    static soak_run r;
    int rc = open_plan(&r, a.plan_path);
    if (rc)
        return rc;
    if (a.bench)
        return bench_reverify(&r, a.bench);
    rc = start_session(&r, &a);
    return rc ? rc : soak(&r, &a);
}
