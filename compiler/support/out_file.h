/* Output files written atomically: a temporary file next to the target,
 * renamed over it only when everything was written. */
#ifndef LLMC_OUT_FILE_H
#define LLMC_OUT_FILE_H

#include <stdio.h>

#include "diag.h"

/* An output file written atomically: llmc_out_create opens a temporary file
 * next to `path`; llmc_out_finish renames it to `path` if rc is 0 (and the
 * close succeeds), else removes it, so a failure never leaves a partial
 * file.  Both return or record an LLMC_E_OUTPUT error naming `path`. */
typedef struct {
    const char *path;
    char *tmp;
    FILE *file;
} llmc_output;

FILE *llmc_out_create(const char *path, llmc_output *out, llmc_error *err);
int llmc_out_finish(llmc_output *out, int rc, llmc_error *err);


#endif
