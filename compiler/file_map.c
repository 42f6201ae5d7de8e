/* Read-only whole-file mappings: models, external data, plans. */
#include "file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int llmc_map_file(const char *path, llmc_mapped_file *f)
{
    f->map = NULL;
    f->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = errno;
    else if (S_ISDIR(st.st_mode))
        rc = EISDIR;
    else if (!S_ISREG(st.st_mode))
        rc = EINVAL;
    else if (st.st_size > 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            rc = errno;
        else {
            f->map = m;
            f->size = (uint64_t)st.st_size;
        }
    }
    close(fd);
    return rc;
}

void llmc_unmap_file(llmc_mapped_file *f)
{
    if (f->map)
        munmap((void *)f->map, f->size);
    f->map = NULL;
    f->size = 0;
}
