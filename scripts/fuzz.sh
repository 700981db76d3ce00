#!/usr/bin/env bash
# libFuzzer, built with clang-14 and ASan + UBSan (+ LeakSanitizer) in build-fuzz/, over four targets:
#   load    tests/fuzz/fuzz_load.cpp: the bytes of a dump file through the HDF5 reader, schema validation, the stage
#           parse, and for small valid cases the reference and the comparators (fork mode: libhdf5 has crashes of
#           its own; they are sorted out below)                                                     30 % of the time
#   case    tests/fuzz/fuzz_case.cpp: in-memory cases (every stage's small cases, mutant outputs, layers) edited by
#           the fuzzer, through every check, layer chain, run-wide check and report; no HDF5, no fork   40 %
#   topk    tests/fuzz/fuzz_topk.cpp: the tie-aware top-k judge on fuzzer-built rows and edited selections 15 %
#   report  tests/fuzz/fuzz_report.cpp: the JSON report reader of merge / report                        15 %
#   scripts/fuzz.sh [SECONDS] [JOBS]     default 600 s, 1 worker; scripts/test.sh runs it for 90 s
# Seeds: golden/*.h5 and tests/hostile/corpus/*.h5 (load), tests/fuzz/corpus/<target>.tar.gz (minimized corpora of
# earlier runs, case and topk), tests/fuzz/report_seeds; the growing corpora go to build-fuzz/corpus*, crashes /
# leaks / timeouts to build-fuzz/artifacts* (the script exits 1 when any is found in dsa-check). Prints each
# target's executions and rate.
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
cmake --build "$B" --target dsa_fuzz_load dsa_fuzz_report dsa_fuzz_case dsa_fuzz_topk -j "$(nproc)" >"$B/build.log" 2>&1 || { tail -30 "$B/build.log"; echo "fuzz: the clang-14 build failed"; exit 1; }
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
LSECS=$(( SECS * 3 / 10 > 10 ? SECS * 3 / 10 : 10 ))
(cd "$B" && ./dsa_fuzz_load -fork="$JOBS" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
   -max_total_time="$LSECS" -timeout=20 -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$B/artifacts/" \
   "$B/corpus" "$ROOT/golden" "$ROOT/tests/hostile/corpus" "$ROOT/tests/hostile/fuzz_found" >"$LOG" 2>&1) || true
execs=$(grep -oE "^#[0-9]+" "$LOG" | tail -1 | tr -d '#')
echo "fuzz: load (HDF5 reader, fork mode) ${execs:-0} executions in ${LSECS} s with ${JOBS} worker(s) ($(( ${execs:-0} / LSECS / JOBS ))/s per worker); corpus $(ls "$B/corpus" | wc -l) files"
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

# The in-process targets: no HDF5 and no fork, so every crash, leak, sanitizer report or abort is a finding.
# -entropic=0: libFuzzer's entropic scheduler spent 45 % of the case target's time updating feature frequencies.
inproc() {  # NAME SECONDS SEED_DIR...
  local name=$1 secs=$2; shift 2
  mkdir -p "$B/corpus-$name" "$B/artifacts-$name"
  local log="$B/fuzz-$name.log"
  (cd "$B" && ./dsa_fuzz_$name -fork="$JOBS" -entropic=0 -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
     -max_len=65536 -artifact_prefix="$B/artifacts-$name/" "$B/corpus-$name" "$@" >"$log" 2>&1) || true
  local n found
  n=$(grep -oE "^#[0-9]+" "$log" | tail -1 | tr -d '#')
  found=$(ls "$B/artifacts-$name" | wc -l)
  echo "fuzz: $name ${n:-0} executions in ${secs} s with ${JOBS} worker(s) ($(( ${n:-0} / secs / JOBS ))/s per worker); ${found} finding(s)"
  if [ "$found" != 0 ]; then
    ls "$B/artifacts-$name"; grep -E "ERROR|runtime error|judged" "$log" | head -10
    echo "fuzz: FAILED ($name, log $log)"; return 1
  fi
}
seeds() {  # the committed minimized corpus of a target, unpacked once into build-fuzz/seeds-NAME
  local d="$B/seeds-$1"
  if [ -f "$ROOT/tests/fuzz/corpus/$1.tar.gz" ] && [ ! -d "$d" ]; then
    mkdir -p "$d" && tar -xzf "$ROOT/tests/fuzz/corpus/$1.tar.gz" -C "$d"
  fi
  mkdir -p "$d"; echo "$d"
}
rc=0
inproc case $(( SECS * 4 / 10 > 10 ? SECS * 4 / 10 : 10 )) "$(seeds case)" || rc=1
inproc topk $(( SECS * 15 / 100 > 10 ? SECS * 15 / 100 : 10 )) "$(seeds topk)" || rc=1
inproc report $(( SECS * 15 / 100 > 10 ? SECS * 15 / 100 : 10 )) "$ROOT/tests/fuzz/report_seeds" || rc=1
exit $rc
