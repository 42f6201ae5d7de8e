/* Verifies a compiled tokenizer (runtime/tokenizer_format.h) before any
 * use: every table inside the bytes, every id below n_ids, piece offsets
 * ordered, both hash tables with an empty slot.  After this the encoder
 * and decoder read without further checks. */
#include "llmc_rt.h"

#include <stddef.h>

#include "plan_format.h"
#include "rt_msg.h"
#include "tokenizer_format.h"
#include "tokenizer_state.h"

static uint32_t rd32(const uint8_t *b, size_t pos)
{
    return (uint32_t)b[pos] | (uint32_t)b[pos + 1] << 8 | (uint32_t)b[pos + 2] << 16 | (uint32_t)b[pos + 3] << 24;
}

static llmc_rt_status bad(llmc_rt_error *err, const char *what, int64_t value)
{
    return rt_fail(err, LLMC_RT_E_CORRUPT, "tokenizer: %s (%d)", RT_N(value), RT_S(what));
}

/* [offset, offset + bytes) inside the tokenizer, 4-aligned, past the header. */
static int region_ok(const rt_tokenizer *t, uint32_t offset, uint64_t bytes)
{
    return offset % 4 == 0 && offset >= 4u * TOK_HEADER_WORDS && (uint64_t)offset + bytes <= t->size;
}

static int id_ok(const rt_tokenizer *t, uint32_t id, int none_ok)
{
    return (none_ok && id == TOK_NONE) || id < t->n_ids;
}

static llmc_rt_status check_ids(const rt_tokenizer *t, uint32_t table, uint32_t count, int none_ok,
                                const char *what, llmc_rt_error *err)
{
    if (!region_ok(t, table, 4ull * count)) return bad(err, what, table);
    for (uint32_t i = 0; i < count; i++)
        if (!id_ok(t, rd32(t->base, table + 4ull * i), none_ok)) return bad(err, what, i);
    return LLMC_RT_OK;
}

static llmc_rt_status check_pieces(const rt_tokenizer *t, uint32_t bytes_size, llmc_rt_error *err)
{
    if (!region_ok(t, t->piece_offsets, 4ull * (t->n_ids + 1ull))) return bad(err, "piece offsets outside", t->piece_offsets);
    if (!region_ok(t, t->piece_bytes, bytes_size)) return bad(err, "piece bytes outside", t->piece_bytes);
    if (!region_ok(t, t->id_info, 2ull * t->n_ids)) return bad(err, "id info outside", t->id_info);
    if (t->max_piece > t->size) return bad(err, "longest piece larger than the tokenizer", t->max_piece);
    uint32_t prev = rd32(t->base, t->piece_offsets);
    if (prev != 0) return bad(err, "first piece offset not 0", prev);
    for (uint32_t i = 1; i <= t->n_ids; i++) {
        uint32_t off = rd32(t->base, t->piece_offsets + 4ull * i);
        if (off < prev || off > bytes_size || off - prev > t->max_piece) return bad(err, "piece offset out of order", i);
        prev = off;
    }
    return LLMC_RT_OK;
}

static int pow2_mask(uint32_t mask) { return mask < (1u << 26) && ((mask + 1) & mask) == 0; }

static llmc_rt_status check_vocab_hash(const rt_tokenizer *t, llmc_rt_error *err)
{
    if (!pow2_mask(t->vocab_mask)) return bad(err, "vocab hash size not a power of two", t->vocab_mask);
    llmc_rt_status st = check_ids(t, t->vocab_hash, t->vocab_mask + 1, 1, "vocab hash entry", err);
    if (st) return st;
    for (uint32_t i = 0; i <= t->vocab_mask; i++)
        if (rd32(t->base, t->vocab_hash + 4ull * i) == TOK_NONE) return LLMC_RT_OK;
    return bad(err, "vocab hash has no empty slot", t->vocab_mask);
}

static llmc_rt_status check_merge_hash(const rt_tokenizer *t, uint32_t n_merges, llmc_rt_error *err)
{
    if (!pow2_mask(t->merge_mask)) return bad(err, "merge hash size not a power of two", t->merge_mask);
    if (!region_ok(t, t->merge_hash, 16ull * (t->merge_mask + 1ull))) return bad(err, "merge hash outside", t->merge_hash);
    int empty = 0;
    for (uint32_t i = 0; i <= t->merge_mask; i++) {
        size_t e = t->merge_hash + 16ull * i;
        if (rd32(t->base, e) == TOK_NONE) { empty = 1; continue; }
        if (!id_ok(t, rd32(t->base, e), 0) || !id_ok(t, rd32(t->base, e + 4), 0)
            || rd32(t->base, e + 8) >= n_merges || !id_ok(t, rd32(t->base, e + 12), 0))
            return bad(err, "merge entry", i);
    }
    return empty ? LLMC_RT_OK : bad(err, "merge hash has no empty slot", t->merge_mask);
}

static llmc_rt_status check_added(const rt_tokenizer *t, llmc_rt_error *err)
{
    if (!region_ok(t, t->added_first, 32)) return bad(err, "added first-byte set outside", t->added_first);
    if (!region_ok(t, t->added_lengths, 4ull * t->n_added_lengths)) return bad(err, "added lengths outside", t->added_lengths);
    for (uint32_t i = 0; i < t->n_added_lengths; i++) {
        uint32_t len = rd32(t->base, t->added_lengths + 4ull * i);
        if (len == 0 || len > t->max_piece) return bad(err, "added token length", len);
    }
    return LLMC_RT_OK;
}

/* The header words rt_tokenizer keeps: X(field, TOK_H_ name). */
#define TOK_STATE_FIELDS(X)                                                                  \
    X(model, MODEL) X(flags, FLAGS) X(split, SPLIT) X(n_ids, N_IDS) X(unk, UNK) X(bos, BOS) \
    X(eos, EOS) X(n_prefix, N_PREFIX) X(n_suffix, N_SUFFIX) X(specials, SPECIALS)            \
    X(piece_offsets, PIECE_OFFSETS) X(piece_bytes, PIECE_BYTES) X(id_info, ID_INFO)          \
    X(vocab_hash, VOCAB_HASH) X(vocab_mask, VOCAB_MASK) X(merge_hash, MERGE_HASH)            \
    X(merge_mask, MERGE_MASK) X(byte_ids, BYTE_IDS) X(added_lengths, ADDED_LENGTHS)          \
    X(n_added_lengths, N_ADDED_LENGTHS) X(added_first, ADDED_FIRST) X(max_piece, MAX_PIECE)
LLMC_STATIC_ASSERT(tok_field_offsets_fit_a_byte, sizeof(rt_tokenizer) <= 255);

/* Copies the header words into the fields, as a table read in one loop
 * (one load and store each instead of a call's worth of code per field). */
static void read_header(rt_tokenizer *t)
{
#define TOK_FIELD_(field, name) {TOK_H_##name, offsetof(rt_tokenizer, field)},
    static const struct {
        uint8_t word, offset;
    } fields[] = {TOK_STATE_FIELDS(TOK_FIELD_)};
#undef TOK_FIELD_
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        *(uint32_t *)(void *)((uint8_t *)t + fields[i].offset) = rd32(t->base, 4u * fields[i].word);
}

llmc_rt_status llmc_rt_tokenizer_open(llmc_rt_tokenizer *tokenizer, const void *bytes, size_t size, llmc_rt_error *err)
{
    rt_tokenizer *tok = rt_tok(tokenizer);
    if (!tok || !bytes) return rt_fail(err, LLMC_RT_E_ARG, "tokenizer: null argument", NULL, NULL);
    const uint8_t *b = bytes;
    if (size < 4u * TOK_HEADER_WORDS || size % 4 || size > 0xFFFFFFF0u) return bad(err, "size", (int64_t)size);
    if (rd32(b, 4u * TOK_H_MAGIC) != TOK_MAGIC) return bad(err, "bad magic", rd32(b, 0));
    if (rd32(b, 4u * TOK_H_VERSION) != TOK_VERSION) return bad(err, "unsupported version", rd32(b, 4));
    if (rd32(b, 4u * TOK_H_TOTAL_SIZE) != size) return bad(err, "recorded size differs", rd32(b, 4u * TOK_H_TOTAL_SIZE));
    tok->base = b;
    tok->size = size;
    read_header(tok);
    if (tok->model != TOK_MODEL_BYTE_LEVEL && tok->model != TOK_MODEL_SENTENCEPIECE) return bad(err, "model kind", tok->model);
    if (tok->flags & ~(uint32_t)TOK_F_ALL) return bad(err, "unknown flags", tok->flags);
    if (tok->split > TOK_SPLIT_GPT2) return bad(err, "splitter", tok->split);
    if (tok->n_ids == 0 || tok->n_ids > TOK_MAX_IDS) return bad(err, "id count", tok->n_ids);
    if (!id_ok(tok, tok->unk, 1) || !id_ok(tok, tok->bos, 1) || !id_ok(tok, tok->eos, 1)) return bad(err, "unk/bos/eos id", tok->unk);
    if (tok->n_prefix > 64 || tok->n_suffix > 64) return bad(err, "special id count", tok->n_prefix);
    llmc_rt_status st = check_ids(tok, tok->specials, tok->n_prefix + tok->n_suffix, 0, "special id", err);
    if (!st) st = check_pieces(tok, rd32(b, 4u * TOK_H_PIECE_BYTES_SIZE), err);
    if (!st) st = check_vocab_hash(tok, err);
    if (!st) st = check_merge_hash(tok, rd32(b, 4u * TOK_H_N_MERGES), err);
    if (!st) st = check_ids(tok, tok->byte_ids, 256, 1, "byte id", err);
    if (!st) st = check_added(tok, err);
    return st;
}

/* ---- through a plan (llmc_rt_plan_open verified the segment's tables) ---- */

llmc_rt_status llmc_rt_plan_tokenizer(const llmc_rt_plan *plan, llmc_rt_tokenizer *tokenizer, llmc_rt_error *err)
{
    rt_tokenizer *tok = rt_tok(tokenizer);
    rt_segment_desc s;
    if (!plan || !rt_plan_of(plan)->base || !tok) return rt_fail(err, LLMC_RT_E_ARG, "tokenizer: null argument", NULL, NULL);
    if (rt_plan_of(plan)->tokenizer_segment == UINT32_MAX)
        return rt_fail(err, LLMC_RT_E_ARG, "the plan has no tokenizer (compile with --tokenizer)", NULL, NULL);
    fb_reader r = rt_reader(plan);
    llmc_rt_status st = rt_read_segment(&r, plan, rt_plan_of(plan)->tokenizer_segment, &s, err);
    if (st) return st;
    tok->base = rt_plan_of(plan)->base + s.offset;
    tok->size = (size_t)s.size;
    read_header(tok);
    return LLMC_RT_OK;
}

void llmc_rt_tokenizer_ids(const llmc_rt_tokenizer *tokenizer, uint32_t *n_ids, uint32_t *bos,
                           uint32_t *eos)
{
    const rt_tokenizer *tok = rt_tok_const(tokenizer);
    if (n_ids) *n_ids = tok ? tok->n_ids : 0;
    if (bos) *bos = tok ? tok->bos : UINT32_MAX;
    if (eos) *eos = tok ? tok->eos : UINT32_MAX;
}

size_t llmc_rt_tokenizer_memory(const llmc_rt_plan *plan, size_t text_bytes)
{
    llmc_rt_tokenizer tok;
    return llmc_rt_plan_tokenizer(plan, &tok, NULL) ? 0 : llmc_rt_tokenizer_scratch(&tok, text_bytes);
}

llmc_rt_status llmc_rt_encode(const llmc_rt_plan *plan, const char *text, size_t len, int add_special,
                              void *scratch, size_t scratch_size, int64_t *ids, size_t max_ids, size_t *n_ids,
                              llmc_rt_error *err)
{
    llmc_rt_tokenizer tok;
    if (n_ids) *n_ids = 0;
    llmc_rt_status st = llmc_rt_plan_tokenizer(plan, &tok, err);
    if (st) return st;
    return llmc_rt_tokenizer_encode(&tok, text, len, add_special, scratch, scratch_size, ids, max_ids, n_ids, err);
}
