#!/usr/bin/env bash
# The CUDA backend on a GPU machine: build with CUDA, the whole C++ suite, CPU vs CUDA backend-diff on the committed
# goldens of every stage (plain and with poison-filled device buffers) and on many generated cases (seeds 1..N of
# each, NaN/inf and boundary cases included by their generators), then compute-sanitizer memcheck/racecheck.
#   bash scripts/gpu_check.sh [OUT_DIR] [SEEDS]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/out/gpu}"
SEEDS="${2:-200}"
mkdir -p "$OUT"
cd "$ROOT"
export CC="${CC:-/usr/bin/gcc}" CXX="${CXX:-/usr/bin/g++}"
B="$ROOT/build-gpu"
BIN="$B/dsa-check"
if [ "${DSA_GPU_SKIP_SUITE:-0}" = 1 ]; then
  echo "doctest suite: skipped (DSA_GPU_SKIP_SUITE=1)"; : >"$OUT/ctest.log"
elif [ "${DSA_GPU_PREBUILT:-0}" = 1 ]; then
  # Binaries built elsewhere with the same CUDA (build-gpu/dsa-check and build-gpu/tests/dsa_tests carried in): the
  # doctest suite directly (ctest's files stay behind); the tests find the checkout at the path they were built in.
  n=$("$B/tests/dsa_tests" --count | sed -n 's/.*filters: \([0-9]*\).*/\1/p'); j=$(nproc); per=$(( (n + j - 1) / j )); pids=()
  for ((i = 0; i < j; i++)); do
    "$B/tests/dsa_tests" --first=$((i * per + 1)) --last=$(((i + 1) * per)) >"$OUT/ctest_$i.log" 2>&1 & pids+=($!)
  done
  fail=0; for p in "${pids[@]}"; do wait "$p" || fail=1; done
  cat "$OUT"/ctest_*.log >"$OUT/ctest.log"
  echo "doctest: $n test cases in $j range shards (--first/--last), every shard $( [ "$fail" = 0 ] && echo passed || echo "did not pass")"
  [ "$fail" = 0 ] || { grep -h -B2 -A12 "ERROR\|FAILED" "$OUT/ctest.log" | head -60; exit 1; }
else
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDSA_BUILD_BENCH=OFF -DDSA_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/configure.log" 2>&1
  cmake --build "$B" -j "$(nproc)" >"$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
  (cd "$B" && ctest -j 8 --output-on-failure >"$OUT/ctest.log" 2>&1) || { tail -60 "$OUT/ctest.log"; exit 1; }
fi
tail -3 "$OUT/ctest.log"
# Committed goldens: CPU vs CUDA on every file whose stage has a CUDA implementation (the others say so: skipped).
capable=(); nodiff=0
for f in golden/*.h5; do
  if o=$("$BIN" backend-diff --a cpu --b cuda "$f" 2>&1); then capable+=("$(basename "$f" .h5)"); nodiff=$((nodiff + 1))
  elif ! grep -q "has no cuda implementation" <<<"$o"; then echo "$o"; echo "backend-diff: $f differs"; exit 1; fi
done
echo "committed goldens: $nodiff identical on CPU and CUDA (${capable[*]})"
# Poisoned device buffers (DSA_CUDA_POISON, src/backend/cuda.hpp): every new buffer filled with 0xff (NaN in every
# float width) and then 0x5a, so an output element no kernel writes differs from the CPU in at least one run.
for pat in ff 5a; do
  DSA_CUDA_POISON=$pat "$BIN" backend-diff --a cpu --b cuda $(printf 'golden/%s.h5 ' "${capable[@]}") >"$OUT/diff_poison_$pat.log" 2>&1 ||
    { grep -v identical "$OUT/diff_poison_$pat.log" | head -20; echo "backend-diff: differs with device buffers poisoned with 0x$pat"; exit 1; }
  echo "poisoned device buffers (0x$pat): $(tail -1 "$OUT/diff_poison_$pat.log")"
done
# The logits stages once more on the mma.sync engine (the one of non-Hopper GPUs and of shapes the wgmma engine
# does not take; DSA_CUDA_LOGITS_ENGINE, logits_cuda.cu).
DSA_CUDA_LOGITS_ENGINE=mma "$BIN" backend-diff --a cpu --b cuda golden/ragged_*.h5 golden/paged_*.h5 golden/fused_*.h5 >"$OUT/diff_mma.log" 2>&1 ||
  { tail -5 "$OUT/diff_mma.log"; echo "backend-diff: the mma.sync engine differs"; exit 1; }
echo "mma.sync engine: $(tail -1 "$OUT/diff_mma.log")"
# Generated cases: those catalogue cases again with seeds 1..SEEDS (new inputs, NaN/inf and boundary values included).
G="$OUT/gen"; mkdir -p "$G"
n=0; bad=0
for seed in $(seq 1 "$SEEDS"); do
  rm -f "$G"/*.h5 "$G/MANIFEST"
  "$BIN" golden $(for c in "${capable[@]}"; do printf -- '--case %s ' "$c"; done) --seed "$seed" --out "$G" >/dev/null
  if ! "$BIN" backend-diff --a cpu --b cuda "$G"/*.h5 >"$OUT/diff_seed.log" 2>&1; then bad=$((bad + 1)); cp "$OUT/diff_seed.log" "$OUT/diff_seed_$seed.log"; fi
  n=$((n + ${#capable[@]}))
done
echo "generated cases: $n compared ($SEEDS seeds), $bad seed(s) with a difference"
# compute-sanitizer on one small case of each logits engine layout (ragged: bulk tile copies; paged: block table)
# and of every other stage (the attention row engine: prefill, MODEL1 decode with an extra scope, SWA; the MLA cache
# writer, both prologs, both lightning indexers, the compressor, the o-projection; the V4.1 records, their writer and
# decode, the V4.1 compressor, q path, K store, FP4 logits and selection).
one="golden/ragged_chunked_prefill.h5 golden/paged_mtp_n2_2d.h5 golden/paged_aiter_rowmajor_p1.h5 golden/mla_prefill_v32.h5 golden/mla_decode_model1_extra.h5 golden/v4sa_swa_only.h5 golden/mla_kcache_model1_pow2.h5 golden/prolog_neox_hadamard.h5 golden/linpu_cp_split.h5 golden/v4i_vllm_cuda_fp8.h5 golden/v4i_flash_decode_mtp.h5 golden/v4ip_qpath_ascend.h5 golden/v4c4_indexer_rotate.h5 golden/v4out_small_groups.h5 golden/kv_v41_mxfp8_528.h5 golden/kv_v41_idx_fp8_132.h5 golden/kv_nvfp4_432_v4.h5 golden/mla_decode_v41_fp4_extra.h5 golden/v41c1_vllm_nvfp4.h5 golden/v41ip_vllm_q_mxfp4.h5 golden/v41k_mxfp4_c2.h5 golden/v41lg_ragged_f32.h5 golden/v41lg_sparse_mtp.h5 golden/v41sel_consumer_sparse_logits.h5 golden/v41sel_publish.h5"
compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN" check --backend cuda $one >"$OUT/memcheck.log" 2>&1 && echo "memcheck: clean" || { echo "memcheck: rc $?"; tail -20 "$OUT/memcheck.log"; }
compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN" check --backend cuda $one >"$OUT/racecheck.log" 2>&1 && echo "racecheck: clean" || { echo "racecheck: rc $?"; tail -20 "$OUT/racecheck.log"; }
[ "$bad" = 0 ]
