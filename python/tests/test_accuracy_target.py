"""quantize_static(accuracy_target=...): the accuracy-target search from Python, with the user's
evaluate_function."""

import onnx
import pytest

import onnxptq
from conftest import write_samples


class Reader:
    def __init__(self, samples):
        self.samples = samples
        self.index = 0

    def get_next(self):
        if self.index >= len(self.samples):
            return None
        self.index += 1
        return {"x": self.samples[self.index - 1]}

    def rewind(self):
        self.index = 0


def quantize(tiny_model, tmp_path, target):
    samples = write_samples(tmp_path / "calib", (1, 3, 8, 8), 6)
    return onnxptq.quantize_static(tiny_model, str(tmp_path / "q.onnx"), Reader(samples),
                                   calibrate_method=onnxptq.CalibrationMethod.MinMax, print_summary=False,
                                   accuracy_target=target)


def test_evaluate_function_scores_every_trial(tiny_model, tmp_path):
    seen = []

    def evaluate(path):
        model = onnx.load(path)  # a whole model file, loadable
        seen.append(path)
        quantized = any(n.op_type == "QuantizeLinear" for n in model.graph.node)
        return 0.9 if quantized else 1.0

    report = quantize(tiny_model, tmp_path, {"evaluate_function": evaluate, "max_loss": 0.2,
                                             "stop_at_first_pass": True})
    search = report["accuracy_target"]
    assert search["met"] and search["float_metric"] == 1.0 and search["required"] == pytest.approx(0.8)
    assert [t["index"] for t in search["trials"]] == [1]
    assert seen[0] == tiny_model and len(seen) == 2  # the float model, then one trial


def test_a_missed_target_writes_the_best_model_and_says_so(tiny_model, tmp_path):
    def evaluate(path):
        return 1.0 if path == tiny_model else 0.0

    with pytest.warns(UserWarning, match="accuracy target missed"):
        report = quantize(tiny_model, tmp_path, {"evaluate_function": evaluate, "max_relative_loss": 0.01,
                                                 "max_trials": 2})
    assert not report["accuracy_target"]["met"]
    assert len(report["accuracy_target"]["trials"]) == 2
    assert (tmp_path / "q.onnx").exists()


def test_errors_name_the_trial_and_the_key(tiny_model, tmp_path):
    def broken(path):
        if path != tiny_model:
            raise RuntimeError("scorer exploded")
        return 1.0

    with pytest.raises(onnxptq.Error, match="trial 1: evaluate_function raised RuntimeError: scorer exploded"):
        quantize(tiny_model, tmp_path, {"evaluate_function": broken, "max_loss": 0.1})
    with pytest.raises(onnxptq.Error, match="accuracy_target: unknown key 'max_los'"):
        quantize(tiny_model, tmp_path, {"max_los": 0.1})
    assert not (tmp_path / "q.onnx").exists()


def test_sensitivity_ranks_every_quantized_node(tiny_model, tmp_path):
    samples = write_samples(tmp_path / "calib", (1, 3, 8, 8), 4)
    html = tmp_path / "s.html"
    report = onnxptq.sensitivity(tiny_model, Reader(samples), "A8W8", samples=2, html_path=html)
    assert report["samples"] == 2
    nodes = report["nodes"]
    assert {"conv", "gemm"} <= {n["node"] for n in nodes}
    alone = [n["alone"]["sqnr_db"] if n["alone"]["sqnr_db"] is not None else float("inf") for n in nodes]
    assert alone == sorted(alone)  # worst first
    assert all(n["weight"] is None for n in nodes)  # parts with split=True only
    assert "<svg" in html.read_text()
    calls = []
    split = onnxptq.sensitivity(tiny_model, Reader(samples), "A8W8", samples=2, split=True,
                                progress_callback=lambda *a: calls.append(a))
    measured = [c for c in calls if c[0] == "sensitivity"]
    assert measured[-1][1:] == (len(split["nodes"]), len(split["nodes"]), "nodes")
    assert [c[1] for c in calls if c[0] == "calibration data"][-4:] == [1, 2, 3, 4]
    conv = next(n for n in split["nodes"] if n["node"] == "conv")
    assert conv["weight"]["sqnr_db"] is not None and conv["activations"]["sqnr_db"] is not None
    by_dict = onnxptq.sensitivity(tiny_model, Reader(samples), {"calibrate_method": "MinMax"},
                                  extra_options={"ActivationSymmetric": True}, samples=1)
    assert by_dict["samples"] == 1
    with pytest.raises(onnxptq.Error, match="unknown config key"):
        onnxptq.sensitivity(tiny_model, Reader(samples), {"calibrate_methd": "MinMax"})
