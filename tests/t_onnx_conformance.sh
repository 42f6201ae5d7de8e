#!/usr/bin/env bash
# ONNX conformance: every backend node test case (Debian's libonnx-testdata)
# whose ops are all in `llmc ops` runs through `llmc check-onnx`.  Cases
# listed in tests/onnx_exclusions.txt (name, then the reason) are skipped and
# counted separately; they still run, and one that passes fails the test
# (its exclusion is stale).
set -u
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
DATA=/usr/share/libonnx-testdata/data/node
EXCLUDE=tests/onnx_exclusions.txt
work=$BUILD/test-data/conformance
mkdir -p "$work"

"$LLMC" ops >"$work/all_ops.txt" || { echo "not ok 1 - llmc ops failed"; exit 1; }
grep -v '^llmc\.' "$work/all_ops.txt" >"$work/ops.txt"   # ONNX ops only: no llmc.Name lines
/usr/bin/python3 scripts/onnx_cases.py "$DATA" "$work/ops.txt" 1 99 >"$work/cases.txt" ||
    { echo "not ok 1 - cannot list conformance cases"; exit 1; }

n=0 excluded=0 failed=0
while read -r dir; do
    name=$(basename "$dir")
    if grep -q "^$name[[:space:]]" "$EXCLUDE" 2>/dev/null; then
        # An excluded case still runs: one that passes makes its exclusion stale.
        excluded=$((excluded + 1))
        if timeout 60 "$LLMC" check-onnx "$dir" >/dev/null 2>&1; then
            n=$((n + 1)) failed=$((failed + 1))
            echo "not ok $n - $name is listed in $EXCLUDE but passes: remove it from the list"
        fi
        continue
    fi
    n=$((n + 1))
    if out=$(timeout 60 "$LLMC" check-onnx "$dir" 2>&1); then
        echo "ok $n - $name"
    else
        failed=$((failed + 1))
        echo "not ok $n - $name: $(echo "$out" | tail -1 | cut -c1-300)"
    fi
done <"$work/cases.txt"
echo "# summary: conformance: $(wc -l <"$work/cases.txt") cases of $(wc -l <"$work/ops.txt") claimed ops;" \
     "$n run, $failed failed, $excluded excluded (see $EXCLUDE)"
