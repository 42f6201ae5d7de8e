#!/usr/bin/env bash
# NPU chunk subgraphs (paper 003 §3.2-3.4): `llmc compile
# --npu-chunk C` on the calibrated w8a8 trained model and the tiny zoo, and
# chunked prefill through the reference delegate (an NPU stand-in on its
# own thread) and through the CPU alone.  Checks: the subgraphs hold only
# static ops, every Linear among them, and their weights do not depend on
# C; prompts of 1, C-1, C, C+1 and 2.4 C tokens (a padded last chunk) give
# the greedy ids of the unchunked plan and its logits (the CPU path to
# 1e-5 of the largest logit, the delegate to 1e-3); lanes 1-3, in order
# or not, give the same bytes; the trace keeps paper 003's rules (one node
# at a time per lane, Eq. 4; a chunk's nodes in order, Eq. 3; a chunk's
# attention after the previous chunk's, Eq. 2; a lane's chunk after the
# one before it finished); the zoo's four families generate the same
# greedy tokens chunked and not; a corrupted subgraph is refused by
# chunked prefill while a plain run never reads it; misuse is refused.
# (Chunked perplexity: tests/t_npu_perplexity.sh.)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLMC=$BUILD/llmc
PY=/usr/bin/python3
WORK=$BUILD/test-data/npu
rm -rf "$WORK" && mkdir -p "$WORK"
. tests/tap.sh
. tests/zoo.sh
MODEL=models/tiny-llama.onnx
TOKENIZER=models/tokenizer.json
CALIB=/usr/share/games/fortunes/fortunes    # Debian fortunes (scripts/deps.sh)
CONTEXT=128 STRIDE=64

compile() {   # compile OUT.plan LOG [options...]: calibrated w8a8
    local out=$1 log=$2; shift 2
    "$LLMC" compile "$MODEL" --max-context $CONTEXT --tokenizer "$TOKENIZER" --quiet -o "$out" \
        "$@" >"$log" 2>&1
}
npu_line() { grep '^npu subgraphs:' "$1"; }

for c in 16 32 64; do
    check "compile --npu-chunk $c" compile "$WORK/c$c.plan" "$WORK/c$c.log" --quant w8a8 \
        --calibrate "$CALIB" --npu-chunk $c
    npu_line "$WORK/c$c.log" | sed 's/^/# /'
done
weights_of() { npu_line "$1" | sed -n 's/.*their weights \([0-9]*\) bytes.*/\1/p'; }
check "the subgraphs' weights are the same bytes for chunks of 16, 32 and 64" sh -c \
    "[ -n '$(weights_of "$WORK/c16.log")' ] && [ '$(weights_of "$WORK/c16.log")' = '$(weights_of "$WORK/c32.log")' ] && \
     [ '$(weights_of "$WORK/c32.log")' = '$(weights_of "$WORK/c64.log")' ]"

flatc --json --raw-binary --strict-json --defaults-json -o "$WORK" schemas/plan.fbs -- "$WORK/c32.plan"
subgraphs_check() {
    $PY - "$WORK/c32.json" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
ops, tensors, sgs = p["ops"], p["tensors"], p["subgraphs"]
assert p["npu_chunk"] == 32, p["npu_chunk"]
static = {"RMSNorm", "LayerNorm", "QuantizeRows", "Linear", "Binary", "Unary", "Reshape"}
inside, end = set(), 0
for s in sgs:
    assert s["first_op"] >= end and s["n_ops"] > 0, s
    end = s["first_op"] + s["n_ops"]
    members = range(s["first_op"], end)
    inside.update(members)
    written = set()
    for i in members:
        op = ops[i]
        assert op["code"] in static, (s["name"], op["code"])
        if op["code"] == "QuantizeRows":
            assert op["scale"] > 0, op["name"]
        if op["code"] == "Linear":
            assert op["inputs"][0] in written, ("x not quantized inside", op["name"])
            w = tensors[op["inputs"][1]]
            assert w["dtype"] == "Int8" and w["group"] >= w["dims"][1]["c"], ("not per channel", w["name"])
        written.update(op["outputs"])
    for t in s["inputs"] + s["outputs"]:
        assert tensors[t]["layout"] != "QActTiles", tensors[t]["name"]
for i, op in enumerate(ops):
    if op["code"] == "Linear":
        assert i in inside, ("a Linear stays on the CPU", op["name"])
    if op["code"] in ("Attention", "ShadowLinear", "Gather"):
        assert i not in inside, op["name"]
print(f"{len(sgs)} subgraphs, {len(inside)} of {len(ops)} ops")
PYEOF
}
check "c32: disjoint subgraphs of static ops, every Linear per-channel over its own static QuantizeRows" \
    subgraphs_check

# ---- chunked prefill against the plain one ----------------------------------
head -c 4000 models/heldout.txt | "$LLMC" tokenize "$WORK/c32.plan" | tr ',' '\n' | grep . >"$WORK/ids.txt"
prompt() { head -"$1" "$WORK/ids.txt" | paste -sd, -; }
run() {   # run N OUT [options]: N prompt tokens, 6 greedy ids -> OUT.ids, OUT.bin (of RUN_PLAN)
    local n=$1 out=$2; shift 2
    "$LLMC" run "${RUN_PLAN:-$WORK/c32.plan}" --prompt-ids "$(prompt "$n")" --max-new 6 \
        --logits-out "$out.bin" "$@" >"$out.ids" 2>"$out.err"
}
close() {   # close A.bin B.bin TOL: max |a - b| <= TOL * max |b|
    $PY - "$@" <<'PYEOF'
import struct, sys
a, b = (open(f, "rb").read() for f in sys.argv[1:3])
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
x, y = (struct.unpack(f"<{len(a)//4}f", d) for d in (a, b))
d, m = max(abs(p - q) for p, q in zip(x, y)), max(abs(q) for q in y)
print(f"max |difference| {d:.3g} of max |logit| {m:.3g}")
sys.exit(0 if d <= float(sys.argv[3]) * m else 1)
PYEOF
}
for len in 1 31 32 33 77; do
    p=$WORK/p$len
    run $len "$p" && run $len "$p-cpu" --delegate cpu && run $len "$p-ref" --delegate ref
    check "$len-token prompt: chunked on the CPU, the same greedy ids" cmp "$p.ids" "$p-cpu.ids"
    check "... and logits within 1e-5" close "$p-cpu.bin" "$p.bin" 1e-5
    check "... on the reference delegate, the same greedy ids" cmp "$p.ids" "$p-ref.ids"
    check "... and logits within 1e-3" close "$p-ref.bin" "$p.bin" 1e-3
done
for s in "--lanes 1" "--lanes 3" "--in-order" "--lanes 3 --in-order"; do
    run 77 "$WORK/s" --delegate ref $s
    check "77 tokens, $s: the same logits bytes as 2 lanes out of order" cmp "$WORK/s.bin" "$WORK/p77-ref.bin"
done

# ---- the delegate example of docs/npu.md (tests/embed/npu_example.c) -------
# SAN_FLAGS: a `make check SAN=1` build's sanitizer flags (as t_runtime_embed.sh)
check "the delegate example builds against llmc_rt.h, llmc_ref_delegate.h and the two archives" \
    gcc -std=c11 -Wall -Wextra -Werror -O2 ${SAN_FLAGS:-} -Iruntime -Iruntime/platform \
    tests/embed/npu_example.c "$BUILD/libllmcrt_threads.a" "$BUILD/libllmcrt.a" -lm -pthread \
    -o "$WORK/npu_example"
"$WORK/npu_example" "$WORK/c32.plan" "$(prompt 77)" 6 >"$WORK/example.ids" 2>"$WORK/example.err"
check "... its 6 greedy ids for a 77-token prompt are llmc run's" cmp "$WORK/example.ids" "$WORK/p77.ids"
check "... through its delegate: 8 subgraphs prepared, executed for 3 chunks" \
    grep -q '^8 subgraphs prepared, [1-9][0-9]* executions' "$WORK/example.err"

# ---- llmc tune --npu: measured node costs for Eq. 6 -----------------------
cp "$WORK/c32.plan" "$WORK/tuned.plan"
check "llmc tune --npu times every node and writes npu_costs in place" sh -c \
    "'$LLMC' tune '$WORK/tuned.plan' --npu --npu-rows 96 -r 1 >'$WORK/tune.log' 2>&1 && \
     '$LLMC' verify '$WORK/tuned.plan' >/dev/null"
flatc --json --raw-binary --strict-json --defaults-json -o "$WORK" schemas/plan.fbs -- "$WORK/tuned.plan"
costs_check() {
    $PY - "$WORK/c32.json" "$WORK/tuned.json" "$WORK/tune.log" <<'PYEOF'
import json, re, sys
before, after = (json.load(open(f)) for f in sys.argv[1:3])
rows = [l for l in open(sys.argv[3]) if l.startswith("node ")]
assert before["npu_costs"] == [0] * len(rows), before["npu_costs"]
assert len(after["npu_costs"]) == len(rows) and all(c > 0 for c in after["npu_costs"]), after["npu_costs"]
for line, ns in zip(rows, after["npu_costs"]):
    ms = float(re.search(r"([0-9.]+) ms", line).group(1))
    assert abs(ns / 1e6 - ms) <= 0.0006 + 1e-3 * ms, (line, ns)
strip = lambda p: {k: v for k, v in p.items() if k != "npu_costs"}
assert strip(before) == strip(after), "tune changed more than npu_costs"
print(len(rows), "nodes:", after["npu_costs"])
PYEOF
}
check "... zeros before, the printed medians after, nothing else changed" costs_check
RUN_PLAN=$WORK/tuned.plan run 77 "$WORK/tuned" --delegate ref
check "... and a prefill scheduled by them gives the same logits bytes" cmp "$WORK/tuned.bin" "$WORK/p77-ref.bin"

# ---- the trace -------------------------------------------------------------
run 77 "$WORK/t" --delegate ref --lanes 2 --trace "$WORK/trace.json"
trace_check() {
    $PY - "$WORK/trace.json" "$WORK/c32.json" <<'PYEOF'
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
ops = json.load(open(sys.argv[2]))["ops"]
lanes = {1: [], 2: []}
for e in events:
    lanes[e["tid"]].append(e)
assert lanes[1] and lanes[2], "both lanes ran"
eps = 0.002  # ms -> us rounding of the printed times
for tid, evs in lanes.items():   # Eq. 4: one node at a time per processor
    evs.sort(key=lambda e: e["ts"])
    for a, b in zip(evs, evs[1:]):
        assert a["ts"] + a["dur"] <= b["ts"] + eps, ("overlap on lane", tid, a["name"], b["name"])
node = {(e["args"]["chunk"], e["args"]["node"]): e for e in events}
chunks = 1 + max(c for c, _ in node)
assert chunks == 3, chunks                       # 77 tokens in chunks of 32
end = lambda e: e["ts"] + e["dur"]
attention = lambda e: any(ops[i]["code"] == "Attention"
                          for i in range(e["args"]["first_op"], e["args"]["first_op"] + e["args"]["n_ops"]))
for (c, j), e in node.items():
    if j > 0:                                    # Eq. 3
        assert e["ts"] + eps >= end(node[(c, j - 1)]), ("Eq. 3", c, j)
    if attention(e) and c > 0:                   # Eq. 2
        assert e["ts"] + eps >= end(node[(c - 1, j)]), ("Eq. 2", c, j)
last = {c: max(end(e) for (k, _), e in node.items() if k == c) for c in range(chunks)}
assert node[(2, 0)]["ts"] + eps >= last[0], "chunk 2 took chunk 0's lane before it finished"
full = max(j for (c, j) in node if c == chunks - 1) + 1
body = max(j for (c, j) in node if c == 0) + 1
assert body < full and all((c, j) in node for c in range(chunks - 1) for j in range(body))
print(f"{len(events)} nodes: {len(lanes[2])} on the delegate, {len(lanes[1])} on the CPU; "
      f"{body} per chunk, {full} in the last")
PYEOF
}
check "trace: one node at a time per lane, Eqs. 2-3, lanes reused after their chunk" trace_check
grep -o '"name":"[^"]*","ph":"M"' "$WORK/trace.json" >/dev/null
check "trace names the two lanes" grep -q '"args":{"name":"delegate"}' "$WORK/trace.json"

# ---- the zoo: greedy tokens chunked and not ---------------------------------
$PY tests/make_tiny_tokenizer.py "$WORK/tok" >/dev/null
ZOO_PROMPT=$($PY -c "import random; r = random.Random(5); print(','.join(str(r.randrange(3, 500)) for _ in range(21)))")
for family in llama qwen2 gpt2 phi gemma2; do
    model=$(zoo_model $family 17) || { check "export $family" false; continue; }
    plan=$WORK/$family.plan
    check "$family: compile --npu-chunk 8" sh -c "'$LLMC' compile '$model' --max-context 64 \
        --tokenizer '$WORK/tok/tokenizer.json' --quiet --quant w8a8 --calibrate '$CALIB' \
        --npu-chunk 8 -o '$plan' >'$WORK/$family.log' 2>&1"
    npu_line "$WORK/$family.log" | sed 's/^/# /'
    for d in none ref cpu; do
        opt=$([ $d = none ] || echo "--delegate $d")
        "$LLMC" run "$plan" --prompt-ids "$ZOO_PROMPT" --max-new 8 $opt >"$WORK/$family-$d.ids" 2>&1
    done
    check "$family: 21-token prompt, 8 greedy ids: the reference delegate's are the plain run's" \
        cmp "$WORK/$family-none.ids" "$WORK/$family-ref.ids"
    check "$family: ... and the CPU's chunk by chunk" cmp "$WORK/$family-none.ids" "$WORK/$family-cpu.ids"
done

# ---- a corrupted subgraph, misuse ------------------------------------------
patch_subgraph() {   # patch_subgraph IN OUT FIELD DELTA: Subgraph 0's FIELD (2 n_ops, 3 inputs[0]) += DELTA
    $PY - "$@" <<'PYEOF'
import struct, sys
src, dst, field, delta = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
b = bytearray(open(src, "rb").read())
u32 = lambda at: struct.unpack_from("<I", b, at)[0]
def field_pos(table, fid):
    vt = table - struct.unpack_from("<i", b, table)[0]
    off = struct.unpack_from("<H", b, vt + 4 + 2 * fid)[0]
    assert off, ("field absent", fid)
    return table + off
root = u32(0)
subgraphs = field_pos(root, 21)          # Plan.subgraphs (schemas/plan.fbs order)
vec = subgraphs + u32(subgraphs)
first = vec + 4 + u32(vec + 4)          # Subgraph 0
at = field_pos(first, field)
if field == 3:                          # a vector: its element 0
    at = at + u32(at) + 4
struct.pack_into("<I", b, at, u32(at) + delta)
open(dst, "wb").write(b)
PYEOF
}
patch_subgraph "$WORK/c32.plan" "$WORK/bad-n.plan" 2 1
patch_subgraph "$WORK/c32.plan" "$WORK/bad-in.plan" 3 1
for bad in bad-n bad-in; do
    "$LLMC" run "$WORK/$bad.plan" --prompt-ids "$(prompt 40)" --max-new 2 --delegate ref \
        >"$WORK/$bad.out" 2>&1
    check "$bad: chunked prefill refuses the plan, naming subgraph 0" grep -q "subgraph 0" "$WORK/$bad.out"
    sed 's/^/# /' "$WORK/$bad.out" | head -2
    check "$bad: ... while a plain run, which never reads subgraphs, still gives the same ids" sh -c \
        "'$LLMC' run '$WORK/$bad.plan' --prompt-ids '$(prompt 40)' --max-new 2 >'$WORK/$bad.ids' && \
         '$LLMC' run '$WORK/c32.plan' --prompt-ids '$(prompt 40)' --max-new 2 | cmp - '$WORK/$bad.ids'"
done
refused() {   # refused OUT PATTERN command...: fails, says PATTERN, OUT not written
    local out=$1 pattern=$2; shift 2
    ! "$@" >"$WORK/refused.log" 2>&1 && grep -q -- "$pattern" "$WORK/refused.log" && [ ! -e "$out" ]
}
check "--npu-chunk without --calibrate is refused, nothing written" \
    refused "$WORK/no.plan" "needs --calibrate" "$LLMC" compile "$MODEL" -o "$WORK/no.plan" --quant w8a8 \
    --npu-chunk 32
check "--npu-chunk beyond --max-context is refused" \
    refused "$WORK/no.plan" "longer than --max-context" "$LLMC" compile "$MODEL" -o "$WORK/no.plan" \
    --max-context 64 --quant w8a8 --tokenizer "$TOKENIZER" --calibrate "$CALIB" --npu-chunk 128
compile "$WORK/f32.plan" "$WORK/f32.log"
check "run --delegate on a plan without subgraphs says so" \
    refused "$WORK/none" "no NPU subgraphs" "$LLMC" run "$WORK/f32.plan" --prompt-ids 1,2 --delegate ref
check "--trace without --delegate is refused" \
    refused "$WORK/t2.json" "need --delegate" "$LLMC" run "$WORK/c32.plan" --prompt-ids 1,2 --trace "$WORK/t2.json"
tap_done
