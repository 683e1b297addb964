"""Quark's QConfig API in onnxptq.quark: the *_QCONFIG presets give the models of the legacy presets
of the same name (with the differences Quark's own lowering makes), per-layer and per-type configs
give the models of the TensorQuantOverrides they stand for, algorithm configs run their
algorithm, and what is not built is refused by name."""

import numpy as np
import onnx
import pytest

import onnxptq
from onnxptq import quark
from onnxptq.quark import (A8W8_QCONFIG, A16W8_QCONFIG, BF16_QCONFIG, BFP16_QCONFIG, VINT8_QCONFIG,
                           XINT8_ADAROUND_QCONFIG, XINT8_QCONFIG, AdaQuantConfig, AdaRoundConfig,
                           BiasCorrectionConfig, CLEConfig,
                           CalibMethod, GPTQConfig, Int8Spec, Int16Spec, MX6Spec, MX9Spec, QConfig, QLayerConfig,
                           QuantGranularity, QuarotConfig,
                           ScaleType, SmoothQuantConfig, XInt8Spec)
from conftest import real_model, run_cli


class ListReader:
    def __init__(self, samples):
        self.samples = list(samples)

    def get_next(self):
        return self.samples.pop(0) if self.samples else None


def samples(name, shape, count=3, seed=11):
    rng = np.random.default_rng(seed)
    return [{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(count)]


def run(config, model, data, **kwargs):
    """The quantized model (ModelProto) of `config`, a QConfig or a legacy QuantizationConfig."""
    if isinstance(config, quark.QuantizationConfig):
        config.print_summary = False
        config = quark.Config(global_quant_config=config)
    else:
        config.extra_options.setdefault("PrintSummary", False)
    return quark.ModelQuantizer(config).quantize_model(model, None, ListReader(data), **kwargs)


def legacy(name, **changes):
    config = quark.get_default_config(name)
    config.include_cle = False  # a QConfig runs CLE only with a CLEConfig in algo_config
    for key, value in changes.items():
        if key == "extra_options":  # added to the preset's
            config.extra_options.update(value)
        else:
            setattr(config, key, value)
    return config


@pytest.fixture(autouse=True)
def keep_presets():
    """The presets are module objects a test may add PrintSummary to: put them back."""
    saved = {p: dict(p.extra_options) for p in (A8W8_QCONFIG, A16W8_QCONFIG, BF16_QCONFIG, XINT8_QCONFIG,
                                                 XINT8_ADAROUND_QCONFIG)}
    yield
    for p, extra in saved.items():
        p.extra_options = extra


def test_xint8_qconfig_is_legacy_xint8_with_int8_activations():
    # Quark's XINT8_QCONFIG (XInt8Spec both) quantizes activations as int8, legacy XINT8 as uint8.
    model = real_model("resnet18")
    data = samples("input", (1, 3, 224, 224))
    new = run(XINT8_QCONFIG, model, data)
    assert new.SerializeToString() == run(legacy("XINT8", activation_type=quark.QuantType.QInt8), model,
                                          data).SerializeToString()
    assert new.SerializeToString() != run(legacy("XINT8"), model, data).SerializeToString()


@pytest.mark.parametrize("qconfig,name,changes", [
    # Quark's Int8Spec and Int16Spec calibrate by Percentile; two 8-bit types make the QDQ format.
    (A8W8_QCONFIG, "A8W8", {"calibrate_method": quark.CalibrationMethod.Percentile,
                            "quant_format": quark.QuantFormat.QDQ}),
    (A16W8_QCONFIG, "A16W8", {"calibrate_method": quark.CalibrationMethod.Percentile}),
    # BFloat16Spec is symmetric; legacy BF16 also quantizes every op type.
    (BF16_QCONFIG, "BF16", {"extra_options": {"ActivationSymmetric": True, "WeightSymmetric": True}}),
    # BFP16Spec brings the BFP16 preset's attribute set.
    (BFP16_QCONFIG, "BFP16", {"extra_options": {"ActivationSymmetric": True, "WeightSymmetric": True,
                                                "BFPAttributes": {"bfp_method": "to_bfp", "axis": 1, "bit_width": 16,
                                                                  "block_size": 8, "rounding_mode": 2}}}),
])
def test_qconfig_presets_are_the_legacy_presets_models(tiny_model, qconfig, name, changes):
    data = samples("x", (1, 3, 8, 8))
    old = legacy(name, **changes)
    old.extra_options.pop("QuantizeAllOpTypes", None)  # legacy BF16 only
    assert run(qconfig, tiny_model, data).SerializeToString() == run(old, tiny_model, data).SerializeToString()


def test_adaround_qconfig_is_the_cli_with_quarks_adaround_defaults(tiny_model, tmp_path):
    # AdaRoundConfig's defaults (Quark's algorithm.py): batch 1, every sample, no early stop.
    data = samples("x", (1, 3, 8, 8))
    ft = {"OptimAlgorithm": "adaround", "FixedSeed": 1705472343, "BatchSize": 1, "NumIterations": 1000,
          "LearningRate": 0.1, "EarlyStop": False}
    old = legacy("XINT8_ADAROUND", activation_type=quark.QuantType.QInt8)
    old.extra_options["FastFinetune"] = ft
    new = run(XINT8_ADAROUND_QCONFIG, tiny_model, data)
    assert new.SerializeToString() == run(old, tiny_model, data).SerializeToString()
    assert new.SerializeToString() != run(XINT8_QCONFIG, tiny_model, data).SerializeToString()


def test_cle_config_is_include_cle(tiny_model):
    data = samples("x", (1, 3, 8, 8))
    spec = QLayerConfig(input_tensors=Int8Spec(), weight=Int8Spec())
    with_cle = run(QConfig(spec, algo_config=[CLEConfig(cle_steps=2)]), tiny_model, data)
    old = legacy("A8W8", calibrate_method=quark.CalibrationMethod.Percentile, quant_format=quark.QuantFormat.QDQ,
                 include_cle=True,
                 extra_options={"CLESteps": 2, "CLETotalLayerDiffThreshold": 1.9e-7})  # CLEConfig's default
    assert with_cle.SerializeToString() == run(old, tiny_model, data).SerializeToString()


def test_layer_configs_are_their_tensor_overrides(tiny_model):
    data = samples("x", (1, 3, 8, 8))
    base = QLayerConfig(input_tensors=Int8Spec(), weight=Int8Spec())
    int16 = QLayerConfig(input_tensors=Int16Spec(), weight=Int16Spec(symmetric=False))
    by_type = run(QConfig(base, layer_type_config={int16: ["Conv"], None: ["Gemm"]}), tiny_model, data)
    by_name = run(QConfig(base, specific_layer_config={int16: ["^con.*"]}, exclude=["gemm"]), tiny_model, data)
    types = [{"quant_type": "QInt16", "symmetric": True}], [{"quant_type": "QInt16", "symmetric": False}]
    old = legacy("A8W8", calibrate_method=quark.CalibrationMethod.Percentile, quant_format=quark.QuantFormat.QDQ,
                 nodes_to_exclude=["gemm"], extra_options={"TensorQuantOverrides": {"x": types[0], "w": types[1]}})
    expected = run(old, tiny_model, data).SerializeToString()
    assert by_type.SerializeToString() == expected
    assert by_name.SerializeToString() == expected
    assert run(QConfig(base), tiny_model, data).SerializeToString() != expected


def test_quarot_config_rotates_what_its_json_names(tmp_path):
    # x -> MatMul a (64 -> 64, a few columns 30 times the rest: outlier channels) -> h -> MatMul b:
    # QuarotConfig rotates h (a's weight times R, b's R^T times its weight), the same function,
    # whose int8 quantization loses less.
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(4)
    w1 = rng.standard_normal((64, 64)).astype(np.float32) * 0.1
    w1[:, [5, 40]] *= 30
    w2 = rng.standard_normal((64, 10)).astype(np.float32) * 0.1
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"], name="a"), helper.make_node("MatMul", ["h", "w2"], ["y"], name="b")],
        "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 10])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    (tmp_path / "r1.json").write_text('{"R1_pairs": [{"prev_nodes": ["a"], "next_nodes": ["b"]}]}')
    data = samples("x", (4, 64), count=8)
    base = QLayerConfig(input_tensors=Int8Spec(), weight=Int8Spec())
    plain = run(QConfig(base), model, data)
    rotated = run(QConfig(base, algo_config=[QuarotConfig(r_matrix_dim=64, r_config_path=str(tmp_path / "r1.json"))]),
                  model, data)
    x = samples("x", (4, 64), count=1, seed=5)[0]["x"]
    np.save(tmp_path / "x.npy", x)
    want = x.astype(np.float64) @ w1 @ w2
    errors = {}
    for name, m in (("plain", plain), ("rotated", rotated)):
        onnx.save(m, str(tmp_path / f"{name}.onnx"))
        run_cli("run", tmp_path / f"{name}.onnx", "--inputs", f"x={tmp_path / 'x.npy'}", "--outputs", tmp_path / name)
        y = np.load(tmp_path / name / "y.npy")
        errors[name] = float(np.abs(y - want).max() / np.abs(want).max())
    assert errors["rotated"] < 0.5 * errors["plain"], errors


@pytest.mark.parametrize("make,message", [
    (lambda: QConfig(QLayerConfig(input_tensors=Int8Spec(), weight=Int8Spec(
        quant_granularity=QuantGranularity.Group))), "QuantGranularity.Group: group-wise quantization"),
])
def test_unbuilt_parts_are_refused_by_name(tiny_model, make, message):
    with pytest.raises(onnxptq.UnsupportedError, match=message) as e:
        quark.ModelQuantizer(make()).quantize_model(tiny_model, None, ListReader(samples("x", (1, 3, 8, 8))))
    assert "\n" not in str(e.value)


def test_bias_correction_config_is_the_bias_correction_extra_option(tiny_model):
    data = samples("x", (1, 3, 8, 8), count=8)
    layer = QLayerConfig(input_tensors=Int8Spec(), weight=Int8Spec())
    corrected = run(QConfig(layer, algo_config=[BiasCorrectionConfig()]), tiny_model, data)
    plain = run(QConfig(layer), tiny_model, data)
    by_key = run(QConfig(layer, BiasCorrection=True), tiny_model, data)
    assert corrected.SerializeToString() == by_key.SerializeToString()
    biases = [{i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}["b_quantized"]
              for m in (plain, corrected)]
    assert not np.array_equal(biases[0], biases[1])  # the Conv's int32 bias moved


def test_smooth_quant_config_is_include_sq_with_smooth_alpha(tmp_path):
    # x[1,4,8] -> MatMul(w): x's channel 2 an outlier; SmoothQuant puts a Mul before the MatMul.
    rng = np.random.default_rng(3)
    w = onnx.numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w")
    graph = onnx.helper.make_graph([onnx.helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")], "mm",
                                   [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 8])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, 8])], [w])
    path = str(tmp_path / "mm.onnx")
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)]), path)
    data = samples("x", (1, 4, 8), count=4)
    for d in data:
        d["x"][..., 2] *= 50
    layer = QLayerConfig(input_tensors=Int8Spec(), weight=Int8Spec())
    smoothed = run(QConfig(layer, algo_config=[SmoothQuantConfig(alpha=0.6)]), path, data)
    assert any(n.op_type == "Mul" and "SmoothQuant" in n.name for n in smoothed.graph.node)
    plain = run(QConfig(layer), path, data)
    assert not any(n.op_type == "Mul" for n in plain.graph.node)
    other = run(QConfig(layer, algo_config=[SmoothQuantConfig(alpha=0.3)]), path, data)
    assert other.SerializeToString() != smoothed.SerializeToString()  # the alpha reaches the core
    with pytest.raises(onnxptq.Error, match="SmoothAlpha.*take effect only with include_sq"):
        run(QConfig(layer, SmoothAlpha=0.6), path, data)


def test_vint8_qconfig_is_legacy_vint8_without_cle(tiny_model):
    # Both calibrate on the seeds' one random sample (UseRandomData); a QConfig runs CLE only with a CLEConfig.
    legacy = quark.get_default_config("VINT8")
    legacy.include_cle = False
    models = [quark.ModelQuantizer(config).quantize_model(tiny_model, None, None).SerializeToString()
              for config in (VINT8_QCONFIG, quark.Config(global_quant_config=legacy))]
    assert models[0] == models[1]


def test_int16_scale_type_is_int16scale(tiny_model):
    data = samples("x", (1, 3, 8, 8))
    spec = dict(scale_type=ScaleType.Int16, calibration_method=CalibMethod.MinMax)
    got = quark.ModelQuantizer(QConfig(QLayerConfig(input_tensors=Int8Spec(**spec), weight=Int8Spec(**spec))))
    legacy = quark.get_default_config("S8S8_AAWS")
    legacy.include_cle = False
    legacy.calibrate_method = onnxptq.CalibrationMethod.MinMax
    legacy.extra_options = {"Int16Scale": True, "ActivationSymmetric": True, "WeightSymmetric": True}
    expected = quark.ModelQuantizer(quark.Config(global_quant_config=legacy))
    assert (got.quantize_model(tiny_model, None, ListReader(data)).SerializeToString() ==
            expected.quantize_model(tiny_model, None, ListReader(data)).SerializeToString())
    with pytest.raises(onnxptq.Error, match="ScaleType.Int16 on input_tensors or weight alone"):
        quark.ModelQuantizer(QConfig(QLayerConfig(input_tensors=Int8Spec(**spec), weight=Int8Spec()))).quantize_model(
            tiny_model, None, ListReader(data))


@pytest.mark.parametrize("make,message", [
    (lambda: QConfig(QLayerConfig(input_tensors=Int8Spec(), weight=Int8Spec()),
                     algo_config=[AdaRoundConfig(), AdaQuantConfig()]),
     "AdaRoundConfig and AdaQuantConfig are both given"),
    (lambda: QConfig(QLayerConfig(weight=Int8Spec())), "global_config: input_tensors is required"),
    (lambda: QConfig(QLayerConfig(input_tensors=Int8Spec(), weight=Int8Spec(), bias=Int8Spec())),
     "global_config bias: Quark's lowering reads only input_tensors and weight"),
    (lambda: QConfig(QLayerConfig(input_tensors=Int8Spec(), weight=Int8Spec()),
                     specific_layer_config={QLayerConfig(input_tensors=Int16Spec()): ["nonesuch"]}),
     "specific_layer_config: no node named 'nonesuch' in the model"),
    (lambda: QConfig(QLayerConfig(input_tensors=MX6Spec(), weight=MX9Spec())),
     "global_config: MX6 and MX9 both need BFPAttributes, with different values"),
])
def test_contradicting_or_wrong_configs_are_one_line_errors(tiny_model, make, message):
    with pytest.raises(onnxptq.Error, match=message) as e:
        quark.ModelQuantizer(make()).quantize_model(tiny_model, None, ListReader(samples("x", (1, 3, 8, 8))))
    assert "\n" not in str(e.value)


def test_algorithms_argument_maps_onto_the_legacy_config_and_not_a_qconfig(tiny_model):
    data = samples("x", (1, 3, 8, 8))
    old = legacy("A8W8")
    by_argument = quark.ModelQuantizer(quark.Config(global_quant_config=old)).quantize_model(
        tiny_model, None, ListReader(data), algorithms=[CLEConfig()])
    old.include_cle = True
    assert by_argument.SerializeToString() == run(old, tiny_model, data).SerializeToString()
    with pytest.raises(onnxptq.Error, match="algorithms: with a QConfig the algorithms are QConfig"):
        quark.ModelQuantizer(XINT8_QCONFIG).quantize_model(tiny_model, None, ListReader(data),
                                                            algorithms=[CLEConfig()])


def test_quarks_import_names_are_offered():
    for name in ("QConfig", "QLayerConfig", "QTensorConfig", "Int8Spec", "UInt8Spec", "XInt8Spec", "Int16Spec",
                 "UInt16Spec", "Int32Spec", "UInt32Spec", "BFloat16Spec", "BFP16Spec", "CalibMethod", "ScaleType",
                 "QuantGranularity", "CLEConfig", "AdaRoundConfig", "AdaQuantConfig", "AutoMixprecisionConfig",
                 "SmoothQuantConfig", "GPTQConfig", "QuarotConfig", "BiasCorrectionConfig", "XINT8_QCONFIG",
                 "A8W8_QCONFIG", "A16W8_ADAQUANT_QCONFIG", "BF16_QCONFIG", "BFP16_QCONFIG", "Int8", "BFloat16"):
        assert name in quark.__all__ and hasattr(quark, name), name
    assert XInt8Spec().scale_type == ScaleType.PowerOf2 and isinstance(XInt8Spec(), Int8Spec)


def test_minmse_float32_weight_spec_is_weight_calibrate_method_minmse(tiny_model):
    # Quark's _map_weight_calibration_method: a Float32 weight spec calibrated by MinMSE becomes
    # WeightCalibrateMethod ExtendedCalibrationMethod.MinMSE, any other CalibrationMethod.MinMax.
    data = samples("x", (1, 3, 8, 8))
    extra = {"PrintSummary": False}
    for mode in (None, "HistCenter", "All"):
        mode_option = {} if mode is None else {"MinMSEModeFloatScale": mode}
        by_spec = run(QConfig(QLayerConfig(input_tensors=Int8Spec(),
                                           weight=Int8Spec(calibration_method=CalibMethod.MinMSE)),
                              extra_options={**extra, **mode_option}), tiny_model, data)
        by_key = run(QConfig(QLayerConfig(input_tensors=Int8Spec(), weight=Int8Spec()),
                             extra_options={**extra, **mode_option,
                                            "WeightCalibrateMethod": quark.ExtendedCalibrationMethod.MinMSE}),
                     tiny_model, data)
        assert by_spec.SerializeToString() == by_key.SerializeToString()
    min_max = run(QConfig(QLayerConfig(input_tensors=Int8Spec(), weight=Int8Spec()), extra_options=dict(extra)),
                  tiny_model, data)
    explicit = run(QConfig(QLayerConfig(input_tensors=Int8Spec(), weight=Int8Spec()),
                           extra_options={**extra, "WeightCalibrateMethod": onnxptq.CalibrationMethod.MinMax}),
                   tiny_model, data)
    assert min_max.SerializeToString() == explicit.SerializeToString()
    # The weights' scales differ: the percentile ranges stop short of a weight's extremes.
    scales = {}
    for name, model in (("MinMSE", by_spec), ("MinMax", min_max)):
        scales[name] = {t.name: onnx.numpy_helper.to_array(t).tolist() for t in model.graph.initializer
                        if t.name.split("_")[0] in ("w", "fc") and t.name.endswith("scale")}
    assert scales["MinMSE"].keys() == scales["MinMax"].keys() and scales["MinMSE"]
    assert scales["MinMSE"] != scales["MinMax"]


def test_minmse_weight_with_a_power_of_two_method_is_refused(tiny_model):
    # MinMSE activations lower to PowerOfTwoMethod.MinMSE, whose weights search power-of-two positions.
    config = QConfig(QLayerConfig(input_tensors=Int8Spec(calibration_method=CalibMethod.MinMSE),
                                  weight=Int8Spec(calibration_method=CalibMethod.MinMSE)),
                     extra_options={"PrintSummary": False})
    with pytest.warns(UserWarning), pytest.raises(onnxptq.Error, match="WeightCalibrateMethod MinMSE with "
                                                  "calibrate_method MinMSE: power-of-two methods") as e:
        run(config, tiny_model, samples("x", (1, 3, 8, 8)))
    assert "\n" not in str(e.value)
