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
