#!/usr/bin/python3
"""Lists the ONNX backend node test cases llmc claims to handle.

A case is selected when its model imports only the default domain at an
opset within [min, max] and every node's op_type is in the claimed list
(`llmc ops`).  Prints one case directory per line.

usage: onnx_cases.py DATA_DIR OPS_FILE MIN_OPSET MAX_OPSET
"""
import os
import sys

import onnx


def model_ops(path):
    model = onnx.load(path, load_external_data=False)
    opsets = {imp.domain or "ai.onnx": imp.version for imp in model.opset_import}
    ops = {(n.domain or "ai.onnx", n.op_type) for n in model.graph.node}
    return opsets, ops


def selected(case_dir, claimed, lo, hi):
    opsets, ops = model_ops(os.path.join(case_dir, "model.onnx"))
    version = opsets.get("ai.onnx")
    if version is None or not lo <= version <= hi:
        return False
    return all(domain == "ai.onnx" and op in claimed for domain, op in ops)


def main():
    data_dir, ops_file, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with open(ops_file) as f:
        claimed = {line.strip() for line in f if line.strip()}
    for name in sorted(os.listdir(data_dir)):
        case_dir = os.path.join(data_dir, name)
        if os.path.isfile(os.path.join(case_dir, "model.onnx")) and selected(case_dir, claimed, lo, hi):
            print(case_dir)


if __name__ == "__main__":
    main()
