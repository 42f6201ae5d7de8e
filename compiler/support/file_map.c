/* Read-only whole-file mappings (models, external data, plans) and working
 * memory in 2 MiB pages. */
#include "file_map.h"

#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HUGE_PAGE ((size_t)2 << 20)

/* Opens path as a regular file: its descriptor and size, or an errno; an
 * empty file is closed again (*fd -1: nothing to map). */
static int open_regular(const char *path, int *fd, off_t *size)
{
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return errno;
    struct stat st;
    int rc = 0;
    if (fstat(*fd, &st) != 0)
        rc = errno;
    else if (S_ISDIR(st.st_mode))
        rc = EISDIR;
    else if (!S_ISREG(st.st_mode))
        rc = EINVAL;
    *size = st.st_size;
    if (rc || *size == 0) {
        close(*fd);
        *fd = -1;
    }
    return rc;
}

int llmc_map_file(const char *path, llmc_mapped_file *f)
{
    *f = (llmc_mapped_file){0};
    int fd;
    off_t size;
    int rc = open_regular(path, &fd, &size);
    if (rc || fd < 0)
        return rc;
    void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED)
        rc = errno;
    else
        *f = (llmc_mapped_file){m, (uint64_t)size, m, (uint64_t)size};
    close(fd);
    return rc;
}

/* Reads all `size` bytes of fd into dst; 0 or an errno (EIO: the file
 * ended early). */
static int read_all(int fd, uint8_t *dst, size_t size)
{
    for (size_t got = 0; got < size;) {
        ssize_t r = read(fd, dst + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? errno : EIO;
        got += (size_t)r;
    }
    return 0;
}

static size_t whole_huge_pages(size_t bytes)
{
    return (bytes ? (bytes + HUGE_PAGE - 1) / HUGE_PAGE : 1) * HUGE_PAGE;
}

void *llmc_alloc_huge(size_t bytes)
{
    size_t whole = whole_huge_pages(bytes), span = whole + HUGE_PAGE;
    if (whole < bytes || span < whole)
        return NULL;
    uint8_t *region = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED)
        return NULL;
    /* a huge page of slack, trimmed on both sides, to start at a 2 MiB boundary */
    uint8_t *start = (uint8_t *)(((uintptr_t)region + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    size_t head = (size_t)(start - region), tail = span - head - whole;
    if (head)
        munmap(region, head);
    if (tail)
        munmap(start + whole, tail);
    madvise(start, whole, MADV_HUGEPAGE); /* advice: EINVAL without THP is harmless */
    return start;
}

void llmc_free_huge(void *p, size_t bytes)
{
    if (p)
        munmap(p, whole_huge_pages(bytes));
}

int llmc_load_file_huge(const char *path, llmc_mapped_file *f)
{
    *f = (llmc_mapped_file){0};
    int fd;
    off_t size;
    int rc = open_regular(path, &fd, &size);
    if (rc || fd < 0)
        return rc;
    uint8_t *start = llmc_alloc_huge((size_t)size);
    if (!start) {
        close(fd);
        return ENOMEM;
    }
    size_t bytes = whole_huge_pages((size_t)size);
    rc = read_all(fd, start, (size_t)size);
    if (!rc && mprotect(start, bytes, PROT_READ) != 0)
        rc = errno;
    close(fd);
    if (rc) {
        llmc_free_huge(start, (size_t)size);
        return rc;
    }
    *f = (llmc_mapped_file){start, (uint64_t)size, start, (uint64_t)bytes};
    return 0;
}

void llmc_unmap_file(llmc_mapped_file *f)
{
    if (f->mapping)
        munmap(f->mapping, (size_t)f->mapping_bytes);
    *f = (llmc_mapped_file){0};
}

int llmc_open_input(const char *path, bool hugepages, llmc_mapped_file *m, llmc_error *err)
{
    int e = hugepages ? llmc_load_file_huge(path, m) : llmc_map_file(path, m);
    if (e)
        return llmc_fail(err, LLMC_E_INPUT, "cannot open '%s': %s", path, strerror(e));
    if (!m->size)
        return llmc_fail(err, LLMC_E_INPUT, "'%s' is empty", path);
    return LLMC_OK;
}
