#!/usr/bin/env bash
# tier: plain-only (kill points are set by bytes written; the sanitizer build writes the same bytes, only slower)
# Outputs killed half-written leave nothing: `llmc compile` is killed
# (SIGKILL) once it has written 0%, 25%, 50%, 90% and 100% of the plan
# (tests/kill_at.py counts the bytes of its unnamed output file through
# /proc/PID/fd, stops the process there, counts again and kills it), into an
# empty folder and over an old plan: the folder holds exactly what it held
# before, byte for byte.  The same for --dump-passes DIR and --npu-export
# DIR at 0/25/50/90% of the bytes of their files into a new DIR, and at
# 0/25/50/90/100% and right after the exchange that puts the new DIR in
# place over an old DIR (one of one's own files, modes and a symlink beside
# the files the new set replaces): DIR is exactly as it was or exactly the
# old DIR with the new set applied, never a mix; the one thing beside it is
# the killed run's temporary .DIR.llmc-tmp.XXXXXX (after the exchange: the
# old tree), and the next run removes it (the one before it was gone by
# then too) and writes what an undisturbed run writes, keeping one's own
# files as the same files.  Where directories cannot be exchanged
# (LLMC_OUT_NO_EXCHANGE=1) the same result, the files moved in one by one.
# A temporary that a live process holds locked is not removed.  The named
# temporaries used where a file system has no O_TMPFILE
# (LLMC_OUT_NO_TMPFILE=1): the same plan, nothing else in the folder, a
# killed write and failed writes leave the folder as it was.  The kill
# points reached are in $WORK/points.txt (docs/testing.md, "Killed writes").
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
WORK=$BUILD/test-data/kill_write
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
MODEL=models/tiny-llama.onnx
TOKENIZER=models/tokenizer.json
CALIB=$WORK/calib.txt   # the start of Debian's fortunes (scripts/deps.sh): a short calibration
head -c 4000 /usr/share/games/fortunes/fortunes >"$CALIB"
ATTEMPTS=5   # a command may finish before a kill point is seen; it is run again
: >"$WORK/points.txt"

RUN=()   # the command compiles run under: tests/kill_at.py for a kill
plan_to() {   # plan_to DIR [options...]: DIR/out.plan
    local dir=$1; shift
    "${RUN[@]}" "$LLMC" compile "$MODEL" --max-context 128 --quiet -o "$dir/out.plan" "$@"
}
dumps_to() {   # dumps_to DIR: DIR/dump
    plan_to "$WORK/plans" --dump-passes "$1/dump" --dot
}
export_to() {   # export_to DIR: DIR/export
    plan_to "$WORK/plans" --tokenizer "$TOKENIZER" --quant w8a8 --calibrate "$CALIB" --npu-chunk 32 \
        --npu-export "$1/export"
}
mkdir -p "$WORK/plans"

# snapshot DIR: every entry under DIR (temporary directories aside) with its
# type, mode, size and symlink target (not a directory's size, which depends
# on its history) and contents' digest.
snapshot() {
    (cd "$1" && find . -path '*.llmc-tmp.*' -prune -o -type d -printf '%p %y %m\n' -o -printf '%p %y %m %s %l\n' |
        LC_ALL=C sort &&
        find . -path '*.llmc-tmp.*' -prune -o -type f -exec sha256sum {} + | LC_ALL=C sort)
}
temps() {   # temps DIR: the temporary directories in DIR
    find "$1" -maxdepth 1 -name '.*.llmc-tmp.*' -printf '%f\n' | LC_ALL=C sort
}
bytes_in() {   # bytes_in PATH: the bytes of the files at or under PATH
    find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'
}

# Fixtures: what the output folder holds before a run.
empty() { :; }
old_plan() { printf 'an old plan, not to be touched\n' >"$1/out.plan"; }
# old_dir FOLDER DIR FILE: an old DIR (mode 750) with FILE, which the new set
# replaces, and one's own: notes.txt (mode 600), a symlink to it, and mine/
# (mode 700) with 2 x 1,000 small files, whose removal from the old tree
# after the exchange takes long enough for a kill to land in it.
old_dir() {
    local d=$1/$2 i
    mkdir -p "$d/mine/deep" && printf 'old\n' >"$d/$3" && printf 'mine\n' >"$d/notes.txt" &&
        chmod 600 "$d/notes.txt" && ln -s notes.txt "$d/latest" || return 1
    for i in $(seq 1000); do
        printf '%s\n' "$i" >"$d/mine/$i.txt" && printf '%s\n' "$i" >"$d/mine/deep/$i" || return 1
    done
    chmod 700 "$d/mine" && chmod 750 "$d"
}
old_dump() { old_dir "$1" dump 00-import.txt; }
old_export() { old_dir "$1" export manifest.json; }

# killed WHAT FIXTURE TOTAL PERCENT WRITER [STALE [COMPLETE]]: a fresh folder
# with FIXTURE, WRITER killed at PERCENT of TOTAL bytes (PERCENT
# replaced:NAME: when NAME is replaced, tests/kill_at.py), then the folder
# must hold what it held before -- or, when the kill came after the output
# was put in place (writes land a few MB at a time, so a kill aimed at 90%
# or 100% may come after the last one), what COMPLETE accepts as the whole
# output; STALE=dir: one temporary directory may remain, and it is not one
# that was there before the run.
killed() {
    local what=$1 fixture=$2 total=$3 percent=$4 writer=$5 stale=${6:-} complete=${7:-false} dir out i
    dir=$WORK/$what
    for i in $(seq "$ATTEMPTS"); do
        if [ "$i" -gt 1 ] || [ ! -d "$dir" ]; then rm -rf "$dir" && mkdir -p "$dir" && $fixture "$dir"; fi
        snapshot "$dir" >"$WORK/before.txt"
        temps "$dir" >"$WORK/temps-before.txt"
        RUN=("$PY" tests/kill_at.py "$dir" "$([[ $percent = replaced:* ]] && echo "$percent" || echo $((total * percent / 100)))" --)
        out=$($writer "$dir") && break
        RUN=()
        out=
    done
    RUN=()
    [ -n "$out" ] || { echo "the writer finished before $percent% in $ATTEMPTS runs"; return 1; }
    local bytes=${out#killed } link after="as before"
    link=${bytes#* }
    bytes=${bytes%% *}
    if ! snapshot "$dir" | diff "$WORK/before.txt" -; then
        $complete "$dir" || { echo "the folder changed, and not to the whole output"; return 1; }
        after="the whole output"
    fi
    if [ "$bytes" = replaced ]; then
        printf '%s %s %s, old tree left: %s; %s\n' "$what" "$fixture" "$percent" "$link" "$after" >>"$WORK/points.txt"
    else
        printf '%s %s %s%% %s of %s bytes %s; %s\n' "$what" "$fixture" "$percent" "$bytes" "$total" "$link" "$after" \
            >>"$WORK/points.txt"
    fi
    local now
    now=$(temps "$dir")
    if [ "$stale" = dir ]; then
        [ "$(echo "$now" | grep -c .)" -le 1 ] || { echo "temporaries: $now"; return 1; }
        [ -z "$now" ] || ! grep -qxF "$now" "$WORK/temps-before.txt" || { echo "$now was not removed"; return 1; }
    else
        [ -z "$now" ] || { echo "temporaries left: $now"; return 1; }
    fi
}

# ---- the plan -------------------------------------------------------------------
mkdir -p "$WORK/ref"
check "reference compile" plan_to "$WORK/ref"
PLAN_BYTES=$(stat -c %s "$WORK/ref/out.plan")
whole_plan() { cmp -s "$WORK/ref/out.plan" "$1/out.plan" && [ "$(ls -A "$1")" = out.plan ]; }
for fixture in empty old_plan; do
    for percent in 0 25 50 90 100; do
        check "plan killed at $percent% ($fixture): the folder holds what it held, or the whole plan" \
            killed plan-$fixture $fixture "$PLAN_BYTES" $percent plan_to "" whole_plan
    done
done
unnamed_plan() { grep -q "^plan-empty empty 50% .* $(realpath "$WORK/plan-empty")/#[0-9]* (deleted); as before\$" "$WORK/points.txt"; }
check "the plan is written to an unnamed file (O_TMPFILE: /proc link DIR/#INODE)" unnamed_plan
replaced() {
    plan_to "$WORK/plan-old_plan" && cmp "$WORK/ref/out.plan" "$WORK/plan-old_plan/out.plan" &&
        [ "$(ls -A "$WORK/plan-old_plan")" = out.plan ]
}
check "the next compile replaces the old plan, nothing else in the folder" replaced

# ---- --dump-passes DIR and --npu-export DIR ----------------------------------------
# A new DIR is one rename of the finished temporary directory, an old DIR
# one exchange with it once the old DIR's other entries are linked in:
# killed at any point, the folder holds all of the old or all of the new
# (docs/testing.md, "Killed writes").
directory_kills() {   # directory_kills NAME WRITER FIXTURE: kills, then a full run, new and over FIXTURE
    local name=$1 writer=$2 fixture=$3 total start percents complete f label
    mkdir -p "$WORK/ref-$name"
    check "$name: reference run" $writer "$WORK/ref-$name"
    total=$(bytes_in "$WORK/ref-$name/$name")
    eval "whole_$name() { diff -r '$WORK/ref-$name/$name' \"\$1/$name\" >/dev/null; }"
    # the old DIR with the new set applied, and its snapshot
    rm -rf "$WORK/applied-$name" && mkdir -p "$WORK/applied-$name" && $fixture "$WORK/applied-$name"
    for f in "$WORK/ref-$name/$name"/*; do cp -pR --remove-destination "$f" "$WORK/applied-$name/$name/"; done
    snapshot "$WORK/applied-$name" >"$WORK/applied-$name.txt"
    eval "applied_$name() { snapshot \"\$1\" | cmp -s - '$WORK/applied-$name.txt'; }"
    for start in empty $fixture; do
        rm -rf "$WORK/$name-$start"
        percents="0 25 50 90" complete=whole_$name
        [ "$start" = empty ] || percents="0 25 50 90 100 replaced:$name" complete=applied_$name
        for percent in $percents; do
            label=$percent%
            [ "$percent" != "replaced:$name" ] || label="the exchange"
            check "$name killed at $label ($start): DIR exactly as it was or exactly the new one, only this run's temporary beside it" \
                killed "$name-$start" $start "$total" $percent $writer dir $complete
        done
        [ "$start" = empty ] ||
            check "$name killed after the exchange: the old tree was left under the temporary's name" \
                old_tree_left "$name-$start"
        check "$name ($start): the next run removes the temporary and writes the whole set" \
            whole_set "$name" "$start" $writer
    done
    check "$name over an old DIR, no RENAME_EXCHANGE (LLMC_OUT_NO_EXCHANGE=1): the same DIR, nothing beside it" \
        moved_in "$name" "$fixture" $writer
}
old_tree_left() {   # the kill after the exchange came before the old tree was gone
    grep -q "^$1 [a-z_]* replaced:[a-z]*, old tree left: \.[a-z]*\.llmc-tmp\.[A-Za-z0-9]\{6\}; the whole output\$" "$WORK/points.txt"
}
whole_set() {   # whole_set NAME FIXTURE WRITER
    local dir=$WORK/$1-$2 inode
    inode=$(stat -c %i "$dir/$1/notes.txt" 2>/dev/null)
    $3 "$dir" || return 1
    [ -z "$(temps "$dir")" ] || { echo "left: $(temps "$dir")"; return 1; }
    [ "$(ls -A "$dir")" = "$1" ] || { ls -A "$dir"; return 1; }
    [ "$2" != empty ] || { diff -r "$WORK/ref-$1/$1" "$dir/$1"; return; }
    # an old DIR: the new set applied to it, one's own notes still the same file (a link, not a copy)
    snapshot "$dir" | diff "$WORK/applied-$1.txt" - && [ "$(stat -c %i "$dir/$1/notes.txt")" = "$inode" ]
}
moved_in() {   # moved_in NAME FIXTURE WRITER
    local dir=$WORK/$1-moved
    rm -rf "$dir" && mkdir -p "$dir" && $2 "$dir" && LLMC_OUT_NO_EXCHANGE=1 $3 "$dir" || return 1
    snapshot "$dir" | diff "$WORK/applied-$1.txt" - && [ -z "$(temps "$dir")" ]
}
directory_kills dump dumps_to old_dump
directory_kills export export_to old_export

# A temporary directory that a live process holds locked is another run's.
mkdir -p "$WORK/lock/.dump.llmc-tmp.AAAAAA" "$WORK/lock/.dump.llmc-tmp.BBBBBB"
printf 'x' >"$WORK/lock/.dump.llmc-tmp.BBBBBB/00-import.txt"
touch -d '1 hour ago' "$WORK/lock/.dump.llmc-tmp.AAAAAA" "$WORK/lock/.dump.llmc-tmp.BBBBBB"
flock -n "$WORK/lock/.dump.llmc-tmp.AAAAAA" sleep 600 &
HOLDER=$!
sleep 0.2
locked_kept() {
    dumps_to "$WORK/lock" && [ -d "$WORK/lock/.dump.llmc-tmp.AAAAAA" ] && [ ! -e "$WORK/lock/.dump.llmc-tmp.BBBBBB" ] &&
        diff -r "$WORK/ref-dump/dump" "$WORK/lock/dump"
}
check "a stale temporary is removed, one locked by a live process is kept" locked_kept
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null
parents() {
    dumps_to "$WORK/new/a/b" && diff -r "$WORK/ref-dump/dump" "$WORK/new/a/b/dump" && [ -z "$(temps "$WORK/new")" ]
}
check "--dump-passes into missing parents creates them with the dumps" parents

# ---- named temporaries (no O_TMPFILE) ----------------------------------------------
named() {
    rm -rf "$WORK/named" && mkdir -p "$WORK/named" &&
        LLMC_OUT_NO_TMPFILE=1 plan_to "$WORK/named" && cmp "$WORK/ref/out.plan" "$WORK/named/out.plan" &&
        [ "$(ls -A "$WORK/named")" = out.plan ]
}
check "named temporaries: the same plan, nothing else in the folder" named
named_plan_to() { LLMC_OUT_NO_TMPFILE=1 plan_to "$@"; }
for fixture in empty old_plan; do
    check "named temporaries: plan killed at 50% ($fixture): the folder holds what it held" \
        killed named-$fixture $fixture "$PLAN_BYTES" 50 named_plan_to
done
named_link() { grep -q "^named-empty empty 50% .*/out.plan.tmp.[A-Za-z0-9]\{6\} (deleted); as before\$" "$WORK/points.txt"; }
check "... its temporary is unlinked while written (/proc link OUT.tmp.XXXXXX (deleted))" named_link
failed_write() {   # the output is a folder: the last step, the rename, fails
    rm -rf "$WORK/fail" && mkdir -p "$WORK/fail/out.plan/x" && snapshot "$WORK/fail" >"$WORK/before.txt" &&
        { LLMC_OUT_NO_TMPFILE=$1 plan_to "$WORK/fail" 2>"$WORK/fail.err"; [ $? = 5 ]; } &&
        grep -q "cannot write '$WORK/fail/out.plan': Is a directory" "$WORK/fail.err" &&
        snapshot "$WORK/fail" | diff "$WORK/before.txt" -
}
check "a plan that cannot be renamed into place exits 5 and leaves nothing (O_TMPFILE)" failed_write 0
check "... and with named temporaries" failed_write 1
failed_dumps() {   # a folder where the first picture should go (as t_dot)
    rm -rf "$WORK/faildump" && mkdir -p "$WORK/faildump/dump/00-import.dot/x" &&
        snapshot "$WORK/faildump" >"$WORK/before.txt" &&
        { LLMC_OUT_NO_TMPFILE=$1 dumps_to "$WORK/faildump" 2>"$WORK/fail.err"; [ $? = 5 ]; } &&
        grep -q "cannot write '$WORK/faildump/dump/00-import.dot'" "$WORK/fail.err" &&
        [ -z "$(temps "$WORK/faildump")" ] && snapshot "$WORK/faildump" | diff "$WORK/before.txt" -
}
check "dumps that cannot be moved into DIR exit 5 naming the file, DIR untouched, no temporary (O_TMPFILE)" failed_dumps 0
check "... and with named temporaries" failed_dumps 1

sed 's/^/# /' "$WORK/points.txt"
tap_done
