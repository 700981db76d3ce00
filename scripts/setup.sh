#!/usr/bin/env bash
# Installs what dsa-check needs to build and test, only what is missing (idempotent, quiet when present).
# Debian 12 packages + PyPI (numpy, h5py, ml_dtypes, pytest, pytest-xdist).
set -euo pipefail
APT_PKGS=(build-essential cmake ninja-build pkg-config libcli11-dev libhdf5-dev zlib1g-dev libdeflate-dev doctest-dev
          nlohmann-json3-dev libssl-dev libbenchmark-dev python3 python3-pip)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# python3/pip may come from elsewhere (pyenv): do not ask apt for them when they already work.
if command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1; then
  missing=("${missing[@]/python3-pip}"); missing=("${missing[@]/python3}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# pip name, or pip-name:import-name where they differ (pytest-xdist: the plugin test runs pytest -n 2).
PY_PKGS=(numpy h5py ml_dtypes pytest pytest-xdist:xdist)
pymissing=()
for p in "${PY_PKGS[@]}"; do python3 -c "import ${p#*:}" 2>/dev/null || pymissing+=("${p%%:*}"); done
if ((${#pymissing[@]})); then
  echo "setup: pip installing ${pymissing[*]}"
  python3 -m pip install -q "${pymissing[@]}" 2>/dev/null || python3 -m pip install -q --break-system-packages "${pymissing[@]}"
fi
# Headless Chromium for the HTML report's browser test (tests/python/test_html_report.py), only when asked
# (scripts/test.sh sets DSA_SETUP_BROWSER=1); where it cannot be installed the test is skipped and says so.
if [ "${DSA_SETUP_BROWSER:-0}" = 1 ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  echo "setup: installing chromium (HTML report browser test)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null; } ||
    echo "setup: chromium could not be installed: the HTML report browser test will be skipped"
fi
