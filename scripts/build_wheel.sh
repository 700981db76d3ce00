#!/usr/bin/env bash
# Builds the dsa-check wheel (pyproject.toml: scikit-build-core through this repository's CMake; CPU backend; HDF5,
# zlib, libcrypto, libgomp and the C++ runtime linked in) into build/dist/, then verifies it as a new user would:
# a clean virtual environment, `pip install` of the wheel (numpy and h5py come from PyPI), and there
#   dsa-check --version                      says pip wheel, CPU backend, HDF5 linked in
#   ldd dsa-check                            no libhdf5 / libcrypto / libgomp / libstdc++ (glibc only)
#   dsa-check golden --demo; dsa-check check the pass file (exit 0) and the fail file (exit 1)
#   dsa-check import --list-mappings         the kit's importer, through the binary
#   the pytest plugin's example              scripts/examples/pytest_torch_kernel/test_logits_topk_numpy.py (numpy
#                                            kernels over the bundled goldens), copied out of the checkout
#   scripts/build_wheel.sh [--no-verify]     (scripts/test.sh runs it with verification)
#   DSA_WHEEL=path/to.whl scripts/build_wheel.sh   verifies that wheel without building
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
DIST="$ROOT/build/dist"
if [ -n "${DSA_WHEEL:-}" ]; then  # verify this wheel instead of building one
  WHEEL="$(cd "$(dirname "$DSA_WHEEL")" && pwd)/$(basename "$DSA_WHEEL")"
else
rm -rf "$DIST"
mkdir -p "$DIST"
python3 -m pip --version >/dev/null 2>&1 || { echo "wheel: python3 -m pip is missing (apt-get install python3-pip)"; exit 1; }
echo "wheel: building (pip wheel . , ${DSA_WHEEL_BUILD_TYPE:-Release}; log build/wheel.log)"
# DSA_WHEEL_BUILD_TYPE (default Release): scripts/test.sh sets Debug (-O0 -g0) to check the packaging in half the time.
BT="${DSA_WHEEL_BUILD_TYPE:-Release}"
ARGS=(-C "cmake.build-type=$BT")
[ "$BT" = Debug ] && ARGS+=(-C "cmake.define.CMAKE_CXX_FLAGS_DEBUG=-O0 -g0" -C "build-dir=build/wheel-debug")
python3 -m pip wheel . --no-deps -w "$DIST" "${ARGS[@]}" >"$ROOT/build/wheel.log" 2>&1 || { tail -40 "$ROOT/build/wheel.log"; echo "wheel: build failed"; exit 1; }
WHEEL=$(ls "$DIST"/dsa_check-*.whl)
fi
echo "wheel: $(basename "$WHEEL") ($(( $(stat -c %s "$WHEEL") / 1024 )) KiB)"
[ "${1:-}" = "--no-verify" ] && exit 0

V="$(mktemp -d)"
trap 'rm -rf "$V"' EXIT
python3 -m venv "$V/env" || { echo "wheel: python3 -m venv failed (apt-get install python3-venv)"; exit 1; }
# Outside the checkout, with a clean environment: nothing from this tree (PYTHONPATH, DSA_CHECK_BIN, build/) may help.
run() { (cd "$V" && env -i HOME="$V" PATH="$V/env/bin:/usr/bin:/bin" "$@"); }
run "$V/env/bin/python" -m pip install -q "$WHEEL[pytest]" >"$V/pip.log" 2>&1 || { cat "$V/pip.log"; echo "wheel: pip install failed"; exit 1; }
BIN="$V/env/bin/dsa-check"
ver=$(run dsa-check --version)
echo "wheel: $ver"
case "$ver" in *"pip wheel"*"backends: cpu"*"HDF5"*"linked in"*) ;; *) echo "wheel: --version does not say pip wheel / cpu / HDF5 linked in"; exit 1 ;; esac
if ldd "$BIN" | grep -E "libhdf5|libcrypto|libgomp|libstdc\+\+|libsz|libaec|libz\.so|libcurl"; then
  echo "wheel: the binary needs shared libraries it should carry (above)"; exit 1
fi
echo "wheel: shared libraries: $(ldd "$BIN" | awk '{print $1}' | tr '\n' ' ')"
mkdir -p "$V/demo"
run dsa-check golden --demo --out "$V/demo" >/dev/null
run dsa-check check -q "$V/demo/demo_pass.h5" >/dev/null || { echo "wheel: check of demo_pass.h5 did not pass"; exit 1; }
set +e
run dsa-check check -q "$V/demo/demo_fail.h5" >/dev/null; rc=$?
set -e
[ "$rc" = 1 ] || { echo "wheel: check of demo_fail.h5 exited $rc (wanted 1)"; exit 1; }
run dsa-check import --list-mappings | grep -q ascend_li || { echo "wheel: dsa-check import --list-mappings failed"; exit 1; }
# The pytest plugin's example (scripts/examples/pytest_torch_kernel/test_logits_topk_numpy.py: numpy kernels gated
# on the bundled goldens), copied out of the checkout.
mkdir -p "$V/kernel_repo"
cp scripts/examples/pytest_torch_kernel/test_logits_topk_numpy.py "$V/kernel_repo/"
set +e
out=$(run "$V/env/bin/python" -m pytest -q -p no:cacheprovider "$V/kernel_repo" 2>&1); rc=$?
set -e
echo "$out" | tail -3
[ "$rc" = 0 ] || { echo "wheel: the pytest plugin example failed (rc $rc)"; exit 1; }
echo "wheel: verified in a clean virtual environment ($V, removed)"
