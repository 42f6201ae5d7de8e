#!/usr/bin/env node
// Reference tokenizer for the tests: @huggingface/tokenizers (pure JS) from
// <repo>/.deps (scripts/deps.sh installs it).
//   node scripts/tokenize_ref.js TOKENIZER.json [--add-special] [--ids] [--time]
// Reads stdin; each line (split on '\n', the newline excluded, bytes decoded
// as UTF-8 with U+FFFD for invalid sequences, as TextDecoder does) becomes
// one output line of comma-separated ids.  --ids reverses: each line of ids
// becomes its decoded text (clean_up_tokenization_spaces off, special tokens
// kept).  tokenizer_config.json beside TOKENIZER.json is read when present.
// --time prints the encode (or decode) throughput to stderr as
// "ref_mb_per_s=X" (input bytes over the time spent in encode/decode only).
"use strict";
const fs = require("fs");
const path = require("path");

const repoRoot = path.resolve(__dirname, "..");
const { Tokenizer } = require(path.join(repoRoot, ".deps/node_modules/@huggingface/tokenizers"));

function loadTokenizer(jsonPath) {
  const tokenizerJson = JSON.parse(fs.readFileSync(jsonPath, "utf8"));
  const configPath = path.join(path.dirname(jsonPath), "tokenizer_config.json");
  const config = fs.existsSync(configPath) ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};
  return new Tokenizer(tokenizerJson, config);
}

function splitLines(bytes) {
  const lines = [];
  let start = 0;
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] === 0x0a) { lines.push(bytes.subarray(start, i)); start = i + 1; }
  }
  if (start < bytes.length) lines.push(bytes.subarray(start));
  return lines;
}

function main() {
  const args = process.argv.slice(2);
  const jsonPath = args.find((a) => !a.startsWith("--"));
  if (!jsonPath) {
    process.stderr.write("usage: tokenize_ref.js TOKENIZER.json [--add-special] [--ids] [--time]\n");
    process.exit(2);
  }
  const addSpecial = args.includes("--add-special");
  const idsMode = args.includes("--ids");
  const tok = loadTokenizer(jsonPath);
  const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  const lines = splitLines(fs.readFileSync(0));
  const out = [];
  let busyNs = 0n;
  let inputBytes = 0;
  for (const line of lines) {
    inputBytes += line.length + 1;
    const text = decoder.decode(line);
    const t0 = process.hrtime.bigint();
    if (idsMode) {
      const ids = text.length ? text.split(",").map(Number) : [];
      out.push(ids.length ? tok.decode(ids, { clean_up_tokenization_spaces: false }) : "");
    } else {
      out.push(tok.encode(text, { add_special_tokens: addSpecial }).ids.join(","));
    }
    busyNs += process.hrtime.bigint() - t0;
  }
  process.stdout.write(out.length ? out.join("\n") + "\n" : "");
  if (args.includes("--time")) {
    const seconds = Number(busyNs) / 1e9;
    process.stderr.write(`ref_mb_per_s=${(inputBytes / 1e6 / seconds).toFixed(2)}\n`);
  }
}

main();
