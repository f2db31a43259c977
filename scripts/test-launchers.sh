#!/usr/bin/env bash
# Tests of ./mvnw's and ./kvctl's JDK discovery and of kvctl's rebuild rule, lock and error lines. Run by .ci/run
# before the Maven build; takes about half a minute. Needs a JDK 25 under /usr/lib/jvm (or KVC_JVM_DIR) and a
# default `java` of any version (or none).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1" >&2; failures=$((failures + 1)); }
check() { local name="$1"; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
mkdir "$tmp/nojdk"

# ---- ./mvnw finds a JDK 25 although JAVA_HOME is unset and `java` on PATH is another version
env -u JAVA_HOME PATH=/usr/bin:/bin "$repo/mvnw" -B -v >"$tmp/mvnw.out" 2>&1 || true
check "mvnw runs Maven on JDK 25 with JAVA_HOME unset and PATH's java ($(java -version 2>&1 | head -1))" \
  grep -q '^Java version: 25' "$tmp/mvnw.out"

# ---- without a JDK 25, ./mvnw and ./kvctl print one line naming what is missing and where to get it
rc=0; env -u JAVA_HOME KVC_JVM_DIR="$tmp/nojdk" "$repo/mvnw" -B -v >/dev/null 2>"$tmp/err" || rc=$?
check "mvnw without a JDK 25 exits 1 with one line" \
  bash -c "[ $rc -eq 1 ] && grep -q 'no JDK 25' '$tmp/err' && grep -q adoptium.net '$tmp/err' && [ \$(wc -l <'$tmp/err') -eq 1 ]"
rc=0; env -u JAVA_HOME KVC_JVM_DIR="$tmp/nojdk" "$repo/kvctl" key --help >/dev/null 2>"$tmp/err" || rc=$?
check "kvctl without a JDK 25 exits 1 with one line" \
  bash -c "[ $rc -eq 1 ] && grep -q 'kvctl: no JDK 25' '$tmp/err' && [ \$(wc -l <'$tmp/err') -eq 1 ]"

# ---- kvctl's rebuild rule, in a copy of the launcher whose ./mvnw is a stand-in that counts builds and makes a
#      kvctl.jar printing the JVM flags it got
tree="$tmp/tree"
mkdir -p "$tree/scripts" "$tree/src" "$tmp/jar"
cp "$repo/kvctl" "$tree/"
cp "$repo/scripts/find-jdk25.sh" "$tree/scripts/"
jdk="$(env -u JAVA_HOME bash -c ". '$repo/scripts/find-jdk25.sh'; find_jdk25")"
cat >"$tmp/jar/Flags.java" <<'JAVA'
public class Flags {
    public static void main(String[] a) {
        System.out.println(java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments());
    }
}
JAVA
"$jdk/bin/javac" -d "$tmp/jar" "$tmp/jar/Flags.java"
"$jdk/bin/jar" --create --file "$tmp/Flags.jar" --main-class Flags -C "$tmp/jar" Flags.class
cat >"$tree/mvnw" <<SH
#!/usr/bin/env bash
echo build >>"$tmp/builds"
sleep "\${FAKE_BUILD_SECONDS:-0}"
[ -z "\${FAKE_BUILD_FAIL:-}" ] || { echo "[ERROR] compilation failed" >&2; exit 7; }
mkdir -p kvctl-cli/target && cp "$tmp/Flags.jar" kvctl-cli/target/kvctl.jar
SH
chmod +x "$tree/mvnw"
echo 'class A {}' >"$tree/src/A.java"
printf 'target/\ndemo-results/\n' >"$tree/.gitignore"
git -C "$tree" init -q && git -C "$tree" add -A
builds() { [ -f "$tmp/builds" ] && wc -l <"$tmp/builds" || echo 0; }
kv() { env -u JAVA_HOME "$tree/kvctl" "$@"; }

kv x >"$tmp/out" 2>"$tmp/err"
check "kvctl builds on first use" [ "$(builds)" -eq 1 ]
check "kvctl's JVM gets -XX:+ExitOnOutOfMemoryError" grep -q -- '-XX:+ExitOnOutOfMemoryError' "$tmp/out"
kv x >/dev/null 2>&1
check "kvctl does not rebuild when nothing changed" [ "$(builds)" -eq 1 ]
mkdir -p "$tree/benchmarks/target/generated-sources" "$tree/demo-results"
for i in 1 2 3; do echo "class G$i {}" >"$tree/benchmarks/target/generated-sources/G$i.java"; done
echo '{}' >"$tree/demo-results/demo.json"
echo 'notes' >"$tree/NOTES.md"
kv x >/dev/null 2>&1
check "kvctl does not rebuild for generated sources, ignored files or Markdown" [ "$(builds)" -eq 1 ]
sleep 1.1; touch "$tree/src/A.java"
kv x >/dev/null 2>&1
check "kvctl rebuilds when a tracked source changes" [ "$(builds)" -eq 2 ]
echo 'class B {}' >"$tree/src/B.java"
kv x >/dev/null 2>&1
check "kvctl rebuilds when a new source appears" [ "$(builds)" -eq 3 ]

sleep 1.1; touch "$tree/src/A.java"
FAKE_BUILD_SECONDS=3 kv x >"$tmp/out1" 2>"$tmp/err1" &
p1=$!
sleep 0.5
FAKE_BUILD_SECONDS=3 kv x >"$tmp/out2" 2>"$tmp/err2" &
p2=$!
wait "$p1" "$p2"
check "two kvctl calls at once build once" [ "$(builds)" -eq 4 ]
check "the second call says it waits for the first one's build" grep -q 'waiting for another kvctl' "$tmp/err2"
check "both calls run the tool" bash -c "grep -q ExitOnOutOfMemoryError '$tmp/out1' && grep -q ExitOnOutOfMemoryError '$tmp/out2'"

sleep 1.1; touch "$tree/src/A.java"
rc=0; FAKE_BUILD_FAIL=1 kv x >/dev/null 2>"$tmp/err" || rc=$?
check "a failed build exits 1 and ends with one line naming the command" \
  bash -c "[ $rc -eq 1 ] && tail -1 '$tmp/err' | grep -q 'kvctl: the build failed (exit 7 of ./mvnw'"
kv x >/dev/null 2>&1
check "after a failed build the next call builds again" [ "$(builds)" -eq 6 ]

mkdir "$tmp/bin"
for t in bash sh env git stat sha256sum cut cat sort xargs flock sed mkdir dirname cp wc sleep tail grep find; do
  ln -s "$(command -v "$t")" "$tmp/bin/$t"
done
sleep 1.1; touch "$tree/src/A.java"
PATH="$tmp/bin" kv x >/dev/null 2>"$tmp/err"
check "a build without cmake or gcc says, in one line, what is missing and how to install it" \
  bash -c "[ \$(grep -c 'cmake or gcc' '$tmp/err') -eq 1 ] && grep -q 'apt-get install cmake gcc' '$tmp/err'"

rm -rf "$tree/.git"
kv x >/dev/null 2>&1
n="$(builds)"
kv x >/dev/null 2>&1
check "without .git kvctl builds once, then not again" [ "$(builds)" -eq "$n" ]
sleep 1.1; touch "$tree/src/A.java"
kv x >/dev/null 2>&1
check "without .git a changed source still rebuilds" [ "$(builds)" -eq $((n + 1)) ]

if [ "$failures" -gt 0 ]; then
  echo "test-launchers: $failures check(s) failed" >&2
  exit 1
fi
echo "test-launchers: all checks passed"
