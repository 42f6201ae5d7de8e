#!/usr/bin/env bash
# `llmc compile FOLDER` on the layouts the Hugging Face Hub serves, built
# from the test zoo's llama and qwen2 exports (tests/zoo.sh) and the tiny
# tokenizer (tests/make_tiny_tokenizer.py): transformers.js (onnx/model.onnx
# and its 7 model_<variant>.onnx, the legacy decoder_model_merged*.onnx),
# onnxruntime-genai (genai_config.json naming the file), optimum
# (model.onnx, decoder_with_past_model.onnx + decoder_model.onnx), with
# external data in model.onnx.data, model.onnx_data, and split over
# model_q4f16.onnx_data and _data_1.  Each pick gives the plan bytes of
# compiling that file directly with --tokenizer the folder's tokenizer.json
# (llama and qwen2 files stand under different names, so a wrong pick
# shows); the folder's tokenizer encodes in the plan as the JSON file does;
# the split external data runs to the logits of the inline model, bit for
# bit; ambiguous folders, unknown --variant values and folders without a
# model are refused with the candidates or the layouts searched, and
# nothing is written (a folder's tokenizer llmc refuses, with a pointer to
# --no-tokenizer); the candidates are listed sorted whatever order the
# directory holds them in.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
WORK=$BUILD/test-data/folder
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
. tests/zoo.sh
LLAMA=$(zoo_model llama 17) && QWEN=$(zoo_model qwen2 17) && SINGLE=$(zoo_model llama 17 single) ||
    { echo "Bail out! cannot export the zoo models"; exit 1; }
TOK=$WORK/tok SP=$WORK/tok-sp
$PY tests/make_tiny_tokenizer.py "$TOK" >/dev/null &&
    $PY tests/make_tiny_tokenizer.py "$SP" --style sentencepiece >/dev/null ||
    { echo "Bail out! cannot write the tokenizers"; exit 1; }
OPTS=(--max-context 64 --target generic --quiet)

hub_files() {   # hub_files DIR: tokenizer.json, tokenizer_config.json, config.json at its top
    mkdir -p "$1" && cp "$TOK/tokenizer.json" "$TOK/tokenizer_config.json" "$1/" &&
        echo '{"model_type": "llama"}' >"$1/config.json"
}

# externalize SRC OUT.onnx DATA N: SRC re-saved as OUT.onnx with every
# initializer in external data, spread over DATA, DATA_1, ... DATA_{N-1}
# beside it (round robin), as the transformers.js exports split theirs.
externalize() {
    $PY - "$@" <<'PYEOF'
import os, sys
import onnx
from onnx import numpy_helper
from onnx.external_data_helper import set_external_data
src, out, name, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
model = onnx.load(src)
files = [name] + [f"{name}_{k}" for k in range(1, n)]
outs = [open(os.path.join(os.path.dirname(out), f), "wb") for f in files]
for i, t in enumerate(model.graph.initializer):
    moved = numpy_helper.from_array(numpy_helper.to_array(t), t.name)
    data, f = moved.raw_data, outs[i % n]
    offset = f.tell()
    f.write(data)
    set_external_data(moved, files[i % n], offset=offset, length=len(data))
    moved.ClearField("raw_data")
    moved.data_location = onnx.TensorProto.EXTERNAL
    t.CopyFrom(moved)
for f in outs:
    f.close()
onnx.save_model(model, out)
PYEOF
}

# picks FOLDER FILE [options...]: compiling FOLDER gives the plan bytes of
# compiling FOLDER/FILE with --tokenizer FOLDER/tokenizer.json (the options
# apply to both; a --tokenizer or --no-tokenizer among them replaces that).
picks() {
    local dir=$1 file=$2 tok=(--tokenizer "$1/tokenizer.json") o
    shift 2
    for o in "$@"; do case $o in --tokenizer|--no-tokenizer) tok=() ;; esac; done
    rm -f "$WORK/folder.plan" "$WORK/file.plan"
    "$LLMC" compile "$dir" -o "$WORK/folder.plan" "${OPTS[@]}" "$@" 2>"$WORK/picked.txt" >/dev/null ||
        { cat "$WORK/picked.txt"; return 1; }
    cat "$WORK/picked.txt"
    local plain=() skip=0
    for o in "$@"; do   # the options without --variant NAME and --no-tokenizer
        [ $skip = 1 ] && { skip=0; continue; }
        case $o in --variant) skip=1 ;; --no-tokenizer) ;; *) plain+=("$o") ;; esac
    done
    "$LLMC" compile "$dir/$file" -o "$WORK/file.plan" "${OPTS[@]}" "${tok[@]}" "${plain[@]}" >/dev/null &&
        cmp "$WORK/folder.plan" "$WORK/file.plan"
}

# refused CODE PATTERN FOLDER [options...]: exit code, message, nothing at -o
refused() {
    local want=$1 pattern=$2; shift 2
    rm -f "$WORK/bad.plan"
    "$LLMC" compile "$@" -o "$WORK/bad.plan" "${OPTS[@]}" >"$WORK/bad.out" 2>&1
    local got=$?
    cat "$WORK/bad.out"
    [ "$got" -eq "$want" ] && grep -q -- "$pattern" "$WORK/bad.out" && [ ! -e "$WORK/bad.plan" ]
}

# ---- transformers.js: onnx/ with 8 variants, llama and qwen2 alternating
TJS=$WORK/tjs
VARIANTS="fp32 fp16 q4 q4f16 quantized int8 uint8 bnb4"
hub_files "$TJS" && mkdir -p "$TJS/onnx"
i=0
for v in $VARIANTS; do
    f=model_$v.onnx
    [ $v = fp32 ] && f=model.onnx
    [ $((i % 2)) = 0 ] && ln -s "$(realpath "$QWEN")" "$TJS/onnx/$f" || ln -s "$(realpath "$LLAMA")" "$TJS/onnx/$f"
    i=$((i + 1))
done
check "transformers.js, 8 variants and no --variant: refused, listing each with its --variant" \
    refused 2 "holds 8 ONNX models; choose one with --variant: fp32 (onnx/model.onnx), bnb4 (onnx/model_bnb4.onnx), fp16 (onnx/model_fp16.onnx), int8 (onnx/model_int8.onnx), q4 (onnx/model_q4.onnx), q4f16 (onnx/model_q4f16.onnx), quantized (onnx/model_quantized.onnx), uint8 (onnx/model_uint8.onnx)" \
    "$TJS"
for v in $VARIANTS; do
    f=model_$v.onnx
    [ $v = fp32 ] && f=model.onnx
    check "transformers.js --variant $v: onnx/$f, the plan of the file with --tokenizer" \
        picks "$TJS" "onnx/$f" --variant $v
done
check "transformers.js: --variant takes the file's name too" picks "$TJS" onnx/model_q4.onnx --variant model_q4.onnx
check "stderr says the model, layout, variant and tokenizer picked" \
    grep -q "^llmc compile: $TJS: model $TJS/onnx/model_q4.onnx (transformers.js, variant q4), tokenizer $TJS/tokenizer.json\$" \
    "$WORK/picked.txt"
check "an unknown --variant is refused, listing what there is" \
    refused 2 "'$TJS' has no model of --variant 'q8'; it has: fp32 (onnx/model.onnx), bnb4 (onnx/model_bnb4.onnx)" "$TJS" --variant q8
check "--variant with a file is a usage error" refused 2 "--variant picks a model in a folder" "$LLAMA" --variant q4

# the tokenizer in the plan: inspect shows it, it encodes as the JSON file does
"$LLMC" compile "$TJS" --variant q4 -o "$WORK/tjs-q4.plan" "${OPTS[@]}" >/dev/null 2>&1
check "inspect shows the folder's tokenizer in the plan" sh -c \
    "'$LLMC' inspect '$WORK/tjs-q4.plan' | grep '^tokenizer   byte-level BPE'"
same_encoding() {
    printf 'the hand and the sea\nwhen in the end\n' >"$WORK/text.txt"
    "$LLMC" tokenize "$WORK/tjs-q4.plan" <"$WORK/text.txt" >"$WORK/plan.ids" &&
        "$LLMC" tokenize "$TOK/tokenizer.json" <"$WORK/text.txt" >"$WORK/json.ids" &&
        [ -s "$WORK/plan.ids" ] && cmp "$WORK/plan.ids" "$WORK/json.ids"
}
check "tokenize PLAN: the ids of the folder's tokenizer.json" same_encoding
check "--tokenizer replaces the folder's" picks "$TJS" onnx/model_q4.onnx --variant q4 --tokenizer "$SP/tokenizer.json"
check "stderr says the tokenizer came from --tokenizer" grep -q "tokenizer $SP/tokenizer.json (--tokenizer)" "$WORK/picked.txt"
check "--no-tokenizer leaves it out" picks "$TJS" onnx/model_q4.onnx --variant q4 --no-tokenizer
check "inspect: no tokenizer in that plan" sh -c "'$LLMC' inspect '$WORK/folder.plan' | grep '^tokenizer   none\$'"

# the candidates sorted whatever the directory's order: the same files
# created in the opposite order list the same
REV=$WORK/tjs-reversed
hub_files "$REV" && mkdir -p "$REV/onnx"
for f in $(ls "$TJS/onnx" | sort -r); do cp -P "$TJS/onnx/$f" "$REV/onnx/$f"; done
sorted_list() {
    "$LLMC" compile "$TJS" -o "$WORK/bad.plan" 2>&1 | sed "s|$TJS|DIR|" >"$WORK/list-a.txt"
    "$LLMC" compile "$REV" -o "$WORK/bad.plan" 2>&1 | sed "s|$REV|DIR|" >"$WORK/list-b.txt"
    cmp "$WORK/list-a.txt" "$WORK/list-b.txt" &&
        grep -o '(onnx/[^)]*)' "$WORK/list-a.txt" | LC_ALL=C sort -c
}
check "the candidates are listed sorted, the same for either creation order" sorted_list

# ---- transformers.js, one variant, its weights split over two data files
ONE=$WORK/tjs-one
hub_files "$ONE" && mkdir -p "$ONE/onnx" &&
    externalize "$LLAMA" "$ONE/onnx/model_q4f16.onnx" model_q4f16.onnx_data 2
check "transformers.js with one model (data in _data and _data_1): picked alone" \
    picks "$ONE/" onnx/model_q4f16.onnx
check "...said on stderr" grep -q "model $ONE/onnx/model_q4f16.onnx (transformers.js, variant q4f16)" "$WORK/picked.txt"
same_logits() {   # the split-data plan and the inline model's: greedy tokens and logits bit for bit
    "$LLMC" compile "$LLAMA" -o "$WORK/inline.plan" "${OPTS[@]}" >/dev/null &&
        "$LLMC" run "$WORK/folder.plan" --prompt-ids 1,2,3,4 --max-new 8 --logits-out "$WORK/a.logits" >"$WORK/a.ids" &&
        "$LLMC" run "$WORK/inline.plan" --prompt-ids 1,2,3,4 --max-new 8 --logits-out "$WORK/b.logits" >"$WORK/b.ids" &&
        cmp "$WORK/a.ids" "$WORK/b.ids" && cmp "$WORK/a.logits" "$WORK/b.logits" &&
        [ "$(stat -c %s "$WORK/a.logits")" -gt 0 ]
}
check "the weights read from the two data files: the inline model's logits, bit for bit" same_logits

# ---- older transformers.js: onnx/decoder_model_merged{,_quantized}.onnx
XEN=$WORK/xenova
hub_files "$XEN" && mkdir -p "$XEN/onnx" &&
    ln -s "$(realpath "$LLAMA")" "$XEN/onnx/decoder_model_merged.onnx" &&
    ln -s "$(realpath "$QWEN")" "$XEN/onnx/decoder_model_merged_quantized.onnx"
check "legacy transformers.js, merged and merged_quantized: refused, listing both" \
    refused 2 "choose one with --variant: merged (onnx/decoder_model_merged.onnx), merged_quantized (onnx/decoder_model_merged_quantized.onnx)" "$XEN"
check "legacy transformers.js --variant merged_quantized" picks "$XEN" onnx/decoder_model_merged_quantized.onnx --variant merged_quantized

# ---- onnxruntime-genai: genai_config.json names the file; another model.onnx beside it
GENAI=$WORK/genai
hub_files "$GENAI" && cp "$SINGLE" "$GENAI/decoder.onnx" && cp "$(dirname "$SINGLE")/model.onnx.data" "$GENAI/" &&
    echo 'not an ONNX model' >"$GENAI/model.onnx" &&
    echo '{"model": {"type": "llama", "decoder": {"filename": "decoder.onnx", "session_options": {}}}}' \
        >"$GENAI/genai_config.json"
check "onnxruntime-genai: the file genai_config.json names (data in model.onnx.data)" picks "$GENAI" decoder.onnx
check "...said on stderr" grep -q "model $GENAI/decoder.onnx (onnxruntime-genai, variant decoder)" "$WORK/picked.txt"
GENAI_BAD=$WORK/genai-missing
hub_files "$GENAI_BAD" && ln -s "$(realpath "$LLAMA")" "$GENAI_BAD/model.onnx" &&
    echo '{"model": {"decoder": {"filename": "phi.onnx"}}}' >"$GENAI_BAD/genai_config.json"
check "genai_config.json naming a file that is not there is refused" \
    refused 3 "names model.decoder.filename 'phi.onnx', which is not in" "$GENAI_BAD"

# ---- optimum: model.onnx + model.onnx_data; the legacy decoders
OPT=$WORK/optimum
hub_files "$OPT" && externalize "$LLAMA" "$OPT/model.onnx" model.onnx_data 1
check "optimum: model.onnx with model.onnx_data" picks "$OPT" model.onnx
check "...said on stderr" grep -q "model $OPT/model.onnx (optimum, variant fp32)" "$WORK/picked.txt"
LEG=$WORK/optimum-legacy
hub_files "$LEG" && ln -s "$(realpath "$LLAMA")" "$LEG/decoder_with_past_model.onnx" &&
    ln -s "$(realpath "$QWEN")" "$LEG/decoder_model.onnx"
check "optimum legacy, with_past and no_past: decoder_with_past_model.onnx" picks "$LEG" decoder_with_past_model.onnx
check "optimum legacy --variant no_past: decoder_model.onnx" picks "$LEG" decoder_model.onnx --variant no_past
AMB=$WORK/optimum-both
hub_files "$AMB" && ln -s "$(realpath "$LLAMA")" "$AMB/model.onnx" &&
    ln -s "$(realpath "$QWEN")" "$AMB/decoder_model_merged.onnx"
check "optimum with model.onnx and decoder_model_merged.onnx: refused, listing both" \
    refused 2 "holds 2 ONNX models; choose one with --variant: merged (decoder_model_merged.onnx), fp32 (model.onnx)" "$AMB"

# a folder's tokenizer.json llmc cannot compile: refused with the way round
UNI=$WORK/unigram
hub_files "$UNI" && ln -s "$(realpath "$LLAMA")" "$UNI/model.onnx" &&
    sed -i 's/"type": *"BPE"/"type": "Unigram"/' "$UNI/tokenizer.json"
check "a folder's tokenizer llmc refuses: refused, pointing to --no-tokenizer" \
    refused 4 "only BPE models are supported; it came with the folder: --no-tokenizer" "$UNI"
check "...and --no-tokenizer compiles the model" picks "$UNI" model.onnx --no-tokenizer

# ---- no model
hub_files "$WORK/empty"
check "a folder without an ONNX model is refused, naming the layouts searched" \
    refused 3 "holds no ONNX model: looked for genai_config.json (onnxruntime-genai), \*.onnx in the folder (optimum" \
    "$WORK/empty"
tap_done
