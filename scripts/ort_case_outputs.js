#!/usr/bin/env node
// Writes the expected outputs of ONNX backend-style node cases with ONNX
// Runtime: for each CASE_DIR, runs CASE_DIR/model.onnx on every
// test_data_set_N/input_K.pb and writes output_K.pb beside them (the layout
// `llmc check-onnx` reads).
//
//   node scripts/ort_case_outputs.js CASE_DIR...
//
// Tensors are TensorProto messages with dims, data_type, name and raw_data
// (what numpy_helper.from_array writes); only the dtypes below are handled.
// Exits 1 when a case fails to run, naming it; 2 on a usage error.
'use strict';

const fs = require('fs');
const path = require('path');
const { loadOrt } = require('./ort_generate.js');

// TensorProto.DataType -> [ORT type name, typed array]
const DTYPES = {
  1: ['float32', Float32Array], 2: ['uint8', Uint8Array], 3: ['int8', Int8Array],
  6: ['int32', Int32Array], 7: ['int64', BigInt64Array], 9: ['bool', Uint8Array],
};
const ORT_TO_ONNX = Object.fromEntries(Object.entries(DTYPES).map(([k, [t]]) => [t, Number(k)]));

function die(msg, code) {
  process.stderr.write(`ort_case_outputs: ${msg}\n`);
  process.exit(code);
}

// ---- protobuf: varints and length-delimited fields ----

function readVarint(buf, pos) {
  let v = 0n, shift = 0n;
  for (;;) {
    const b = buf[pos.at++];
    v |= BigInt(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
    shift += 7n;
  }
}

function writeVarint(out, v) {
  let x = BigInt.asUintN(64, BigInt(v));
  do {
    let b = Number(x & 0x7fn);
    x >>= 7n;
    if (x) b |= 0x80;
    out.push(b);
  } while (x);
}

// TensorProto fields: 1 dims (int64, packed or not), 2 data_type, 8 name, 9 raw_data.
function parseTensor(buf) {
  const t = { dims: [], dataType: 0, name: '', raw: Buffer.alloc(0) };
  const pos = { at: 0 };
  while (pos.at < buf.length) {
    const key = Number(readVarint(buf, pos)), field = key >> 3, wire = key & 7;
    if (wire === 0) {
      const v = readVarint(buf, pos);
      if (field === 1) t.dims.push(Number(BigInt.asIntN(64, v)));
      else if (field === 2) t.dataType = Number(v);
    } else if (wire === 2) {
      const len = Number(readVarint(buf, pos)), bytes = buf.subarray(pos.at, pos.at + len);
      pos.at += len;
      if (field === 1) {
        const p = { at: 0 };
        while (p.at < bytes.length) t.dims.push(Number(BigInt.asIntN(64, readVarint(bytes, p))));
      } else if (field === 8) t.name = bytes.toString('utf8');
      else if (field === 9) t.raw = Buffer.from(bytes);
      else throw new Error(`field ${field} (typed data) is not handled: write raw_data`);
    } else if (wire === 5) pos.at += 4;
    else if (wire === 1) pos.at += 8;
    else throw new Error(`wire type ${wire}`);
  }
  return t;
}

function serializeTensor(name, tensor) {
  const out = [];
  const field = (num, wire) => writeVarint(out, (num << 3) | wire);
  for (const d of tensor.dims) { field(1, 0); writeVarint(out, d); }
  field(2, 0); writeVarint(out, ORT_TO_ONNX[tensor.type]);
  const nameBytes = Buffer.from(name, 'utf8');
  field(8, 2); writeVarint(out, nameBytes.length); out.push(...nameBytes);
  const data = tensor.type === 'bool' ? Uint8Array.from(tensor.data, (b) => (b ? 1 : 0)) : tensor.data;
  const raw = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  field(9, 2); writeVarint(out, raw.length);
  return Buffer.concat([Buffer.from(out), raw]);
}

function toOrt(ort, t) {
  const entry = DTYPES[t.dataType];
  if (!entry) throw new Error(`input ${t.name}: data type ${t.dataType} is not handled`);
  const [type, Arr] = entry;
  const copy = new Uint8Array(t.raw);    // aligned
  const data = new Arr(copy.buffer, 0, copy.byteLength / Arr.BYTES_PER_ELEMENT);
  return new ort.Tensor(type, type === 'bool' ? Uint8Array.from(data, (b) => b !== 0) : data, t.dims);
}

async function runCase(ort, dir) {
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'));
  const sets = fs.readdirSync(dir).filter((d) => d.startsWith('test_data_set_')).sort();
  for (const set of sets) {
    const feeds = {};
    session.inputNames.forEach((name, k) => {
      feeds[name] = toOrt(ort, parseTensor(fs.readFileSync(path.join(dir, set, `input_${k}.pb`))));
    });
    const results = await session.run(feeds);
    session.outputNames.forEach((name, k) => {
      fs.writeFileSync(path.join(dir, set, `output_${k}.pb`), serializeTensor(name, results[name]));
    });
  }
}

async function main() {
  const dirs = process.argv.slice(2);
  if (!dirs.length) die('usage: ort_case_outputs.js CASE_DIR...', 2);
  const ort = loadOrt();
  for (const dir of dirs) {
    try {
      await runCase(ort, dir);
    } catch (e) {
      die(`${dir}: ${e.message}`, 1);
    }
  }
}

main();
