#!/usr/bin/python3
"""Writes the fuzz targets' seed corpus (committed under tests/fuzz/corpus/): tiny valid models
for the loader and the quantizer, .npy and .npz files for their readers. Made by Debian's
python3-onnx and python3-numpy; deterministic, so rerunning it rewrites the same files.

    /usr/bin/python3 tests/fuzz/make_corpus.py tests/fuzz/corpus
"""
import io
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.RandomState(0)


def weight(name, *shape):
    return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)


def model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "fuzz_seed", inputs, outputs, list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(m, full_check=True)
    return m.SerializeToString()


def tensor(name, *shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def conv_relu_pool_gemm():
    """A small CNN: every op the quantizer treats specially in a row."""
    return model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Flatten", ["p"], ["f"]),
         helper.make_node("Gemm", ["f", "g", "gb"], ["y"], transB=1)],
        [tensor("x", 1, 3, 8, 8)], [tensor("y", 1, 10)],
        [weight("w", 4, 3, 3, 3), weight("b", 4), weight("g", 10, 64), weight("gb", 10)])


def residual():
    """Conv, Relu, a residual Add, a strided Conv; the batch dimension is symbolic."""
    return model(
        [helper.make_node("Conv", ["x", "w1"], ["c1"]),
         helper.make_node("Relu", ["c1"], ["r"]),
         helper.make_node("Add", ["r", "x"], ["a"]),
         helper.make_node("Conv", ["a", "w2", "b2"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])],
        [tensor("x", "N", 4, 6, 6)], [tensor("y", "N", 2, 3, 3)],
        [weight("w1", 4, 4, 1, 1), weight("w2", 2, 4, 3, 3), weight("b2", 2)])


def two_inputs():
    """Two graph inputs added, then a Gemm without bias."""
    return model(
        [helper.make_node("Add", ["a", "b"], ["s"]),
         helper.make_node("Relu", ["s"], ["r"]),
         helper.make_node("Gemm", ["r", "g"], ["y"])],
        [tensor("a", 1, 8), tensor("b", 1, 8)], [tensor("y", 1, 4)], [weight("g", 8, 4)])


def shape_ops():
    """The loader's other cases: shape tensors, int64 constants, a Constant node, attributes of every kind."""
    shape = numpy_helper.from_array(np.array([1, 8, 4], np.int64), "shape")
    starts = numpy_helper.from_array(np.array([0], np.int64), "starts")
    ends = numpy_helper.from_array(np.array([2], np.int64), "ends")
    return model(
        [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
         helper.make_node("Reshape", ["t", "shape"], ["s"]),
         helper.make_node("Constant", [], ["k"], value=weight("k", 1, 8, 4)),
         helper.make_node("Concat", ["s", "k"], ["c"], axis=2),
         helper.make_node("Softmax", ["c"], ["sm"], axis=-1),
         helper.make_node("Slice", ["sm", "starts", "ends"], ["sl"]),
         helper.make_node("MatMul", ["sl", "m"], ["mm"]),
         helper.make_node("ReduceMean", ["mm"], ["y"], axes=[1], keepdims=0)],
        [tensor("x", 1, 2, 4, 4)], [tensor("y", 1, 3)],
        [shape, starts, ends, weight("m", 8, 3)])


def if_subgraph():
    """A subgraph: If on the sign of the input's sum, each branch seeing the enclosing x."""
    then_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "then", [], [tensor("n", 1, 4)])
    else_branch = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["e"])], "else", [], [tensor("e", 1, 4)])
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero")
    return model(
        [helper.make_node("ReduceSum", ["x"], ["sum"], keepdims=0),
         helper.make_node("Greater", ["sum", "zero"], ["cond"]),
         helper.make_node("If", ["cond"], ["y"], then_branch=then_branch, else_branch=else_branch)],
        [tensor("x", 1, 4)], [tensor("y", 1, 4)], [zero])


def recurrent_weight(name, *shape):
    """Weights of the recurrent seeds, from a generator of their own: the other files stay as they were."""
    return numpy_helper.from_array(recurrent_rng.uniform(-1, 1, shape).astype(np.float32), name)


recurrent_rng = np.random.RandomState(1)


def lstm_bidirectional():
    """A bidirectional LSTM with peepholes and sequence lengths, then a MatMul over its Y."""
    lengths = numpy_helper.from_array(np.array([3, 1], np.int32), "lengths")
    return model(
        [helper.make_node("LSTM", ["x", "w", "r", "b", "lengths", "", "", "p"], ["y", "y_h", "y_c"], hidden_size=3,
                          direction="bidirectional", clip=5.0),
         helper.make_node("Reshape", ["y", "flat"], ["f"]),
         helper.make_node("MatMul", ["f", "m"], ["out"])],
        [tensor("x", 3, 2, 4)], [tensor("out", 12, 2), tensor("y_h", 2, 2, 3), tensor("y_c", 2, 2, 3)],
        [recurrent_weight("w", 2, 12, 4), recurrent_weight("r", 2, 12, 3), recurrent_weight("b", 2, 24), lengths,
         recurrent_weight("p", 2, 9), numpy_helper.from_array(np.array([12, 3], np.int64), "flat"),
         recurrent_weight("m", 3, 2)])


def gru_rnn():
    """A reverse GRU (reset before the product) from an initial state, then an RNN with other activations."""
    return model(
        [helper.make_node("GRU", ["x", "w", "r", "", "", "h0"], ["y", ""], hidden_size=3, direction="reverse"),
         helper.make_node("Squeeze", ["y", "axis"], ["s"]),
         helper.make_node("RNN", ["s", "w2", "r2", "b2"], ["", "out"], hidden_size=2,
                          activations=["LeakyRelu"], activation_alpha=[0.1])],
        [tensor("x", 4, 1, 2), tensor("h0", 1, 1, 3)], [tensor("out", 1, 1, 2)],
        [recurrent_weight("w", 1, 9, 2), recurrent_weight("r", 1, 9, 3),
         numpy_helper.from_array(np.array([1], np.int64), "axis"), recurrent_weight("w2", 1, 2, 3),
         recurrent_weight("r2", 1, 2, 2), recurrent_weight("b2", 1, 4)])


def npy(array, version=None):
    out = io.BytesIO()
    np.lib.format.write_array(out, array, version=version)
    return out.getvalue()


def npz(save, **arrays):
    out = io.BytesIO()
    save(out, **arrays)
    return out.getvalue()


def main(root):
    quantize = {"conv_relu_pool_gemm.onnx": conv_relu_pool_gemm(), "residual.onnx": residual(),
                "two_inputs.onnx": two_inputs(), "lstm_bidirectional.onnx": lstm_bidirectional(),
                "gru_rnn.onnx": gru_rnn()}
    corpus = {
        "quantize": quantize,
        "load_model": {**quantize, "shape_ops.onnx": shape_ops(), "if_subgraph.onnx": if_subgraph()},
        "npy": {
            "f4.npy": npy(rng.uniform(-1, 1, (2, 3)).astype(np.float32)),
            "f8_fortran.npy": npy(np.asfortranarray(rng.uniform(-1, 1, (3, 2)))),
            "i8_big_endian.npy": npy(np.arange(6, dtype=">i8").reshape(2, 3)),
            "f2_version2.npy": npy(np.ones((2, 2), np.float16), version=(2, 0)),
            "u1_scalar.npy": npy(np.array(7, np.uint8)),
            "b1_empty.npy": npy(np.zeros((0, 3), bool)),
            "stored.npz": npz(np.savez, x=np.ones((1, 3, 2, 2), np.float32), y=np.arange(4, dtype=np.int32)),
            "deflated.npz": npz(np.savez_compressed, x=rng.uniform(-1, 1, (1, 4)).astype(np.float32)),
        },
    }
    for target, files in corpus.items():
        os.makedirs(os.path.join(root, target), exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(root, target, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main(sys.argv[1])
