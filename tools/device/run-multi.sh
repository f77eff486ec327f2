#!/usr/bin/env bash
# Runs ON the 2-GPU machine (device kind nvidia-h200-x2; .device/ from tools/device/build.sh brings the JRE
# and the class path): ranks on several GPUs over NCCL. Steps:
#   info    the GPUs, their link (nvidia-smi topo), each opened by the backend, the NCCL the binding loads
#   tests   MultiGpuNcclTest (all-reduce vs host sums, hand-off ordering, timings, grouped issue),
#           MultiGpuModelTest (tp 2 / pp 2 / KV-head replication vs tp 1 on one GPU; one rank on its worker
#           vs the plain one-GPU path, bit for bit), MultiGpuNcclAbortTest (a failed rank releases its peer)
#           -- one JVM per class
#   golden  MultiGpuGoldenTest: every committed fixture at tp 2 and pp 2 on GPUs 0,1 vs transformers and vs tp 1
#   bench   Llama-3.1-8B geometry, Q4_K (BENCH_GEOMETRY, BENCH_TYPE; random weights written here in the background
#           by BenchBundleMain, one bundle per layout): tp 1 on GPU 0, tp 2 and pp 2 on GPUs 0,1 (decode tok/s,
#           weights per rank, all-reduce ms per step)
# A failing step does not stop the others; a summary table is printed last. Reports go to $OUT (7 files).
#
# Device tool: kind "nvidia-h200-x2", carry [".device"], command "bash tools/device/run-multi.sh", timeout 600.
# The step limits add up to 565 s. STEPS="info tests golden bench" selects steps (two calls if needed:
# STEPS="info tests", then STEPS="golden bench"); NCCL_ISSUE=grouped issues NCCL calls in groups from the
# model's thread instead of each rank's worker (-Dv100.nccl.issue).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
OUT=${OUT:-$root/.device/out}
LOGS=/tmp/v100-multi-logs
mkdir -p "$OUT" "$LOGS"
STEPS=${STEPS:-"info tests golden bench"}
BENCH_TYPE=${BENCH_TYPE:-Q4_K}
BENCH_GEOMETRY=${BENCH_GEOMETRY:-llama8B}
BENCH_LAYOUTS=${BENCH_LAYOUTS:-"1x1 2x1 1x2"}   # qwen36-35B-A3B: "1x1 2x1" (its writer has pp 1 only)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# NVLink multicast stays off on these shared hosts (the runtime also sets NCCL_NVLS_ENABLE=0 in-process)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export CUDA_CACHE_MAXSIZE=1073741824
if [ ! -x .device/jre/bin/java ]; then
  echo "no .device/jre: run tools/device/build.sh on the build machine and carry .device" >&2
  exit 2
fi
# the kernels jar's PTX travel beside it as xz (build.sh): put them back before any Java starts
bash tools/device/put-ptx.sh || exit 2
JAVA=(.device/jre/bin/java --enable-native-access=ALL-UNNAMED -Xmx24g -XX:+UseParallelGC -cp ".device/lib/*:golden-tests/src/test/resources")
[ -n "${NCCL_ISSUE:-}" ] && JAVA+=(-Dv100.nccl.issue="$NCCL_ISSUE")
.device/jre/bin/java --list-modules 2>/dev/null | grep -q '^jdk.incubator.vector' && JAVA+=(--add-modules jdk.incubator.vector)

names=()
declare -A rc secs notes
bench=/tmp/v100-multi-bench-$BENCH_GEOMETRY-$BENCH_TYPE
writer=
if [[ " $STEPS " == *" bench "* ]] && [ ! -d "$bench-tp2pp1" ]; then
  timeout 300 "${JAVA[@]}" -Xmx4g dev.v100.runtime.cuda.BenchBundleMain "$bench" "$BENCH_TYPE" "$BENCH_GEOMETRY" $BENCH_LAYOUTS > "$LOGS/bench-write.log" 2>&1 &
  writer=$!
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
  tail -n 20 "$log"
  [ "$r" = 124 ] && echo "!!! $name timed out after ${limit}s"
  return 0
}

for s in $STEPS; do
  case $s in
    info)
      { nvidia-smi -L 2>&1; nvidia-smi topo -m 2>&1; echo; } > "$OUT/info.log"
      run_step info 30 "$LOGS/info.log" "${JAVA[@]}" dev.v100.runtime.cuda.MultiGpuInfoMain
      cat "$LOGS/info.log" >> "$OUT/info.log"
      notes[info]=$(grep -m1 "^NCCL" "$LOGS/info.log" | cut -c1-60)
      ;;
    tests)
      : > "$OUT/gpu-tests.txt"
      for c in MultiGpuNcclTest:60 MultiGpuModelTest:120 MultiGpuNcclAbortTest:40; do
        cls=${c%%:*}
        run_step "$cls" "${c##*:}" "$LOGS/$cls.log" "${JAVA[@]}" dev.v100.runtime.cuda.GpuTestMain "$LOGS/$cls.txt" "dev.v100.runtime.cuda.$cls"
        notes[$cls]=$(grep -m1 "^GPU TESTS" "$LOGS/$cls.log" | sed 's/ (details.*//')
        { echo "== $cls"; cat "$LOGS/$cls.txt" 2>/dev/null; grep -E "NMSE vs tp 1" "$LOGS/$cls.log"; } >> "$OUT/gpu-tests.txt"
      done
      ;;
    golden)
      run_step golden 180 "$LOGS/golden.log" "${JAVA[@]}" dev.v100.runtime.cuda.GpuTestMain "$OUT/golden.txt" dev.v100.golden.MultiGpuGoldenTest
      notes[golden]=$(grep -m1 "^GPU TESTS" "$LOGS/golden.log" | sed 's/ (details.*//')
      ;;
    bench)
      [ -n "$writer" ] && wait "$writer"
      cp "$LOGS/bench-write.log" "$OUT/bench-write.log" 2>/dev/null
      for l in "tp1 tp1pp1 0," "tp2 tp2pp1 0,1" "pp2 tp1pp2 0,1"; do
        set -- $l
        [ -d "$bench-$2" ] || continue   # a layout not written (BENCH_LAYOUTS)
        log="$OUT/bench-$1.log"
        run_step "bench-$1" 60 "$log" "${JAVA[@]}" dev.v100.runtime.cli.V100Run bench "$bench-$2" --backend cuda --gpus "$3" \
          --gpu-memory 0.5 --decode-tokens 64
        notes[bench-$1]=$(grep -E "^\| decode batch 1" "$log" | cut -d'|' -f3 | xargs)
      done
      ;;
    *) echo "unknown step $s (info tests golden bench)" >&2 ;;
  esac
done

{
  echo
  echo "== summary ($(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs))"
  printf '| %-22s | %-7s | %5s | %s\n' step result secs notes
  printf '|%s|%s|%s|%s\n' "----------------------" "---------" "-------" "------"
  for n in "${names[@]}"; do
    r=${rc[$n]}
    res=PASS
    [ "$r" != 0 ] && res="FAIL($r)"
    [ "$r" = 124 ] && res=TIMEOUT
    printf '| %-22s | %-7s | %5s | %s\n' "$n" "$res" "${secs[$n]}" "${notes[$n]:-}"
  done
  for b in tp1 tp2 pp2; do
    if [ -f "$OUT/bench-$b.log" ]; then
      echo
      echo "bench $b ($BENCH_GEOMETRY geometry, $BENCH_TYPE, random weights):"
      grep -E "^\|" "$OUT/bench-$b.log"
    fi
  done
  for f in gpu-tests golden; do
    [ -f "$OUT/$f.txt" ] && { echo; echo "$f failures:"; grep -A3 -E "^(FAIL|ABORTED)" "$OUT/$f.txt" | head -40; }
  done
} | tee "$OUT/summary.txt"
