#!/usr/bin/env bash
# Runs ON the GPU machine (no Java, no Maven there: .device/ from tools/device/build.sh brings both the
# JRE and the class path): the kernel/device probe, every GPU test (ops, matmul paths, attention,
# whole models against the CPU backend), the GPU golden check (committed fixtures converted there and
# run on CUDA against transformers' logits), and bench on synthetic Llama-3.2-1B-geometry bundles.
# A failing step does not stop the others; a table of all of them is printed last. Logs go to $OUT.
#
# Device tool: carry [".device"], command "bash tools/device/run.sh", timeout 600. Every step has its own
# time limit (together under 10 minutes); STEPS="info tests golden kbench bench coldstart ab lab trace ktrace ncu" selects steps (e.g. two
# calls: STEPS="info tests golden", then STEPS="kbench bench hf"), BENCH_SETS="llama8B:Q4_K ..." the bench
# bundles (GEOMETRY:TYPE, GEOMETRY llama1B / llama8B / qwen3-8B / qwen25-7B / granite-8B / qwen36-35B-A3B / qwen35-27B, TYPE a ggml type, Q4_K_M / Q5_K_M / Q3_K_M / Q2_K_MIX (llama.cpp's mixes) or W4A16-gG; see BenchBundleMain), HF_GEOMETRY the geometry of
# the transformers eager baseline (step hf: tools/device/hf_eager_bench.py on the same GPU; qwen36-35B-A3B for the
# MoE, qwen35-27B for the dense hybrid, with HF_TIMEOUT (seconds, default 240; the MoE baseline took 43 s on the H200,
# the 27B's 45 s, 2026-12-01). The tests step's classes take at most 350 s together (they took 5-40 s each on the H200).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
OUT=${OUT:-$root/.device/out}
LOGS=/tmp/v100-device-logs   # raw test output; $OUT gets the reports (the device tool returns at most 8 files)
mkdir -p "$OUT" "$LOGS"
STEPS=${STEPS:-"info tests golden kbench bench hf"}
BENCH_SETS=${BENCH_SETS:-"llama1B:Q4_K llama8B:Q4_K llama8B:Q4_K_M llama8B:W4A16-g128 qwen36-35B-A3B:Q8_0"}
HF_GEOMETRY=${HF_GEOMETRY:-llama8B}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# keep NCCL off NVLink multicast on the shared hosts (not used here, but never risk it)
export NCCL_NVLS_ENABLE=0
# the first process to launch a kernel compiles its compute_70 PTX for this GPU (driver JIT); the later ones reuse the
# cache. JIT_CACHE=fresh starts this call from an empty cache (what a fresh machine's first start pays: cold-start
# measurements); JIT_CACHE=off disables it (every process compiles again)
export CUDA_CACHE_MAXSIZE=1073741824
case ${JIT_CACHE:-} in
  fresh) export CUDA_CACHE_PATH=$(mktemp -d /tmp/v100-jit-cache.XXXXXX); trap 'rm -rf "$CUDA_CACHE_PATH"' EXIT ;;
  off) export CUDA_CACHE_DISABLE=1 ;;
  "") ;;
  *) echo "JIT_CACHE=$JIT_CACHE: fresh, off or unset" >&2; exit 2 ;;
esac
if [ ! -x .device/jre/bin/java ]; then
  echo "no .device/jre: run tools/device/build.sh on the build machine and carry .device" >&2
  exit 2
fi
# the kernels jar's PTX travel beside it as xz (build.sh): put them back before any Java starts
bash tools/device/put-ptx.sh || exit 2
JAVA=(.device/jre/bin/java --enable-native-access=ALL-UNNAMED -Xmx24g -XX:+UseParallelGC -cp ".device/lib/*:golden-tests/src/test/resources")
# TEST_CLASSES="CudaHybridOpsTest:30 ..." (class:seconds): the tests step's classes, default all of them
# V100_JAVA_OPTS: extra JVM options for every step (e.g. -Dv100.firstChunkOps=128 to compare a measurement knob)
[ -n "${V100_JAVA_OPTS:-}" ] && JAVA+=($V100_JAVA_OPTS)
# the smallest JRE build.sh makes leaves the Vector API out (nothing on the device needs it)
.device/jre/bin/java --list-modules 2>/dev/null | grep -q '^jdk.incubator.vector' && JAVA+=(--add-modules jdk.incubator.vector)

names=()
declare -A rc secs notes

# the bench bundles are written in the background while the tests run (the CPU is otherwise idle)
declare -A writer
rm -f "$LOGS"/*.written   # (an earlier call's on a machine still warm: its writer may have failed)
# (one after another: each fills its tensors on every core)
if [[ " $STEPS " == *" bench "* || " $STEPS " == *" coldstart "* || " $STEPS " == *" ab "* || " $STEPS " == *" trace "* || " $STEPS " == *" ktrace "* || " $STEPS " == *" ncu "* ]]; then
  (
    for set in $BENCH_SETS; do
      g=${set%%:*} t=${set#*:}
      b=/tmp/v100-bench-$g-$t
      [ -d "$b-tp1pp1" ] || timeout 400 "${JAVA[@]}" -Xmx4g dev.v100.runtime.cuda.BenchBundleMain "$b" "$t" "$g" 1x1 > "$LOGS/bench-$g-$t.write.log" 2>&1
      touch "$LOGS/bench-$g-$t.written"
    done
  ) &
fi

# JAVA_BASE, the "base" of the ab step (and of KTRACE_VARIANTS="new base", NCU_VARIANTS="new base"): JAVA with the
# kernels jar's PTX replaced by .device/base-kernels.tar.xz's (build.sh BASE_PTX_DIR=...; an earlier build of the same
# kernel catalog and kernels.tsv format: from 0e96976 on), and/or with the JVM options BASE_OPTS (a knob's A/B, e.g.
# BASE_OPTS=-Dv100.cuda.shapeKernels=false). Where this build added a kernel that the earlier one ran as another (a
# form split out of a kernel), BASE_OPTS=-Dv100.cuda.kernelAliases=new=old,... lets the base launch old for new
# (CudaDevice.KERNEL_ALIASES_PROPERTY). Fails (and the base runs are skipped) where neither is given or the jar
# cannot be made: a base that silently ran this build's kernels would compare a build with itself.
base_java() {
  [ ${#JAVA_BASE[@]} -gt 0 ] && return 0
  local base=("${JAVA[@]}")
  if [ -f .device/base-kernels.tar.xz ]; then
    local base_lib=/tmp/v100-base-lib ptx=/tmp/v100-base-ptx
    rm -rf "$base_lib" "$ptx"
    mkdir -p "$base_lib" "$ptx/dev/v100/kernels/cuda/ptx"
    for j in .device/lib/*.jar; do case $j in *v100-kernels-*) cp "$j" "$base_lib/" ;; *) ln -s "$root/$j" "$base_lib/" ;; esac; done
    if ! xz -dc .device/base-kernels.tar.xz | tar -C "$ptx/dev/v100/kernels/cuda/ptx" -xf - \
        || ! python3 tools/device/jar_put.py "$base_lib"/v100-kernels-*.jar "$ptx"; then
      echo "!!! the base kernels jar could not be made: base runs skipped" >&2
      return 1
    fi
    base=()
    for a in "${JAVA[@]}"; do [[ $a == .device/lib/* ]] && a=${a/.device\/lib\//$base_lib/}; base+=("$a"); done
  elif [ -z "${BASE_OPTS:-}" ]; then
    echo "!!! no base: build with BASE_PTX_DIR=... tools/device/build.sh, or set BASE_OPTS" >&2
    return 1
  fi
  JAVA_BASE=("${base[@]}" ${BASE_OPTS:-})
}
JAVA_BASE=()

# waits (up to 400 s) until the background writer is done with bundle set GEOMETRY:TYPE (its .written marker)
await_bundle() {   # geometry type
  for _ in $(seq 400); do [ -f "$LOGS/bench-$1-$2.written" ] && return 0; sleep 1; done
}

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
      run_step info 90 "$LOGS/info.log" "${JAVA[@]}" dev.v100.runtime.cuda.CudaInfo
      cat "$LOGS/info.log" >> "$OUT/info.log"
      notes[info]=$(grep -m1 "loaded in" "$OUT/info.log")
      ;;
    tests)
      # one JVM per test class: a sticky CUDA error (an illegal address) in one class cannot fail the others
      : > "$OUT/gpu-tests.txt"
      for c in ${TEST_CLASSES:-CudaOpsTest:90 CudaMatmulTest:90 CudaAttentionTest:180 CudaHybridOpsTest:90 CudaPrecisionTest:30 CudaModelTest:60}; do
        cls=${c%%:*}
        run_step "$cls" "${c##*:}" "$LOGS/$cls.log" "${JAVA[@]}" dev.v100.runtime.cuda.GpuTestMain "$LOGS/$cls.txt" "dev.v100.runtime.cuda.$cls"
        notes[$cls]=$(grep -m1 "^GPU TESTS" "$LOGS/$cls.log" | sed 's/ (details.*//')
        { echo "== $cls"; cat "$LOGS/$cls.txt" 2>/dev/null; } >> "$OUT/gpu-tests.txt"
      done
      ;;
    golden)
      run_step golden 150 "$LOGS/golden.log" "${JAVA[@]}" dev.v100.runtime.cuda.GpuTestMain "$OUT/golden.txt" dev.v100.golden.CudaGoldenTest
      notes[golden]=$(grep -m1 "^GPU TESTS" "$LOGS/golden.log" | sed 's/ (details.*//')
      ;;
    kbench)
      run_step kbench 60 "$OUT/kbench.log" "${JAVA[@]}" dev.v100.runtime.cuda.CudaKernelBench
      notes[kbench]=$(grep -m1 "device copy" "$OUT/kbench.log" | sed 's/.*; //')
      ;;
    bench)
      for set in $BENCH_SETS; do
        g=${set%%:*} t=${set#*:}
        b=/tmp/v100-bench-$g-$t-tp1pp1
        log="$OUT/bench-$g-$t.log"
        await_bundle "$g" "$t"
        touch "$LOGS/bench-$g-$t.write.log"
        run_step "bench-$g-$t" 150 "$log" "${JAVA[@]}" dev.v100.runtime.cli.V100Run bench "$b" --backend cuda --gpu-memory 0.5 --decode-tokens 64
        cat "$LOGS/bench-$g-$t.write.log" "$log" > "$LOGS/bench.all" && mv "$LOGS/bench.all" "$log"
        notes[bench-$g-$t]=$(grep -E "^\| decode batch 1" "$log" | cut -d'|' -f3 | xargs)
      done
      ;;
    coldstart)
      # the first bench set's bench from an empty JIT cache, each variant in its own (what the first start on a fresh
      # machine pays): COLDSTART_VARIANTS (default "first-launch modules"), values of -Dv100.cuda.kernelLoading: each
      # kernel JIT-compiled at its first launch, or every PTX module whole at open (as before 2026-12-02). Name the set
      # (BENCH_SETS="llama8B:Q4_K": the default's first is the 1B); each variant may take 200 s: keep the call's other
      # steps few. (With JIT_CACHE=off no variant caches anything at all.)
      set0=${BENCH_SETS%% *}
      g=${set0%%:*} t=${set0#*:}
      b=/tmp/v100-bench-$g-$t-tp1pp1
      await_bundle "$g" "$t"
      : > "$OUT/coldstart.txt"
      for v in ${COLDSTART_VARIANTS:-first-launch modules}; do
        cache=$(mktemp -d /tmp/v100-jit-cold.XXXXXX)
        run_step "coldstart-$v" 200 "$LOGS/coldstart-$v.log" env CUDA_CACHE_PATH="$cache" "${JAVA[@]}" -Dv100.cuda.kernelLoading="$v" \
            dev.v100.runtime.cli.V100Run bench "$b" --backend cuda --gpu-memory 0.5 --decode-tokens 64
        { echo "== $g $t, -Dv100.cuda.kernelLoading=$v, empty JIT cache"
          grep -E '^\| (cold start|kernels JIT|prefill|decode batch [18] \|)' "$LOGS/coldstart-$v.log"; echo; } >> "$OUT/coldstart.txt"
        notes[coldstart-$v]=$(grep -E "^\| cold start" "$LOGS/coldstart-$v.log" | cut -d'|' -f3 | xargs)
        rm -rf "$cache"
      done
      ;;
    ab)
      # the same bench with this build's kernels and with .device/base-kernels.tar.xz's (build.sh BASE_PTX_DIR=...),
      # alternating, AB_ROUNDS rounds (default 2): a difference smaller than one version's spread is noise
      if base_java 2> "$OUT/ab.txt"; then
        : > "$OUT/ab.txt"
        for set in $BENCH_SETS; do
          g=${set%%:*} t=${set#*:}
          b=/tmp/v100-bench-$g-$t-tp1pp1
          await_bundle "$g" "$t"
          for round in $(seq "${AB_ROUNDS:-2}"); do
            for v in new base; do
              if [ $v = new ]; then cmd=("${JAVA[@]}"); else cmd=("${JAVA_BASE[@]}"); fi
              run_step "ab-$g-$t-$v-$round" 150 "$LOGS/ab-$g-$t-$v-$round.log" "${cmd[@]}" dev.v100.runtime.cli.V100Run bench "$b" \
                  --backend cuda --gpu-memory 0.5 --decode-tokens 64
              line="$g $t $v round $round: $(grep -E '^\| decode batch [18] \|' "$LOGS/ab-$g-$t-$v-$round.log" | cut -d'|' -f2,3 | tr -s ' ' | paste -sd';')"
              echo "$line" >> "$OUT/ab.txt"
              notes[ab-$g-$t-$v-$round]=$(grep -E "^\| decode batch 1 \|" "$LOGS/ab-$g-$t-$v-$round.log" | cut -d'|' -f3 | xargs)
            done
          done
        done
      fi
      ;;
    trace)
      # the first bench set's decode under Nsight Systems, CUDA graphs traced node by node: each kernel's time
      # inside the replayed graphs (bench's own profile times kernels alone, with launch overhead)
      NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
      if [ -z "$NSYS" ]; then
        echo "no nsys on this machine" > "$OUT/trace.txt"
      else
        set0=${BENCH_SETS%% *}
        g=${set0%%:*} t=${set0#*:}
        b=/tmp/v100-bench-$g-$t-tp1pp1
        await_bundle "$g" "$t"
        run_step trace 200 "$LOGS/trace.log" "$NSYS" profile --trace=cuda --cuda-graph-trace=node --force-overwrite=true -o /tmp/v100-trace \
            "${JAVA[@]}" dev.v100.runtime.cli.V100Run bench "$b" --backend cuda --gpu-memory 0.5 --decode-tokens 64
        "$NSYS" stats --report cuda_gpu_kern_sum --format csv /tmp/v100-trace.nsys-rep > "$OUT/trace-kernels.csv" 2>> "$LOGS/trace.log"
        head -40 "$OUT/trace-kernels.csv" > "$OUT/trace.txt"
        notes[trace]="$g $t: $(wc -l < "$OUT/trace-kernels.csv") kernel names"
      fi
      ;;
    lab)
      # the GEMV lab (tools/device/gemv_lab.cu, the GPU machine's own nvcc, sm_90) built once per LAB_DEFS variant
      # (space-separated; a variant's -D flags joined by commas, e.g. LAB_DEFS="GEMV_WEIGHT_L1=0 -"; "-"
      # for none) and run with each of LAB_ARGS's argument sets (separated by ";", default "8 q4_K") LAB_ROUNDS times (default 2), the variants alternating
      NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null | head -1)
      : > "$OUT/lab.txt"
      if [ -z "$NVCC" ]; then
        echo "no nvcc on this machine" >> "$OUT/lab.txt"; names+=(lab); rc[lab]=127; secs[lab]=0; notes[lab]="no nvcc"
      else
        # the builds in parallel (each ~20 s), waited for by pid (the bench bundles' writer may run in the background too);
        # a build that fails leaves no binary, and its variant is skipped with its log in lab.txt
        pids=() vi=0
        for v in ${LAB_DEFS:--}; do
          flags=()
          if [ "$v" != - ]; then for d in ${v//,/ }; do flags+=("-D$d"); done; fi
          rm -f /tmp/gemv_lab$vi
          timeout 300 "$NVCC" -O3 -std=c++17 -arch=sm_90 ${flags[@]+"${flags[@]}"} -I kernels/src/main/cuda -o /tmp/gemv_lab$vi \
            tools/device/gemv_lab.cu -lcuda > "$LOGS/lab-build$vi.log" 2>&1 &
          pids+=($!)
          vi=$((vi + 1))
        done
        vi=0
        for v in ${LAB_DEFS:--}; do
          wait "${pids[$vi]}"
          r=$?
          names+=("lab-build-$vi"); rc[lab-build-$vi]=$r; secs[lab-build-$vi]=0; notes[lab-build-$vi]="variant $v"
          [ $r = 0 ] || { echo "== variant $v: the build failed ($r)"; cat "$LOGS/lab-build$vi.log"; echo; } >> "$OUT/lab.txt"
          vi=$((vi + 1))
        done
        IFS=';' read -ra labsets <<< "${LAB_ARGS:-8 q4_K}"
        for ai in "${!labsets[@]}"; do
          for round in $(seq 1 "${LAB_ROUNDS:-2}"); do
            vi=0
            for v in ${LAB_DEFS:--}; do
              n=lab-$ai-$vi-$round
              if [ -x /tmp/gemv_lab$vi ]; then
                run_step "$n" 120 "$LOGS/$n.log" /tmp/gemv_lab$vi ${labsets[$ai]}
                { echo "== gemv_lab ${labsets[$ai]}: variant $v, round $round"; cat "$LOGS/$n.log"; echo; } >> "$OUT/lab.txt"
              fi
              vi=$((vi + 1))
            done
          done
        done
      fi
      ;;
    ktrace)
      # each bench set's decode with every kernel's GPU time recorded where it runs (inside the replayed graphs)
      # by a CUPTI injection library (tools/device/kernel_trace.c; the image has no nsys), summed per graph
      # replay by tools/device/kernel_trace.py
      cupti_inc=$(dirname "$(ls /usr/local/cuda/include/cupti.h /usr/local/cuda/extras/CUPTI/include/cupti.h 2>/dev/null | head -1)")
      cupti_lib=$(dirname "$(ls /usr/local/cuda/lib64/libcupti.so /usr/local/cuda/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)")
      if ! gcc -O2 -shared -fPIC -I/usr/local/cuda/include -I"$cupti_inc" -o /tmp/libktrace.so tools/device/kernel_trace.c \
          -L"$cupti_lib" -lcupti -Wl,-rpath,"$cupti_lib" > "$LOGS/ktrace-build.log" 2>&1; then
        cp "$LOGS/ktrace-build.log" "$OUT/ktrace.txt"
      else
        : > "$OUT/ktrace.txt"
        for set in $BENCH_SETS; do
          g=${set%%:*} t=${set#*:}
          b=/tmp/v100-bench-$g-$t-tp1pp1
          await_bundle "$g" "$t"
          for v in ${KTRACE_VARIANTS:-new}; do
            if [ $v = base ]; then base_java || continue; cmd=("${JAVA_BASE[@]}"); n=ktrace-$g-$t-base; else cmd=("${JAVA[@]}"); n=ktrace-$g-$t; fi
            run_step "$n" 200 "$LOGS/$n.log" env CUDA_INJECTION64_PATH=/tmp/libktrace.so KTRACE_OUT=/tmp/v100-ktrace.tsv \
              "${cmd[@]}" dev.v100.runtime.cli.V100Run bench "$b" --backend cuda --gpu-memory 0.5 --decode-tokens 64
            { echo "== $g $t ($v kernels)"; python3 tools/device/kernel_trace.py /tmp/v100-ktrace.tsv 2>&1; echo; } >> "$OUT/ktrace.txt"
            notes[$n]="$(grep -E '^\| decode batch 1' "$LOGS/$n.log" | cut -d'|' -f3 | xargs) traced"
          done
        done
      fi
      ;;
    ncu)
      # Nsight Compute on the first bench set's decode: the kernels named by NCU_KERNELS (a regex of kernel names),
      # NCU_COUNT launches of them after NCU_SKIP (past the prefill and the first steps), graph nodes profiled one by
      # one; the report's stall reasons and, per SASS instruction, where the warps waited (ncu.txt, ncu-sass.csv)
      set0=${BENCH_SETS%% *}
      g=${set0%%:*} t=${set0#*:}
      b=/tmp/v100-bench-$g-$t-tp1pp1
      await_bundle "$g" "$t"
      NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
      # NCU_VARIANTS="new base": also the base kernels' (ncu-base.txt, ncu-base-summary.txt; see the ab step)
      for v in ${NCU_VARIANTS:-new}; do
        if [ $v = base ]; then base_java || continue; cmd=("${JAVA_BASE[@]}"); sfx=-base; else cmd=("${JAVA[@]}"); sfx=; fi
        run_step ncu$sfx 300 "$LOGS/ncu$sfx.log" "$NCU" --clock-control none --kernel-name "regex:^(${NCU_KERNELS:-moe_route})\$" \
            --launch-skip "${NCU_SKIP:-2000}" --launch-count "${NCU_COUNT:-4}" --section SpeedOfLight --section WarpStateStats \
            --section LaunchStats --section Occupancy --section SourceCounters -f -o /tmp/v100-ncu$sfx \
            "${cmd[@]}" dev.v100.runtime.cli.V100Run bench "$b" --backend cuda --gpu-memory 0.5 --decode-tokens 64
        "$NCU" --import /tmp/v100-ncu$sfx.ncu-rep --print-summary none > "$OUT/ncu$sfx.txt" 2>&1
        "$NCU" --import /tmp/v100-ncu$sfx.ncu-rep --page source --print-source sass --csv > "$OUT/ncu$sfx-sass.csv" 2>> "$OUT/ncu$sfx.txt"
        # per kernel: warps, executed instructions a warp by opcode, the lines where warps waited (also runs on the copy in $OUT)
        if command -v python3 > /dev/null; then
          python3 tools/device/ncu_summary.py "$OUT/ncu$sfx-sass.csv" > "$OUT/ncu$sfx-summary.txt" 2>&1 || true
        fi
        notes[ncu$sfx]="$(grep -c '^  [a-z_0-9]* (' "$OUT/ncu$sfx.txt") kernels profiled"
      done
      ;;
    hf)
      run_step hf-eager "${HF_TIMEOUT:-240}" "$OUT/hf-eager-$HF_GEOMETRY.log" python3 tools/device/hf_eager_bench.py --geometry "$HF_GEOMETRY" --device cuda --dtype float16
      notes[hf-eager]=$(grep -E "^\| decode batch 1" "$OUT/hf-eager-$HF_GEOMETRY.log" | cut -d'|' -f3 | xargs)
      ;;
    *) echo "unknown step $s (info tests golden kbench bench ab trace ktrace ncu hf)" >&2 ;;
  esac
done

{
  echo
  echo "== summary ($(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
  printf '| %-18s | %-7s | %5s | %s\n' step result secs notes
  printf '|%s|%s|%s|%s\n' "----------------" "---------" "-------" "------"
  for n in "${names[@]}"; do
    r=${rc[$n]}
    res=PASS
    [ "$r" != 0 ] && res="FAIL($r)"
    [ "$r" = 124 ] && res=TIMEOUT
    printf '| %-18s | %-7s | %5s | %s\n' "$n" "$res" "${secs[$n]}" "${notes[$n]:-}"
  done
  for set in $BENCH_SETS; do
    g=${set%%:*} t=${set#*:}
    if [ -f "$OUT/bench-$g-$t.log" ]; then
      echo
      echo "bench $t ($g geometry, random weights):"
      grep -E "^\||^decode step kernels|^  " "$OUT/bench-$g-$t.log"
    fi
  done
  if [ -f "$OUT/hf-eager-$HF_GEOMETRY.log" ]; then
    echo
    echo "transformers eager ($HF_GEOMETRY geometry, random fp16 weights, same GPU):"
    grep -E "^\|" "$OUT/hf-eager-$HF_GEOMETRY.log"
  fi
  if [ -f "$OUT/ab.txt" ]; then
    echo
    echo "ab (this build's kernels: new; .device/base-kernels.tar.xz's: base):"
    cat "$OUT/ab.txt"
  fi
  if [ -f "$OUT/ktrace.txt" ]; then
    echo
    echo "kernels inside the graphs (ktrace):"
    cat "$OUT/ktrace.txt"
  fi
  if [ -f "$OUT/kbench.log" ]; then
    echo
    echo "kernels (random data, median of 20):"
    grep -E "^\||^attention" "$OUT/kbench.log"
  fi
  for f in gpu-tests golden; do
    [ -f "$OUT/$f.txt" ] && { echo; echo "$f failures:"; grep -A3 -E "^(FAIL|ABORTED)" "$OUT/$f.txt" | head -40; }
  done
} | tee "$OUT/summary.txt"
