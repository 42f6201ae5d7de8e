/* tokenizer.json -> compiled tokenizer bytes (see tokenizer_json.h for what
 * is understood and runtime/tokenizer_format.h for the layout). */
#include "tokenizer_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/file_map.h"
#include "support/json.h"
#include "llmc_rt.h"
#include "tokenizer_format.h"

/* The two Split regexes implemented by hand in runtime/tokenizer.c (ByteLevel's
 * own GPT-2 regex is the third). */
static const char QWEN2_REGEX[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char LLAMA3_REGEX[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char META[] = "\xE2\x96\x81";   /* U+2581 */

typedef struct {
    uint32_t start, len;   /* in the piece pool; len UINT32_MAX: no piece */
} piece_ref;

typedef struct {
    const char *name;
    const json_doc *doc;
    llmc_error *err;
    uint32_t model, flags, split, n_ids, unk, bos, eos, n_merges, max_piece;
    uint32_t prefix[64], suffix[64], n_prefix, n_suffix;
    uint8_t *pool;
    size_t pool_len, pool_cap;
    piece_ref *pieces;
    uint16_t *info;
    uint32_t *vhash, vmask;
    uint32_t *mhash, mmask;    /* 4 words per entry */
    uint32_t byte_ids[256];
    uint32_t lengths[256], n_lengths;
    uint32_t first_bytes[8];
    uint8_t byte_of_char[512]; /* byte-level alphabet: code point -> byte */
    uint8_t in_alphabet[512];
} builder;

static int refuse(builder *b, const char *component, const char *what)
{
    return llmc_fail(b->err, LLMC_E_UNSUPPORTED, "%s: %s: %s", b->name, component, what);
}

static const char *str_of(const builder *b, uint32_t node) { return b->doc->strings + b->doc->nodes[node].str; }
static uint32_t member(const builder *b, uint32_t obj, const char *key) { return json_member(b->doc, obj, key); }
static json_kind kind_of(const builder *b, uint32_t node) { return json_kind_of(b->doc, node); }

static int is_true(const builder *b, uint32_t node) { return kind_of(b, node) == JSON_TRUE; }
static int is_empty_or_null(const builder *b, uint32_t node)
{
    return kind_of(b, node) == JSON_NULL || (kind_of(b, node) == JSON_STRING && b->doc->nodes[node].str_len == 0);
}

/* ---- byte-level alphabet (GPT-2's bytes_to_unicode) ---- */

static void build_alphabet(builder *b)
{
    uint32_t extra = 0;
    for (uint32_t byte = 0; byte < 256; byte++) {
        int printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
        uint32_t cp = printable ? byte : 256 + extra++;
        b->byte_of_char[cp] = (uint8_t)byte;
        b->in_alphabet[cp] = 1;
    }
}

/* Decodes one UTF-8 character of s[0, n); 0 length if ill-formed. */
static uint32_t utf8_char(const uint8_t *s, size_t n, size_t *len)
{
    uint8_t c = s[0];
    size_t need = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    *len = 0;
    if (!need || need > n) return 0;
    uint32_t cp = need == 1 ? c : c & (0x7Fu >> need);
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    *len = need;
    return cp;
}

/* ---- piece pool and vocabulary hash ---- */

static int pool_add(builder *b, const uint8_t *s, size_t n, uint32_t *start)
{
    if (b->pool_len + n > b->pool_cap) {
        size_t cap = (b->pool_cap + n) * 2;
        uint8_t *grown = realloc(b->pool, cap);
        if (!grown) return llmc_fail(b->err, LLMC_E_NOMEM, "%s: out of memory for pieces", b->name);
        b->pool = grown;
        b->pool_cap = cap;
    }
    if (b->pool_len + n >= UINT32_MAX) return refuse(b, "vocab", "pieces larger than 4 GiB");
    memcpy(b->pool + b->pool_len, s, n);
    *start = (uint32_t)b->pool_len;
    b->pool_len += n;
    return LLMC_OK;
}

/* The slot holding a piece equal to s, or the empty slot where it goes. */
static uint32_t vhash_slot(const builder *b, const uint8_t *s, size_t n)
{
    uint32_t h = tok_hash_bytes(s, n) & b->vmask;
    for (;; h = (h + 1) & b->vmask) {
        uint32_t id = b->vhash[h];
        if (id == TOK_NONE) return h;
        const piece_ref *p = &b->pieces[id];
        if (p->len == n && !memcmp(b->pool + p->start, s, n)) return h;
    }
}

static uint32_t vocab_find(const builder *b, const uint8_t *s, size_t n)
{
    return b->vhash[vhash_slot(b, s, n)];
}

/* Gives id the piece s (a later piece for the same bytes wins, as in the
 * reference's Map). */
static int set_piece(builder *b, uint32_t id, const uint8_t *s, size_t n, unsigned info)
{
    if (n == 0) return refuse(b, "vocab", "empty piece");
    if (n > UINT16_MAX) return refuse(b, "vocab", "piece longer than 65535 bytes");
    if (b->pieces[id].len != UINT32_MAX && !(info & TOK_ID_ADDED))
        return llmc_fail(b->err, LLMC_E_INPUT, "%s: vocab: id %u given twice", b->name, id);
    uint32_t start = 0;
    if (pool_add(b, s, n, &start)) return b->err->code;
    b->pieces[id] = (piece_ref){start, (uint32_t)n};
    b->info[id] = (uint16_t)(b->info[id] | info | TOK_ID_PRESENT);
    b->vhash[vhash_slot(b, s, n)] = id;
    if (n > b->max_piece) b->max_piece = (uint32_t)n;
    return LLMC_OK;
}

/* A vocab string in the model's form -> the bytes the runtime compares:
 * byte-level pieces map each character back to its byte. */
static int model_bytes(builder *b, const char *s, size_t n, uint8_t *out, size_t *out_n, const char *where)
{
    if (b->model != TOK_MODEL_BYTE_LEVEL) {
        if (n) memcpy(out, s, n); /* an empty piece has no buffer yet; set_piece refuses it */
        *out_n = n;
        return LLMC_OK;
    }
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len;
        uint32_t cp = utf8_char((const uint8_t *)s + i, n - i, &len);
        if (!len || cp >= 512 || !b->in_alphabet[cp])
            return llmc_fail(b->err, LLMC_E_INPUT, "%s: %s: piece \"%.*s\" has a character outside the byte-level alphabet",
                             b->name, where, (int)(n < 40 ? n : 40), s);
        out[o++] = b->byte_of_char[cp];
        i += len;
    }
    *out_n = o;
    return LLMC_OK;
}

static int json_id(builder *b, uint32_t node, const char *where, uint32_t *id)
{
    double v = kind_of(b, node) == JSON_NUMBER ? b->doc->nodes[node].number : -1;
    if (!(v >= 0 && v < TOK_MAX_IDS) || v != (double)(uint32_t)v)
        return llmc_fail(b->err, LLMC_E_INPUT, "%s: %s: id is not an integer in [0, %u)", b->name, where, TOK_MAX_IDS);
    *id = (uint32_t)v;
    return LLMC_OK;
}

/* ---- components ---- */

static int is_replace(const builder *b, uint32_t n, const char *from, const char *to)
{
    uint32_t pattern = member(b, n, "pattern");
    return json_is_string(b->doc, member(b, n, "type"), "Replace") && json_is_string(b->doc, member(b, pattern, "String"), from)
        && json_is_string(b->doc, member(b, n, "content"), to);
}

static int read_normalizer(builder *b, uint32_t n)
{
    if (kind_of(b, n) == JSON_NULL) return LLMC_OK;
    if (json_is_string(b->doc, member(b, n, "type"), "NFC")) { b->flags |= TOK_F_NFC; return LLMC_OK; }
    if (is_replace(b, n, " ", META)) { b->flags |= TOK_F_SPACE_TO_META; return LLMC_OK; }
    uint32_t list = member(b, n, "normalizers");
    if (json_is_string(b->doc, member(b, n, "type"), "Sequence") && kind_of(b, list) == JSON_ARRAY
        && b->doc->nodes[list].count == 2) {
        uint32_t first = b->doc->nodes[list].first_child, second = b->doc->nodes[first].next;
        if (json_is_string(b->doc, member(b, first, "type"), "Prepend")
            && json_is_string(b->doc, member(b, first, "prepend"), META) && is_replace(b, second, " ", META)) {
            b->flags |= TOK_F_PREPEND_SPACE | TOK_F_SPACE_TO_META;
            return LLMC_OK;
        }
    }
    return refuse(b, "normalizer", "only NFC, Replace(' ' -> U+2581) and Sequence[Prepend(U+2581), Replace] are supported");
}

/* ByteLevel after a Split (alone_ 0) must not split again; alone, its
 * use_regex (default true) is the GPT-2 split. */
static int read_byte_level_pre(builder *b, uint32_t n, int alone)
{
    if (is_true(b, member(b, n, "add_prefix_space"))) return refuse(b, "pre_tokenizer ByteLevel", "add_prefix_space true is not supported");
    int regex = kind_of(b, member(b, n, "use_regex")) != JSON_FALSE;
    if (regex && !alone)
        return refuse(b, "pre_tokenizer ByteLevel", "use_regex must be false after a Split");
    if (regex)
        b->split = TOK_SPLIT_GPT2;
    return LLMC_OK;
}

static int read_regex_split(builder *b, uint32_t n)
{
    const char *ctx = "pre_tokenizer Split";
    if (!json_is_string(b->doc, member(b, n, "type"), "Split")) return refuse(b, "pre_tokenizer", "expected Split then ByteLevel");
    if (!json_is_string(b->doc, member(b, n, "behavior"), "Isolated") || is_true(b, member(b, n, "invert")))
        return refuse(b, ctx, "only behavior Isolated without invert is supported");
    uint32_t regex = member(b, member(b, n, "pattern"), "Regex");
    if (json_is_string(b->doc, regex, QWEN2_REGEX)) b->split = TOK_SPLIT_QWEN2;
    else if (json_is_string(b->doc, regex, LLAMA3_REGEX)) b->split = TOK_SPLIT_LLAMA3;
    else return refuse(b, ctx, "unknown regex (only the Qwen2 and Llama 3 patterns are implemented)");
    return LLMC_OK;
}

static int read_pre_tokenizer(builder *b, uint32_t n)
{
    b->model = TOK_MODEL_SENTENCEPIECE;
    if (kind_of(b, n) == JSON_NULL) return LLMC_OK;
    uint32_t type = member(b, n, "type");
    if (json_is_string(b->doc, type, "Split")) {
        /* After Replace(' ' -> U+2581) no ' ' is left: this split never cuts. */
        if (json_is_string(b->doc, member(b, member(b, n, "pattern"), "String"), " ")
            && json_is_string(b->doc, member(b, n, "behavior"), "MergedWithPrevious")
            && !is_true(b, member(b, n, "invert")) && (b->flags & TOK_F_SPACE_TO_META))
            return LLMC_OK;
        return refuse(b, "pre_tokenizer Split", "only Split(' ', MergedWithPrevious) after Replace(' ' -> U+2581) is supported");
    }
    uint32_t list = member(b, n, "pretokenizers");
    if (json_is_string(b->doc, type, "ByteLevel")) {
        b->model = TOK_MODEL_BYTE_LEVEL;
        return read_byte_level_pre(b, n, 1);
    }
    if (!json_is_string(b->doc, type, "Sequence") || kind_of(b, list) != JSON_ARRAY || b->doc->nodes[list].count != 2)
        return refuse(b, "pre_tokenizer", "only Sequence[Split(regex), ByteLevel], Split(' ') and null are supported");
    uint32_t first = b->doc->nodes[list].first_child, second = b->doc->nodes[first].next;
    if (read_regex_split(b, first)) return b->err->code;
    if (!json_is_string(b->doc, member(b, second, "type"), "ByteLevel"))
        return refuse(b, "pre_tokenizer", "expected ByteLevel after the Split");
    b->model = TOK_MODEL_BYTE_LEVEL;
    return read_byte_level_pre(b, second, 0);
}

static int read_decoder(builder *b, uint32_t n)
{
    if (b->model == TOK_MODEL_BYTE_LEVEL) {
        if (json_is_string(b->doc, member(b, n, "type"), "ByteLevel")) return LLMC_OK;
        return refuse(b, "decoder", "a byte-level model needs the ByteLevel decoder");
    }
    static const char *const expected[] = {"Replace", "ByteFallback", "Fuse", "Strip"};
    uint32_t list = member(b, n, "decoders"), i = 0;
    if (!json_is_string(b->doc, member(b, n, "type"), "Sequence") || kind_of(b, list) != JSON_ARRAY)
        return refuse(b, "decoder", "expected Sequence[Replace(U+2581 -> ' '), ByteFallback, Fuse(, Strip)]");
    for (uint32_t d = b->doc->nodes[list].first_child; d != JSON_NONE; d = b->doc->nodes[d].next, i++) {
        if (i >= 4 || !json_is_string(b->doc, member(b, d, "type"), expected[i]))
            return refuse(b, "decoder", "expected Sequence[Replace(U+2581 -> ' '), ByteFallback, Fuse(, Strip)]");
        if (i == 0 && !is_replace(b, d, META, " ")) return refuse(b, "decoder Replace", "only U+2581 -> ' ' is supported");
        if (i == 3) {
            uint32_t start = member(b, d, "start"), stop = member(b, d, "stop");
            if (!json_is_string(b->doc, member(b, d, "content"), " ") || kind_of(b, start) != JSON_NUMBER
                || b->doc->nodes[start].number != 1 || kind_of(b, stop) != JSON_NUMBER || b->doc->nodes[stop].number != 0)
                return refuse(b, "decoder Strip", "only Strip(' ', start=1, stop=0) is supported");
            b->flags |= TOK_F_STRIP_SPACE;
        }
    }
    return i >= 3 ? LLMC_OK : refuse(b, "decoder", "expected Sequence[Replace(U+2581 -> ' '), ByteFallback, Fuse(, Strip)]");
}

static int read_model_options(builder *b, uint32_t model)
{
    if (!json_is_string(b->doc, member(b, model, "type"), "BPE")) return refuse(b, "model", "only BPE models are supported");
    if (kind_of(b, member(b, model, "dropout")) != JSON_NULL) return refuse(b, "model", "dropout is not supported");
    if (!is_empty_or_null(b, member(b, model, "continuing_subword_prefix"))
        || !is_empty_or_null(b, member(b, model, "end_of_word_suffix")))
        return refuse(b, "model", "continuing_subword_prefix / end_of_word_suffix are not supported");
    if (is_true(b, member(b, model, "byte_fallback"))) b->flags |= TOK_F_BYTE_FALLBACK;
    if (is_true(b, member(b, model, "fuse_unk"))) b->flags |= TOK_F_FUSE_UNK;
    if (is_true(b, member(b, model, "ignore_merges"))) b->flags |= TOK_F_IGNORE_MERGES;
    if (kind_of(b, member(b, model, "vocab")) != JSON_OBJECT) return refuse(b, "model", "vocab must be an object");
    if (kind_of(b, member(b, model, "merges")) != JSON_ARRAY) return refuse(b, "model", "merges must be an array");
    return LLMC_OK;
}

/* ---- vocabulary, added tokens, merges ---- */

static int count_ids(builder *b, uint32_t vocab, uint32_t added)
{
    uint32_t max = 0;
    for (uint32_t v = b->doc->nodes[vocab].first_child; v != JSON_NONE; v = b->doc->nodes[v].next) {
        uint32_t id;
        if (json_id(b, v, "model.vocab", &id)) return b->err->code;
        if (id + 1 > max) max = id + 1;
    }
    for (uint32_t a = kind_of(b, added) == JSON_ARRAY ? b->doc->nodes[added].first_child : JSON_NONE; a != JSON_NONE;
         a = b->doc->nodes[a].next) {
        uint32_t id;
        if (json_id(b, member(b, a, "id"), "added_tokens", &id)) return b->err->code;
        if (id + 1 > max) max = id + 1;
    }
    if (max == 0) return refuse(b, "model", "empty vocabulary");
    b->n_ids = max;
    uint32_t entries = max + 1, size = 1;
    while (size < 2 * entries) size *= 2;
    b->vmask = size - 1;
    b->pieces = malloc((size_t)max * sizeof *b->pieces);
    b->info = calloc(max, sizeof *b->info);
    b->vhash = malloc((size_t)size * sizeof *b->vhash);
    if (!b->pieces || !b->info || !b->vhash) return llmc_fail(b->err, LLMC_E_NOMEM, "%s: out of memory", b->name);
    memset(b->pieces, 0xFF, (size_t)max * sizeof *b->pieces);
    memset(b->vhash, 0xFF, (size_t)size * sizeof *b->vhash);
    return LLMC_OK;
}

/* "<0xAB>": SentencePiece's byte token; *value gets the byte. */
static int byte_token(const char *s, size_t n, unsigned *value)
{
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return 0;
    char hex[3] = {s[3], s[4], 0}, *end;
    if (!strchr("0123456789abcdefABCDEF", hex[0]) || !strchr("0123456789abcdefABCDEF", hex[1]) || !hex[0] || !hex[1]) return 0;
    *value = (unsigned)strtoul(hex, &end, 16);
    return 1;
}

static int read_vocab(builder *b, uint32_t vocab)
{
    uint8_t *tmp = NULL;
    size_t tmp_cap = 0;
    for (uint32_t v = b->doc->nodes[vocab].first_child; v != JSON_NONE; v = b->doc->nodes[v].next) {
        const json_node *node = &b->doc->nodes[v];
        const char *s = b->doc->strings + node->key;
        if (node->key_len > tmp_cap) {
            tmp_cap = node->key_len * 2 + 16;
            uint8_t *grown = realloc(tmp, tmp_cap);
            if (!grown) { free(tmp); return llmc_fail(b->err, LLMC_E_NOMEM, "%s: out of memory", b->name); }
            tmp = grown;
        }
        size_t n;
        uint32_t id = (uint32_t)node->number;
        unsigned value, info = 0;
        if (b->model == TOK_MODEL_SENTENCEPIECE && byte_token(s, node->key_len, &value)) info = TOK_ID_BYTE | value << 8;
        if (model_bytes(b, s, node->key_len, tmp, &n, "model.vocab") || set_piece(b, id, tmp, n, info)) {
            free(tmp);
            return b->err->code;
        }
    }
    free(tmp);
    return LLMC_OK;
}

static int read_added_token(builder *b, uint32_t a, int has_normalizer)
{
    uint32_t content = member(b, a, "content"), id;
    if (json_id(b, member(b, a, "id"), "added_tokens", &id)) return b->err->code;
    if (kind_of(b, content) != JSON_STRING || b->doc->nodes[content].str_len == 0)
        return refuse(b, "added_tokens", "content must be a non-empty string");
    if (is_true(b, member(b, a, "lstrip")) || is_true(b, member(b, a, "rstrip")) || is_true(b, member(b, a, "single_word")))
        return refuse(b, "added_tokens", "lstrip, rstrip and single_word are not supported");
    int special = is_true(b, member(b, a, "special"));
    uint32_t normalized = member(b, a, "normalized");
    int is_normalized = kind_of(b, normalized) == JSON_NULL ? !special : is_true(b, normalized);
    if (is_normalized && has_normalizer)
        return refuse(b, "added_tokens", "normalized added tokens with a normalizer are not supported");
    uint32_t len = b->doc->nodes[content].str_len;
    const uint8_t *s = (const uint8_t *)str_of(b, content);
    if (set_piece(b, id, s, len, TOK_ID_ADDED | (special ? TOK_ID_SPECIAL : 0u))) return b->err->code;
    b->first_bytes[s[0] >> 5] |= 1u << (s[0] & 31);
    uint32_t k = 0;
    while (k < b->n_lengths && b->lengths[k] != len) k++;
    if (k == b->n_lengths) {
        if (b->n_lengths == 256) return refuse(b, "added_tokens", "more than 256 distinct lengths");
        b->lengths[b->n_lengths++] = len;
    }
    return LLMC_OK;
}

static int cmp_desc(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, c = *(const uint32_t *)y;
    return a < c ? 1 : a > c ? -1 : 0;
}

static int read_added(builder *b, uint32_t added, int has_normalizer)
{
    if (kind_of(b, added) == JSON_NULL) return LLMC_OK;
    if (kind_of(b, added) != JSON_ARRAY) return refuse(b, "added_tokens", "must be an array");
    for (uint32_t a = b->doc->nodes[added].first_child; a != JSON_NONE; a = b->doc->nodes[a].next)
        if (read_added_token(b, a, has_normalizer)) return b->err->code;
    qsort(b->lengths, b->n_lengths, sizeof b->lengths[0], cmp_desc);
    return LLMC_OK;
}

/* One merge's two parts: "left right" or ["left", "right"]. */
static int merge_parts(builder *b, uint32_t m, const char **l, size_t *ln, const char **r, size_t *rn)
{
    if (kind_of(b, m) == JSON_STRING) {
        const char *s = str_of(b, m);
        size_t n = b->doc->nodes[m].str_len;
        const char *sp = memchr(s, ' ', n);
        if (!sp) return llmc_fail(b->err, LLMC_E_INPUT, "%s: model.merges: \"%.*s\" has no space", b->name, (int)(n < 40 ? n : 40), s);
        *l = s; *ln = (size_t)(sp - s); *r = sp + 1; *rn = n - *ln - 1;
        return LLMC_OK;
    }
    uint32_t first = kind_of(b, m) == JSON_ARRAY && b->doc->nodes[m].count == 2 ? b->doc->nodes[m].first_child : JSON_NONE;
    uint32_t second = first == JSON_NONE ? JSON_NONE : b->doc->nodes[first].next;
    if (kind_of(b, first) != JSON_STRING || kind_of(b, second) != JSON_STRING)
        return llmc_fail(b->err, LLMC_E_INPUT, "%s: model.merges: an entry is neither \"a b\" nor [a, b]", b->name);
    *l = str_of(b, first); *ln = b->doc->nodes[first].str_len;
    *r = str_of(b, second); *rn = b->doc->nodes[second].str_len;
    return LLMC_OK;
}

static uint32_t merge_slot(const builder *b, uint32_t left, uint32_t right)
{
    uint32_t h = tok_hash_pair(left, right) & b->mmask;
    while (b->mhash[4 * h] != TOK_NONE && (b->mhash[4 * h] != left || b->mhash[4 * h + 1] != right))
        h = (h + 1) & b->mmask;
    return h;
}

static int resolve_merge(builder *b, uint32_t m, uint32_t rank, uint8_t *tmp)
{
    const char *l = NULL, *r = NULL;
    size_t ln = 0, rn = 0, lb, rb;
    if (merge_parts(b, m, &l, &ln, &r, &rn)) return b->err->code;
    /* a byte-level character takes up to 2 UTF-8 bytes for 1 piece byte */
    if (ln > 2 * (size_t)b->max_piece || rn > 2 * (size_t)b->max_piece)
        return llmc_fail(b->err, LLMC_E_INPUT, "%s: model.merges[%u]: a part is longer than every vocab piece", b->name, rank);
    if (model_bytes(b, l, ln, tmp, &lb, "model.merges") || model_bytes(b, r, rn, tmp + lb, &rb, "model.merges"))
        return b->err->code;
    uint32_t left = vocab_find(b, tmp, lb), right = vocab_find(b, tmp + lb, rb), merged = vocab_find(b, tmp, lb + rb);
    if (left == TOK_NONE || right == TOK_NONE || merged == TOK_NONE)
        return llmc_fail(b->err, LLMC_E_INPUT, "%s: model.merges[%u]: \"%.*s\" + \"%.*s\" or their merge is not in the vocab",
                         b->name, rank, (int)(ln < 40 ? ln : 40), l, (int)(rn < 40 ? rn : 40), r);
    uint32_t *e = &b->mhash[4 * merge_slot(b, left, right)];
    e[0] = left; e[1] = right; e[2] = rank; e[3] = merged;   /* a repeated pair: the last rank wins */
    return LLMC_OK;
}

static int read_merges(builder *b, uint32_t merges)
{
    b->n_merges = b->doc->nodes[merges].count;
    uint32_t size = 1;
    while (size < 2 * (b->n_merges + 1)) size *= 2;
    b->mmask = size - 1;
    b->mhash = malloc((size_t)size * 16);
    uint8_t *tmp = malloc(4 * (size_t)b->max_piece + 16);
    if (!b->mhash || !tmp) { free(tmp); return llmc_fail(b->err, LLMC_E_NOMEM, "%s: out of memory for merges", b->name); }
    memset(b->mhash, 0xFF, (size_t)size * 16);
    uint32_t rank = 0;
    for (uint32_t m = b->doc->nodes[merges].first_child; m != JSON_NONE; m = b->doc->nodes[m].next, rank++) {
        if (resolve_merge(b, m, rank, tmp)) { free(tmp); return b->err->code; }
    }
    free(tmp);
    return LLMC_OK;
}

/* ---- post-processor and tokenizer_config.json ---- */

/* The id of a token named by its content (vocab or added token). */
static int id_of_content(builder *b, const char *s, size_t n, const char *where, uint32_t *id)
{
    *id = n ? vocab_find(b, (const uint8_t *)s, n) : TOK_NONE;
    if (*id == TOK_NONE)
        return llmc_fail(b->err, LLMC_E_INPUT, "%s: %s: token \"%.*s\" is not in the vocabulary", b->name, where,
                         (int)(n < 40 ? n : 40), s);
    return LLMC_OK;
}

static int read_template(builder *b, uint32_t single)
{
    const char *ctx = "post_processor TemplateProcessing";
    int seen_a = 0;
    if (kind_of(b, single) != JSON_ARRAY) return refuse(b, ctx, "single must be an array");
    for (uint32_t item = b->doc->nodes[single].first_child; item != JSON_NONE; item = b->doc->nodes[item].next) {
        uint32_t special = member(b, item, "SpecialToken"), seq = member(b, item, "Sequence");
        if (json_is_string(b->doc, member(b, seq, "id"), "A") && !seen_a) { seen_a = 1; continue; }
        uint32_t name = member(b, special, "id"), id;
        if (kind_of(b, name) != JSON_STRING) return refuse(b, ctx, "single may hold special tokens and sequence A only");
        if (id_of_content(b, str_of(b, name), b->doc->nodes[name].str_len, ctx, &id)) return b->err->code;
        uint32_t *count = seen_a ? &b->n_suffix : &b->n_prefix;
        if (*count == 64) return refuse(b, ctx, "more than 64 special tokens");
        (seen_a ? b->suffix : b->prefix)[(*count)++] = id;
    }
    return seen_a ? LLMC_OK : refuse(b, ctx, "single has no sequence A");
}

static int read_post_processor(builder *b, uint32_t n)
{
    if (kind_of(b, n) == JSON_NULL || json_is_string(b->doc, member(b, n, "type"), "ByteLevel")) return LLMC_OK;
    if (json_is_string(b->doc, member(b, n, "type"), "TemplateProcessing")) return read_template(b, member(b, n, "single"));
    return refuse(b, "post_processor", "only ByteLevel, TemplateProcessing and null are supported");
}

/* bos_token / eos_token of tokenizer_config.json: a string or {"content": ...}. */
static int config_token(builder *b, const json_doc *cfg, const char *key, uint32_t *id)
{
    uint32_t n = json_member(cfg, 0, key);
    if (json_kind_of(cfg, n) == JSON_OBJECT) n = json_member(cfg, n, "content");
    if (json_kind_of(cfg, n) != JSON_STRING) return LLMC_OK;
    return id_of_content(b, cfg->strings + cfg->nodes[n].str, cfg->nodes[n].str_len, key, id);
}

static int read_config(builder *b, const uint8_t *text, size_t size)
{
    json_doc cfg;
    if (!text) return LLMC_OK;
    if (json_parse("tokenizer_config.json", text, size, &cfg, b->err)) return b->err->code;
    int rc = config_token(b, &cfg, "bos_token", &b->bos);
    if (!rc) rc = config_token(b, &cfg, "eos_token", &b->eos);
    json_free(&cfg);
    return rc;
}

/* ---- output ---- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} out_buf;

static size_t words_at(out_buf *o, size_t count)
{
    size_t at = o->n;
    o->n += 4 * count;
    return at;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static void put_words(uint8_t *base, size_t at, const uint32_t *v, size_t count)
{
    for (size_t i = 0; i < count; i++) put32(base + at + 4 * i, v[i]);
}

static int assemble(builder *b, uint8_t **out, size_t *size)
{
    size_t pieces_size = 0;
    for (uint32_t i = 0; i < b->n_ids; i++) pieces_size += b->pieces[i].len == UINT32_MAX ? 0 : b->pieces[i].len;
    out_buf o = {NULL, 0, 0};
    uint32_t h[TOK_HEADER_WORDS] = {0};
    words_at(&o, TOK_HEADER_WORDS);
    h[TOK_H_SPECIALS] = (uint32_t)words_at(&o, b->n_prefix + b->n_suffix);
    h[TOK_H_PIECE_OFFSETS] = (uint32_t)words_at(&o, b->n_ids + 1ull);
    h[TOK_H_PIECE_BYTES] = (uint32_t)words_at(&o, (pieces_size + 3) / 4);
    h[TOK_H_ID_INFO] = (uint32_t)words_at(&o, (b->n_ids + 1ull) / 2);
    h[TOK_H_VOCAB_HASH] = (uint32_t)words_at(&o, b->vmask + 1ull);
    h[TOK_H_MERGE_HASH] = (uint32_t)words_at(&o, 4 * (b->mmask + 1ull));
    h[TOK_H_BYTE_IDS] = (uint32_t)words_at(&o, 256);
    h[TOK_H_ADDED_LENGTHS] = (uint32_t)words_at(&o, b->n_lengths);
    h[TOK_H_ADDED_FIRST] = (uint32_t)words_at(&o, 8);
    if (o.n > 0xFFFFFFF0u) return refuse(b, "tokenizer", "compiled form larger than 4 GiB");
    uint8_t *p = calloc(1, o.n);
    if (!p) return llmc_fail(b->err, LLMC_E_NOMEM, "%s: out of memory", b->name);
    h[TOK_H_MAGIC] = TOK_MAGIC; h[TOK_H_VERSION] = TOK_VERSION; h[TOK_H_MODEL] = b->model;
    h[TOK_H_FLAGS] = b->flags; h[TOK_H_SPLIT] = b->split; h[TOK_H_N_IDS] = b->n_ids;
    h[TOK_H_UNK] = b->unk; h[TOK_H_BOS] = b->bos; h[TOK_H_EOS] = b->eos;
    h[TOK_H_N_PREFIX] = b->n_prefix; h[TOK_H_N_SUFFIX] = b->n_suffix;
    h[TOK_H_PIECE_BYTES_SIZE] = (uint32_t)pieces_size; h[TOK_H_VOCAB_MASK] = b->vmask;
    h[TOK_H_MERGE_MASK] = b->mmask; h[TOK_H_N_MERGES] = b->n_merges;
    h[TOK_H_N_ADDED_LENGTHS] = b->n_lengths; h[TOK_H_MAX_PIECE] = b->max_piece; h[TOK_H_TOTAL_SIZE] = (uint32_t)o.n;
    put_words(p, 0, h, TOK_HEADER_WORDS);
    put_words(p, h[TOK_H_SPECIALS], b->prefix, b->n_prefix);
    put_words(p, h[TOK_H_SPECIALS] + 4ull * b->n_prefix, b->suffix, b->n_suffix);
    uint32_t off = 0;
    for (uint32_t i = 0; i < b->n_ids; i++) {
        put32(p + h[TOK_H_PIECE_OFFSETS] + 4ull * i, off);
        if (b->pieces[i].len != UINT32_MAX) {
            memcpy(p + h[TOK_H_PIECE_BYTES] + off, b->pool + b->pieces[i].start, b->pieces[i].len);
            off += b->pieces[i].len;
        }
        p[h[TOK_H_ID_INFO] + 2ull * i] = (uint8_t)b->info[i];
        p[h[TOK_H_ID_INFO] + 2ull * i + 1] = (uint8_t)(b->info[i] >> 8);
    }
    put32(p + h[TOK_H_PIECE_OFFSETS] + 4ull * b->n_ids, off);
    put_words(p, h[TOK_H_VOCAB_HASH], b->vhash, b->vmask + 1ull);
    put_words(p, h[TOK_H_MERGE_HASH], b->mhash, 4 * (b->mmask + 1ull));
    put_words(p, h[TOK_H_BYTE_IDS], b->byte_ids, 256);
    put_words(p, h[TOK_H_ADDED_LENGTHS], b->lengths, b->n_lengths);
    put_words(p, h[TOK_H_ADDED_FIRST], b->first_bytes, 8);
    *out = p;
    *size = o.n;
    return LLMC_OK;
}

static void find_byte_ids(builder *b)
{
    for (unsigned byte = 0; byte < 256; byte++) {
        char name[8];
        uint8_t raw = (uint8_t)byte;
        if (b->model == TOK_MODEL_BYTE_LEVEL) { b->byte_ids[byte] = vocab_find(b, &raw, 1); continue; }
        name[0] = '<'; name[1] = '0'; name[2] = 'x';
        name[3] = "0123456789ABCDEF"[byte >> 4]; name[4] = "0123456789ABCDEF"[byte & 15]; name[5] = '>';
        b->byte_ids[byte] = vocab_find(b, (const uint8_t *)name, 6);
    }
}

static int read_unk(builder *b, uint32_t model)
{
    uint32_t unk = member(b, model, "unk_token");
    if (kind_of(b, unk) == JSON_NULL) return LLMC_OK;
    if (kind_of(b, unk) != JSON_STRING) return refuse(b, "model", "unk_token must be a string");
    return id_of_content(b, str_of(b, unk), b->doc->nodes[unk].str_len, "model.unk_token", &b->unk);
}

static int build(builder *b, const uint8_t *config, size_t config_size, uint8_t **out, size_t *size)
{
    uint32_t root = 0, model = member(b, root, "model"), normalizer = member(b, root, "normalizer");
    if (kind_of(b, root) != JSON_OBJECT) return refuse(b, "tokenizer", "the document is not an object");
    if (kind_of(b, member(b, root, "truncation")) != JSON_NULL || kind_of(b, member(b, root, "padding")) != JSON_NULL)
        return refuse(b, "tokenizer", "truncation and padding are not supported");
    build_alphabet(b);
    int rc = read_normalizer(b, normalizer);
    if (!rc) rc = read_pre_tokenizer(b, member(b, root, "pre_tokenizer"));
    if (!rc) rc = read_decoder(b, member(b, root, "decoder"));
    if (!rc) rc = read_model_options(b, model);
    if (!rc) rc = count_ids(b, member(b, model, "vocab"), member(b, root, "added_tokens"));
    if (!rc) rc = read_vocab(b, member(b, model, "vocab"));
    if (!rc) rc = read_merges(b, member(b, model, "merges"));
    if (!rc) rc = read_added(b, member(b, root, "added_tokens"), kind_of(b, normalizer) != JSON_NULL);
    if (!rc) rc = read_unk(b, model);
    if (!rc) rc = read_post_processor(b, member(b, root, "post_processor"));
    if (!rc) rc = read_config(b, config, config_size);
    if (rc) return rc;
    find_byte_ids(b);
    return assemble(b, out, size);
}

int llmc_tokenizer_compile_text(const char *name, const uint8_t *json, size_t json_size,
                                const uint8_t *config_text, size_t config_size,
                                uint8_t **out, size_t *size, llmc_error *err)
{
    json_doc doc;
    *out = NULL;
    *size = 0;
    if (json_parse(name, json, json_size, &doc, err)) return err->code;
    builder b;
    memset(&b, 0, sizeof b);
    b.name = name;
    b.doc = &doc;
    b.err = err;
    b.unk = b.bos = b.eos = TOK_NONE;
    int rc = build(&b, config_text, config_size, out, size);
    free(b.pool);
    free(b.pieces);
    free(b.info);
    free(b.vhash);
    free(b.mhash);
    json_free(&doc);
    return rc;
}

int llmc_tokenizer_compile(const char *path, uint8_t **out, size_t *size, llmc_error *err)
{
    llmc_mapped_file json = {0}, config = {0};
    int e = llmc_map_file(path, &json);
    if (e) return llmc_fail(err, LLMC_E_INPUT, "%s: cannot read: %s", path, strerror(e));
    /* tokenizer_config.json beside it, when present */
    char config_path[4096];
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path + 1) : 0;
    int have_config = snprintf(config_path, sizeof config_path, "%.*stokenizer_config.json", dir_len, path)
                          < (int)sizeof config_path
                      && llmc_map_file(config_path, &config) == 0;
    int rc = llmc_tokenizer_compile_text(path, json.map, json.size, have_config ? config.map : NULL,
                                         have_config ? config.size : 0, out, size, err);
    llmc_unmap_file(&json);
    if (have_config) llmc_unmap_file(&config);
    return rc;
}
