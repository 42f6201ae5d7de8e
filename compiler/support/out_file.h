/* Output files and directories written atomically: nothing appears at the
 * output path until everything was written, and a failure or a kill leaves
 * the path as it was (docs/testing.md, "Killed writes"). */
#ifndef LLMC_OUT_FILE_H
#define LLMC_OUT_FILE_H

#include <stdbool.h>
#include <stdio.h>

#include "diag.h"

/* An output file: llmc_out_create opens an unnamed file in the directory of
 * `path` (O_TMPFILE); llmc_out_finish, if rc is 0 and every write reached
 * the file, gives it its name (linkat, then a rename over an existing
 * output), else drops it.  Where the file system has no O_TMPFILE, the data
 * goes to a temporary that is unlinked as soon as it is created and is
 * copied to a named temporary beside `path`, renamed at once, in
 * llmc_out_finish.  `tmp` names the file while it is open (a
 * /proc/self/fd path), for reading it back before finishing.  Both return
 * or record an LLMC_E_OUTPUT error naming `path`.  The mode is
 * 0666 & ~umask; no fsync. */
typedef struct {
    const char *path;
    char *tmp;
    FILE *file;
    int how; /* out_file.c: how the file gets its name */
} llmc_output;

FILE *llmc_out_create(const char *path, llmc_output *out, llmc_error *err);
int llmc_out_finish(llmc_output *out, int rc, llmc_error *err);

/* An output directory: llmc_out_dir_create makes a temporary directory
 * `.NAME.llmc-tmp.XXXXXX` beside `path` (in its nearest existing ancestor,
 * or inside `path` when that is a mount point), locked (flock) while this
 * process lives, and first removes the stale ones of the same name: unlocked
 * and older (ctime) than this call, left by a killed run.  The caller writes
 * its files into `tmp`.  llmc_out_dir_finish with rc 0 renames `tmp` to
 * `path` (creating missing parents).  When `path` already exists, every old
 * entry the new set does not replace is hard-linked into `tmp` (directories
 * made anew and merged, symlinks made anew, a copy where a link is refused),
 * `tmp` gets the old mode, and the two are exchanged in one step
 * (RENAME_EXCHANGE); the old tree, then under the temporary's name, is
 * removed, or swept by the next run if this one is killed first.  Where the
 * exchange is refused (EINVAL, ENOSYS; LLMC_OUT_NO_EXCHANGE=1 for tests),
 * `path` is a mount point or a symlink, the files are instead moved into
 * `path` one by one (replacing those of the same name; `last`, if not NULL,
 * removed first and moved last), which a kill can leave half done.  A new
 * file where `path` has a directory, or the reverse, is refused before
 * anything changes.  With rc != 0 it removes `tmp`. */
typedef struct {
    char *path;
    char *tmp;
    int lock_fd;
    bool existed;
} llmc_out_dir;

int llmc_out_dir_create(const char *path, llmc_out_dir *d, llmc_error *err);
int llmc_out_dir_finish(llmc_out_dir *d, const char *last, int rc, llmc_error *err);

#endif
