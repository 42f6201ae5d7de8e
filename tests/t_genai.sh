#!/usr/bin/env bash
# onnxruntime-genai's model-builder graphs (scripts/export_genai.py; TAP).
#
# For llama, qwen2 and phi (Phi-2's form: LayerNormalization and
# SkipLayerNormalization, partial rotary, tanh GELU; tests/zoo.sh's `genai`
# option, from the tests' cache):
#   - the builder's own opset 21 and opset 17 files give ONNX Runtime the
#     same tokens and logits (the same nodes, but Phi's GELU: Gelu at 21,
#     com.microsoft FastGelu at 17; tests/t_e2e_llm.sh checks llmc's parity
#     on the opset-17 files)
#   - `llmc compile` fuses attention in every layer and a decoder layer
#     costs at most 8 plan ops, 6 for Phi (`llmc inspect` ops_total of a
#     3-layer export minus a 2-layer one, as tests/t_op_counts.sh counts)
#   - the cache's last dim is the builder's symbolic kv_cache_dim: llmc binds
#     it to GroupQueryAttention's head size (no --dim), ONNX Runtime reads
#     it from the genai_config.json export_genai.py writes beside the model
#   - the form with RotaryEmbedding nodes on q and k (--rotary separate)
#     fuses its RoPE into every layer's attention within the same bound
#     (the compile summary's count)
# Then GroupQueryAttention nodes llmc does not compile are refused at
# import, naming the node and the attribute or input, with no plan written:
# the smooth softmax (smooth_softmax = 1), an attribute llmc does not read
# (kv_cache_bit_width, the builder's quantized cache) and a head size no
# shape states.
set -u
cd "$(dirname "$0")/.."
. tests/tap.sh
BUILD=${BUILD:-build}
PY=/usr/bin/python3
WORK=$BUILD/genai
mkdir -p "$WORK"
rm -f "$WORK"/*
. tests/zoo.sh
. tests/logits_err.sh
PROMPT=5,17,42,7,99,3,250

genai_model() {   # genai_model FAMILY OPSET LAYERS
    zoo_export_with export_genai "$1-op$2-genai-L$3-s0" --family "$1" --opset "$2" --layers "$3" --seed 0
}

same_ort() {   # same_ort A B: equal ids and identical logits bytes
    local a b
    a=$(ort_generate "$1" "$WORK/a.bin" --prompt-ids "$PROMPT" --max-new 8) &&
        b=$(ort_generate "$2" "$WORK/b.bin" --prompt-ids "$PROMPT" --max-new 8) || return 1
    echo "opset 21: $a"; echo "opset 17: $b"
    [ "$a" = "$b" ] && cmp "$WORK/a.bin" "$WORK/b.bin"
}

ops_total() {   # ops_total MODEL PLAN: compiles, prints the plan's op count
    "$BUILD/llmc" compile "$1" -o "$2" --max-context 256 >"$2.log" 2>&1 || { cat "$2.log"; return 1; }
    "$BUILD/llmc" inspect "$2" --json | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["ops_total"])'
}

# Plan ops per decoder layer a family's fused layer costs (Phi-2's parallel
# block: one LayerNorm, Linears qkv, dense and fc1/fc2 with both residuals,
# attention, GELU).
max_ops() { [ "$1" = phi ] && echo 6 || echo 8; }

per_layer() {   # per_layer FAMILY: every layer fused, <= max_ops per layer
    local m2 m3 n2 n3
    m2=$(genai_model "$1" 17 2) && m3=$(genai_model "$1" 17 3) || return 1
    n2=$(ops_total "$m2" "$WORK/$1-L2.plan") && n3=$(ops_total "$m3" "$WORK/$1-L3.plan") || return 1
    echo "plan ops: $n2 with 2 layers, $n3 with 3: $((n3 - n2)) per layer"
    grep -E "attention-fusion .*(2 of 2|3 of 3) layers fused" "$WORK/$1-L2.plan.log" "$WORK/$1-L3.plan.log" &&
        [ "$(grep -cE "attention-fusion .*(2 of 2|3 of 3) layers fused" "$WORK/$1-L2.plan.log" \
            "$WORK/$1-L3.plan.log" | awk -F: '{s += $2} END {print s}')" -eq 2 ] && [ $((n3 - n2)) -le "$(max_ops "$1")" ]
}

fused_rotary() {   # fused_rotary FAMILY: the RotaryEmbedding form fuses into the GQA form's ops per layer
    local model plan=$WORK/$1-rotary.plan
    model=$(zoo_model "$1" 17 genai-rotary) || return 1
    "$BUILD/llmc" compile "$model" -o "$plan" --max-context 256 >"$plan.log" 2>&1 || { cat "$plan.log"; return 1; }
    grep -E "(rope|attention)-fusion|ops per decoder layer" "$plan.log"
    grep -qE "rope-fusion .* 4 fused" "$plan.log" && grep -qE "attention-fusion .*2 of 2 layers fused" "$plan.log" &&
        [ "$(sed -n 's/^ops per decoder layer: \([0-9]*\) .*/\1/p' "$plan.log")" -le "$(max_ops "$1")" ]
}

# int4_form FAMILY: the builder's cpu-int4 file (scripts/quantize_onnx.py
# --form int4 of its fp32 graph: MatMulNBits with zero points,
# GatherBlockQuantized) keeps the file's 4-bit weights, fuses every layer's
# attention, and for a 7-token prompt + 8 steps llmc's logits are at most
# as far from ONNX Runtime's run of the float32-dequantized file as ONNX
# Runtime's own run of the file (its accuracy-level-4 arithmetic; both
# against the dequantized run: tests/logits_err.sh's rel_err).
int4_form() {
    local src model=$WORK/$1-int4.onnx ref=$WORK/$1-int4-ref.onnx plan=$WORK/$1-int4.plan
    src=$(genai_model "$1" 21 2) || return 1
    "$PY" scripts/quantize_onnx.py --form int4 "$src" "$model" --reference "$ref" || return 1
    cp "$(dirname "$src")/genai_config.json" "$WORK/"   # the cache's head size, for ONNX Runtime
    "$BUILD/llmc" compile "$model" -o "$plan" --max-context 256 >"$plan.log" 2>&1 || { cat "$plan.log"; return 1; }
    grep -E "^quantized:|attention-fusion|ops per" "$plan.log"
    grep -qE "^quantized: [0-9]+ Linears keep the file's quantization \([0-9]+ 4-bit" "$plan.log" &&
        grep -qE "attention-fusion .*2 of 2 layers fused" "$plan.log" || return 1
    ort_generate "$model" "$WORK/ort.bin" --prompt-ids "$PROMPT" --max-new 8 >"$WORK/ort.tok" &&
        ort_generate "$ref" "$WORK/ref.bin" --prompt-ids "$PROMPT" --max-new 8 >"$WORK/ref.tok" &&
        "$BUILD/llmc" run "$plan" --prompt-ids "$PROMPT" --max-new 8 --logits-out "$WORK/llmc.bin" \
            >"$WORK/llmc.tok" || return 1
    local e_llmc e_ort
    e_llmc=$(rel_err "$WORK/ref" "$WORK/llmc") && e_ort=$(rel_err "$WORK/ref" "$WORK/ort") || return 1
    echo "tokens: ort $(cat "$WORK/ort.tok") | llmc $(cat "$WORK/llmc.tok"); logits error against ONNX Runtime's" \
         "float32-dequantized run: llmc $e_llmc, ONNX Runtime on the file $e_ort"
    below "$e_llmc" "$e_ort"
}

for family in llama qwen2 phi; do
    check "$family: the builder's int4 form keeps its 4-bit weights, fuses, and stays within ONNX Runtime's own error" \
        int4_form "$family"
    sed -n 's/^tokens: .*; logits error/# int4 logits error/p' "$WORK/last.log"   # the figures, as a TAP comment
    check "$family: RotaryEmbedding nodes (--rotary separate) fuse into every layer's attention, <= $(max_ops "$family") plan ops per decoder layer" \
        fused_rotary "$family"
    m21=$(genai_model "$family" 21 2) && m17=$(genai_model "$family" 17 2)
    check "$family: export_genai.py wrote the builder's graph at opsets 21 and 17" test -s "$m21" -a -s "$m17"
    check "$family: opsets 21 and 17 give onnxruntime the same tokens and logits" same_ort "$m21" "$m17"
    check "$family: attention fused in every layer, <= $(max_ops "$family") plan ops per decoder layer" per_layer "$family"
done

# bad_gqa CASE OUT: the 2-layer llama file with layer 0's GroupQueryAttention
# changed as CASE says.
bad_gqa() {
    "$PY" - "$1" "$2" "$(genai_model llama 17 2)" <<'EOF'
import sys
import onnx
from onnx import helper, TensorProto
case, out, src = sys.argv[1:]
m = onnx.load(src)
g = m.graph
gqa = next(n for n in g.node if n.op_type == "GroupQueryAttention")
if case == "smooth":
    gqa.attribute.append(helper.make_attribute("smooth_softmax", 1))
elif case == "attribute":
    gqa.attribute.append(helper.make_attribute("kv_cache_bit_width", 8))
elif case == "head-size":
    # the query's weight is a graph input, nothing declares the query's
    # shape and the past key reaches the node through an Identity
    mm = next(n for n in g.node if n.output[0] == gqa.input[0])
    w = next(i for i in g.initializer if i.name == mm.input[1])
    g.initializer.remove(w)
    g.input.append(helper.make_tensor_value_info(w.name, TensorProto.FLOAT, list(w.dims)))
    for vi in [v for v in g.value_info if v.name == gqa.input[0]]:
        g.value_info.remove(vi)
    g.node.insert(0, helper.make_node("Identity", [gqa.input[3]], ["past_key_copy"], name="past_key_copy"))
    gqa.input[3] = "past_key_copy"
    # the caches' head size stated on the graph inputs only (not kv_cache_dim,
    # which llmc would bind from the node's query before the node is read)
    for vi in list(g.input) + list(g.output):
        if vi.name.startswith(("past_key_values.", "present.")):
            vi.type.tensor_type.shape.dim[3].dim_value = 16
onnx.save(m, out)
EOF
}

refused() {   # refused CASE WORD...: compile fails naming the node and each WORD, no plan
    local case=$1 model=$WORK/bad-$1.onnx plan=$WORK/bad-$1.plan word
    shift
    bad_gqa "$case" "$model" || return 1
    if "$BUILD/llmc" compile "$model" -o "$plan" --max-context 256 >"$plan.log" 2>&1; then
        echo "compiled"; return 1
    fi
    cat "$plan.log"
    [ ! -e "$plan" ] || { echo "a plan was written"; return 1; }
    for word in "/model/layers.0/attn/GroupQueryAttention" "$@"; do
        grep -qF -- "$word" "$plan.log" || { echo "the message does not name $word"; return 1; }
    done
}

check "GroupQueryAttention with smooth_softmax = 1 is refused naming the node and attribute" \
    refused smooth "'smooth_softmax'"
check "GroupQueryAttention with an attribute llmc does not read is refused naming it" \
    refused attribute "'kv_cache_bit_width'"
check "GroupQueryAttention whose head size no shape states is refused naming the node and query" \
    refused head-size "input 0" "head size"
tap_done
