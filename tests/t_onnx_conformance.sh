#!/usr/bin/env bash
# ONNX conformance: every backend node test case (Debian's libonnx-testdata)
# whose ops are all in `llmc ops` runs through `llmc check-onnx`.  Cases
# listed in tests/onnx_exclusions.txt (name, then the reason) are skipped and
# counted separately; they still run, and one that passes fails the test
# (its exclusion is stale).
# Debian's cases stop at opset 17 (ONNX 1.12): tests/make_opset_cases.py
# writes cases of what opsets 18..21 changed, whose expected outputs ONNX
# Runtime computes (scripts/ort_case_outputs.js); they run the same way.
# Models using float8 or int4 tensors must be refused, naming the type.
set -u
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
DATA=/usr/share/libonnx-testdata/data/node
EXCLUDE=tests/onnx_exclusions.txt
work=$BUILD/test-data/conformance
mkdir -p "$work"

"$LLMC" ops >"$work/all_ops.txt" || { echo "not ok 1 - llmc ops failed"; exit 1; }
grep -v '^llmc\.' "$work/all_ops.txt" >"$work/ops.txt"   # ONNX ops only: no llmc.Name lines
rm -rf "$work/opset_cases"
/usr/bin/python3 tests/make_opset_cases.py "$work/opset_cases" &&
    node scripts/ort_case_outputs.js "$work"/opset_cases/test_* ||
    { echo "not ok 1 - cannot write the opset 18..21 cases"; exit 1; }
{ /usr/bin/python3 scripts/onnx_cases.py "$DATA" "$work/ops.txt" 1 99 &&
  /usr/bin/python3 scripts/onnx_cases.py "$work/opset_cases" "$work/ops.txt" 1 99; } >"$work/cases.txt" ||
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
for model in "$work"/opset_cases/refused/*.onnx; do
    name=$(basename "$model" .onnx) type=${name#cast_to_}
    n=$((n + 1))
    out=$("$LLMC" compile "$model" -o "$work/refused.plan" 2>&1)
    if [ $? -ne 0 ] && grep -q "Cast to $type (" <<<"$out" && [ ! -e "$work/refused.plan" ]; then
        echo "ok $n - $name refused: $type has no llmc tensors"
    else
        failed=$((failed + 1))
        echo "not ok $n - $name: expected a refusal naming $type, got: $(echo "$out" | tail -1 | cut -c1-300)"
    fi
done
echo "# summary: conformance: $(wc -l <"$work/cases.txt") cases of $(wc -l <"$work/ops.txt") claimed ops;" \
     "$n run, $failed failed, $excluded excluded (see $EXCLUDE)"
