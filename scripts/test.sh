#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every C++ (ctest) and Python (pytest) test, then
# builds and runs the C++ suite again under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"

echo "== build (release)"
BUILD_DIR="$ROOT/build" bash scripts/build.sh -DCMAKE_BUILD_TYPE=RelWithDebInfo
export DSA_CHECK_BIN="$ROOT/build/dsa-check"

echo "== python tests"
python3 -m pytest -q tests/python

echo "== build (ASan + UBSan)"
BUILD_DIR="$ROOT/build-asan" bash scripts/build.sh -DCMAKE_BUILD_TYPE=Debug -DDSA_SANITIZE=ON -DDSA_BUILD_BENCH=OFF -DDSA_WITH_CUDA=OFF
echo "== C++ tests under ASan + UBSan"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j "$(nproc)")

echo "== C++ tests (release)"
(cd build && ctest --output-on-failure -j "$(nproc)")
