/* Token sequences for the tools (text_ids.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/file_map.h"
#include "text_ids.h"

int llmc_encode_text_file(const llmc_rt_plan *plan, const char *path, llmc_id_list *out,
                          llmc_error *err)
{
    llmc_mapped_file f = {0};
    llmc_rt_error rt = {0};
    size_t scratch_bytes = llmc_rt_tokenizer_memory(plan, 0);
    if (!scratch_bytes)
        return llmc_fail(err, LLMC_E_INPUT, "the plan has no tokenizer (compile it with "
                         "--tokenizer tokenizer.json) for --text '%s'", path);
    int rc = llmc_open_input(path, false, &f, err);
    if (rc)
        return rc;
    scratch_bytes = llmc_rt_tokenizer_memory(plan, f.size);
    void *scratch = malloc(scratch_bytes ? scratch_bytes : 1);
    out->cap = f.size + 1; /* a token covers at least one byte */
    out->ids = malloc(out->cap * sizeof *out->ids);
    if (!scratch || !out->ids)
        rc = llmc_fail(err, LLMC_E_NOMEM, "'%s': cannot hold the tokenizer's %zu bytes of "
                       "scratch", path, scratch_bytes);
    else if (llmc_rt_encode(plan, (const char *)f.map, f.size, 0, scratch, scratch_bytes,
                            out->ids, out->cap, &out->n, &rt) != LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_INPUT, "'%s': %s", path, rt.msg);
    free(scratch);
    llmc_unmap_file(&f);
    return rc;
}

bool llmc_id_list_push(llmc_id_list *l, int64_t id)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4096;
        int64_t *grown = realloc(l->ids, cap * sizeof *grown);
        if (!grown)
            return false;
        l->ids = grown;
        l->cap = cap;
    }
    l->ids[l->n++] = id;
    return true;
}

static bool is_separator(uint8_t c)
{
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Where a byte of the file is, for messages. */
typedef struct {
    const char *path;
    uint64_t line, line_start; /* 1-based line number; offset of its first byte */
} id_cursor;

static int fail_at(const id_cursor *c, uint64_t at, llmc_error *err, const char *what)
{
    return llmc_fail(err, LLMC_E_INPUT, "'%s': line %llu, column %llu (byte %llu): %s", c->path,
                     (unsigned long long)c->line, (unsigned long long)(at - c->line_start + 1),
                     (unsigned long long)at, what);
}

/* A line break closes the line: its id count goes to line_ends if it holds
 * any. */
static int end_line(id_cursor *c, uint64_t at, const llmc_id_list *ids, llmc_id_list *line_ends,
                    llmc_error *err)
{
    size_t before = line_ends && line_ends->n ? (size_t)line_ends->ids[line_ends->n - 1] : 0;
    if (line_ends && ids->n > before && !llmc_id_list_push(line_ends, (int64_t)ids->n))
        return llmc_fail(err, LLMC_E_NOMEM, "'%s': cannot hold %llu lines", c->path,
                         (unsigned long long)c->line);
    c->line++;
    c->line_start = at + 1;
    return LLMC_OK;
}

static int parse_ids(const uint8_t *text, uint64_t size, id_cursor *c, uint32_t vocab,
                     llmc_id_list *ids, llmc_id_list *line_ends, llmc_error *err)
{
    int rc = LLMC_OK;
    uint64_t i = 0;
    while (!rc && i < size) {
        if (is_separator(text[i])) {
            rc = text[i] == '\n' ? end_line(c, i, ids, line_ends, err) : LLMC_OK;
            i++;
            continue;
        }
        uint64_t start = i;
        int64_t v = 0;
        while (i < size && text[i] >= '0' && text[i] <= '9' && v <= (INT64_MAX - 9) / 10)
            v = v * 10 + (text[i++] - '0');
        if (i == start || (i < size && !is_separator(text[i])))
            return fail_at(c, i, err, "expected a token id (digits) or a separator");
        if (vocab && v >= vocab) {
            char what[128];
            snprintf(what, sizeof what, "id %lld (token %zu) is outside the vocabulary [0, %u)",
                     (long long)v, ids->n, vocab);
            return fail_at(c, start, err, what);
        }
        if (!llmc_id_list_push(ids, v))
            return llmc_fail(err, LLMC_E_NOMEM, "'%s': cannot hold %zu ids", c->path, ids->n + 1);
    }
    return rc ? rc : end_line(c, size, ids, line_ends, err); /* the last line may have no \n */
}

int llmc_read_ids(const char *path, uint32_t vocab, llmc_id_list *ids, llmc_id_list *line_ends,
                  llmc_error *err)
{
    llmc_mapped_file f = {0};
    id_cursor c = {path, 1, 0};
    int rc = llmc_open_input(path, false, &f, err);
    if (!rc)
        rc = parse_ids(f.map, f.size, &c, vocab, ids, line_ends, err);
    llmc_unmap_file(&f);
    return rc;
}
