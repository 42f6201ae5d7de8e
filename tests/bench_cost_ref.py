#!/usr/bin/env python3
"""The per-token cost `llmc bench --roofline` reports, computed from an
ONNX export's graph and initializers alone (the reference of t_bench.sh).

  weight_bytes_per_token  every initializer a MatMul/Gemm multiplies by
                          (directly or through a Transpose), every 1-D
                          initializer added to a MatMul's output (a bias),
                          and one row of each embedding table: a Gather of a
                          2-D initializer whose rows are model-width vectors
                          (RoPE cos/sin tables are head_dim wide: not rows
                          of an embedding)
  kv_bytes_per_pos        float K and V of every past_key_values input:
                          kv_heads * head_dim * 4 bytes each
  kv_layers               [kv_heads, head_dim] of each layer's past key
  linear_ops_per_token    2 * elements of each 2-D MatMul/Gemm initializer
  attn_ops_per_pos        4 * heads * head_dim per layer; heads * head_dim
                          is the model width for the zoo's families

Prints one JSON object with those five keys."""
import json
import sys

import onnx
from onnx import numpy_helper


def constants(graph):
    values = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value":
                    values[node.output[0]] = numpy_helper.to_array(a.t)
    return values


def main(path):
    graph = onnx.load(path).graph
    values = constants(graph)
    producer = {o: n for n in graph.node for o in n.output}
    inputs = {i.name for i in graph.input}

    def weight(name):
        if name in values:
            return values[name]
        p = producer.get(name)
        if p is not None and p.op_type == "Transpose" and p.input[0] in values:
            return values[p.input[0]]
        return None

    gathers = [n for n in graph.node if n.op_type == "Gather" and n.input[0] in values and n.input[1] in inputs]
    tables = [values[n.input[0]] for n in gathers]
    width = next(values[n.input[0]].shape[1] for n in gathers if n.input[1] == "input_ids")
    weight_bytes = ops = 0
    for n in graph.node:
        if n.op_type in ("MatMul", "Gemm"):
            for w in filter(lambda w: w is not None, map(weight, n.input[1:])):
                weight_bytes += w.nbytes
                ops += 2 * w.size if w.ndim == 2 else 0
        elif n.op_type == "Add":
            for x, y in ((n.input[0], n.input[1]), (n.input[1], n.input[0])):
                if x in values and values[x].ndim == 1 and y in producer and producer[y].op_type == "MatMul":
                    weight_bytes += values[x].nbytes
    weight_bytes += sum(t.nbytes // t.shape[0] for t in tables if t.ndim == 2 and t.shape[1] == width)
    past = [i.type.tensor_type.shape.dim for i in graph.input if i.name.startswith("past_key_values.")]
    kv = sum(d[1].dim_value * d[3].dim_value * 4 for d in past)
    layers = [[i.type.tensor_type.shape.dim[1].dim_value, i.type.tensor_type.shape.dim[3].dim_value]
              for i in graph.input if i.name.startswith("past_key_values.") and i.name.endswith(".key")]
    print(json.dumps({"weight_bytes_per_token": int(weight_bytes), "kv_bytes_per_pos": kv, "kv_layers": layers,
                      "linear_ops_per_token": int(ops), "attn_ops_per_pos": 4 * width * len(past) // 2}))


if __name__ == "__main__":
    main(sys.argv[1])
