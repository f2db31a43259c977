# Sourced by ./kvctl, .ci/run and the benchmark scripts: one place that knows how to find a JDK 25.
# find_jdk25 prints the first JDK 25 home among JAVA_HOME and /usr/lib/jvm/*, or returns 1 when there is none.

java_major() { "$1/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p'; }

find_jdk25() {
  local c
  for c in "${JAVA_HOME:-}" /usr/lib/jvm/*25* /usr/lib/jvm/*; do
    [ -n "$c" ] && [ -x "$c/bin/java" ] && [ -x "$c/bin/javac" ] || continue
    if [ "$(java_major "$c")" = "25" ]; then echo "$c"; return 0; fi
  done
  return 1
}
