#!/usr/bin/python3
"""Raises a model's default-domain opset from 13..17 to 18..21.

Debian's torch (1.13) exports opsets up to 17 and its onnx (1.12) converts
versions up to 17 too, while current exporters write 18..21.  Between 17 and
21 the operator schemas changed in ways that need a rewrite only for the
Reduce* ops other than ReduceSum, whose `axes` attribute becomes input 1 at
opset 18; every other change adds types or optional inputs and attributes
with defaults that keep the old meaning.  Ops whose meaning changed in ways
this script does not rewrite are refused, as are subgraphs.

Usage: /usr/bin/python3 scripts/onnx_opset_upgrade.py IN.onnx OUT.onnx --opset N
External data files stay where they are (OUT beside IN keeps them readable).
"""
import argparse
import sys

import onnx
from onnx import numpy_helper

import numpy as np

# axes attribute -> input 1 at opset 18 (ReduceSum moved at 13)
REDUCE_AXES_18 = {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
                  "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"}
# changed meaning at the opset given: not rewritten here
REFUSED = {"DFT": 20, "GridSample": 20, "GroupNormalization": 21, "If": 1, "Loop": 1, "Scan": 1}
# the lowest IR version each opset needs (onnx/helper.py VERSION_TABLE)
IR_VERSION = {18: 8, 19: 9, 20: 9, 21: 10}


def default_domain_opset(model):
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp
    sys.exit("onnx_opset_upgrade: the model imports no default-domain opset")


def axes_to_input(graph, node, names):
    """Moves node's axes attribute to a new int64 initializer, input 1."""
    attr = next((a for a in node.attribute if a.name == "axes"), None)
    if attr is None:
        return
    node.attribute.remove(attr)
    name, k = (node.name or node.output[0]) + "/axes", 0
    while name in names:
        k += 1
        name = "%s/axes_%d" % (node.name or node.output[0], k)
    names.add(name)
    graph.initializer.append(numpy_helper.from_array(np.array(attr.ints, dtype=np.int64), name))
    node.input.append(name)


def upgrade(model, target):
    imp = default_domain_opset(model)
    if not 13 <= imp.version <= 17 or not 18 <= target <= 21:
        sys.exit("onnx_opset_upgrade: converts opsets 13..17 to 18..21, not %d to %d" % (imp.version, target))
    graph = model.graph
    names = {t.name for t in graph.initializer} | {v for n in graph.node for v in list(n.input) + list(n.output)}
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type in REFUSED and target >= REFUSED[node.op_type]:
            sys.exit("onnx_opset_upgrade: node '%s' (%s) is not converted to opset %d" %
                     (node.name, node.op_type, target))
        if node.op_type in REDUCE_AXES_18:
            axes_to_input(graph, node, names)
    imp.version = target
    model.ir_version = max(model.ir_version, IR_VERSION[target])
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--opset", type=int, required=True)
    args = ap.parse_args()
    model = onnx.load(args.input, load_external_data=False)
    onnx.save(upgrade(model, args.opset), args.output)


if __name__ == "__main__":
    main()
