#!/usr/bin/env bash
# On the GPU machine, before any Java starts (run.sh, run-multi.sh): the kernels jar's PTX travel beside it as
# .device/kernels-ptx.tar.xz (build.sh: ~1 MB less than deflated inside the jar); this puts them back into the jar.
# Nothing to do when the jar already holds them (no archive).
set -euo pipefail
cd "$(dirname "$0")/../.."
archive=.device/kernels-ptx.tar.xz
[ -f "$archive" ] || exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/dev/v100/kernels/cuda/ptx"
xz -dc "$archive" | tar -C "$tmp/dev/v100/kernels/cuda/ptx" -xf -
python3 tools/device/jar_put.py .device/lib/v100-kernels-*.jar "$tmp"
rm -f "$archive"
