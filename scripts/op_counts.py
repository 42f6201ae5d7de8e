#!/usr/bin/python3
"""Ops per decoder layer: llmc's plan beside ONNX Runtime's optimized graph.

For each family@opset[:kind] the tiny model is exported twice, with 2 and
with 3 decoder layers (same seed), in the file kind KINDS names.  The difference between the two counts is the
exact number of ops one layer costs, so the embedding, the final norm, the
lm_head and the mask/position preamble do not blur the figure.

  llmc      plan ops (`llmc inspect --json` ops_total) of `llmc compile`
  ORT       nodes of the model ONNX Runtime writes after optimizing at
            level "all" (scripts/ort_optimize.js)

  scripts/op_counts.py [--llmc build/llmc] [--work DIR] [--max-per-layer N]
                       [--variants llama@14,qwen2@17,...]

Prints one row per model; with --max-per-layer, exits 1 if any llmc
per-layer count is above N.  Run with Debian's python (torch + onnx).
"""
import argparse
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The file kinds: kind -> (exporter and its arguments, the script and
# arguments that turn that export SRC into the kind's file DST (NOPAST: the
# same exporter's file without past), or None).
HF = ["scripts/export_llm.py", "--style", "hf"]
KINDS = {
    "plain": (["scripts/export_llm.py"], None),          # our own torch modules
    "hf": (HF, None),                                    # transformers' eager modeling code
    "sdpa": (HF + ["--attn", "sdpa"], None),             # optimum's current SDPA export
    # transformers.js' model_fp16.onnx: float16 compute, float32 graph I/O
    "fp16": (HF, ["scripts/make_fp16.py", "SRC", "DST", "--form", "keepio16"]),
    # optimum 1.x's decoder_model_merged.onnx
    "merged": (HF, ["scripts/merge_decoders.py", "NOPAST", "SRC", "--out", "DST"]),
    # onnxruntime-genai's builder: cpu-fp32 and cpu-int4
    "genai": (["scripts/export_genai.py"], None),
    "genai-int4": (["scripts/export_genai.py"], ["scripts/quantize_onnx.py", "SRC", "DST", "--form", "int4"]),
    # transformers.js' model_q4.onnx and model_int8.onnx (ONNX Runtime's quantizers)
    "q4": (HF, ["scripts/quantize_onnx.py", "SRC", "DST", "--form", "q4"]),
    "int8": (HF, ["scripts/quantize_onnx.py", "SRC", "DST", "--form", "int8"]),
    # phi3 in Phi-4-mini's shape (GQA, rotary fraction 0.75, LongRoPE, tied)
    "phi4": (HF + ["--size", "tiny-phi4"], None),
}
# family@opset[:kind] (default kind plain)
VARIANTS = ("llama@14", "llama@17", "qwen2@14", "qwen2@17",
            "gpt2@13", "gpt2@14", "gpt2@17", "phi@14", "phi@17",
            "llama@14:hf", "llama@17:hf", "qwen2@14:hf", "qwen2@17:hf",
            "gpt2@14:hf", "gpt2@17:hf", "phi@14:hf", "phi@17:hf",
            "llama@18", "qwen2@18:hf", "gpt2@18", "phi@18:hf", "llama@21", "qwen2@21:hf",
            "llama@17:sdpa", "llama@17:fp16", "gpt2@17:fp16",
            "llama@17:merged", "qwen2@17:merged", "gpt2@17:merged", "phi@17:merged",
            "llama@21:genai", "qwen2@21:genai", "phi@21:genai", "llama@21:genai-int4",
            "llama@17:q4", "qwen2@17:q4", "gpt2@17:q4", "phi@17:q4", "llama@17:int8", "phi@17:int8",
            "qwen3@17", "qwen3@17:hf",
            "llama32@17:hf", "smollm2@17:hf", "smollm3@17", "smollm3@17:hf", "granite@17", "granite@17:hf",
            "olmo2@17", "olmo2@17:hf",
            "phi3@17", "phi3@17:hf", "phi3@17:phi4", "phi3@21:genai", "phi3@17:q4",
            "mistral@17", "mistral@17:hf", "mistral@21:genai",
            "gemma2@17", "gemma2@17:hf", "gemma3@17", "gemma3@17:hf",
            "qwen3@21:genai", "llama32@21:genai", "smollm3@21:genai", "granite@21:genai",
            "qwen3@17:q4", "llama32@17:fp16",
            # transformers.js kinds where a family's difference meets a kind's
            # (q4 and int8 reach one canonical form before any fusion, so one
            # of them proves a family whose difference is not the projections)
            "qwen3@17:fp16", "qwen3@17:int8", "granite@17:fp16", "olmo2@17:fp16", "phi3@17:fp16",
            "gemma2@17:fp16", "gemma2@17:q4", "gemma2@17:int8", "gemma3@17:fp16",
            # Granite's scalar multipliers folded into quantized scales; OLMo2's
            # post-norm layer projecting the embedding's output (int8 names)
            "granite@17:q4", "granite@17:int8", "olmo2@17:int8",
            "gemma2@21:genai", "gemma3@21:genai")


def node_count(graph):
    """Nodes one run executes: an If counts as its larger branch (a merged
    decoder's with-past graph)."""
    total = 0
    for node in graph.node:
        branches = [a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]
        total += max(node_count(b) for b in branches) if branches else 1
    return total


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"op_counts: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


_MODULES = {}


def run_script(script, argv):
    """Runs a python script of scripts/ through its main(argv) in this
    process: torch is imported once, not once per export (about 2 s each)."""
    if script not in _MODULES:
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        spec = importlib.util.spec_from_file_location(
            os.path.basename(script)[:-3], os.path.join(ROOT, script))
        _MODULES[script] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_MODULES[script])
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            _MODULES[script].main([str(a) for a in argv])
    except (Exception, SystemExit) as e:   # an exporter's failure names the variant
        if isinstance(e, SystemExit) and not e.code:
            return
        sys.exit(f"op_counts: {script} {' '.join(map(str, argv))} failed: {e}\n{err.getvalue()}")


def stale(out, *scripts):
    return not os.path.exists(out) or any(
        os.path.getmtime(out) < os.path.getmtime(os.path.join(ROOT, s)) for s in scripts)


def run_exporter(exporter, family, opset, layers, out, extra=()):
    script, *args = exporter
    if stale(out, script, "scripts/export_llm.py", "scripts/hf_models.py", "scripts/onnx_opset_upgrade.py"):
        size = [] if script.endswith("export_genai.py") or "--size" in args else ["--size", "tiny"]
        run_script(script, ["--family", family, "--opset", opset, *args, *extra, *size,
                            "--layers", layers, "--out", out])


def export(family, opset, kind, layers, out):
    exporter, transform = KINDS[kind]
    if not transform:
        run_exporter(exporter, family, opset, layers, out)
    elif stale(out, transform[0], exporter[0], "scripts/hf_models.py", "scripts/onnx_opset_upgrade.py"):
        base = out[:-len(".onnx")]
        source = base + ".src/model.onnx"   # a folder of its own (export_genai.py's genai_config.json)
        run_exporter(exporter, family, opset, layers, source)
        if "NOPAST" in transform:
            run_exporter(exporter, family, opset, layers, base + ".nopast.onnx", ["--no-past"])
        script, *rest = transform
        names = {"SRC": source, "DST": out, "NOPAST": base + ".nopast.onnx"}
        run_script(script, [names.get(a, a) for a in rest])
    return node_count(onnx.load(out, load_external_data=False).graph)


def llmc_ops(llmc, model, work):
    plan = model[:-len(".onnx")] + ".plan"
    run([llmc, "compile", model, "-o", plan, "--max-context", "256"])
    info = json.loads(run([llmc, "inspect", plan, "--json"]))
    return info["ops_total"], info["op_counts"]


def ort_optimized(model):
    return model[:-len(".onnx")] + ".ort.onnx"


def ort_optimize(models):
    """ONNX Runtime's optimized graph of every model, in one node process."""
    pairs = [a for m in models for a in (m, ort_optimized(m))]
    run(["node", os.path.join(ROOT, "scripts/ort_optimize.js"), *pairs])


def ort_nodes(model):
    return node_count(onnx.load(ort_optimized(model), load_external_data=False).graph)


def model_path(variant, layers, work):
    spec, _, kind = variant.partition(":")
    family, opset = spec.split("@")
    return os.path.join(work, f"{family}_op{opset}_{kind or 'plain'}_L{layers}.onnx")


def measure(variant, llmc, work):
    """The variant's exports and llmc's counts (ONNX Runtime's come later)."""
    spec, _, kind = variant.partition(":")
    family, opset = spec.split("@")
    row = {"model": variant}
    for layers in (2, 3):
        model = model_path(variant, layers, work)
        row[f"onnx{layers}"] = export(family, int(opset), kind or "plain", layers, model)
        row[f"llmc{layers}"], row[f"op_counts{layers}"] = llmc_ops(llmc, model, work)
    return row


def add_ort(row, work):
    for layers in (2, 3):
        row[f"ort{layers}"] = ort_nodes(model_path(row["model"], layers, work))
    for key in ("onnx", "llmc", "ort"):
        row[f"{key}_per_layer"] = row[f"{key}3"] - row[f"{key}2"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmc", default=os.path.join(ROOT, "build/llmc"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build/op_counts"))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--max-per-layer", type=int)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    print(f"{'model':14} {'ONNX nodes':>10} {'ORT nodes':>10} {'llmc ops':>9}"
          f" | per layer: {'ONNX':>5} {'ORT':>5} {'llmc':>5}   llmc ops of one layer")
    worst = 0
    variants = args.variants.split(",")
    rows = [measure(v, args.llmc, args.work) for v in variants]
    ort_optimize([model_path(v, n, args.work) for v in variants for n in (2, 3)])
    for r in rows:
        add_ort(r, args.work)
        layer_ops = {k: r["op_counts3"][k] - r["op_counts2"].get(k, 0) for k in r["op_counts3"]}
        layer_ops = ", ".join(f"{k} {v}" for k, v in sorted(layer_ops.items()) if v)
        print(f"{r['model']:14} {r['onnx2']:>10} {r['ort2']:>10} {r['llmc2']:>9}"
              f" | {'':10} {r['onnx_per_layer']:>5} {r['ort_per_layer']:>5}"
              f" {r['llmc_per_layer']:>5}   {layer_ops}")
        worst = max(worst, r["llmc_per_layer"])
    print(f"(2-layer models; per-layer = 3-layer count minus 2-layer count; worst llmc {worst})")
    if args.max_per_layer is not None and worst > args.max_per_layer:
        sys.exit(f"op_counts: {worst} llmc ops per layer > {args.max_per_layer}")


if __name__ == "__main__":
    main()
