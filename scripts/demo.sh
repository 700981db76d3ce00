#!/usr/bin/env bash
# Demo: install what is missing, build dsa-check (Release) into build/, then judge two committed dumps:
#   golden/demo/demo_pass.h5  outputs/ = a plausible kernel result (logits perturbed inside the sm90 bound,
#                             in-band top-k swaps at massive ties)           -> PASS report, exit 0
#   golden/demo/demo_fail.h5  outputs/ = the same stages with seeded bugs (ReLU missing in the head sum;
#                             top-k selecting the first k positions)         -> FAIL report, exit 1
# Each check also writes its HTML report (build/demo_pass.html, build/demo_fail.html). The script exits 0 when both
# verdicts are as expected. Regenerate the pair with
#   build/dsa-check golden --demo --out golden/demo
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
echo "== build (Release) into build/"
# Only the CLI is needed here.
cmake -S "$ROOT" -B "$ROOT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  >"$ROOT/build.configure.log" 2>&1 || { cat "$ROOT/build.configure.log"; exit 1; }
cmake --build "$ROOT/build" --target dsa-check -j "$(nproc)"
BIN="$ROOT/build/dsa-check"

status=0
echo
echo "== 1/2: a plausible kernel result (expect PASS)"
set +e
"$BIN" check golden/demo/demo_pass.h5 --html build/demo_pass.html
rc=$?
set -e
if [ "$rc" -eq 0 ]; then echo "-> PASS, as expected (exit 0)"; else echo "-> UNEXPECTED: exit $rc (wanted 0)"; status=1; fi

echo
echo "== 2/2: the same stages with seeded bugs (expect FAIL)"
set +e
"$BIN" check golden/demo/demo_fail.h5 --html build/demo_fail.html
rc=$?
set -e
if [ "$rc" -eq 1 ]; then echo "-> FAIL, as expected (exit 1)"; else echo "-> UNEXPECTED: exit $rc (wanted 1)"; status=1; fi

echo
echo "HTML reports (self-contained, open in any browser): $ROOT/build/demo_pass.html  $ROOT/build/demo_fail.html"
if [ "$status" -eq 0 ]; then echo "demo: both verdicts as expected"; else echo "demo: a verdict was not as expected"; fi
exit "$status"
