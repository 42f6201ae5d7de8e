/* What the pass pipeline records after each pass: the plan keeps the table
 * (llmc inspect prints it) and `llmc compile` reports it. */
#ifndef LLMC_PASS_RECORD_H
#define LLMC_PASS_RECORD_H

#include <stdint.h>

typedef struct {
    const char *name;
    uint32_t nodes;         /* live nodes after the pass */
    uint64_t digest;        /* XXH64 of the canonical dump after the pass */
    char detail[160];       /* what the pass reports it did ("" if nothing) */
} llmc_pass_record;

#endif
