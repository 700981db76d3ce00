// v41.indexer_k reference: per group-closing token in parallel (distinct slots, checked by parse), k_norm and RoPE in
// fp64 with their bound (engines/v4_compress norm_rope), then the record's bytes with their candidates
// (engines/quant/byte_cands).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engines/quant/byte_cands.hpp"
#include "numerics/formats.hpp"
#include "stages/v41/indexer_k/core.hpp"
#include "stages/v41/indexer_k/stage.hpp"

namespace dsa::v41::indexer_k {
namespace {

using core::kD;
using core::kRope;
constexpr std::int64_t kNope = kD - kRope;

// The record of one token: the bytes of values y (bound ey) at slot `slot`.
void store(const Params& p, Bug bug, const double* y, const double* ey, std::int64_t slot, quant::ByteOut& o) {
  const layouts::RecordFormat& f = *p.rec.f;
  const std::int64_t codes = p.rec.region_offset(slot, f.region_index(layouts::RegionKind::codes));
  const std::int64_t scales = p.rec.region_offset(slot, f.region_index(layouts::RegionKind::scales));
  if (bug == Bug::quant_fp32) {  // B49: the fp32 values quantized as they are (no bf16 rounding, no candidates)
    float x[kD];
    for (std::int64_t i = 0; i < kD; ++i) x[i] = static_cast<float>(y[i]);
    std::uint8_t rec[132] = {};
    const layouts::KvRecord one{&f, layouts::RecordOrder::token_interleaved, 1};
    layouts::store_record(one, x, 0, rec, layouts::producer_quant(f));
    const std::int64_t cb = f.code_bytes(), sb = f.nscales() * f.scale_bytes();
    for (std::int64_t i = 0; i < cb; ++i) o.put(codes + i, rec[i], {});
    for (std::int64_t i = 0; i < sb; ++i) o.put(scales + i, rec[cb + i], {});
    return;
  }
  if (f.codec == layouts::RecCodec::fp8) {
    const quant::Fp8Cands q = quant::fp8_block_cands(y, ey, kD, quant::ue8m0_rule());
    for (std::int64_t i = 0; i < kD; ++i) o.put(codes + i, q.codes[static_cast<std::size_t>(i)][0], q.codes[static_cast<std::size_t>(i)]);
    o.put_f32(scales, q.scale, q.scales);
    return;
  }
  fp4core::E2m1Opts e2;
  if (bug == Bug::e2m1_ties_down) e2.tie = fp4core::Tie::half_down;
  const fp4core::Mx4Rule rule = bug == Bug::mx4_floor_1e4 ? fp4core::Mx4Rule::ref_floor_1e4 : fp4core::Mx4Rule::ref;
  for (std::int64_t b = 0; b < kD / 32; ++b) quant::mxfp4_block_cands(y + 32 * b, ey + 32 * b, rule, e2, o, codes + 16 * b, scales + b);
}

}  // namespace

std::vector<std::int64_t> emitting(const Case& c, const Params& p, Bug bug) {
  const Tensor& pos = c.input("positions");
  const Tensor& km = c.input("kv_slot_mapping");
  const std::int64_t cap = c.input("k_cache_in").dim(0) * c.input("k_cache_in").dim(1);
  std::vector<std::int64_t> emit;  // (a mid-group token's slot is unchecked by parse: the gate bug's hint skips bad ones)
  for (std::int64_t t = 0; t < p.T; ++t)
    if (km.int_at(t) >= 0 && km.int_at(t) < cap && ((pos.int_at(t) + 1) % p.r == 0 || bug == Bug::gate_ignored)) emit.push_back(t);
  return emit;
}

namespace {

Expected run_impl(const Case& c, const Params& p, Bug bug, int threads, const std::vector<double>* dev_y, const std::vector<double>* dev_ey) {
  const Tensor& kp = c.input("k_pre");
  const Tensor& pos = c.input("positions");
  const Tensor& cs = c.input("cos_sin_cache");
  const Tensor& km = c.input("kv_slot_mapping");
  const std::uint16_t* gamma = c.input("norm_weight").data<std::uint16_t>();
  Tensor kc = c.input("k_cache_in").clone();
  const std::int64_t cap = kc.dim(0) * kc.dim(1);
  const std::vector<std::int64_t> emit = emitting(c, p, bug);
  auto writer = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(cap), -1);
  std::vector<quant::ByteOut> outs(emit.size());
#pragma omp parallel num_threads(threads)
  {
    std::vector<double> y(kD), ey(kD);
    std::vector<std::uint16_t> x(kD), g(kD);
#pragma omp for schedule(dynamic, 4)
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(emit.size()); ++k) {
      const std::int64_t t = emit[static_cast<std::size_t>(k)], ps = pos.int_at(t);
      if (cs.dim(0) == 0) continue;  // only a bug path gets here with an empty table (parse needs rows for the writers)
      if (dev_y) {  // the CUDA backend's values (cuda.cu: the same key_values)
        std::copy_n(dev_y->begin() + k * kD, kD, y.begin()), std::copy_n(dev_ey->begin() + k * kD, kD, ey.begin());
      } else {
        // (parse checks the group starts of the writing tokens; the bug paths clamp theirs to the table)
        const std::int64_t gp = std::min(bug == Bug::rope_at_position ? ps : ps / p.r * p.r, cs.dim(0) - 1);
        // B58's halves-style pairs (64 + i, 96 + i): the same rotation on a permuted row (the norm is permutation-invariant).
        auto src = [&](std::int64_t d) {
          if (bug != Bug::rope_halves || d < kNope) return d;
          const std::int64_t i = (d - kNope) / 2;
          return kNope + ((d - kNope) % 2 == 0 ? i : kRope / 2 + i);
        };
        for (std::int64_t d = 0; d < kD; ++d) {
          x[static_cast<std::size_t>(d)] = kp.data<std::uint16_t>()[t * kD + src(d)];
          g[static_cast<std::size_t>(d)] = gamma[src(d)];
        }
        core::key_values(x.data(), g.data(), cs.data<float>() + gp * kRope, p.eps, y.data(), ey.data());
        if (bug == Bug::rope_halves) {
          const std::vector<double> yy = y, ee = ey;
          for (std::int64_t d = 0; d < kD; ++d) y[static_cast<std::size_t>(src(d))] = yy[static_cast<std::size_t>(d)], ey[static_cast<std::size_t>(src(d))] = ee[static_cast<std::size_t>(d)];
        }
      }
      store(p, bug, y.data(), ey.data(), km.int_at(t), outs[static_cast<std::size_t>(k)]);
    }
  }
  auto cands = std::make_shared<quant::ByteCandMap>();
  std::uint8_t* kb = kc.data<std::uint8_t>();
  for (std::size_t k = 0; k < emit.size(); ++k) {  // token order: a later token's record wins (the gate bug's shared slots)
    outs[k].apply(kb, *cands);
    (*writer)[static_cast<std::size_t>(km.int_at(emit[k]))] = emit[k];
  }
  RefTensor rk;
  rk.name = "k_cache";
  rk.kind = CompareKind::bytes;
  rk.value = kc;
  if (!cands->empty()) rk.candidates = cands;
  const layouts::KvRecord rec = p.rec;
  const std::int64_t ps = kc.dim(1);
  rk.describe = [rec, ps, writer](std::int64_t f) {
    const std::int64_t slot = rec.slot_of(f), w = (*writer)[static_cast<std::size_t>(slot)];
    return rec.describe(f) + " (slot " + std::to_string(slot) +
           (w >= 0 ? ", written by token " + std::to_string(w) + ")"
                   : slot < ps ? ", the null page 0: must equal k_cache_in)" : ", not written by this step: must equal k_cache_in)");
  };
  Expected e;
  e.tensors.push_back(std::move(rk));
  return e;
}

}  // namespace

Expected run(const Case& c, const Params& p, Bug bug, int threads) { return run_impl(c, p, bug, threads, nullptr, nullptr); }

Expected run_with_keys(const Case& c, const Params& p, int threads, const std::vector<double>& y, const std::vector<double>& ey) {
  return run_impl(c, p, Bug::none, threads, &y, &ey);
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

std::vector<Hypothesis> hypotheses() {
  return bug_hints<Bug>("k_cache", {
      {Bug::rope_at_position, "v41 §5", "RoPE at the token's own position instead of its group's start (p / r) * r"},
      {Bug::rope_halves, "B58", "halves-style RoPE pairs (64 + i, 96 + i) where the V4.1 indexer rotates interleaved pairs (64 + 2i, 65 + 2i)"},
      {Bug::quant_fp32, "B49", "the fp32 RoPE result quantized without its bf16 rounding (the reference and vLLM round it first)"},
      {Bug::gate_ignored, "v41 §4", "a key written by mid-group tokens too ((p + 1) % r != 0) into their group's slot"},
      {Bug::e2m1_ties_down, "B50", "e2m1 midpoints rounded down (DeepGEMM's utility) where the writer rounds them to even"},
      {Bug::mx4_floor_1e4, "B54", "the MXFP4 amax floor 1e-4 (vLLM before #41015) where the floor is 6*2^-126: tiny blocks get scale 2^-15 and zero codes"},
  }, [](Hypothesis& x, Bug bug) {
    x.bytes = [bug](const Case& c, const dsa::Params& pp) -> std::optional<Tensor> {
      const auto& p = dynamic_cast<const Params&>(pp);
      const bool fp4 = p.rec.f->codec == layouts::RecCodec::mxfp4;
      if ((bug == Bug::e2m1_ties_down || bug == Bug::mx4_floor_1e4) && !fp4) return std::nullopt;
      if (bug == Bug::gate_ignored && p.r == 1) return std::nullopt;
      return run(c, p, bug, 1).tensors.front().value;
    };
  });
}

}  // namespace dsa::v41::indexer_k
