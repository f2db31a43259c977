#!/usr/bin/env bash
# Runs the JMH suite and writes benchmarks/results/{jmh-<mode>.json,REPORT.md,latency.svg}
# (and, in quick mode, shm-contention.md).
#
#   benchmarks/run.sh quick [extra JMH args]   # reduced set, under 10 minutes on 2 vCPUs
#   benchmarks/run.sh full  [extra JMH args]   # every model x tokens, 2 forks (about 40 minutes on 2 vCPUs)
#
# Extra arguments go to each JMH invocation, e.g. a benchmark regex ('StoreLayer|Memcpy') or -p store=memory:.
# Stores: memory: always; shm:, valkey:// (against a fresh redis-server) and lm:// (against the in-process Java
# LMCache server) once their providers are in the jar;
# add servers you run yourself with KVC_BENCH_STORES="lm://127.0.0.1:65432,mooncake://127.0.0.1:50051".
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JAR="$ROOT/benchmarks/target/benchmarks.jar"
RESULTS="$ROOT/benchmarks/results"
MODE="${1:-quick}"
shift || true

# shellcheck source=../scripts/find-jdk25.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/scripts/find-jdk25.sh"

if ! JDK="$(find_jdk25)"; then
  echo "run.sh: no JDK 25 found. Looked at JAVA_HOME (${JAVA_HOME:-unset}) and /usr/lib/jvm/*." >&2
  exit 1
fi
export JAVA_HOME="$JDK"
JAVA="$JAVA_HOME/bin/java"

if [ ! -f "$JAR" ]; then
  echo "run.sh: $JAR is missing; building it (./mvnw -q install -DskipTests)..." >&2
  (cd "$ROOT" && ./mvnw -q -B install -DskipTests) >&2
fi

# MooncakeBindingBenchmark measures one call, not a layer: benchmarks/mooncake-call-cost.sh runs it beside C.
# AgronaShmComparison measures primitives, not a layer; benchmarks/README.md gives its command and results.
# TransferEngineBenchmark and P2pConnectorBenchmark start a peer JVM and carry their own socket floor; benchmarks/README.md gives their commands.
# TieredReadBenchmark compares tiered: with each tier alone; REPORT.md's tiered: sections give its command and results.
NOT_LAYERS="-e MooncakeBindingBenchmark -e AgronaShmComparison -e TransferEngineBenchmark -e P2pConnectorBenchmark -e TieredReadBenchmark"
case "$MODE" in
  quick)
    # Every backend at Llama-3-8B 1024 tokens (including the two-process shm: hand-over, 4 MiB); the layer-level
    # backends (not the connector, not the echo, not the hand-over, not lm://'s per-chunk run) also at Llama-3-8B 4096
    # tokens and at 1024 tokens of the two other presets. 'full' has every combination.
    # lm:// (per layer) and LmChunkBenchmark (per chunk over lm://, lmcache+valkey:// and lmcache+mooncake://) run at
    # Llama-3-8B 1024 tokens only, which keeps their cost to about 80 s. SET_STORES says which store list each set gets: "all", or "removable" (all but lm://).
    ONCE="-e ConnectorBenchmark -e SocketBaseline.echo -e ShmCrossProcessBenchmark -e LmChunkBenchmark"
    SETS=("-p model=llama3-8b -p tokens=1024 $NOT_LAYERS -e ConnectorBenchmark"
          "\\.ConnectorBenchmark\\. -p model=llama3-8b -p tokens=1024"
          "-p model=llama3-8b -p tokens=4096 $ONCE $NOT_LAYERS"
          "-p model=qwen2.5-0.5b,deepseek-v3-mla -p tokens=1024 $ONCE $NOT_LAYERS")
    SET_STORES=(all removable removable removable)
    TIMING=(-f 1 -wi 2 -w 400ms -i 3 -r 400ms) ;;
  full)
    SETS=("$NOT_LAYERS -e ConnectorBenchmark" "\\.ConnectorBenchmark\\.")
    SET_STORES=(all removable)
    TIMING=(-f 2 -wi 3 -w 1s -i 5 -r 1s) ;;
  *)
    echo "usage: benchmarks/run.sh [quick|full] [extra JMH args]" >&2
    exit 2 ;;
esac

STORES="$("$JAVA" -cp "$JAR" dev.kvconnector.benchmarks.StoreCatalog)"
# ConnectorBenchmark consumes what it reads, so it runs over the stores that can remove: not lm://.
REMOVABLE_STORES="$("$JAVA" -cp "$JAR" dev.kvconnector.benchmarks.StoreCatalog --removable)"
mkdir -p "$RESULTS"
PARTS="$(mktemp -d)"
trap 'rm -rf "$PARTS"' EXIT
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "run.sh: $MODE run, stores: $STORES, load average: $LOAD_BEFORE, $(nproc) CPUs" >&2

i=0
FILES=()
for set in "${SETS[@]}"; do
  set_stores="$STORES"
  if [ "${SET_STORES[$i]}" = removable ]; then set_stores="$REMOVABLE_STORES"; fi
  i=$((i + 1))
  # shellcheck disable=SC2086 # each set is a list of JMH arguments
  "$JAVA" --enable-native-access=ALL-UNNAMED -jar "$JAR" "${TIMING[@]}" $set -p "store=$set_stores" \
    -prof gc -rf json -rff "$PARTS/part-$i.json" "$@"
  FILES+=("$PARTS/part-$i.json")
done

if [ "$MODE" = quick ] && [ $# -eq 0 ]; then
  # Lock contention between 1, 2 and 4 writer JVMs on one shm: store, about 20 s; not JMH (ShmContentionBenchmark
  # says why), so it runs in a plain quick run only, not when extra arguments pick JMH benchmarks.
  "$JAVA" --enable-native-access=ALL-UNNAMED -cp "$JAR" dev.kvconnector.benchmarks.ShmContentionBenchmark \
    --workloads store --rounds 1 --warm-ms 500 --measure-ms 1000 --out "$RESULTS/shm-contention.md"
fi

LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"
"$JAVA" -cp "$JAR" dev.kvconnector.benchmarks.report.ReportMain --out "$RESULTS" --mode "$MODE" \
  --load-before "$LOAD_BEFORE" --load-after "$LOAD_AFTER" --merge-to "$RESULTS/jmh-$MODE.json" "${FILES[@]}"
