#!/usr/bin/env node
// Runs every subgraph `llmc compile --npu-export DIR` wrote in ONNX Runtime
// on its reference inputs and compares with the reference delegate's outputs.
//
//   node scripts/ort_subgraph_check.js DIR [--tolerance T] [--opt-level disabled|basic|extended|all]
//
// --opt-level defaults to basic: ORT runs the QDQ graph as written, in float
// after dequantization.  extended and all fuse each QDQ MatMul into ORT's
// int8 kernels, whose x86 AVX2 u8s8 path (a CPU without VNNI) saturates the
// int16 sums of product pairs with full-range int8 weights (ORT's
// reduce_range caveat): outputs then differ by tens of percent, an ORT
// artifact, not the export's.
// DIR/manifest.json lists the subgraphs; each has DIR/<name>.onnx, and
// <name>.inputs.bin / <name>.outputs.bin: float32 values of its inputs, and
// of its outputs as runtime/platform/ref_delegate.c computed them, each
// side's tensors concatenated in manifest order.  The error of an output is
// max |ORT - delegate| over its elements divided by max |delegate| (its
// magnitude); every output must stay within T (default 1e-3).  Prints one
// line per subgraph and a last line "worst E in SUBGRAPH output NAME"; exits
// 1 when an output is beyond T, 2 on a usage or file error.
'use strict';

const fs = require('fs');
const path = require('path');
const { loadOrt } = require('./ort_generate.js');

function die(msg) {
  process.stderr.write(`ort_subgraph_check: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = { dir: null, tolerance: 1e-3, optLevel: 'basic' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) die(`missing value for ${a}`);
      return argv[++i];
    };
    if (a === '--tolerance') {
      args.tolerance = Number(value());
      if (!(args.tolerance >= 0)) die('--tolerance wants a number >= 0');
    } else if (a === '--opt-level') {
      args.optLevel = value();
      if (!['disabled', 'basic', 'extended', 'all'].includes(args.optLevel)) {
        die(`--opt-level wants disabled, basic, extended or all, got '${args.optLevel}'`);
      }
    } else if (a.startsWith('--')) die(`unknown option ${a}`);
    else if (args.dir === null) args.dir = a;
    else die(`unexpected argument ${a}`);
  }
  if (args.dir === null) die('usage: ort_subgraph_check.js DIR [--tolerance T] [--opt-level L]');
  return args;
}

function elements(dims) {
  return dims.reduce((n, d) => n * d, 1);
}

// The float32 tensors of `list` (manifest inputs or outputs), in order, from one file.
function readTensors(file, list) {
  const bytes = fs.readFileSync(file);
  const want = list.reduce((n, t) => n + 4 * elements(t.dims), 0);
  if (bytes.length !== want) die(`${file}: ${bytes.length} bytes, the manifest says ${want}`);
  const all = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
  const out = [];
  let at = 0;
  for (const t of list) {
    const n = elements(t.dims);
    out.push(all.subarray(at, at + n));
    at += n;
  }
  return out;
}

// max |got - want| / max |want| (want all zero: the absolute difference).
function relativeError(got, want) {
  let diff = 0;
  let mag = 0;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    if (!(d <= diff)) diff = d; // NaN counts as the worst
    mag = Math.max(mag, Math.abs(want[i]));
  }
  return mag > 0 ? diff / mag : diff;
}

async function checkSubgraph(ort, dir, sg, args) {
  const session = await ort.InferenceSession.create(path.join(dir, sg.file), {
    graphOptimizationLevel: args.optLevel,
    executionProviders: ['cpu'],
  });
  const names = sg.inputs.map((t) => t.name);
  const outs = sg.outputs.map((t) => t.name);
  if (JSON.stringify(session.inputNames) !== JSON.stringify(names) ||
      JSON.stringify(session.outputNames) !== JSON.stringify(outs)) {
    die(`${sg.file}: inputs ${session.inputNames} and outputs ${session.outputNames} are not the manifest's`);
  }
  const inputs = readTensors(path.join(dir, sg.check.inputs), sg.inputs);
  const want = readTensors(path.join(dir, sg.check.outputs), sg.outputs);
  const feeds = {};
  sg.inputs.forEach((t, i) => { feeds[t.name] = new ort.Tensor('float32', inputs[i], t.dims); });
  const result = await session.run(feeds);
  return sg.outputs.map((t, i) => {
    const got = result[t.name];
    if (JSON.stringify(Array.from(got.dims)) !== JSON.stringify(t.dims)) {
      die(`${sg.file}: output ${t.name} has dims ${got.dims}, the manifest says ${t.dims}`);
    }
    return { subgraph: sg.name, output: t.name, error: relativeError(got.data, want[i]) };
  });
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(args.dir, 'manifest.json'), 'utf8'));
  } catch (e) {
    die(`${path.join(args.dir, 'manifest.json')}: ${e.message}`);
  }
  let worst = { error: -1 };
  let beyond = 0;
  for (const sg of manifest.subgraphs) {
    const results = await checkSubgraph(ort, args.dir, sg, args);
    const max = results.reduce((w, r) => (r.error > w.error ? r : w), { error: -1 });
    const bad = results.filter((r) => !(r.error <= args.tolerance));
    beyond += bad.length;
    process.stdout.write(`${sg.name}: ${results.length} outputs, max relative error ${max.error.toExponential(3)}` +
                         (bad.length ? ` BEYOND ${args.tolerance}: ${bad.map((r) => r.output).join(', ')}` : '') + '\n');
    if (max.error > worst.error) worst = max;
  }
  process.stdout.write(`worst ${worst.error.toExponential(3)} in ${worst.subgraph} output ${worst.output}` +
                       ` (tolerance ${args.tolerance}, opt level ${args.optLevel})\n`);
  process.exit(beyond ? 1 : 0);
}

main().catch((e) => die(e && e.stack ? e.stack : String(e)));
