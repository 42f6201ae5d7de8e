/* llmc eval PLAN (--text FILE | --ids FILE) [--context N] [--stride N] [--threads N]
 * Perplexity of a token sequence with sliding windows, as the usual
 * evaluation scripts compute it (Hugging Face's "perplexity of fixed-length
 * models"): windows of N tokens start every S tokens; each window is
 * prefilled from position 0 and scores only the tokens that no earlier
 * window scored, each from the logits of the position before it (so the
 * first token of the sequence is never scored).  scripts/ort_eval.js
 * computes the same figure with ONNX Runtime. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "support/file_map.h"
#include "ir/io_roles.h"
#include "llmc_rt.h"
#include "llmc_rt_internal.h"
#include "llmc_threads.h"
#include "npu_options.h"
#include "tools/roofline.h"
#include "tools/text_ids.h"

static const char eval_help[] =
    "usage: llmc eval PLAN (--text FILE | --ids FILE) [--context N] [--stride N] [--threads N]\n"
    "                 [--hugepages]\n"
    "\n"
    "Prints the perplexity of the text (or token sequence) in FILE under the plan's model,\n"
    "the number of tokens scored and the tokens per second of the windows' prefills.\n"
    "Windows of N tokens start every S tokens (the last one ends at the last token);\n"
    "each is run from position 0 and scores only the tokens no earlier window scored,\n"
    "each from the logits of the position before it: exp(mean negative log-likelihood).\n"
    "\n"
    "options:\n"
    "  --text FILE     UTF-8 text, tokenized whole by the plan's tokenizer (llmc compile\n"
    "                  --tokenizer) without BOS/EOS, as scripts/ort_eval.js --text does\n"
    "  --ids FILE      token ids separated by commas and/or whitespace\n"
    "  --context N     window length in tokens (default: the plan's max context)\n"
    "  --stride N      tokens between window starts, 1..N (default N/2)\n"
    "  --threads N     threads the runtime may use, the caller included (default 1)\n"
    "  --hugepages     read the plan into 2 MiB pages instead of mapping it (as llmc run\n"
    "                  --hugepages)\n"
    "%s";

typedef struct {
    const char *plan, *ids_file, *text_file;
    uint32_t context, stride, threads; /* 0: not given */
    bool hugepages;                    /* --hugepages */
    llmc_npu_options npu;              /* --delegate: windows prefilled in chunks */
} eval_args;

typedef llmc_id_list id_list;

/* What the windows add up to. */
typedef struct {
    double nll;               /* summed negative log-likelihood (nats) */
    uint64_t scored;          /* tokens scored */
    uint64_t fed;             /* tokens prefilled (all windows) */
    double seconds;           /* time in the prefills */
} eval_totals;

static int parse_positive(const char *text, const char *option, uint32_t *out)
{
    int64_t v = llmc_cli_parse_count(text);
    if (v < 1 || v > UINT32_MAX)
        return llmc_cli_usage("eval", "%s wants an integer >= 1, got '%s'", option, text);
    *out = (uint32_t)v;
    return LLMC_OK;
}

static int parse_args(int argc, char **argv, eval_args *a)
{
    memset(a, 0, sizeof *a);
    a->threads = 1;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool has_value = i + 1 < argc;
        int rc = llmc_npu_parse_option("eval", argc, argv, &i, &a->npu);
        if (rc != 1) {
            if (rc)
                return rc;
            continue;
        }
        rc = LLMC_OK;
        if (!strcmp(arg, "--ids") && has_value)
            a->ids_file = argv[++i];
        else if (!strcmp(arg, "--text") && has_value)
            a->text_file = argv[++i];
        else if (!strcmp(arg, "--context") && has_value)
            rc = parse_positive(argv[++i], arg, &a->context);
        else if (!strcmp(arg, "--stride") && has_value)
            rc = parse_positive(argv[++i], arg, &a->stride);
        else if (!strcmp(arg, "--threads") && has_value)
            rc = llmc_cli_parse_threads("eval", argv[++i], &a->threads);
        else if (!strcmp(arg, "--hugepages"))
            a->hugepages = true;
        else if (arg[0] == '-')
            return llmc_cli_usage("eval", "unknown option or missing value: '%s'", arg);
        else if (!a->plan)
            a->plan = arg;
        else
            return llmc_cli_usage("eval", "unexpected argument '%s'", arg);
        if (rc)
            return rc;
    }
    if (!a->plan)
        return llmc_cli_usage("eval", "missing PLAN");
    if (!a->ids_file == !a->text_file)
        return llmc_cli_usage("eval", "give exactly one of --text FILE or --ids FILE");
    return LLMC_OK;
}

/* The ids must be in the vocabulary, and a window needs two tokens. */
static int check_ids(const id_list *ids, const llmc_rt_plan *plan, const char *path,
                     llmc_error *err)
{
    if (ids->n < 2)
        return llmc_fail(err, LLMC_E_INPUT, "'%s': %zu token ids; perplexity needs at least 2",
                         path, ids->n);
    for (size_t i = 0; i < ids->n; i++)
        if (ids->ids[i] >= rt_plan_of(plan)->vocab_size)
            return llmc_fail(err, LLMC_E_INPUT, "'%s': id %lld (token %zu) is outside the "
                             "vocabulary [0, %u)", path, (long long)ids->ids[i], i,
                             rt_plan_of(plan)->vocab_size);
    return LLMC_OK;
}

/* --context defaults to the plan's max context, --stride to half the window. */
static int resolve_windows(eval_args *a, const llmc_rt_plan *plan, llmc_error *err)
{
    if (!rt_plan_of(plan)->vocab_size)
        return llmc_fail(err, LLMC_E_RUNTIME, "'%s' has no logits output: it is not a "
                         "language model plan", a->plan);
    if (!a->context)
        a->context = rt_plan_of(plan)->max_context;
    if (a->context < 2 || a->context > rt_plan_of(plan)->max_context)
        return llmc_fail(err, LLMC_E_USAGE, "--context %u: the window must hold 2..%u tokens "
                         "(the plan's max context)", a->context, rt_plan_of(plan)->max_context);
    if (!a->stride)
        a->stride = a->context / 2;
    if (a->stride > a->context)
        return llmc_fail(err, LLMC_E_USAGE, "--stride %u is longer than the window (%u): "
                         "tokens between windows would not be scored", a->stride, a->context);
    return LLMC_OK;
}

/* -log softmax(row)[target], in double. */
static double token_nll(const float *row, uint32_t vocab, int64_t target)
{
    float max = row[0];
    for (uint32_t v = 1; v < vocab; v++)
        max = row[v] > max ? row[v] : max;
    double sum = 0.0;
    for (uint32_t v = 0; v < vocab; v++)
        sum += exp((double)row[v] - max);
    return log(sum) + max - row[target];
}

static int runtime_error(llmc_error *err, const char *what, const llmc_rt_error *rt)
{
    return llmc_fail(err, LLMC_E_RUNTIME, "%s: %s", what,
                     rt->msg[0] ? rt->msg : llmc_rt_status_text(rt->code));
}

/* The plan's logits output index. */
static int logits_output(const llmc_rt_plan *plan, uint32_t *index, llmc_error *err)
{
    for (uint32_t i = 0; i < rt_plan_of(plan)->n_outputs; i++) {
        llmc_rt_io io;
        if (llmc_rt_plan_io(plan, 1, i, &io) == LLMC_RT_OK && io.role == LLMC_ROLE_LOGITS) {
            *index = i;
            return LLMC_OK;
        }
    }
    return llmc_fail(err, LLMC_E_RUNTIME, "the plan has no Logits output");
}

/* Scores the targets of logits rows [from, from + rows) of a window
 * starting at token `begin`: row r predicts token begin + r + 1. */
typedef struct {
    const int64_t *ids;
    size_t begin, first, end;
    uint32_t vocab;
    eval_totals *t;
} window_scorer;

static void score_rows(window_scorer *w, size_t from, const float *rows, size_t n)
{
    for (size_t r = 0; r < n; r++) {
        size_t target = w->begin + from + r + 1;
        if (target >= w->first && target < w->end)
            w->t->nll += token_nll(rows + r * w->vocab, w->vocab, w->ids[target]);
    }
}

/* A chunk's logits (llmc_rt_chunked_set_logits). */
static void score_chunk(void *ctx, uint32_t first, const llmc_rt_tensor *logits)
{
    score_rows(ctx, first, logits->data, (size_t)logits->dims[1]);
}

/* --delegate: the window in chunks, each chunk's rows scored as it ends. */
static int score_window_chunked(llmc_npu *npu, llmc_rt_session *s, const int64_t *ids,
                                size_t begin, size_t end, size_t first, eval_totals *t,
                                llmc_error *err)
{
    window_scorer w = {ids, begin, first, end, rt_plan_of(llmc_rt_session_plan(s))->vocab_size, t};
    uint32_t n = (uint32_t)(end - begin);
    llmc_rt_session_reset(s);
    llmc_npu_set_logits(npu, score_chunk, &w);
    double t0 = llmc_seconds_now();
    int rc = llmc_npu_prefill(npu, ids + begin, n, NULL, err);
    t->seconds += llmc_seconds_now() - t0;
    t->fed += n;
    t->scored += end - first;
    return rc;
}

/* Prefills tokens [begin, end) from position 0 and scores targets
 * [first, end), each from the logits row of the position before it. */
static int score_window(llmc_rt_session *s, llmc_npu *npu, uint32_t logits_index,
                        const int64_t *ids, size_t begin, size_t end, size_t first,
                        eval_totals *t, llmc_error *err)
{
    if (npu)
        return score_window_chunked(npu, s, ids, begin, end, first, t, err);
    llmc_rt_error rt = {0};
    llmc_rt_tensor logits;
    uint32_t n = (uint32_t)(end - begin), vocab = rt_plan_of(llmc_rt_session_plan(s))->vocab_size;
    llmc_rt_session_reset(s);
    double t0 = llmc_seconds_now();
    if (llmc_rt_session_feed(s, ids + begin, n, NULL, &rt) != LLMC_RT_OK)
        return runtime_error(err, "prefill", &rt);
    t->seconds += llmc_seconds_now() - t0;
    t->fed += n;
    if (llmc_rt_session_output(s, logits_index, &logits, &rt) != LLMC_RT_OK)
        return runtime_error(err, "logits", &rt);
    if (logits.dtype != LLMC_RT_F32 || logits.rank != 3 || logits.dims[1] != n ||
        logits.dims[2] != vocab)
        return llmc_fail(err, LLMC_E_RUNTIME, "logits are not [1, %u, %u] float32", n, vocab);
    window_scorer w = {ids, begin, first, end, vocab, t};
    score_rows(&w, 0, logits.data, n);
    t->scored += end - first;
    return LLMC_OK;
}

/* Slides the windows over the whole sequence. */
static int score_sequence(llmc_rt_session *s, llmc_npu *npu, uint32_t logits_index,
                          const id_list *ids, const eval_args *a, eval_totals *t,
                          llmc_error *err)
{
    size_t scored_end = 1; /* targets before this one are settled (token 0 never is scored) */
    for (size_t begin = 0; scored_end < ids->n; begin += a->stride) {
        size_t end = begin + a->context < ids->n ? begin + a->context : ids->n;
        /* The window's first token has no logits row before it. */
        size_t first = scored_end > begin ? scored_end : begin + 1;
        int rc = score_window(s, npu, logits_index, ids->ids, begin, end, first, t, err);
        if (rc)
            return rc;
        scored_end = end;
    }
    return LLMC_OK;
}

static int evaluate(const llmc_rt_plan *plan, const eval_args *a, const id_list *ids,
                    llmc_error *err)
{
    uint32_t logits_index = 0;
    int rc = logits_output(plan, &logits_index, err);
    if (rc)
        return rc;
    size_t mem_size = llmc_rt_session_memory_for(plan, a->context);
    void *mem = llmc_alloc_huge(mem_size);
    llmc_threads *pool = a->threads > 1 ? llmc_threads_create(a->threads) : NULL;
    llmc_rt_session s;
    llmc_rt_error rt = {0};
    eval_totals t = {0};
    llmc_npu *npu = NULL;
    if (!mem)
        rc = llmc_fail(err, LLMC_E_NOMEM, "cannot allocate %zu bytes of working memory", mem_size);
    else if (a->threads > 1 && !pool)
        rc = llmc_fail(err, LLMC_E_NOMEM, "cannot start %u threads", a->threads);
    else if (llmc_rt_session_init_for(&s, plan, a->context, mem, mem_size, &rt) != LLMC_RT_OK)
        rc = runtime_error(err, "session", &rt);
    if (!rc) {
        llmc_rt_session_set_parallel(&s, pool ? llmc_threads_parallel : NULL, pool);
        if (a->npu.mode)
            rc = llmc_npu_start(&npu, &s, &a->npu, err);
    }
    if (!rc)
        rc = score_sequence(&s, npu, logits_index, ids, a, &t, err);
    if (!rc)
        printf("perplexity %.4f  nll %.6f  tokens %llu  windows of %u stride %u  "
               "%.1f tok/s (%llu tokens prefilled in %.2f s)\n",
               exp(t.nll / (double)t.scored), t.nll / (double)t.scored,
               (unsigned long long)t.scored, a->context, a->stride,
               (double)t.fed / (t.seconds > 1e-9 ? t.seconds : 1e-9),
               (unsigned long long)t.fed, t.seconds);
    int stop_rc = llmc_npu_stop(npu, err);
    llmc_threads_destroy(pool);
    llmc_free_huge(mem, mem_size);
    return rc ? rc : stop_rc;
}

int llmc_cmd_eval(int argc, char **argv)
{
    if (llmc_cli_wants_help(argc, argv)) {
        printf(eval_help, llmc_npu_help);
        return 0;
    }
    eval_args a;
    int rc = parse_args(argc, argv, &a);
    llmc_error err = {0};
    llmc_mapped_file file = {0};
    llmc_rt_plan plan;
    llmc_rt_error rt = {0};
    id_list ids = {0};
    if (!rc)
        rc = llmc_open_input(a.plan, a.hugepages, &file, &err);
    if (!rc && llmc_rt_plan_open(&plan, file.map, file.size, 0, &rt) != LLMC_RT_OK)
        rc = llmc_fail(&err, LLMC_E_RUNTIME, "'%s': %s", a.plan, rt.msg);
    if (!rc)
        rc = resolve_windows(&a, &plan, &err);
    if (!rc)
        rc = a.text_file ? llmc_encode_text_file(&plan, a.text_file, &ids, &err)
                         : llmc_read_ids(a.ids_file, rt_plan_of(&plan)->vocab_size, &ids,
                                         NULL, &err);
    if (!rc)
        rc = check_ids(&ids, &plan, a.text_file ? a.text_file : a.ids_file, &err);
    if (!rc)
        rc = evaluate(&plan, &a, &ids, &err);
    free(ids.ids);
    llmc_unmap_file(&file);
    if (rc == LLMC_E_USAGE && !err.msg[0])
        return rc;
    return rc ? llmc_cli_report(&err) : 0;
}
