#!/usr/bin/env bash
# `llmc compile --quant w8a8 --calibrate TEXT` on the trained model of
# models/: the unquantized model runs over a calibration text (Debian's
# fortunes, training-side text) and every Linear input gets one static
# per-tensor scale (the form an NPU runs), and the most important Linears a
# ShadowLinear that adds their outliers back exactly.  Checks: the table
# names each of the 17 Linear inputs with clip <= max |x| and scale = clip /
# 127; the plan decoded by flatc carries exactly those scales (the dynamic
# w8a8 plan none), 3 ShadowLinears (15% of 17, rounded up) on the Linears
# of highest importance, each reading its Linear's outputs and W's segment
# with its x's scale; calibrated on the text's first 4 KB, percentile 100
# leaves no outliers and the plan is byte-identical on a second compile;
# the full text's plan has perplexity on held-out text
# within 1% of f32's (which t_eval checks against ONNX Runtime); with a
# clip at the 99th percentile (1% outliers, so the shadow path always
# runs) the shadow on every Linear brings perplexity within 0.5% of f32's
# and none is worse; misuse is refused with a message and nothing is
# written.  --calibrate-ids: the text's ids from the JS reference tokenizer
# (scripts/ort_eval.js --dump-ids), one line per window of 128 tokens or
# all on one line, give the plan --calibrate gives, byte for byte, without
# a tokenizer in the calibration; lines of 100 ids are windows of 100;
# ids outside the vocabulary are refused naming their line and column.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
WORK=$BUILD/test-data/calibrate
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
MODEL=models/tiny-llama.onnx
TOKENIZER=models/tokenizer.json
CALIB=/usr/share/games/fortunes/fortunes    # Debian fortunes (scripts/deps.sh)
CONTEXT=128 STRIDE=64
head -c 6000 models/heldout.txt | sed '$d' >"$WORK/slice.txt"
# The checks of bytes (a second compile, --calibrate-ids, percentile 100)
# calibrate on the first 4 KB of the text (whole lines): the same paths in
# a sixth of the time; the scales and perplexities on all of it.
head -c 4000 "$CALIB" | sed '$d' >"$WORK/calib4k.txt"

compile() {   # compile OUT.plan LOG [options...]
    local out=$1 log=$2; shift 2
    "$LLMC" compile "$MODEL" --max-context $CONTEXT --tokenizer "$TOKENIZER" --quiet \
        -o "$out" "$@" >"$log" 2>&1
}
compile "$WORK/f32.plan" "$WORK/f32.log"
compile "$WORK/dynamic.plan" "$WORK/dynamic.log" --quant w8a8
check "compile --quant w8a8 --calibrate $CALIB" \
    compile "$WORK/static.plan" "$WORK/static.log" --quant w8a8 --calibrate "$CALIB"
cat "$WORK/static.log" | sed -n '/^calibration:/,/^#/p' | sed 's/^/# /'
compile "$WORK/short.plan" "$WORK/short.log" --quant w8a8 --calibrate "$WORK/calib4k.txt"
check "a second compile gives the same bytes" sh -c \
    "'$LLMC' compile '$MODEL' --max-context $CONTEXT --tokenizer '$TOKENIZER' --quiet \
     --quant w8a8 --calibrate '$WORK/calib4k.txt' -o '$WORK/again.plan' >/dev/null && \
     cmp '$WORK/short.plan' '$WORK/again.plan'"

# --calibrate-ids: the same ids in the same windows give the same plan.
node scripts/ort_eval.js --text "$WORK/calib4k.txt" --tokenizer "$TOKENIZER" --dump-ids "$WORK/calib.ids" \
    >"$WORK/calib-ids.log" 2>&1 || cat "$WORK/calib-ids.log"
N_IDS=$(tr ',' '\n' <"$WORK/calib.ids" | grep -c .)
windows_of() {   # windows_of N: the ids of calib.ids, N a line, separated by ", "
    tr ',' '\n' <"$WORK/calib.ids" | grep . | awk -v n="$1" \
        '{ printf "%s%s", $0, NR % n == 0 ? "\n" : ", " } END { if (NR % n) printf "\n" }'
}
windows_of 128 >"$WORK/w128.ids" && windows_of 100 >"$WORK/w100.ids"
for w in w128 calib w100; do
    compile "$WORK/ids-$w.plan" "$WORK/ids-$w.log" --quant w8a8 --calibrate-ids "$WORK/$w.ids"
done
check "--calibrate-ids with the text's $N_IDS ids, 128 a line: the plan --calibrate gives" \
    cmp "$WORK/short.plan" "$WORK/ids-w128.plan"
check "--calibrate-ids with the ids on one line: cut into the same windows, the same plan" \
    cmp "$WORK/short.plan" "$WORK/ids-calib.plan"
check "--calibrate-ids with 100 ids a line: $(( (N_IDS + 99) / 100 )) windows of $N_IDS tokens" \
    grep -q "^calibration: $N_IDS tokens in $(( (N_IDS + 99) / 100 )) windows of up to 128;" \
    "$WORK/ids-w100.log"
check "the --calibrate run had $(( (N_IDS + 127) / 128 )) windows of the same $N_IDS tokens" \
    grep -q "^calibration: $N_IDS tokens in $(( (N_IDS + 127) / 128 )) windows of up to 128;" \
    "$WORK/short.log"
check "--calibrate-ids needs no tokenizer" sh -c \
    "'$LLMC' compile '$MODEL' --max-context $CONTEXT --quiet --quant w8a8 \
     --calibrate-ids '$WORK/w128.ids' -o '$WORK/ids-no-tok.plan' >'$WORK/ids-no-tok.log' && \
     sed -n '/^calibration:/,/^#/p' '$WORK/ids-no-tok.log' >'$WORK/a.table' && \
     sed -n '/^calibration:/,/^#/p' '$WORK/short.log' >'$WORK/b.table' && \
     cmp '$WORK/a.table' '$WORK/b.table'"

decode() {    # decode PLAN -> PLAN.json (flatc, schemas/plan.fbs)
    flatc --json --raw-binary --strict-json --defaults-json -o "$WORK" schemas/plan.fbs -- "$1"
}
decode "$WORK/static.plan" && decode "$WORK/dynamic.plan"

# The calibration table against the plan's quantizing Linears (kind bit 2:
# each quantizes its own x, with the static scale; no QuantizeRows is left).
scales_check() {
    $PY - "$WORK/static.log" "$WORK/static.json" "$WORK/dynamic.json" <<'PYEOF'
import json, sys
rows = {}
lines = open(sys.argv[1]).read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith("tensor (a Linear's x)"))
for l in lines[start + 1:]:
    f = l.split()
    if len(f) != 7 or not f[4].endswith("%"):
        break
    rows[f[0]] = dict(absmax=float(f[1]), clip=float(f[2]), scale=float(f[3]))
assert len(rows) == 17, f"{len(rows)} tensors in the table, want 17 (4 layers x 4 + the head)"
for name, r in rows.items():
    assert 0 < r["clip"] <= r["absmax"], (name, r)
    assert abs(r["scale"] - r["clip"] / 127) <= 1e-5 * r["scale"], (name, r)
plan = json.load(open(sys.argv[2]))
names = [t["name"] for t in plan["tensors"]]
def quantizing(p):
    return [op for op in p["ops"] if op["code"] == "Linear" and op.get("kind", 0) & 4]
quant = quantizing(plan)
assert len(quant) == 17, f"{len(quant)} quantizing Linears"
assert not any(op["code"] == "QuantizeRows" for op in plan["ops"])
for op in quant:
    x = names[op["inputs"][0]]
    assert x in rows, f"the Linear quantizing {x}: not in the table"
    got, want = op["scale"], rows[x]["scale"]
    assert abs(got - want) <= 1e-4 * want, (x, got, want)  # flatc prints 6 digits
dyn = json.load(open(sys.argv[3]))
assert len(quantizing(dyn)) == 17 and all(op.get("scale", 0) == 0 for op in quantizing(dyn))
assert not any(op["code"] == "ShadowLinear" for op in dyn["ops"])
# ShadowLinear: the 3 most important x, the Linear's outputs, its W's bytes
ts = plan["tensors"]
producer = {o: op for op in plan["ops"] for o in op["outputs"]}
shadows = [op for op in plan["ops"] if op["code"] == "ShadowLinear"]
importance = {n: r["absmax"] / r["clip"] for n, r in rows.items()}
top = sorted(importance, key=lambda n: -importance[n])[:3]
assert sorted(names[op["inputs"][0]] for op in shadows) == sorted(top), (shadows, top)
for op in shadows:   # x, W, the hot channels' table (kind 1), the Linear's outputs
    assert op.get("kind", 0) == 1, ("no hot channels' copy", op["name"])
    hot = ts[op["inputs"][2]]
    assert hot["kind"] == "Weight" and hot["dtype"] == "Float32", hot["name"]
    n_out = sum(ts[y]["dims"][-1]["c"] for y in op["inputs"][3:])
    k = ts[op["inputs"][0]]["dims"][-1]["c"]
    assert hot["dims"][1]["c"] == n_out + 1 and 1 <= hot["dims"][0]["c"] <= max(1, k // 64), hot
    linear = producer[op["inputs"][3]]   # its outputs: the y_j, then its activation tiles
    assert linear["code"] == "Linear" and linear["outputs"][:-1] == op["inputs"][3:], op["name"]
    assert ts[op["inputs"][1]]["segment"] == ts[linear["inputs"][1]]["segment"], op["name"]
    assert abs(op["scale"] - rows[names[op["inputs"][0]]]["scale"]) <= 1e-4 * op["scale"]
print("17 tensors: clip <= max |x|, scale = clip / 127, the plan's ops carry them;",
      "ShadowLinear on", top)
PYEOF
}
check "the table's 17 tensors: clip <= max |x|, scale = clip / 127; the plan's 17 quantizing Linears carry those scales, the dynamic plan's none" scales_check

compile "$WORK/p100.plan" "$WORK/p100.log" --quant w8a8 --calibrate "$WORK/calib4k.txt" --calib-percentile 100
check "percentile 100: clip = max |x|, no outliers" sh -c \
    "grep -q 'clip at the 100 percentile' '$WORK/p100.log' && \
     ! sed -n '/^tensor/,/^#/p' '$WORK/p100.log' | awk 'NR > 1 && NF == 6' | grep -v ' 0.0000% '"

ppl_of() { sed -n 's/^perplexity \([0-9.]*\) .*/\1/p' "$1"; }
for p in f32 dynamic static; do
    "$LLMC" eval "$WORK/$p.plan" --text "$WORK/slice.txt" --context $CONTEXT --stride $STRIDE \
        >"$WORK/$p.txt" 2>&1
done
F32=$(ppl_of "$WORK/f32.txt") DYN=$(ppl_of "$WORK/dynamic.txt") STA=$(ppl_of "$WORK/static.txt")
echo "# summary: perplexity f32 ${F32:-?}, w8a8 per row ${DYN:-?}, w8a8 per tensor (calibrated) ${STA:-?}"
check "calibrated per-tensor w8a8 perplexity $STA within 1% of f32's $F32" within "$STA" "$F32" 0.01

# 1% of every x beyond the clip: shadow on all Linears against none.
for f in 0 1; do
    compile "$WORK/p99-s$f.plan" "$WORK/p99-s$f.log" --quant w8a8 --calibrate "$CALIB" \
        --calib-percentile 99 --shadow-layers $f
    "$LLMC" eval "$WORK/p99-s$f.plan" --text "$WORK/slice.txt" --context $CONTEXT \
        --stride $STRIDE >"$WORK/p99-s$f.txt" 2>&1
done
NONE=$(ppl_of "$WORK/p99-s0.txt") ALL=$(ppl_of "$WORK/p99-s1.txt")
echo "# summary: clip at the 99th percentile: perplexity without shadow ${NONE:-?}, with ${ALL:-?}"
all_shadowed_close() {
    grep -q '17 of 17 calibrated Linears keep' "$WORK/p99-s1.log" && within "$ALL" "$F32" 0.005
}
check "clip at the 99th percentile: shadow on all 17 Linears, perplexity $ALL within 0.5% of f32's $F32" \
    all_shadowed_close
check "clip at the 99th percentile: without shadow ($NONE) worse than with ($ALL)" \
    awk -v a="${NONE:-0}" -v b="${ALL:-1e9}" 'BEGIN { exit !(a > b) }'

# The verifier: a Linear's static scale edited to NaN or -1 in the plan's bytes.
bad_scale() {   # bad_scale VALUE OUT.plan
    $PY - "$WORK/static.plan" "$1" "$2" <<'PYEOF'
import struct, sys
sys.path.insert(0, "tests")
from make_bad_inputs import FlatBuffer
PLAN_OPS, OP_CODE, OP_SCALE, LINEAR = 7, 0, 16, 14   # schemas/plan.fbs field ids, OpCode
d = bytearray(open(sys.argv[1], "rb").read())
fb = FlatBuffer(d)
root, i = fb.root(), 0
while True:   # the first Linear with a static scale
    op = fb.vector_table(root, PLAN_OPS, i)
    code = fb.field(op, OP_CODE)
    if code is not None and d[code] == LINEAR and fb.field(op, OP_SCALE) is not None:
        break
    i += 1
struct.pack_into("<f", d, fb.field(op, OP_SCALE), float(sys.argv[2]))
open(sys.argv[3], "wb").write(d)
PYEOF
}
for v in nan -1; do
    bad_scale $v "$WORK/scale-$v.plan"
    check "a Linear's static scale of $v in the plan is refused by the verifier" sh -c \
        "! '$LLMC' inspect '$WORK/scale-$v.plan' >'$WORK/scale-$v.out' 2>&1; cat '$WORK/scale-$v.out'; \
         grep -q 'Linear.*static scale' '$WORK/scale-$v.out'"
done

refused() {   # refused CODE PATTERN options...: exit code, message, no plan written
    local want=$1 pattern=$2; shift 2
    rm -f "$WORK/bad.plan"
    "$LLMC" compile "$MODEL" --max-context $CONTEXT -o "$WORK/bad.plan" "$@" >"$WORK/bad.out" 2>&1
    local got=$?
    cat "$WORK/bad.out"
    [ "$got" -eq "$want" ] && grep -q -- "$pattern" "$WORK/bad.out" && [ ! -e "$WORK/bad.plan" ]
}
: >"$WORK/empty.txt"
printf ' \n\n' >"$WORK/blank.ids"
printf '1, 2, 3\n4 5 2048 6\n' >"$WORK/vocab.ids"
printf '1, 2, x\n' >"$WORK/char.ids"
check "--calibrate with w4a8 is a usage error" refused 2 "use it with --quant w8a8" \
    --tokenizer "$TOKENIZER" --quant w4a8 --calibrate "$CALIB"
check "--calibrate without --tokenizer is a usage error" refused 2 "needs --tokenizer" \
    --quant w8a8 --calibrate "$CALIB"
check "--calib-percentile 0 is a usage error" refused 2 "wants a number in (0, 100]" \
    --tokenizer "$TOKENIZER" --quant w8a8 --calibrate "$CALIB" --calib-percentile 0
check "--calib-percentile without --calibrate is a usage error" refused 2 "needs --calibrate" \
    --tokenizer "$TOKENIZER" --quant w8a8 --calib-percentile 99
check "--shadow-layers 1.5 is a usage error" refused 2 "a share in \[0, 1\]" \
    --tokenizer "$TOKENIZER" --quant w8a8 --calibrate "$CALIB" --shadow-layers 1.5
check "--shadow-layers without --calibrate is a usage error" refused 2 "needs --calibrate" \
    --tokenizer "$TOKENIZER" --quant w8a8 --shadow-layers 0.5
check "an empty calibration text is refused" refused 3 "is empty" \
    --tokenizer "$TOKENIZER" --quant w8a8 --calibrate "$WORK/empty.txt"
check "a missing calibration text is refused with its path" refused 3 "$WORK/nothing.txt" \
    --tokenizer "$TOKENIZER" --quant w8a8 --calibrate "$WORK/nothing.txt"
check "--calibrate and --calibrate-ids together is a usage error" refused 2 "one of --calibrate TEXT or --calibrate-ids" \
    --tokenizer "$TOKENIZER" --quant w8a8 --calibrate "$CALIB" --calibrate-ids "$WORK/w128.ids"
check "--calibrate-ids with w4a8 is a usage error" refused 2 "use it with --quant w8a8" \
    --quant w4a8 --calibrate-ids "$WORK/w128.ids"
check "an empty --calibrate-ids file is refused" refused 3 "is empty" \
    --quant w8a8 --calibrate-ids "$WORK/empty.txt"
check "a --calibrate-ids file of blank lines is refused" refused 3 "has no token ids" \
    --quant w8a8 --calibrate-ids "$WORK/blank.ids"
check "an id outside the vocabulary is refused with its line and column" refused 3 \
    "line 2, column 5 (byte 12): id 2048 (token 5) is outside the vocabulary \[0, 2048)" \
    --quant w8a8 --calibrate-ids "$WORK/vocab.ids"
check "a non-digit is refused with its line and column" refused 3 "line 1, column 7" \
    --quant w8a8 --calibrate-ids "$WORK/char.ids"
tap_done
