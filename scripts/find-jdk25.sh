# Sourced by ./mvnw, ./kvctl, .ci/run and the benchmark scripts: one place that knows how to find a JDK 25.
# POSIX sh (mvnw runs under /bin/sh with globbing off, so the globs below switch it on for themselves).
# find_jdk25 prints the first JDK 25 home among JAVA_HOME and KVC_JVM_DIR/* (default /usr/lib/jvm), or returns 1.
# use_jdk25 WHO exports JAVA_HOME as that JDK, or prints one line naming what is missing and returns 1.

java_major() { "$1/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p'; }

find_jdk25() {
  case $- in *f*) set +f; _kvc_noglob=1 ;; *) _kvc_noglob= ;; esac
  _kvc_found=
  for _kvc_c in "${JAVA_HOME:-}" "${KVC_JVM_DIR:-/usr/lib/jvm}"/*25* "${KVC_JVM_DIR:-/usr/lib/jvm}"/*; do
    [ -n "$_kvc_c" ] && [ -x "$_kvc_c/bin/java" ] && [ -x "$_kvc_c/bin/javac" ] || continue
    if [ "$(java_major "$_kvc_c")" = "25" ]; then _kvc_found="$_kvc_c"; break; fi
  done
  [ -z "$_kvc_noglob" ] || set -f
  [ -n "$_kvc_found" ] && echo "$_kvc_found"
}

use_jdk25() {
  if ! _kvc_jdk="$(find_jdk25)"; then
    # Debian 12 and Ubuntu 24.04 have no openjdk-25-jdk package (apt-cache policy openjdk-25-jdk shows none), so the
    # line names the download.
    echo "$1: no JDK 25 in JAVA_HOME (${JAVA_HOME:-unset}) or ${KVC_JVM_DIR:-/usr/lib/jvm}/*: install one from https://adoptium.net/temurin/releases/?version=25 (unpack it under /usr/lib/jvm or set JAVA_HOME to it)" >&2
    return 1
  fi
  if [ -n "${JAVA_HOME:-}" ] && [ "$JAVA_HOME" != "$_kvc_jdk" ]; then
    echo "$1: JAVA_HOME ($JAVA_HOME) is not a JDK 25; using $_kvc_jdk" >&2
  fi
  JAVA_HOME="$_kvc_jdk"
  export JAVA_HOME
}
