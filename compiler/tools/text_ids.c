/* A text file tokenized by a plan's tokenizer (text_ids.h). */
#include <stdlib.h>

#include "support/file_map.h"
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

