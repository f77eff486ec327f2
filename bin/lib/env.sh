# Sourced by every launcher: finds a JDK >= 25 and the repository root.
# Sets V100_ROOT, JAVA_HOME and JAVA; exits with one clear line when no JDK >= 25 exists.

V100_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
V100_MIN_JAVA=25

_v100_java_major() { # prints the feature version of the JDK at $1, or nothing
  local rel="$1/release"
  [ -x "$1/bin/java" ] && [ -x "$1/bin/javac" ] || return 0
  if [ -f "$rel" ]; then
    sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$rel"
  else
    "$1/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1
  fi
}

_v100_find_jdk() {
  local cand best="" best_v=0 v
  for cand in "${JAVA_HOME:-}" /usr/lib/jvm/* /opt/java/* /opt/jdk* "$HOME"/.sdkman/candidates/java/* \
              "$(dirname "$(dirname "$(readlink -f "$(command -v javac 2>/dev/null || echo /nonexistent)")")")"; do
    [ -n "$cand" ] && [ -d "$cand" ] || continue
    v="$(_v100_java_major "$cand")"
    [ -n "$v" ] || continue
    if [ "$v" -ge "$V100_MIN_JAVA" ] && [ "$v" -gt "$best_v" ]; then best="$cand"; best_v="$v"; fi
    # JAVA_HOME wins when it qualifies
    if [ "$cand" = "${JAVA_HOME:-}" ] && [ "$v" -ge "$V100_MIN_JAVA" ]; then echo "$cand"; return 0; fi
  done
  [ -n "$best" ] && echo "$best"
}

JAVA_HOME="$(_v100_find_jdk)"
if [ -z "$JAVA_HOME" ]; then
  echo "error: no JDK >= $V100_MIN_JAVA found (looked at JAVA_HOME, /usr/lib/jvm/*, /opt/java, sdkman, PATH); install Temurin 25 or set JAVA_HOME" >&2
  exit 1
fi
export JAVA_HOME
JAVA="$JAVA_HOME/bin/java"
export PATH="$JAVA_HOME/bin:$PATH"

# JVM flags every launcher and test run shares.
V100_JVM_FLAGS=(--enable-native-access=ALL-UNNAMED -XX:+UseParallelGC)
# the runtime's CPU fast paths use the Vector API (an incubator module in JDK 25)
V100_RUNTIME_JVM_FLAGS=("${V100_JVM_FLAGS[@]}" --add-modules jdk.incubator.vector -Djdk.incubator.vector.VECTOR_ACCESS_OOB_CHECK=0)
# V100_JAVA_OPTS: extra JVM options for the launchers (as tools/device/run.sh takes them), e.g. -Dv100.cuda.gemvMma=false
read -r -a v100_extra_opts <<< "${V100_JAVA_OPTS:-}"
V100_RUNTIME_JVM_FLAGS+=("${v100_extra_opts[@]}")

# Runs Maven with the JDK found above; the build itself also enforces Java >= 25.
v100_mvn() {
  if ! command -v mvn >/dev/null 2>&1; then
    echo "error: Apache Maven (mvn) not found on PATH; install Maven 3.8+" >&2; exit 1
  fi
  (cd "$V100_ROOT" && mvn -B -ntp "$@")
}

# Builds the jars (no tests) when a launcher finds them missing or older than the sources.
v100_ensure_built() {
  local stamp="$V100_ROOT/runtime/target/lib/.built"
  if [ ! -f "$stamp" ] || [ -n "$(find "$V100_ROOT"/*/src/main "$V100_ROOT"/pom.xml "$V100_ROOT"/*/pom.xml -newer "$stamp" -print -quit 2>/dev/null)" ]; then
    echo "v100: building (mvn package -DskipTests) ..." >&2
    v100_mvn -q package -DskipTests >&2 || { echo "error: build failed; run 'mvn -B package' in $V100_ROOT to see why" >&2; exit 1; }
    touch "$stamp"
  fi
}

v100_classpath() { # module name -> classpath of its jar and dependencies
  echo "$V100_ROOT/$1/target/lib/*"
}
