/* llmc tokenize PLAN|tokenizer.json [--add-special] [--ids] [--time]:
 * stdin lines -> comma-separated ids per line (or, with --ids, id lines ->
 * text), with the runtime's encoder and decoder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "llmc_rt.h"
#include "tokenizer/tokenizer_json.h"

typedef struct {
    llmc_mapped_file file;   /* the plan (when given a plan) */
    llmc_rt_plan plan;
    uint8_t *compiled;       /* the compiled tokenizer.json (when given one) */
    size_t compiled_size;
    llmc_rt_tokenizer tok;
} tokenizer_source;

static int is_plan_file(const llmc_mapped_file *f)
{
    return f->size >= 8 && memcmp(f->map + 4, "LLMC", 4) == 0;
}

/* Opens either a plan (its tokenizer section) or a tokenizer.json. */
static int open_source(const char *path, tokenizer_source *src, llmc_error *err)
{
    llmc_rt_error rt_err = {0};
    memset(src, 0, sizeof *src);
    if (llmc_open_input(path, false, &src->file, err)) return err->code;
    llmc_rt_status st;
    if (is_plan_file(&src->file)) {
        st = llmc_rt_plan_open(&src->plan, src->file.map, src->file.size, LLMC_RT_OPEN_ANY_TARGET, &rt_err);
        if (!st) st = llmc_rt_plan_tokenizer(&src->plan, &src->tok, &rt_err);
    } else {
        llmc_unmap_file(&src->file);
        if (llmc_tokenizer_compile(path, &src->compiled, &src->compiled_size, err)) return err->code;
        st = llmc_rt_tokenizer_open(&src->tok, src->compiled, src->compiled_size, &rt_err);
    }
    if (st) return llmc_fail(err, LLMC_E_RUNTIME, "%s: %s", path, rt_err.msg);
    return LLMC_OK;
}

static void close_source(tokenizer_source *src)
{
    llmc_unmap_file(&src->file);
    free(src->compiled);
}

typedef struct {
    char *data;
    size_t size;
} text_buf;

static int read_stdin(text_buf *t, llmc_error *err)
{
    size_t cap = 1 << 16;
    t->data = malloc(cap);
    t->size = 0;
    for (;;) {
        if (!t->data) return llmc_fail(err, LLMC_E_NOMEM, "tokenize: out of memory reading stdin");
        size_t got = fread(t->data + t->size, 1, cap - t->size, stdin);
        t->size += got;
        if (got == 0) break;
        if (t->size == cap) {
            cap *= 2;
            char *grown = realloc(t->data, cap);
            if (!grown) free(t->data);
            t->data = grown;
        }
    }
    return LLMC_OK;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Calls fn on each line of text (split on '\n', the newline excluded; no
 * empty last line for a final newline). */
typedef int (*line_fn)(const llmc_rt_tokenizer *tok, const char *line, size_t len, void *ctx, llmc_error *err);

static int for_each_line(const llmc_rt_tokenizer *tok, const text_buf *t, line_fn fn, void *ctx, llmc_error *err)
{
    size_t start = 0;
    while (start < t->size) {
        const char *nl = memchr(t->data + start, '\n', t->size - start);
        size_t end = nl ? (size_t)(nl - t->data) : t->size;
        if (fn(tok, t->data + start, end - start, ctx, err)) return err->code;
        start = end + 1;
    }
    return LLMC_OK;
}

typedef struct {
    int add_special;
    void *scratch;
    size_t scratch_size;
    int64_t *ids;
    size_t max_ids;
    double busy;
} encode_ctx;

static int encode_line(const llmc_rt_tokenizer *tok, const char *line, size_t len, void *ctx, llmc_error *err)
{
    encode_ctx *c = ctx;
    llmc_rt_error rt_err = {0};
    size_t n = 0;
    double t0 = now_seconds();
    llmc_rt_status st = llmc_rt_tokenizer_encode(tok, line, len, c->add_special, c->scratch, c->scratch_size,
                                                 c->ids, c->max_ids, &n, &rt_err);
    c->busy += now_seconds() - t0;
    if (st) return llmc_fail(err, LLMC_E_RUNTIME, "tokenize: %s", rt_err.msg);
    for (size_t i = 0; i < n; i++) printf(i ? ",%lld" : "%lld", (long long)c->ids[i]);
    putchar('\n');
    return LLMC_OK;
}

static int encode_lines(const llmc_rt_tokenizer *tok, const text_buf *t, int add_special, int timed, llmc_error *err)
{
    size_t longest = 0, start = 0;
    while (start < t->size) {
        const char *nl = memchr(t->data + start, '\n', t->size - start);
        size_t end = nl ? (size_t)(nl - t->data) : t->size;
        if (end - start > longest) longest = end - start;
        start = end + 1;
    }
    encode_ctx c = {add_special, NULL, llmc_rt_tokenizer_scratch(tok, longest), NULL, 4 * longest + 130, 0};
    c.scratch = malloc(c.scratch_size);
    c.ids = malloc(c.max_ids * sizeof *c.ids);
    int rc = c.scratch && c.ids ? for_each_line(tok, t, encode_line, &c, err)
                                : llmc_fail(err, LLMC_E_NOMEM, "tokenize: out of memory for scratch");
    if (!rc && timed) fprintf(stderr, "llmc_mb_per_s=%.2f\n", (double)t->size / 1e6 / (c.busy > 0 ? c.busy : 1e-9));
    free(c.scratch);
    free(c.ids);
    return rc;
}

static int decode_line(const llmc_rt_tokenizer *tok, const char *line, size_t len, void *ctx, llmc_error *err)
{
    char *out = ctx;
    size_t cap = llmc_rt_detok_max_bytes(tok), n;
    llmc_rt_detok d;
    llmc_rt_error rt_err = {0};
    llmc_rt_detok_init(tok, &d);
    for (size_t i = 0; i < len;) {
        char *end;
        long long id = strtoll(line + i, &end, 10);
        if (end == line + i) return llmc_fail(err, LLMC_E_INPUT, "tokenize --ids: \"%.*s\" is not an id list", (int)len, line);
        if (llmc_rt_detok_token(tok, &d, id, out, cap, &n, &rt_err)) return llmc_fail(err, LLMC_E_INPUT, "tokenize --ids: %s", rt_err.msg);
        fwrite(out, 1, n, stdout);
        i = (size_t)(end - line);
        if (i < len && line[i] == ',') i++;
    }
    if (llmc_rt_detok_finish(tok, &d, out, cap, &n, &rt_err)) return llmc_fail(err, LLMC_E_INTERNAL, "%s", rt_err.msg);
    fwrite(out, 1, n, stdout);
    putchar('\n');
    return LLMC_OK;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: llmc tokenize PLAN|tokenizer.json [--add-special] [--ids] [--time]\n"
               "  Reads UTF-8 text on stdin and prints, for each line (without its newline),\n"
               "  its token ids comma-separated.  --add-special adds the tokenizer's BOS/EOS\n"
               "  (its post-processor); --ids reads id lines and prints their text; --time\n"
               "  prints the encode speed (llmc_mb_per_s=X) to stderr.\n");
}

int llmc_cmd_tokenize(int argc, char **argv)
{
    const char *path = NULL;
    int add_special = 0, ids_mode = 0, timed = 0;
    if (llmc_cli_wants_help(argc, argv)) { usage(stdout); return 0; }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--add-special")) add_special = 1;
        else if (!strcmp(argv[i], "--ids")) ids_mode = 1;
        else if (!strcmp(argv[i], "--time")) timed = 1;
        else if (argv[i][0] == '-' || path) return llmc_cli_usage("tokenize", "unexpected argument '%s'", argv[i]);
        else path = argv[i];
    }
    if (!path) return llmc_cli_usage("tokenize", "missing PLAN or tokenizer.json");
    llmc_error err = {0};
    tokenizer_source src;
    text_buf text = {0};
    int rc = open_source(path, &src, &err);
    if (!rc) rc = read_stdin(&text, &err);
    if (!rc && ids_mode) {
        char *out = malloc(llmc_rt_detok_max_bytes(&src.tok));
        rc = out ? for_each_line(&src.tok, &text, decode_line, out, &err) : llmc_fail(&err, LLMC_E_NOMEM, "out of memory");
        free(out);
    } else if (!rc) rc = encode_lines(&src.tok, &text, add_special, timed, &err);
    free(text.data);
    close_source(&src);
    if (fflush(stdout) && !rc) rc = llmc_fail(&err, LLMC_E_OUTPUT, "tokenize: cannot write stdout");
    return rc ? llmc_cli_report(&err) : 0;
}
