#!/usr/bin/env bash
# Pass-output regression: for every model of the test zoo (tests/zoo.sh:
# the tiny llama/qwen2/gpt2/phi exports, seed 0), the xxHash64 of the
# exported ONNX, of every pass's canonical IR dump and of the plan must equal
# the blessed ones in tests/golden/<model>.digests.  On a mismatch the test
# names the first pass whose dump changed and prints a unified diff
# (truncated to $GOLDEN_DIFF_LINES lines) of that dump against the blessed
# one, unpacked from tests/golden/<model>.dumps.tar.xz.
#
# Why the blessed dumps are stored: the ONNX inputs are regenerated on the
# fly (scripts/export_llm.py, seed 0; the export is byte-deterministic, and
# the "onnx" digest catches a torch upgrade that changes it), but the
# blessed *compiler* is not, so the dumps it produced are kept, xz-compressed
# (about 60 KB for the whole zoo).  A missing golden file is a failure:
# bless with scripts/bless_golden.sh and say why in the commit message.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
WORK=$BUILD/test-data/golden
GOLDEN_DIFF_LINES=${GOLDEN_DIFF_LINES:-120}
TAP_LOG_LINES=$((GOLDEN_DIFF_LINES + 10))
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
. tests/zoo.sh

# The blessed dump to diff a changed pass against: the same pass name if
# the blessed pipeline had it, else the blessed dump at the same position.
blessed_dump() {   # blessed_dump DUMPS_DIR NN-pass.txt
    local same
    same=$(ls "$1"/[0-9][0-9]-"${2#*-}" 2>/dev/null | head -1)
    [ -n "$same" ] && { echo "$same"; return; }
    ls "$1"/"${2%%-*}"-*.txt 2>/dev/null | head -1
}

matches_golden() {   # matches_golden SPEC
    local spec=$1 golden dir
    golden=$(zoo_golden "$spec")
    dir=$WORK/$spec
    if [ ! -f "$golden.digests" ] || [ ! -f "$golden.dumps.tar.xz" ]; then
        echo "no $golden.digests / .dumps.tar.xz: run scripts/bless_golden.sh (and say why in the commit)"
        return 1
    fi
    zoo_compile "$spec" "$dir" || { echo "compile failed"; return 1; }
    cmp -s "$golden.digests" "$dir/digests" && return 0
    if [ "$(sed -n 1p "$golden.digests")" != "$(sed -n 1p "$dir/digests")" ]; then
        echo "the exported ONNX differs from the blessed one (torch or scripts/export_llm.py changed):"
        echo "  blessed $(sed -n 1p "$golden.digests"), now $(sed -n 1p "$dir/digests")"
        echo "every pass digest below depends on it; re-bless if the new export is intended"
    fi
    local now blessed i=0
    local -a now_lines blessed_lines
    mapfile -t now_lines < <(grep '^dump ' "$dir/digests")
    mapfile -t blessed_lines < <(grep '^dump ' "$golden.digests")
    for ((i = 0; i < ${#now_lines[@]} || i < ${#blessed_lines[@]}; i++)); do
        now=${now_lines[i]:-} blessed=${blessed_lines[i]:-}
        [ "$now" = "$blessed" ] && continue
        if [ -z "$now" ]; then
            echo "the pipeline now ends before blessed dump '${blessed#dump }'"
            return 1
        fi
        local file=${now#dump } base
        file=${file% *}
        echo "first changed pass: $file (xxh64 now ${now##* }, blessed ${blessed:+${blessed##* }}${blessed:-: no such pass})"
        mkdir -p "$dir/blessed"
        tar -xJf "$golden.dumps.tar.xz" -C "$dir/blessed" || return 1
        base=$(blessed_dump "$dir/blessed" "$file")
        if [ -z "$base" ]; then echo "no blessed dump to compare with"; return 1; fi
        diff -u --label "blessed/$(basename "$base")" --label "now/$file" "$base" "$dir/dumps/$file" \
            >"$dir/first.diff"
        echo "diff -u (first $GOLDEN_DIFF_LINES of $(wc -l <"$dir/first.diff") lines; all in $dir/first.diff):"
        head -n "$GOLDEN_DIFF_LINES" "$dir/first.diff"
        echo "if the change is intended: scripts/bless_golden.sh, and say why in the commit message"
        return 1
    done
    echo "every pass dump matches, but the plan changed (codegen):"
    echo "  blessed $(grep '^plan ' "$golden.digests"), now $(grep '^plan ' "$dir/digests")"
    return 1
}

# shellcheck disable=SC2086
zoo_prefetch $ZOO
for spec in $ZOO; do
    check "$spec: ONNX, every pass dump and the plan match tests/golden" matches_golden "$spec"
done
# A golden file for a model no longer in the zoo is stale.
no_stale_golden() {
    local f spec known
    for f in tests/golden/*.digests; do
        known=0
        for spec in $ZOO; do [ "$f" = "$(zoo_golden "$spec").digests" ] && known=1; done
        [ "$known" -eq 1 ] || { echo "stale: $f (not in tests/zoo.sh's ZOO)"; return 1; }
    done
}
check "tests/golden holds no file for a model outside the zoo" no_stale_golden
tap_done
