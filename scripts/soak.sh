#!/usr/bin/env bash
# make soak: the trained model (models/tiny-llama.onnx, its tokenizer) for
# every KV cache dtype, SOAK_TOKENS generated tokens (default 100,000)
# through repeated full contexts of SOAK_CONTEXT positions (default 256, the
# training window) by tests/soak/soak.c, which samples the RSS every 1,000
# tokens and fails on growth after the warm-up or on drift (docs/testing.md,
# "Soak").  Then the f32-cache run once more with the session option
# "re-verify every 1,000 tokens", and the time of one re-verification of
# the plan.  Logs in $BUILD/soak/; exits non-zero if any run fails.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TOKENS=${SOAK_TOKENS:-100000}
CONTEXT=${SOAK_CONTEXT:-256}
OUT=$BUILD/soak
SOAK=$OUT/llmc-soak
mkdir -p "$OUT"
[ -x "$SOAK" ] || { echo "soak: $SOAK missing (make soak builds it)" >&2; exit 2; }
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
fail=0
for kv in f32 f16 int8; do
    plan=$OUT/tiny-$kv.plan
    "$BUILD/llmc" compile models/tiny-llama.onnx --tokenizer models/tokenizer.json --quiet \
        --max-context "$CONTEXT" --kv-cache "$kv" -o "$plan" >/dev/null || exit 1
done
run() { # NAME PLAN [FLAGS...]: one soak, its log and its summary
    local name=$1 plan=$2
    shift 2
    /usr/bin/time -f "%e s wall, %U s user, max RSS %M KiB" -o "$OUT/$name.time" \
        "$SOAK" "$plan" --tokens "$TOKENS" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    echo "== $name (exit $rc): $(cat "$OUT/$name.time")"
    grep -E '^(tokens|rss after|last reference|soak)' "$OUT/$name.log" | sed 's/^/   /'
    [ $rc -eq 0 ] || fail=1
}
for kv in f32 f16 int8; do
    run "kv-$kv" "$OUT/tiny-$kv.plan"
done
run "kv-f32-reverify-1000" "$OUT/tiny-f32.plan" --reverify 1000
echo "== one re-verification of the plan ($(stat -c %s "$OUT/tiny-f32.plan") bytes)"
"$SOAK" "$OUT/tiny-f32.plan" --bench-reverify 50 || fail=1
echo "cpu load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $fail
