/* Error messages without stdio: a tiny formatter over explicit argument
 * arrays (no <stdarg.h> in the runtime core).
 *
 *   return rt_fail(err, LLMC_RT_E_CORRUPT, "tensor %d: dims has %d entries",
 *                  RT_N(index, rank), NULL);
 *
 * Conversions: %d a signed and %u an unsigned 64-bit integer, both taken in
 * order from `nums`; %s a string taken in order from `strs`; %% a percent. */
#ifndef LLMC_RT_MSG_H
#define LLMC_RT_MSG_H

#include <stdbool.h>

#include "llmc_rt.h"

#define RT_N(...) ((const int64_t[]){__VA_ARGS__})
#define RT_S(...) ((const char *const[]){__VA_ARGS__})

/* Sets err (if not NULL) to code + formatted message; returns code. */
llmc_rt_status rt_fail(llmc_rt_error *err, llmc_rt_status code, const char *fmt,
                       const int64_t *nums, const char *const *strs);

/* Prepends formatted context to err->msg (if err is not NULL), so callers
 * can say where a failure reported by a callee happened; returns code. */
llmc_rt_status rt_prefix(llmc_rt_error *err, llmc_rt_status code, const char *fmt,
                         const int64_t *nums, const char *const *strs);

/* The decimal text of v (of (uint64_t)v when is_unsigned) in buf; returns
 * where it starts. */
#define RT_DEC_BYTES 21 /* UINT64_MAX's 20 digits, or a sign and 19, + NUL */
const char *rt_dec_text(int64_t v, bool is_unsigned, char buf[RT_DEC_BYTES]);

#endif
