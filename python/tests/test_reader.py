"""Calibration data readers written in Python: what works (any object with get_next(), with or
without rewind(), float64 and non-contiguous arrays converted with a warning) gives the bytes of
`onnxptq quantize --calib-data` on the same samples; what cannot work is a clear exception."""

import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import onnxptq
import onnxptq as vai_q_onnx
from conftest import run_cli, write_samples
from test_vai import FolderReader

# MinMSE with two workers reads the data twice (extrema, then the candidates' errors).
OPTIONS = dict(calibrate_method=vai_q_onnx.PowerOfTwoMethod.MinMSE, extra_options={"CalibWorkerNum": 2},
               print_summary=False)


class ListReader:
    """No base class and no rewind(): read once, then replayed by onnxptq."""

    def __init__(self, samples, convert=lambda x: x):
        self.it = iter([{"x": convert(s)} for s in samples])

    def get_next(self):
        return next(self.it, None)


class SubclassReader(vai_q_onnx.CalibrationDataReader):
    def __init__(self, samples):
        self.samples = samples
        self.i = 0

    def get_next(self):
        if self.i == len(self.samples):
            return None
        self.i += 1
        return {"x": self.samples[self.i - 1]}


@pytest.fixture
def calib(tiny_model, tmp_path):
    """Four samples on disk and the CLI's model for them (the data is read twice)."""
    samples = write_samples(tmp_path / "calib", (1, 3, 8, 8), 4, seed=3)
    run_cli("quantize", tiny_model, "-o", tmp_path / "cli.onnx", "--calib-data", tmp_path / "calib",
            "--calibrate-method", "MinMSE", "--workers", "2", "--quiet")
    return samples, (tmp_path / "cli.onnx").read_bytes()


def quantize(model, out, reader):
    vai_q_onnx.quantize_static(model, str(out), reader, **OPTIONS)
    return out.read_bytes()


def test_readers_with_and_without_rewind_give_the_cli_bytes(tiny_model, tmp_path, calib):
    samples, expected = calib
    folder = FolderReader(tmp_path / "calib", "x")
    assert quantize(tiny_model, tmp_path / "a.onnx", folder) == expected
    assert folder.rewinds >= 2  # the type probe and the second pass started over
    assert quantize(tiny_model, tmp_path / "b.onnx", ListReader(samples)) == expected
    assert quantize(tiny_model, tmp_path / "c.onnx", SubclassReader(samples)) == expected


def test_float64_arrays_are_converted_with_a_warning(tiny_model, tmp_path, calib):
    samples, expected = calib
    with pytest.warns(UserWarning, match="float64 array converted to float32"):
        got = quantize(tiny_model, tmp_path / "q.onnx", ListReader(samples, lambda x: x.astype(np.float64)))
    assert got == expected


def test_non_contiguous_arrays_are_copied_with_a_warning(tiny_model, tmp_path, calib):
    samples, expected = calib

    def strided(x):
        view = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
        assert not view.flags.c_contiguous and np.array_equal(view, x)
        return view
    with pytest.warns(UserWarning, match="not C-contiguous"):
        got = quantize(tiny_model, tmp_path / "q.onnx", ListReader(samples, strided))
    assert got == expected


def test_a_reader_that_raises_raises_its_own_exception(tiny_model, tmp_path):
    class Broken:
        def get_next(self):
            raise KeyError("the dataset is gone")
    with pytest.raises(KeyError, match="the dataset is gone"):
        quantize(tiny_model, tmp_path / "q.onnx", Broken())
    assert not (tmp_path / "q.onnx").exists()


def test_a_reader_that_raises_later_raises_its_own_exception(tiny_model, tmp_path, calib):
    samples, _ = calib

    class FailsAtThird(SubclassReader):
        def get_next(self):
            if self.i == 2:
                raise RuntimeError("corrupt sample 2")
            return super().get_next()
    with pytest.raises(RuntimeError, match="corrupt sample 2"):
        quantize(tiny_model, tmp_path / "q.onnx", FailsAtThird(samples))


def test_wrong_input_name_is_an_error_naming_both(tiny_model, tmp_path):
    reader = ListReader([np.zeros((1, 3, 8, 8), np.float32)])
    reader.it = iter([{"image": np.zeros((1, 3, 8, 8), np.float32)}])
    with pytest.raises(onnxptq.Error, match=r"'image' is not an input of the model \(model inputs: x\)"):
        quantize(tiny_model, tmp_path / "q.onnx", reader)


def test_wrong_dtype_is_an_error(tiny_model, tmp_path):
    with pytest.raises(onnxptq.Error, match="array of int32, the model wants float"):
        quantize(tiny_model, tmp_path / "q.onnx", ListReader([np.zeros((1, 3, 8, 8), np.int32)]))


def test_a_reader_with_no_sample_is_an_error(tiny_model, tmp_path):
    with pytest.raises(onnxptq.Error, match="no usable sample in Python reader ListReader \(it gave none\)"):
        quantize(tiny_model, tmp_path / "q.onnx", ListReader([]))


def test_a_reader_returning_no_dict_is_an_error(tiny_model, tmp_path):
    class Lists:
        def get_next(self):
            return [np.zeros((1, 3, 8, 8), np.float32)]
    with pytest.raises(onnxptq.Error, match="returned a list; expected a dict"):
        quantize(tiny_model, tmp_path / "q.onnx", Lists())


def test_an_object_without_get_next_is_an_error(tiny_model, tmp_path):
    with pytest.raises(onnxptq.Error, match="has no get_next"):
        quantize(tiny_model, tmp_path / "q.onnx", [{"x": np.zeros((1, 3, 8, 8), np.float32)}])


def test_a_refilled_array_without_rewind_is_an_error(tiny_model, tmp_path):
    class Refills:
        def __init__(self):
            self.buffer = np.zeros((1, 3, 8, 8), np.float32)
            self.n = 0

        def get_next(self):
            if self.n == 3:
                return None
            self.n += 1
            self.buffer[:] = self.n
            return {"x": self.buffer}
    with pytest.raises(onnxptq.Error, match="the same array as sample 0"):
        quantize(tiny_model, tmp_path / "q.onnx", Refills())


ENDLESS = '''
import sys
import numpy as np
import onnxptq as vai_q_onnx

class Endless:
    def __init__(self):
        self.n = 0
    def get_next(self):
        self.n += 1
        if self.n == 3:
            print("calibrating", flush=True)
        return {"x": np.full((1, 3, 8, 8), self.n % 7, np.float32)}

vai_q_onnx.quantize_static(sys.argv[1], sys.argv[2], Endless(),
                           calibrate_method=vai_q_onnx.CalibrationMethod.MinMax)
'''


def test_ctrl_c_interrupts_calibration(tiny_model, tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", ENDLESS, tiny_model, str(tmp_path / "q.onnx")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "calibrating"
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("Ctrl-C did not stop calibration")
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in stderr
    assert not (tmp_path / "q.onnx").exists()


def test_other_python_threads_run_while_the_core_computes(tmp_path):
    import threading
    from conftest import real_model
    # A thread counts while the main thread is in the core, i.e. between one get_next() returning
    # and the next being called. Were the GIL held there, it could not count at all.
    counter = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1
            time.sleep(0)

    class Marking:
        def __init__(self):
            self.samples = [np.random.default_rng(i).standard_normal((1, 3, 224, 224)).astype(np.float32)
                            for i in range(3)]
            self.i = 0
            self.gaps = []
            self.left = None

        def get_next(self):
            if self.left is not None:
                self.gaps.append(counter[0] - self.left)
            if self.i == len(self.samples):
                self.left = None
                return None
            self.i += 1
            sample = {"input": self.samples[self.i - 1]}
            self.left = counter[0]
            return sample

        def rewind(self):
            self.i = 0
            self.left = None

    thread = threading.Thread(target=count)
    thread.start()
    try:
        reader = Marking()
        vai_q_onnx.quantize_static(real_model("mobilenet_v2"), str(tmp_path / "q.onnx"), reader,
                                   calibrate_method=vai_q_onnx.CalibrationMethod.MinMax, print_summary=False)
    finally:
        stop.set()
        thread.join()
    assert max(reader.gaps) > 50, reader.gaps


def test_arrays_cross_without_copies_and_are_released(tiny_model, tmp_path):
    import sys
    # The core holds the reader's own array object (one reference more than a sample not yet
    # read), not a copy; when quantize_static returns, nothing holds it any more.

    class Counting:
        def __init__(self):
            self.arrays = [np.full((1, 3, 8, 8), i, np.float32) for i in range(3)]
            self.i = 0
            self.held = None

        def get_next(self):
            if self.i == 1 and self.held is None:
                self.held = (sys.getrefcount(self.arrays[0]), sys.getrefcount(self.arrays[1]))
            if self.i == len(self.arrays):
                return None
            self.i += 1
            return {"x": self.arrays[self.i - 1]}
    reader = Counting()
    quantize(tiny_model, tmp_path / "q.onnx", reader)
    read, unread = reader.held
    assert read == unread + 1
    assert sys.getrefcount(reader.arrays[0]) == sys.getrefcount(reader.arrays[2])
