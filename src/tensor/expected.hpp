// What a stage's reference function returns: for every output tensor the reference value plus everything
// its comparator needs (error bounds, defined-column masks, top-k candidate scores, emulations,
// a decoder from flat index to meaning).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.hpp"

namespace dsa {

enum class CompareKind {
  bytes,     // exact bit equality (quantized codes, scales, cache pages, ordered index tensors)
  bounded,   // |out - ref| <= rtol * M + atol per element, M = magnitude sum supplied by the stage
  topk_set,  // tie-aware top-k set comparison
};
std::string_view compare_kind_name(CompareKind k);

// Top-k reference for one output index tensor of shape [R, K] (rows may be a flattened view).
struct TopkRef {
  std::int64_t k = 0;                // requested k (output width may be larger: extra columns must be -1)
  std::vector<std::int64_t> len;     // per row: number of valid candidates (positions 0..len-1)
  Tensor scores;                     // f64 [R, C]: reference score of candidate position p of row r
  Tensor bounds;                     // f64 [R, C]: error bound u of that score (0 = exact scores), may be empty
                                     // (then the comparator derives u from the tolerance profile)
  std::vector<double> kth;           // per row: k-th largest reference score tau (-inf when len == 0; NaN ranks
                                     // above +inf, as in torch.topk)
  // Candidate position p of row r -> the index value the kernel must emit (index base / page transform).
  std::function<std::int64_t(std::int64_t row, std::int64_t p)> to_index;
  // Emitted index value -> candidate position, or -1 if the value is not a valid candidate of the row.
  std::function<std::int64_t(std::int64_t row, std::int64_t idx)> from_index;
  // The other index bases the case's tensors allow (name, emitted index -> candidate position or -1): an invalid index
  // that is valid under one of them gets the hint "index_base=<name>?".
  std::vector<std::pair<std::string, std::function<std::int64_t(std::int64_t row, std::int64_t idx)>>> other_bases;
  bool sorted = false;               // output must be in descending score order (demo torch.topk sorted=True)
  bool fast_path = true;             // len <= k: output must be exactly [0..len-1] (mapped) then -1
  bool short_rows_torch = false;     // len < k: the k - len trailing entries may name non-candidate columns of the
                                     // row (torch.topk over a -inf-masked row) instead of -1
  bool ascending = false;            // the selected entries in strictly increasing index order (then the padding)
  // Said after "index where -1 padding is required" (how to declare a kernel that pads otherwise); "" = nothing.
  std::string short_rows_hint = "torch.topk output: set attrs short_rows=torch fast_path=0";
};

// A peer project's own pass/fail metric (e.g. FlashMLA's tests/lib.py check_is_allclose), evaluated beside the
// verdict and reported for information: non-finite positions must coincide, then per element
// |a - r| < abs_tol or |a - r| / (|r| + rel_eps) < rel_tol, and cos_diff = 1 - 2 sum(a r) / sum(a^2 + r^2) <= cos_tol
// (cos_tol < 0: no cosine criterion).
struct PeerMetric {
  std::string name;
  double abs_tol = 0, rel_tol = 0, rel_eps = 0, cos_tol = 0;
};

struct RefTensor {
  std::string name;          // the output's name (outputs/<name>)
  CompareKind kind = CompareKind::bytes;
  Tensor value;              // reference value, same dtype and shape the kernel output must have
  Tensor magnitude;          // bounded: f64, same numel: M per element (empty => |value|)
  Tensor defined;            // u8 same numel: 1 = this element is defined and compared (empty => all)
  bool mask_must_match = false;  // bounded: -inf pattern must match exactly (clean_logits)
  std::vector<PeerMetric> peers; // bounded: peer metrics reported beside the verdict (never decide it)
  // bounded: the systematic-error gate (docs/checking.md "Systematic error"): 0 = off; else the smallest relative
  // systematic error it may flag, as a scale (out = ref * (1 + b)) or an offset (out = ref + a, |a| relative to mean
  // |ref|), and only when the fit is 6 standard errors away from zero.
  double systematic_floor = 0;
  TopkRef topk;              // topk_set only
  // Bit-exact emulations of particular kernels (profile name -> value with the dtype/shape of `value`).
  std::map<std::string, Tensor> emulations;
  // Why a stage did not provide an emulation it was asked for (profile name -> reason; the report carries it).
  std::map<std::string, std::string> emulation_notes;
  // bytes: bit patterns accepted besides `value`'s at some elements (flat index -> the other accepted patterns, as
  // Tensor::bits gives them). A stage fills it where the kernel's documented approximations (e.g. Triton's approximate
  // exp / rsqrt) can flip a rounding its exact value is within reach of: the comparator passes such an element when the
  // output is one of them (verdict WITHIN_BOUND, counted in the message); every other element must be bit-exact.
  std::shared_ptr<const std::map<std::int64_t, std::vector<std::uint64_t>>> candidates;
  // Flat element index -> human meaning, e.g. "row 3 col 1027" or "page 17 token 5 scale". Flat indices are of the
  // whole output, also for a row tile.
  std::function<std::string(std::int64_t flat)> describe;
  // A row tile (Stage::tiling): `value` and the per-element tensors hold elements [flat_offset, flat_offset + numel)
  // of the whole output.
  std::int64_t flat_offset = 0;
};

struct Expected {
  std::vector<RefTensor> tensors;
  const RefTensor* find(const std::string& name) const {
    for (const auto& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
};

}  // namespace dsa
