#!/usr/bin/env bash
# Builds Release with benchmarks and runs the logits benchmarks, the fp64 FMA peak, the sparse MLA decode, V4 sparse
# attention decode and V4 compressor benchmarks and their numpy peers.
# DSA_BENCH_THREADS (default 2) threads; results go to stdout (copy the table into bench/README.md).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-bench}"
export DSA_BENCH_THREADS="${DSA_BENCH_THREADS:-2}"
BUILD_DIR="$BUILD_DIR" bash "$ROOT/scripts/build.sh" -DCMAKE_BUILD_TYPE=Release -DDSA_BUILD_BENCH=ON -DDSA_WITH_CUDA=OFF
echo "== machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(date -u +%F)"
"$BUILD_DIR/bench/dsa_bench_logits" --benchmark_counters_tabular=true "$@"
echo "== numpy peer (fp64, ${DSA_BENCH_THREADS} threads)"
OMP_NUM_THREADS="$DSA_BENCH_THREADS" OPENBLAS_NUM_THREADS="$DSA_BENCH_THREADS" MKL_NUM_THREADS="$DSA_BENCH_THREADS" \
  python3 "$ROOT/bench/numpy_peer.py"
echo "== sparse MLA decode reference (b 64, s_q 2, h_q 128, topk 2048), V4 sparse attention decode (64 rows, 64 heads, ~520 keys) and v4 compressor 32K prefill"
"$BUILD_DIR/bench/dsa_bench_attn" --benchmark_counters_tabular=true
echo "== numpy attention peer (fp64, ${DSA_BENCH_THREADS} threads)"
OMP_NUM_THREADS="$DSA_BENCH_THREADS" OPENBLAS_NUM_THREADS="$DSA_BENCH_THREADS" MKL_NUM_THREADS="$DSA_BENCH_THREADS" \
  python3 "$ROOT/bench/numpy_peer_attn.py"
echo "== numpy v4 sparse attention decode peer (fp64, ${DSA_BENCH_THREADS} threads)"
OMP_NUM_THREADS="$DSA_BENCH_THREADS" OPENBLAS_NUM_THREADS="$DSA_BENCH_THREADS" MKL_NUM_THREADS="$DSA_BENCH_THREADS" \
  python3 "$ROOT/bench/numpy_peer_v4_attn.py"
echo "== numpy v4 compressor peer (fp64, ${DSA_BENCH_THREADS} threads)"
OMP_NUM_THREADS="$DSA_BENCH_THREADS" OPENBLAS_NUM_THREADS="$DSA_BENCH_THREADS" MKL_NUM_THREADS="$DSA_BENCH_THREADS" \
  python3 "$ROOT/bench/numpy_peer_v4.py"
