/* Byte layout of a compiled tokenizer (the plan's tokenizer segment; built
 * by compiler/tokenizer/tokenizer_json.c, read by runtime/tokenizer.c).
 *
 * Little-endian uint32 words throughout, every table 4-byte aligned at an
 * offset from the start of the segment:
 *   header         TOK_HEADER_WORDS words, indexed by the TOK_H_* names
 *   specials       n_prefix then n_suffix ids: what add_special puts around
 *                  the text (the post-processor's TemplateProcessing)
 *   piece_offsets  n_ids + 1 offsets into piece bytes (piece i is
 *                  [off[i], off[i+1]); an empty piece: no token has id i)
 *   piece bytes    byte-level BPE: the raw bytes a token stands for;
 *                  SentencePiece: the UTF-8 piece as written (with U+2581);
 *                  added tokens: their content
 *   id_info        n_ids uint16: TOK_ID_* flags, byte value in the high 8 bits
 *   vocab_hash     (mask + 1) ids, TOK_NONE = empty; open addressing with
 *                  linear probing on tok_hash_bytes() of the piece
 *   merge_hash     (mask + 1) entries of 4 words {left, right, rank, merged};
 *                  left == TOK_NONE: empty; probing on tok_hash_pair()
 *   byte_ids       256 ids: the token of one byte (byte-level: the byte's
 *                  character; SentencePiece: <0xXX>), TOK_NONE if none
 *   added_lengths  the distinct byte lengths of added tokens, longest first
 *   added_first    256-bit set (8 words) of added tokens' first bytes
 * Both hash tables keep at least one empty slot, so a probe ends. */
#ifndef LLMC_TOKENIZER_FORMAT_H
#define LLMC_TOKENIZER_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define TOK_MAGIC 0x4B4F544Cu   /* "LTOK" */
#define TOK_VERSION 1u
#define TOK_NONE 0xFFFFFFFFu
#define TOK_MAX_IDS (1u << 24)

enum {
    TOK_MODEL_BYTE_LEVEL = 1,   /* GPT-2 style byte-level BPE */
    TOK_MODEL_SENTENCEPIECE = 2 /* BPE over characters, U+2581 spaces, byte fallback */
};

/* Pre-tokenizer splitters (recognised regexes, implemented by hand). */
enum {
    TOK_SPLIT_NONE = 0,   /* the whole section is one pre-token */
    TOK_SPLIT_QWEN2 = 1,  /* Qwen2/Qwen3: digits one at a time */
    TOK_SPLIT_LLAMA3 = 2, /* Llama 3: digits in runs of up to three */
    TOK_SPLIT_GPT2 = 3    /* GPT-2: ByteLevel's own regex (use_regex true) */
};

enum {
    TOK_F_NFC = 1u << 0,            /* NFC normalizer */
    TOK_F_PREPEND_SPACE = 1u << 1,  /* normalizer prepends U+2581 */
    TOK_F_SPACE_TO_META = 1u << 2,  /* normalizer replaces ' ' by U+2581 */
    TOK_F_BYTE_FALLBACK = 1u << 3,
    TOK_F_IGNORE_MERGES = 1u << 4,  /* a pre-token in the vocabulary is one token */
    TOK_F_FUSE_UNK = 1u << 5,       /* consecutive unknowns become one */
    TOK_F_STRIP_SPACE = 1u << 6,    /* decoder drops one leading space */
    TOK_F_ALL = (1u << 7) - 1
};

/* id_info flags (low byte). */
enum {
    TOK_ID_PRESENT = 1u << 0,
    TOK_ID_ADDED = 1u << 1,       /* matched before normalization and splitting */
    TOK_ID_SPECIAL = 1u << 2,
    TOK_ID_BYTE = 1u << 3         /* SentencePiece <0xXX>: decodes to one byte */
};

#define TOK_HEADER_LIST(X) \
    X(MAGIC) X(VERSION) X(MODEL) X(FLAGS) X(SPLIT) X(N_IDS) X(UNK) X(BOS) X(EOS) \
    X(N_PREFIX) X(N_SUFFIX) X(SPECIALS) X(PIECE_OFFSETS) X(PIECE_BYTES) X(PIECE_BYTES_SIZE) \
    X(ID_INFO) X(VOCAB_HASH) X(VOCAB_MASK) X(MERGE_HASH) X(MERGE_MASK) X(N_MERGES) \
    X(BYTE_IDS) X(ADDED_LENGTHS) X(N_ADDED_LENGTHS) X(ADDED_FIRST) X(MAX_PIECE) X(TOTAL_SIZE)

enum {
#define TOK_H_ENUM_(name) TOK_H_##name,
    TOK_HEADER_LIST(TOK_H_ENUM_)
#undef TOK_H_ENUM_
    TOK_HEADER_WORDS
};

/* FNV-1a over the bytes: the vocabulary hash of the compiler and runtime. */
static inline uint32_t tok_hash_bytes(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

static inline uint32_t tok_hash_pair(uint32_t left, uint32_t right)
{
    uint32_t h = left * 0x9E3779B1u ^ (right + 0x7F4A7C15u) * 0x85EBCA77u;
    return h ^ (h >> 15);
}

#endif
