"""MatMulNBits' Algorithm HQQ: the codes, scales and float zero points written for a one-MatMul model
equal those of a straightforward numpy implementation of Half-Quadratic Quantization (Badri & Shaji
2023, "Half-Quadratic Quantization of Large Machine Learning Models": the scale fixed by the block's
min and max, the zero point by alternating the lp shrinkage of the error and the closed-form mean),
block by block, keeping the zero point of least mean |error|; the layout is ONNX Runtime's
MatMulNBits (codes low nibble first along K, scales and zero points [N * k_blocks])."""

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import numpy_helper

import onnxptq

K, N = 72, 10  # K not a multiple of the blocks: a last partial block


def one_matmul_model(path, seed=0):
    rng = np.random.default_rng(seed)
    w = (0.05 * rng.standard_normal((K, N))).astype(np.float32)
    w[rng.integers(K, size=N), np.arange(N)] += 0.4  # one outlier a column, as real weights have
    graph = oh.make_graph([oh.make_node("MatMul", ["x", "w"], ["y"], name="matmul")], "one_matmul",
                          [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, K])],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, N])],
                          [numpy_helper.from_array(w, "w")])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), path)
    return w


def shrink(x, beta, p):
    """The proximal operator of |x|^p / beta (the paper's generalized soft-thresholding)."""
    a = np.abs(x)
    with np.errstate(divide="ignore"):
        out = a - np.where(a > 0, a, 1.0) ** (p - 1) / beta
    return np.sign(x) * np.maximum(np.where(a > 0, out, 0.0), 0.0)


def numpy_hqq_block(w, bits=4, lp_norm=0.7, beta=10.0, kappa=1.01, iterations=20):
    """One block in float64: s = (2^b - 1) / (max - min), z = round(-min s); then
    q = clamp(round(w s + z)), r = (q - z) / s, e = shrink(w - r), z = mean(q - (w - e) s), beta *= kappa,
    while mean |w - r| falls (by more than 1e-9 of it)."""
    w = w.astype(np.float64)
    top = 2 ** bits - 1
    s = top / (w.max() - w.min()) if w.max() > w.min() else 1.0
    z = np.round(-w.min() * s)
    best, best_z = np.inf, z
    for _ in range(iterations):
        q = np.clip(np.round(w * s + z), 0, top)
        r = (q - z) / s
        error = np.mean(np.abs(w - r))
        if not error < best * (1 - 1e-9):  # flat in z between code changes: exact ties stop it
            break
        best, best_z = error, z
        z = np.mean(q - (w - shrink(w - r, beta, lp_norm)) * s)
        beta *= kappa
    return np.clip(np.round(w * s + best_z), 0, top), 1.0 / s, best_z


def written_nbits(model):
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    node = next(x for x in model.graph.node if x.op_type == "MatMulNBits")
    attrs = {a.name: oh.get_attribute_value(a) for a in node.attribute}
    return node, attrs, [inits[name] for name in node.input[1:4]]


@pytest.mark.parametrize("block", [16, 32])
def test_hqq_codes_and_zero_points_are_the_papers(tmp_path, block):
    w = one_matmul_model(str(tmp_path / "m.onnx"))
    onnxptq.quantize_static(str(tmp_path / "m.onnx"), str(tmp_path / "q.onnx"), None,
                            extra_options={"UseMatMulNBits": True,
                                           "MatMulNBitsParams": {"Algorithm": "HQQ", "GroupSize": block}})
    node, attrs, (b, scales, zeros) = written_nbits(onnx.load(str(tmp_path / "q.onnx")))
    assert node.domain == "com.microsoft"
    assert (attrs["K"], attrs["N"], attrs["bits"], attrs["block_size"]) == (K, N, 4, block)
    blocks = (K + block - 1) // block
    assert b.dtype == np.uint8 and b.shape == (N, blocks, block // 2)
    assert scales.dtype == np.float32 and scales.shape == (N * blocks,)
    assert zeros.dtype == np.float32 and zeros.shape == (N * blocks,)  # unpacked floats, as ONNX Runtime's HQQ
    codes = np.stack([b & 0x0F, b >> 4], axis=-1).reshape(N, blocks * block)
    moved = 0
    for n in range(N):
        for j in range(blocks):
            rows = slice(j * block, min(K, (j + 1) * block))
            q, scale, zero = numpy_hqq_block(w[rows, n])
            width = q.shape[0]
            assert np.array_equal(codes[n, j * block:j * block + width], q), (n, j)
            # Codes past K: a zero weight's code, the rounded zero point.
            assert np.all(codes[n, j * block + width:(j + 1) * block] == np.clip(np.round(np.float32(zero)), 0, 15))
            assert scales[n * blocks + j] == np.float32(scale)
            assert abs(zeros[n * blocks + j] - np.float32(zero)) <= 1e-6 * max(1.0, abs(zero))
            moved += zero != np.round(zero)
    assert moved > 0  # the solver moved zero points off the integers


def test_hqq_lowers_the_weights_error(tmp_path):
    """Dequantized as the operator defines it ((code - zero point) * scale), HQQ's weights are
    closer to the float ones than the min-max rounding it starts from."""
    block = 16
    w = one_matmul_model(str(tmp_path / "m.onnx"), seed=3)
    onnxptq.quantize_static(str(tmp_path / "m.onnx"), str(tmp_path / "q.onnx"), None,
                            extra_options={"UseMatMulNBits": True,
                                           "MatMulNBitsParams": {"Algorithm": "HQQ", "GroupSize": block}})
    _, _, (b, scales, zeros) = written_nbits(onnx.load(str(tmp_path / "q.onnx")))
    blocks = (K + block - 1) // block
    codes = np.stack([b & 0x0F, b >> 4], axis=-1).reshape(N, blocks * block)[:, :K].astype(np.float64)
    s = np.repeat(scales.reshape(N, blocks), block, axis=1)[:, :K]
    z = np.repeat(zeros.reshape(N, blocks), block, axis=1)[:, :K]
    hqq = ((codes - z) * s).T
    start = np.empty_like(hqq)
    for n in range(N):
        for j in range(blocks):
            rows = slice(j * block, min(K, (j + 1) * block))
            v = w[rows, n].astype(np.float64)
            scale = 15 / (v.max() - v.min())
            zero = np.round(-v.min() * scale)
            start[rows, n] = (np.clip(np.round(v * scale + zero), 0, 15) - zero) / scale
    assert np.abs(w - hqq).sum() < np.abs(w - start).sum()


def test_hqq_with_eight_bits_is_refused_by_name(tmp_path):
    one_matmul_model(str(tmp_path / "m.onnx"))
    with pytest.raises(onnxptq.UnsupportedError, match="Algorithm HQQ with Bits 8") as e:
        onnxptq.quantize_static(str(tmp_path / "m.onnx"), str(tmp_path / "q.onnx"), None,
                                extra_options={"UseMatMulNBits": True,
                                               "MatMulNBitsParams": {"Algorithm": "HQQ", "Bits": 8}})
    assert "\n" not in str(e.value)
