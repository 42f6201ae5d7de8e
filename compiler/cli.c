#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int llmc_cli_report(const llmc_error *err)
{
    fprintf(stderr, "llmc: error: %s\n", err->msg[0] ? err->msg : llmc_status_name(err->code));
    return err->code;
}

int llmc_cli_usage(const char *command, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "llmc %s: ", command);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see 'llmc %s --help')\n", command);
    va_end(ap);
    return LLMC_E_USAGE;
}

int llmc_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

int64_t llmc_cli_parse_count(const char *text)
{
    if (!text || !*text)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (*end || errno || v < 0)
        return -1;
    return v;
}

int llmc_map_file(const char *path, llmc_mapped_file *m, llmc_error *err)
{
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return llmc_fail(err, LLMC_E_INPUT, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return llmc_fail(err, LLMC_E_INPUT, "'%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return llmc_fail(err, LLMC_E_INPUT, "'%s' is empty", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return llmc_fail(err, LLMC_E_INPUT, "cannot map '%s': %s", path, strerror(errno));
    m->data = p;
    m->size = (size_t)st.st_size;
    return LLMC_OK;
}

void llmc_unmap_file(llmc_mapped_file *m)
{
    if (m->data)
        munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}
