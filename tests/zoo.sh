# The test zoo's tiny exports (sourced).  `zoo_model FAMILY OPSET` prints the
# path of scripts/export_llm.py's tiny model of that family and opset with
# seed 0, exporting it into $BUILD/models unless a copy at least as new as the
# exporter is cached there (the names are those tests/t_e2e_llm.sh uses, so
# the tests share one cache).  Exports are byte-deterministic: same seed,
# same torch, same bytes.
zoo_model() {
    local family=$1 opset=$2
    local out=${BUILD:-build}/models/$family-op$opset-s0.onnx
    mkdir -p "$(dirname "$out")"
    if [ ! -s "$out" ] || [ ! "$out" -nt scripts/export_llm.py ]; then
        /usr/bin/python3 scripts/export_llm.py --family "$family" --opset "$opset" --size tiny --seed 0 \
            --out "$out.tmp.onnx" >"$out.log" 2>&1 && mv "$out.tmp.onnx" "$out" || { cat "$out.log" >&2; return 1; }
    fi
    echo "$out"
}

# The models tests/golden/ blesses: family@opset (gpt2's older opset is 13).
ZOO="llama@14 llama@17 qwen2@14 qwen2@17 gpt2@13 gpt2@17 phi@14 phi@17"
GOLDEN_MAX_CONTEXT=256

# zoo_compile SPEC DIR: exports SPEC (family@opset) and compiles it into
# DIR/plan with the pass dumps in DIR/dumps; writes DIR/digests, the text
# tests/golden/ keeps:
#   onnx <xxh64 of the exported .onnx>
#   dump <NN-pass.txt> <xxh64 of that canonical dump>   (one per pass, in order)
#   plan <xxh64 of the plan file>
zoo_compile() {
    local spec=$1 dir=$2 model f
    model=$(zoo_model "${spec%@*}" "${spec#*@}") || return 1
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

# The golden files of SPEC: tests/golden/<family>-op<opset>.{digests,dumps.tar.xz}
zoo_golden() { echo "tests/golden/${1%@*}-op${1#*@}"; }
