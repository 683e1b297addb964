"""What python3-onnx reads from a model, in the shape of `onnxptq inspect --json`: the test oracle."""
import collections
import json
import sys

import onnx
from onnx import numpy_helper


def dims(value_info):
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim]


def main(path):
    model = onnx.load(path)
    g = model.graph
    initializer_names = {t.name for t in g.initializer}
    counts = collections.Counter(n.op_type if n.domain in ("", "ai.onnx") else n.domain + "." + n.op_type for n in g.node)
    ops = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    params = sum(numpy_helper.to_array(t).size for t in g.initializer)
    for n in g.node:
        if n.op_type == "Constant":
            params += sum(numpy_helper.to_array(a.t).size for a in n.attribute if a.name == "value")
    io = lambda vs: [{"name": v.name, "type": onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type).lower(),
                      "shape": dims(v)} for v in vs if v.name not in initializer_names]
    print(json.dumps({
        "ir_version": model.ir_version,
        "nodes": len(g.node),
        "op_types": dict(ops),
        "initializers": len(g.initializer),
        "parameters": int(params),
        "inputs": io(g.input),
        "outputs": io(g.output),
    }))


if __name__ == "__main__":
    main(sys.argv[1])
