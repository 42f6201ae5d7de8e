#!/usr/bin/env bash
# Re-blesses tests/golden/: compiles every model of the test zoo (tests/zoo.sh)
# and stores, per model, the digests tests/t_golden.sh compares
# (<model>.digests) and the canonical pass dumps it diffs against on a
# mismatch (<model>.dumps.tar.xz, a reproducible tarball).
#
# Run it deliberately, after checking that the change in what the passes
# produce is intended, and say why in the commit message:
#   scripts/bless_golden.sh && git add tests/golden && git commit -m "Bless golden: <why>"
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
. tests/zoo.sh
make -s all
WORK=$BUILD/golden-bless
mkdir -p tests/golden
for spec in $ZOO; do
    dir=$WORK/$spec
    zoo_compile "$spec" "$dir"
    golden=$(zoo_golden "$spec")
    cp "$dir/digests" "$golden.digests"
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$dir/dumps" -cf - . \
        | xz -9e -T1 >"$golden.dumps.tar.xz"
    echo "blessed $spec: $(grep -c '^dump ' "$golden.digests") pass dumps, plan $(sed -n 's/^plan //p' "$golden.digests")"
done
echo "tests/golden: $(du -cb tests/golden/*.tar.xz | tail -1 | cut -f1) bytes of compressed dumps"
git status --short tests/golden
