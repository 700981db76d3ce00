// v41.logits reference: each logit in fp64 from the exactly dequantized MXFP4 operands (e2m1 x 2^e products are
// exact; the fp64 sums' own error is below 2^-40 of the bound) with its derived bound; -inf / undefined columns by
// the variant's rules. Rows in parallel (each logit is independent: any thread count gives the same bytes).
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>

#include "numerics/formats.hpp"
#include "numerics/fp4_core.hpp"
#include "stages/v41/logits/core.hpp"
#include "stages/v41/logits/stage.hpp"

namespace dsa::v41::logits {

namespace {

// The packed scale bytes of (row, head) i: an int32, or D/32 bytes of a uint8 [R, H, D/32] tensor.
std::uint32_t sf_at(const Tensor& t, std::int64_t i) {
  if (t.dtype() == DType::i32) return static_cast<std::uint32_t>(t.data<std::int32_t>()[i]);
  const std::int64_t n = t.dim(-1);
  std::uint32_t v = 0;
  for (std::int64_t k = 0; k < n && k < 4; ++k) v |= static_cast<std::uint32_t>(t.data<std::uint8_t>()[i * n + k]) << (8 * k);
  return v;
}

double weight(const Tensor& w, std::int64_t i) {
  return w.dtype() == DType::bf16 ? num::bf16_to_f64(w.data<std::uint16_t>()[i]) : static_cast<double>(w.data<float>()[i]);
}

}  // namespace

Operands operands(const Case& c, const Params& p) {
  Operands o;
  const std::int64_t n = p.R * p.H;
  o.qsf.resize(static_cast<std::size_t>(n));
  o.w.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) o.qsf[static_cast<std::size_t>(i)] = sf_at(c.input("q_sf"), i), o.w[static_cast<std::size_t>(i)] = weight(c.input("weights"), i);
  o.keys = p.paged ? c.input("kv_cache").data<std::uint8_t>() : c.input("kv_fp4").data<std::uint8_t>();
  return o;
}

KeyRef key_ref(const Case& c, const Params& p, std::int64_t r, std::int64_t col, Bug bug) {
  if (!p.paged) {
    const std::int64_t lo = c.input("ks").int_at(r), hi = c.input("ke").int_at(r);
    if (col < lo || col >= hi) return {p.clean ? KeyRef::kNegInf : KeyRef::kUndefined, 0};
    return {col * (p.D / 2), bug == Bug::kv_scale_ignored ? 0x7F7F7F7Fu : static_cast<std::uint32_t>(c.input("kv_sf").data<std::int32_t>()[col])};
  }
  const std::int64_t b = c.input("sparse_blocks").int_at(r * p.nsb + col / p.sbk), len = c.input("context_lens").int_at(r);
  std::int64_t pos = b * p.sbk + col % p.sbk;
  if (b < 0 || pos >= len) return {p.clean ? KeyRef::kNegInf : KeyRef::kUndefined, 0};
  if (bug == Bug::sparse_map_ignored) pos = col % len;  // the key of position c (its mask still the list's)
  const std::int64_t ps = p.rec.page_size;
  const std::int64_t slot = c.input("block_table").int_at(r * p.maxp + pos / ps) * ps + pos % ps;
  const std::uint8_t* s = c.input("kv_cache").data<std::uint8_t>() + p.rec.region_offset(slot, 1);
  const std::uint32_t sf = static_cast<std::uint32_t>(s[0] | (s[1] << 8) | (s[2] << 16) | (static_cast<std::uint32_t>(s[3]) << 24));
  return {p.rec.region_offset(slot, 0), bug == Bug::kv_scale_ignored ? 0x7F7F7F7Fu : sf};
}

std::optional<std::pair<double, double>> logit(const Case& c, const Params& p, std::int64_t r, std::int64_t col, Bug bug) {
  const KeyRef k = key_ref(c, p, r, col, bug);
  if (k.off == KeyRef::kUndefined) return std::nullopt;
  if (k.off == KeyRef::kNegInf) return std::pair<double, double>{-std::numeric_limits<double>::infinity(), 0.0};
  const Operands o = operands(c, p);  // per call: the hypotheses evaluate a sample of elements only
  const core::Logit l = core::logit(c.input("q_fp4").data<std::uint8_t>() + r * p.H * (p.D / 2), o.qsf.data() + r * p.H, o.w.data() + r * p.H,
                                    o.keys + k.off, k.sf, p.H, p.D, bug == Bug::no_relu, bug == Bug::nibbles_swapped);
  return std::pair<double, double>{l.v, core::bound(l, p.H, p.D, p.bf16)};
}

Expected package(const Case& c, const Params& p, const std::vector<std::int64_t>& state, const std::vector<core::Logit>& l) {
  const DType dt = p.bf16 ? DType::bf16 : DType::f32;
  Tensor val(dt, {p.R, p.cols}), mag(DType::f64, {p.R, p.cols}), def(DType::u8, {p.R, p.cols});
  for (std::int64_t f = 0; f < p.R * p.cols; ++f) {
    const std::int64_t st = state[static_cast<std::size_t>(f)];
    const double v = st == KeyRef::kNegInf ? -std::numeric_limits<double>::infinity() : st == KeyRef::kUndefined ? 0.0 : l[static_cast<std::size_t>(f)].v;
    if (p.bf16) val.data<std::uint16_t>()[f] = num::f64_to_bf16(v);
    else val.data<float>()[f] = static_cast<float>(v);
    mag.data<double>()[f] = st >= 0 ? core::bound(l[static_cast<std::size_t>(f)], p.H, p.D, p.bf16) : 0.0;
    def.data<std::uint8_t>()[f] = st == KeyRef::kUndefined ? 0 : 1;
  }
  RefTensor t;
  t.name = "logits";
  t.kind = CompareKind::bounded;
  t.value = val;
  t.magnitude = mag;
  t.defined = def;
  t.mask_must_match = p.clean;
  const Params pp = p;
  const std::int64_t cols = p.cols;
  const Tensor sb = p.paged ? c.input("sparse_blocks") : Tensor();
  t.describe = [pp, cols, sb](std::int64_t f) {
    const std::int64_t r = f / cols, col = f % cols;
    std::string s = "row " + std::to_string(r) + " col " + std::to_string(col);
    if (pp.paged) {
      const std::int64_t b = sb.int_at(r * pp.nsb + col / pp.sbk);
      s += b < 0 ? " (a -1 block)" : " (block " + std::to_string(b) + ", position " + std::to_string(b * pp.sbk + col % pp.sbk) + ")";
    } else {
      s += " (key " + std::to_string(col) + ")";
    }
    return s;
  };
  Expected e;
  e.tensors.push_back(std::move(t));
  return e;
}

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  const Operands o = operands(c, p);
  const std::uint8_t* q = c.input("q_fp4").data<std::uint8_t>();
  std::vector<std::int64_t> state(static_cast<std::size_t>(p.R * p.cols));
  std::vector<core::Logit> l(state.size(), core::Logit{0, 0, 0});
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (std::int64_t r = 0; r < p.R; ++r)
    for (std::int64_t col = 0; col < p.cols; ++col) {
      const std::int64_t f = r * p.cols + col;
      const KeyRef k = key_ref(c, p, r, col, bug);
      state[static_cast<std::size_t>(f)] = k.off;
      if (k.off >= 0)
        l[static_cast<std::size_t>(f)] = core::logit(q + r * p.H * (p.D / 2), o.qsf.data() + r * p.H, o.w.data() + r * p.H, o.keys + k.off, k.sf,
                                                     p.H, p.D, bug == Bug::no_relu, bug == Bug::nibbles_swapped);
    }
  return package(c, p, state, l);
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

std::vector<Hypothesis> hypotheses() {
  return bug_hints<Bug>("logits", {
      {Bug::no_relu, "B4", "head scores summed without the ReLU"},
      {Bug::nibbles_swapped, "B52", "e2m1 nibbles read high-first (dim 2i in the high nibble) where the codec packs dim 2i low"},
      {Bug::kv_scale_ignored, "B6", "the keys' ue8m0 scales not applied (every key block read at scale 1)"},
      {Bug::sparse_map_ignored, "v41 §5", "column c read as position c instead of blocks[c / sparse_block_kv] * sparse_block_kv + c % sparse_block_kv"},
  }, [](Hypothesis& x, Bug bug) {
    x.value = [bug](const Case& c, const dsa::Params& pb, std::int64_t f) -> std::optional<Hypothesis::Value> {
      const auto& p = static_cast<const Params&>(pb);
      if (bug == Bug::sparse_map_ignored && !p.paged) return std::nullopt;
      const auto l = logit(c, p, f / p.cols, f % p.cols, bug);
      if (!l || std::isinf(l->first)) return std::nullopt;
      return Hypothesis::Value{l->first, l->second};
    };
  });
}

}  // namespace dsa::v41::logits
