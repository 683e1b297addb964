"""GPTQ (UseGPTQ, GPTQParams, GPTQConfig; MatMulNBits' Algorithm GPTQ): the integers written for a
one-MatMul model equal those of a straightforward numpy implementation of the paper's algorithm
(Frantar et al. 2023, arXiv:2210.17323, Algorithm 1, no blocks and no lazy updates) fed with the
same calibration data, damping and order, on the scales the quantizer wrote; GPTQ's layer output
error is below rounding to nearest; the keys that cannot work are refused by name."""

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import numpy_helper

import onnxptq
from onnxptq import quark
from onnxptq.quark import GPTQConfig, Int8Spec, QConfig, QLayerConfig

K, N, TOKENS = 64, 16, 32


def one_matmul_model(path, seed=0, gemm=False):
    """x [1, TOKENS, K] -> MatMul(w [K, N]) -> y, or x [TOKENS, K] -> Gemm(w^T [N, K], transB 1,
    a bias) -> y. Every column of w has one large positive entry, so its scale leaves room below
    and GPTQ never reaches the integer range's ends."""
    rng = np.random.default_rng(seed)
    w = (0.05 * rng.standard_normal((K, N))).astype(np.float32)
    for c in range(N):
        w[rng.integers(K), c] = 1.0
    if gemm:
        bias = rng.standard_normal(N).astype(np.float32)
        graph = oh.make_graph([oh.make_node("Gemm", ["x", "w", "b"], ["y"], name="gemm", transB=1)], "one_gemm",
                              [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [TOKENS, K])],
                              [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [TOKENS, N])],
                              [numpy_helper.from_array(np.ascontiguousarray(w.T), "w"),
                               numpy_helper.from_array(bias, "b")])
        onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), path)
        return w
    graph = oh.make_graph([oh.make_node("MatMul", ["x", "w"], ["y"], name="matmul")], "one_matmul",
                          [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, TOKENS, K])],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, TOKENS, N])],
                          [numpy_helper.from_array(w, "w")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    onnx.save(model, path)
    return w


def correlated_samples(count=8, seed=1):
    """Inputs whose K columns are a random mixing (the same for every seed) of independent ones,
    one column always 0."""
    mix = np.eye(K) + 0.3 * np.random.default_rng(0).standard_normal((K, K))
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        x = (rng.standard_normal((TOKENS, K)) @ mix).astype(np.float32)
        x[:, 5] = 0
        out.append({"x": x[None]})
    return out


class ListReader:
    def __init__(self, samples):
        self.samples = list(samples)

    def get_next(self):
        return self.samples.pop(0) if self.samples else None


def numpy_gptq(h, w, scale, zero_point, qmin, qmax, perc_damp=0.01, act_order=False):
    """The paper's GPTQ, row by row in float64: dead inputs, act order, damping, the upper
    Cholesky factor of H^-1, each row's error over its diagonal moved onto every later row."""
    h, w = h.copy(), w.astype(np.float64).copy()
    k = h.shape[0]
    dead = np.diag(h) == 0
    h[dead, dead] = 1
    w[dead, :] = 0
    perm = np.argsort(-np.diag(h), kind="stable") if act_order else np.arange(k)
    h, w = h[perm][:, perm], w[perm]
    h[np.arange(k), np.arange(k)] += perc_damp * np.mean(np.diag(h))
    u = np.linalg.cholesky(np.linalg.inv(h)).T  # H^-1 = U^T U
    scale = np.broadcast_to(scale, (w.shape[1],)).astype(np.float64)
    zero_point = np.broadcast_to(zero_point, (w.shape[1],)).astype(np.float64)
    q = np.zeros_like(w)
    for i in range(k):
        code = np.clip(np.rint(w[i] / scale), qmin - zero_point, qmax - zero_point) + zero_point
        q[i] = code
        err = (w[i] - (code - zero_point) * scale) / u[i, i]
        w[i + 1:] -= np.outer(u[i, i + 1:], err)
    out = np.empty_like(q)
    out[perm] = q
    return out


def written(model):
    """The written model's initializers and the parameters of its Q/DQ nodes, by input name."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    params = {}
    for node in model.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            zp = inits[node.input[2]] if len(node.input) > 2 and node.input[2] else np.zeros((), np.int8)
            params[node.input[0]] = (inits[node.input[1]], zp)
    return inits, params


def fake_quantize(x, scale, zero_point, dtype):
    info = np.iinfo(dtype)
    q = np.clip(np.rint(x / np.float32(scale)), info.min - zero_point, info.max - zero_point) + zero_point
    return ((q - zero_point) * np.float32(scale)).astype(np.float32)


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("act_order", [False, True])
@pytest.mark.parametrize("gemm", [False, True])
def test_gptq_integers_are_the_papers(tmp_path, per_channel, act_order, gemm):
    w = one_matmul_model(str(tmp_path / "m.onnx"), gemm=gemm)
    data = correlated_samples()
    if gemm:
        data = [{"x": d["x"][0]} for d in data]
    params = {"BlockSize": 16, "ActOrder": act_order}
    onnxptq.quantize_static(str(tmp_path / "m.onnx"), str(tmp_path / "q.onnx"), ListReader(data),
                            calibrate_method=onnxptq.CalibrationMethod.MinMax, per_channel=per_channel,
                            extra_options={"UseGPTQ": True, "GPTQParams": params})
    model = onnx.load(str(tmp_path / "q.onnx"))
    inits, qparams = written(model)
    weight_name = next(n for n, v in inits.items() if v.dtype == np.int8 and v.shape == ((N, K) if gemm else (K, N)))
    codes = inits[weight_name].astype(np.float64)
    if gemm:
        codes = codes.T
    w_scale, w_zp = qparams[weight_name]
    x_quantized = next(n for n in qparams if n == "x")
    x_scale, x_zp = qparams[x_quantized]
    # The MatMul's input as the quantized model computes it, H = 2/n X^T X over every sample.
    rows = np.concatenate([fake_quantize(d["x"], x_scale, x_zp, x_zp.dtype).reshape(-1, K) for d in data])
    h = 2.0 / rows.shape[0] * rows.astype(np.float64).T @ rows.astype(np.float64)
    expected = numpy_gptq(h, w, w_scale, w_zp, -128, 127, act_order=act_order)
    assert np.array_equal(codes, expected)
    # The dead input's row is the zero point; the output error is below rounding to nearest.
    assert np.all(codes[5] == w_zp)
    nearest = np.clip(np.rint(w / np.broadcast_to(w_scale, (N,))), -128, 127)

    def error(q, x):
        e = w - (q - w_zp) * w_scale
        return float(np.sum((x @ e) ** 2))
    assert error(codes, rows) < error(nearest, rows)
    # Also on samples GPTQ did not see.
    held_out = np.concatenate([d["x"].reshape(-1, K) for d in correlated_samples(seed=2)])
    assert error(codes, held_out) < error(nearest, held_out)


def test_gptq_config_is_the_use_gptq_extra_option(tmp_path):
    one_matmul_model(str(tmp_path / "m.onnx"))
    layer = QLayerConfig(input_tensors=Int8Spec(), weight=Int8Spec())

    def run(config):
        config.extra_options.setdefault("PrintSummary", False)
        return quark.ModelQuantizer(config).quantize_model(str(tmp_path / "m.onnx"), None,
                                                            ListReader(correlated_samples()))
    by_config = run(QConfig(layer, algo_config=[GPTQConfig(act_order=True, block_size=32)]))
    by_keys = run(QConfig(layer, UseGPTQ=True, GPTQParams={"ActOrder": True, "BlockSize": 32}))
    plain = run(QConfig(layer))
    assert by_config.SerializeToString() == by_keys.SerializeToString()
    assert by_config.SerializeToString() != plain.SerializeToString()
    # A quantizer key that disagrees with the weights is refused, naming both.
    with pytest.raises(onnxptq.Error, match="GPTQParams Bits 4 with weight_type QInt8"):
        run(QConfig(layer, algo_config=[GPTQConfig(bits=4)]))


@pytest.mark.parametrize("extra,message", [
    ({"UseGPTQ": True, "GPTQParams": {"GroupSize": 128}}, "GroupSize 128 with UseGPTQ"),
    ({"UseGPTQ": True, "GPTQParams": {"MSE": True}}, "MSE true with UseGPTQ"),
    ({"GPTQParams": {"ActOrder": True}}, "GPTQParams takes effect only with UseGPTQ"),
    ({"UseGPTQ": True, "UseMatMulNBits": True}, "UseGPTQ with UseMatMulNBits"),
    ({"UseGPTQ": True, "GPTQParams": {"Blocksize": 4}}, "GPTQParams has no key Blocksize"),
])
def test_gptq_keys_that_cannot_work_are_refused_by_name(tmp_path, extra, message):
    one_matmul_model(str(tmp_path / "m.onnx"))
    with pytest.raises(onnxptq.Error, match=message) as e:
        onnxptq.quantize_static(str(tmp_path / "m.onnx"), str(tmp_path / "q.onnx"), ListReader(correlated_samples()),
                                extra_options=extra)
    assert "\n" not in str(e.value)


def test_gptq_with_float16_weights_is_refused(tmp_path):
    one_matmul_model(str(tmp_path / "m.onnx"))
    with pytest.raises(onnxptq.UnsupportedError, match="UseGPTQ with weight_type"):
        onnxptq.quantize_static(str(tmp_path / "m.onnx"), str(tmp_path / "q.onnx"), ListReader(correlated_samples()),
                                quant_format=onnxptq.VitisQuantFormat.QDQ,
                                activation_type=onnxptq.VitisQuantType.QFloat16,
                                weight_type=onnxptq.VitisQuantType.QFloat16, extra_options={"UseGPTQ": True})


def nbits_weights(model, k, n, block):
    """The dequantized weight [K, N] of a symmetric 4-bit MatMulNBits model."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    node = next(x for x in model.graph.node if x.op_type == "MatMulNBits")
    b, scales = inits[node.input[1]], inits[node.input[2]]
    blocks = (k + block - 1) // block
    codes = np.stack([b & 0x0F, b >> 4], axis=-1).reshape(n, blocks * block)[:, :k].astype(np.float32)
    s = np.repeat(scales.reshape(n, blocks), block, axis=1)[:, :k]
    return ((codes - 8) * s).T


def test_matmul_nbits_gptq_lowers_the_output_error(tmp_path):
    w = one_matmul_model(str(tmp_path / "m.onnx"))
    data = correlated_samples()

    def quantize(algorithm):
        out = tmp_path / f"{algorithm}.onnx"
        onnxptq.quantize_static(str(tmp_path / "m.onnx"), str(out), ListReader(data),
                                extra_options={"UseMatMulNBits": True,
                                               "MatMulNBitsParams": {"Algorithm": algorithm, "GroupSize": 16}})
        return nbits_weights(onnx.load(str(out)), K, N, 16)
    rows = np.concatenate([d["x"].reshape(-1, K) for d in data])
    default, gptq = quantize("DEFAULT"), quantize("GPTQ")
    assert not np.array_equal(default, gptq)
    errors = [float(np.sum((rows @ (w - q)) ** 2)) for q in (default, gptq)]
    assert errors[1] < 0.9 * errors[0]
