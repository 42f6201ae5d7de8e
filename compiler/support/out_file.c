#include "out_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifndef RENAME_EXCHANGE
#include <sys/syscall.h>
#endif

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

/* LLMC_OUT_NO_TMPFILE=1 and LLMC_OUT_NO_EXCHANGE=1, for tests only:
 * behave as on a file system without O_TMPFILE, without RENAME_EXCHANGE
 * (docs/testing.md). */
static bool refused(const char *var)
{
    const char *e = getenv(var);
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
    char *dir = refused("LLMC_OUT_NO_TMPFILE") ? NULL : dir_of(path);
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

/* A directory opened to its owner, so that a read-only one (kept from an
 * old DIR) can be emptied. */
static int open_up(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    if ((flag == FTW_D || flag == FTW_DNR) && (st->st_mode & S_IRWXU) != S_IRWXU)
        chmod(path, (st->st_mode & 07777) | S_IRWXU);
    return 0;
}

/* Never into another file system mounted inside: that is not ours. */
static void remove_tree(const char *path)
{
    nftw(path, open_up, 16, FTW_PHYS | FTW_MOUNT);
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static bool before(struct timespec a, struct timespec b)
{
    return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

/* Removes where/PREFIX+XXXXXX directories that no live process holds
 * locked and that are older than `now`: what killed runs left.  The lock
 * is on the temporary's inode, which an exchange with DIR makes DIR's: the
 * old tree then under the temporary's name has no lock, and a run killed
 * before removing it leaves it to the next.  Older by ctime, which no one
 * can set back: that tree's mtime is the old DIR's, whatever it was. */
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
        if (fd >= 0 && fstat(fd, &st) == 0 && before(st.st_ctim, now) && flock(fd, LOCK_EX | LOCK_NB) == 0)
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

/* ---- replacing an existing directory ------------------------------------------- */

/* The subdirectory `name` of the directory fd `at`, opened. */
static int open_sub(int at, const char *name)
{
    return openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* A DIR stream over the directory fd `fd`, which stays the caller's. */
static DIR *list_dir(int fd)
{
    int own = dup(fd);
    DIR *dir = own >= 0 ? fdopendir(own) : NULL;
    if (own >= 0 && !dir)
        close(own);
    return dir;
}

static bool dot_or_dotdot(const char *name)
{
    return !strcmp(name, ".") || !strcmp(name, "..");
}

/* The regular file from/name copied to to/name with its mode: for the
 * entries that cannot be linked (another file system mounted inside DIR,
 * a file we do not own under fs.protected_hardlinks, a full link count). */
static int copy_file(int from, int to, const char *name, const struct stat *st)
{
    int in = openat(from, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int out = in < 0 ? -1 : openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int rc = out < 0 || copy_fd(in, out) != 0 || fchmod(out, st->st_mode & 07777) != 0 ? -1 : 0;
    int e = errno;
    if (out >= 0)
        close(out);
    if (in >= 0)
        close(in);
    errno = e;
    return rc;
}

/* The symlink from/name made anew at to/name. */
static int copy_symlink(int from, int to, const char *name, const struct stat *st)
{
    size_t size = st->st_size > 0 ? (size_t)st->st_size + 1 : 4096;
    char *target = malloc(size);
    ssize_t n = target ? readlinkat(from, name, target, size) : (errno = ENOMEM, -1);
    int rc = n < 0 ? -1 : (size_t)n >= size ? (errno = ENAMETOOLONG, -1) : 0;
    if (!rc) {
        target[n] = '\0';
        rc = symlinkat(target, to, name);
    }
    free(target);
    return rc;
}

static int merge_old(int from, int to, const char *where, bool keep, llmc_error *err);

/* Merges the directory from/name into to/name (made first, 0700 while it is
 * filled, then given the old mode, when `make`). */
static int merge_sub(int from, int to, const char *name, const char *path, bool keep, const struct stat *make,
                     llmc_error *err)
{
    if (make && mkdirat(to, name, 0700) != 0)
        return llmc_fail(err, LLMC_E_OUTPUT, "cannot keep '%s': %s", path, strerror(errno));
    int a = open_sub(from, name), b = a < 0 ? -1 : open_sub(to, name);
    int rc = b < 0 ? llmc_fail(err, LLMC_E_OUTPUT, "cannot read '%s': %s", path, strerror(errno))
                   : merge_old(a, b, path, keep, err);
    if (!rc && make && fchmodat(to, name, make->st_mode & 07777, 0) != 0)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot keep '%s': %s", path, strerror(errno));
    if (b >= 0)
        close(b);
    if (a >= 0)
        close(a);
    return rc;
}

/* The old entry from/name, which the new set does not replace, put into
 * to/name: a hard link (the same file, mode and owner), a directory made
 * anew and merged, a symlink made anew; a copy where linking fails with
 * EXDEV, EPERM or EMLINK (copy_file). */
static int keep_entry(int from, int to, const char *name, const char *path, const struct stat *st, llmc_error *err)
{
    if (S_ISDIR(st->st_mode))
        return merge_sub(from, to, name, path, true, st, err);
    int rc = S_ISLNK(st->st_mode) ? copy_symlink(from, to, name, st) : linkat(from, name, to, name, 0);
    if (rc && S_ISREG(st->st_mode) && (errno == EXDEV || errno == EPERM || errno == EMLINK))
        rc = copy_file(from, to, name, st);
    return rc ? llmc_fail(err, LLMC_E_OUTPUT, "cannot keep '%s': %s", path, strerror(errno)) : LLMC_OK;
}

/* The old directory `from` (named `where` in messages) merged into the new
 * one `to`: entries the new set has replace the old ones, a file against a
 * directory (either way) is refused, same-named directories are merged,
 * and with `keep` every other old entry is put into `to` (keep_entry);
 * without it only the refusals are checked. */
static int merge_old(int from, int to, const char *where, bool keep, llmc_error *err)
{
    DIR *dir = list_dir(from);
    int rc = dir ? LLMC_OK : llmc_fail(err, LLMC_E_OUTPUT, "cannot read '%s': %s", where, strerror(errno));
    for (struct dirent *e; !rc && (e = readdir(dir));) {
        if (dot_or_dotdot(e->d_name))
            continue;
        char *path = concat(where, "/", e->d_name);
        struct stat old, new;
        if (!path)
            rc = llmc_fail(err, LLMC_E_NOMEM, "out of memory");
        else if (fstatat(from, e->d_name, &old, AT_SYMLINK_NOFOLLOW) != 0)
            rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot read '%s': %s", path, strerror(errno));
        else if (fstatat(to, e->d_name, &new, AT_SYMLINK_NOFOLLOW) == 0)
            rc = S_ISDIR(old.st_mode) != S_ISDIR(new.st_mode)
                     ? llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", path,
                                 strerror(S_ISDIR(old.st_mode) ? EISDIR : ENOTDIR))
                 : S_ISDIR(old.st_mode) ? merge_sub(from, to, e->d_name, path, keep, NULL, err)
                                        : LLMC_OK;
        else if (errno != ENOENT)
            rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", path, strerror(errno));
        else if (keep)
            rc = keep_entry(from, to, e->d_name, path, &old, err);
        free(path);
    }
    if (dir)
        closedir(dir);
    return rc;
}

/* The fallback: each entry of `from` renamed into `to` (DIR or one of its
 * directories), entry by entry into a same-named directory, `skip` left
 * for the caller.  An entry kept by a hard link is already the same file
 * there, which rename leaves as it is. */
static int move_into(int from, int to, const char *where, const char *skip, llmc_error *err)
{
    DIR *dir = list_dir(from);
    int rc = dir ? LLMC_OK : llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", where, strerror(errno));
    for (struct dirent *e; !rc && (e = readdir(dir));) {
        if (dot_or_dotdot(e->d_name) || (skip && !strcmp(e->d_name, skip)))
            continue;
        char *path = concat(where, "/", e->d_name);
        struct stat a, b;
        int sa = -1, sb = -1;
        if (!path)
            rc = llmc_fail(err, LLMC_E_NOMEM, "out of memory");
        else if (fstatat(from, e->d_name, &a, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(a.st_mode) &&
                 fstatat(to, e->d_name, &b, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(b.st_mode)) {
            if ((sa = open_sub(from, e->d_name)) < 0 || (sb = open_sub(to, e->d_name)) < 0)
                rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", path, strerror(errno));
            else
                rc = move_into(sa, sb, path, NULL, err);
        } else if (renameat(from, e->d_name, to, e->d_name) != 0)
            rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", path, strerror(errno));
        if (sb >= 0)
            close(sb);
        if (sa >= 0)
            close(sa);
        free(path);
    }
    if (dir)
        closedir(dir);
    return rc;
}

/* The fallback for DIR as a whole: `last`, if not NULL, removed first and
 * moved last (an export's manifest, which names its set). */
static int move_entries(const llmc_out_dir *d, int tmp, int dir, const char *last, llmc_error *err)
{
    /* tmp may carry the old DIR's mode, read-only for all we know */
    int rc = fchmod(tmp, S_IRWXU) != 0 ? llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", d->tmp, strerror(errno))
                                       : LLMC_OK;
    if (!rc && last && unlinkat(dir, last, 0) != 0 && errno != ENOENT)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot remove '%s/%s': %s", d->path, last, strerror(errno));
    if (!rc)
        rc = move_into(tmp, dir, d->path, last, err);
    if (!rc && last && renameat(tmp, last, dir, last) != 0)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s/%s': %s", d->path, last, strerror(errno));
    return rc;
}

/* a and b swapped in one step; -1 with EINVAL when LLMC_OUT_NO_EXCHANGE=1. */
static int exchange(const char *a, const char *b)
{
    if (refused("LLMC_OUT_NO_EXCHANGE"))
        return errno = EINVAL, -1;
#ifdef RENAME_EXCHANGE
    return renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
#else
    return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, 2 /* RENAME_EXCHANGE */);
#endif
}

/* Whether DIR can be exchanged with tmp at all: not when tmp is inside DIR
 * (DIR is a mount point), nor when DIR is a symlink (which stays one, its
 * target getting the files). */
static bool exchangeable(const llmc_out_dir *d)
{
    size_t n = strlen(d->path);
    struct stat st;
    return !(strncmp(d->tmp, d->path, n) == 0 && d->tmp[n] == '/') && lstat(d->path, &st) == 0 &&
           S_ISDIR(st.st_mode);
}

/* An existing DIR replaced: its entries that the new set does not replace
 * put into tmp, tmp given DIR's mode, then the two exchanged
 * (RENAME_EXCHANGE); the old tree, now at tmp's name, is removed by the
 * caller.  Where the exchange is refused (EINVAL, ENOSYS) or impossible,
 * the entries are moved into DIR one by one instead. */
static int replace_dir(const llmc_out_dir *d, const char *last, llmc_error *err)
{
    bool swap = exchangeable(d);
    int dir = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int tmp = dir < 0 ? -1 : open(d->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    int rc = tmp < 0 || fstat(dir, &st) != 0 ? llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", d->path, strerror(errno))
                                             : merge_old(dir, tmp, d->path, swap, err);
    if (!rc && swap && (fchmod(tmp, st.st_mode & 07777) != 0 || exchange(d->tmp, d->path) != 0)) {
        swap = false;
        if (errno != EINVAL && errno != ENOSYS)
            rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", d->path, strerror(errno));
    }
    if (!rc && !swap)
        rc = move_entries(d, tmp, dir, last, err);
    if (tmp >= 0)
        close(tmp);
    if (dir >= 0)
        close(dir);
    return rc;
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
    return replace_dir(d, last, err);
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
