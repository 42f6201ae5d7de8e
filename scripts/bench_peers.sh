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
#
# With LLAMA_BENCH=path/to/llama-bench (and LLAMA_QUANTIZE, default the
# llama-quantize beside it) llama.cpp runs too, on the same weights:
# scripts/onnx_to_gguf.py writes the export as a float32 GGUF, llama-quantize
# makes Q4_0 and Q8_0 files of it (LLAMA_TYPES, default "Q4_0 Q8_0 F32";
# files kept in $BUILD/peers/ while newer than their source), and each runs
# `llama-bench -p P -n N -t T -r R` (plus LLAMA_BENCH_FLAGS; its tgN starts
# from an empty context, its own warm-up).  Rows "llama.cpp TYPE", and the
# ratios of their median tok/s to llmc's matching plan's (Q4_0: w4a8, Q8_0:
# w8a8, F32: f32).  llama-bench's prefill computes the logits of the last
# position only, and ONNX Runtime's of every position, so the ppP against
# llama.cpp is that of a second plan compiled with --logits last (about a
# fifth faster on the Qwen2-0.5B shape, whose LM head is 136M weights).
# Not part of `make check` (minutes on the big model).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=${1:-$BUILD/big/qwen2-0.5b.onnx}
P=${P:-512} N=${N:-128} T=${T:-2} R=${R:-3}
QUANTS=${QUANTS:-"f32 w8a8 w4a8"}
LLAMA_BENCH=${LLAMA_BENCH:-}
LLAMA_QUANTIZE=${LLAMA_QUANTIZE:-$(dirname "${LLAMA_BENCH:-.}")/llama-quantize}
LLAMA_TYPES=${LLAMA_TYPES-"Q4_0 Q8_0 F32"}
# llama.cpp's file types and llmc's plans of the same weight width
declare -A LLAMA_MATCH=([Q4_0]=w4a8 [Q8_0]=w8a8 [F32]=f32)
DIR=$BUILD/peers
LLMC=$BUILD/llmc
[ -s "$MODEL" ] || { echo "bench_peers: no $MODEL (run 'make big-model', or pass a tiny export)" >&2; exit 2; }
[ -x "$LLMC" ] || { echo "bench_peers: no $LLMC (run 'make')" >&2; exit 2; }
mkdir -p "$DIR"
NAME=$(basename "$MODEL" .onnx)
CONTEXT=$((P > 4 + N ? P : 4 + N))
[ -n "$LLAMA_BENCH" ] || LLAMA_TYPES=""
if [ -n "$LLAMA_TYPES" ] && ! { [ -x "$LLAMA_BENCH" ] && [ -x "$LLAMA_QUANTIZE" ]; }; then
    echo "bench_peers: LLAMA_BENCH=$LLAMA_BENCH and LLAMA_QUANTIZE=$LLAMA_QUANTIZE must be executables" >&2
    exit 2
fi
echo "== $MODEL: pp$P, tg$N (after a 4-token prompt), $T threads, $R runs + 1 warm-up; $(nproc) cores"

echo "== onnxruntime"
node scripts/ort_bench.js "$MODEL" -p "$P" -n "$N" -t "$T" -r "$R" --json | tee "$DIR/$NAME.ort.json"

# compile_plan QUANT PLAN [FLAGS...]: the plan for QUANT (kept while newer
# than the model and llmc); 1 if the compiler refuses the quantization.
compile_plan() {
    local quant=$1 plan=$2 log=$2.log
    shift 2
    [ -s "$plan" ] && [ "$plan" -nt "$MODEL" ] && [ "$plan" -nt "$LLMC" ] && return 0
    if "$LLMC" compile "$MODEL" -o "$plan" --max-context "$CONTEXT" --quant "$quant" "$@" >"$log" 2>&1; then
        return 0
    fi
    if [ "$quant" = f32 ] && grep -q -- "--quant" "$log" &&
        "$LLMC" compile "$MODEL" -o "$plan" --max-context "$CONTEXT" "$@" >"$log" 2>&1; then
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

# The prefill of the plans llama.cpp is held against, logits of the last
# position only (as llama-bench's).
for type in $LLAMA_TYPES; do
    quant=${LLAMA_MATCH[$type]:-}
    [ -n "$quant" ] && [[ " $QUANTS " == *" $quant "* ]] || continue
    plan=$DIR/$NAME.$quant.last.plan out=$DIR/$NAME.$quant.last.json
    echo "== llmc $quant --logits last"
    rm -f "$out"
    if compile_plan "$quant" "$plan" --logits last; then
        "$LLMC" bench "$plan" -p "$P" -n 0 -t "$T" -r "$R" --json ${LLMC_BENCH_FLAGS:-} | tee "$out" ||
            { echo "llmc bench failed"; rm -f "$out"; }
    else
        echo "not available"
    fi
done

# gguf_file TYPE: $DIR/$NAME.TYPE.gguf, kept while newer than its source:
# the F32 file written from the export, the others quantized from it.
gguf_file() {
    local type=$1 out=$DIR/$NAME.$1.gguf f32=$DIR/$NAME.F32.gguf
    if [ "$type" = F32 ]; then
        [ -s "$out" ] && [ "$out" -nt "$MODEL" ] && [ "$out" -nt scripts/onnx_to_gguf.py ] ||
            /usr/bin/python3 scripts/onnx_to_gguf.py "$MODEL" "$out" >&2 || return 1
    else
        gguf_file F32 >/dev/null || return 1
        [ -s "$out" ] && [ "$out" -nt "$f32" ] && [ "$out" -nt "$LLAMA_QUANTIZE" ] ||
            "$LLAMA_QUANTIZE" "$f32" "$out" "$type" >"$out.log" 2>&1 ||
            { tail -3 "$out.log" >&2; rm -f "$out"; return 1; }
    fi
    echo "$out"
}

for type in $LLAMA_TYPES; do
    out=$DIR/$NAME.llama-$type.json
    echo "== llama.cpp $type"
    rm -f "$out" "$out.rss"
    if gguf=$(gguf_file "$type"); then
        /usr/bin/time -f %M -o "$out.rss" "$LLAMA_BENCH" -m "$gguf" -p "$P" -n "$N" -t "$T" -r "$R" -o jsonl \
            ${LLAMA_BENCH_FLAGS:-} 2>"$out.log" | tee "$out" || { tail -3 "$out.log"; echo "llama-bench failed"; rm -f "$out"; }
    else
        echo "not available"
    fi
done

echo
/usr/bin/python3 - "$DIR" "$NAME" "$P" "$N" "$QUANTS" "$LLAMA_TYPES" \
    "$(for t in "${!LLAMA_MATCH[@]}"; do echo "$t=${LLAMA_MATCH[$t]}"; done)" <<'EOF'
import json, os, statistics, sys
d, name, p, n, quants, types = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5].split(), sys.argv[6].split()
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


def llama_rows(t):
    """llama-bench's JSON lines as llmc bench's tests, its peak RSS (KiB) in bytes."""
    rows = load(f"{d}/{name}.llama-{t}.json")
    if not rows:
        return None
    rss = open(f"{d}/{name}.llama-{t}.json.rss").read().split()[-1]
    return {(f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"):
            {"tok_s": r["avg_ts"], "sd": r["stddev_ts"], "median_tok_s": statistics.median(r["samples_ts"]),
             "bytes": r["model_size"], "rss": 1024 * int(rss)}
            for r in rows}

llama = {t: llama_rows(t) for t in types}
for t, rows in llama.items():
    if rows is None:
        print(f"| llama.cpp {t} | not available | | | | | | | |")
        continue
    any_row = next(iter(rows.values()))
    print(f"| llama.cpp {t} | {cell(rows, pp)} | {ratio(rows, pp)} | - | {cell(rows, tg)} | {ratio(rows, tg)} | - | "
          f"{any_row['bytes'] / 2**20:.1f} MiB | {any_row['rss'] / 2**20:.1f} MiB |")

# llama.cpp's file types against llmc's plans of the same weight width, by
# the medians of the runs (a run disturbed by other work on a shared
# machine moves a mean and not a median of three); the prefill against the
# plan with the logits of the last position only, as llama-bench computes.
MATCH = dict(pair.split("=") for pair in sys.argv[7].split())
pairs = [(t, MATCH[t]) for t, rows in llama.items() if rows and runs.get(MATCH.get(t))]
last = {q: tests(load(f"{d}/{name}.{q}.last.json") or []) for _, q in pairs}

def median_ratio(a, b):
    return f"{a['median_tok_s']:.2f} / {b['median_tok_s']:.2f} = {a['median_tok_s'] / b['median_tok_s']:.2f}x" \
        if a and b else "-"

if pairs:
    print(f"\n| llama.cpp / llmc, medians (t/s) | {pp} (llmc --logits last) | {tg} |")
    print("| --- | ---: | ---: |")
    for t, q in pairs:
        mine = tests(runs[q])
        print(f"| llama.cpp {t} / llmc {q} | {median_ratio(llama[t].get(pp), last[q].get(pp))} | "
              f"{median_ratio(llama[t].get(tg), mine.get(tg))} |")

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
