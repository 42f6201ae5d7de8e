/* Text <-> token ids with a compiled tokenizer (runtime/tokenizer_format.h).
 *
 * Encoding, in the order Hugging Face tokenizers apply it:
 *   1. ill-formed UTF-8 -> U+FFFD (as TextDecoder reads it);
 *   2. added tokens cut out first: at each position the longest added token
 *      that starts there (the lengths tried are the distinct added lengths,
 *      a constant of the tokenizer, after a first-byte filter);
 *   3. each remaining section: normalizer (NFC, or SentencePiece's U+2581
 *      prepend/replace), pre-tokenizer (the hand-written Qwen2 / Llama 3
 *      regex splitters, or none), BPE per pre-token, unknown characters
 *      through byte fallback or <unk> (fused when the model says so);
 *   4. add_special: the post-processor's ids around the text.
 * BPE keeps one heap entry per symbol (the merge with its right neighbour,
 * keyed by (rank, start)): each merge is O(log n), so a pre-token of n
 * symbols costs O(n log n) whatever its length; no cap is needed.
 * Scratch (llmc_rt_tokenizer_scratch) holds the sanitized text, the
 * normalized section, NFC's code points and the symbols + heap. */
#include "llmc_rt.h"

#include "rt_msg.h"
#include "tokenizer_format.h"
#include "tokenizer_state.h"
#include "unicode.h"

typedef struct {
    uint32_t id;      /* token of this symbol, TOK_NONE if not in the vocabulary */
    uint32_t start, len;
    uint32_t prev, next;
    uint32_t rank;    /* rank of the merge with next, TOK_NONE if none */
    uint32_t merged;  /* the merge's result */
    uint32_t heap_at; /* position in the heap, TOK_NONE if absent */
} bpe_symbol;

typedef struct {
    int64_t *ids;
    size_t max, n;
    int last_unk;     /* the last id of this section was <unk> */
} id_sink;

typedef struct {
    const rt_tokenizer *tok;
    uint8_t *norm;
    size_t norm_cap;
    uint32_t *cps;
    bpe_symbol *sym;
    uint32_t *heap;
    size_t sym_cap;
    id_sink *out;
    llmc_rt_error *err;
} encoder;

static uint32_t word_at(const uint8_t *base, size_t pos)
{
    return (uint32_t)base[pos] | (uint32_t)base[pos + 1] << 8 | (uint32_t)base[pos + 2] << 16
         | (uint32_t)base[pos + 3] << 24;
}

static uint32_t table_word(const rt_tokenizer *t, uint32_t table, size_t i)
{
    return word_at(t->base, table + 4 * i);
}

/* ---- lookups ---- */

static uint32_t piece_start(const rt_tokenizer *t, uint32_t id) { return table_word(t, t->piece_offsets, id); }
static uint32_t piece_len(const rt_tokenizer *t, uint32_t id)
{
    return table_word(t, t->piece_offsets, id + 1) - piece_start(t, id);
}
static unsigned id_info(const rt_tokenizer *t, uint32_t id)
{
    const uint8_t *p = t->base + t->id_info + 2 * (size_t)id;
    return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static uint32_t vocab_lookup(const rt_tokenizer *t, const uint8_t *s, size_t n)
{
    uint32_t mask = t->vocab_mask;
    for (uint32_t h = tok_hash_bytes(s, n) & mask, probes = 0; probes <= mask; h = (h + 1) & mask, probes++) {
        uint32_t id = table_word(t, t->vocab_hash, h);
        if (id == TOK_NONE) return TOK_NONE;
        uint32_t len = piece_len(t, id);
        const uint8_t *piece = t->base + t->piece_bytes + piece_start(t, id);
        size_t k = 0;
        while (k < n && len == n && piece[k] == s[k]) k++;
        if (len == n && k == n) return id;
    }
    return TOK_NONE;
}

static uint32_t merge_lookup(const rt_tokenizer *t, uint32_t left, uint32_t right, uint32_t *merged)
{
    uint32_t mask = t->merge_mask;
    if (left == TOK_NONE || right == TOK_NONE) return TOK_NONE;
    for (uint32_t h = tok_hash_pair(left, right) & mask, probes = 0; probes <= mask; h = (h + 1) & mask, probes++) {
        uint32_t e = t->merge_hash + 16 * h;
        uint32_t l = word_at(t->base, e);
        if (l == TOK_NONE) return TOK_NONE;
        if (l == left && word_at(t->base, e + 4) == right) {
            *merged = word_at(t->base, e + 12);
            return word_at(t->base, e + 8);
        }
    }
    return TOK_NONE;
}

/* ---- output ---- */

static llmc_rt_status emit(encoder *e, uint32_t id)
{
    id_sink *o = e->out;
    int unk = id == e->tok->unk;
    if (unk && o->last_unk && (e->tok->flags & TOK_F_FUSE_UNK)) return LLMC_RT_OK;
    o->last_unk = unk;
    if (o->n == o->max)
        return rt_fail(e->err, LLMC_RT_E_BOUNDS, "encode: more than %u tokens (max_ids)", RT_N((int64_t)o->max), NULL);
    o->ids[o->n++] = id;
    return LLMC_RT_OK;
}

/* A symbol with no token: its bytes' <0xXX> tokens (byte fallback), else
 * <unk>, else nothing (what the reference does without an unk token). */
static llmc_rt_status emit_unknown(encoder *e, const uint8_t *s, size_t n)
{
    const rt_tokenizer *t = e->tok;
    int all_bytes = (t->flags & TOK_F_BYTE_FALLBACK) != 0;
    for (size_t i = 0; i < n && all_bytes; i++) all_bytes = table_word(t, t->byte_ids, s[i]) != TOK_NONE;
    if (all_bytes) {
        for (size_t i = 0; i < n; i++)
            if (emit(e, table_word(t, t->byte_ids, s[i]))) return e->err ? e->err->code : LLMC_RT_E_BOUNDS;
        return LLMC_RT_OK;
    }
    return t->unk != TOK_NONE ? emit(e, t->unk) : LLMC_RT_OK;
}

/* ---- BPE over one pre-token ---- */

static int heap_less(const bpe_symbol *sym, uint32_t a, uint32_t b)
{
    return sym[a].rank < sym[b].rank || (sym[a].rank == sym[b].rank && sym[a].start < sym[b].start);
}

static void heap_place(encoder *e, size_t at, uint32_t s)
{
    e->heap[at] = s;
    e->sym[s].heap_at = (uint32_t)at;
}

static void heap_sift_up(encoder *e, size_t at)
{
    uint32_t s = e->heap[at];
    while (at > 0 && heap_less(e->sym, s, e->heap[(at - 1) / 2])) {
        heap_place(e, at, e->heap[(at - 1) / 2]);
        at = (at - 1) / 2;
    }
    heap_place(e, at, s);
}

static void heap_sift_down(encoder *e, size_t at, size_t n)
{
    uint32_t s = e->heap[at];
    for (;;) {
        size_t c = 2 * at + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_less(e->sym, e->heap[c + 1], e->heap[c])) c++;
        if (!heap_less(e->sym, e->heap[c], s)) break;
        heap_place(e, at, e->heap[c]);
        at = c;
    }
    heap_place(e, at, s);
}

static void heap_remove(encoder *e, uint32_t s, size_t *n)
{
    size_t at = e->sym[s].heap_at;
    if (at == TOK_NONE) return;
    e->sym[s].heap_at = TOK_NONE;
    uint32_t last = e->heap[--*n];
    if (at == *n) return;
    heap_place(e, at, last);
    heap_sift_up(e, at);
    heap_sift_down(e, e->sym[last].heap_at, *n);
}

/* Recomputes symbol s's merge with its right neighbour and its heap place. */
static void refresh_pair(encoder *e, uint32_t s, size_t *n)
{
    bpe_symbol *sym = e->sym;
    heap_remove(e, s, n);
    sym[s].rank = sym[s].next == TOK_NONE ? TOK_NONE
                : merge_lookup(e->tok, sym[s].id, sym[sym[s].next].id, &sym[s].merged);
    if (sym[s].rank == TOK_NONE) return;
    heap_place(e, (*n)++, s);
    heap_sift_up(e, *n - 1);
}

/* Splits the pre-token into its initial symbols: bytes (byte-level BPE) or
 * characters (SentencePiece).  Returns the count. */
static size_t initial_symbols(encoder *e, const uint8_t *w, size_t n)
{
    const rt_tokenizer *t = e->tok;
    size_t count = 0;
    for (size_t i = 0; i < n; count++) {
        size_t len = 1;
        if (t->model == TOK_MODEL_SENTENCEPIECE) (void)rt_uni_next(w + i, n - i, &len);
        bpe_symbol *s = &e->sym[count];
        s->id = t->model == TOK_MODEL_BYTE_LEVEL ? table_word(t, t->byte_ids, w[i]) : vocab_lookup(t, w + i, len);
        s->start = (uint32_t)i;
        s->len = (uint32_t)len;
        s->prev = count ? (uint32_t)count - 1 : TOK_NONE;
        s->next = i + len < n ? (uint32_t)count + 1 : TOK_NONE;
        s->heap_at = TOK_NONE;
        i += len;
    }
    return count;
}

static llmc_rt_status bpe_word(encoder *e, const uint8_t *w, size_t n)
{
    const rt_tokenizer *t = e->tok;
    if (t->flags & TOK_F_IGNORE_MERGES) {
        uint32_t id = vocab_lookup(t, w, n);
        if (id != TOK_NONE && !(id_info(t, id) & TOK_ID_ADDED)) return emit(e, id);
    }
    if (n > e->sym_cap)
        return rt_fail(e->err, LLMC_RT_E_MEMORY, "encode: pre-token of %u bytes exceeds the scratch", RT_N((int64_t)n), NULL);
    bpe_symbol *sym = e->sym;
    size_t count = initial_symbols(e, w, n), heap_n = 0;
    for (size_t i = 0; i < count; i++) refresh_pair(e, (uint32_t)i, &heap_n);
    while (heap_n > 0) {
        uint32_t s = e->heap[0], r = sym[s].next;
        heap_remove(e, s, &heap_n);
        heap_remove(e, r, &heap_n);
        sym[s].id = sym[s].merged;
        sym[s].len += sym[r].len;
        sym[s].next = sym[r].next;
        if (sym[s].next != TOK_NONE) sym[sym[s].next].prev = s;
        refresh_pair(e, s, &heap_n);
        if (sym[s].prev != TOK_NONE) refresh_pair(e, sym[s].prev, &heap_n);
    }
    for (uint32_t s = count ? 0 : TOK_NONE; s != TOK_NONE; s = sym[s].next) {
        llmc_rt_status st = sym[s].id != TOK_NONE ? emit(e, sym[s].id) : emit_unknown(e, w + sym[s].start, sym[s].len);
        if (st) return st;
    }
    return LLMC_RT_OK;
}

/* ---- the Qwen2 / Llama 3 pre-tokenizer regex, by hand ----
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}
 * | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with D = 1 (Qwen2) or 3 (Llama 3); (?i) folds ASCII only, as the
 * reference's translation does.  Returns the end of the match at i. */

typedef struct {
    const uint8_t *s;
    size_t n;
} text_view;

static uint32_t cp_at(text_view v, size_t i, size_t *len) { return rt_uni_next(v.s + i, v.n - i, len); }

static int is_crlf(uint32_t cp) { return cp == '\r' || cp == '\n'; }

/* End of the run of characters from i whose class has any of `bits`
 * (or none of them when `none` is set), at most max characters. */
static size_t run_end(text_view v, size_t i, unsigned bits, int none, size_t max)
{
    for (size_t k = 0; i < v.n && k < max; k++) {
        size_t len;
        unsigned c = rt_uni_class(cp_at(v, i, &len));
        if (none ? (c & bits) != 0 : (c & bits) == 0) break;
        i += len;
    }
    return i;
}

static size_t contraction_end(text_view v, size_t i)
{
    if (v.s[i] != '\'' || i + 1 >= v.n) return 0;
    uint8_t a = v.s[i + 1] | 0x20, b = i + 2 < v.n ? v.s[i + 2] | 0x20 : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
}

static size_t split_next(text_view v, size_t i, size_t max_digits)
{
    size_t len0, len1;
    uint32_t c0 = cp_at(v, i, &len0);
    unsigned k0 = rt_uni_class(c0);
    size_t end = contraction_end(v, i);
    if (end) return end;
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (!(k0 & (UNI_LETTER | UNI_NUMBER)) && !is_crlf(c0) && i + len0 < v.n
        && (rt_uni_class(cp_at(v, i + len0, &len1)) & UNI_LETTER))
        return run_end(v, i + len0, UNI_LETTER, 0, SIZE_MAX);
    if (k0 & UNI_LETTER) return run_end(v, i, UNI_LETTER, 0, SIZE_MAX);
    if (k0 & UNI_NUMBER) return run_end(v, i, UNI_NUMBER, 0, max_digits);
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    const unsigned any = UNI_SPACE | UNI_LETTER | UNI_NUMBER;
    size_t p = c0 == ' ' && i + 1 < v.n && !(rt_uni_class(cp_at(v, i + 1, &len1)) & any) ? i + 1 : i;
    if (!(rt_uni_class(cp_at(v, p, &len1)) & any)) {
        end = run_end(v, p, any, 1, SIZE_MAX);
        while (end < v.n && is_crlf(v.s[end])) end++;
        return end;
    }
    /* c0 is white space: \s*[\r\n]+ | \s+(?!\S) | \s+ */
    size_t last_crlf = SIZE_MAX, last_start = i, count = 0;
    for (end = i; end < v.n; count++) {
        size_t len;
        uint32_t c = cp_at(v, end, &len);
        if (!(rt_uni_class(c) & UNI_SPACE)) break;
        if (is_crlf(c)) last_crlf = end;
        last_start = end;
        end += len;
    }
    if (last_crlf != SIZE_MAX) return last_crlf + 1;
    if (end == v.n || count < 2) return end;
    return last_start;
}

/* ---- the GPT-2 pre-tokenizer regex (ByteLevel, use_regex true), by hand ----
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (contractions case-sensitive).  Returns the end of the match at i. */

static size_t gpt2_contraction_end(text_view v, size_t i)
{
    if (v.s[i] != '\'' || i + 1 >= v.n) return 0;
    uint8_t a = v.s[i + 1], b = i + 2 < v.n ? v.s[i + 2] : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
}

static size_t split_next_gpt2(text_view v, size_t i)
{
    const unsigned any = UNI_SPACE | UNI_LETTER | UNI_NUMBER;
    size_t len, end = gpt2_contraction_end(v, i);
    if (end) return end;
    size_t p = v.s[i] == ' ' && i + 1 < v.n ? i + 1 : i;
    unsigned k = rt_uni_class(cp_at(v, p, &len));
    if (k & UNI_LETTER) return run_end(v, p, UNI_LETTER, 0, SIZE_MAX);
    if (k & UNI_NUMBER) return run_end(v, p, UNI_NUMBER, 0, SIZE_MAX);
    if (!(k & any)) return run_end(v, p, any, 1, SIZE_MAX);
    /* white space at i: \s+(?!\S) leaves the run's last character to the
     * next token when a non-space follows a run of two or more; \s+ else */
    size_t last_start = i, count = 0;
    for (end = i; end < v.n && (rt_uni_class(cp_at(v, end, &len)) & UNI_SPACE); count++) {
        last_start = end;
        end += len;
    }
    return end == v.n || count < 2 ? end : last_start;
}

/* ---- sections ---- */

static llmc_rt_status pre_tokenize(encoder *e, const uint8_t *s, size_t n)
{
    if (e->tok->split == TOK_SPLIT_NONE) return bpe_word(e, s, n);
    text_view v = {s, n};
    size_t max_digits = e->tok->split == TOK_SPLIT_LLAMA3 ? 3 : 1;
    for (size_t i = 0; i < n;) {
        size_t end = e->tok->split == TOK_SPLIT_GPT2 ? split_next_gpt2(v, i)
                                                     : split_next(v, i, max_digits);
        llmc_rt_status st = bpe_word(e, s + i, end - i);
        if (st) return st;
        i = end;
    }
    return LLMC_RT_OK;
}

static const uint8_t META[3] = {0xE2, 0x96, 0x81};   /* U+2581 */

/* SentencePiece's normalizer: U+2581 prepended and/or for every ' '. */
static size_t metaspace(const rt_tokenizer *t, const uint8_t *s, size_t n, uint8_t *out)
{
    size_t o = 0;
    if (t->flags & TOK_F_PREPEND_SPACE)
        for (int k = 0; k < 3; k++) out[o++] = META[k];
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ' && (t->flags & TOK_F_SPACE_TO_META))
            for (int k = 0; k < 3; k++) out[o++] = META[k];
        else out[o++] = s[i];
    }
    return o;
}

static llmc_rt_status encode_section(encoder *e, const uint8_t *s, size_t n)
{
    const rt_tokenizer *t = e->tok;
    e->out->last_unk = 0;
    if (n == 0) return LLMC_RT_OK;
    if (t->flags & TOK_F_NFC) {
        size_t m = rt_uni_nfc(s, n, e->cps, e->norm, e->norm_cap);
        if (m == SIZE_MAX) return rt_fail(e->err, LLMC_RT_E_MEMORY, "encode: NFC output exceeds the scratch", NULL, NULL);
        s = e->norm;
        n = m;
    } else if (t->flags & (TOK_F_PREPEND_SPACE | TOK_F_SPACE_TO_META)) {
        n = metaspace(t, s, n, e->norm);
        s = e->norm;
    }
    return n ? pre_tokenize(e, s, n) : LLMC_RT_OK;
}

/* Length of the longest added token starting at s (0: none); its id in *id. */
static size_t added_at(const rt_tokenizer *t, const uint8_t *s, size_t n, uint32_t *id)
{
    if (!(table_word(t, t->added_first, s[0] >> 5) >> (s[0] & 31) & 1)) return 0;
    for (uint32_t k = 0; k < t->n_added_lengths; k++) {
        uint32_t len = table_word(t, t->added_lengths, k);
        if (len > n) continue;
        uint32_t hit = vocab_lookup(t, s, len);
        if (hit != TOK_NONE && (id_info(t, hit) & TOK_ID_ADDED)) { *id = hit; return len; }
    }
    return 0;
}

/* ---- public API ---- */

/* Scratch pieces, each 8-aligned: sanitized text, normalized text, NFC code
 * points (2 * rt_uni_nfc_cps), symbols and heap (one per normalized byte). */
typedef struct {
    size_t clean, norm, cps, syms, total;
} scratch_plan;

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

static int plan_scratch(const rt_tokenizer *t, size_t text_bytes, scratch_plan *p)
{
    if (text_bytes > ((size_t)1 << 28)) return 0;
    size_t clean = 3 * text_bytes + 4;
    p->clean = align8(clean);
    size_t norm = (t->flags & TOK_F_NFC) ? 4 * clean + 8 : clean + 3 * text_bytes + 8;
    p->norm = align8(norm);
    p->cps = (t->flags & TOK_F_NFC) ? align8(2 * rt_uni_nfc_cps(clean) * sizeof(uint32_t)) : 0;
    p->syms = align8(norm * (sizeof(bpe_symbol) + sizeof(uint32_t)));
    p->total = p->clean + p->norm + p->cps + p->syms + 8;
    return 1;
}

size_t llmc_rt_tokenizer_scratch(const llmc_rt_tokenizer *tokenizer, size_t text_bytes)
{
    const rt_tokenizer *tok = rt_tok_const(tokenizer);
    scratch_plan p;
    return tok && plan_scratch(tok, text_bytes, &p) ? p.total : 0;
}

static llmc_rt_status emit_specials(encoder *e, uint32_t first, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        llmc_rt_status st = emit(e, table_word(e->tok, e->tok->specials, first + i));
        if (st) return st;
    }
    return LLMC_RT_OK;
}

static llmc_rt_status encode_clean(encoder *e, const uint8_t *s, size_t n, int add_special)
{
    const rt_tokenizer *t = e->tok;
    llmc_rt_status st = add_special ? emit_specials(e, 0, t->n_prefix) : LLMC_RT_OK;
    size_t section = 0;
    for (size_t i = 0; i < n && !st;) {
        uint32_t id;
        size_t len = t->n_added_lengths ? added_at(t, s + i, n - i, &id) : 0;
        if (!len) { i++; continue; }
        st = encode_section(e, s + section, i - section);
        if (!st) st = emit(e, id);
        i += len;
        section = i;
    }
    if (!st) st = encode_section(e, s + section, n - section);
    if (!st && add_special) st = emit_specials(e, t->n_prefix, t->n_suffix);
    return st;
}

llmc_rt_status llmc_rt_tokenizer_encode(const llmc_rt_tokenizer *tokenizer, const char *text, size_t len,
                                        int add_special, void *scratch, size_t scratch_size,
                                        int64_t *ids, size_t max_ids, size_t *n_ids, llmc_rt_error *err)
{
    const rt_tokenizer *tok = rt_tok_const(tokenizer);
    scratch_plan p;
    if (n_ids) *n_ids = 0;
    if (!tok || (!text && len) || !n_ids || (!ids && max_ids))
        return rt_fail(err, LLMC_RT_E_ARG, "encode: null argument", NULL, NULL);
    if (!plan_scratch(tok, len, &p) || !scratch || scratch_size < p.total)
        return rt_fail(err, LLMC_RT_E_MEMORY, "encode: scratch smaller than llmc_rt_tokenizer_scratch()", NULL, NULL);
    uint8_t *base = (uint8_t *)scratch + ((8 - (uintptr_t)scratch % 8) % 8);
    id_sink out = {ids, max_ids, 0, 0};
    encoder e = {tok, base + p.clean, p.norm, (uint32_t *)(void *)(base + p.clean + p.norm),
                 (bpe_symbol *)(void *)(base + p.clean + p.norm + p.cps), 0, 0, &out, err};
    e.sym_cap = p.syms / (sizeof(bpe_symbol) + sizeof(uint32_t));
    e.heap = (uint32_t *)(void *)(e.sym + e.sym_cap);
    size_t n = rt_uni_sanitize((const uint8_t *)text, len, base);
    llmc_rt_status st = encode_clean(&e, base, n, add_special);
    *n_ids = out.n;
    return st;
}

/* ---- decoding ---- */

/* What llmc_rt_detok holds. */
typedef struct {
    uint8_t held[4];
    uint32_t n_held, need;
    uint8_t lo, hi;                     /* range of the next continuation byte */
    uint32_t strip_space;               /* a leading ' ' is still to be dropped */
    uint8_t in_byte_run;                /* SentencePiece: the last token was <0xXX> */
    uint8_t bom_check;                  /* the run's first character is still to come */
} rt_detok;
LLMC_STATIC_ASSERT(detok_fits, sizeof(rt_detok) <= sizeof(llmc_rt_detok));

static rt_detok *detok_state(llmc_rt_detok *d)
{
    return (rt_detok *)(void *)d->opaque_;
}

void llmc_rt_detok_init(const llmc_rt_tokenizer *tokenizer, llmc_rt_detok *state)
{
    const rt_tokenizer *tok = rt_tok_const(tokenizer);
    rt_detok *d = detok_state(state);
    d->n_held = d->need = 0;
    d->lo = 0x80;
    d->hi = 0xBF;
    d->strip_space = tok && (tok->flags & TOK_F_STRIP_SPACE) ? 1u : 0u;
    d->in_byte_run = d->bom_check = 0;
}

size_t llmc_rt_detok_max_bytes(const llmc_rt_tokenizer *tokenizer)
{
    const rt_tokenizer *tok = rt_tok_const(tokenizer);
    return tok ? 3 * ((size_t)tok->max_piece + 4) : 0;
}

typedef struct {
    uint8_t *p;
    size_t cap, n;
} byte_sink;

static void put_bytes(rt_detok *d, byte_sink *o, const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (d->strip_space) {
            d->strip_space = 0;
            if (s[i] == ' ') continue;
        }
        if (o->n < o->cap) o->p[o->n++] = s[i];
    }
}

static const uint8_t REPLACEMENT[3] = {0xEF, 0xBF, 0xBD};

/* Held bytes of an incomplete sequence are an error: one U+FFFD. */
static void flush_held(rt_detok *d, byte_sink *o)
{
    if (d->n_held) put_bytes(d, o, REPLACEMENT, 3);
    d->n_held = d->need = 0;
    d->bom_check = 0;
}

/* A complete character of the byte stream.  The reference decodes each run
 * of SentencePiece byte tokens with a default TextDecoder, which drops a
 * U+FEFF (BOM) that starts the run: so does this. */
static void put_char(rt_detok *d, byte_sink *o, const uint8_t *s, size_t n)
{
    int bom = n == 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF;
    if (!(bom && d->bom_check)) put_bytes(d, o, s, n);
    d->bom_check = 0;
}

/* One byte of the UTF-8 stream (the WHATWG decoder's state machine). */
static void stream_byte(rt_detok *d, byte_sink *o, uint8_t b)
{
    if (d->need) {
        if (b >= d->lo && b <= d->hi) {
            d->held[d->n_held++] = b;
            d->lo = 0x80;
            d->hi = 0xBF;
            if (--d->need == 0) { put_char(d, o, d->held, d->n_held); d->n_held = 0; }
            return;
        }
        flush_held(d, o);
    }
    if (b < 0x80) { put_char(d, o, &b, 1); return; }
    d->need = b >= 0xC2 && b <= 0xDF ? 1 : b >= 0xE0 && b <= 0xEF ? 2 : b >= 0xF0 && b <= 0xF4 ? 3 : 0;
    if (!d->need) { put_char(d, o, REPLACEMENT, 3); return; }
    d->lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
    d->hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
    d->held[0] = b;
    d->n_held = 1;
}

/* A SentencePiece piece: U+2581 reads as ' '. */
static void put_piece_text(rt_detok *d, byte_sink *o, const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (n - i >= 3 && s[i] == META[0] && s[i + 1] == META[1] && s[i + 2] == META[2]) {
            put_bytes(d, o, (const uint8_t *)" ", 1);
            i += 3;
        } else put_bytes(d, o, s + i++, 1);
    }
}

llmc_rt_status llmc_rt_detok_token(const llmc_rt_tokenizer *tokenizer, llmc_rt_detok *state, int64_t id,
                                   char *out, size_t cap, size_t *n_out, llmc_rt_error *err)
{
    const rt_tokenizer *tok = rt_tok_const(tokenizer);
    if (n_out) *n_out = 0;
    if (!tok || !state || !n_out || (!out && cap))
        return rt_fail(err, LLMC_RT_E_ARG, "decode: null argument", NULL, NULL);
    if (cap < llmc_rt_detok_max_bytes(tokenizer))
        return rt_fail(err, LLMC_RT_E_MEMORY, "decode: output smaller than llmc_rt_detok_max_bytes()", NULL, NULL);
    if (id < 0 || id >= (int64_t)tok->n_ids || !(id_info(tok, (uint32_t)id) & TOK_ID_PRESENT))
        return rt_fail(err, LLMC_RT_E_ARG, "decode: token id %d is not in the vocabulary", RT_N(id), NULL);
    byte_sink o = {(uint8_t *)out, cap, 0};
    rt_detok *d = detok_state(state);
    unsigned info = id_info(tok, (uint32_t)id);
    const uint8_t *piece = tok->base + tok->piece_bytes + piece_start(tok, (uint32_t)id);
    uint32_t n = piece_len(tok, (uint32_t)id);
    int byte_token = tok->model == TOK_MODEL_SENTENCEPIECE && (info & TOK_ID_BYTE);
    if (byte_token && !d->in_byte_run) d->bom_check = 1;
    d->in_byte_run = (uint8_t)byte_token;
    if (byte_token) stream_byte(d, &o, (uint8_t)(info >> 8));
    else if (tok->model == TOK_MODEL_BYTE_LEVEL && !(info & TOK_ID_ADDED))
        for (uint32_t i = 0; i < n; i++) stream_byte(d, &o, piece[i]);
    else {
        flush_held(d, &o);
        if (tok->model == TOK_MODEL_SENTENCEPIECE) put_piece_text(d, &o, piece, n);
        else put_bytes(d, &o, piece, n);
    }
    *n_out = o.n;
    return LLMC_RT_OK;
}

llmc_rt_status llmc_rt_detok_finish(const llmc_rt_tokenizer *tokenizer, llmc_rt_detok *state, char *out,
                                    size_t cap, size_t *n_out, llmc_rt_error *err)
{
    const rt_tokenizer *tok = rt_tok_const(tokenizer);
    if (n_out) *n_out = 0;
    if (!tok || !state || !n_out || (!out && cap) || cap < 3)
        return rt_fail(err, LLMC_RT_E_ARG, "decode: finish needs 3 bytes of output", NULL, NULL);
    byte_sink o = {(uint8_t *)out, cap, 0};
    flush_held(detok_state(state), &o);
    *n_out = o.n;
    return LLMC_RT_OK;
}
