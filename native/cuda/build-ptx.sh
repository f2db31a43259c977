#!/usr/bin/env bash
# Compiles paged_kv.cu to one PTX file (virtual arch compute_80: the driver JITs it for Ampere, Ada,
# Hopper and newer) into the folder given as $1 (default: native/target/ptx/dev/kvconnector/cuda).
# connector-api packages that folder into its jar. Skips with a message when nvcc is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../target/ptx/dev/kvconnector/cuda}"
nvcc_bin="${NVCC:-nvcc}"
if ! command -v "$nvcc_bin" >/dev/null 2>&1; then
  echo "[native] nvcc not found: skipping the CUDA kernels (install the CUDA toolkit, or set NVCC, to build paged_kv.ptx)"
  exit 0
fi
mkdir -p "$out"
"$nvcc_bin" -ptx -arch=compute_80 -O3 -std=c++17 -Werror all-warnings "$here/paged_kv.cu" -o "$out/paged_kv.ptx.tmp"
mv "$out/paged_kv.ptx.tmp" "$out/paged_kv.ptx"
echo "[native] built $out/paged_kv.ptx"
