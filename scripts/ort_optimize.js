#!/usr/bin/env node
// Writes the graph ONNX Runtime runs after its own optimizer at level "all".
//
//   node scripts/ort_optimize.js MODEL.onnx OPTIMIZED.onnx [MODEL.onnx OPTIMIZED.onnx ...]
//
// scripts/op_counts.py counts the nodes of OPTIMIZED.onnx beside llmc's
// plan ops.
'use strict';

const path = require('path');

const ORT_PATH = path.join(path.resolve(__dirname, '..'), '.deps', 'node_modules', 'onnxruntime-node');

async function main(argv) {
  if (argv.length < 2 || argv.length % 2) {
    throw new Error('usage: ort_optimize.js MODEL.onnx OPTIMIZED.onnx [MODEL.onnx OPTIMIZED.onnx ...]');
  }
  const ort = require(ORT_PATH);
  for (let i = 0; i < argv.length; i += 2) {
    try {
      const session = await ort.InferenceSession.create(argv[i], {
        graphOptimizationLevel: 'all',
        optimizedModelFilePath: argv[i + 1],
        logSeverityLevel: 3,   // no warning about hardware-specific NCHWc nodes
      });
      await session.release();
    } catch (e) {
      throw new Error(`${argv[i]}: ${e.message}`);
    }
  }
}

main(process.argv.slice(2)).catch((e) => {
  process.stderr.write(`ort_optimize: ${e.message}\n`);
  process.exit(2);
});
