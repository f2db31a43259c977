#!/usr/bin/env bash
# Builds the CUDA kernels into native/target/ptx with nvcc, and the native libraries into native/target/lib with
# CMake. Each step skips, with a message, when its tool (nvcc; cmake or a C compiler) is missing: the Java tests
# then say why they cannot run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The CUDA kernels need only nvcc (no GPU, no cmake); connector-api packages target/ptx into its jar.
bash "$here/cuda/build-ptx.sh" "$here/target/ptx/dev/kvconnector/cuda"
if ! command -v cmake >/dev/null 2>&1; then
  echo "[native] cmake not found: skipping the native build (install cmake and gcc to build the Mooncake store test double)"
  exit 0
fi
if ! command -v "${CC:-cc}" >/dev/null 2>&1 && ! command -v gcc >/dev/null 2>&1; then
  echo "[native] no C compiler (cc or gcc) found: skipping the native build"
  exit 0
fi
cmake -S "$here" -B "$here/target/cmake" -DCMAKE_BUILD_TYPE=Release
cmake --build "$here/target/cmake" --parallel 2
(cd "$here/target/cmake" && ctest --output-on-failure)
