/* Errors: a result code (the CLI's exit code) plus one message that names
 * the file, node, op, tensor or offset that is wrong. */
#ifndef LLMC_DIAG_H
#define LLMC_DIAG_H

#include <stdarg.h>

typedef enum {
    LLMC_OK = 0,
    LLMC_E_INTERNAL = 1,     /* a bug in llmc */
    LLMC_E_USAGE = 2,        /* CLI misuse */
    LLMC_E_INPUT = 3,        /* unreadable / truncated / malformed input file */
    LLMC_E_UNSUPPORTED = 4,  /* valid ONNX that llmc cannot compile (ops, opsets, dims) */
    LLMC_E_OUTPUT = 5,       /* output path cannot be written */
    LLMC_E_RUNTIME = 6,      /* plan rejected by the runtime, or execution failed */
    LLMC_E_MISMATCH = 7,     /* check-onnx: outputs differ from the reference */
    LLMC_E_NOMEM = 8,        /* out of memory */
} llmc_status;

typedef struct {
    int code;                /* llmc_status */
    char msg[4096];
} llmc_error;

/* Records the first error (later calls append "; ..." while room remains)
 * and returns `code`, so callers can write `return llmc_fail(err, ...)`. */
int llmc_fail(llmc_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *llmc_status_name(int code);

#endif
