#!/usr/bin/env node
// Greedy decoding with ONNX Runtime: the reference llmc's runtime is compared to.
//
//   node scripts/ort_generate.js MODEL.onnx --prompt-ids 5,17,42 --max-new N
//        [--logits-out FILE] [--opt-level disabled|basic|extended|all]
//
// Step 0 feeds the whole prompt with empty past (past_sequence = 0); every
// later step feeds one generated token with the previous present.* as past.
// A merged decoder (optimum's decoder_model_merged.onnx, an input
// use_cache_branch) is fed as optimum feeds it: use_cache_branch = false
// with the empty past at step 0 (its no-past branch), true afterwards.
// Prints the generated ids space-separated on one stdout line. FILE receives
// one raw little-endian float32 row of `vocab` logits per generated token
// (row 0 = last prompt position, row k = after feeding generated token k-1).
'use strict';

const fs = require('fs');
const path = require('path');

const REPO_ROOT = path.resolve(__dirname, '..');
const ORT_PATH = path.join(REPO_ROOT, '.deps', 'node_modules', 'onnxruntime-node');

function die(msg) {
  process.stderr.write(`ort_generate: ${msg}\n`);
  process.exit(2);
}

function loadOrt() {
  try {
    return require(ORT_PATH);
  } catch (e) {
    die(`cannot load ${ORT_PATH} (run scripts/deps.sh): ${e.message}`);
  }
}

function parseArgs(argv) {
  const args = { model: null, promptIds: null, maxNew: null, logitsOut: null, optLevel: 'all' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) die(`missing value for ${a}`);
      return argv[++i];
    };
    if (a === '--prompt-ids') {
      args.promptIds = value().split(',').filter((s) => s !== '').map((s) => {
        if (!/^\d+$/.test(s)) die(`bad token id '${s}'`);
        return BigInt(s);
      });
    } else if (a === '--max-new') args.maxNew = parseInt(value(), 10);
    else if (a === '--logits-out') args.logitsOut = value();
    else if (a === '--opt-level') args.optLevel = value();
    else if (a.startsWith('--')) die(`unknown option ${a}`);
    else if (args.model === null) args.model = a;
    else die(`unexpected argument ${a}`);
  }
  if (!args.model || !args.promptIds || args.promptIds.length === 0 || !(args.maxNew >= 0)) {
    die('usage: ort_generate.js MODEL.onnx --prompt-ids 1,2,3 --max-new N ' +
        '[--logits-out FILE] [--opt-level disabled|basic|extended|all]');
  }
  if (!['disabled', 'basic', 'extended', 'all'].includes(args.optLevel)) {
    die(`bad --opt-level ${args.optLevel}`);
  }
  return args;
}

// model.decoder.head_size of the genai_config.json beside the model, or
// undefined: onnxruntime-genai's builder leaves the cache's last dim
// symbolic ("kv_cache_dim") and its runtime reads the head size there.
function genaiHeadSize(model) {
  const file = path.join(path.dirname(model), 'genai_config.json');
  if (!fs.existsSync(file)) return undefined;
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')).model.decoder.head_size;
  } catch (e) {
    die(`${file}: ${e.message}`);
  }
}

// Collect the past_key_values.* inputs with their [kv_heads, head_dim]:
// static, or the head size from genai_config.json.
function describePast(session, model) {
  const pasts = [];
  session.inputMetadata.forEach((meta) => {
    if (!meta.name.startsWith('past_key_values.')) return;
    const [, kvHeads] = meta.shape;
    const headDim = typeof meta.shape[3] === 'number' ? meta.shape[3] : genaiHeadSize(model);
    if (typeof kvHeads !== 'number' || typeof headDim !== 'number') {
      die(`${meta.name}: expected static kv_heads/head_dim, got [${meta.shape}]`);
    }
    // float16 exports take float16 past_key_values (scripts/make_fp16.py --form compute16)
    pasts.push({ name: meta.name, kvHeads, headDim, type: meta.type === 'float16' ? 'float16' : 'float32' });
  });
  if (pasts.length === 0) die('model has no past_key_values.* inputs');
  return pasts;
}

function int64Tensor(ort, values, dims) {
  return new ort.Tensor('int64', BigInt64Array.from(values), dims);
}

function emptyPast(ort, pasts) {
  const feeds = {};
  for (const p of pasts) {
    const empty = p.type === 'float16' ? new Uint16Array(0) : new Float32Array(0);
    feeds[p.name] = new ort.Tensor(p.type, empty, [1, p.kvHeads, 0, p.headDim]);
  }
  return feeds;
}

// past_key_values.{i}.key <- present.{i}.key
function pastFromPresent(pasts, outputs) {
  const feeds = {};
  for (const p of pasts) {
    const present = p.name.replace(/^past_key_values\./, 'present.');
    if (!(present in outputs)) die(`model output ${present} missing`);
    feeds[p.name] = outputs[present];
  }
  return feeds;
}

// float16 bits -> number (exact).
function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const man = h & 0x3ff;
  if (exp === 0x1f) return man ? NaN : sign * Infinity;
  if (exp === 0) return sign * man * 2 ** -24;
  return sign * (1 + man / 1024) * 2 ** (exp - 15);
}

// Logits of the last position of batch 0: a copy of vocab floats (float16
// logits are widened exactly).
function lastRow(logits) {
  const [, seq, vocab] = logits.dims;
  const start = (seq - 1) * vocab;
  const row = logits.data.subarray(start, start + vocab);
  return logits.type === 'float16' ? Float32Array.from(row, halfToFloat) : Float32Array.from(row);
}

// Strict '>' keeps the first maximum, so ties go to the lowest id.
function argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

async function runStep(ort, session, tokens, pastLen, pastFeeds) {
  const seq = tokens.length;
  const total = pastLen + seq;
  const positions = Array.from({ length: seq }, (_, i) => BigInt(pastLen + i));
  const feeds = {
    input_ids: int64Tensor(ort, tokens, [1, seq]),
    attention_mask: int64Tensor(ort, new Array(total).fill(1n), [1, total]),
    position_ids: int64Tensor(ort, positions, [1, seq]),
    ...pastFeeds,
  };
  if (session.inputNames.includes('use_cache_branch')) {
    feeds.use_cache_branch = new ort.Tensor('bool', Uint8Array.from([pastLen > 0 ? 1 : 0]), [1]);
  }
  // Feed only what the model reads: onnxruntime-genai's files have no position_ids.
  for (const name of Object.keys(feeds)) if (!session.inputNames.includes(name)) delete feeds[name];
  return session.run(feeds);
}

async function generate(ort, session, args) {
  const pasts = describePast(session, args.model);
  const generated = [];
  const rows = [];
  let tokens = args.promptIds;
  let pastLen = 0;
  let pastFeeds = emptyPast(ort, pasts);
  for (let step = 0; step < args.maxNew; step++) {
    const outputs = await runStep(ort, session, tokens, pastLen, pastFeeds);
    const row = lastRow(outputs.logits);
    const next = argmax(row);
    rows.push(row);
    generated.push(next);
    pastLen += tokens.length;
    pastFeeds = pastFromPresent(pasts, outputs);
    tokens = [BigInt(next)];
  }
  return { generated, rows };
}

function writeRows(file, rows) {
  const buffers = rows.map((r) => {
    const b = Buffer.alloc(r.length * 4);
    r.forEach((v, i) => b.writeFloatLE(v, i * 4));
    return b;
  });
  fs.writeFileSync(file, Buffer.concat(buffers));
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  const session = await ort.InferenceSession.create(args.model, {
    graphOptimizationLevel: args.optLevel,
    executionProviders: ['cpu'],
  });
  const { generated, rows } = await generate(ort, session, args);
  if (args.logitsOut) writeRows(args.logitsOut, rows);
  process.stdout.write(generated.join(' ') + '\n');
}

// scripts/ort_bench.js feeds models the same way.
module.exports = { loadOrt, describePast, emptyPast, pastFromPresent, runStep };

if (require.main === module) main().catch((e) => die(e && e.stack ? e.stack : String(e)));
