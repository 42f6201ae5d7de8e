#!/usr/bin/env bash
# Decode cost does not grow with the context: with attention fused, the
# bytes the runtime moves per decode step (written by ops, copied, appended
# to the KV cache; not the cache rows attention reads) are the same at every
# position.  For each family of the test zoo: a 64-token prompt, then 150
# decode steps (crossing the 64-position KV chunks at 128 and 192), read
# from `llmc run --stats`.
set -u
cd "$(dirname "$0")/.."
. tests/tap.sh
. tests/zoo.sh
BUILD=${BUILD:-build}
WORK=$BUILD/decode_bytes
mkdir -p "$WORK"
PROMPT=$(seq -s, 0 63 | awk -F, '{for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? "," : ""), ($i * 37 + 11) % 512}')

# Every decode line has the same bytes_moved, and the KV chunks in use grew.
constant_decode_bytes() {
    local stats=$1
    awk '/ decode / {sub("bytes_moved=", "", $5); b[$5]++; n++; split($6, c, "[=/]"); last = c[2]}
         / prompt / {split($6, c, "[=/]"); first = c[2]}
         END {for (k in b) distinct++; print n " decode steps, bytes per step: " (distinct == 1 ? k : distinct " different values") ", KV chunks " first " -> " last;
              exit !(n == 150 && distinct == 1 && last > first)}' "$stats"
}

summary=""
for spec in llama@17 qwen2@17 gpt2@17 phi@17; do
    family=${spec%@*} opset=${spec#*@}
    model=$(zoo_model "$family" "$opset")
    plan=$WORK/$family-op$opset.plan stats=$WORK/$family-op$opset.stats
    check "$spec compiles with every layer's attention fused" sh -c \
        "'$BUILD/llmc' compile '$model' -o '$plan' --max-context 256 | grep -q 'layers fused' && \
         '$BUILD/llmc' inspect '$plan' --json | grep -q '\"Attention\": 2'"
    "$BUILD/llmc" run "$plan" --prompt-ids "$PROMPT" --max-new 151 --stats >/dev/null 2>"$stats"
    check "$spec: bytes moved per decode step independent of the context" constant_decode_bytes "$stats"
    summary="$summary $spec=$(awk '/ decode / {sub("bytes_moved=", "", $5); print $5; exit}' "$stats")B"
done
echo "# summary: bytes moved per decode step:$summary"
tap_done
