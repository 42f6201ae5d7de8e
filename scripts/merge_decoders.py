#!/usr/bin/python3
"""Merge a decoder without past and a decoder with past into one ONNX model
with an If node, the way optimum 1.x writes decoder_model_merged.onnx.

    merge_decoders.py NO_PAST.onnx WITH_PAST.onnx --out MERGED.onnx

The merged graph (only the onnx package; run with /usr/bin/python3):
  - inputs: the no-past decoder's, then the with-past decoder's others (the
    past_key_values.*), then `use_cache_branch` (bool [1]);
  - one node, If 'optimum::if' on use_cache_branch: then_branch "with_past"
    (the with-past decoder's nodes), else_branch "no_past";
  - outputs: the no-past decoder's (logits, present.*); the with-past
    outputs are given the same declared types (the If's branches must agree);
  - initializers: every tensor of rank > 1, or of rank 1 and not int32/int64,
    is deduplicated across both decoders by (dtype, dims, bytes), renamed
    "<name>_merged_<n>" and hoisted to the top-level graph, where both
    branches read it from the outer scope; scalars and int32/int64 vectors
    stay in their branch;
  - the decoders' value_info is dropped, their opset imports are merged.
Differences from optimum: the name kept for a group of equal tensors is the
first in file order (optimum takes an arbitrary member of a set), and the IR
version is the inputs' (this onnx package's checker stops at IR 8).
"""
import argparse
import hashlib
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

SUFFIX = "merged"


def hoisted(t):
    """Tensors optimum shares between the branches (and hoists)."""
    return len(t.dims) > 1 or (len(t.dims) == 1 and t.data_type not in (onnx.TensorProto.INT32,
                                                                         onnx.TensorProto.INT64))


def unify_outputs(no_past, with_past):
    """The with-past outputs take the no-past ones' declared types."""
    a, b = no_past.graph.output, with_past.graph.output
    if [o.name for o in a] != [o.name for o in b]:
        sys.exit(f"merge_decoders: outputs differ: {[o.name for o in a]} vs {[o.name for o in b]}")
    for i, (x, y) in enumerate(zip(a, b)):
        if x.type.tensor_type.elem_type != y.type.tensor_type.elem_type:
            sys.exit(f"merge_decoders: output {x.name} has different element types")
        b[i].CopyFrom(x)


def shared_names(models):
    """(name, model index) -> the common name of its group of equal tensors."""
    groups = {}
    for m, model in enumerate(models):
        for t in model.graph.initializer:
            if hoisted(t):
                data = np.ascontiguousarray(numpy_helper.to_array(t))
                key = (t.data_type, tuple(t.dims), hashlib.sha512(data.tobytes()).hexdigest())
                groups.setdefault(key, []).append((t.name, m))
    names, used = {}, {}
    for members in groups.values():
        first = members[0][0]
        n = used[first] = used.get(first, -1) + 1
        for member in members:
            names[member] = f"{first}_{SUFFIX}_{n}"
    return names


def hoist_initializers(models):
    """Renames the shared tensors' readers; returns the top-level initializers
    (one per group) and leaves each model only its branch-local ones."""
    names = shared_names(models)
    top, seen = [], set()
    for m, model in enumerate(models):
        for node in model.graph.node:
            for i, name in enumerate(node.input):
                node.input[i] = names.get((name, m), name)
        local = []
        for t in model.graph.initializer:
            new = names.get((t.name, m))
            if new is None:
                local.append(t)
            elif new not in seen:
                seen.add(new)
                t.name = new
                top.append(t)
        del model.graph.initializer[:]
        model.graph.initializer.extend(local)
    return top


def all_inputs(models):
    inputs, seen = [], set()
    for model in models:
        for vi in model.graph.input:
            if vi.name not in seen:
                seen.add(vi.name)
                inputs.append(vi)
    return inputs


def opset_imports(models):
    imports, seen = [], set()
    for model in models:
        for imp in model.opset_import:
            if imp.domain not in seen:
                seen.add(imp.domain)
                imports.append(imp)
    return imports


def branch(model, name):
    return helper.make_graph(list(model.graph.node), name, [], list(model.graph.output),
                             initializer=list(model.graph.initializer))


def merge(no_past, with_past):
    if no_past.opset_import[0].version != with_past.opset_import[0].version:
        sys.exit("merge_decoders: the decoders' opsets differ")
    unify_outputs(no_past, with_past)
    inputs = all_inputs([no_past, with_past])
    top = hoist_initializers([no_past, with_past])
    else_branch, then_branch = branch(no_past, "no_past"), branch(with_past, "with_past")
    cond = helper.make_tensor_value_info("use_cache_branch", onnx.TensorProto.BOOL, [1])
    node = helper.make_node("If", ["use_cache_branch"], [o.name for o in else_branch.output],
                            name="optimum::if", then_branch=then_branch, else_branch=else_branch)
    graph = helper.make_graph([node], SUFFIX, inputs + [cond], list(else_branch.output), initializer=top)
    model = helper.make_model_gen_version(graph, producer_name="optimum-onnx",
                                          opset_imports=opset_imports([no_past, with_past]),
                                          ir_version=max(no_past.ir_version, with_past.ir_version))
    onnx.checker.check_model(model)
    return model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("no_past", help="the decoder without past inputs (decoder_model.onnx)")
    ap.add_argument("with_past", help="the decoder with past inputs (decoder_with_past_model.onnx)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    model = merge(onnx.load(args.no_past), onnx.load(args.with_past))
    onnx.save(model, args.out)
    top = model.graph
    print(f"merge_decoders: {len(top.initializer)} shared initializers, branches of "
          f"{len(top.node[0].attribute[0].g.node)} and {len(top.node[0].attribute[1].g.node)} nodes -> {args.out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
