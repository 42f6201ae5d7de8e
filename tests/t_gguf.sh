#!/usr/bin/env bash
# tier: plain-only (a python converter; the llmc runs it compares with are the ones t_e2e_llm checks)
# scripts/onnx_to_gguf.py, the GGUF writer behind scripts/bench_peers.sh's
# llama.cpp rows, on the zoo's LLaMA and Qwen2 exports (plain, transformers'
# eager and SDPA code) and SmolLM2 (LLaMA with grouped-query attention):
#   - tests/gguf_check.py re-reads each file with its own parser: header,
#     alignment, metadata from the ONNX shapes and the export's
#     configuration, llama.cpp's tensor names, and every tensor's bytes
#     equal to its ONNX weight (transposed; q/k rows in adjacent-pair order
#     for `llama`);
#   - the same input gives the same bytes;
#   - exports it cannot map (Qwen3's q/k norms, Llama 3.2's scaled RoPE,
#     Granite's multipliers, Mistral's head_dim x heads != hidden, Phi-3's
#     packed qkv_proj, GPT-2) exit 4 naming what, nothing at the output path;
#   - with LLAMA_CPP=path/to/llama.cpp (a checkout built in its build/:
#     libllama), scripts/gguf_logits.c is built against it and llama.cpp
#     decodes each GGUF: for prompts of 1, 7 and 64 tokens + 32 greedy
#     steps its ids equal ONNX Runtime's and `llmc run`'s on the f32 plan
#     of the same .onnx, its logits within 1e-4 x max|logit| of both.
#     Without LLAMA_CPP these checks are skipped (and say so).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
WORK=$BUILD/test-data/gguf
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
. tests/zoo.sh
PY=/usr/bin/python3
MAX_NEW=32
VOCAB=512
# family:opset:option rope_base eps (export_llm.py's tiny configurations)
MODELS="qwen2:17:plain:10000:1e-5 llama:17:plain:10000:1e-5 qwen2:17:hf:10000:1e-5
    llama:17:sdpa:10000:1e-5 smollm2:17:hf:100000:1e-5"
PROMPTS="5 5,17,42,7,99,3,250 $(seq -s, 0 63 | awk -F, '{for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? "," : ""), ($i * 37 + 11) % 512}')"

for spec in $MODELS; do
    IFS=: read -r family opset option base eps <<<"$spec"
    tag=$family@$opset:$option
    model=$(zoo_model "$family" "$opset" "$option") ||
        { check "$tag exports" false; continue; }
    gguf=$WORK/$family-$option.gguf
    check "$tag: converts, and the GGUF re-read matches the ONNX weights and shapes" \
        sh -c "$PY scripts/onnx_to_gguf.py '$model' '$gguf' && $PY tests/gguf_check.py '$model' '$gguf' --rope-base $base --eps $eps"
done

model=$(zoo_model qwen2 17)
check "the same export gives the same bytes" \
    sh -c "$PY scripts/onnx_to_gguf.py '$model' '$WORK/again.gguf' && cmp '$WORK/again.gguf' '$WORK/qwen2-plain.gguf'"

# refused FAMILY OPTION PATTERN: exit 4, a message matching PATTERN, no file.
refused() {
    local model out=$WORK/refused-$1.gguf rc
    model=$(zoo_model "$1" 17 "$2") || return 1
    $PY scripts/onnx_to_gguf.py "$model" "$out" 2>"$WORK/refused.err"
    rc=$?
    cat "$WORK/refused.err"
    [ "$rc" -eq 4 ] && grep -q -- "$3" "$WORK/refused.err" && [ -z "$(ls "$WORK" | grep "^refused-$1")" ]
}
check "qwen3 refused naming its q_norm weight, nothing written" refused qwen3 plain "q_norm"
check "llama32 refused: scaled RoPE frequencies" refused llama32 plain "not base"
check "granite refused naming its embedding multiplier node" refused granite hf "node '/model/Mul'"
check "mistral refused: heads x head_dim != hidden" refused mistral plain "4 x 32 != hidden 64"
check "phi3 refused naming its packed qkv_proj" refused phi3 plain "qkv_proj"
check "gpt2 refused naming its embedding" refused gpt2 plain "wte"

if [ -z "${LLAMA_CPP:-}" ]; then
    echo "# skipped: llama.cpp's agreement with ONNX Runtime and llmc (set LLAMA_CPP=path/to/llama.cpp, built in its build/)"
    tap_done
    exit
fi

L=$LLAMA_CPP
check "scripts/gguf_logits.c builds against $L" \
    cc -std=c11 -O2 -Wall -Wextra -Werror scripts/gguf_logits.c -I"$L/include" -I"$L/ggml/include" \
    -L"$L/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$L/build/bin" -o "$WORK/gguf_logits"

# same_ids REF GOT: two files of ids are the same, else both printed.
same_ids() { cmp "$1" "$2" || { echo "ref: $(cat "$1")"; echo "got: $(cat "$2")"; return 1; }; }
for spec in $MODELS; do
    IFS=: read -r family opset option base eps <<<"$spec"
    tag=$family@$opset:$option
    model=$(zoo_model "$family" "$opset" "$option") || continue
    gguf=$WORK/$family-$option.gguf plan=$WORK/$family-$option.plan
    "$LLMC" compile "$model" -o "$plan" --max-context 256 >"$plan.log" 2>&1 ||
        { check "$tag: llmc compile" false; continue; }
    p=0
    for prompt in $PROMPTS; do
        p=$((p + 1)) base=$WORK/$family-$option-$p
        ort_generate "$model" "$base.ort.bin" --prompt-ids "$prompt" --max-new $MAX_NEW >"$base.ort.ids" &&
            "$LLMC" run "$plan" --prompt-ids "$prompt" --max-new $MAX_NEW --logits-out "$base.llmc.bin" >"$base.llmc.ids" &&
            "$WORK/gguf_logits" "$gguf" --prompt-ids "$prompt" --max-new $MAX_NEW --logits-out "$base.gguf.bin" \
                >"$base.gguf.ids" 2>"$base.gguf.log" ||
            { check "$tag prompt $p: onnxruntime, llmc and llama.cpp run" sh -c "tail -5 '$base.gguf.log'; false"; continue; }
        n_ids=$(wc -w <"$base.ort.ids")
        check "$tag, $n_ids ids after a prompt of $(echo "$prompt" | tr , ' ' | wc -w): llama.cpp's ids are ONNX Runtime's" \
            same_ids "$base.ort.ids" "$base.gguf.ids"
        check "$tag prompt $p: llama.cpp's ids are llmc's" same_ids "$base.llmc.ids" "$base.gguf.ids"
        check "$tag prompt $p: llama.cpp's logits within 1e-4 of ONNX Runtime's" \
            $PY scripts/compare_logits.py "$base.ort.bin" "$base.gguf.bin" --vocab $VOCAB --rtol 1e-4
        check "$tag prompt $p: llama.cpp's logits within 1e-4 of llmc's" \
            $PY scripts/compare_logits.py "$base.llmc.bin" "$base.gguf.bin" --vocab $VOCAB --rtol 1e-4
    done
done
tap_done
