/* Read-only whole-file mappings: models, external data, plans. */
#ifndef LLMC_FILE_MAP_H
#define LLMC_FILE_MAP_H

#include <stdint.h>

/* A whole file mapped read-only; map is NULL for an empty file. */
typedef struct {
    const uint8_t *map;
    uint64_t size;
} llmc_mapped_file;

/* Returns 0 or an errno value (EISDIR/EINVAL for non-regular files). */
int llmc_map_file(const char *path, llmc_mapped_file *f);
void llmc_unmap_file(llmc_mapped_file *f);

#endif
