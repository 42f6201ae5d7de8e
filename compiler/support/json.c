/* JSON reader: recursive descent over the mapped bytes, nodes in one growing
 * array, decoded strings in one buffer no larger than the input. */
#include "json.h"

#include <stdlib.h>
#include <string.h>

#include "unicode.h"

typedef struct {
    const char *name;
    const uint8_t *p, *end, *start;
    json_doc *doc;
    llmc_error *err;
} json_parser;

static int parse_value(json_parser *ps, uint32_t *out, int depth);

static int fail_at(json_parser *ps, const char *what)
{
    return llmc_fail(ps->err, LLMC_E_INPUT, "%s: JSON byte %zu: %s", ps->name,
                     (size_t)(ps->p - ps->start), what);
}

static void skip_space(json_parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int new_node(json_parser *ps, json_kind kind, uint32_t *out)
{
    json_doc *d = ps->doc;
    if (d->n_nodes == d->cap_nodes) {
        uint32_t cap = d->cap_nodes ? d->cap_nodes * 2 : 1024;
        json_node *grown = cap > d->cap_nodes ? realloc(d->nodes, (size_t)cap * sizeof *grown) : NULL;
        if (!grown) return llmc_fail(ps->err, LLMC_E_NOMEM, "%s: out of memory for JSON nodes", ps->name);
        d->nodes = grown;
        d->cap_nodes = cap;
    }
    json_node *n = &d->nodes[d->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->first_child = n->next = JSON_NONE;
    *out = d->n_nodes++;
    return LLMC_OK;
}

static int hex4(json_parser *ps, uint32_t *v)
{
    if (ps->end - ps->p < 4) return fail_at(ps, "truncated \\u escape");
    *v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t c = *ps->p++;
        uint32_t digit = c >= '0' && c <= '9' ? (uint32_t)(c - '0')
                       : c >= 'a' && c <= 'f' ? (uint32_t)(c - 'a' + 10)
                       : c >= 'A' && c <= 'F' ? (uint32_t)(c - 'A' + 10) : 16u;
        if (digit == 16) return fail_at(ps, "bad hex digit in \\u escape");
        *v = *v * 16 + digit;
    }
    return LLMC_OK;
}

/* \u escape after the backslash and 'u': a surrogate pair joins into one
 * code point. */
static int unicode_escape(json_parser *ps, uint32_t *cp)
{
    if (hex4(ps, cp)) return ps->err->code;
    if (*cp >= 0xD800 && *cp < 0xDC00 && ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u') {
        const uint8_t *save = ps->p;
        uint32_t low;
        ps->p += 2;
        if (hex4(ps, &low)) return ps->err->code;
        if (low >= 0xDC00 && low < 0xE000) *cp = 0x10000 + ((*cp - 0xD800) << 10) + (low - 0xDC00);
        else ps->p = save;
    }
    return LLMC_OK;
}

/* Decodes the string at ps->p (after its opening quote) into doc->strings. */
static int parse_string(json_parser *ps, uint32_t *off, uint32_t *len)
{
    json_doc *d = ps->doc;
    char *o = d->strings + d->strings_len;
    char *o0 = o;
    for (;;) {
        if (ps->p >= ps->end) return fail_at(ps, "unterminated string");
        uint8_t c = *ps->p++;
        if (c == '"') break;
        if (c < 0x20) { ps->p--; return fail_at(ps, "control character in string"); }
        if (c != '\\') { *o++ = (char)c; continue; }
        if (ps->p >= ps->end) return fail_at(ps, "unterminated escape");
        c = *ps->p++;
        const char *simple = strchr("\"\\/bfnrt", c);
        if (c && simple) { *o++ = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"]; continue; }
        if (c != 'u') { ps->p--; return fail_at(ps, "unknown escape"); }
        uint32_t cp;
        if (unicode_escape(ps, &cp)) return ps->err->code;
        o += rt_uni_put((uint8_t *)o, cp);
    }
    /* Every escape decodes to no more bytes than it occupies, so the
     * strings buffer (as large as the input) cannot overflow. */
    *off = (uint32_t)d->strings_len;
    *len = (uint32_t)(o - o0);
    d->strings_len += (size_t)(o - o0);
    return LLMC_OK;
}

static int parse_number(json_parser *ps, double *v)
{
    char buf[64];
    size_t n = 0;
    while (ps->p + n < ps->end && n < sizeof buf - 1 && strchr("+-0123456789.eE", ps->p[n]) && ps->p[n])
        n++;
    memcpy(buf, ps->p, n);
    buf[n] = 0;
    char *stop;
    *v = strtod(buf, &stop);
    if (n == 0 || (size_t)(stop - buf) != n) return fail_at(ps, "bad number");
    ps->p += n;
    return LLMC_OK;
}

static int expect_word(json_parser *ps, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, w, n)) return fail_at(ps, "unexpected character");
    ps->p += n;
    return LLMC_OK;
}

/* Appends child to parent's list; *last tracks the list's tail. */
static void link_child(json_doc *d, uint32_t parent, uint32_t child, uint32_t *last)
{
    if (*last == JSON_NONE) d->nodes[parent].first_child = child;
    else d->nodes[*last].next = child;
    *last = child;
    d->nodes[parent].count++;
}

static int parse_container(json_parser *ps, uint32_t self, int is_object, int depth)
{
    uint8_t close = is_object ? '}' : ']';
    uint32_t last = JSON_NONE;
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == close) { ps->p++; return LLMC_OK; }
    for (;;) {
        uint32_t key = 0, key_len = 0, child;
        skip_space(ps);
        if (is_object) {
            if (ps->p >= ps->end || *ps->p != '"') return fail_at(ps, "expected a string key");
            ps->p++;
            if (parse_string(ps, &key, &key_len)) return ps->err->code;
            skip_space(ps);
            if (ps->p >= ps->end || *ps->p != ':') return fail_at(ps, "expected ':'");
            ps->p++;
        }
        if (parse_value(ps, &child, depth + 1)) return ps->err->code;
        ps->doc->nodes[child].key = key;
        ps->doc->nodes[child].key_len = key_len;
        link_child(ps->doc, self, child, &last);
        skip_space(ps);
        if (ps->p >= ps->end) return fail_at(ps, "unterminated array or object");
        uint8_t c = *ps->p++;
        if (c == close) return LLMC_OK;
        if (c != ',') { ps->p--; return fail_at(ps, "expected ',' or a closing bracket"); }
    }
}

static int parse_value(json_parser *ps, uint32_t *out, int depth)
{
    if (depth > JSON_MAX_DEPTH) return fail_at(ps, "nesting deeper than 64 levels");
    skip_space(ps);
    if (ps->p >= ps->end) return fail_at(ps, "expected a value");
    uint8_t c = *ps->p;
    json_kind kind = c == '{' ? JSON_OBJECT : c == '[' ? JSON_ARRAY : c == '"' ? JSON_STRING
                   : c == 't' ? JSON_TRUE : c == 'f' ? JSON_FALSE : c == 'n' ? JSON_NULL : JSON_NUMBER;
    if (new_node(ps, kind, out)) return ps->err->code;
    uint32_t self = *out;
    switch (kind) {
    case JSON_OBJECT:
    case JSON_ARRAY:
        ps->p++;
        return parse_container(ps, self, kind == JSON_OBJECT, depth);
    case JSON_STRING: {
        uint32_t off, len;
        ps->p++;
        if (parse_string(ps, &off, &len)) return ps->err->code;
        ps->doc->nodes[self].str = off;
        ps->doc->nodes[self].str_len = len;
        return LLMC_OK;
    }
    case JSON_TRUE: return expect_word(ps, "true");
    case JSON_FALSE: return expect_word(ps, "false");
    case JSON_NULL: return expect_word(ps, "null");
    case JSON_NUMBER: {
        double v;
        if (parse_number(ps, &v)) return ps->err->code;
        ps->doc->nodes[self].number = v;
        return LLMC_OK;
    }
    }
    return fail_at(ps, "unexpected character");
}

int json_parse(const char *name, const uint8_t *text, size_t size, json_doc *doc, llmc_error *err)
{
    memset(doc, 0, sizeof *doc);
    if (size >= UINT32_MAX) return llmc_fail(err, LLMC_E_INPUT, "%s: JSON larger than 4 GiB", name);
    doc->strings = malloc(size + 1);
    if (!doc->strings) return llmc_fail(err, LLMC_E_NOMEM, "%s: out of memory for JSON strings", name);
    json_parser ps = {name, text, text + size, text, doc, err};
    uint32_t root;
    int rc = parse_value(&ps, &root, 0);
    if (!rc) {
        skip_space(&ps);
        if (ps.p != ps.end) rc = fail_at(&ps, "trailing bytes after the JSON value");
    }
    if (rc) json_free(doc);
    return rc;
}

void json_free(json_doc *doc)
{
    free(doc->nodes);
    free(doc->strings);
    memset(doc, 0, sizeof *doc);
}

json_kind json_kind_of(const json_doc *doc, uint32_t i)
{
    return i == JSON_NONE ? JSON_NULL : (json_kind)doc->nodes[i].kind;
}

uint32_t json_member(const json_doc *doc, uint32_t obj, const char *key)
{
    if (json_kind_of(doc, obj) != JSON_OBJECT) return JSON_NONE;
    size_t n = strlen(key);
    for (uint32_t c = doc->nodes[obj].first_child; c != JSON_NONE; c = doc->nodes[c].next) {
        const json_node *m = &doc->nodes[c];
        if (m->key_len == n && !memcmp(doc->strings + m->key, key, n)) return c;
    }
    return JSON_NONE;
}

int json_is_string(const json_doc *doc, uint32_t i, const char *s)
{
    if (json_kind_of(doc, i) != JSON_STRING) return 0;
    size_t n = strlen(s);
    return doc->nodes[i].str_len == n && !memcmp(doc->strings + doc->nodes[i].str, s, n);
}
