#!/usr/bin/env bash
# Pre-quantized ONNX files compile with their own quantization.  For each
# family's tiny opset-17 export (tests/zoo.sh), scripts/quantize_onnx.py
# writes the forms people download, by ONNX Runtime's quantizers'
# algorithms: q4 and q4f16 (MatMulNBits, transformers.js model_q4.onnx /
# model_q4f16.onnx), int4 (onnxruntime-genai: MatMulNBits with zero points,
# the embedding a GatherBlockQuantized) and int8 / uint8 (dynamic
# quantization: MatMulInteger, model_int8.onnx / model_uint8.onnx), and a
# reference: the fp32 graph with the dequantized weights.  For each form:
#   - ONNX Runtime runs the file; llmc compiles it without --quant, to a plan
#     about the file's size (the ratio is reported and bounded)
#   - the plan's weights, dequantized by the runtime (`llmc inspect
#     --dump-weights`: the Linear kernels' block loop, the Gather's row
#     reader), equal the file's dequantized by ONNX Runtime's formula
#     (scripts/prequant_weights.py: max relative error 0, every weight's
#     values equal): binary16 coefficients where they hold the file's
#     values (q4f16), the file's float32 scales and zero points elsewhere;
#     but for the weights whose output scalar multiplier linear fusion
#     folded into their scales (Granite's residual and logits multipliers,
#     as many as `--explain` names): every other weight equal
#   - greedy ids for prompts of 1, 7 and 64 tokens + 32 steps on llmc, on
#     ONNX Runtime with the file (its int8 / accuracy-level-4 arithmetic) and
#     on the reference: llmc's distance from the reference is within
#     LOGITS_FACTOR (below) of ONNX Runtime's own on the file (the figures
#     are reported)
#   - ops per decoder layer equal those of the float export's float plan
#     (`llmc inspect`'s count: the fused layer, whose quantized Linears
#     quantize their own x; q4f16 against the float16 export), at most 8
#     (phi 6, Gemma's four norms 10)
# and --quant w4a8 / w8a8 keep a 4-bit file's weights; malformed
# MatMulNBits nodes are refused naming the node and input, no plan written.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
WORK=$BUILD/test-data/prequant
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
. tests/zoo.sh
. tests/logits_err.sh

MAX_RATIO=1.5   # plan bytes / file bytes
# llmc's logits error over ONNX Runtime's own (both against the
# fp32-dequantized run, over the rows where the three runs' ids agree), at
# most: 1.1 for q4 and int4, 1 for int8, else the largest ratio measured,
# rounded up (docs/quantization.md).  q4 and int4: llmc's arithmetic is
# ONNX Runtime's (int8 activations in blocks of 32; most files give the same
# figure to six digits, and the rows agree within 1e-5, printed, until one
# activation whose float sum differs in its last bit rounds to the other
# int8, after which the two are equally valid runs: 1.088 the most measured,
# SmolLM3 int4).  int8: under a sixth of it.  q4f16 1.318 (GPT-2; ONNX
# Runtime computes the file in float16, llmc in float32), uint8 1.237 (Phi;
# ONNX Runtime quantizes activations per tensor to asymmetric uint8, llmc
# per row and 32 values to symmetric int8)
declare -A LOGITS_FACTOR=([q4]=1.1 [q4f16]=1.32 [int4]=1.1 [int8]=1 [uint8]=1.24)

# parted_at A B (file bases): the first row where the two runs' logits
# differ by more than 1e-5 of the row's max|logit| ("none" if no row does)
parted_at() {
    $PY - "$VOCAB" "$1" "$2" <<'EOF'
import sys, numpy as np
v = int(sys.argv[1])
a, b = (np.fromfile(p + ".bin", "<f4").reshape(-1, v).astype(np.float64) for p in sys.argv[2:4])
n = min(len(a), len(b))
far = np.abs(a[:n] - b[:n]).max(axis=1) > 1e-5 * np.abs(a[:n]).max(axis=1)
print(int(far.argmax()) if far.any() else "none")
EOF
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
# weights_equal LOG FOLDED: prequant_weights.py found no difference and
# every matched weight's values equal; with FOLDED > 0 scales folded into
# weights, all but those FOLDED weights equal
weights_equal() {
    { [ "$2" -gt 0 ] || grep -q "max relative error 0;" "$1"; } &&
        [ "$(sed -n 's/.*bitwise \([0-9]*\)$/\1/p' "$1")" = \
          "$(($(sed -n 's/^matched \([0-9]*\) of.*/\1/p' "$1") - $2))" ]
}

ort() {   # ort MODEL BASE PROMPT: ids in BASE.tok, logits in BASE.bin
    node scripts/ort_generate.js "$1" --prompt-ids "$3" --max-new "$MAX_NEW" --logits-out "$2.bin" >"$2.tok" 2>"$2.log"
}

ops_per_layer() { "$LLMC" inspect "$1" --json | $PY -c 'import json, sys; print(json.load(sys.stdin)["ops_per_layer"])'; }

check_form() {   # check_form FAMILY FORM MODEL
    local family=$1 form=$2 base=$WORK/$1-$2
    check "$family $form: quantize_onnx.py writes the file" \
        $PY scripts/quantize_onnx.py "$3" "$base.onnx" --form "$form" --reference "$base-ref.onnx" || return
    check "$family $form: compiles without --quant" \
        sh -c "'$LLMC' compile '$base.onnx' -o '$base.plan' --max-context 128 --explain >'$base.explain' 2>&1" || return
    local folded
    folded=$(grep -c "into the scales of quantized" "$base.explain")
    local r
    r=$(ratio "$(stat -c %s "$base.plan")" "$(stat -c %s "$base.onnx")")
    check "$family $form: plan / file size $r <= $MAX_RATIO" below "$r" "$MAX_RATIO"
    mkdir -p "$base.weights"
    "$LLMC" inspect "$base.plan" --dump-weights "$base.weights" >"$base.weights.txt"
    $PY scripts/prequant_weights.py "$base.onnx" "$base.weights" "$base.weights.txt" >"$base.weights.log"
    check "$family $form: every file weight is in the plan ($(cat "$base.weights.log"))" test $? -eq 0
    check "$family $form: the plan's weights equal the file's ($folded with a scale folded in)" \
        weights_equal "$base.weights.log" "$folded"
    local i=0 e_llmc=0 e_ort=0 same=0 parted=
    for prompt in $PROMPTS; do
        i=$((i + 1))
        ort "$base.onnx" "$base-ort-p$i" "$prompt" &&
            ort "$base-ref.onnx" "$base-ref-p$i" "$prompt" &&
            "$LLMC" run "$base.plan" --prompt-ids "$prompt" --max-new "$MAX_NEW" \
                --logits-out "$base-llmc-p$i.bin" >"$base-llmc-p$i.tok" 2>"$base-llmc-p$i.log" ||
            { check "$family $form prompt $i: ONNX Runtime and llmc run" false; continue; }
        local a b
        a=$(rel_err "$base-ref-p$i" "$base-llmc-p$i" "$base-ort-p$i")
        b=$(rel_err "$base-ref-p$i" "$base-ort-p$i" "$base-llmc-p$i")
        below "$a" "$e_llmc" || e_llmc=$a
        below "$b" "$e_ort" || e_ort=$b
        cmp -s "$base-ort-p$i.tok" "$base-llmc-p$i.tok" && same=$((same + 1))
        parted="$parted $(parted_at "$base-ort-p$i" "$base-llmc-p$i")"
    done
    echo "# $family $form: plan/file $r; weights: $(cat "$base.weights.log");" \
         "logits vs ONNX Runtime's fp32-dequantized run: llmc $e_llmc, ONNX Runtime on the file $e_ort;" \
         "ids equal to ONNX Runtime's on the file on $same of 3 prompts;" \
         "first row where llmc and ONNX Runtime on the file part by over 1e-5, per prompt:$parted"
    local bound
    bound=$(awk -v x="$e_ort" -v f="${LOGITS_FACTOR[$form]}" 'BEGIN { print f * x }')
    check "$family $form: llmc's logits error $e_llmc <= ${LOGITS_FACTOR[$form]} x ONNX Runtime's own $e_ort" \
        below "$e_llmc" "$bound"
    local want=$FLOAT_OPS got limit=8
    [ "$form" = q4f16 ] && want=$FLOAT_OPS16
    [ "$family" = phi ] && limit=6
    case $family in gemma*) limit=10 ;; esac   # four norms a layer
    got=$(ops_per_layer "$base.plan")
    check "$family $form: $got ops per decoder layer, the float export's float plan's ($want, <= $limit)" \
        sh -c "[ -n '$got' ] && [ '$got' = '$want' ] && [ '$got' -le '$limit' ]"
}

# the forms of each family (default all five); in make check (no
# PREQUANT_FAMILIES) Granite's two that fold its scalar multipliers into
# the scales, q4's float32 ones and int8's; make check-families runs all
declare -A FAMILY_FORMS=()
[ -n "${PREQUANT_FAMILIES:-}" ] || FAMILY_FORMS[granite]="q4 int8"
for family in ${PREQUANT_FAMILIES:-llama qwen2 phi gpt2 qwen3 granite}; do
    model=$(zoo_model "$family" 17) || { check "$family@17 exports" false; continue; }
    # the float exports' float plans' op counts: fp32, and fp16 for q4f16
    # (its graph computes in float16: more Casts around the fused ops)
    $PY scripts/make_fp16.py "$model" "$WORK/$family-f16.onnx" --form compute16 >/dev/null
    "$LLMC" compile "$model" -o "$WORK/$family-f32.plan" --max-context 128 >/dev/null 2>&1
    "$LLMC" compile "$WORK/$family-f16.onnx" -o "$WORK/$family-f16.plan" --max-context 128 >/dev/null 2>&1
    FLOAT_OPS=$(ops_per_layer "$WORK/$family-f32.plan")
    FLOAT_OPS16=$(ops_per_layer "$WORK/$family-f16.plan")
    for form in ${FAMILY_FORMS[$family]:-q4 q4f16 int4 int8 uint8}; do
        check_form "$family" "$form" "$model"
    done
done

# --quant on a 4-bit file: w4a8 and w8a8 both keep the file's weights (the
# same plan as without --quant, but for the options the plan records).
# These and the malformed cases below edit LLaMA's q4 file (made here when
# PREQUANT_FAMILIES leaves LLaMA out).
[ -e "$WORK/llama-q4.onnx" ] || $PY scripts/quantize_onnx.py "$(zoo_model llama 17)" "$WORK/llama-q4.onnx" --form q4 >/dev/null
for mode in w4a8 w8a8; do
    check "--quant $mode on a q4 file keeps its 4-bit weights" sh -c \
        "'$LLMC' compile '$WORK/llama-q4.onnx' -o '$WORK/llama-q4-$mode.plan' --max-context 128 --quant $mode >/dev/null &&
         '$LLMC' inspect '$WORK/llama-q4-$mode.plan' | grep -q \"quantized   9 Linears keep the file's quantization (9 4-bit\""
done

# Malformed MatMulNBits nodes: refused, naming the node (and the input), no plan.
$PY - "$WORK/llama-q4.onnx" "$WORK" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper

src, out = sys.argv[1], sys.argv[2]

def first(model):
    node = next(n for n in model.graph.node if n.op_type == "MatMulNBits")
    return node, {a.name: a for a in node.attribute}

def init(model, name):
    return next(t for t in model.graph.initializer if t.name == name)

def case(name, edit):
    m = onnx.load(src)
    node, attrs = first(m)
    edit(m, node, attrs)
    onnx.save(m, "%s/bad-%s.onnx" % (out, name))

def set_attr(a, v):
    a.i = v

def resize(m, name, count):
    t = init(m, name)
    a = numpy_helper.to_array(t).reshape(-1)
    t.CopyFrom(numpy_helper.from_array(np.resize(a, count).astype(a.dtype), name))

case("block", lambda m, n, a: set_attr(a["block_size"], 24))
case("bits", lambda m, n, a: set_attr(a["bits"], 8))
case("scales", lambda m, n, a: resize(m, n.input[2], numpy_helper.to_array(init(m, n.input[2])).size - 1))
def zero_points(m, n, a):
    count = a["N"].i * ((a["K"].i // a["block_size"].i + 1) // 2) - 1
    m.graph.initializer.append(numpy_helper.from_array(np.full(count, 0x88, np.uint8), "bad_zp"))
    n.input.append("bad_zp")
case("zero_points", zero_points)
def k_mismatch(m, n, a):   # K 96 with B and scales of K 96: A's 64 columns do not match
    k, nn, block = 96, a["N"].i, a["block_size"].i
    a["K"].i = k
    t = init(m, n.input[1])
    t.CopyFrom(numpy_helper.from_array(np.full((nn, k // block, block // 2), 0x88, np.uint8), t.name))
    resize(m, n.input[2], nn * k // block)
case("K", k_mismatch)
print(first(onnx.load(src))[0].name)
EOF
refused() {   # refused CASE PATTERN: compile fails, the message matches, no plan
    local out=$WORK/bad-$1.plan
    ! "$LLMC" compile "$WORK/bad-$1.onnx" -o "$out" --max-context 128 2>"$WORK/bad-$1.log" &&
        grep -q -- "$2" "$WORK/bad-$1.log" && [ ! -e "$out" ]
}
node_name=/layers.0/self_attn/q_proj/MatMul_Q4
check "block_size 24 refused naming the node" refused block "node '$node_name' (com.microsoft::MatMulNBits): block_size 24 is not a power of 2"
check "bits 8 refused naming the node" refused bits "node '$node_name' (com.microsoft::MatMulNBits): bits 8"
check "scales of the wrong count refused naming input 2" refused scales "node '$node_name' (com.microsoft::MatMulNBits) input 2 .*has 127 elements"
check "zero points of the wrong length refused naming input 3" refused zero_points "node '$node_name' (com.microsoft::MatMulNBits) input 3 'bad_zp'"
check "K not matching A's last dim refused naming the node" refused K "node '$node_name/MatMul"

tap_done
