#!/usr/bin/env bash
# The long run of the in-process fuzz targets (issue #35 item 2) on a many-core machine, from binaries built
# elsewhere: scripts/fuzz.sh builds build-fuzz/ with clang-14 (libFuzzer, ASan + UBSan linked in); this script packs
# them (pack) and runs them there (run). The machine needs no clang: only the shared libraries the pack carries.
#
#   bash scripts/fuzz_farm.sh pack DIR              strip the targets' debug info (symbols stay: stack traces keep
#                                                   function names), copy them and every non-glibc shared library
#                                                   they load into DIR
#   bash scripts/fuzz_farm.sh run DIR OUT JOBS SPLIT
#       SPLIT: target:seconds,... (e.g. case:300,topk:60,report:60). Each target runs in libFuzzer's fork mode with
#       JOBS workers from its committed corpus (tests/fuzz/corpus/<t>.tar.gz; report: tests/fuzz/report_seeds), then
#       its grown corpus is minimized (-merge=1). A crash does not end the run (-ignore_crashes: the other workers
#       go on; every crash input is kept). Four files come back: OUT/summary.txt (one line per target: executions,
#       seconds, workers, rate, coverage as libFuzzer's cov: edges and ft: features, corpus files before / after,
#       findings), OUT/corpora.tar.gz (<t>/ minimized corpora), OUT/logs.tar.gz (libFuzzer's output and the merge
#       logs), OUT/findings.tar.gz (crash-, leak-, timeout-, oom- inputs, when any). Exit 1 when any target found
#       something.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TARGETS=(case topk report)
case "${1:-}" in
pack)
  D="$2"; mkdir -p "$D/lib"
  for t in "${TARGETS[@]}"; do
    objcopy --strip-debug "$ROOT/build-fuzz/dsa_fuzz_$t" "$D/dsa_fuzz_$t"
    ldd "$ROOT/build-fuzz/dsa_fuzz_$t" | awk '/=> \//{print $3}' | while read -r l; do
      case "$(basename "$l")" in libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*) ;; *) cp -L "$l" "$D/lib/" ;; esac
    done
  done
  du -sh "$D"; exit 0 ;;
run) ;;
*) echo "usage: fuzz_farm.sh pack DIR | run DIR OUT JOBS SPLIT" >&2; exit 2 ;;
esac
D="$(cd "$2" && pwd)"; OUT="$3"; JOBS="$4"; SPLIT="$5"
mkdir -p "$OUT"; OUT="$(cd "$OUT" && pwd)"
W="$(mktemp -d)"
export LD_LIBRARY_PATH="$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:suppressions=$ROOT/tests/fuzz/asan_suppressions.txt"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
: >"$OUT/summary.txt"
rc=0
IFS=',' read -ra parts <<<"$SPLIT"
for part in "${parts[@]}"; do
  t="${part%%:*}"; secs="${part#*:}"
  seeds="$W/seeds-$t"; mkdir -p "$seeds" "$W/corpus-$t" "$W/art-$t" "$W/min/$t" "$W/logs"
  if [ "$t" = report ]; then cp "$ROOT"/tests/fuzz/report_seeds/* "$seeds/"
  elif [ -f "$ROOT/tests/fuzz/corpus/$t.tar.gz" ]; then tar -xzf "$ROOT/tests/fuzz/corpus/$t.tar.gz" -C "$seeds"; fi
  before=$(find "$seeds" -type f | wc -l)
  # -entropic=0 and -max_len as scripts/fuzz.sh; -timeout per input, -rss_limit_mb per worker
  ( cd "$W" && "$D/dsa_fuzz_$t" -fork="$JOBS" -ignore_crashes=1 -entropic=0 -print_funcs=0 -max_total_time="$secs" \
      -timeout=20 -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$W/art-$t/" "$W/corpus-$t" "$seeds" \
      >"$W/logs/$t.log" 2>&1 ) || true
  n=$(grep -oE "^#[0-9]+" "$W/logs/$t.log" | tail -1 | tr -d '#')
  cov=$(grep -oE "cov: [0-9]+ ft: [0-9]+" "$W/logs/$t.log" | tail -1)
  # minimize the grown corpus together with the seeds (the seeds first: merge keeps what adds features)
  ( cd "$W" && "$D/dsa_fuzz_$t" -merge=1 -timeout=20 -rss_limit_mb=2048 -max_len=65536 "$W/min/$t" "$seeds" "$W/corpus-$t" \
      >"$W/logs/$t-merge.log" 2>&1 ) || true
  after=$(find "$W/min/$t" -type f | wc -l)
  found=$(find "$W/art-$t" -type f | wc -l)
  line="$t: ${n:-0} executions in ${secs} s with ${JOBS} workers ($(( ${n:-0} / secs / JOBS ))/s per worker); ${cov:-cov: ?}; corpus ${before} -> ${after} files; ${found} finding(s)"
  echo "$line" | tee -a "$OUT/summary.txt"
  if [ "$found" != 0 ]; then rc=1; grep -E "ERROR|runtime error|SUMMARY" "$W/logs/$t.log" | sort | uniq -c | head -20; fi
done
tar -czf "$OUT/corpora.tar.gz" -C "$W/min" .
tar -czf "$OUT/logs.tar.gz" -C "$W/logs" .
if ls "$W"/art-*/* >/dev/null 2>&1; then tar -czf "$OUT/findings.tar.gz" -C "$W" $(cd "$W" && ls -d art-*); fi
total=$(awk '{s += $2} END {print s}' "$OUT/summary.txt")
echo "total: $total executions" | tee -a "$OUT/summary.txt"
rm -rf "$W"
exit $rc
