#!/usr/bin/env bash
# cmake --install of a build into a fresh prefix, then what a user outside the tree does with it:
# every public header compiles alone; examples/quantize.cpp builds with find_package(onnxptq) and
# with pkg-config, and both quantize MODEL to the same bytes the installed command writes.
#
#   check_install.sh BUILD_DIR SOURCE_DIR MODEL
set -euo pipefail
build=$(realpath "$1") source=$(realpath "$2") model=$(realpath "$3")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(find "$prefix" -name onnxptq.pc)
libdir=$(dirname "$(dirname "$pc")")

for header in "$prefix"/include/onnxptq/*.h; do
  echo "#include <onnxptq/$(basename "$header")>" | g++ -std=c++20 -fsyntax-only -I"$prefix/include" -x c++ -
done

cmake -S "$source/examples" -B "$work/with-cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/with-cmake" >/dev/null
PKG_CONFIG_PATH=$(dirname "$pc") g++ "$source/examples/quantize.cpp" -o "$work/with-pkg-config" \
  $(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs onnxptq) -Wl,-rpath,"$libdir"

"$work/with-cmake/quantize_example" "$model" "$work/cmake.onnx" A8W8 2>/dev/null | tee "$work/cmake.txt"
"$work/with-pkg-config" "$model" "$work/pkg-config.onnx" A8W8 2>/dev/null >/dev/null
grep -q "SQNR" "$work/cmake.txt"
"$prefix/bin/onnxptq" quantize "$model" -o "$work/command.onnx" --config A8W8 --random 8 --quiet
cmp "$work/cmake.onnx" "$work/pkg-config.onnx"
cmp "$work/cmake.onnx" "$work/command.onnx"
echo "installed library, headers, CMake package, pkg-config file and command work"
