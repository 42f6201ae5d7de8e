/* tokenizer.json (+ tokenizer_config.json beside it) -> the compiled
 * tokenizer bytes of runtime/tokenizer_format.h.
 *
 * Understood, exactly as Hugging Face files spell them:
 *   model          BPE (byte-level or SentencePiece-style), byte_fallback,
 *                  fuse_unk, ignore_merges, unk_token
 *   normalizer     null | NFC | Replace(' ' -> U+2581)
 *                  | Sequence[Prepend(U+2581), Replace(' ' -> U+2581)]
 *   pre_tokenizer  Sequence[Split(Qwen2 or Llama 3 regex, Isolated),
 *                  ByteLevel(use_regex false, add_prefix_space false)]
 *                  | Split(' ', MergedWithPrevious) after Replace(' ')
 *                  | null
 *   post_processor null | ByteLevel | TemplateProcessing (single: special
 *                  tokens around sequence A)
 *   decoder        ByteLevel | Sequence[Replace(U+2581 -> ' '), ByteFallback,
 *                  Fuse(, Strip(' ', 1, 0))]
 *   added_tokens   special or not; normalized only without a normalizer;
 *                  lstrip/rstrip/single_word refused
 * Anything else is refused with a message naming the component. */
#ifndef LLMC_TOKENIZER_JSON_H
#define LLMC_TOKENIZER_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "support/diag.h"

/* Reads `path` and returns malloc'd bytes (*out, *size) that
 * llmc_rt_tokenizer_open() accepts. */
int llmc_tokenizer_compile(const char *path, uint8_t **out, size_t *size, llmc_error *err);

/* The same from tokenizer.json bytes already in memory (config_text may be
 * NULL): the fuzz target's entry. */
int llmc_tokenizer_compile_text(const char *name, const uint8_t *json, size_t json_size,
                                const uint8_t *config_text, size_t config_size,
                                uint8_t **out, size_t *size, llmc_error *err);

#endif
