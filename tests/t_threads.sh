#!/usr/bin/env bash
# Determinism across thread counts: for each family's tiny opset-17
# export, `llmc compile --threads 1, 2, 4` writes byte-identical plans, and
# `llmc run --threads 1, 2, 4` on a 7-token prompt + 32 greedy steps prints
# the same ids and writes byte-identical --logits-out files, and so does the
# plan read into huge pages (--hugepages) instead of mapped.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
WORK=$BUILD/test-data/threads
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
. tests/zoo.sh

PROMPT=3,14,15,92,65,35,89
THREADS="1 2 4"

# same_files A B...: every file byte-identical to A
same_files() {
    local first=$1 f; shift
    for f in "$@"; do cmp "$first" "$f" || return 1; done
}

# same_ids A B...: A holds 32 ids and every file is byte-identical to it
same_ids() {
    cat "$1"
    [ "$(wc -w <"$1")" -eq 32 ] && same_files "$@"
}

for family in llama qwen2 gpt2 phi; do
    model=$(zoo_model "$family" 17) || { check "$family@17 exports" false; continue; }
    plans=() ids=() logits=()
    for t in $THREADS; do
        plan=$WORK/$family-t$t.plan
        "$LLMC" compile "$model" -o "$plan" --max-context 64 --threads "$t" >"$WORK/$family-c$t.log" 2>&1
        plans+=("$plan")
    done
    check "$family@17: compile --threads $THREADS gives byte-identical plans" same_files "${plans[@]}"
    for t in $THREADS; do
        out=$WORK/$family-r$t
        "$LLMC" run "${plans[0]}" --prompt-ids "$PROMPT" --max-new 32 --threads "$t" \
            --logits-out "$out.logits" >"$out.ids" 2>"$out.err"
        ids+=("$out.ids") logits+=("$out.logits")
    done
    out=$WORK/$family-huge
    "$LLMC" run "${plans[0]}" --prompt-ids "$PROMPT" --max-new 32 --threads 2 --hugepages \
        --logits-out "$out.logits" >"$out.ids" 2>"$out.err"
    ids+=("$out.ids") logits+=("$out.logits")
    check "$family@17: run --threads $THREADS (and 2 with --hugepages) prints 32 greedy ids, the same" \
        same_ids "${ids[@]}"
    check "$family@17: run --threads $THREADS (and 2 with --hugepages) writes byte-identical logits" \
        same_files "${logits[@]}"
done

check "--threads 0 is a usage error (exit 2)" \
    bash -c '"$0" run "$1" --prompt-ids 1 --threads 0; [ $? -eq 2 ]' "$LLMC" "$WORK/llama-t1.plan"
check "compile --threads x is a usage error (exit 2)" \
    bash -c '"$0" compile m.onnx -o p --threads x; [ $? -eq 2 ]' "$LLMC"
tap_done
