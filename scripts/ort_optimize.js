#!/usr/bin/env node
// Writes the graph ONNX Runtime runs after its own optimizer at level "all".
//
//   node scripts/ort_optimize.js MODEL.onnx OPTIMIZED.onnx
//
// scripts/op_counts.py counts the nodes of OPTIMIZED.onnx beside llmc's
// plan ops.
'use strict';

const path = require('path');

const ORT_PATH = path.join(path.resolve(__dirname, '..'), '.deps', 'node_modules', 'onnxruntime-node');

async function main(argv) {
  if (argv.length !== 2) throw new Error('usage: ort_optimize.js MODEL.onnx OPTIMIZED.onnx');
  const ort = require(ORT_PATH);
  await ort.InferenceSession.create(argv[0], {
    graphOptimizationLevel: 'all',
    optimizedModelFilePath: argv[1],
    logSeverityLevel: 3,   // no warning about hardware-specific NCHWc nodes
  });
}

main(process.argv.slice(2)).catch((e) => {
  process.stderr.write(`ort_optimize: ${e.message}\n`);
  process.exit(2);
});
