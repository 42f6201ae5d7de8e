/* Read-only whole-file mappings (models, external data, plans) and working
 * memory in 2 MiB pages. */
#ifndef LLMC_FILE_MAP_H
#define LLMC_FILE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"

/* A whole file mapped read-only; map is NULL for an empty file. */
typedef struct {
    const uint8_t *map;
    uint64_t size;
    void *mapping;          /* what munmap takes: map itself, or the huge-page */
    uint64_t mapping_bytes; /* region that holds it */
} llmc_mapped_file;

/* Returns 0 or an errno value (EISDIR/EINVAL for non-regular files). */
int llmc_map_file(const char *path, llmc_mapped_file *f);
/* The file read into private anonymous memory at a 2 MiB boundary, marked
 * MADV_HUGEPAGE before it is filled and read-only after: the same bytes as
 * llmc_map_file, reached through 2 MiB pages where the kernel has them
 * (fewer TLB misses over a big plan; under shadow paging, as on some VMs, a
 * 4 KiB-mapped 2.5 GB plan streams at a fraction of the bandwidth).  The
 * file's page cache is not needed afterwards. */
int llmc_load_file_huge(const char *path, llmc_mapped_file *f);
void llmc_unmap_file(llmc_mapped_file *f);

/* A model or plan the user named: llmc_map_file, or with `hugepages`
 * llmc_load_file_huge (run, bench and eval's --hugepages).  An unreadable
 * or empty file is an LLMC_E_INPUT error naming the path. */
int llmc_open_input(const char *path, bool hugepages, llmc_mapped_file *m, llmc_error *err);

/* bytes of zeroed read-write anonymous memory at a 2 MiB boundary, marked
 * MADV_HUGEPAGE (a session's arena: a 512-token prefill writes 311 MB of
 * logits in rows 600 KB apart, one 4 KiB page per store of a tile, and its
 * LM head ran 30% slower through 4 KiB pages); NULL when the kernel has no
 * memory.  Freed by llmc_free_huge with the same size. */
void *llmc_alloc_huge(size_t bytes);
void llmc_free_huge(void *p, size_t bytes);

#endif
