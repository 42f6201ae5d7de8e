# The test zoo's tiny exports (sourced).  `zoo_model FAMILY OPSET [OPTION]`
# prints the path of scripts/export_llm.py's tiny model of that family and
# opset with seed 0, exporting it into the tests' cache (tests/cache.sh:
# ${LLMC_CACHE:-build/cache}/zoo, shared by every build folder) unless it is
# there.  OPTION: plain (the default: our own torch modules), hf (--style hf:
# transformers' modeling code and optimum's interface), sdpa (hf with the
# SDPA attention and bool mask optimum's current exports have), triu /
# where-additive (--mask: a torch.triu mask; GPT-2's Where(bias, 0, -1e9)
# added to the scores), single / per-tensor (--external: the weights in one
# data file with offsets, or one file per tensor, beside DIR/model.onnx),
# genai (scripts/export_genai.py: onnxruntime-genai's model-builder graph,
# GroupQueryAttention and the RMS norm contrib ops), genai-rotary (the same
# with RotaryEmbedding nodes: --rotary separate), genai-softcap (genai with
# GroupQueryAttention's softcap 2: Gemma 2's score cap), genai-longrope (phi3:
# LongRoPE's If between two cos/sin cache pairs: --longrope).
# hf-no-past (--style hf --no-past: no past inputs, optimum's decoder_model).
# phi4 (phi3 only: --style hf --size tiny-phi4, Phi-4-mini's shape: grouped-query
# attention, rotary fraction 0.75, LongRoPE, tied lm_head).
# Exports are byte-deterministic: same seed, same torch, same bytes.
. tests/cache.sh

# ZOO_ENV: the Debian packages an export depends on, with their versions.
ZOO_ENV=${ZOO_ENV:-$(dpkg-query -W python3-torch python3-onnx python3-numpy python3-minimal 2>&1 | tr '\n\t' '  ')}

# zoo_export NAME ARG...: prints the path of the model.onnx that
# `scripts/export_llm.py ARG... --out DIR/model.onnx` writes (with its
# external data files, if any, beside it in DIR), exported into the cache
# unless there.  The key: ARG..., the exporter's sources and ZOO_ENV; NAME
# is for people reading the cache.
zoo_export() {
    zoo_export_with export_llm "$@"
}
# zoo_export_with EXPORTER NAME ARG...: the same with scripts/EXPORTER.py
# (export_llm or export_genai, which reads export_llm's models).
zoo_export_with() {
    local exporter=$1 dir
    dir=$(zoo_entry "$@") || return 1
    shift 2
    cache_fill "$dir" zoo_export_into "$exporter" "$@" || return 1
    echo "$dir/model.onnx"
}
# zoo_entry EXPORTER NAME ARG...: the cache folder of that export.
zoo_entry() {
    local exporter=$1 name=$2 key sources=(scripts/export_llm.py scripts/hf_models.py scripts/onnx_opset_upgrade.py)
    shift 2
    [ "$exporter" = export_llm ] || sources+=("scripts/$exporter.py")
    key=$(cache_digest "$exporter $* | $ZOO_ENV" "${sources[@]}") || return 1
    echo "$LLMC_CACHE/zoo/$name-$key"
}
zoo_export_into() {   # zoo_export_into DIR EXPORTER ARG...
    local dir=$1 exporter=$2
    shift 2
    /usr/bin/python3 "scripts/$exporter.py" "$@" --out "$dir/model.onnx" >"$dir/export.log" 2>&1 ||
        { cat "$dir/export.log" >&2; return 1; }
}

zoo_model() {
    local export
    export=$(zoo_model_export "$@") || return 1
    eval "zoo_export_with $export"
}
# zoo_model_export FAMILY OPSET [OPTION]: zoo_export_with's arguments for
# that model, quoted for eval.
zoo_model_export() {
    local family=$1 opset=$2 option=${3:-plain} args=() genai=()
    case $option in
        plain) ;;
        hf) args=(--style hf) ;;
        sdpa) args=(--style hf --attn sdpa) ;;
        triu|where-additive) args=(--mask "$option") ;;
        single|per-tensor) args=(--external "$option") ;;
        genai) genai=(--seed 0) ;;
        genai-rotary) genai=(--rotary separate --seed 0) ;;
        genai-softcap) genai=(--softcap 2.0 --seed 0) ;;
        genai-longrope) genai=(--longrope --seed 0) ;;
        hf-no-past) args=(--style hf --no-past) ;;
        phi4) args=(--style hf --size tiny-phi4) ;;
        *) echo "zoo_model: unknown option '$option'" >&2; return 1 ;;
    esac
    if [ ${#genai[@]} -gt 0 ]; then
        printf '%q ' export_genai "$family-op$opset-$option-s0" --family "$family" --opset "$opset" "${genai[@]}"
    else
        printf '%q ' export_llm "$family-op$opset$([ "$option" = plain ] || echo "-$option")-s0" \
            --family "$family" --opset "$opset" --size tiny --seed 0 "${args[@]}"
    fi
}

# zoo_prefetch SPEC...: exports the models of the specs (family@opset[:option])
# that are not in the cache yet in one python process (scripts/export_batch.py:
# torch imported once, not once per model), each into its cache entry.
zoo_prefetch() {
    local spec export manifest
    manifest=$(mktemp) || return 1
    for spec in "$@"; do
        local model=${spec%:*} option=plain dir
        [ "$model" != "$spec" ] && option=${spec#*:}
        export=$(zoo_model_export "${model%@*}" "${model#*@}" "$option") || continue
        eval "set -- $export"
        dir=$(zoo_entry "$@") || continue
        [ -d "$dir" ] || printf '%s\t%s\n' "$dir" "$(printf '%q ' "$1" "${@:3}")" >>"$manifest"
    done
    [ -s "$manifest" ] && /usr/bin/python3 scripts/export_batch.py "$manifest" >/dev/null 2>&1
    rm -f "$manifest"
    return 0
}

# zoo_merged FAMILY OPSET: optimum's decoder_model_merged.onnx of the
# family (scripts/merge_decoders.py on the hf-no-past and hf exports).
zoo_merged() {
    local no_past with_past key dir
    no_past=$(zoo_model "$1" "$2" hf-no-past) && with_past=$(zoo_model "$1" "$2" hf) || return 1
    key=$(cache_digest "merge_decoders | $ZOO_ENV" scripts/merge_decoders.py "$no_past" "$with_past") || return 1
    dir=$LLMC_CACHE/zoo/$1-op$2-merged-$key
    cache_fill "$dir" zoo_merge_into "$no_past" "$with_past" || return 1
    echo "$dir/model.onnx"
}
zoo_merge_into() {   # zoo_merge_into DIR NO_PAST WITH_PAST
    /usr/bin/python3 scripts/merge_decoders.py "$2" "$3" --out "$1/model.onnx" >"$1/merge.log" 2>&1 ||
        { cat "$1/merge.log" >&2; return 1; }
}

# The models tests/golden/ blesses: family@opset[:hf] (gpt2's older opset is
# 13 in the plain style).
ZOO="llama@14 llama@17 qwen2@14 qwen2@17 gpt2@13 gpt2@17 phi@14 phi@17
     llama@14:hf llama@17:hf qwen2@14:hf qwen2@17:hf gpt2@14:hf gpt2@17:hf phi@14:hf phi@17:hf
     qwen3@14 qwen3@17 qwen3@17:hf
     llama32@17 llama32@17:hf smollm2@17 smollm3@17 smollm3@17:hf granite@17 granite@17:hf olmo2@17 olmo2@17:hf
     phi3@17 phi3@17:hf phi3@17:phi4
     mistral@17 mistral@17:hf
     gemma2@17 gemma2@17:hf gemma3@17 gemma3@17:hf"

# zoo_spec_model SPEC: zoo_model for family@opset[:option]
zoo_spec_model() {
    local spec=${1%:*} option=plain
    [ "$spec" != "$1" ] && option=${1#*:}
    zoo_model "${spec%@*}" "${spec#*@}" "$option"
}
GOLDEN_MAX_CONTEXT=256

# zoo_compile SPEC DIR: exports SPEC (family@opset) and compiles it into
# DIR/plan with the pass dumps in DIR/dumps; writes DIR/digests, the text
# tests/golden/ keeps:
#   onnx <xxh64 of the exported .onnx>
#   dump <NN-pass.txt> <xxh64 of that canonical dump>   (one per pass, in order)
#   plan <xxh64 of the plan file>
# The target is pinned to generic: the default (this machine's best) would
# make the blessed plans depend on the CPU that blesses them.
zoo_compile() {
    local spec=$1 dir=$2 model f
    model=$(zoo_spec_model "$spec") || return 1
    rm -rf "$dir" && mkdir -p "$dir"
    "${BUILD:-build}/llmc" compile "$model" -o "$dir/plan" --max-context "$GOLDEN_MAX_CONTEXT" \
        --target generic --dump-passes "$dir/dumps" >"$dir/compile.log" 2>&1 || { cat "$dir/compile.log" >&2; return 1; }
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
