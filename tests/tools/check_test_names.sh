#!/usr/bin/env bash
# Fails when a doctest case name contains ';'. doctest_discover_tests registers such a case as ctest fragments
# split at the ';' (a CMake list separator); none of them matches the doctest name, so ctest "passes" them
# without running a single assertion.
set -euo pipefail
bad="$("$1" --list-test-cases | grep -F ';' || true)"
if [ -n "$bad" ]; then
  echo "doctest case names with ';' never run under ctest (rename them, e.g. ';' -> ' -'):"
  echo "$bad"
  exit 1
fi
echo "ok: no doctest case name contains ';'"
