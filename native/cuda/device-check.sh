#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, driver and nvcc: builds connector-api with the kernels, runs the CUDA tests
# (failing, not skipping, when the GPU cannot be used), then measures gather/scatter bandwidth for a 1024-token
# llama3-8b request against plain device-to-device copies. Usage: native/cuda/device-check.sh [iterations]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
command -v nvcc >/dev/null || { echo "device-check: nvcc not found; the PTX cannot be built" >&2; exit 1; }
./mvnw -B -q -pl connector-api -am install -DskipTests
./mvnw -B -pl connector-api test -Dtest='Cuda*Test' -Dkvc.cuda.require=true -Dsurefire.failIfNoSpecifiedTests=false
./mvnw -B -q -pl connector-api exec:exec -Dexec.executable=java -Dexec.classpathScope=test \
  "-Dexec.args=--enable-native-access=ALL-UNNAMED -cp %classpath dev.kvconnector.cuda.CudaGatherBandwidth ${1:-50}"
