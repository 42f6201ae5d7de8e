/* Internal: what llmc_rt_tokenizer holds, for tokenizer.c and
 * tokenizer_open.c (and the llmc tools that describe a tokenizer): the
 * verified bytes and the header's fields (tokenizer_format.h). */
#ifndef LLMC_RT_TOKENIZER_STATE_H
#define LLMC_RT_TOKENIZER_STATE_H

#include "llmc_rt.h"

typedef struct {
    const uint8_t *base;
    size_t size;
    uint32_t model, flags, split, n_ids;
    uint32_t unk, bos, eos;             /* ids, UINT32_MAX when absent */
    uint32_t n_prefix, n_suffix, specials;
    uint32_t piece_offsets, piece_bytes, id_info;
    uint32_t vocab_hash, vocab_mask, merge_hash, merge_mask;
    uint32_t byte_ids, added_lengths, n_added_lengths, added_first, max_piece;
} rt_tokenizer;
LLMC_STATIC_ASSERT(tokenizer_fits, sizeof(rt_tokenizer) <= sizeof(llmc_rt_tokenizer));

/* The fields of a tokenizer (NULL for NULL). */
static inline rt_tokenizer *rt_tok(llmc_rt_tokenizer *t)
{
    return t ? (rt_tokenizer *)(void *)t->opaque_ : NULL;
}

static inline const rt_tokenizer *rt_tok_const(const llmc_rt_tokenizer *t)
{
    return t ? (const rt_tokenizer *)(const void *)t->opaque_ : NULL;
}

#endif
