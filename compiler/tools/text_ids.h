/* A text file tokenized by a plan's tokenizer (llmc eval --text, llmc
 * compile --calibrate). */
#ifndef LLMC_TEXT_IDS_H
#define LLMC_TEXT_IDS_H

#include <stddef.h>
#include <stdint.h>

#include "support/diag.h"
#include "llmc_rt.h"

/* A token sequence on the heap (free ids). */
typedef struct {
    int64_t *ids;
    size_t n, cap;
} llmc_id_list;

/* The whole text of `path` encoded by the plan's tokenizer, without BOS/EOS,
 * into *out (the host has the memory the runtime's scratch asks for: a few
 * hundred bytes per input byte).  LLMC_E_INPUT when the plan has no
 * tokenizer or the text is refused. */
int llmc_encode_text_file(const llmc_rt_plan *plan, const char *path, llmc_id_list *out,
                          llmc_error *err);

#endif
