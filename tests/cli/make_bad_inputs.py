#!/usr/bin/python3
"""Write the bad inputs of bad_input_test.cc into a folder: models, .npy files and links that a
fuzz campaign found crashing, overflowing or silently misread. python3-onnx writes them, so their
encoding is the ONNX library's, not onnxptq's.

Usage: /usr/bin/python3 make_bad_inputs.py FOLDER
"""
import io
import os
import sys
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]


def value(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def save(name, nodes, inputs, initializers=(), folder=OUT):
    graph = helper.make_graph(nodes, "g", inputs, [value("y", None)], list(initializers))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(folder, name))


def node_with(op, inputs, attribute, values, **attrs):
    """A node with an attribute whose name no ONNX op defines (as a flipped byte leaves it)."""
    node = helper.make_node(op, inputs, ["y"], **attrs)
    node.attribute.append(helper.make_attribute(attribute, values))
    return node


def npy(name, header):
    """An .npy file with the header as given (numpy would refuse to write these)."""
    text = header.encode()
    pad = 64 - (10 + len(text) + 1) % 64
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + (len(text) + pad + 1).to_bytes(2, "little") + text + b" " * pad + b"\n")
        f.write(bytes(64))


image = value("x", [1, 3, 8, 8])
weight = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
save("conv_strides_0.onnx", [helper.make_node("Conv", ["x", "w"], ["y"], strides=[0, 0])], [image], [weight])
save("maxpool_strides_0.onnx", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[0, 0])],
     [image])
save("conv_weight_rank_5.onnx", [helper.make_node("Conv", ["x", "w"], ["y"])], [image],
     [numpy_helper.from_array(np.ones((4, 3, 3, 3, 1), np.float32), "w")])
save("input_2e31_squared.onnx", [helper.make_node("Relu", ["x"], ["y"])], [value("x", [2**31, 2**31])])
save("input_2e32_squared.onnx", [helper.make_node("Relu", ["x"], ["y"])], [value("x", [2**32, 2**32])])
huge = TensorProto(name="b", data_type=TensorProto.FLOAT, dims=[2**32, 2**32], raw_data=b"")
save("initializer_2e32_squared.onnx", [helper.make_node("Add", ["x", "b"], ["y"])], [value("x", [1])], [huge])
save("input_dim_minus_5.onnx", [helper.make_node("Relu", ["x"], ["y"])], [value("x", [1, -5])])
save("relu.onnx", [helper.make_node("Relu", ["x"], ["y"])], [value("x", [1, 4])])
save("maxpool_garbled_strides.onnx", [node_with("MaxPool", ["x"], "strid*s", [2, 2], kernel_shape=[2, 2])], [image])
save("conv_garbled_pads.onnx", [node_with("Conv", ["x", "w"], "pad?", [1, 1, 1, 1])], [image], [weight])
save("two_inputs_named_x.onnx", [helper.make_node("Add", ["x", "x"], ["y"])], [value("x", [1, 4]), value("x", [1, 4])])

# Found by the fuzz targets (tests/fuzz): a Conv without its weight (kernels read W), and a graph
# attribute that holds no graph (the saver read it).
save("conv_without_weight.onnx", [helper.make_node("Conv", ["x"], ["y"])], [image])
empty_branch = helper.make_node("If", ["c"], ["y"])
empty_branch.attribute.append(onnx.AttributeProto(name="then_branch", type=onnx.AttributeProto.GRAPH))
save("graph_attribute_without_graph.onnx", [empty_branch],
     [helper.make_tensor_value_info("c", TensorProto.BOOL, [])])

# External data through a symbolic link that leaves the model's folder.
os.makedirs(os.path.join(OUT, "linked"))
data = TensorProto(name="b", data_type=TensorProto.UINT8, dims=[16], data_location=TensorProto.EXTERNAL)
data.external_data.add(key="location", value="w.bin")
save("m.onnx", [helper.make_node("Cast", ["b"], ["c"], to=1), helper.make_node("Add", ["x", "c"], ["y"])],
     [value("x", [16])], [data], folder=os.path.join(OUT, "linked"))
os.symlink("/etc/passwd", os.path.join(OUT, "linked", "w.bin"))

# An .npz whose deflated member claims 4 GB: refused before that much is allocated.
buffer = io.BytesIO()
with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
    with archive.open("x.npy", "w") as member:
        np.save(member, np.ones((1, 4), np.float32))
data = bytearray(buffer.getvalue())
central = data.rindex(b"PK\x01\x02")
data[22:26] = data[central + 24:central + 28] = (0xFFFFFFF0).to_bytes(4, "little")
with open(os.path.join(OUT, "claims_4gb.npz"), "wb") as f:
    f.write(data)

npy("shape_2e62.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 48, %d), }" % 2**62)
npy("shape_1e23.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, %d), }" % 10**23)
npy("no_descr.npy", "{'descr': , 'fortran_order': False, 'shape': (1, 4), }")
npy("no_shape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': , }")
