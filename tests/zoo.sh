# The test zoo's tiny exports (sourced).  `zoo_model FAMILY OPSET [STYLE]`
# prints the path of scripts/export_llm.py's tiny model of that family,
# opset and style (plain, the default, or hf: transformers' modeling code)
# with seed 0, exporting it into $BUILD/models unless a copy at least as new
# as the exporter is cached there (the names are those tests/t_e2e_llm.sh
# uses, so the tests share one cache).  Exports are byte-deterministic:
# same seed, same torch, same bytes.
zoo_model() {
    local family=$1 opset=$2 style=${3:-plain}
    local out=${BUILD:-build}/models/$family-op$opset$([ "$style" = plain ] || echo "-$style")-s0.onnx
    mkdir -p "$(dirname "$out")"
    if [ ! -s "$out" ] || [ ! "$out" -nt scripts/export_llm.py ]; then
        /usr/bin/python3 scripts/export_llm.py --family "$family" --opset "$opset" --style "$style" --size tiny \
            --seed 0 --out "$out.tmp.onnx" >"$out.log" 2>&1 && mv "$out.tmp.onnx" "$out" || { cat "$out.log" >&2; return 1; }
    fi
    echo "$out"
}

# The models tests/golden/ blesses: family@opset[:hf] (gpt2's older opset is
# 13 in the plain style).
ZOO="llama@14 llama@17 qwen2@14 qwen2@17 gpt2@13 gpt2@17 phi@14 phi@17
     llama@14:hf llama@17:hf qwen2@14:hf qwen2@17:hf gpt2@14:hf gpt2@17:hf phi@14:hf phi@17:hf"

# zoo_spec_model SPEC: zoo_model for family@opset[:style]
zoo_spec_model() {
    local spec=${1%:*} style=plain
    [ "$spec" != "$1" ] && style=${1#*:}
    zoo_model "${spec%@*}" "${spec#*@}" "$style"
}
GOLDEN_MAX_CONTEXT=256

# zoo_compile SPEC DIR: exports SPEC (family@opset) and compiles it into
# DIR/plan with the pass dumps in DIR/dumps; writes DIR/digests, the text
# tests/golden/ keeps:
#   onnx <xxh64 of the exported .onnx>
#   dump <NN-pass.txt> <xxh64 of that canonical dump>   (one per pass, in order)
#   plan <xxh64 of the plan file>
zoo_compile() {
    local spec=$1 dir=$2 model f
    model=$(zoo_spec_model "$spec") || return 1
    rm -rf "$dir" && mkdir -p "$dir"
    "${BUILD:-build}/llmc" compile "$model" -o "$dir/plan" --max-context "$GOLDEN_MAX_CONTEXT" \
        --dump-passes "$dir/dumps" >"$dir/compile.log" 2>&1 || { cat "$dir/compile.log" >&2; return 1; }
    {
        echo "onnx $(xxhsum -q -H64 "$model" | cut -d' ' -f1)"
        for f in "$dir"/dumps/*.txt; do
            echo "dump $(basename "$f") $(xxhsum -q -H64 "$f" | cut -d' ' -f1)"
        done
        echo "plan $(xxhsum -q -H64 "$dir/plan" | cut -d' ' -f1)"
    } >"$dir/digests"
}

# The golden files of SPEC: tests/golden/<family>-op<opset>[-hf].{digests,dumps.tar.xz}
zoo_golden() {
    local spec=${1%:*}
    echo "tests/golden/${spec%@*}-op${spec#*@}$([ "$spec" = "$1" ] || echo "-${1#*:}")"
}
