#!/usr/bin/env bash
# Runs ON the GPU machine (no Java, no Maven there: .device/ from tools/device/build.sh brings both the
# JRE and the class path): the kernel/device probe, every GPU test (ops, matmul paths, attention,
# whole models against the CPU backend), the GPU golden check (committed fixtures converted there and
# run on CUDA against transformers' logits), and bench on synthetic Llama-3.2-1B-geometry bundles.
# A failing step does not stop the others; a table of all of them is printed last. Logs go to $OUT.
#
# Device tool: carry [".device"], command "bash tools/device/run.sh" (STEPS="info tests golden bench"
# selects steps; BENCH_TYPES="Q4_K F16" the bench bundles' weight types).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
OUT=${OUT:-$root/.device/out}
mkdir -p "$OUT"
STEPS=${STEPS:-"info tests golden bench"}
BENCH_TYPES=${BENCH_TYPES:-"Q4_K F16"}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# keep NCCL off NVLink multicast on the shared hosts (not used here, but never risk it)
export NCCL_NVLS_ENABLE=0
JAVA=(.device/jre/bin/java --enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -Xmx24g -XX:+UseParallelGC
      -cp ".device/lib/*:golden-tests/src/test/resources")
if [ ! -x .device/jre/bin/java ]; then
  echo "no .device/jre: run tools/device/build.sh on the build machine and carry .device" >&2
  exit 2
fi

names=()
declare -A rc secs notes

# the bench bundles are written in the background while the tests run (the CPU is otherwise idle)
declare -A writer
if [[ " $STEPS " == *" bench "* ]]; then
  for t in $BENCH_TYPES; do
    b=/tmp/v100-bench-llama1B-$t
    if [ ! -d "$b" ]; then
      timeout 240 "${JAVA[@]}" -Xmx4g dev.v100.runtime.cuda.BenchBundleMain "$b" "$t" > "$OUT/bench-$t.log.tmp" 2>&1 &
      writer[$t]=$!
    fi
  done
fi

run_step() {   # name timeout-seconds log command...
  local name=$1 limit=$2 log=$3
  shift 3
  local t0=$SECONDS
  echo "=== $name (limit ${limit}s) -> $log"
  timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1
  local r=$?
  names+=("$name")
  rc[$name]=$r
  secs[$name]=$((SECONDS - t0))
  tail -n 25 "$log"
  [ "$r" = 124 ] && echo "!!! $name timed out after ${limit}s"
  return 0
}

for s in $STEPS; do
  case $s in
    info)
      { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1; echo; } > "$OUT/info.log"
      run_step info 60 "$OUT/info.log.tmp" "${JAVA[@]}" dev.v100.runtime.cuda.CudaInfo
      cat "$OUT/info.log.tmp" >> "$OUT/info.log"
      rm -f "$OUT/info.log.tmp"
      notes[info]=$(grep -m1 "modules loaded" "$OUT/info.log")
      ;;
    tests)
      run_step gpu-tests 240 "$OUT/gpu-tests.log" "${JAVA[@]}" dev.v100.runtime.cuda.GpuTestMain "$OUT/gpu-tests.txt" \
        dev.v100.runtime.cuda.CudaOpsTest dev.v100.runtime.cuda.CudaMatmulTest dev.v100.runtime.cuda.CudaAttentionTest \
        dev.v100.runtime.cuda.CudaHybridOpsTest dev.v100.runtime.cuda.CudaModelTest
      notes[gpu-tests]=$(grep -m1 "^GPU TESTS" "$OUT/gpu-tests.log")
      ;;
    golden)
      run_step golden 110 "$OUT/golden.log" "${JAVA[@]}" dev.v100.runtime.cuda.GpuTestMain "$OUT/golden.txt" dev.v100.golden.CudaGoldenTest
      notes[golden]=$(grep -m1 "^GPU TESTS" "$OUT/golden.log")
      ;;
    bench)
      for t in $BENCH_TYPES; do
        b=/tmp/v100-bench-llama1B-$t
        log="$OUT/bench-$t.log"
        [ -n "${writer[$t]:-}" ] && wait "${writer[$t]}"
        touch "$log.tmp"
        run_step "bench-$t" 80 "$log" "${JAVA[@]}" dev.v100.runtime.cli.V100Run bench "$b" --backend cuda --gpu-memory 0.5 --decode-tokens 64
        cat "$log.tmp" "$log" > "$log.all" && mv "$log.all" "$log" && rm -f "$log.tmp"
        notes[bench-$t]=$(grep -E "^\| decode batch 1" "$log" | cut -d'|' -f3 | xargs)
      done
      ;;
    *) echo "unknown step $s (info tests golden bench)" >&2 ;;
  esac
done

{
  echo
  echo "== summary ($(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
  printf '| %-14s | %-7s | %5s | %s\n' step result secs notes
  printf '|%s|%s|%s|%s\n' "----------------" "---------" "-------" "------"
  for n in "${names[@]}"; do
    r=${rc[$n]}
    res=PASS
    [ "$r" != 0 ] && res="FAIL($r)"
    [ "$r" = 124 ] && res=TIMEOUT
    printf '| %-14s | %-7s | %5s | %s\n' "$n" "$res" "${secs[$n]}" "${notes[$n]:-}"
  done
  for t in $BENCH_TYPES; do
    if [ -f "$OUT/bench-$t.log" ]; then
      echo
      echo "bench $t (Llama-3.2-1B geometry, random weights):"
      grep -E "^\|" "$OUT/bench-$t.log"
    fi
  done
  for f in gpu-tests golden; do
    [ -f "$OUT/$f.txt" ] && { echo; echo "$f failures:"; grep -A3 -E "^(FAIL|ABORTED)" "$OUT/$f.txt" | head -40; }
  done
} | tee "$OUT/summary.txt"
