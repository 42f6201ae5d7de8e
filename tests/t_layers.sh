#!/usr/bin/env bash
# The layering check (docs/architecture.md): every #include of the C tree
# and every call between the build's object files runs from a folder's
# floor down, never up and never across two folders of one floor, and no
# files use each other round a circle (scripts/check_layers.py).  Then the
# checker itself is shown an include that runs up a floor, on a copy of the
# tree, and must fail on it.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
report=$(python3 scripts/check_layers.py "$BUILD")
grep -v '^1\.\.' <<<"$report"
n=$(grep -c '^\(not \)\?ok ' <<<"$report")

work=$(mktemp -d "${TMPDIR:-/tmp}/llmc-layers.XXXXXX")
trap 'rm -rf "$work"' EXIT
git ls-files -z runtime compiler scripts/check_layers.py | xargs -0 cp --parents -t "$work"
git -C "$work" init -q && git -C "$work" add -A
sed -i '0,/^#include "/s||#include "cli/cli.h"\n#include "|' "$work/compiler/ir/ir.c"
git -C "$work" add -A
out=$(cd "$work" && python3 scripts/check_layers.py /nonexistent 2>&1)
if grep -q 'compiler/ir/ir.c (floor 3) includes cli/cli.h' <<<"$out"; then
    echo "ok $((n + 1)) - an include from compiler/ir/ up into compiler/cli/ is reported"
else
    echo "not ok $((n + 1)) - an include from compiler/ir/ up into compiler/cli/ is reported"
    sed 's/^/#   /' <<<"$out"
fi
echo "1..$((n + 1))"
