#!/usr/bin/env bash
# KV caches in float16 and int8 end to end (paper 002 §4: keys
# int8 with a scale per row, values float16).  For each family's tiny
# opset-17 export (tests/zoo.sh) compile --kv-cache f32, f16 and int8 plans
# for the host's best target (and f16/int8 for generic, the oracle), then
# 32 greedy steps after prompts of 1, 7 and 64 tokens:
#   - llmc inspect names the KV dtype; bytes per position: f16 = f32 / 2,
#     int8 < f16 (K rows head_dim + 4 bytes, V rows 2 head_dim)
#   - f16 and int8 logits within a bound of the f32-KV plan's over the steps
#     that saw the same tokens; greedy ids equal f32's on most prompts
#     (asserted over all families: random tiny models have near-tied logits)
#   - the avx2 loops give the generic plan's ids, and logits within 1e-4
#     (f16) or 5e-4 (int8: the Linears' float sums differ between targets in
#     the last bits, and a key element on a rounding edge moves by one
#     step of its row's 127)
#   - the verifier refuses a kv_cache_dtype it does not know; --kv-cache
#     with an unknown value is a usage error
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
WORK=$BUILD/test-data/kvcache
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
. tests/zoo.sh
. tests/logits_err.sh

F16_RTOL=${F16_RTOL:-0.002}   # max |logit - f32-KV logit| / max |f32-KV logit| per row
I8_RTOL=${I8_RTOL:-0.02}

if grep -qw avx2 /proc/cpuinfo && grep -qw f16c /proc/cpuinfo; then HOST=avx2; else HOST=generic; fi

compile() {   # compile MODEL FAMILY KV TARGET
    "$LLMC" compile "$1" -o "$WORK/$2-$3-$4.plan" --max-context 128 --kv-cache "$3" --target "$4" \
        --quiet >"$WORK/$2-$3-$4.log" 2>&1
}

run() {   # run FAMILY KV TARGET PROMPT_NO PROMPT: ids in .tok, logits in .bin
    local base=$WORK/$1-$2-$3-p$4
    "$LLMC" run "$WORK/$1-$2-$3.plan" --prompt-ids "$5" --max-new "$MAX_NEW" \
        --logits-out "$base.bin" >"$base.tok" 2>"$base.log"
}

position_bytes() { "$LLMC" inspect "$1" | sed -n 's/^kv cache *\([a-z0-9]*\), \([0-9]*\) bytes per position.*/\1 \2/p'; }

same16=0 same8=0 total=0
for family in llama qwen2 gpt2 phi; do
    model=$(zoo_model "$family" 17) || { check "$family@17 exports" false; continue; }
    plans="f32-$HOST f16-$HOST int8-$HOST"
    [ "$HOST" != generic ] && plans="$plans f16-generic int8-generic"
    for p in $plans; do
        check "$family: compile --kv-cache ${p%-*} --target ${p#*-}" compile "$model" "$family" "${p%-*}" "${p#*-}"
    done
    read -r d32 b32 <<<"$(position_bytes "$WORK/$family-f32-$HOST.plan")"
    read -r d16 b16 <<<"$(position_bytes "$WORK/$family-f16-$HOST.plan")"
    read -r d8 b8 <<<"$(position_bytes "$WORK/$family-int8-$HOST.plan")"
    check "$family: inspect: kv cache f32 $b32, f16 $b16, int8 $b8 bytes per position" \
        test "$d32 $d16 $d8" = "f32 f16 int8" -a "$((b32 / 2))" = "${b16:-x}" -a "${b8:-0}" -lt "${b16:-0}" -a "${b8:-0}" -gt 0
    w16=0 w8=0 i=0
    for prompt in $PROMPTS; do
        i=$((i + 1)) total=$((total + 1))
        for p in $plans; do
            run "$family" "${p%-*}" "${p#*-}" "$i" "$prompt" || check "$family $p prompt $i runs" false
        done
        g=$WORK/$family-%s-$HOST-p$i
        # shellcheck disable=SC2059
        cmp -s "$(printf "$g" f32).tok" "$(printf "$g" f16).tok" && same16=$((same16 + 1))
        # shellcheck disable=SC2059
        cmp -s "$(printf "$g" f32).tok" "$(printf "$g" int8).tok" && same8=$((same8 + 1))
        # shellcheck disable=SC2059
        e16=$(rel_err "$(printf "$g" f32)" "$(printf "$g" f16)")
        # shellcheck disable=SC2059
        e8=$(rel_err "$(printf "$g" f32)" "$(printf "$g" int8)")
        below "$e16" "$w16" || w16=$e16
        below "$e8" "$w8" || w8=$e8
        if [ "$HOST" != generic ]; then
            for kv in f16:1e-4 int8:5e-4; do
                a=$WORK/$family-${kv%:*}-generic-p$i b=$WORK/$family-${kv%:*}-$HOST-p$i
                check "$family ${kv%:*} prompt $i: $HOST ids equal generic ids" cmp "$a.tok" "$b.tok"
                check "$family ${kv%:*} prompt $i: $HOST logits within ${kv#*:} of generic" \
                    $PY scripts/compare_logits.py "$a.bin" "$b.bin" --vocab "$VOCAB" --rtol "${kv#*:}"
            done
        fi
    done
    echo "# summary: $family: max logits error vs f32 KV: f16 $w16, int8 $w8 (of max|logit|)"
    check "$family: f16 KV logits error $w16 <= $F16_RTOL" below "$w16" "$F16_RTOL"
    check "$family: int8 KV logits error $w8 <= $I8_RTOL" below "$w8" "$I8_RTOL"
done
echo "# summary: greedy ids equal f32 KV's: f16 $same16 of $total prompts, int8 $same8 of $total"
check "f16 KV: ids equal f32 KV's on most prompts ($same16 of $total)" test $((4 * same16)) -ge $((3 * total))
check "int8 KV: ids equal f32 KV's on most prompts ($same8 of $total)" test $((4 * same8)) -ge $((3 * total))

# Plan.kv_cache_dtype rewritten in place (its field number read from
# schemas/plan.fbs) to Int32: the verifier refuses it, naming the field.
corrupt_dtype() {
    local plan=$WORK/bad-dtype.plan
    cp "$WORK/llama-f16-$HOST.plan" "$plan" &&
    $PY - "$plan" schemas/plan.fbs <<'PYEOF' &&
import re, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
body = open(sys.argv[2]).read().split("table Plan {")[1].split("}")[0]
fields = re.findall(r"^\s*(\w+)\s*:", body, re.M)
field = fields.index("kv_cache_dtype")
root = struct.unpack_from("<I", b, 0)[0]
vt = root - struct.unpack_from("<i", b, root)[0]
slot = struct.unpack_from("<H", b, vt + 4 + 2 * field)[0]
assert slot and struct.unpack_from("<i", b, root + slot)[0] == 10
struct.pack_into("<i", b, root + slot, 6)
open(sys.argv[1], "wb").write(b)
PYEOF
    ! "$LLMC" verify "$plan" >"$WORK/bad-dtype.log" 2>&1 &&
    grep -q "kv_cache_dtype 6 is not Float32, Float16 or Int8" "$WORK/bad-dtype.log"
}
check "a plan whose kv_cache_dtype is Int32 is refused by the verifier" corrupt_dtype

usage() { "$LLMC" compile "$(zoo_model llama 17)" -o "$WORK/x.plan" --kv-cache bf16 2>&1 | grep -q "kv-cache wants f32, f16 or int8"; }
check "--kv-cache bf16 is a usage error" usage
tap_done
