#include "out_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How an output file gets its name in llmc_out_finish. */
enum { OUT_LINK, OUT_COPY };

/* Names of temporaries: OUT.tmp.XXXXXX beside an output file, and
 * .NAME.llmc-tmp.XXXXXX for an output directory NAME. */
#define FILE_TMP ".tmp."
#define DIR_TMP ".llmc-tmp."
#define TMP_X "XXXXXX"

static char *concat(const char *a, const char *b, const char *c)
{
    size_t na = strlen(a), nb = strlen(b), nc = strlen(c);
    char *s = malloc(na + nb + nc + 1);
    if (s) {
        memcpy(s, a, na);
        memcpy(s + na, b, nb);
        memcpy(s + na + nb, c, nc + 1);
    }
    return s;
}

/* The directory part of path: "." for a bare name, "/" for "/name". */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return concat(".", "", "");
    char *d = concat(path, "", "");
    if (d)
        d[slash == path ? 1 : slash - path] = '\0';
    return d;
}

static mode_t default_mode(mode_t mode)
{
    mode_t mask = umask(0);
    umask(mask);
    return mode & ~mask;
}

/* LLMC_OUT_NO_TMPFILE=1, for tests only: behave as on a file system
 * without O_TMPFILE (docs/testing.md). */
static bool tmpfile_refused(void)
{
    const char *e = getenv("LLMC_OUT_NO_TMPFILE");
    return e && !strcmp(e, "1");
}

/* A new named temporary path.tmp.XXXXXX, 0666 & ~umask, its name in *name. */
static int named_temp(const char *path, char **name)
{
    if (!(*name = concat(path, FILE_TMP, TMP_X)))
        return errno = ENOMEM, -1;
    int fd = mkstemp(*name);
    if (fd >= 0 && fchmod(fd, default_mode(0666)) != 0) {
        int e = errno;
        close(fd), unlink(*name), fd = -1;
        errno = e;
    }
    if (fd < 0)
        free(*name), *name = NULL;
    return fd;
}

/* A file without a name in the directory of path: O_TMPFILE, or a named
 * temporary unlinked at once where the file system has no O_TMPFILE. */
static int open_unnamed(const char *path, int *how)
{
    int fd = -1;
    *how = OUT_COPY;
#ifdef O_TMPFILE
    char *dir = tmpfile_refused() ? NULL : dir_of(path);
    if (dir) {
        fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
        free(dir);
        if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) {
            *how = OUT_LINK;
            return fd;
        }
    }
#endif
    char *name;
    if ((fd = named_temp(path, &name)) >= 0) {
        unlink(name);
        free(name);
    }
    return fd;
}

FILE *llmc_out_create(const char *path, llmc_output *out, llmc_error *err)
{
    out->path = path;
    out->file = NULL;
    out->tmp = malloc(sizeof "/proc/self/fd/" + 3 * sizeof(int));
    int fd = out->tmp ? open_unnamed(path, &out->how) : (errno = ENOMEM, -1);
    if (fd >= 0) {
        sprintf(out->tmp, "/proc/self/fd/%d", fd);
        if (!(out->file = fdopen(fd, "wb")))
            close(fd);
    }
    if (!out->file) {
        llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", path, strerror(errno));
        free(out->tmp);
        out->tmp = NULL;
    }
    return out->file;
}

/* The unnamed file linked at out->path: straight there when nothing is,
 * else at a fresh name renamed over it. */
static int link_over(const llmc_output *out)
{
    if (linkat(AT_FDCWD, out->tmp, AT_FDCWD, out->path, AT_SYMLINK_FOLLOW) == 0)
        return 0;
    char *name = errno == EEXIST ? malloc(strlen(out->path) + sizeof FILE_TMP + 3 * sizeof(int) * 2) : NULL;
    int rc = -1;
    for (unsigned i = 0; name && rc && i < 100; i++) {
        sprintf(name, "%s" FILE_TMP "%d.%u", out->path, (int)getpid(), i);
        rc = linkat(AT_FDCWD, out->tmp, AT_FDCWD, name, AT_SYMLINK_FOLLOW);
        if (rc && errno != EEXIST)
            break;
    }
    if (!rc && rename(name, out->path) != 0) {
        int e = errno;
        unlink(name);
        errno = e, rc = -1;
    }
    free(name);
    return rc;
}

static int copy_fd(int from, int to)
{
    char buf[1 << 16];
    for (off_t at = 0;;) {
        ssize_t n = pread(from, buf, sizeof buf, at);
        if (n == 0)
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        for (ssize_t w = 0, k; w < n; w += k > 0 ? k : 0)
            if ((k = write(to, buf + w, (size_t)(n - w))) < 0 && errno != EINTR)
                return -1;
        at += n;
    }
}

/* The unlinked file copied to a named temporary, renamed over out->path:
 * the only time a temporary has a name. */
static int copy_over(const llmc_output *out)
{
    char *name;
    int fd = named_temp(out->path, &name);
    if (fd < 0)
        return -1;
    int rc = copy_fd(fileno(out->file), fd);
    rc |= close(fd);
    if (!rc)
        rc = rename(name, out->path);
    if (rc) {
        int e = errno;
        unlink(name);
        errno = e;
    }
    free(name);
    return rc;
}

int llmc_out_finish(llmc_output *out, int rc, llmc_error *err)
{
    if (!out->file)
        return rc;
    if (!rc && (fflush(out->file) != 0 || ferror(out->file)))
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", out->path, strerror(errno));
    bool named = false;
    if (!rc && (out->how == OUT_LINK ? link_over(out) : copy_over(out)) != 0)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", out->path, strerror(errno));
    else
        named = !rc;
    int closed = fclose(out->file), error = errno;
    if (named && closed != 0) {
        unlink(out->path);
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", out->path, strerror(error));
    }
    free(out->tmp);
    out->file = NULL;
    out->tmp = NULL;
    return rc;
}

/* ---- output directories ------------------------------------------------------ */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

static void remove_tree(const char *path)
{
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static bool before(struct timespec a, struct timespec b)
{
    return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

/* Removes where/PREFIX+XXXXXX directories that no live process holds
 * locked and that are older than `now`: what killed runs left. */
static void remove_stale(const char *where, const char *prefix, struct timespec now)
{
    DIR *dir = opendir(where);
    size_t n = strlen(prefix);
    for (struct dirent *e; dir && (e = readdir(dir));) {
        if (strncmp(e->d_name, prefix, n) || strlen(e->d_name) != n + strlen(TMP_X))
            continue;
        char *path = concat(where, "/", e->d_name);
        int fd = path ? open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && before(st.st_mtim, now) && flock(fd, LOCK_EX | LOCK_NB) == 0)
            remove_tree(path);
        if (fd >= 0)
            close(fd);
        free(path);
    }
    if (dir)
        closedir(dir);
}

/* `path` without trailing slashes ("/" stays). */
static char *trimmed(const char *path)
{
    char *p = concat(path, "", "");
    for (size_t n = p ? strlen(p) : 0; n > 1 && p[n - 1] == '/'; n--)
        p[n - 1] = '\0';
    return p;
}

/* Where the temporary directory goes: the nearest existing ancestor of
 * path, or path itself when it is a directory on another file system than
 * its parent (a mount point), so that renames into place stay on one. */
static char *temp_home(const char *path, const struct stat *target)
{
    char *p = dir_of(path);
    struct stat st;
    while (p && stat(p, &st) != 0 && strcmp(p, ".") && strcmp(p, "/")) {
        char *up = dir_of(p);
        free(p);
        p = up;
    }
    if (p && target && stat(p, &st) == 0 && st.st_dev != target->st_dev) {
        free(p);
        p = concat(path, "", "");
    }
    return p;
}

int llmc_out_dir_create(const char *path, llmc_out_dir *d, llmc_error *err)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct stat st;
    d->path = d->tmp = NULL;
    d->lock_fd = -1;
    d->existed = stat(path, &st) == 0;
    if (d->existed && !S_ISDIR(st.st_mode))
        return llmc_fail(err, LLMC_E_OUTPUT, "'%s' is not a directory", path);
    d->path = trimmed(path);
    char *home = d->path ? temp_home(d->path, d->existed ? &st : NULL) : NULL;
    const char *slash = d->path ? strrchr(d->path, '/') : NULL;
    char *prefix = home ? concat(".", slash ? slash + 1 : d->path, DIR_TMP) : NULL;
    char *tmp = prefix ? concat(home, "/", prefix) : NULL;
    if (tmp && (d->tmp = concat(tmp, TMP_X, ""))) {
        remove_stale(home, prefix, now);
        bool made = mkdtemp(d->tmp) != NULL; /* 0700: given the usual mode */
        if (!made || chmod(d->tmp, default_mode(0777)) != 0) {
            int e = errno;
            if (made)
                rmdir(d->tmp);
            free(d->tmp), d->tmp = NULL;
            errno = e;
        }
    }
    int rc = LLMC_OK;
    if (!d->tmp)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", path, strerror(errno));
    else if ((d->lock_fd = open(d->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0)
        flock(d->lock_fd, LOCK_EX | LOCK_NB); /* where flock fails, the directory is never taken for stale */
    free(tmp), free(prefix), free(home);
    if (rc)
        free(d->path), d->path = NULL;
    return rc;
}

/* The missing directories above path, 0777 & ~umask. */
static int make_parents(const char *path)
{
    char *p = dir_of(path);
    int rc = p ? 0 : (errno = ENOMEM, -1);
    for (char *s = p ? p + 1 : NULL; s && !rc; s++) {
        char c = *s;
        if (c && c != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            rc = -1;
        *s = c;
        if (!c)
            break;
    }
    free(p);
    return rc;
}

/* tmp/name renamed to path/name. */
static int move_entry(const llmc_out_dir *d, const char *name, llmc_error *err)
{
    char *from = concat(d->tmp, "/", name), *to = concat(d->path, "/", name);
    int rc = !from || !to ? llmc_fail(err, LLMC_E_NOMEM, "out of memory")
             : rename(from, to) != 0 ? llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", to, strerror(errno))
                                     : LLMC_OK;
    free(from), free(to);
    return rc;
}

/* Refuses an entry whose place in path holds a directory (or a file where
 * the entry is a directory) before anything is moved. */
static int check_entry(const llmc_out_dir *d, const char *name, llmc_error *err)
{
    char *from = concat(d->tmp, "/", name), *to = concat(d->path, "/", name);
    struct stat a, b;
    int rc = !from || !to ? llmc_fail(err, LLMC_E_NOMEM, "out of memory") : LLMC_OK;
    if (!rc && lstat(from, &a) == 0 && lstat(to, &b) == 0 && S_ISDIR(a.st_mode) != S_ISDIR(b.st_mode))
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", to, strerror(S_ISDIR(b.st_mode) ? EISDIR : ENOTDIR));
    free(from), free(to);
    return rc;
}

/* Each entry of tmp moved into the existing path, once none is refused; `last` removed first
 * and moved last. */
static int move_entries(const llmc_out_dir *d, const char *last, llmc_error *err)
{
    char *old = last ? concat(d->path, "/", last) : NULL;
    int rc = LLMC_OK;
    if (last && (!old || (unlink(old) != 0 && errno != ENOENT)))
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot remove '%s': %s", old ? old : last, strerror(errno));
    free(old);
    DIR *dir = rc ? NULL : opendir(d->tmp);
    if (!rc && !dir)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", d->path, strerror(errno));
    for (int moving = 0; !rc && moving < 2; moving++, rewinddir(dir))
        for (struct dirent *e; !rc && (e = readdir(dir));)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !(last && !strcmp(e->d_name, last)))
                rc = moving ? move_entry(d, e->d_name, err) : check_entry(d, e->d_name, err);
    if (dir)
        closedir(dir);
    return rc || !last ? rc : move_entry(d, last, err);
}

static int commit_dir(const llmc_out_dir *d, const char *last, llmc_error *err)
{
    if (!d->existed) {
        if (make_parents(d->path) != 0)
            return llmc_fail(err, LLMC_E_OUTPUT, "cannot create the parents of '%s': %s", d->path, strerror(errno));
        if (rename(d->tmp, d->path) == 0)
            return LLMC_OK;
        if (errno != EEXIST && errno != ENOTEMPTY)
            return llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", d->path, strerror(errno));
    }
    return move_entries(d, last, err);
}

int llmc_out_dir_finish(llmc_out_dir *d, const char *last, int rc, llmc_error *err)
{
    if (!d->tmp)
        return rc;
    if (!rc)
        rc = commit_dir(d, last, err);
    remove_tree(d->tmp);
    if (d->lock_fd >= 0)
        close(d->lock_fd);
    free(d->tmp), free(d->path);
    d->tmp = d->path = NULL;
    d->lock_fd = -1;
    return rc;
}
