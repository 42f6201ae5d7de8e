#!/usr/bin/env bash
# Hostile input: one test per row of the "Bad input" table of docs/testing.md.  Each row
# runs llmc on one malformed input and checks the exit code, that stderr
# names what is wrong and where (every listed needle), and that nothing at
# all was written to the output folder (no plan, no temporary file, no
# logits).  The inputs come from tests/make_bad_inputs.py (ONNX models, and
# byte edits of a compiled plan, documented there); nothing is committed.
# The last test checks that the table lists exactly these rows.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
WORK=$BUILD/test-data/bad_input
CASES=$WORK/cases
PLANS=$WORK/plans
OUT=$WORK/out                 # every row's output goes here; it must stay empty
rm -rf "$WORK" && mkdir -p "$WORK" "$OUT"
. tests/tap.sh
. tests/zoo.sh

$PY tests/make_bad_inputs.py onnx "$CASES" || { echo "Bail out! tests/make_bad_inputs.py onnx failed"; exit 1; }
MODEL=$(zoo_model llama 14) || { echo "Bail out! cannot export the tiny llama"; exit 1; }
"$LLMC" compile "$MODEL" -o "$WORK/llama.plan" --max-context 64 --target generic >/dev/null \
    && $PY tests/make_bad_inputs.py plans "$WORK/llama.plan" "$PLANS" \
    || { echo "Bail out! cannot compile or mutate the tiny llama plan"; exit 1; }

ROWS=()
# expect CODE NEEDLE... -- COMMAND...: exit status CODE, every NEEDLE in
# stderr, the output folder still empty.
expect() {
    local want=$1; shift
    local needles=()
    while [ "$1" != "--" ]; do needles+=("$1"); shift; done
    shift
    "$@" >"$WORK/stdout.txt" 2>"$WORK/stderr.txt"
    local got=$? bad=0 needle
    [ "$got" -eq "$want" ] || { echo "exit status $got, expected $want"; bad=1; }
    for needle in "${needles[@]}"; do
        grep -qF -- "$needle" "$WORK/stderr.txt" || { echo "stderr lacks: $needle"; bad=1; }
    done
    if [ -n "$(ls -A "$OUT")" ]; then echo "written to the output folder: $(ls -A "$OUT")"; bad=1; fi
    rm -rf "${OUT:?}"/* "$OUT"/.[!.]* 2>/dev/null
    [ "$bad" -eq 0 ] || { echo "stderr:"; cat "$WORK/stderr.txt"; }
    return "$bad"
}
# TABLE=FILE: also write the table's rows (label, message, exit code) to FILE.
TABLE=${TABLE:-}
[ -z "$TABLE" ] || : >"$TABLE"
table_row() {   # table_row LABEL MESSAGE CODE
    [ -z "$TABLE" ] || printf '| %s | `%s` | %s |\n' "$1" "$(echo "$2" | sed "s|$PWD/$WORK/||g; s|$WORK/||g; s|^llmc: error: ||")" "$3" >>"$TABLE"
}
row() {   # row LABEL CODE NEEDLE... -- COMMAND...
    local label=$1; shift
    ROWS+=("$label")
    check "$label" expect "$@"
    table_row "$label" "$(head -1 "$WORK/stderr.txt")" "$1"
}
compile() { "$LLMC" compile "$1" -o "$OUT/out.plan" "${@:2}"; }
# A mutated plan: `llmc verify` refuses it, and so does `llmc run`, which
# then writes no logits; verify's message is the one checked.
plan_refused() {
    "$LLMC" run "$1" --prompt-ids 1 --max-new 1 --logits-out "$OUT/logits.bin" >/dev/null 2>&1
    local run_rc=$?
    "$LLMC" verify "$1"
    local rc=$?
    [ "$run_rc" -eq "$rc" ] || { echo "run exited $run_rc, verify $rc" >&2; return 99; }
    return "$rc"
}

# ---- ONNX files ----
truncated_everywhere() {   # exit 3 naming the file, the byte and "truncated" at every cut
    local offsets o n=0
    offsets=$($PY tests/make_bad_inputs.py offsets "$MODEL" 64) || return 1
    for o in $offsets; do
        head -c "$o" "$MODEL" >"$WORK/cut.onnx"
        expect 3 "'$WORK/cut.onnx' is not a valid ONNX model (byte " "runs past the end of the file ($o bytes)" \
            -- compile "$WORK/cut.onnx" || { echo "at offset $o"; return 1; }
        n=$((n + 1))
    done
    [ "$n" -ge 60 ] || { echo "only $n offsets"; return 1; }
}
ROWS+=("truncated ONNX, cut at 64 offsets inside the graph of a tiny llama export")
check "${ROWS[-1]}" truncated_everywhere
table_row "${ROWS[-1]}" "$(head -1 "$WORK/stderr.txt")" 3
row "empty file" 3 "empty.onnx' is not a valid ONNX model (empty file)" -- compile "$CASES/empty.onnx"
row "plain text, not protobuf" 3 "not_protobuf.onnx' is not a valid ONNX model (byte 0, field" "wire type" \
    -- compile "$CASES/not_protobuf.onnx"
row "wire type: ir_version as fixed32" 3 \
    "wire_ir_version.onnx' is not a valid ONNX model (byte 0, field ir_version: wire type 5 (32-bit), but this field is varint)" \
    -- compile "$CASES/wire_ir_version.onnx"
row "wire type: a node's op_type as fixed32" 3 "wire_op_type.onnx" \
    "field graph.node[0].op_type: wire type 5 (32-bit), but this field is length-delimited" \
    -- compile "$CASES/wire_op_type.onnx"
row "wire type: graph as a (deprecated) group" 3 "wire_graph.onnx" "field graph: wire type 3 (group start) is not allowed" \
    -- compile "$CASES/wire_graph.onnx"
row "model without a graph" 3 "no_graph.onnx' is not a valid ONNX model (it has no graph)" -- compile "$CASES/no_graph.onnx"
row "raw_data shorter than the shape" 3 "initializer 'short_raw' has 40 bytes of raw_data, its shape [3,4] of float needs 48" \
    -- compile "$CASES/short_raw.onnx"
row "float16 raw_data shorter than the shape" 3 \
    "initializer 'half_raw' has 30 bytes of raw_data, its shape [4,4] of float16 needs 32" \
    -- compile "$CASES/short_raw_f16.onnx"
row "float_data shorter than the shape" 3 "initializer 'few_floats' has 2 elements in float_data, its shape [5] needs 5" \
    -- compile "$CASES/short_typed.onnx"
row "initializer shape product over 64 bits" 3 \
    "initializer 'huge': shape [4294967296,4294967296,16] has more elements than 64 bits can count" \
    -- compile "$CASES/overflow_shape.onnx"
row "input shape product over 64 bits" 3 "input 'x': shape [1099511627776,1099511627776] has more elements than 64 bits" \
    -- compile "$CASES/absurd_dim_input.onnx"
row "input of 2^62 floats (bytes over 64 bits)" 4 "tensor 'x': its byte size overflows 64 bits" \
    -- compile "$CASES/absurd_bytes_input.onnx"
row "negative dim in an initializer" 3 "initializer 'neg' has negative dim -3 at axis 1" \
    -- compile "$CASES/negative_dim_init.onnx"
row "negative dim in a graph input" 3 "input 'x' axis 1 has negative size -7" -- compile "$CASES/negative_dim_input.onnx"
row "unbound symbolic input dim" 4 "input 'x' axis 1 has symbolic dim 'mystery': bind it with --dim mystery=N" \
    -- compile "$CASES/unbound_dim.onnx"
row "string initializer" 4 "initializer 'odd_type' has data type string (8), which llmc does not support" \
    -- compile "$CASES/string_initializer.onnx"
row "external data at ../../etc/passwd" 3 \
    "initializer 'w_dotdot': external data location '../../etc/passwd' must be a relative path inside the model folder" \
    -- compile "$CASES/ext/dotdot.onnx"
row "external data at an absolute path" 3 \
    "initializer 'w_absolute': external data location '/etc/passwd' must be a relative path inside the model folder" \
    -- compile "$CASES/ext/absolute.onnx"
row "external data through a symlink to outside" 3 "initializer 'w_symlink': external data location 'link.bin' resolves to" \
    "secret.bin', outside the model folder" -- compile "$CASES/ext/symlink.onnx"
row "missing external data file" 3 "initializer 'w_missing': cannot open external data file 'nope.bin'" \
    -- compile "$CASES/ext/missing.onnx"
row "external data file too short" 3 \
    "initializer 'w_short': external data at offset 0, length 16 lies beyond the end of 'short.bin' (10 bytes)" \
    -- compile "$CASES/ext/short.onnx"
row "external data offset past the file" 3 "initializer 'w_offset': external data at offset 4096" "'short.bin'" \
    -- compile "$CASES/ext/offset.onnx"
row "two nodes write one value" 3 "value 'y' is defined twice: by node 'first' (#0, Relu) and by node 'second' (#1, Neg)" \
    -- compile "$CASES/duplicate_producer.onnx"
row "two initializers with one name" 3 "value 'w' is defined twice: by an initializer and by an initializer" \
    -- compile "$CASES/duplicate_initializer.onnx"
row "node input never defined" 3 \
    "node 'adder' (#0, Add) input 1 'ghost_value' is not defined by any node, input or initializer" \
    -- compile "$CASES/undefined_input.onnx"
row "graph output never defined" 3 "graph output 'nowhere' is not defined" -- compile "$CASES/undefined_output.onnx"
row "cycle of two nodes" 3 "the graph has a cycle through node 'cyc_" -- compile "$CASES/cycle.onnx"
row "node consuming its own output" 3 "the graph has a cycle through node 'self_loop' (Relu)" \
    -- compile "$CASES/self_loop.onnx"
row "output declared with another shape" 3 "value 'y': the model declares shape [3] but its producer gives [2]" \
    -- compile "$CASES/output_wrong_shape.onnx"
row "output declared with another element type" 3 \
    "value 'y': the model declares element type int64 but its producer gives float" \
    -- compile "$CASES/output_wrong_type.onnx"
row "unsupported ops, all listed" 4 "unsupported operators (3): node 'modder' (#0) Mod opset 17; node 'nz' (#2) NonZero opset 17; node 'fused' (#3) com.microsoft::FusedMatMul opset 1" \
    -- compile "$CASES/unsupported_ops.onnx"
row "opset 12" 4 "opset 12 of domain '' is outside the supported range 13..21" -- compile "$CASES/opset12.onnx"
row "opset 22" 4 "opset 22 of domain '' is outside the supported range 13..21" -- compile "$CASES/opset22.onnx"
row "opset 22 and unsupported ops, in one message" 4 \
    "opset 22 of domain '' is outside the supported range 13..21; unsupported operators (2): node 'modder' (#0) Mod opset 22; node 'frob' (#1) x.custom::Frob opset 3" \
    -- compile "$CASES/opset_and_ops.onnx"
row "If on a graph input, no branch reading the past" 4 "node 'branchy' (#0, If): the condition is graph input 'cond'" \
    "neither branch reads the past key/values" \
    -- compile "$CASES/subgraph_if.onnx"
row "Loop (subgraph)" 4 "node 'looper' (#0, Loop) has a subgraph attribute 'body': subgraphs are not supported" \
    -- compile "$CASES/subgraph_loop.onnx"
row "Scan (subgraph)" 4 "node 'scanner' (#0, Scan) has a subgraph attribute 'body': subgraphs are not supported" \
    -- compile "$CASES/subgraph_scan.onnx"
row "input_ids as int32" 4 "input 'input_ids' is int32 of rank 2, but as input_ids the runtime needs int64 of rank 2" \
    -- compile "$CASES/int32_input_ids.onnx"
row "past_key_values value without its key" 4 \
    "input 'past_key_values.1.value' is the past_value of cache layer 1, but no input is its past_key" \
    -- compile "$CASES/kv_value_without_key.onnx"
row "past_key_values layer numbered past the layer count" 4 \
    "input 'past_key_values.3.key' is cache layer 3, but the model has 1 decoder layer(s)" "numbered 0..0" \
    -- compile "$CASES/kv_layer_past_count.onnx"
row "present output without a past input" 4 \
    "output 'present.0.key' is the present_key of cache layer 0, but no input is its past_key" \
    -- compile "$CASES/kv_present_without_past.onnx"
row "two inputs for one cache layer" 4 \
    "inputs 'past_key_values.0.key' and 'past.0.key' are both the past_key of cache layer 0" \
    -- compile "$CASES/kv_two_keys.onnx"
row "missing model file" 3 "cannot open '$CASES/nope.onnx': No such file or directory" -- compile "$CASES/nope.onnx"
mkdir -p "$WORK/no_model"
row "model folder without an ONNX model" 3 "'$WORK/no_model' holds no ONNX model: looked for genai_config.json" \
    -- compile "$WORK/no_model"
truncate -s $(((2 << 30) + 1)) "$WORK/big.onnx"   # sparse: no disk space
row "ONNX file over 2 GiB" 3 "big.onnx' is 2147483649 bytes, over the 2 GiB protobuf limit" -- compile "$WORK/big.onnx"
rm -f "$WORK/big.onnx"

# ---- tokenizer.json (compile --tokenizer): edits of the tests' tiny
# byte-level tokenizer (tests/make_tiny_tokenizer.py) ----
TOK=$WORK/tok
$PY tests/make_tiny_tokenizer.py "$TOK/ok" && $PY tests/make_tiny_tokenizer.py "$TOK/sp" --style sentencepiece &&
$PY - "$TOK" <<'PYEOF' || { echo "Bail out! cannot write the bad tokenizers"; exit 1; }
import json, os, sys
root = sys.argv[1]
text = open(os.path.join(root, "ok", "tokenizer.json"), encoding="utf-8").read()
def case(name, body):
    os.makedirs(os.path.join(root, name), exist_ok=True)
    open(os.path.join(root, name, "tokenizer.json"), "w", encoding="utf-8").write(body)
def edited(name, edit):
    t = json.loads(text)
    edit(t)
    case(name, json.dumps(t))
case("cut", text[:100])
case("deep", "[" * 100 + "]" * 100)
edited("nfkc", lambda t: t.update(normalizer={"type": "NFKC"}))
edited("regex", lambda t: t["pre_tokenizer"]["pretokenizers"][0]["pattern"].update(Regex=r"\p{L}+|\s+"))
edited("wordpiece", lambda t: t["model"].update(type="WordPiece"))
edited("merge", lambda t: t["model"]["merges"].append(["zz", "q"]))
sp = json.load(open(os.path.join(root, "sp", "tokenizer.json"), encoding="utf-8"))
sp["model"]["vocab"][""] = len(sp["model"]["vocab"])
case("empty", json.dumps(sp))
PYEOF
with_tokenizer() { compile "$MODEL" --tokenizer "$TOK/$1/tokenizer.json"; }
row "tokenizer.json cut after 100 bytes" 3 "tok/cut/tokenizer.json: JSON byte 100: unterminated string" -- with_tokenizer cut
row "tokenizer.json nested 100 deep" 3 "tok/deep/tokenizer.json: JSON byte 65: nesting deeper than 64 levels" -- with_tokenizer deep
row "tokenizer.json with an NFKC normalizer" 4 "tok/nfkc/tokenizer.json: normalizer: only NFC" -- with_tokenizer nfkc
row "tokenizer.json with an unknown split regex" 4 "tok/regex/tokenizer.json: pre_tokenizer Split: unknown regex" \
    -- with_tokenizer regex
row "tokenizer.json of a WordPiece model" 4 "tok/wordpiece/tokenizer.json: model: only BPE models are supported" \
    -- with_tokenizer wordpiece
row "tokenizer.json (SentencePiece) with an empty vocab piece" 4 "tok/empty/tokenizer.json: vocab: empty piece" \
    -- with_tokenizer empty
row "tokenizer.json merge of pieces not in the vocab" 3 \
    "tok/merge/tokenizer.json: model.merges[20]: \"zz\" + \"q\" or their merge is not in the vocab" -- with_tokenizer merge

# 100,000 nodes in a chain compile with a 1 MiB stack: nothing recurses
# along the graph.  The time goes to the log (docs/testing.md quotes it).
chain_compiles() {
    local start end
    start=$(date +%s.%N)
    (ulimit -s 1024 && "$LLMC" compile "$CASES/chain_100k.onnx" -o "$WORK/chain.plan" >/dev/null) || return 1
    end=$(date +%s.%N)
    echo "# summary: 100,000-node chain compiled in $(awk "BEGIN { printf \"%.2f\", $end - $start }") s with a 1 MiB stack"
    "$LLMC" verify "$WORK/chain.plan" | grep -q "100000 ops"
}
ROWS+=("100,000-node chain")
check "${ROWS[-1]}" chain_compiles
grep '^# summary' "$WORK/last.log"
table_row "${ROWS[-1]}" "$(sed -n 's/^# summary: //p' "$WORK/last.log")" 0

# ---- plans (byte edits of the tiny llama plan: tests/make_bad_inputs.py) ----
row "plan with bad magic" 6 "bad_magic.plan': not an llmc plan: bytes 4..7 are not the identifier \"LLMC\"" \
    -- plan_refused "$PLANS/bad_magic.plan"
row "plan with format version 99" 6 "bad_version.plan': unsupported plan format version: format_version 99" \
    -- plan_refused "$PLANS/bad_version.plan"
row "plan for an unknown target" 6 "other_target.plan': plan compiled for another target: target \"generix\" unknown; this runtime knows generic avx2 neon-dot neon-i8mm" \
    -- plan_refused "$PLANS/other_target.plan"
row "plan root offset out of range" 6 "root_out_of_range.plan': plan truncated: Plan at byte 2147483392" \
    "runs past the end of the plan" -- plan_refused "$PLANS/root_out_of_range.plan"
row "plan segment past the end of the file" 6 "segment_past_end.plan'" "segment 0: bytes [" "run past the end of the plan" \
    -- plan_refused "$PLANS/segment_past_end.plan"
row "plan with overlapping segments" 6 "segments_overlap.plan': plan structure invalid: segments 0 and 1 overlap" \
    -- plan_refused "$PLANS/segments_overlap.plan"
row "plan segment hash mismatch" 6 "hash_mismatch.plan': weight segment hash mismatch: segment " "does not match" \
    -- "$LLMC" verify "$PLANS/hash_mismatch.plan"
row "plan cut in half" 6 "truncated.plan': plan truncated:" -- plan_refused "$PLANS/truncated.plan"
: >"$WORK/empty.plan"
# A byte flipped on its way to disk (tests/faults/flip_write.c): compile
# reads the plan back through the runtime verifier and refuses to name it (its
# unnamed file reads OUT/#INODE in /proc).
flipped_on_write() {
    LD_PRELOAD=$PWD/$BUILD/faults/flip_write.so ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
        LLMC_FLIP_PATH_PART="$OUT/#" LLMC_FLIP_OFFSET=$(($(stat -c %s "$WORK/llama.plan") - 1)) \
        "$LLMC" compile "$MODEL" -o "$OUT/out.plan" --max-context 64
}
row "plan corrupted while being written" 1 "the plan for '$OUT/out.plan', read back, fails the runtime verifier" \
    "segment " "does not match" -- flipped_on_write
row "empty plan" 3 "empty.plan' is empty" -- "$LLMC" verify "$WORK/empty.plan"

# ---- the command line ----
row "compile without -o" 2 "llmc compile: missing -o OUT.plan" -- "$LLMC" compile "$MODEL"
row "compile with an unknown flag" 2 "llmc compile: unknown option or missing value: '--frob'" \
    -- compile "$MODEL" --frob
row "compile without a model" 2 "llmc compile: missing MODEL.onnx" -- "$LLMC" compile -o "$OUT/out.plan"
row "compile with --max-context 0" 2 "--max-context wants an integer in 1..16777216, got '0'" \
    -- compile "$MODEL" --max-context 0
row "compile with --embed-bits 12" 2 "--embed-bits wants 32, 16 or 8, got '12'" -- compile "$MODEL" --embed-bits 12
row "compile with --logits first" 2 "--logits wants last or all, got 'first'" -- compile "$MODEL" --logits first
row "--logits last where the logits are not an LM head's output" 4 \
    "--logits last: node 'probs': the logits are not produced by an LM head" \
    -- compile "$CASES/logits_softmax.onnx" --logits last
row "--logits last where an op after the LM head mixes in another tensor" 4 \
    "--logits last: node 'gate': the logits are not produced by an LM head" \
    -- compile "$CASES/logits_gated.onnx" --logits last
row "output in a missing folder" 5 "cannot write '$OUT/no/such/out.plan': No such file or directory" \
    -- "$LLMC" compile "$MODEL" -o "$OUT/no/such/out.plan"
mkdir -p "$WORK/a_folder"
row "output path is a folder" 5 "cannot write '$WORK/a_folder': Is a directory" -- "$LLMC" compile "$MODEL" -o "$WORK/a_folder"
row "output on a read-only file system" 5 "cannot write '/proc/llmc-test.plan'" \
    -- "$LLMC" compile "$MODEL" -o /proc/llmc-test.plan
row "run with a prompt id outside the vocabulary" 2 "prompt id 99999 (position 0) is outside the vocabulary [0, 512)" \
    -- "$LLMC" run "$WORK/llama.plan" --prompt-ids 99999 --max-new 2 --logits-out "$OUT/logits.bin"
row "run with a malformed prompt" 2 "--prompt-ids wants comma-separated non-negative ids, got '1,x'" \
    -- "$LLMC" run "$WORK/llama.plan" --prompt-ids 1,x --max-new 2 --logits-out "$OUT/logits.bin"
row "verify without a plan" 2 "llmc verify: missing PLAN" -- "$LLMC" verify

# docs/testing.md's table lists exactly these rows, in this order.
table_matches() {
    sed -n '/^## Bad input/,/^## /p' docs/testing.md | grep '^| ' | tail -n +2 | grep -v '^|---' \
        | cut -d'|' -f2 | sed 's/^ *//; s/ *$//; s/`//g' >"$WORK/table_rows.txt"
    printf '%s\n' "${ROWS[@]}" >"$WORK/test_rows.txt"
    diff -u "$WORK/test_rows.txt" "$WORK/table_rows.txt"
}
check "docs/testing.md's Bad input table has one row per test (${#ROWS[@]})" table_matches

tap_done
