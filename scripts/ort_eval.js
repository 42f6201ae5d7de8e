#!/usr/bin/env node
// Perplexity with ONNX Runtime: the reference `llmc eval` is compared to.
//
//   node scripts/ort_eval.js [MODEL.onnx] (--ids FILE | --text FILE --tokenizer tokenizer.json)
//        [--context N] [--stride N] [--threads N] [--dump-ids FILE]
//
// Sliding windows as `llmc eval` slides them (Hugging Face's "perplexity of
// fixed-length models"): windows of N tokens start every S tokens, each run
// from position 0 with an empty KV cache, and each scores only the tokens no
// earlier window scored, from the logits of the position before the token
// (a window's first token has none).  --text is tokenized by the JS reference
// (@huggingface/tokenizers, tokenizer_config.json read from beside
// tokenizer.json when present), without special tokens; --dump-ids writes the
// ids used, comma-separated on one line.  Without MODEL only the ids are
// produced (--dump-ids is then required).  Prints one line:
//   perplexity P  nll L  tokens T  windows of N stride S  R tok/s (...)
'use strict';

const fs = require('fs');
const path = require('path');
const { loadOrt, describePast, emptyPast, runStep } = require('./ort_generate.js');

const REPO_ROOT = path.resolve(__dirname, '..');
const TOKENIZERS_PATH = path.join(REPO_ROOT, '.deps', 'node_modules', '@huggingface', 'tokenizers');

function die(msg) {
  process.stderr.write(`ort_eval: ${msg}\n`);
  process.exit(2);
}

function positiveInt(option, text) {
  if (!/^\d+$/.test(text) || Number(text) < 1) die(`${option} wants an integer >= 1, got '${text}'`);
  return Number(text);
}

function parseArgs(argv) {
  const args = { model: null, ids: null, text: null, tokenizer: null, dumpIds: null,
                 context: 256, stride: null, threads: 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) die(`missing value for ${a}`);
      return argv[++i];
    };
    if (a === '--ids') args.ids = value();
    else if (a === '--text') args.text = value();
    else if (a === '--tokenizer') args.tokenizer = value();
    else if (a === '--dump-ids') args.dumpIds = value();
    else if (a === '--context') args.context = positiveInt(a, value());
    else if (a === '--stride') args.stride = positiveInt(a, value());
    else if (a === '--threads') args.threads = positiveInt(a, value());
    else if (a.startsWith('--')) die(`unknown option ${a}`);
    else if (args.model === null) args.model = a;
    else die(`unexpected argument ${a}`);
  }
  if (!args.ids === !args.text) die('give exactly one of --ids FILE or --text FILE');
  if (args.text && !args.tokenizer) die('--text needs --tokenizer tokenizer.json');
  if (!args.model && !args.dumpIds) die('without MODEL.onnx only --dump-ids can be done');
  if (args.stride === null) args.stride = Math.max(1, Math.floor(args.context / 2));
  if (args.context < 2) die('--context must be at least 2');
  if (args.stride > args.context) die(`--stride ${args.stride} is longer than the window ${args.context}`);
  return args;
}

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    return die(`cannot read ${file}: ${e.message}`);
  }
}

function tokenize(textFile, tokenizerFile) {
  const { Tokenizer } = require(TOKENIZERS_PATH);
  const configFile = path.join(path.dirname(tokenizerFile), 'tokenizer_config.json');
  const config = fs.existsSync(configFile) ? readJson(configFile) : {};
  const tokenizer = new Tokenizer(readJson(tokenizerFile), config);
  const text = fs.readFileSync(textFile, 'utf8');
  return tokenizer.encode(text, { add_special_tokens: false }).ids;
}

function readIds(file) {
  const fields = fs.readFileSync(file, 'utf8').split(/[\s,]+/).filter((s) => s !== '');
  return fields.map((s) => {
    if (!/^\d+$/.test(s)) die(`${file}: bad token id '${s}'`);
    return Number(s);
  });
}

// -log softmax(row)[target], in double precision.
function tokenNll(data, offset, vocab, target) {
  let max = data[offset];
  for (let v = 1; v < vocab; v++) if (data[offset + v] > max) max = data[offset + v];
  let sum = 0;
  for (let v = 0; v < vocab; v++) sum += Math.exp(data[offset + v] - max);
  return Math.log(sum) + max - data[offset + target];
}

async function perplexity(ort, session, ids, args) {
  const pasts = describePast(session);
  const totals = { nll: 0, scored: 0, fed: 0, seconds: 0 };
  let scoredEnd = 1; // targets before it are settled (token 0 is never scored)
  for (let begin = 0; scoredEnd < ids.length; begin += args.stride) {
    const end = Math.min(begin + args.context, ids.length);
    const first = Math.max(scoredEnd, begin + 1);
    const window = ids.slice(begin, end).map(BigInt);
    const t0 = process.hrtime.bigint();
    const outputs = await runStep(ort, session, window, 0, emptyPast(ort, pasts));
    totals.seconds += Number(process.hrtime.bigint() - t0) / 1e9;
    totals.fed += window.length;
    const [, seq, vocab] = outputs.logits.dims;
    if (seq !== window.length) die(`logits have ${seq} rows for a window of ${window.length}`);
    for (let t = first; t < end; t++) {
      totals.nll += tokenNll(outputs.logits.data, (t - 1 - begin) * vocab, vocab, ids[t]);
    }
    totals.scored += Math.max(0, end - first);
    scoredEnd = end;
  }
  return totals;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ids = args.text ? tokenize(args.text, args.tokenizer) : readIds(args.ids);
  if (args.dumpIds) fs.writeFileSync(args.dumpIds, ids.join(',') + '\n');
  if (!args.model) return;
  if (ids.length < 2) die(`${ids.length} token ids; perplexity needs at least 2`);
  const ort = loadOrt();
  const session = await ort.InferenceSession.create(args.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
  });
  const t = await perplexity(ort, session, ids, args);
  const mean = t.nll / t.scored;
  process.stdout.write(`perplexity ${Math.exp(mean).toFixed(4)}  nll ${mean.toFixed(6)}  ` +
    `tokens ${t.scored}  windows of ${args.context} stride ${args.stride}  ` +
    `${(t.fed / t.seconds).toFixed(1)} tok/s (${t.fed} tokens prefilled in ${t.seconds.toFixed(2)} s)\n`);
}

main().catch((e) => die(e && e.stack ? e.stack : String(e)));
