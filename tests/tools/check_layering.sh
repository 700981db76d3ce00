#!/usr/bin/env bash
# The layering of docs/architecture.md, checked on the source tree (ctest layering.*):
#   numerics -> tensor / io / schema -> layouts, engines, profiles -> stage framework + stages -> compare ->
#   pipeline -> report -> apps
# 1. no include points from a lower layer into a higher one (the arrows that were removed in issue #33 stay removed);
# 2. no stage name appears under src/compare, src/report or src/pipeline (comparators, reports and the pipeline read
#    the stage table, never a stage);
# 3. no stage includes another stage's folder, except through its family's table.hpp or the layer recipes
#    (shared computation lives in src/engines/, not in a stage folder);
# 4. every profile folder has its line in the profile table and every stage folder its line in the stage table.
#   bash tests/tools/check_layering.sh SRC_DIR DSA_CHECK_BIN
set -euo pipefail
SRC="$1"
BIN="$2"
fail=0
bad() { echo "layering: $*"; fail=1; }

inc() { grep -rhoE '#include "[^"]+"' "$@" 2>/dev/null | sed -E 's/#include "([^"]+)"/\1/' | sort -u; }
forbid() {  # forbid DIR PATTERN WHY
  local dir="$1" pat="$2" why="$3" hits
  hits=$(grep -rnE "#include \"($pat)" "$SRC/$dir" 2>/dev/null || true)
  [ -z "$hits" ] || bad "$dir must not include $why:"$'\n'"$hits"
}
forbid numerics 'tensor/|io/|schema/|layouts/|engines/|profiles/|stage/|stages/|compare/|pipeline/|report/' "anything above numerics"
forbid tensor 'io/|schema/|layouts/|engines/|profiles/|stage/|stages/|compare/|pipeline/|report/' "layers above tensor"
forbid schema 'layouts/|engines/|profiles/|stage/|stages/|compare/|pipeline/|report/' "layers above schema"
forbid io 'engines/|profiles/|stage/|stages/|compare/|pipeline/|report/' "layers above io"
forbid layouts 'engines/|profiles/|stage/|stages/|compare/|pipeline/|report/' "engines, profiles, stages or the pipeline"
forbid engines 'stages/|pipeline/|report/' "stages, the pipeline or reports"
forbid profiles 'stages/|pipeline/|report/' "stages, the pipeline or reports"
forbid compare 'stage/|stages/|pipeline/|report/' "the stage framework, stages, the pipeline or reports"
forbid report 'stages/' "a stage"
forbid pipeline 'stages/' "a stage (the layer recipes live in src/stages/layers/)"

# 2. stage names under compare / report / pipeline (code and comments alike)
names=$("$BIN" stages --json | python3 -c 'import json, sys; print("\n".join(s["name"] for s in json.load(sys.stdin)["stages"]))')
[ -n "$names" ] || bad "no stage names from $BIN stages --json"
for n in $names; do
  hits=$(grep -rnF "$n" "$SRC/compare" "$SRC/report" "$SRC/pipeline" | grep -vE "${n//./\\.}[a-z_]" || true)
  [ -z "$hits" ] || bad "stage name $n under compare/ report/ pipeline/:"$'\n'"$hits"
done

# 3. one stage reaching into another stage's folder. A composite stage names the stage it is built on (its README
#    says so): indexer.fused IS fp8_paged_mqa_logits followed by the top-k, and reads indexer.logits_paged's schema and
#    generator.
composite="indexer/fused:indexer/logits_paged"
for d in "$SRC"/stages/*/*/; do
  fam=$(basename "$(dirname "$d")"); st=$(basename "$d")
  [ "$fam" = layers ] && continue
  for i in $(inc "$d"); do
    case "$i" in
      stages/"$fam"/"$st"/*|stages/*/table.hpp|stages/"$fam"/attrs.hpp) ;;
      stages/*/*/stage.hpp) [[ " $composite " == *" $fam/$st:$(dirname "${i#stages/}")"* ]] ||
                              bad "src/stages/$fam/$st includes $i (another stage's folder: shared code belongs in src/engines/)" ;;
      stages/*) bad "src/stages/$fam/$st includes $i (another stage's folder: shared code belongs in src/engines/)" ;;
    esac
  done
done

# 4. table lines
for d in "$SRC"/profiles/*/; do
  p=$(basename "$d")
  grep -q "profiles::$p()" "$SRC/profiles/profile.cpp" || bad "profile folder $p has no line in src/profiles/profile.cpp"
done
for d in "$SRC"/stages/*/*/; do
  fam=$(basename "$(dirname "$d")"); st=$(basename "$d")
  [ "$fam" = layers ] && continue
  grep -q "$fam::$st::stage()" "$SRC/stage/table.cpp" || bad "stage folder $fam/$st has no line in src/stage/table.cpp"
done

[ "$fail" = 0 ] && echo "ok: the layering holds (includes, stage names, stage folders, table lines)"
exit "$fail"
