"""Quark's calibration_data_path: a folder of .npy files read as quark.onnx's PathDataReader reads
it. One .npy file is one sample of an input, used as it is (no preprocessing): the files in the
folder itself are the samples of every input (the layout of a single-input model), otherwise
the sub-folder named after each input holds that input's files. Samples are matched across
inputs by file name and taken in file-name order (calib_000001.npy, calib_000002.npy, ...).

As PathDataReader does, an array with one dimension fewer than the input gets the batch
dimension in front, a flat array of exactly the input's size is given the input's (fixed)
shape, and the array is converted to the input's element type; unlike it, a conversion that
changes the kind of number (float to integer, say) and a file missing from one input's folder
are errors, not silent changes.
"""

import os

import numpy as np

from . import Error

# ONNX's element type numbers (onnx.TensorProto) of the types a model input may have here.
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
           9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


def _npy_files(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith(".npy") and os.path.isfile(os.path.join(folder, f)))


class PathDataReader:
    """The samples of `folder` for the model inputs `inputs`, [(name, ONNX type number, dims)]
    with -1 for a dimension that is not fixed. Each sample is read from disk when it is asked
    for; rewind() starts over."""

    def __init__(self, folder, inputs):
        self.folder = os.fspath(folder)
        what = f"calibration_data_path '{self.folder}'"
        if not os.path.isdir(self.folder):
            raise Error(f"{what}: no such folder")
        self.inputs = [(name, _DTYPES.get(dtype), list(dims)) for name, dtype, dims in inputs]
        top = _npy_files(self.folder)
        self.folders = {}
        for name, dtype, _ in self.inputs:
            if dtype is None:
                raise Error(f"{what}: model input '{name}' has an element type .npy samples cannot feed")
            sub = os.path.join(self.folder, name)
            if top:
                self.folders[name] = self.folder
            elif os.path.isdir(sub) and _npy_files(sub):
                self.folders[name] = sub
            else:
                raise Error(f"{what}: no .npy files in it or in its sub-folder '{name}' (one per model input)")
        # Samples are matched by file name: every input needs the same names.
        self.files = _npy_files(self.folders[self.inputs[0][0]])
        for name, _, _ in self.inputs[1:]:
            files = _npy_files(self.folders[name])
            if files != self.files:
                first = self.inputs[0][0]
                missing = sorted(set(self.files) ^ set(files))[0]
                has, lacks = (first, name) if missing in self.files else (name, first)
                raise Error(f"{what}: '{missing}' is in the folder of input '{has}' but not in that of input '{lacks}'")
        self.position = 0

    def __len__(self):
        return len(self.files)

    def rewind(self):
        self.position = 0

    def get_next(self):
        if self.position >= len(self.files):
            return None
        file = self.files[self.position]
        self.position += 1
        return {name: self._array(name, dtype, dims, os.path.join(self.folders[name], file))
                for name, dtype, dims in self.inputs}

    @staticmethod
    def _array(name, dtype, dims, path):
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise Error(f"calibration_data_path: {path}: not a readable .npy file ({e})") from None
        shape = list(array.shape)
        fixed = all(d > 0 for d in dims)
        if array.ndim == 1 and len(dims) != 1 and fixed and array.size == int(np.prod(dims)):
            array = array.reshape(dims)
        if array.ndim + 1 == len(dims):
            array = array[np.newaxis]
        if array.ndim != len(dims) or any(want > 0 and got != want for got, want in zip(array.shape, dims)):
            raise Error(f"calibration_data_path: {path}: array of shape {shape} for input '{name}' of shape {dims}")
        if array.dtype != dtype:
            if not np.can_cast(array.dtype, dtype, casting="same_kind"):
                raise Error(f"calibration_data_path: {path}: array of {array.dtype} for input '{name}' of "
                            f"{np.dtype(dtype).name}")
            array = array.astype(dtype)
        return array
