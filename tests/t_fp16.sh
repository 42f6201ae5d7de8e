#!/usr/bin/env bash
# float16 / bfloat16 models: llmc widens them to float32 at import.
#
# For each family (llama, qwen2, gpt2, phi, qwen3, phi3, mistral; opset 17, tiny, seed 0) the fp32
# export from tests/zoo.sh is turned into 16-bit variants by
# scripts/make_fp16.py, and each variant is checked (TAP):
#   weights16 (every family, of the plain and of the transformers-style
#     export), weightsbf16 (llama): fp16/bf16 initializers
#     read through Cast(to=FLOAT).  ONNX Runtime loads the file; llmc
#     compiles it and says how many tensors it widened; the plan has the fp32
#     plan's ops per layer (the Casts folded away) and no more weight bytes;
#     for prompts of 1, 7 and 64 tokens + 32 greedy steps the ids equal ONNX
#     Runtime's on the same file and every logits row is within
#     1e-4 * max|logit|.
#   compute16 (every family): every float tensor float16, graph I/O too;
#   keepio16 (every family): the same with float32 graph I/O behind Casts,
#     as transformers.js' model_fp16.onnx files are.  Both fuse to the fp32
#     plan's ops per layer.
#     llmc widens the file's float16 values to float32 and computes in
#     float32; ONNX Runtime computes the file in float16.  The reference
#     for llmc is therefore ONNX Runtime on the file's widen32 form
#     (scripts/make_fp16.py: the same values, float32 types): the ids equal
#     and every logits row is within 1e-4 * max|logit|, as for float32
#     files.  What float16 arithmetic adds on top is printed as a
#     diagnostic: ONNX Runtime on the float16 file against its widen32 run
#     (max row ratio over the rows where the runs' ids agree), and whether
#     llmc's ids equal ONNX Runtime's float16 ids (fp16 rounding may flip a
#     near-tie).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=/usr/bin/python3
MAX_NEW=32
VOCAB=512
FAMILIES=${FP16_FAMILIES:-"llama qwen2 gpt2 phi qwen3 phi3 mistral"}
WORK=$BUILD/fp16
mkdir -p "$WORK"
. tests/zoo.sh

check_no=0
failures=0
ok()     { check_no=$((check_no + 1)); echo "ok $check_no - $1"; }
not_ok() { check_no=$((check_no + 1)); failures=$((failures + 1)); echo "not ok $check_no - $1"; }
check()  { if [ "$1" = 0 ]; then ok "$2"; else not_ok "$2"; fi; }
diag()   { sed 's/^/# /' "$@"; }

PROMPTS="5 5,17,42,7,99,3,250 $(seq -s, 0 63 | awk -F, '{for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? "," : ""), ($i * 37 + 11) % 512}')"

# ONNX Runtime's reference, from the tests' cache (tests/cache.sh)
ort()  { ort_generate "$1" "$2.bin" --prompt-ids "$3" --max-new "$MAX_NEW" >"$2.tok" 2>"$2.log"; }
llmc_run() { "$BUILD/llmc" run "$1" --prompt-ids "$3" --max-new "$MAX_NEW" --logits-out "$2.bin" >"$2.tok" 2>"$2.log"; }
compile() { "$BUILD/llmc" compile "$1" -o "$2" --max-context 256 >"$2.log" 2>&1; }
json_field() { "$BUILD/llmc" inspect "$1" --json | "$PY" -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }
# The largest row ratio max|a - b| / max|a| between two logits files
# (BASE.bin), over the rows whose context is the same in every run given:
# up to the first step where any two of the runs' ids (BASE.tok) differ.
# Prints the ratio and the row count.
ratio() {
    "$PY" - "$@" <<'EOF'
import sys, numpy as np
a, b = (np.fromfile(p + ".bin", dtype="<f4").astype(np.float64).reshape(-1, 512) for p in sys.argv[1:3])
ids = [open(p + ".tok").read().split() for p in sys.argv[1:]]
rows = next((k + 1 for k in range(len(ids[0])) if len({t[k] for t in ids}) > 1), len(ids[0]))
print(f"{(np.abs(a[:rows] - b[:rows]).max(axis=1) / np.abs(a[:rows]).max(axis=1)).max():.3e} {rows}")
EOF
}

# Variant checks common to every form: make, ORT loads it, llmc compiles it.
prepare() {
    local fp32=$1 form=$2 model=$3 plan=$4 name=$5
    if ! "$PY" scripts/make_fp16.py "$fp32" "$model" --form "$form" >"$model.log" 2>&1; then
        not_ok "$name: make_fp16.py"; diag "$model.log"; return 1
    fi
    ok "$name: make_fp16.py ($(sed 's/^make_fp16: [^:]*: //' "$model.log"))"
    if ! ort "$model" "$WORK/probe" 1 || [ ! -s "$WORK/probe.tok" ]; then
        not_ok "$name: ONNX Runtime runs the file"; diag "$WORK/probe.log"; return 1
    fi
    ok "$name: ONNX Runtime runs the file"
    if ! compile "$model" "$plan"; then
        not_ok "$name: llmc compile"; diag "$plan.log"; return 1
    fi
    local line
    line=$(grep '^import: .* tensors widened to float32' "$plan.log")
    check $? "$name: llmc compile says what it widened: ${line#import: }"
}

test_weights() {
    local family=$1 form=$2 fp32=$3 fp32_plan=$4
    local model=$WORK/$family-$form.onnx plan=$WORK/$family-$form.plan name="$family $form"
    prepare "$fp32" "$form" "$model" "$plan" "$name" || return
    local want got
    want=$(json_field "$fp32_plan" ops_per_layer) got=$(json_field "$plan" ops_per_layer)
    [ -n "$got" ] && [ "$got" = "$want" ]
    check $? "$name: $got plan ops per layer, as the fp32 model's $want (Casts folded)"
    want=$(json_field "$fp32_plan" weight_bytes) got=$(json_field "$plan" weight_bytes)
    [ -n "$got" ] && [ "$got" -le "$want" ]
    check $? "$name: plan weights $got bytes <= fp32 plan's $want (stored once, float32)"
    local prompt n base
    for prompt in $PROMPTS; do
        n=$(echo "$prompt" | tr , '\n' | wc -l) base=$WORK/$family-$form-p$n
        if ! ort "$model" "$base.ort" "$prompt" || ! llmc_run "$plan" "$base.llmc" "$prompt"; then
            not_ok "$name, $n-token prompt + $MAX_NEW: ids match ONNX Runtime (a run failed)"
            not_ok "$name, $n-token prompt + $MAX_NEW: logits within 1e-4"
            diag "$base.ort.log" "$base.llmc.log"; continue
        fi
        cmp -s "$base.ort.tok" "$base.llmc.tok"
        check $? "$name, $n-token prompt + $MAX_NEW: ids match ONNX Runtime"
        "$PY" scripts/compare_logits.py "$base.ort.bin" "$base.llmc.bin" --vocab "$VOCAB" --rtol 1e-4 >"$base.cmp" 2>&1
        check $? "$name, $n-token prompt + $MAX_NEW: logits within 1e-4 ($(cut -d' ' -f2- "$base.cmp"))"
    done
}

test_compute() {
    local family=$1 form=$2 fp32=$3 fp32_plan=$4
    local model=$WORK/$family-$form.onnx plan=$WORK/$family-$form.plan name="$family $form"
    local wide=$WORK/$family-$form-widen32.onnx
    prepare "$fp32" "$form" "$model" "$plan" "$name" || return
    diag <(grep -E '^(wrote|ops per)|attention-fusion' "$plan.log")
    local want got
    want=$(json_field "$fp32_plan" ops_per_layer) got=$(json_field "$plan" ops_per_layer)
    [ -n "$got" ] && [ "$got" = "$want" ]
    check $? "$name: $got plan ops per layer, as the fp32 model's $want"
    if ! "$PY" scripts/make_fp16.py "$model" "$wide" --form widen32 >"$wide.log" 2>&1; then
        not_ok "$name: make_fp16.py --form widen32"; diag "$wide.log"; return
    fi
    ok "$name: the reference, make_fp16.py --form widen32 ($(sed 's/^make_fp16: [^:]*: //' "$wide.log"))"
    local prompt n base same
    for prompt in $PROMPTS; do
        n=$(echo "$prompt" | tr , '\n' | wc -l) base=$WORK/$family-$form-p$n
        if ! ort "$wide" "$base.ortw" "$prompt" || ! ort "$model" "$base.ort16" "$prompt" ||
           ! llmc_run "$plan" "$base.llmc" "$prompt"; then
            not_ok "$name, $n-token prompt + $MAX_NEW: ids match ONNX Runtime on widen32 (a run failed)"
            not_ok "$name, $n-token prompt + $MAX_NEW: logits within 1e-4"
            diag "$base.ortw.log" "$base.ort16.log" "$base.llmc.log"; continue
        fi
        cmp -s "$base.ortw.tok" "$base.llmc.tok"
        check $? "$name, $n-token prompt + $MAX_NEW: ids match ONNX Runtime on the widen32 form"
        "$PY" scripts/compare_logits.py "$base.ortw.bin" "$base.llmc.bin" --vocab "$VOCAB" --rtol 1e-4 >"$base.cmp" 2>&1
        check $? "$name, $n-token prompt + $MAX_NEW: logits within 1e-4 of it ($(cut -d' ' -f2- "$base.cmp"))"
        set -- $(ratio "$base.ortw" "$base.ort16")
        same="ONNX Runtime's float16 arithmetic: $1 from its widen32 run (rows 0..$(($2 - 1)))"
        cmp -s "$base.ort16.tok" "$base.llmc.tok" && same="$same; llmc ids = ORT fp16 ids" \
            || same="$same; llmc ids differ from ORT fp16 ids"
        echo "# $name, $n-token prompt: $same"
    done
}

set -- $FAMILIES
# weights form: 3 prepare + 2 plan + 3 prompts x 2 (plain and hf style);
# compute16 and keepio16: 3 prepare + 1 plan + 1 reference + 3 prompts x 2
plan_count=$(( $# * (2 * 11 + 2 * 11) ))
case " $* " in *" llama "*) plan_count=$((plan_count + 11)) ;; esac
echo "1..$plan_count"
for family in "$@"; do
    fp32=$(zoo_model "$family" 17) || { not_ok "$family: export"; continue; }
    fp32_plan=$WORK/$family-fp32.plan
    compile "$fp32" "$fp32_plan" || { not_ok "$family: fp32 compile"; diag "$fp32_plan.log"; continue; }
    test_weights "$family" weights16 "$fp32" "$fp32_plan"
    [ "$family" = llama ] && test_weights "$family" weightsbf16 "$fp32" "$fp32_plan"
    test_compute "$family" compute16 "$fp32" "$fp32_plan"
    test_compute "$family" keepio16 "$fp32" "$fp32_plan"
    # transformers-style export (tests/zoo.sh), as Hub checkpoints stored in float16 are
    hf=$(zoo_model "$family" 17 hf) || { not_ok "$family hf: export"; continue; }
    compile "$hf" "$WORK/$family-hf-fp32.plan" || { not_ok "$family hf: fp32 compile"; continue; }
    test_weights "$family-hf" weights16 "$hf" "$WORK/$family-hf-fp32.plan"
done
[ "$failures" -eq 0 ]
