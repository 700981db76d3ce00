// indexer.fused reference: indexer.logits_paged's exact logits (any backend), then the canonical top-k and the
// per-candidate band of the logits' bound (see stage.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "profiles/profile.hpp"
#include "engines/topk/topk_canonical.hpp"
#include "stages/indexer/fused/stage.hpp"

namespace dsa::indexer::fused {

Case logits_case(const Case& c) {
  Case l;
  l.file = c.file;
  l.name = c.name;
  l.stage = "indexer.logits_paged";
  l.inputs = c.inputs;  // Tensor handles: shared storage
  for (const auto& [k, v] : c.attrs)
    if (k != "k" && k != "sorted" && k != "fast_path" && k != "stage") l.attrs[k] = v;
  l.attrs["clean_logits"] = std::int64_t{0};
  return l;
}

namespace {
// One unit in the last place of x in the logits dtype (fp32, or bf16: 16 fewer significand bits); 0 for non-finite.
double ulp_of(double x, bool bf16) {
  const float a = std::fabs(static_cast<float>(x));
  if (!std::isfinite(a)) return 0.0;
  const double u = static_cast<double>(std::nextafter(a, std::numeric_limits<float>::infinity())) - static_cast<double>(a);
  return bf16 ? u * 65536.0 : u;
}
}  // namespace

Expected reference(const Case& c, const Params& p, const RefOptions& opt, Backend backend) {
  RefOptions ro;
  ro.threads = opt.threads;
  const bool emulate = p.logits_profile != nullptr;
  ro.emulation = p.logits_profile;
  const Expected L = run_reference(*p.logits_case, ro, backend);
  const RefTensor& lt = *L.find("logits");
  const Tensor& vals = emulate ? lt.emulations.at(p.logits_profile->name) : lt.value;
  const bool bf16 = lt.value.dtype() == DType::bf16;
  const std::int64_t R = lt.value.dim(0), C = lt.value.dim(1), k = p.k;
  const TolerancePolicy* pol = find_tolerance_policy(p.band_policy);
  const double rtol = pol ? pol->rtol : 0.0, atol = pol ? pol->atol : 0.0;
  std::int64_t W = k;
  for (const auto* g : {&c.outputs, &c.expected})
    if (auto it = g->find("indices"); it != g->end() && it->second.rank() == 2) {
      W = it->second.dim(1);
      break;
    }
  const double inf = std::numeric_limits<double>::infinity();
  Tensor scores(DType::f64, {R, C}), bounds(DType::f64, {R, C}), value(DType::i32, {R, W});
  auto len = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(R));
  std::vector<double> kth(static_cast<std::size_t>(R));
  const std::uint8_t* def = lt.defined.data<std::uint8_t>();
  const double* M = lt.magnitude.data<double>();
#pragma omp parallel for schedule(dynamic, 1) num_threads(opt.thread_count())
  for (std::int64_t r = 0; r < R; ++r) {
    std::int64_t n = 0;
    while (n < C && def[r * C + n]) ++n;  // the valid columns are a prefix [0, n_r)
    (*len)[static_cast<std::size_t>(r)] = n;
    double* row = scores.data<double>() + r * C;
    double* bd = bounds.data<double>() + r * C;
    for (std::int64_t j = 0; j < C; ++j) {
      row[j] = j < n ? vals.value(r * C + j) : -inf;
      bd[j] = j < n && !emulate ? rtol * std::fabs(M[r * C + j]) + atol + ulp_of(row[j], bf16) : 0.0;
    }
    const std::vector<std::int64_t> sel = engines::topk::topk_selection(row, n, k, p.fast_path);
    kth[static_cast<std::size_t>(r)] = n <= k ? engines::topk::topk_last_score(row, n) : (sel.empty() ? -inf : row[sel.back()]);
    for (std::int64_t j = 0; j < W; ++j)
      value.data<std::int32_t>()[r * W + j] = j < static_cast<std::int64_t>(sel.size()) ? static_cast<std::int32_t>(sel[static_cast<std::size_t>(j)]) : -1;
  }
  RefTensor t;
  t.name = "indices";
  t.kind = CompareKind::topk_set;
  t.value = value;
  t.topk.k = k;
  t.topk.len = *len;
  t.topk.scores = scores;
  t.topk.bounds = bounds;
  t.topk.kth = std::move(kth);
  t.topk.to_index = [](std::int64_t, std::int64_t q) { return q; };
  t.topk.from_index = [len](std::int64_t r, std::int64_t idx) {
    return idx >= 0 && idx < (*len)[static_cast<std::size_t>(r)] ? idx : std::int64_t{-1};
  };
  t.topk.sorted = p.sorted;
  t.topk.fast_path = p.fast_path;
  const std::int64_t NN = c.input("q").dim(1);
  t.describe = [W, NN](std::int64_t f) {
    const std::int64_t r = f / W;
    return "batch " + std::to_string(r / NN) + " next_n " + std::to_string(r % NN) + " col " + std::to_string(f % W);
  };
  Expected e;
  e.tensors.push_back(std::move(t));
  return e;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return reference(c, p, opt, Backend::cpu); }

}  // namespace dsa::indexer::fused
