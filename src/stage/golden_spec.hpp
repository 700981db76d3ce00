// Golden cases and input generators, the types every stage's golden.cpp fills. A golden case names its stage, its
// input generator, a seed, its shapes and the stage options (attrs); the catalogue (src/pipeline/catalogue.hpp) is
// every stage's rows in table order. `dsa-check golden --list` prints it; `dsa-check golden --case NAME` writes it.
// Selftest cases are the same specs run through the same generators (Stage::selftest).
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/case.hpp"

namespace dsa::golden {

// Model configuration of DeepSeek-V3.2 (spec v32 §1): the defaults every case starts from.
struct ModelConfig {
  std::int64_t n_heads = 64;     // index_n_heads (H)
  std::int64_t head_dim = 128;   // index_head_dim (D)
  std::int64_t topk = 2048;      // index_topk
  std::int64_t page_size = 64;   // paged K cache block
  std::int64_t rope_dim = 64;    // qk_rope_head_dim
};

// A non-finite value written into a generated input after its generator ran: element `elem` of row `row` (index
// along dim 0; the row is every element with that first index) of input `tensor`, or the whole row when elem = -1.
// `value` is NaN or +-inf, stored in the tensor's dtype (e4m3fn has no inf: +-inf stores its NaN code, as torch's
// cast does).
struct Poison {
  std::string tensor;
  std::int64_t row = 0;
  std::int64_t elem = -1;
  double value = 0;
};

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

struct GoldenSpec {
  std::string name;        // file name stem: <name>.h5, case group <name>
  std::string stage;       // registry stage name
  std::string generator;   // generators.hpp name
  std::uint64_t seed = 0;  // default seed (overridable with --seed)
  ModelConfig model;
  // Shapes and generator knobs. Scalars (T, K, S, N, B, next_n, ...) and per-row/per-request lists
  // (lengths, context_lens, prefix, rows, ...). Which keys a generator reads is documented with it.
  std::map<std::string, std::int64_t> dims;
  std::map<std::string, std::vector<std::int64_t>> lists;
  std::map<std::string, double> params;
  Attrs attrs;             // stage options written on the case (index base, clean_logits, next_n, dtype, ...)
  std::vector<Poison> poison;  // NaN / inf planted in float inputs after generation (NaN-policy goldens)
  bool committed = true;   // part of the committed goldens in golden/ (false: too large, generate on demand)
  std::string doc;         // one line: what this case is adversarial about

  std::int64_t dim(const std::string& k, std::int64_t def) const {
    auto it = dims.find(k);
    return it == dims.end() ? def : it->second;
  }
  double param(const std::string& k, double def) const {
    auto it = params.find(k);
    return it == params.end() ? def : it->second;
  }
  const std::vector<std::int64_t>& list(const std::string& k) const {  // std::invalid_argument if absent
    auto it = lists.find(k);
    if (it == lists.end()) throw std::invalid_argument("golden case '" + name + "': missing list '" + k + "'");
    return it->second;
  }
  bool has_list(const std::string& k) const { return lists.count(k) != 0; }
};

// Attr values for catalogue rows: I(2048), S("page_slot").
inline AttrValue I(std::int64_t v) { return AttrValue{v}; }
inline AttrValue S(const char* v) { return AttrValue{std::string(v)}; }

// A named input generator: builds the `inputs/` of its stage the way an engine would feed them, from a seed only
// (src/numerics/rng.hpp, one sub-stream per tensor and row: the same bits on every machine and thread count).
using GenerateFn = std::function<void(const GoldenSpec& spec, std::uint64_t seed, int threads, Case& out)>;
struct Generator {
  std::string name;
  std::string stage;
  std::string doc;  // distribution and the dims/lists/params it reads
  GenerateFn fn;
};

}  // namespace dsa::golden
