#!/usr/bin/env bash
# One ONNX export through ONNX Runtime and through llmc's f32, w8a8 and
# w4a8 plans, timed the same way in one run, then a table of tok/s, the
# ratios to ONNX Runtime and the fraction of the roofline.  Results:
# docs/benchmarks.md.
#
#   scripts/bench_peers.sh [ONNX_MODEL]      (default: build/big/qwen2-0.5b.onnx,
#                                             exported by `make big-model`)
#   P=512 N=128 T=2 R=3 scripts/bench_peers.sh "$(. tests/zoo.sh; zoo_model llama 17)"
#
# ppP: one prefill of P tokens from position 0; tgN: N single-token decode
# steps after a 4-token prompt; mean ± sd of R runs after a warm-up, at T
# threads (ONNX Runtime: intraOpNumThreads = T).  ONNX Runtime runs through
# scripts/ort_bench.js, the plans through `llmc bench --json --roofline`
# (plans compiled with --max-context max(P, 4 + N) into $BUILD/peers/).  A
# --quant the compiler refuses is reported "not available"; if it refuses
# --quant altogether, the f32 row is the plain compile (f32 today).
# Not part of `make check` (minutes on the big model).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=${1:-$BUILD/big/qwen2-0.5b.onnx}
P=${P:-512} N=${N:-128} T=${T:-2} R=${R:-3}
QUANTS=${QUANTS:-"f32 w8a8 w4a8"}
DIR=$BUILD/peers
LLMC=$BUILD/llmc
[ -s "$MODEL" ] || { echo "bench_peers: no $MODEL (run 'make big-model', or pass a tiny export)" >&2; exit 2; }
[ -x "$LLMC" ] || { echo "bench_peers: no $LLMC (run 'make')" >&2; exit 2; }
mkdir -p "$DIR"
NAME=$(basename "$MODEL" .onnx)
CONTEXT=$((P > 4 + N ? P : 4 + N))
echo "== $MODEL: pp$P, tg$N (after a 4-token prompt), $T threads, $R runs + 1 warm-up; $(nproc) cores"

echo "== onnxruntime"
node scripts/ort_bench.js "$MODEL" -p "$P" -n "$N" -t "$T" -r "$R" --json | tee "$DIR/$NAME.ort.json"

# compile_plan QUANT PLAN: the plan for QUANT (kept while newer than the
# model and llmc); 1 if the compiler refuses the quantization.
compile_plan() {
    local quant=$1 plan=$2 log=$2.log
    [ -s "$plan" ] && [ "$plan" -nt "$MODEL" ] && [ "$plan" -nt "$LLMC" ] && return 0
    if "$LLMC" compile "$MODEL" -o "$plan" --max-context "$CONTEXT" --quant "$quant" >"$log" 2>&1; then
        return 0
    fi
    if [ "$quant" = f32 ] && grep -q -- "--quant" "$log" &&
        "$LLMC" compile "$MODEL" -o "$plan" --max-context "$CONTEXT" >"$log" 2>&1; then
        echo "(llmc compile refuses --quant: the f32 plan is the plain compile)"
        return 0
    fi
    sed -n 1p "$log"
    rm -f "$plan"
    return 1
}

for quant in $QUANTS; do
    plan=$DIR/$NAME.$quant.plan out=$DIR/$NAME.$quant.json
    echo "== llmc $quant"
    rm -f "$out"
    if compile_plan "$quant" "$plan"; then
        "$LLMC" bench "$plan" -p "$P" -n "$N" -t "$T" -r "$R" --json --roofline ${LLMC_BENCH_FLAGS:-} | tee "$out" ||
            { echo "llmc bench failed"; rm -f "$out"; }
    else
        echo "not available"
    fi
done

echo
/usr/bin/python3 - "$DIR" "$NAME" "$P" "$N" "$QUANTS" <<'EOF'
import json, os, sys
d, name, p, n, quants = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5].split()
pp, tg = f"pp{p}", f"tg{n}"

def load(path):
    return [json.loads(l) for l in open(path)] if os.path.exists(path) else None

def tests(rows):
    return {r["test"]: r for r in rows if "test" in r}

ort = tests(load(f"{d}/{name}.ort.json") or [])
runs = {q: load(f"{d}/{name}.{q}.json") for q in quants}
roof = {q: {r["roofline"]: r for r in rows if "roofline" in r} for q, rows in runs.items() if rows}

def cell(rows, test):
    r = rows.get(test)
    return f"{r['tok_s']:.2f} ± {r['sd']:.2f}" if r else "-"

def ratio(rows, test):
    r, o = rows.get(test), ort.get(test)
    return f"{r['tok_s'] / o['tok_s']:.2f}x" if r and o else "-"

def pct(q, test, tok_s):
    a = roof.get(q, {}).get(test)
    return f"{100 * tok_s / a['roofline_tok_s']:.1f} % {a['bound']}" if a and tok_s else "-"

print(f"| engine | {pp} t/s | vs ORT | of roofline | {tg} t/s | vs ORT | of roofline | plan | peak RSS |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
f32 = "f32" if "f32" in roof else None
o_pp, o_tg = ort.get(pp, {}).get("tok_s"), ort.get(tg, {}).get("tok_s")
print(f"| onnxruntime fp32 | {cell(ort, pp)} | 1.00x | {pct(f32, pp, o_pp)} | {cell(ort, tg)} | 1.00x | "
      f"{pct(f32, tg, o_tg)} | - | - |")
for q in quants:
    rows = runs[q]
    if rows is None:
        print(f"| llmc {q} | not available | | | | | | | |")
        continue
    t = tests(rows)
    any_row = next(iter(t.values()))
    print(f"| llmc {q} | {cell(t, pp)} | {ratio(t, pp)} | {pct(q, pp, t.get(pp, {}).get('tok_s'))} | "
          f"{cell(t, tg)} | {ratio(t, tg)} | {pct(q, tg, t.get(tg, {}).get('tok_s'))} | "
          f"{any_row['plan_bytes'] / 2**20:.1f} MiB | {max(r['peak_rss_bytes'] for r in t.values()) / 2**20:.1f} MiB |")

peaks = next((r[k] for r in roof.values() for k in r if k == "peaks"), None)
if peaks:
    print(f"\nroofline of this run ({peaks['threads']} threads, {peaks['isa']} loops): read {peaks['read_gb_s']:.2f} GB/s, "
          f"fp32 {peaks['fp32_gflops']:.1f} GFLOPS, int8 {peaks['int8_w8_gops']:.1f} (w8) / {peaks['int8_w4_gops']:.1f} (w4) GOPS (measured by the first plan's run)")
    for q in quants:
        r = roof.get(q, {})
        if "plan" in r:
            c = r["plan"]
            lim = "; ".join(f"{t} roofline {r[t]['roofline_tok_s']:.1f} t/s ({r[t]['bound']})" for t in (pp, tg) if t in r)
            print(f"  {q}: {c['weight_bytes_per_token'] / 1e6:.1f} MB of weights and {c['linear_ops_per_token'] / 1e9:.3f} GOP "
                  f"per token; {lim}")
print("\n'of roofline': achieved / (tg: read bandwidth / bytes per token; pp: the fp32 peak (f32 plans) or the better"
      "\nof the fp32 and int8 peaks (quantized plans) / operations per token); ONNX Runtime against the f32 plan's"
      "\nroofline (same weights, same operations).")
EOF
