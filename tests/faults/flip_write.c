/* LD_PRELOAD fault injection: a write(2) that flips one byte of a file on
 * its way to disk, as a failing disk or a bug between the plan writer and
 * the file would.  LLMC_FLIP_PATH_PART picks the files (those whose path
 * contains it), LLMC_FLIP_OFFSET the byte offset within them.  Used by
 * tests/t_bad_input.sh to show that `llmc compile` reads its plan back
 * through the runtime verifier before renaming it into place. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void *, size_t);

static int fd_path_contains(int fd, const char *part)
{
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 0)
        return 0;
    path[n] = '\0';
    return strstr(path, part) != NULL;
}

ssize_t write(int fd, const void *buf, size_t count)
{
    write_fn real = (write_fn)dlsym(RTLD_NEXT, "write");
    const char *part = getenv("LLMC_FLIP_PATH_PART"), *at = getenv("LLMC_FLIP_OFFSET");
    if (!part || !at || count == 0 || !fd_path_contains(fd, part))
        return real(fd, buf, count);
    off_t pos = lseek(fd, 0, SEEK_CUR), target = (off_t)strtoll(at, NULL, 10);
    if (pos < 0 || target < pos || target >= pos + (off_t)count)
        return real(fd, buf, count);
    unsigned char *copy = malloc(count);
    if (!copy)
        return -1;
    memcpy(copy, buf, count);
    copy[target - pos] ^= 0x5a;
    ssize_t w = real(fd, copy, count);
    free(copy);
    return w;
}
