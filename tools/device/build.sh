#!/usr/bin/env bash
# Prepares .device/ (git-ignored) for the GPU machine, which has no Java, no Maven and no network:
# a jlink JRE (made by make-jre.sh, libjvm stripped), the runtime class path built with the CUDA 13
# presets (-Pcuda13: the H200 machine has CUDA 13.0 libraries only), the converter (the golden check
# converts the committed fixtures there), the GPU test classes and the JUnit Platform. Everything that
# travels to the device (tracked files + .device) must stay under 64 MiB; this script checks that.
#
# Usage: tools/device/build.sh        (ONLINE=1 lets Maven download missing artifacts)
# Then, with the device tool:  carry [".device"], command "bash tools/device/run.sh" (one GPU)
#                         or  carry [".device"], command "bash tools/device/run-multi.sh", kind nvidia-h200-x2
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if [ -z "${JAVA_HOME:-}" ] || ! "$JAVA_HOME/bin/java" -version 2>&1 | grep -q '"2[5-9]'; then
  JAVA_HOME=$(ls -d /usr/lib/jvm/*25* 2>/dev/null | head -1)
fi
export JAVA_HOME
MAKE_JRE=${MAKE_JRE:-$root/../shared/device/make-jre.sh}
[ -x "$MAKE_JRE" ] || MAKE_JRE=/work/shared/device/make-jre.sh
CAP_BYTES=${CAP_BYTES:-$((64 * 1024 * 1024))}   # the device tool's limit; settable to test the fallbacks
# the tool counts a little more than the files' bytes: 66.48 MB of files was refused where 66.4 MB travelled
# (2026-11-30, ~2300 files): keep 1 MiB below its cap
LIMIT=$((CAP_BYTES - 1024 * 1024))
dev=.device

mvn_opts=(-B -q -Pcuda13 -DskipTests)
[ "${ONLINE:-0}" = 1 ] || mvn_opts+=(-o)
echo "== mvn ${mvn_opts[*]} package (runtime, golden-tests and what they need)"
# a default-profile build may have left the CUDA 12.9 presets in target/lib: the device must see only 13.1
rm -rf runtime/target/lib runtime/target/gpu-test-lib converter/target/lib
mvn "${mvn_opts[@]}" package -pl runtime,golden-tests -am

mkdir -p "$dev"
# make-jre.sh's JRE, or (when the tree would not fit) one without java.management and java.net.http
# (~1.3 MB less; the CPU backend's Vector API stays: the GPU tests compare with it)
make_jre() {
  rm -rf "$dev/jre"
  case $1 in
    full) echo "== JRE: $MAKE_JRE $dev/jre"; "$MAKE_JRE" "$dev/jre" ;;
    slim)
      mods=java.base,java.logging,jdk.unsupported,jdk.httpserver,jdk.incubator.vector
      echo "== JRE (slim): jlink $mods"
      "$JAVA_HOME/bin/jlink" --add-modules "$mods" --strip-debug --no-header-files --no-man-pages --compress=zip-9 --output "$dev/jre" ;;
  esac
  # symbols the JVM does not need at run time (hs_err stack names only): about 5 MB
  strip --strip-unneeded "$dev/jre/lib/server/libjvm.so"
  echo "$1" > "$dev/jre/.v100-kind"
}
[ -x "$dev/jre/bin/java" ] || make_jre "${JRE:-full}"

echo "== class path: $dev/lib"
rm -rf "$dev/lib" "$dev/out" "$dev/kernels-ptx.tar.xz"
mkdir -p "$dev/lib"
cp runtime/target/lib/*.jar runtime/target/v100-runtime.jar converter/target/v100-converter.jar "$dev/lib/"
cp runtime/target/gpu-test-lib/*.jar "$dev/lib/"
# commons-compress's own dependencies serve tar bundles only; the device runs directory bundles (1.6 MB)
rm -f "$dev"/lib/commons-codec-*.jar "$dev"/lib/commons-io-*.jar "$dev"/lib/commons-lang3-*.jar
# the CUDA preset's natives jar holds bindings of every CUDA library (5 MB): keep the three the backend loads
# (NCCL for ranks on several GPUs)
for j in "$dev"/lib/cuda-*-linux-x86_64.jar; do
  tmp=$(mktemp -d)
  (cd "$tmp" && "$JAVA_HOME/bin/jar" xf "$root/$j" META-INF org/bytedeco/cuda/linux-x86_64/libjnicudart.so \
      org/bytedeco/cuda/linux-x86_64/libjnicublas.so org/bytedeco/cuda/linux-x86_64/libjninccl.so && rm -f "$root/$j" && \
   "$JAVA_HOME/bin/jar" cf "$root/$j" -C "$tmp" .)
  rm -rf "$tmp"
done
# the H200 loads the compute_70 PTX; the sm_70 cubins are for V100s (0.5 MB)
(cd "$dev/lib" && zip -q -d v100-kernels-*.jar 'dev/v100/kernels/cuda/ptx/*.cubin')
# the PTX travel as one xz archive beside the jar (~1 MB less than deflated inside it); run.sh and run-multi.sh put them
# back (tools/device/put-ptx.sh) before any Java starts
# (taken from the jar itself, so that the two cannot come from different builds)
tmp=$(mktemp -d)
unzip -q "$dev"/lib/v100-kernels-*.jar 'dev/v100/kernels/cuda/ptx/*.ptx' 'dev/v100/kernels/cuda/ptx/kernels.tsv' -d "$tmp"
(cd "$tmp/dev/v100/kernels/cuda/ptx" && tar -cf - *.ptx kernels.tsv) | xz -9 > "$dev/kernels-ptx.tar.xz"
rm -rf "$tmp"
(cd "$dev/lib" && zip -q -d v100-kernels-*.jar 'dev/v100/kernels/cuda/ptx/*.ptx' 'dev/v100/kernels/cuda/ptx/kernels.tsv')
(cd runtime/target/test-classes && "$JAVA_HOME/bin/jar" cf "$root/$dev/lib/v100-runtime-gpu-tests.jar" dev/v100/runtime/cuda dev/v100/runtime/testing)
(cd golden-tests/target/test-classes && "$JAVA_HOME/bin/jar" cf "$root/$dev/lib/v100-golden-gpu-tests.jar" dev)

# BASE_PTX_DIR=dir (a kernels build's .../dev/v100/kernels/cuda/ptx of an earlier revision): its PTX modules that differ
# from this build's, with its kernels.tsv, travel as .device/base-kernels.tar.xz for run.sh's "ab" step (the same bench
# with either kernels in one call). Where that would not fit, JUnit and the golden tests stay home (an ab call then runs
# benches only).
rm -f "$dev/base-kernels.tar.xz"
if [ -n "${BASE_PTX_DIR:-}" ]; then
  cur=kernels/target/classes/dev/v100/kernels/cuda/ptx
  changed=()
  for f in "$BASE_PTX_DIR"/*.ptx; do cmp -s "$f" "$cur/$(basename "$f")" || changed+=("$(basename "$f")"); done
  [ ${#changed[@]} -gt 0 ] || { echo "ERROR: $BASE_PTX_DIR holds the same PTX as this build: nothing to compare" >&2; exit 1; }
  tar -C "$BASE_PTX_DIR" -cf - "${changed[@]}" kernels.tsv | xz -9e > "$dev/base-kernels.tar.xz"
  echo "== base kernels for the ab step: ${changed[*]} + kernels.tsv ($(du -b "$dev/base-kernels.tar.xz" | cut -f1) bytes)"
  # what the sm_70 build says changed beside the code: a kernel's registers, shared memory, stack or spills (an edit of
  # a shared device function can move kernels that were not meant to change; their occupancy moves with them)
  awk -F'\t' 'NR == FNR { if ($1 !~ /^#/ && $2 != "kernel") base[$2] = $3 " " $4 " " $5 " " $6 " " $7 " " $8; next }
               $1 !~ /^#/ && $2 != "kernel" { now = $3 " " $4 " " $5 " " $6 " " $7 " " $8
                 if (!($2 in base)) printf "  %-32s new: registers %s, shared %s+%s, stack %s, spills %s/%s\n", $2, $3, $4, $5, $6, $7, $8
                 else if (base[$2] != now) { split(base[$2], b, " "); printf "  %-32s registers %s -> %s, shared %s+%s -> %s+%s, stack %s -> %s, spills %s/%s -> %s/%s\n", $2, b[1], $3, b[2], b[3], $4, $5, b[4], $6, b[5], b[6], $7, $8 }
                 delete base[$2] }
               END { for (k in base) printf "  %-32s gone (in the base only)\n", k }' \
      "$BASE_PTX_DIR/kernels.tsv" "$cur/kernels.tsv" > "$dev/.resources-changed"
  if [ -s "$dev/.resources-changed" ]; then
    echo "== sm_70 resources that differ from the base's (kernels.tsv):"; cat "$dev/.resources-changed"
  else
    echo "== sm_70 resources: every kernel's the same as the base's (kernels.tsv)"
  fi
  rm -f "$dev/.resources-changed"
fi

# what travels: every tracked file, untracked files git does not ignore, and .device
tracked=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r du -cb 2>/dev/null | tail -1 | cut -f1)
total=$((tracked + $(du -sb "$dev" | cut -f1)))
if [ "$total" -ge "$LIMIT" ] && [ "$(cat "$dev/jre/.v100-kind" 2>/dev/null)" != slim ]; then
  echo "== $total bytes would travel, over the cap: a smaller JRE"
  make_jre slim
  total=$((tracked + $(du -sb "$dev" | cut -f1)))
fi
if [ "$total" -ge "$LIMIT" ]; then
  # last resort: the preset's Java classes of the CUDA libraries the backend does not use (0.7 MB)
  echo "== still over the cap: only the cudart, cuBLAS and NCCL classes of the CUDA preset"
  for j in "$dev"/lib/cuda-*.jar; do
    case $j in *linux-x86_64*) continue ;; esac
    tmp=$(mktemp -d)
    (cd "$tmp" && "$JAVA_HOME/bin/jar" xf "$root/$j" META-INF org/bytedeco/cuda/presets org/bytedeco/cuda/cudart org/bytedeco/cuda/cublas \
        org/bytedeco/cuda/nccl org/bytedeco/cuda/global/cudart.class org/bytedeco/cuda/global/cublas.class \
        org/bytedeco/cuda/global/nccl.class && rm -f "$root/$j" && "$JAVA_HOME/bin/jar" cf "$root/$j" -C "$tmp" .)
    rm -rf "$tmp"
  done
  total=$((tracked + $(du -sb "$dev" | cut -f1)))
fi
if [ "$total" -ge "$LIMIT" ]; then
  # and then: every jar of the class path deflated again at zip's best level (~130 KB less; the same entries)
  echo "== still over the cap: the class path's jars recompressed (zip -9)"
  for j in "$dev"/lib/*.jar; do
    tmp=$(mktemp -d)
    (cd "$tmp" && unzip -q "$root/$j" && rm -f "$root/$j" && zip -q -9 -X -r "$root/$j" .)
    rm -rf "$tmp"
  done
  total=$((tracked + $(du -sb "$dev" | cut -f1)))
fi
if [ "$total" -ge "$LIMIT" ]; then
  # and last: commons-compress cut to the classes its tar archiver reaches (jdeps, tools/device/jar_closure.py; ~1 MB
  # less): the runtime uses only its tar classes, and the device reads directory bundles (its tar dependencies are gone, above)
  echo "== still over the cap: commons-compress cut to its tar classes"
  for j in "$dev"/lib/commons-compress-*.jar; do
    tmp=$(mktemp -d)
    (cd "$tmp" && unzip -q "$root/$j" && rm -f module-info.class META-INF/versions/*/module-info.class && \
     python3 "$root/tools/device/jar_closure.py" "$JAVA_HOME/bin/jdeps" . org.apache.commons.compress.archivers.tar > "$tmp.keep" && \
     ls META-INF/MANIFEST.MF META-INF/*.txt >> "$tmp.keep" 2>/dev/null; \
     rm -f "$root/$j" && zip -q -9 -X "$root/$j" -@ < "$tmp.keep")
    rm -rf "$tmp" "$tmp.keep"
  done
  total=$((tracked + $(du -sb "$dev" | cut -f1)))
fi
if [ "$total" -ge "$LIMIT" ] && [ -f "$dev/base-kernels.tar.xz" ]; then
  echo "== still over the cap with the base kernels: JUnit and the golden test classes stay home (this call: benches and ab only; the bench bundle writer stays)"
  rm -f "$dev"/lib/v100-golden-gpu-tests.jar "$dev"/lib/junit-*.jar "$dev"/lib/opentest4j-*.jar "$dev"/lib/apiguardian-*.jar
  total=$((tracked + $(du -sb "$dev" | cut -f1)))
fi
device=$(du -sb "$dev" | cut -f1)
printf '== sizes: tracked %.1f MB + .device %.1f MB (jre %s %.1f, lib %.1f) = %.1f MB of the %.1f MB cap\n' \
  "$(echo "$tracked/1000000" | bc -l)" "$(echo "$device/1000000" | bc -l)" "$(cat $dev/jre/.v100-kind)" \
  "$(echo "$(du -sb $dev/jre | cut -f1)/1000000" | bc -l)" "$(echo "$(du -sb $dev/lib | cut -f1)/1000000" | bc -l)" \
  "$(echo "$total/1000000" | bc -l)" "$(echo "$LIMIT/1000000" | bc -l)"
if [ "$total" -ge "$LIMIT" ]; then
  echo "ERROR: $total bytes would travel, over the 64 MiB cap even trimmed: untrack or ignore files, or slim .device further" >&2
  exit 1
fi
echo "ready: device tool run with carry [\".device\"] and command \"bash tools/device/run.sh\""
