#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, driver and nvcc, in one go:
#   1. builds connector-api (with the PTX) and connector-mooncake, and the native test doubles;
#   2. runs the CUDA tests on the GPU, failing rather than skipping when the GPU cannot be used: driver bindings,
#      kernels against the host PagedKVCache, and the connector's device path over memory: (DeviceConnectorContract:
#      gather, device-to-host into pinned staging, put; get, host-to-device, scatter; byte-identical to the host path);
#   3. runs the connector's device path over mooncake:// (the Mooncake test double through pinned host staging; with
#      MOONCAKE_STORE_LIB and MOONCAKE_MASTER naming a real store built with USE_CUDA, GPUDirect too);
#   4. measures gather/scatter bandwidth for a 1024-token llama3-8b request against cuMemcpyDtoDAsync of the same
#      bytes (goal: above 70%), and the connector's device path for that request;
# then prints a summary and exits non-zero if any step failed or a goal was missed.
# Usage: native/cuda/device-check.sh [iterations]   (needs the project's Maven dependencies: a warm ~/.m2)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
iterations="${1:-50}"
logs="$(mktemp -d "${TMPDIR:-/tmp}/kvc-device-check.XXXXXX")"
# shellcheck source=../../scripts/find-jdk25.sh
. scripts/find-jdk25.sh
JAVA_HOME="$(find_jdk25)" || { echo "device-check: no JDK 25 found (set JAVA_HOME)" >&2; exit 1; }
export JAVA_HOME

summary=()
failed=0

# step NAME LOG COMMAND...: runs COMMAND with its output shown and kept in $logs/LOG, and records the outcome.
step() {
  local name="$1" log="$logs/$2"
  shift 2
  echo "==> $name"
  "$@" 2>&1 | tee "$log"
  local rc="${PIPESTATUS[0]}"
  local tests
  tests="$(grep -E '^\[(INFO|WARNING|ERROR)\] Tests run: [0-9]+, Failures: [0-9]+, Errors: [0-9]+, Skipped: [0-9]+$' "$log" \
    | sed -E 's/^\[[A-Z]+\] //' | paste -sd ';' -)"
  if [ "$rc" -eq 0 ]; then
    summary+=("PASS  $name${tests:+  ($tests)}")
  else
    summary+=("FAIL  $name (exit $rc)${tests:+  ($tests)}")
    failed=1
  fi
  return "$rc"
}

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
else
  echo "device-check: nvidia-smi not found; the tests will say whether the driver is usable"
fi
command -v nvcc >/dev/null || { echo "device-check: nvcc not found; the PTX cannot be built" >&2; exit 1; }

if step "build connector-api (PTX) and connector-mooncake, native test doubles" build.log \
    ./mvnw -B -q -pl connector-api,connector-mooncake -am install -DskipTests; then
  step "CUDA tests on the GPU: bindings, kernels, connector device path over memory:" cuda-tests.log \
    ./mvnw -B -pl connector-api test -Dtest='Cuda*Test' -Dkvc.cuda.require=true -Dsurefire.failIfNoSpecifiedTests=false
  # kvc.cuda.double names the driver the Mooncake tests load: here the real one. Against the Mooncake double the
  # GPUDirect test skips (that double reads device addresses with the CPU); the staged test runs on the GPU.
  step "connector device path over mooncake:// (staged; GPUDirect with a real store)" mooncake-tests.log \
    ./mvnw -B -pl connector-mooncake test -Dtest='Mooncake*DeviceTest' -Dkvc.cuda.double=libcuda.so.1 \
      -Dkvc.cuda.require=true -Dsurefire.failIfNoSpecifiedTests=false
  step "gather/scatter bandwidth, 1024-token llama3-8b ($iterations iterations)" bandwidth.log \
    ./mvnw -B -q -pl connector-api exec:exec -Dexec.executable="$JAVA_HOME/bin/java" -Dexec.classpathScope=test \
      "-Dexec.args=--enable-native-access=ALL-UNNAMED -cp %classpath dev.kvconnector.cuda.CudaGatherBandwidth $iterations"
fi

echo
echo "==================== device-check summary ===================="
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/GPU   /'
printf '%s\n' "${summary[@]}"
if [ -f "$logs/bandwidth.log" ]; then
  grep -E 'us/request|^goal:' "$logs/bandwidth.log"
fi
echo "logs: $logs"
if [ "$failed" -ne 0 ]; then
  echo "RESULT: FAILED"
  exit 1
fi
echo "RESULT: OK"
