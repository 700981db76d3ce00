// bounded comparator: |out - ref| <= rtol * M + atol per defined element, M from the RefTensor (|ref| if absent).
// Non-finite values must match the reference's pattern; for clean logits the -inf mask must match exactly.
// Metrics (all in double, fixed element order): max abs, max rel, max err/M, max ULP distance at the reference,
// cosine, DeepGEMM calc_diff, msprobe thousandth ratios, and the minimum rtol that passes.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <sstream>

#include "compare/compare.hpp"
#include "compare/detail.hpp"

namespace dsa::cmp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The systematic-error gate flags a fit this many standard errors from zero (for zero-mean errors P < 2e-5 at the smallest n, 16).
constexpr double kSysSigmas = 6.0;
constexpr std::size_t kWorst = 16;
constexpr std::int64_t kGrid = 512;

}  // namespace

std::uint8_t err_code(double em) {
  if (!(em > 0)) return 1;
  const double l = std::log10(em);
  if (!(l < kPlotLogHi)) return 255;
  if (l <= kPlotLogLo) return 2;
  return static_cast<std::uint8_t>(2 + std::floor((l - kPlotLogLo) / (kPlotLogHi - kPlotLogLo) * 253.0));
}

double err_of_code(std::uint8_t code) {
  if (code <= 1) return 0.0;
  return std::pow(10.0, kPlotLogLo + (code - 2) * (kPlotLogHi - kPlotLogLo) / 253.0);
}

void BoundedAccumulator::collect_plot(std::int64_t rows, std::int64_t cols) {
  plot_ = std::make_shared<PlotData>();
  HeatmapData h;
  h.rows = std::max<std::int64_t>(rows, 1);
  h.cols = std::max<std::int64_t>(cols, 1);
  h.gh = std::min(h.rows, kGrid);
  h.gw = std::min(h.cols, kGrid);
  h.code.assign(static_cast<std::size_t>(h.gh * h.gw), 0);
  h.flag.assign(static_cast<std::size_t>(h.gh * h.gw), 0);
  plot_->heat = std::move(h);
  HistData hist;
  hist.bins.assign(static_cast<std::size_t>((kPlotLogHi - hist.lo) / hist.step), 0);
  plot_->hist = std::move(hist);
  cell_max_.assign(static_cast<std::size_t>(plot_->heat->gh * plot_->heat->gw), -1.0);
}

BoundedAccumulator::BoundedAccumulator(const Tolerance& tol, const RefTensor& ref, DType out_dtype) : tol_(tol), name_(ref.name) {
  int emin = -126;
  detail::ulp_format(out_dtype, p_, emin);
  emin_ = emin;
  s_.ulp_bits = p_;
  for (const auto& pm : ref.peers) peers_.push_back({pm, 0, 0, 0, 0});
  sys_floor_ = ref.systematic_floor;
}

namespace {
// Elements [i0, i0 + n) of t: values (exact decode) and raw bits, typed loops for f32 / bf16, the generic decoder else.
void decode_block(const Tensor& t, std::int64_t i0, std::int64_t n, double* val, std::uint64_t* raw) {
  const std::byte* p = t.raw() + static_cast<std::size_t>(i0) * dtype_size(t.dtype());
  if (t.dtype() == DType::f32) {
    for (std::int64_t k = 0; k < n; ++k) {
      std::uint32_t u;
      std::memcpy(&u, p + 4 * k, 4);
      float f;
      std::memcpy(&f, &u, 4);
      raw[k] = u;
      val[k] = static_cast<double>(f);
    }
  } else if (t.dtype() == DType::bf16) {
    for (std::int64_t k = 0; k < n; ++k) {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * k, 2);
      const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      raw[k] = h;
      val[k] = static_cast<double>(f);
    }
  } else {
    for (std::int64_t k = 0; k < n; ++k) {
      raw[k] = t.bits(i0 + k);
      val[k] = num::decode_bits(t.dtype(), raw[k]);
    }
  }
}

inline double tree8(const double* x) { return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7])); }

// What one thread saw over its elements, apart from the sums: merged by rules that do not depend on the order
// (counts add; maxima; the kept elements by value, ties to the lowest index). Indices are local to the add() call.
struct Seen {
  std::int64_t compared = 0, ulp_compared = 0, n1e3 = 0, n5e3 = 0, bit_diff = 0, nonfinite = 0, mask = 0, bound_fail = 0, g_n = 0;
  double max_abs = 0, max_rel = 0, max_em = 0, max_ulp = 0, min_rtol = 0, zero_bound_ulp = 0;
  std::int64_t first_nf = -1, first_mask = -1, first_fail = -1;
  std::vector<std::int64_t> breaks;  // the lowest 16 indices of non-finite / mask breaks, increasing
  double worst_em = -1, pass_em = -1;
  std::int64_t worst_i = -1, pass_i = -1;
  std::vector<std::pair<double, std::int64_t>> top;  // err/M > 0 elements: the 16 largest (em desc, index asc)
  std::vector<double> cell_max;                      // plots: per grid cell
  std::vector<std::uint8_t> flag;
  std::vector<std::int64_t> bins;
  std::int64_t hzero = 0, hbelow = 0, hover = 0;
  std::vector<std::int64_t> beyond;  // per peer

  static void keep_first(std::int64_t& a, std::int64_t b) {
    if (b >= 0 && (a < 0 || b < a)) a = b;
  }
  static void keep_max(double& em, std::int64_t& i, double oem, std::int64_t oi) {
    if (oi >= 0 && (oem > em || (oem == em && (i < 0 || oi < i)))) em = oem, i = oi;
  }
  static bool top_before(const std::pair<double, std::int64_t>& a, const std::pair<double, std::int64_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  }
  void push_top(double em, std::int64_t i, std::size_t cap) {
    if (top.size() == cap && !top_before({em, i}, top.front())) return;
    if (top.size() == cap) {
      std::pop_heap(top.begin(), top.end(), top_before);
      top.pop_back();
    }
    top.emplace_back(em, i);
    std::push_heap(top.begin(), top.end(), top_before);  // front: the one ranked last
  }
  void merge(const Seen& o, std::size_t cap) {
    compared += o.compared, ulp_compared += o.ulp_compared, n1e3 += o.n1e3, n5e3 += o.n5e3, bit_diff += o.bit_diff;
    nonfinite += o.nonfinite, mask += o.mask, bound_fail += o.bound_fail, g_n += o.g_n;
    max_abs = std::max(max_abs, o.max_abs), max_rel = std::max(max_rel, o.max_rel), max_em = std::max(max_em, o.max_em);
    max_ulp = std::max(max_ulp, o.max_ulp), min_rtol = std::max(min_rtol, o.min_rtol);
    zero_bound_ulp = std::max(zero_bound_ulp, o.zero_bound_ulp);
    keep_first(first_nf, o.first_nf), keep_first(first_mask, o.first_mask), keep_first(first_fail, o.first_fail);
    std::vector<std::int64_t> b(breaks);
    b.insert(b.end(), o.breaks.begin(), o.breaks.end());
    std::sort(b.begin(), b.end());
    if (b.size() > 16) b.resize(16);
    breaks = std::move(b);
    keep_max(worst_em, worst_i, o.worst_em, o.worst_i);
    keep_max(pass_em, pass_i, o.pass_em, o.pass_i);
    for (const auto& t : o.top) push_top(t.first, t.second, cap);
    for (std::size_t c = 0; c < o.cell_max.size(); ++c) cell_max[c] = std::max(cell_max[c], o.cell_max[c]);
    for (std::size_t c = 0; c < o.flag.size(); ++c) flag[c] |= o.flag[c];
    for (std::size_t c = 0; c < o.bins.size(); ++c) bins[c] += o.bins[c];
    hzero += o.hzero, hbelow += o.hbelow, hover += o.hover;
    for (std::size_t c = 0; c < o.beyond.size(); ++c) beyond[c] += o.beyond[c];
  }
};
}  // namespace

void BoundedAccumulator::close_block(const double* lanes) {
  double* g[kNSum] = {&sxy_, &sxx_, &syy_, &g_d_, &g_dd_, &g_de_, &g_ee_, &g_eedd_, &g_eeed_, &g_eeee_, &g_abs_e_};
  for (int k = 0; k < kNSum; ++k) *g[k] += tree8(lanes + 8 * k);
  for (std::size_t q = 0; q < peers_.size(); ++q) {
    const double* l = lanes + 8 * (kNSum + 3 * static_cast<int>(q));
    peers_[q].xy += tree8(l), peers_[q].xx += tree8(l + 8), peers_[q].yy += tree8(l + 16);
  }
}

void BoundedAccumulator::add(const Tensor& out, const RefTensor& ref, const Tensor* against) {
  const Tensor& v = against ? *against : ref.value;
  const std::int64_t off = ref.flat_offset, n = v.numel();
  numel_ += n;
  const std::uint8_t* def = ref.defined.defined() ? ref.defined.data<std::uint8_t>() : nullptr;
  const bool has_m = ref.magnitude.defined() && ref.magnitude.numel() == n;
  const double* mag = has_m ? ref.magnitude.data<double>() : nullptr;
  const Tolerance tol = tol_;
  const bool sys = sys_floor_ > 0;
  const int np = static_cast<int>(peers_.size());
  const int nl = 8 * (kNSum + 3 * np);  // lanes per block
  const int p = p_, emin = emin_;
  const HeatmapData* heat = plot_ ? &*plot_->heat : nullptr;
  const double hist_lo = plot_ ? plot_->hist->lo : 0, hist_step = plot_ ? plot_->hist->step : 1;
  const std::size_t nbins = plot_ ? plot_->hist->bins.size() : 0;
  auto cell = [&](std::int64_t i) {
    const std::int64_t f = off + i, r = f / heat->cols, c = f % heat->cols;
    return static_cast<std::size_t>(std::min(r * heat->gh / heat->rows, heat->gh - 1) * heat->gw + c * heat->gw / heat->cols);
  };
  auto fresh = [&] {
    Seen s;
    if (plot_) s.cell_max.assign(cell_max_.size(), -1.0), s.flag.assign(cell_max_.size(), 0), s.bins.assign(nbins, 0);
    s.beyond.assign(static_cast<std::size_t>(np), 0);
    return s;
  };
  // Elements [i0, i1) (local indices, within one block) into lanes L and sn.
  const std::size_t esz = dtype_size(v.dtype());
  const bool same_type = out.dtype() == v.dtype();
  auto run = [&](std::int64_t i0, std::int64_t i1, double* L, Seen& sn, double* ob, double* eb, std::uint64_t* orw, std::uint64_t* erw) {
    decode_block(out, i0, i1 - i0, ob, orw);
    decode_block(v, i0, i1 - i0, eb, erw);
    for (std::int64_t i = i0; i < i1; ++i) {
      const std::int64_t k = i - i0;
      const int lane = static_cast<int>((off + i) & 7);
      if (def && !def[i]) continue;
      const double o = ob[k], e = eb[k];
      for (int q = 0; q < np; ++q) {
        const PeerMetric& pm = peers_[static_cast<std::size_t>(q)].pm;
        double* pl = L + 8 * (kNSum + 3 * q) + lane;
        if (!std::isfinite(e) || !std::isfinite(o)) {
          sn.beyond[static_cast<std::size_t>(q)] += !((std::isnan(e) && std::isnan(o)) || o == e);
          continue;
        }
        const double d = std::fabs(o - e);
        sn.beyond[static_cast<std::size_t>(q)] += !(d < pm.abs_tol || d / (std::fabs(e) + pm.rel_eps) < pm.rel_tol);
        pl[0] += o * e, pl[8] += o * o, pl[16] += e * e;
      }
      if (orw[k] == erw[k] && std::isfinite(e)) {
        // The same bits (a passing kernel's common case): err = 0, so only the counts and the sums move.
        ++sn.compared;
        const double ee = e * e;
        L[8 * kSxy + lane] += ee, L[8 * kSxx + lane] += ee, L[8 * kSyy + lane] += ee;
        if (sys) ++sn.g_n, L[8 * kGee + lane] += ee, L[8 * kGeeee + lane] += ee * ee, L[8 * kGabs + lane] += std::fabs(e);
        ++sn.n1e3, ++sn.n5e3;
        if (heat) {
          double& cm = sn.cell_max[cell(i)];
          cm = std::max(cm, 0.0);
          ++sn.hzero;
        }
        if (e != 0) {  // |e| = 0 stands above no bound: M unread
          const double M = mag ? mag[i] : std::fabs(e);
          if (std::fabs(e) > tol.rtol * M + tol.atol) ++sn.ulp_compared;
        }
        continue;
      }
      if (orw[k] != erw[k] && !(std::isnan(o) && std::isnan(e))) ++sn.bit_diff;
      if (!std::isfinite(e) || !std::isfinite(o)) {
        if ((std::isnan(e) && std::isnan(o)) || o == e) continue;
        const bool mask_issue = ref.mask_must_match && ((e == -kInf && !std::isnan(o)) || (o == -kInf && std::isfinite(e)));
        if (heat) sn.flag[cell(i)] |= mask_issue ? 2 : 1;
        ++(mask_issue ? sn.mask : sn.nonfinite);
        Seen::keep_first(mask_issue ? sn.first_mask : sn.first_nf, i);
        if (plot_ && sn.breaks.size() < 16) sn.breaks.push_back(i);
        continue;
      }
      const double M = mag ? mag[i] : std::fabs(e);
      const double err = std::fabs(o - e);
      const double bound = tol.rtol * M + tol.atol;
      ++sn.compared;
      L[8 * kSxy + lane] += o * e, L[8 * kSxx + lane] += o * o, L[8 * kSyy + lane] += e * e;
      if (sys) {
        const double d = o - e, ee = e * e;
        ++sn.g_n;
        L[8 * kGd + lane] += d, L[8 * kGdd + lane] += d * d, L[8 * kGde + lane] += d * e, L[8 * kGee + lane] += ee;
        L[8 * kGeedd + lane] += ee * d * d, L[8 * kGeeed + lane] += ee * e * d, L[8 * kGeeee + lane] += ee * ee;
        L[8 * kGabs + lane] += std::fabs(e);
      }
      if (bound == 0 && err > 0) sn.zero_bound_ulp = std::max(sn.zero_bound_ulp, err / detail::ulp_at(e, p, emin));
      sn.max_abs = std::max(sn.max_abs, err);
      const double rel = e != 0 ? err / std::fabs(e) : (err == 0 ? 0.0 : kInf);
      sn.max_rel = std::max(sn.max_rel, rel);
      if (rel < 1e-3) ++sn.n1e3;
      if (rel < 5e-3) ++sn.n5e3;
      const double em = M > 0 ? err / M : (err == 0 ? 0.0 : kInf);
      sn.max_em = std::max(sn.max_em, em);
      if (heat) {
        double& cm = sn.cell_max[cell(i)];
        cm = std::max(cm, em);
        if (err == 0) ++sn.hzero;
        else if (!(em < 1e3)) ++sn.hover;  // 10^kPlotLogHi
        else {
          const double b = std::floor((std::log10(em) - hist_lo) / hist_step);
          if (b < 0) ++sn.hbelow;
          else sn.bins[static_cast<std::size_t>(std::min<double>(b, static_cast<double>(nbins - 1)))] += 1;
        }
        if (err > 0) sn.push_top(em, i, kWorst);
      }
      // ulps only where |ref| stands above the bound: below it (cancellation, near-zero logits) an ulp of the
      // reference says nothing about the kernel (err/M is the meaningful figure there).
      if (std::fabs(e) > bound) {
        sn.max_ulp = std::max(sn.max_ulp, err / detail::ulp_at(e, p, emin));
        ++sn.ulp_compared;
      }
      if (err > tol.atol) sn.min_rtol = std::max(sn.min_rtol, M > 0 ? (err - tol.atol) / M : kInf);
      if (err > 0 && err <= bound) Seen::keep_max(sn.pass_em, sn.pass_i, em, i);
      if (err > bound) {
        ++sn.bound_fail;
        Seen::keep_first(sn.first_fail, i);
        Seen::keep_max(sn.worst_em, sn.worst_i, em, i);
      }
    }
  };

  // A whole block (lanes zero) whose elements are all defined, finite and the same bits in both tensors: its lanes
  // in registers, the same sums as run() (each lane still adds its elements in increasing index). false: run() it.
  auto equal_block = [&](std::int64_t i0, std::int64_t i1, double* L, Seen& sn, double* eb, std::uint64_t* erw) {
    const std::int64_t nk = i1 - i0;
    if (!same_type || heat || np != 0 || nk != kSumBlock) return false;
    if (def && std::memchr(def + i0, 0, static_cast<std::size_t>(nk)) != nullptr) return false;
    if (std::memcmp(out.raw() + static_cast<std::size_t>(i0) * esz, v.raw() + static_cast<std::size_t>(i0) * esz,
                    static_cast<std::size_t>(nk) * esz) != 0)
      return false;
    decode_block(v, i0, nk, eb, erw);
    // Equal non-finite pairs (an empty score slot's -inf) are not compared: they add +0, which leaves a lane as it is.
    double sq[8] = {}, s4[8] = {}, sa[8] = {};
    std::int64_t fin = 0;
    for (std::int64_t k = 0; k < nk; k += 8)
      for (int l = 0; l < 8; ++l) {
        const double e = eb[k + l];
        const bool f = e - e == 0;  // false for inf and NaN
        const double ef = f ? e : 0.0, ee = ef * ef;
        fin += f;
        sq[l] += ee;
        s4[l] += ee * ee;
        sa[l] += std::fabs(ef);
      }
    std::int64_t ulps = 0;
    for (std::int64_t k = 0; k < nk; ++k) {
      const double e = eb[k];
      if (e != 0 && e - e == 0) ulps += std::fabs(e) > tol.rtol * (mag ? mag[i0 + k] : std::fabs(e)) + tol.atol;
    }
    for (int l = 0; l < 8; ++l) {
      L[8 * kSxy + l] = L[8 * kSxx + l] = L[8 * kSyy + l] = sq[l];
      if (sys) L[8 * kGee + l] = sq[l], L[8 * kGeeee + l] = s4[l], L[8 * kGabs + l] = sa[l];
    }
    sn.compared += fin, sn.n1e3 += fin, sn.n5e3 += fin, sn.ulp_compared += ulps;
    if (sys) sn.g_n += fin;
    return true;
  };

  // Blocks of whole-output flat indices: the open block's rest first (this thread), the whole blocks on the team,
  // the last partial block stays open for the next tile (or finish()).
  if (open_lanes_.size() != static_cast<std::size_t>(nl)) open_lanes_.assign(static_cast<std::size_t>(nl), 0.0);
  Seen all = fresh();
  std::vector<double> ob(kSumBlock), eb(kSumBlock);
  std::vector<std::uint64_t> orw(kSumBlock), erw(kSumBlock);
  std::int64_t i = 0;
  while (i < n) {
    const std::int64_t f = off + i, blk = f / kSumBlock, bend = std::min(n, (blk + 1) * kSumBlock - off);
    if (open_block_ != blk) {
      if (open_block_ >= 0) close_block(open_lanes_.data());
      std::fill(open_lanes_.begin(), open_lanes_.end(), 0.0);
      open_block_ = blk;
    }
    const bool whole = f % kSumBlock == 0 && bend - i == kSumBlock;
    if (whole) break;  // the whole blocks from here on
    run(i, bend, open_lanes_.data(), all, ob.data(), eb.data(), orw.data(), erw.data());
    i = bend;
  }
  if (i < n) {
    // [i, wend): whole blocks; then the tail opens its block.
    const std::int64_t nblocks = (n - i) / kSumBlock, wend = i + nblocks * kSumBlock;
    if (open_block_ >= 0 && open_block_ != (off + i) / kSumBlock) close_block(open_lanes_.data());
    open_block_ = -1;
    // In rounds of at most 4096 blocks (a bounded lane table whatever the tensor's size), each closed in order.
    constexpr std::int64_t kRound = 4096;
    std::vector<double> totals;
    const int team = threads_ > 0 ? threads_ : omp_get_max_threads();
    const int nt = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(team, nblocks)));
    std::vector<Seen> seen(static_cast<std::size_t>(nt));
    for (Seen& sn : seen) sn = fresh();
    for (std::int64_t r0 = 0; r0 < nblocks; r0 += kRound) {
      const std::int64_t nr = std::min(kRound, nblocks - r0), base = i + r0 * kSumBlock;
      totals.assign(static_cast<std::size_t>(nr * nl), 0.0);
      std::exception_ptr err;
#pragma omp parallel num_threads(nt)
      {
        const int t = omp_get_thread_num();
        try {
          Seen& sn = seen[static_cast<std::size_t>(t)];
          std::vector<double> tob(kSumBlock), teb(kSumBlock);
          std::vector<std::uint64_t> torw(kSumBlock), terw(kSumBlock);
#pragma omp for schedule(static)
          for (std::int64_t b = 0; b < nr; ++b) {
            double* L = totals.data() + b * nl;
            const std::int64_t b0 = base + b * kSumBlock, b1 = b0 + kSumBlock;
            if (!equal_block(b0, b1, L, sn, teb.data(), terw.data())) run(b0, b1, L, sn, tob.data(), teb.data(), torw.data(), terw.data());
          }
        } catch (...) {
#pragma omp critical(dsa_bounded_add)
          err = std::current_exception();
        }
      }
      if (err) std::rethrow_exception(err);
      for (std::int64_t b = 0; b < nr; ++b) close_block(totals.data() + b * nl);
    }
    for (const Seen& sn : seen) all.merge(sn, kWorst);
    i = wend;
    if (i < n) {
      open_block_ = (off + i) / kSumBlock;
      std::fill(open_lanes_.begin(), open_lanes_.end(), 0.0);
      run(i, n, open_lanes_.data(), all, ob.data(), eb.data(), orw.data(), erw.data());
    }
  }

  // Fold this call into the accumulator, building the kept elements' locations while the tile is at hand.
  BoundedStats& s = s_;
  auto elem = [&](std::int64_t k, double& err, double& bound) {
    const double o = out.value(k), e = v.value(k), M = mag ? mag[k] : std::fabs(e);
    err = std::fabs(o - e), bound = tol.rtol * M + tol.atol;
  };
  auto loc = [&](std::int64_t k, bool nonfinite) {
    double err = kInf, bound = 0.0;
    if (!nonfinite) elem(k, err, bound);
    Location l = detail::location(out, v, k, detail::describe(ref, off + k), err, bound);
    l.flat = off + k;
    return l;
  };
  s.compared += all.compared, s.ulp_compared += all.ulp_compared, n_1e3_ += all.n1e3, n_5e3_ += all.n5e3;
  bit_diff_ += all.bit_diff, nonfinite_ += all.nonfinite, mask_ += all.mask, bound_fail_ += all.bound_fail, g_n_ += static_cast<double>(all.g_n);
  s.max_abs = std::max(s.max_abs, all.max_abs), s.max_rel = std::max(s.max_rel, all.max_rel);
  s.max_err_over_m = std::max(s.max_err_over_m, all.max_em), s.max_ulp = std::max(s.max_ulp, all.max_ulp);
  s.min_rtol = std::max(s.min_rtol, all.min_rtol), zero_bound_ulp_ = std::max(zero_bound_ulp_, all.zero_bound_ulp);
  if (!first_nf_ && all.first_nf >= 0) first_nf_ = loc(all.first_nf, true);
  if (!first_mask_ && all.first_mask >= 0) first_mask_ = loc(all.first_mask, true);
  if (!first_fail_ && all.first_fail >= 0) first_fail_ = loc(all.first_fail, false);
  if (all.worst_i >= 0 && all.worst_em > worst_key_) worst_key_ = all.worst_em, worst_ = loc(all.worst_i, false);
  if (all.pass_i >= 0 && all.pass_em > top_pass_key_) top_pass_key_ = all.pass_em, top_pass_ = loc(all.pass_i, false);
  for (std::size_t q = 0; q < peers_.size(); ++q) peers_[q].beyond += all.beyond[q];
  if (plot_) {
    for (std::int64_t k : all.breaks)
      if (plot_->breaks.size() < 16) plot_->breaks.push_back(loc(k, true));
    for (std::size_t c = 0; c < cell_max_.size(); ++c) cell_max_[c] = std::max(cell_max_[c], all.cell_max[c]);
    for (std::size_t c = 0; c < all.flag.size(); ++c) plot_->heat->flag[c] |= all.flag[c];
    HistData& h = *plot_->hist;
    for (std::size_t c = 0; c < nbins; ++c) h.bins[c] += all.bins[c];
    h.zero += all.hzero, h.below += all.hbelow, h.over += all.hover;
    // The 16 largest err/M so far (earlier tiles hold lower indices: they win ties).
    std::sort(all.top.begin(), all.top.end(), Seen::top_before);
    for (const auto& [em, k] : all.top) {
      auto gt = [](const std::pair<double, Location>& a, const std::pair<double, Location>& b) { return a.first > b.first; };
      if (top_.size() == kWorst && !(em > top_.front().first)) continue;
      if (top_.size() == kWorst) {
        std::pop_heap(top_.begin(), top_.end(), gt);
        top_.pop_back();
      }
      top_.emplace_back(em, loc(k, false));
      std::push_heap(top_.begin(), top_.end(), gt);
    }
  }
}

CheckResult BoundedAccumulator::finish() const {
  BoundedAccumulator a(*this);  // the open block's lanes join the sums in the copy: more tiles may follow
  if (a.open_block_ >= 0) a.close_block(a.open_lanes_.data()), a.open_block_ = -1;
  return a.finish_closed();
}

CheckResult BoundedAccumulator::finish_closed() const {
  CheckResult r;
  r.kind = CompareKind::bounded;
  r.tensor = name_;
  r.tol = tol_;
  r.numel = numel_;
  const Tolerance& tol = tol_;
  BoundedStats s = s_;
  if (s.compared > 0) {
    s.ratio_rel_1e3 = static_cast<double>(n_1e3_) / static_cast<double>(s.compared);
    s.ratio_rel_5e3 = static_cast<double>(n_5e3_) / static_cast<double>(s.compared);
  }
  const double den = sxx_ + syy_;
  s.calc_diff = den == 0 ? 0.0 : 1.0 - 2.0 * sxy_ / den;
  s.cosine = (sxx_ == 0 && syy_ == 0) ? 1.0 : (sxx_ == 0 || syy_ == 0) ? 0.0 : sxy_ / std::sqrt(sxx_ * syy_);
  r.bounded = s;
  r.mismatches = nonfinite_ + mask_ + bound_fail_;
  if (plot_) {
    auto pd = std::make_shared<PlotData>(*plot_);
    for (std::size_t c = 0; c < cell_max_.size(); ++c) pd->heat->code[c] = cell_max_[c] < 0 ? 0 : err_code(cell_max_[c]);
    auto t = top_;
    std::sort(t.begin(), t.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (auto& [em, l] : t) pd->worst.push_back(l);
    r.plot = std::move(pd);
  }

  // The systematic-error gate: least-squares scale b (d = b e) and offset a (d = a), each with its standard error
  // computed from the residuals; flagged when above the floor and kSysSigmas standard errors from zero.
  std::string systematic;
  if (sys_floor_ > 0 && g_n_ >= 16 && g_ee_ > 0) {
    const double b = g_de_ / g_ee_;
    const double rss_b = std::max(0.0, g_eedd_ - 2 * b * g_eeed_ + b * b * g_eeee_);
    const double se_b = std::sqrt(rss_b) / g_ee_;
    const double a = g_d_ / g_n_, mean_e = g_abs_e_ / g_n_;
    const double se_a = std::sqrt(std::max(0.0, g_dd_ - g_n_ * a * a)) / g_n_;
    std::ostringstream g;
    if (std::fabs(b) > sys_floor_ && std::fabs(b) > kSysSigmas * se_b)
      g << "systematic scale error: out = ref x (1 " << (b < 0 ? "- " : "+ ") << detail::fmt(std::fabs(b)) << ") fitted over "
        << static_cast<std::int64_t>(g_n_) << " elements (standard error " << detail::fmt(se_b) << "), above the gate "
        << detail::fmt(sys_floor_);
    else if (mean_e > 0 && std::fabs(a) > sys_floor_ * mean_e && std::fabs(a) > kSysSigmas * se_a)
      g << "systematic offset: out = ref " << (a < 0 ? "- " : "+ ") << detail::fmt(std::fabs(a)) << " fitted over "
        << static_cast<std::int64_t>(g_n_) << " elements (standard error " << detail::fmt(se_a) << "), above the gate "
        << detail::fmt(sys_floor_) << " x mean |ref| = " << detail::fmt(sys_floor_ * mean_e);
    systematic = g.str();
    if (systematic.empty())
      r.notes.push_back("systematic-error gate: scale " + detail::fmt(b) + " (standard error " + detail::fmt(se_b) + "), offset " +
                        detail::fmt(a) + " (standard error " + detail::fmt(se_a) + ") over " +
                        std::to_string(static_cast<std::int64_t>(g_n_)) + " elements; floor " + detail::fmt(sys_floor_));
  }

  std::ostringstream m;
  auto metrics = [&] {
    if (zero_bound_ulp_ > 0 && !(s.max_err_over_m < kInf)) {
      m << "exact required where the bound is 0, off by " << detail::fmt(zero_bound_ulp_) << " ulp; max abs " << detail::fmt(s.max_abs);
      return;
    }
    m << "max err/M " << detail::fmt(s.max_err_over_m) << ", max abs " << detail::fmt(s.max_abs) << ", max ulp "
      << detail::fmt(s.max_ulp) << ", calc_diff " << detail::fmt(s.calc_diff) << "; rtol "
      << detail::fmt(tol.rtol) << (tol.profile.empty() ? "" : " (" + tol.profile + ")") << ", min passing rtol "
      << detail::fmt(s.min_rtol);
  };
  if (nonfinite_) {
    r.verdict = Verdict::NONFINITE;
    r.first = first_nf_;
    r.worst = first_nf_;
    m << nonfinite_ << " element(s) non-finite where the reference is not (or the NaN/inf pattern differs); first at "
      << detail::loc_str(*first_nf_);
  } else if (mask_) {
    r.verdict = Verdict::MASK_MISMATCH;
    r.first = first_mask_;
    r.worst = first_mask_;
    m << mask_ << " element(s) break the -inf mask; first at " << detail::loc_str(*first_mask_);
  } else if (bound_fail_) {
    r.verdict = Verdict::FAIL;
    r.first = first_fail_;
    r.worst = worst_;
    m << bound_fail_ << " of " << s.compared << " element(s) outside the bound; first at " << detail::loc_str(*first_fail_)
      << "; worst at " << detail::loc_str(*worst_) << "; ";
    metrics();
  } else if (bit_diff_ == 0) {
    r.verdict = Verdict::BITEXACT;
    m << "bit-exact (" << s.compared << " defined finite elements)";
  } else if (!systematic.empty()) {
    // Every element within its bound, but the errors share a sign: a shifted kernel (a wrong constant, a missing
    // factor) that the per-element worst case is too wide to see.
    r.verdict = Verdict::FAIL;
    r.first = top_pass_;
    r.worst = top_pass_;
    m << systematic << "; every element is within its bound (";
    metrics();
    m << ")";
    if (top_pass_) m << "; worst at " << detail::loc_str(*top_pass_);
  } else {
    r.verdict = Verdict::WITHIN_BOUND;
    r.worst = top_pass_;
    metrics();
    if (top_pass_) m << "; worst at " << detail::loc_str(*top_pass_);
  }
  if (r.verdict != Verdict::BITEXACT && r.verdict != Verdict::WITHIN_BOUND && r.verdict != Verdict::FAIL && s.compared)
    m << "; finite part: max err/M " << detail::fmt(s.max_err_over_m);
  for (const auto& pa : peers_) {
    const PeerMetric& pm = pa.pm;
    const double cd = pa.xx + pa.yy == 0 ? 0.0 : 1.0 - 2.0 * pa.xy / (pa.xx + pa.yy);
    const bool use_cos = pm.cos_tol >= 0;
    std::ostringstream pmsg;
    pmsg << pm.name << " (abs " << detail::fmt(pm.abs_tol) << ", rel " << detail::fmt(pm.rel_tol);
    if (use_cos) pmsg << ", cos_diff " << detail::fmt(pm.cos_tol);
    pmsg << "): " << (pa.beyond == 0 && (!use_cos || cd <= pm.cos_tol) ? "within" : "over") << " its tolerance, "
         << pa.beyond << " element(s) beyond abs/rel";
    if (use_cos) pmsg << ", cos_diff " << detail::fmt(cd);
    m << "; " << pmsg.str();
    r.notes.push_back("for information: " + pmsg.str());
  }
  r.message = m.str();
  return r;
}

CheckResult compare_bounded(const Tensor& out, const RefTensor& ref, const Tolerance& tol, const Tensor* against) {
  BoundedAccumulator a(tol, ref, out.dtype());
  a.add(out, ref, against);
  return a.finish();
}

}  // namespace dsa::cmp
