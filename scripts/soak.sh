#!/usr/bin/env bash
# make soak: the trained model (models/tiny-llama.onnx, its tokenizer) for
# every KV cache dtype, SOAK_TOKENS generated tokens (default 100,000)
# through repeated full contexts of SOAK_CONTEXT positions (default 256, the
# training window) by tests/soak/soak.c, which samples the RSS every 1,000
# tokens and fails on growth after the warm-up or on drift (docs/testing.md,
# "Soak and re-verification"); beside them the f32-cache plan for
# SOAK_REVERIFY_TOKENS (default 20,000) with the session option "re-verify
# every 1,000 tokens"; then the time of one re-verification of the plan.  Logs in $BUILD/soak/; exits non-zero if any
# run fails.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TOKENS=${SOAK_TOKENS:-100000}
REVERIFY_TOKENS=${SOAK_REVERIFY_TOKENS:-20000}
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
# The runs go side by side (each is one thread): on a shared machine their
# wall times stretch with the load, their user CPU times compare.
run() { # NAME PLAN TOKENS [FLAGS...]: one soak in the background, its log and times
    local name=$1 plan=$2 tokens=$3
    shift 3
    /usr/bin/time -f "%e s wall, %U s user, max RSS %M KiB" -o "$OUT/$name.time" \
        "$SOAK" "$plan" --tokens "$tokens" "$@" >"$OUT/$name.log" 2>&1 &
}
report() { # NAME: its summary; fail=1 if it failed
    local name=$1
    echo "== $name: $(cat "$OUT/$name.time")"
    grep -E '^(tokens|rss after|anonymous|last reference|soak)' "$OUT/$name.log" | sed 's/^/   /'
    grep -q '^soak ok' "$OUT/$name.log" || fail=1
}
for kv in f32 f16 int8; do
    run "kv-$kv" "$OUT/tiny-$kv.plan" "$TOKENS"
done
run "kv-f32-reverify-1000" "$OUT/tiny-f32.plan" "$REVERIFY_TOKENS" --reverify 1000
wait
for name in kv-f32 kv-f16 kv-int8 kv-f32-reverify-1000; do
    report "$name"
done
echo "== one re-verification of the plan ($(stat -c %s "$OUT/tiny-f32.plan") bytes)"
"$SOAK" "$OUT/tiny-f32.plan" --bench-reverify 50 || fail=1
echo "cpu load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $fail
