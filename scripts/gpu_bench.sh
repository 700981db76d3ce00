#!/usr/bin/env bash
# GPU benchmark of the CUDA logits reference (issue #16 shapes) beside its torch peers, in one run on a GPU machine:
#   ragged S 8192 x N 65536, H 64, D 128, causal;  paged B 64 x context 128K, next_n 2, H 64, D 128.
# Builds Release with CUDA into build-gpu (if not built), then bench/gpu_logits.cpp and bench/torch_peer_gpu.py.
# `attn`: the serving-size catalogue cases of the stages after the indexer (sparse MLA prefill / decode, V4 sparse
# attention, the V4 compressor's C4 / C128 decode steps and 32K prefill) and two larger ones (an 8K-token prefill, a
# 256-request decode), each generated once (the CUDA reference = expected/), then `check --backend cpu` and
# `--backend cuda` timed with DSA_TIMING=1 DSA_CUDA_STATS=1 (phase lines), and `backend-diff` (identical bytes at scale).
#   bash scripts/gpu_bench.sh [logits|attn|all]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
export CC="${CC:-/usr/bin/gcc}" CXX="${CXX:-/usr/bin/g++}"
B="${BUILD_DIR:-$ROOT/build-gpu}"
what="${1:-logits}"
if [ ! -x "$B/dsa-check" ] || { [ "$what" != attn ] && [ ! -x "$B/dsa_gpu_bench" ]; }; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDSA_BUILD_BENCH=OFF -DDSA_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
  cmake --build "$B" -j "$(nproc)" >/dev/null
fi
echo "== $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u +%F), $(nproc) CPU threads"
if [ "$what" = attn ] || [ "$what" = all ]; then
  W="${GPU_BENCH_WORK:-/tmp/dsa_gpu_bench}/attn"; mkdir -p "$W"
  for c in mla_prefill_v32_full mla_decode_v32_full v4sa_c4_flash_full v4c4_flash_full v4c128_flash_full v4c4_prefill_32k mla_decode_v32_b256 mla_prefill_v32_8k; do
    t0=$(date +%s%N); "$B/dsa-check" golden --backend cuda --case "$c" --out "$W" >/dev/null; t1=$(date +%s%N)
    echo "-- $c ($(du -m "$W/$c.h5" | cut -f1) MB; generated with the CUDA reference in $(( (t1 - t0) / 1000000 )) ms)"
    for be in cpu cuda; do
      t0=$(date +%s%N); DSA_TIMING=1 DSA_CUDA_STATS=1 "$B/dsa-check" check -q --backend "$be" "$W/$c.h5" 2>&1 | grep -E 'reference|in all|^cuda ' | sed "s/^/   $be: /"; t1=$(date +%s%N)
      echo "   $be: check wall $(( (t1 - t0) / 1000000 )) ms"
    done
    "$B/dsa-check" backend-diff --a cpu --b cuda "$W/$c.h5" | tail -1 | sed 's/^/   backend-diff: /'
  done
  [ "$what" = attn ] && exit 0
fi
"$B/dsa_gpu_bench" ragged 8192 65536 64 128
python3 bench/torch_peer_gpu.py ragged 8192 65536 64 128
"$B/dsa_gpu_bench" paged 64 131072 2 64 128
python3 bench/torch_peer_gpu.py paged 64 131072 2 64 128
# End to end: the 128K x 64-request paged dump loaded, referenced on the GPU and compared (and on the CPU for scale).
python3 bench/gpu_e2e_paged.py "$B/dsa-check" "${GPU_BENCH_WORK:-/tmp/dsa_gpu_bench}"
