#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every C++ (ctest) and Python (pytest) test, then
# builds and runs the C++ suite again under AddressSanitizer + UndefinedBehaviorSanitizer, builds the pip wheel and
# checks it in a clean virtual environment, then fuzzes for 90 s (scripts/fuzz.sh, clang-14 libFuzzer).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
DSA_SETUP_BROWSER=1 bash scripts/setup.sh
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
# CI lays ../shared (specs + real DeepGEMM data) beside the clone: there, the acceptance tests on real kernel output
# must run, not skip.
if [ "${CI:-}" = "true" ] || [ -d "$ROOT/../shared/data" ]; then export DSA_REQUIRE_SHARED="${DSA_REQUIRE_SHARED:-1}"; fi

echo "== build (release)"
BUILD_DIR="$ROOT/build" bash scripts/build.sh -DCMAKE_BUILD_TYPE=RelWithDebInfo
export DSA_CHECK_BIN="$ROOT/build/dsa-check"

echo "== golden reproducibility gate"
# Regenerate the committed goldens with 1 and 2 threads: both MANIFESTs must equal golden/MANIFEST bit for bit;
# then every committed golden's expected/ must be BITEXACT against a fresh reference (dsa-check check exit 0).
GOLDEN_TMP="$(mktemp -d)"
trap 'rm -rf "$GOLDEN_TMP"' EXIT
for j in 1 2; do
  mkdir -p "$GOLDEN_TMP/j$j"
  OMP_NUM_THREADS=$j "$DSA_CHECK_BIN" golden --committed -j "$j" --out "$GOLDEN_TMP/j$j" >/dev/null
  cmp "$GOLDEN_TMP/j$j/MANIFEST" golden/MANIFEST ||
    { diff golden/MANIFEST "$GOLDEN_TMP/j$j/MANIFEST" | head -20; echo "golden: regenerated MANIFEST ($j thread(s)) differs from golden/MANIFEST"; exit 1; }
done
"$DSA_CHECK_BIN" check -q golden/*.h5
echo "golden: MANIFEST reproduced with 1 and 2 threads; every committed golden BITEXACT"

echo "== python tests"
command -v chromium >/dev/null || command -v chromium-browser >/dev/null ||
  echo "skipped: headless Chromium not installed: the HTML report browser test (test_html_report.py) is skipped"
python3 -m pytest -q tests/python

echo "== build (ASan + UBSan)"
BUILD_DIR="$ROOT/build-asan" bash scripts/build.sh -DCMAKE_BUILD_TYPE=Debug -DDSA_SANITIZE=ON -DDSA_BUILD_BENCH=OFF -DDSA_WITH_CUDA=OFF
echo "== C++ tests under ASan + UBSan"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j "$(nproc)")

echo "== C++ tests (release)"
(cd build && ctest --output-on-failure -j "$(nproc)")

echo "== CUDA backend (CPU vs CUDA on every committed golden)"
if out=$("$DSA_CHECK_BIN" backend-diff --a cpu --b cuda golden/*.h5 2>&1); then echo "$out" | tail -1
else case "$out" in *"no CUDA device"*|*"has no CUDA backend"*) echo "skipped: ${out#error: }" ;;
  *) # a stage without a CUDA implementation (its --backend cuda runs the CPU reference) is skipped, nothing else
     if grep -v "has no cuda implementation" <<<"$out" | grep -q "^error:\|^DIFFERENT"; then echo "$out"; exit 1; fi
     echo "$out" | tail -1; echo "skipped: $(grep -c "has no cuda implementation" <<<"$out") case(s) of stages without a CUDA implementation" ;; esac; fi

echo "== pip wheel (scripts/build_wheel.sh: pip wheel . ; pip install in a clean venv; --version, demo, check, import, plugin example)"
# CI builds it unoptimized (-O0: half the compile time on 2 cores); the packaging checked is the release wheel's.
DSA_WHEEL_BUILD_TYPE="${DSA_WHEEL_BUILD_TYPE:-Debug}" bash scripts/build_wheel.sh

echo "== fuzz (libFuzzer, 90 s; scripts/fuzz.sh SECONDS JOBS for long runs)"
DSA_CHECK_BIN="$ROOT/build/dsa-check" bash scripts/fuzz.sh "${DSA_FUZZ_SECONDS:-90}" "$(nproc)"
