#!/usr/bin/env node
// ONNX Runtime timed like `llmc bench` (the peer of scripts/bench_peers.sh).
//
//   node scripts/ort_bench.js MODEL.onnx [-p 512] [-n 128] [-t 2] [-r 3] [--json]
//        [--opt-level disabled|basic|extended|all]
//
// ppN: one session.run of N tokens from position 0 (empty past); tgN: N
// session.run calls of one token each, feeding present.* back as past, after
// a 4-token prompt (untimed).  tok/s = N / seconds of the timed calls; one
// untimed warm-up, then r timed runs: mean ± sample sd and the median.  Token
// ids are the fixed pseudo-random ids llmc bench feeds (the same LCG).  One
// session per thread count with intraOpNumThreads = t, interOpNumThreads = 1.
// Prints llmc bench's JSON lines ({"test", "tok_s", "sd", "threads", ...})
// with --json, else a table.
'use strict';

const { loadOrt, describePast, emptyPast, pastFromPresent, runStep } = require('./ort_generate.js');

const TG_PROMPT = 4;

function die(msg) {
  process.stderr.write(`ort_bench: ${msg}\n`);
  process.exit(2);
}

function parseList(text, min) {
  const v = text.split(',').map((s) => (/^\d+$/.test(s) ? parseInt(s, 10) : NaN));
  if (v.length === 0 || v.some((x) => !(x >= min))) die(`bad list '${text}'`);
  return v;
}

function parseArgs(argv) {
  const args = { model: null, pp: [512], tg: [128], threads: [2], reps: 3, json: false, optLevel: 'all' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) die(`missing value for ${a}`);
      return argv[++i];
    };
    if (a === '-p') args.pp = parseList(value(), 0);
    else if (a === '-n') args.tg = parseList(value(), 0);
    else if (a === '-t') args.threads = parseList(value(), 1);
    else if (a === '-r') args.reps = parseList(value(), 1)[0];
    else if (a === '--json') args.json = true;
    else if (a === '--opt-level') args.optLevel = value();
    else if (a.startsWith('-')) die(`unknown option ${a}`);
    else if (args.model === null) args.model = a;
    else die(`unexpected argument ${a}`);
  }
  if (!args.model) die('usage: ort_bench.js MODEL.onnx [-p N,N] [-n N,N] [-t N,N] [-r N] [--json]');
  return args;
}

// llmc bench's ids: x = x * 1664525 + 1013904223 (mod 2^32), id = (x >> 8) % vocab.
function benchTokens(n, vocab) {
  const ids = [];
  let x = 12345;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    ids.push(BigInt((x >>> 8) % vocab));
  }
  return ids;
}

function seconds(t0) {
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

async function timePrefill(ort, session, pasts, tokens, n) {
  const t0 = process.hrtime.bigint();
  await runStep(ort, session, tokens.slice(0, n), 0, emptyPast(ort, pasts));
  return seconds(t0);
}

async function timeDecode(ort, session, pasts, tokens, n) {
  let out = await runStep(ort, session, tokens.slice(0, TG_PROMPT), 0, emptyPast(ort, pasts));
  const t0 = process.hrtime.bigint();
  for (let k = 0; k < n; k++) {
    out = await runStep(ort, session, [tokens[TG_PROMPT + k]], TG_PROMPT + k, pastFromPresent(pasts, out));
  }
  return seconds(t0);
}

function stats(samples) {
  const n = samples.length;
  const mean = samples.reduce((s, x) => s + x, 0) / n;
  const sd = n > 1 ? Math.sqrt(samples.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1)) : 0;
  const sorted = [...samples].sort((a, b) => a - b);
  const median = n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  return { mean, sd, median };
}

async function runTest(ort, session, pasts, tokens, prefill, n, args) {
  const time = prefill ? timePrefill : timeDecode;
  const tokS = [];
  for (let k = 0; k <= args.reps; k++) {
    const s = await time(ort, session, pasts, tokens, n);
    if (k > 0) tokS.push(n / s); // run 0 is the warm-up
  }
  return { name: `${prefill ? 'pp' : 'tg'}${n}`, prefill, n, ...stats(tokS), samples: tokS };
}

function printResult(args, threads, r) {
  if (args.json) {
    const line = {
      test: r.name, tok_s: +r.mean.toFixed(3), sd: +r.sd.toFixed(3), threads,
      engine: 'onnxruntime', model: args.model, n_prompt: r.prefill ? r.n : TG_PROMPT,
      n_gen: r.prefill ? 0 : r.n, reps: args.reps, median_tok_s: +r.median.toFixed(3),
      samples_tok_s: r.samples.map((x) => +x.toFixed(3)),
    };
    process.stdout.write(JSON.stringify(line).replace(/,"/g, ', "').replace(/":/g, '": ') + '\n');
  } else {
    const ts = `${r.mean.toFixed(2)} ± ${r.sd.toFixed(2)}`;
    process.stdout.write(`| onnxruntime ${threads} thr | ${r.name.padStart(7)} | ${ts.padStart(20)} |\n`);
  }
}

async function benchAt(ort, args, threads) {
  const session = await ort.InferenceSession.create(args.model, {
    graphOptimizationLevel: args.optLevel,
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  const pasts = describePast(session);
  const probe = await runStep(ort, session, [0n], 0, emptyPast(ort, pasts));
  const vocab = probe.logits.dims[2];
  const tokens = benchTokens(Math.max(...args.pp, TG_PROMPT + Math.max(...args.tg)), vocab);
  for (const n of args.pp) if (n > 0) printResult(args, threads, await runTest(ort, session, pasts, tokens, true, n, args));
  for (const n of args.tg) if (n > 0) printResult(args, threads, await runTest(ort, session, pasts, tokens, false, n, args));
  await session.release();
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  for (const t of args.threads) await benchAt(ort, args, t);
}

main().catch((e) => die(e && e.stack ? e.stack : String(e)));
