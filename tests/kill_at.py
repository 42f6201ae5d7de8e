"""kill_at.py DIR BYTES -- CMD...: runs CMD and kills it (SIGKILL) once it
has written BYTES bytes of output into DIR, counting what is not yet named:
the files CMD holds open that have no name (an O_TMPFILE file, or an
unlinked temporary: /proc/PID/fd/N reads 'DIR/... (deleted)') and the files
in the temporary directories DIR/.*.llmc-tmp.* it holds open, other than
those there before CMD started (a killed run's, which CMD opens to see
whether it may remove them).  The moment it sees BYTES or
more (BYTES 0: the first unnamed output at all), or the first poll that
finds nothing unnamed left after some was (the mark passed between two
polls and the output was put in place), it stops CMD (SIGSTOP),
counts again, kills it and prints 'killed BYTES LINK', LINK being the /proc
link of the largest unnamed file (or '-').  BYTES 'replaced:NAME' instead
kills CMD (stopped first) the moment DIR/NAME is another directory than
before (an exchange put the new one in place) or was changed (its mtime:
a file moved into it) and prints 'killed replaced
TEMP', TEMP being the temporary directory .NAME.llmc-tmp.* then beside it
(the old tree, not yet removed) or '-'.  Prints 'finished' and exits 3
when CMD ends before that."""
import os
import signal
import subprocess
import sys


def open_files(pid):
    """(path in /proc, link) of pid's open files."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    found = []
    for fd in fds:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            found.append((path, os.readlink(path)))
        except OSError:
            pass
    return found


def size(path):
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def temp_dir_bytes(d):
    total = 0
    for root, _, files in os.walk(d):
        total += sum(size(os.path.join(root, f)) for f in files)
    return total


def temp_dirs(out_dir):
    """The temporary directories under out_dir now."""
    found = set()
    for root, names, _ in os.walk(out_dir):
        found.update(os.path.join(root, n) for n in names if ".llmc-tmp." in n)
    return found


def written(pid, out_dir, old_dirs):
    """Bytes pid has written under out_dir that have no name yet: unnamed
    files, and the files of the temporary directories it holds open (not
    old_dirs, each counted once however often it is open); whether there is
    any such output; the link of the largest unnamed file."""
    files, dirs = [], set()
    for path, link in open_files(pid):
        if not link.startswith(out_dir + "/"):
            continue
        if link.endswith(" (deleted)"):
            files.append((size(path), link))
        elif ".llmc-tmp." in os.path.basename(link) and os.path.isdir(link) and link not in old_dirs:
            dirs.add(link)
    total = sum(n for n, _ in files) + sum(temp_dir_bytes(d) for d in dirs)
    return total, bool(files or dirs), max(files)[1] if files else "-"


def identity(path):
    """(device, inode, mtime) of path itself, None when nothing is there."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns


def kill(proc, report):
    """Stops proc, calls report() on what it left, kills it."""
    os.kill(proc.pid, signal.SIGSTOP)
    what = report()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    print(f"killed {what}")
    return 0


def kill_at_bytes(proc, out_dir, want, old_dirs):
    """Past the mark, or past the output put in place (it was unnamed, now
    nothing is) where the mark came and went between two polls."""
    was_seen = False
    while proc.poll() is None:
        total, seen, _ = written(proc.pid, out_dir, old_dirs)
        if (seen and total >= want) or (was_seen and not seen):
            return kill(proc, lambda: "%d %s" % written(proc.pid, out_dir, old_dirs)[::2])
        was_seen = seen
    return None


def kill_at_replaced(proc, out_dir, name, before):
    """The poll is one lstat, so that it lands between the exchange and the
    end of the old tree's removal."""
    path = os.path.join(out_dir, name)
    while proc.poll() is None:
        if identity(path) != before:
            left = lambda: sorted(n for n in os.listdir(out_dir) if n.startswith(f".{name}.llmc-tmp."))
            return kill(proc, lambda: "replaced " + (left() or ["-"])[0])
    return None


def main():
    out_dir, want = os.path.abspath(sys.argv[1]), sys.argv[2]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    old_dirs = temp_dirs(out_dir)
    name = want.split(":", 1)[1] if want.startswith("replaced:") else None
    before = identity(os.path.join(out_dir, name)) if name else None
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if name:
        rc = kill_at_replaced(proc, out_dir, name, before)
    else:
        rc = kill_at_bytes(proc, out_dir, int(want), old_dirs)
    if rc is None:
        print("finished")
        return 3
    return rc


if __name__ == "__main__":
    sys.exit(main())
