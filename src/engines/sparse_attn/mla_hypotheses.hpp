// Known bugs of a sparse MLA kernel as values (Stage::hypotheses of attn.sparse_mla_decode / _prefill): one head of
// one query row recomputed on the row engine with the bug, through write_head (the stage's own conventions), so a
// failing output can be told "matches a kernel that reads -1 as token 0". Hints only, never verdicts.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engines/sparse_attn/head_out.hpp"
#include "stage/stage.hpp"

namespace dsa::attn {

enum class MlaBug {
  lse_other_base,       // lse / max_logits in the other base (log2 units where natural is pinned: x 1.4427)
  scale_576,            // softmax scale 576^-0.5 (FlashMLA's V3.2 default) instead of the case's
  rope_dropped,         // the RoPE dims of q.k left out
  minus_one_as_token0,  // an index -1 within the row's length read as token 0 instead of masked
  sink_dropped,         // attn_sink not applied
  sink_in_numerator,    // the sink as a key with an all-ones value (e^sink in the numerator as well as in L)
};

// One element of a sparse MLA output, located by the stage: the query head, the row's keys, the conventions.
struct MlaElement {
  std::string part;        // "out" | "lse" | "max_logits"
  std::int64_t dim = 0;    // out: the value dim
  const std::uint16_t* q = nullptr;  // the head's D bf16 bits
  std::int64_t D = 0, dv = 0, rope = 64;
  double scale = 0;
  std::vector<std::int64_t> ids;         // the row's keys in the reference order
  std::vector<std::int64_t> ids_minus1;  // the same with every -1 within the row's length read as token 0
  std::function<void(std::int64_t id, double* k)> key;  // D values of key id
  const float* sink = nullptr;           // the head's sink (null: none)
  Conventions cv;
};

// Fills `e` for flat index `flat` of output `tensor`; false where the element is not a row-head value.
using MlaLocate = std::function<bool(const Case& c, const dsa::Params& p, const std::string& tensor, std::int64_t flat, MlaElement& e)>;

// The element's value (as the output dtype holds it) and bound M of a kernel with `bug`; nullopt where the bug does
// not apply (no -1 in the row, no sink, the scale already 576^-0.5, an lse bug asked of out).
std::optional<Hypothesis::Value> mla_bug_value(const MlaElement& e, MlaBug bug);

// The stage's hypotheses over its outputs `tensors` (of "out", "lse", "max_logits").
std::vector<Hypothesis> mla_hypotheses(const std::vector<std::string>& tensors, MlaLocate locate);

}  // namespace dsa::attn
