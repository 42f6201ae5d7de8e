/* Unicode for the tokenizer: UTF-8 reading, the character classes of the
 * pre-tokenizer regexes and NFC.  Tables: build/gen/unicode_tables.h,
 * generated from Debian's unicode-data by scripts/gen_unicode.py. */
#ifndef LLMC_UNICODE_H
#define LLMC_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum { UNI_LETTER = 1, UNI_NUMBER = 2, UNI_SPACE = 4 };

/* UNI_* bits of code point cp (\p{L}, \p{N}, \p{White_Space}). */
unsigned rt_uni_class(uint32_t cp);

/* Decodes the well-formed UTF-8 sequence at p (n > 0 bytes left); *len gets
 * its length.  Input must come from rt_uni_sanitize (no checks here). */
uint32_t rt_uni_next(const uint8_t *p, size_t n, size_t *len);

/* Copies src to dst replacing every ill-formed subsequence by U+FFFD the
 * way the WHATWG UTF-8 decoder (TextDecoder) does: one U+FFFD per maximal
 * subpart.  dst needs 3 * n bytes; returns the bytes written. */
size_t rt_uni_sanitize(const uint8_t *src, size_t n, uint8_t *dst);

/* Writes cp as UTF-8 at p, returns its length (1..4). */
size_t rt_uni_put(uint8_t *p, uint32_t cp);

/* NFC of the well-formed UTF-8 src[0, n) into dst (cap bytes).  cps is
 * scratch for 2 * rt_uni_nfc_cps(n) code points.  Returns the bytes written,
 * or SIZE_MAX if dst is too small. */
size_t rt_uni_nfc(const uint8_t *src, size_t n, uint32_t *cps, uint8_t *dst, size_t cap);
/* Code points NFC's decomposition of n bytes of UTF-8 may produce. */
size_t rt_uni_nfc_cps(size_t n);

#endif
