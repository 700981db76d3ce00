// v41.select — the DeepSeek-V4.1 indexer's selection from its scores (spec v41 §5): one layer's top-k of compressed
// positions, with the two-level candidates of V4.1 (the candidate source layer publishes blocks, consumer layers
// choose inside them).
//
// Row r is a query at token position p = positions[r] (p < 0: a padding row, nothing reachable); it reaches the
// compressed positions j < reach = (p + 1) / cmp_ratio, with scores[r, j]. A consumer (input candidate_blocks) masks
// every position whose block j / block_size is not in the row's published list to -inf. The row's candidates are
// its reachable positions with a score above -inf (NaN ranks first, as in torch.topk); it selects the top
// min(k, reach) of them and emits position + window (the compressed KV follows the window), in ascending position
// order, -1 after. REF quirk (short_rows = ref): the reference takes the top-k of the masked row, so a row with fewer
// candidates than min(k, reach) is completed with reachable non-candidate (-inf) positions, sorted in with the rest;
// engines pad -1 (short_rows = pad, the default).
// publish = 1 (the candidate source layer): also published_blocks, the top min(topk_blocks, nblocks) blocks of the
// reachable positions (nblocks = ceil(reach / block_size)) by block score = the max over the block's reachable
// positions, the block of position reach - 1 pinned at +inf, blocks at -inf dropped; ascending block ids, -1 after.
// Exact (contract way 1): comparisons of the given scores only; both outputs are tie-aware sets (topk_set).
#pragma once
#include <cstdint>
#include <vector>

#include "stage/stage.hpp"

namespace dsa::v41::select {

struct Params : dsa::Params {
  std::int64_t k = 512, window = 128, block_size = 8, topk_blocks = 2048, r = 1;
  bool publish = false;
  bool short_rows_ref = false;  // attr short_rows = ref
  bool cand_layout = false;     // attr scores_layout = candidates: scores[r, c] is position candidate_blocks[r][c / bs] * bs + c % bs
  std::int64_t S = 0, N = 0, M = 0;  // rows, score columns, candidate list width (0: not a consumer)
};

// The scores column of position j whose block is entry `entry` of the row's candidate list (scores_layout
// candidates), or j (positions).
std::int64_t score_col(const Params& p, std::int64_t entry, std::int64_t j);
// Row r's reachable positions (0 for a padding row).
std::int64_t reach(const Case& c, const Params& p, std::int64_t r);
// Row r's candidate positions (ascending) with their scores, the consumer mask applied: -inf positions dropped, or
// kept at -inf under the REF quirk.
void row_candidates(const Case& c, const Params& p, std::int64_t r, std::vector<std::int64_t>& pos, std::vector<double>& score);
// Row r's blocks (ascending ids) with their block scores (the newest pinned at +inf; -inf blocks dropped).
void row_blocks(const Case& c, const Params& p, std::int64_t r, std::vector<std::int64_t>& ids, std::vector<double>& score);

// The canonical top n of a list (ids with their scores; engines/topk's order), returned as ids in ascending order:
// what a row emits.
std::vector<std::int64_t> top_ascending(const std::vector<std::int64_t>& ids, const std::vector<double>& score, std::int64_t n);

// The ids a backend selected per row: ids[r * k + j] for j < min(k, len[r]) in canonical order; len[r] = the row's
// candidate count.
struct RowPicks {
  std::int64_t k = 0;
  std::vector<std::int64_t> ids, len;
};

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);
// The CPU's packaging of both outputs; with picks (the CUDA backend's), those rows' selections instead of the host's.
Expected assemble(const Case& c, const Params& p, const RefOptions& opt, const RowPicks* cand_picks, const RowPicks* block_picks);
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::v41::select
