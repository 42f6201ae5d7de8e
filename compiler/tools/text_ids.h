/* Token sequences for the tools: a text file tokenized by a plan's
 * tokenizer (llmc eval --text, llmc compile --calibrate), or token ids
 * written out in a file (llmc eval --ids, llmc compile --calibrate-ids). */
#ifndef LLMC_TEXT_IDS_H
#define LLMC_TEXT_IDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "support/diag.h"
#include "llmc_rt.h"

/* A token sequence on the heap (free ids). */
typedef struct {
    int64_t *ids;
    size_t n, cap;
} llmc_id_list;

/* Appends id; false when out of memory. */
bool llmc_id_list_push(llmc_id_list *l, int64_t id);

/* The whole text of `path` encoded by the plan's tokenizer, without BOS/EOS,
 * into *out (the host has the memory the runtime's scratch asks for: a few
 * hundred bytes per input byte).  LLMC_E_INPUT when the plan has no
 * tokenizer or the text is refused. */
int llmc_encode_text_file(const llmc_rt_plan *plan, const char *path, llmc_id_list *out,
                          llmc_error *err);

/* The token ids of `path` appended to *ids: decimal ids separated by commas
 * and/or white space.  With `line_ends` (NULL: not wanted), every line that
 * holds ids appends the number of ids read up to its end, so line k's ids
 * are ids[line_ends[k - 1], line_ends[k]).  With vocab > 0 an id >= vocab
 * is refused.  LLMC_E_INPUT for an empty file or anything else than digits
 * and separators; messages name the line and column (and byte offset). */
int llmc_read_ids(const char *path, uint32_t vocab, llmc_id_list *ids, llmc_id_list *line_ends,
                  llmc_error *err);

#endif
