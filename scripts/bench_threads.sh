#!/usr/bin/env bash
# `llmc run --threads 1` against `--threads 2` (or THREADS="1 2 4"): median
# wall time of RUNS runs each, side by side, and a check that every run
# printed the same ids.  The model is the Qwen2-0.5B shape (hidden 896, 14
# heads, 2 KV heads, MLP 4864, vocab 151936) cut to LAYERS decoder layers
# (default 4; ~1.3 GB of fp32 weights, most of it the embedding and the
# untied LM head), exported once into $BUILD/bench.  Two workloads: a
# PROMPT_LEN-token prompt with 1 new token (prefill) and a 4-token prompt
# with MAX_NEW new tokens (decode).  Not part of `make check`.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LAYERS=${LAYERS:-4}
RUNS=${RUNS:-5}
THREADS=${THREADS:-"1 2"}
PROMPT_LEN=${PROMPT_LEN:-128}
MAX_NEW=${MAX_NEW:-32}
DIR=$BUILD/bench
MODEL=$DIR/qwen2-0.5b-l$LAYERS.onnx
PLAN=$DIR/qwen2-0.5b-l$LAYERS.plan
mkdir -p "$DIR"
if [ ! -s "$MODEL" ]; then
    echo "== export qwen2-0.5b shape, $LAYERS layers"
    /usr/bin/python3 scripts/export_llm.py --family qwen2 --opset 17 --size qwen2-0.5b --layers "$LAYERS" \
        --seed 0 --external single --out "$MODEL" >"$DIR/export.log"
fi
[ -s "$PLAN" ] && [ "$PLAN" -nt "$MODEL" ] && [ "$PLAN" -nt "$BUILD/llmc" ] ||
    "$BUILD/llmc" compile "$MODEL" -o "$PLAN" --max-context 512 --threads 2 | tail -1

# median of the RUNS wall times (seconds) of `llmc run ... --threads T`
median_run() {
    local t=$1 ids=$2; shift 2
    local i times=()
    for ((i = 0; i < RUNS; i++)); do
        local s e
        s=$(date +%s.%N)
        "$BUILD/llmc" run "$PLAN" --threads "$t" "$@" >"$ids"
        e=$(date +%s.%N)
        times+=("$(echo "$e - $s" | bc)")
    done
    printf '%s\n' "${times[@]}" | sort -g | sed -n "$(((RUNS + 1) / 2))p"
}

bench() {
    local what=$1; shift
    local base="" t m first=""
    printf '%-34s' "$what"
    for t in $THREADS; do
        m=$(median_run "$t" "$DIR/ids-t$t.txt" "$@")
        [ -n "$base" ] || base=$m
        [ -n "$first" ] || first=$DIR/ids-t$t.txt
        cmp -s "$first" "$DIR/ids-t$t.txt" || { echo; echo "ids differ at --threads $t"; exit 1; }
        printf '  %d thr: %6.3f s (x%.2f)' "$t" "$m" "$(echo "$base / $m" | bc -l)"
    done
    echo
}

prompt=$(seq -s, 1 "$PROMPT_LEN")
echo "== $(nproc) cores; median of $RUNS runs; the same ids at every thread count"
bench "prefill $PROMPT_LEN tokens + 1 new" --prompt-ids "$prompt" --max-new 1
bench "prompt 4 + decode $MAX_NEW tokens" --prompt-ids 5,17,42,7 --max-new "$MAX_NEW"
