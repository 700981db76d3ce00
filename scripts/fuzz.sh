#!/usr/bin/env bash
# libFuzzer over the dump reader + schema validator + stage parse (+ reference and comparators on small valid
# cases): tests/fuzz/fuzz_load.cpp, then over the JSON report reader of merge / report (tests/fuzz/fuzz_report.cpp,
# a third of the time), built with clang-14 and ASan + UBSan (+ LeakSanitizer) in build-fuzz/.
#   scripts/fuzz.sh [SECONDS] [JOBS]     default 600 s, 1 worker; scripts/test.sh runs it for 90 s
# Seeds: golden/*.h5 and tests/hostile/corpus/*.h5 (read-only); the growing corpus goes to build-fuzz/corpus,
# crashes / leaks / timeouts to build-fuzz/artifacts (the script exits 1 when any is found). Prints the number of
# executions reached.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
SECS="${1:-600}"
JOBS="${2:-1}"
if ! command -v clang++-14 >/dev/null || ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
   ! ls /usr/lib/llvm-14/lib/libomp.so >/dev/null 2>&1; then
  echo "fuzz: installing clang-14 libfuzzer-14-dev libomp-14-dev"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-14 libfuzzer-14-dev libomp-14-dev >/dev/null
fi
B="$ROOT/build-fuzz"
if [ ! -f "$B/CMakeCache.txt" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDSA_FUZZ=ON -DDSA_WERROR=OFF \
    -DDSA_BUILD_BENCH=OFF -DDSA_WITH_CUDA=OFF -DBUILD_TESTING=OFF >/dev/null
fi
cmake --build "$B" --target dsa_fuzz_load dsa_fuzz_report -j "$(nproc)" >"$B/build.log" 2>&1 || { tail -30 "$B/build.log"; echo "fuzz: the clang-14 build failed"; exit 1; }
mkdir -p "$B/corpus" "$B/artifacts"
LOG="$B/fuzz.log"
rm -f "$B"/fuzz-*.log "$LOG"
# Fork mode: JOBS workers; a crash inside the system HDF5 library (it has known crashes on corrupt files, which the
# CLI survives by parsing in a child process) must not stop the search, so crashes are collected and sorted below.
# -rss_limit_mb: the reader's own budget is 64 MiB per file; anything near 2 GB is a bug. -timeout: per input.
# -max_len 64 KiB: the hostile corpus and the small goldens are whole seeds, the big goldens truncated ones (a
# truncated HDF5 file is itself a hostile input); small inputs keep the rate up.
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:suppressions=$ROOT/tests/fuzz/asan_suppressions.txt"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
(cd "$B" && ./dsa_fuzz_load -fork="$JOBS" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
   -max_total_time="$SECS" -timeout=20 -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$B/artifacts/" \
   "$B/corpus" "$ROOT/golden" "$ROOT/tests/hostile/corpus" "$ROOT/tests/hostile/fuzz_found" >"$LOG" 2>&1) || true
execs=$(grep -oE "^#[0-9]+" "$LOG" | tail -1 | tr -d '#')
echo "fuzz: ${execs:-0} executions in ${SECS} s with ${JOBS} worker(s); corpus $(ls "$B/corpus" | wc -l) files"
# Sort the findings. Each artifact is run again alone (a fork-mode job runs many inputs: a report can come from
# HDF5 state an earlier input corrupted, and then does not reproduce). A reproducible report whose first frame
# outside libc / the sanitizer's interceptors / the allocator lies in libhdf5 is HDF5's own bug. In every case the
# release CLI must answer the file with exit 0, 1 or 2 within 60 s and 6 GiB of address space (it parses in a
# child process first).
set +e +o pipefail  # greps below may match nothing
ours=0; hdf5=0; flaky=0
CLI="${DSA_CHECK_BIN:-$ROOT/build/dsa-check}"
for a in "$B"/artifacts/crash-* "$B"/artifacts/leak-* "$B"/artifacts/timeout-* "$B"/artifacts/oom-*; do
  [ -e "$a" ] || continue
  case "$(basename "$a")" in
    timeout-*) rep=""; rrc=124 ;;  # a hang reproduces in >= 20 s: judged by the CLI alone
    *) rep="$( (cd "$B" && timeout 30 ./dsa_fuzz_load -rss_limit_mb=2048 "$a") 2>&1)"; rrc=$? ;;
  esac
  first=$(printf '%s\n' "$rep" | grep -E '^ *#[0-9]+ ' |
          grep -vE '__interceptor_|__sanitizer|__asan|__lsan|__ubsan|fuzzer::|libc\.so|libc_start|sysdeps|/string/|libclang_rt|in malloc|in calloc|in realloc| in free | in posix_memalign| in aligned_alloc| in strdup|operator new|operator delete| in main | in _start' |
          head -1)
  if [ "$rrc" = 0 ]; then kind=flaky
  elif [ "$rrc" = 124 ] || [ -z "$first" ] || printf '%s' "$rep" | grep -q "out-of-memory (used:"; then
    kind=hdf5  # a hang, or the RSS limit (its stack is the watchdog's, not the allocator's): judged by the CLI
  else case "$first" in *libhdf5*) kind=hdf5 ;; *) kind=ours ;; esac
  fi
  if [ -x "$CLI" ]; then
    cp "$a" "$B/probe.h5"
    (ulimit -v 6291456; timeout 60 "$CLI" check "$B/probe.h5" >/dev/null 2>&1); rc=$?
    case "$rc" in 0|1|2) ;; *) kind=ours; first="release CLI exit $rc on it (wanted 0, 1 or 2 within 60 s and 6 GiB); $first" ;; esac
  fi
  case "$kind" in
    hdf5) hdf5=$((hdf5 + 1)) ;;
    flaky) flaky=$((flaky + 1)) ;;
    *) ours=$((ours + 1)); echo "fuzz: FINDING $(basename "$a"): $first"
       printf '%s\n' "$rep" | grep -E "ERROR|runtime error|#[0-9]+ " | head -25 ;;
  esac
done
echo "fuzz: ${ours} finding(s) in dsa-check; ${hdf5} inside the HDF5 library, ${flaky} not reproducible alone (HDF5 state" \
     "left by earlier inputs) — all answered by the release CLI with exit 0/1/2"
[ "$ours" = 0 ] || { echo "fuzz: FAILED (artifacts in $B/artifacts, log $LOG)"; exit 1; }

# The report reader (merge / report: size and depth guards, JSON, every field's type check, rendering), in process:
# no HDF5 and no fork, so every crash, leak or sanitizer report is a finding. A third of the time (at least 10 s).
RSECS=$(( SECS / 3 > 10 ? SECS / 3 : 10 ))
mkdir -p "$B/corpus-report" "$B/artifacts-report"
RLOG="$B/fuzz-report.log"
(cd "$B" && ./dsa_fuzz_report -fork="$JOBS" -max_total_time="$RSECS" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
   -artifact_prefix="$B/artifacts-report/" "$B/corpus-report" "$ROOT/tests/fuzz/report_seeds" >"$RLOG" 2>&1) || true
rexecs=$(grep -oE "^#[0-9]+" "$RLOG" | tail -1 | tr -d '#')
rfound=$(ls "$B/artifacts-report" | wc -l)
echo "fuzz: report reader ${rexecs:-0} executions in ${RSECS} s with ${JOBS} worker(s) ($(( ${rexecs:-0} / RSECS / JOBS ))/s per worker); ${rfound} finding(s)"
[ "$rfound" = 0 ] || { ls "$B/artifacts-report"; grep -E "ERROR|runtime error" "$RLOG" | head -10; echo "fuzz: FAILED (report reader, log $RLOG)"; exit 1; }
