"""The Python package (python/onnxptq) and its extension onnxptq._core, built by CMake.

`pip install --no-build-isolation .` configures a CMake build in build/pip (or uses the one named
by ONNXPTQ_BUILD_DIR, say the build tree of ./dev.sh, where the extension is already built) and
builds only the extension's target.
"""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = pathlib.Path(__file__).parent.resolve()


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = pathlib.Path(os.environ.get("ONNXPTQ_BUILD_DIR") or SOURCE / "build" / "pip").resolve()
        if not (build / "CMakeCache.txt").exists():
            subprocess.run(["cmake", "-S", str(SOURCE), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                            "-DONNXPTQ_BUILD_TESTS=OFF", f"-DPython_EXECUTABLE={sys.executable}"], check=True)
        subprocess.run(["cmake", "--build", str(build), "--target", "onnxptq_python"], check=True)
        built = sorted((build / "python" / "onnxptq").glob("_core*.so"))
        if not built:
            raise RuntimeError(f"the CMake build in {build} made no onnxptq/_core*.so")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)


setup(
    packages=["onnxptq"],
    package_dir={"onnxptq": "python/onnxptq"},
    ext_modules=[Extension("onnxptq._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build/setuptools"}, "egg_info": {"egg_base": "build"}},
)
