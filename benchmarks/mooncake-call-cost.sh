#!/usr/bin/env bash
# The FFM binding's overhead per call: mooncake_store_get_size on the native test double, called from C and through
# the Java binding (JMH), and the difference. Run from a built tree (./mvnw -q install -DskipTests).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=../scripts/find-jdk25.sh
. scripts/find-jdk25.sh
jdk="$(find_jdk25)" || { echo "mooncake-call-cost: no JDK 25 under JAVA_HOME or /usr/lib/jvm" >&2; exit 1; }
[ -x native/target/lib/mooncake_call_cost ] && [ -f benchmarks/target/benchmarks.jar ] || {
  echo "mooncake-call-cost: build first: ./mvnw -q install -DskipTests (needs cmake and gcc)" >&2; exit 1; }

c_line=$(native/target/lib/mooncake_call_cost)
echo "$c_line"
out=$(mktemp)
"$jdk/bin/java" --enable-native-access=ALL-UNNAMED -jar benchmarks/target/benchmarks.jar MooncakeBindingBenchmark \
  -rf json -rff "$out" > /dev/null
java_ns=$(python3 -c "import json,sys; print(json.load(open('$out'))[0]['primaryMetric']['score'])")
c_ns=$(echo "$c_line" | sed -n 's/.*: \([0-9.]*\) ns per call.*/\1/p')
python3 - "$java_ns" "$c_ns" <<'PY'
import sys
j, c = float(sys.argv[1]), float(sys.argv[2])
print(f"get_size through the FFM binding: {j:.1f} ns per call")
print(f"binding overhead: {j - c:.1f} ns per call (goal: below 2000 ns) -> {'met' if j - c < 2000 else 'MISSED'}")
PY
rm -f "$out"
