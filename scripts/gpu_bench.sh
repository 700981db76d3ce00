#!/usr/bin/env bash
# GPU benchmark of the CUDA logits reference (issue #16 shapes) beside its torch peers, in one run on a GPU machine:
#   ragged S 8192 x N 65536, H 64, D 128, causal;  paged B 64 x context 128K, next_n 2, H 64, D 128.
# Builds Release with CUDA into build-gpu (if not built), then bench/gpu_logits.cpp and bench/torch_peer_gpu.py.
#   bash scripts/gpu_bench.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
export CC="${CC:-/usr/bin/gcc}" CXX="${CXX:-/usr/bin/g++}"
B="${BUILD_DIR:-$ROOT/build-gpu}"
if [ ! -x "$B/dsa_gpu_bench" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDSA_BUILD_BENCH=OFF -DDSA_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
  cmake --build "$B" -j "$(nproc)" >/dev/null
fi
echo "== $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u +%F)"
"$B/dsa_gpu_bench" ragged 8192 65536 64 128
python3 bench/torch_peer_gpu.py ragged 8192 65536 64 128
"$B/dsa_gpu_bench" paged 64 131072 2 64 128
python3 bench/torch_peer_gpu.py paged 64 131072 2 64 128
# End to end: the 128K x 64-request paged dump loaded, referenced on the GPU and compared (and on the CPU for scale).
python3 bench/gpu_e2e_paged.py "$B/dsa-check" "${GPU_BENCH_WORK:-/tmp/dsa_gpu_bench}"
