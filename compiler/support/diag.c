#include "diag.h"

#include <stdio.h>
#include <string.h>

int llmc_fail(llmc_error *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    size_t used = strlen(err->msg);
    if (err->code == LLMC_OK) {
        err->code = code;
        used = 0;
    } else if (used + 3 < sizeof err->msg) {
        memcpy(err->msg + used, "; ", 3);
        used += 2;
    } else {
        return err->code;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + used, sizeof err->msg - used, fmt, ap);
    va_end(ap);
    return err->code;
}

const char *llmc_status_name(int code)
{
    switch (code) {
    case LLMC_OK: return "ok";
    case LLMC_E_INTERNAL: return "internal error";
    case LLMC_E_USAGE: return "usage error";
    case LLMC_E_INPUT: return "bad input";
    case LLMC_E_UNSUPPORTED: return "unsupported model";
    case LLMC_E_OUTPUT: return "cannot write output";
    case LLMC_E_RUNTIME: return "runtime error";
    case LLMC_E_MISMATCH: return "output mismatch";
    case LLMC_E_NOMEM: return "out of memory";
    default: return "unknown error";
    }
}
