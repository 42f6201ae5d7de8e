#!/usr/bin/env bash
# The rewriting passes on the exported families (TAP):
#   - cse leaves no two llmc.Symbols nodes with the same values, where
#     dead-code left duplicates (every family at opsets 14 and 17);
#   - on LoRA variants (rank-4 adapters on q and v in the naive order),
#     lora-reorder's record in `llmc inspect` reports the MACs and bytes it
#     saved, no MatMul of the two factors is left, and greedy tokens and
#     logits still match ONNX Runtime (as tests/t_e2e_llm.sh checks).
# Models come from the tests' cache (tests/zoo.sh), shared with t_e2e_llm.sh.
# "# summary:" lines give node counts before and after cse.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
PROMPT=5,17,42,7
MAX_NEW=16
VOCAB=512
WORK=$BUILD/test-data/passes_rewrite
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
. tests/zoo.sh

# export_failed LOG: a failed export, its exporter output shown
export_failed() { cat "$1"; false; }

# The "values=[...]" attribute lines of the Symbols nodes in a pass dump.
symbols_values() {
    grep -A1 '^node   llmc.Symbols' "$1" | grep -o 'values=\[[^]]*\]'
}

# cse_merges_symbols DUMP_DIR: dead-code left duplicate Symbols, cse none.
cse_merges_symbols() {
    local before after
    before=$(symbols_values "$1"/*-dead-code.txt | sort | uniq -d | wc -l)
    after=$(symbols_values "$1"/*-cse.txt | sort | uniq -d | wc -l)
    echo "duplicated Symbols values: $before after dead-code, $after after cse"
    [ "$before" -gt 0 ] && [ "$after" -eq 0 ]
}

# compile_logged LOG MODEL PLAN DUMP_DIR: `llmc compile`, output in LOG
# (shown on failure).
compile_logged() {
    "$LLMC" compile "$2" -o "$3" --max-context 256 --dump-passes "$4" >"$1" 2>&1 || { cat "$1"; return 1; }
}

# pass_row LOG PASS: "NODES nodes[ (DETAIL)]" from `llmc compile`'s pass
# table (columns: index, pass, nodes, digest, what it did).
pass_row() {
    awk -v pass="$2" '$2 == pass { d = ""; for (i = 5; i <= NF; i++) d = d (i > 5 ? " " : "") $i
                                   printf "%s nodes%s", $3, d == "" ? "" : " (" d ")" }' "$1"
}

for family in llama qwen2 gpt2 phi; do
    for opset in 14 17; do
        base=$WORK/$family-op$opset
        if ! model=$(zoo_model "$family" "$opset" 2>"$base.export.log"); then
            check "$family opset $opset: export" export_failed "$base.export.log"
            continue
        fi
        check "$family opset $opset: compiles with pass dumps" \
            compile_logged "$base.log" "$model" "$base.plan" "$base.dump"
        check "$family opset $opset: cse merges the duplicate Symbols nodes" cse_merges_symbols "$base.dump"
        echo "# summary: $family opset $opset: after dead-code $(pass_row "$base.log" dead-code)," \
             "after cse $(pass_row "$base.log" cse)"
    done
done

run_ort() {   # ONNX Runtime's reference, from the tests' cache (tests/cache.sh)
    ort_generate "$1" "$2.ort.bin" --prompt-ids "$PROMPT" --max-new "$MAX_NEW" \
        >"$2.ort.tok" 2>"$2.ort.log"
}

run_llmc() {
    "$LLMC" run "$1" --prompt-ids "$PROMPT" --max-new "$MAX_NEW" --logits-out "$2.llmc.bin" >"$2.llmc.tok"
}

# reports_reduction PLAN: inspect shows lora-reorder's "N bypasses: A -> B
# MACs/token, C -> D weight bytes" with N > 0, B < A and D < C.
reports_reduction() {
    local line
    line=$("$LLMC" inspect "$1" | grep '^  lora-reorder ')
    echo "$line"
    echo "$line" | awk '{
        for (i = 1; i <= NF; i++) if ($i == "bypasses:") n = $(i - 1) + 0
        match($0, /: [0-9]+ -> [0-9]+ MACs/); split(substr($0, RSTART + 2, RLENGTH - 7), m, " -> ")
        match($0, /, [0-9]+ -> [0-9]+ weight/); split(substr($0, RSTART + 2, RLENGTH - 9), b, " -> ")
        exit !(n > 0 && m[2] + 0 < m[1] + 0 && b[2] + 0 < b[1] + 0)
    }'
}

# factor_products DUMP: MatMuls reading two LoRA factors (the exporter's
# lora_a / lora_b initializers).
factor_products() {
    grep -cE '^node   MatMul .*\([^,]*\.lora_[ab], [^,]*\.lora_[ab]\)' "$1"
}

# no_factor_product DUMP_DIR: shape inference saw such MatMuls, lora-reorder
# left none.
no_factor_product() {
    local before after
    before=$(factor_products "$1"/*-shape-inference.txt)
    after=$(factor_products "$1"/*-lora-reorder.txt)
    echo "MatMuls of two LoRA factors: $before before lora-reorder, $after after"
    [ "$before" -gt 0 ] && [ "$after" -eq 0 ]
}

for family in llama qwen2 gpt2 phi; do
    base=$WORK/$family-op17-lora
    name="$family opset 17 LoRA"
    if ! model=$(zoo_export "$family-op17-lora-s0" --family "$family" --opset 17 --size tiny --seed 0 \
            --lora 2>"$base.export.log"); then
        check "$name: export" export_failed "$base.export.log"
        continue
    fi
    check "$name: compiles" compile_logged "$base.log" "$model" "$base.plan" "$base.dump"
    check "$name: lora-reorder reports fewer MACs and weight bytes" reports_reduction "$base.plan"
    check "$name: no product of the two factors is left" no_factor_product "$base.dump"
    echo "# summary: $name: lora-reorder $(pass_row "$base.log" lora-reorder)"
    check "$name: onnxruntime generates" run_ort "$model" "$base"
    check "$name: llmc generates" run_llmc "$base.plan" "$base"
    check "$name: tokens match onnxruntime" cmp "$base.ort.tok" "$base.llmc.tok"
    check "$name: logits within 1e-4 of onnxruntime" \
        "$PY" scripts/compare_logits.py "$base.ort.bin" "$base.llmc.bin" --vocab "$VOCAB" --rtol 1e-4
done
tap_done
