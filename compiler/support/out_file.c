#include "out_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkstemp creates files 0600; give the output the usual 0666 & ~umask. */
static int set_default_mode(int fd)
{
    mode_t mask = umask(0);
    umask(mask);
    return fchmod(fd, 0666 & ~mask);
}

FILE *llmc_out_create(const char *path, llmc_output *out, llmc_error *err)
{
    size_t n = strlen(path);
    out->path = path;
    out->tmp = malloc(n + sizeof ".tmp.XXXXXX");
    out->file = NULL;
    if (!out->tmp) {
        llmc_fail(err, LLMC_E_NOMEM, "out of memory");
        return NULL;
    }
    memcpy(out->tmp, path, n);
    memcpy(out->tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    int fd = mkstemp(out->tmp);
    if (fd >= 0 && (set_default_mode(fd) != 0 || !(out->file = fdopen(fd, "wb"))))
        close(fd), unlink(out->tmp);
    if (!out->file) {
        llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", path, strerror(errno));
        free(out->tmp);
        out->tmp = NULL;
    }
    return out->file;
}

int llmc_out_finish(llmc_output *out, int rc, llmc_error *err)
{
    if (!out->file)
        return rc;
    int closed = fclose(out->file), error = errno;
    if (!rc && closed != 0)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", out->path, strerror(error));
    if (!rc && rename(out->tmp, out->path) != 0)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", out->path, strerror(errno));
    if (rc)
        unlink(out->tmp);
    free(out->tmp);
    out->file = NULL;
    out->tmp = NULL;
    return rc;
}
