#include "selftest/mutants.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>

#include "golden/rng.hpp"
#include "numerics/formats.hpp"
#include "reference/kcache_layout.hpp"
#include "stages/registry.hpp"

namespace dsa::selftest {
namespace {

using cmp::Verdict;

Expected reference_for_check(const Case& c) { return run_reference(c, cmp::reference_options(c, {})); }

// ---- input builders (all values from the counter-based RNG: same bits everywhere) ----
Tensor bf16_normal(Shape s, Rng r, double scale) {
  Tensor t(DType::bf16, std::move(s));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<std::uint16_t>()[i] = num::f64_to_bf16(r.normal() * scale);
  return t;
}
Tensor f32_normal(Shape s, Rng r, double scale, double shift = 0.0) {
  Tensor t(DType::f32, std::move(s));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(shift + r.normal() * scale);
  return t;
}
Tensor fp8_normal(Shape s, Rng r, double scale) {
  Tensor t(DType::fp8_e4m3fn, std::move(s));
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data<std::uint8_t>()[i] = num::f64_to_e4m3(std::clamp(r.normal() * scale, -448.0, 448.0));
  return t;
}
Tensor i32(Shape s, const std::vector<std::int32_t>& v) { return Tensor::from_vector(DType::i32, std::move(s), v); }
// Power-of-two scale 2^-e, e in [lo, hi].
float pow2_scale(Rng& r, int lo, int hi) { return std::ldexp(1.0f, -static_cast<int>(r.randint(lo, hi))); }

// Paged planar cache [P, ps, 1, D+4] with random codes and positive scales.
Tensor planar_cache(std::int64_t P, std::int64_t ps, std::int64_t D, Rng r) {
  Tensor t(DType::u8, {P, ps, 1, D + 4});
  ref::KCacheLayout L{ps, D};
  std::uint8_t* b = t.data<std::uint8_t>();
  for (std::int64_t p = 0; p < P; ++p)
    for (std::int64_t k = 0; k < ps; ++k) {
      for (std::int64_t d = 0; d < D; ++d) b[L.value_offset(p, k) + d] = num::f64_to_e4m3(std::clamp(r.normal() * 64.0, -448.0, 448.0));
      const float s = pow2_scale(r, 6, 9);
      std::memcpy(b + L.scale_offset(p, k), &s, 4);
    }
  return t;
}

Case make(const std::string& name, const std::string& stage) {
  Case c;
  c.name = name;
  c.stage = stage;
  return c;
}

// Top-k logits [R, C]: row kinds by index (distinct, ties, short, empty, all equal, -inf heavy).
Tensor topk_logits(std::int64_t R, std::int64_t C, std::int64_t start, Rng r) {
  Tensor t(DType::f32, {R, C});
  float* x = t.data<float>();
  for (std::int64_t i = 0; i < R; ++i)
    for (std::int64_t j = 0; j < C; ++j) {
      const std::int64_t p = j - start;
      float v = static_cast<float>(r.normal());
      if (i % 6 == 1) v = static_cast<float>(r.randint(0, 3));                                   // many exact ties
      if (i % 6 == 4) v = 0.5f;                                                                  // all equal
      if (i % 6 == 5) v = p < 10 ? -std::numeric_limits<float>::infinity() : static_cast<float>(r.normal());  // -inf heavy
      x[i * C + j] = v;
    }
  return t;
}

Tensor& output(Case& c, const std::string& n) {
  auto it = c.outputs.find(n);
  if (it == c.outputs.end()) throw std::runtime_error(c.where() + ": mutant needs outputs/" + n);
  it->second = it->second.clone();
  return it->second;
}
const RefTensor& reft(const Expected& E, const std::string& n) {
  const RefTensor* t = E.find(n);
  if (!t) throw std::runtime_error("mutant: reference has no tensor " + n);
  return *t;
}
void set_attr(Case& c, const std::string& k, AttrValue v) { c.attrs[k] = std::move(v); }

template <typename F>
void edit_input(Case& c, const std::string& n, F f) {
  Tensor t = c.input(n).clone();
  f(t);
  c.inputs[n] = t;
}

void iset(Tensor& t, std::int64_t i, std::int64_t v) {
  if (t.dtype() == DType::i64) t.data<std::int64_t>()[i] = v;
  else t.data<std::int32_t>()[i] = static_cast<std::int32_t>(v);
}

// Defined elements with a finite reference value of a bounded tensor.
std::vector<std::int64_t> finite_defined(const RefTensor& t) {
  std::vector<std::int64_t> v;
  const std::uint8_t* def = t.defined.defined() ? t.defined.data<std::uint8_t>() : nullptr;
  for (std::int64_t i = 0; i < t.value.numel(); ++i)
    if ((!def || def[i]) && std::isfinite(t.value.value(i))) v.push_back(i);
  return v;
}

// Rewrites a planar paged cache as a kernel that reads 132-byte token records would see it (B5).
Tensor interleaved_view(const Tensor& cache) {
  Tensor t = cache.clone();
  const ref::KCacheView v = ref::KCacheView::of(cache);
  const auto& L = v.layout;
  const std::uint8_t* src = cache.data<std::uint8_t>();
  std::uint8_t* dst = t.data<std::uint8_t>();
  for (std::int64_t p = 0; p < v.num_pages; ++p)
    for (std::int64_t k = 0; k < L.page_size; ++k) {
      const std::int64_t rec = p * L.page_bytes() + k * (L.head_dim + 4);
      std::memcpy(dst + L.value_offset(p, k), src + rec, static_cast<std::size_t>(L.head_dim));
      std::memcpy(dst + L.scale_offset(p, k), src + rec + L.head_dim, 4);
    }
  return t;
}

}  // namespace

void plausible_outputs(Case& c, const Expected& E, std::uint64_t seed) {
  Rng rng(seed, 0x5E1F);
  const std::string emu = cmp::requested_emulation(c, {});
  std::uint64_t stream = 0;
  for (const RefTensor& rt : E.tensors) {
    Rng r = rng.fork(stream++);
    if (rt.kind == CompareKind::bytes) {
      c.outputs[rt.name] = rt.value.clone();
      continue;
    }
    const cmp::Tolerance tol = cmp::resolve_tolerance(c, rt.name, {});
    if (rt.kind == CompareKind::bounded) {
      if (auto it = emu.empty() ? rt.emulations.end() : rt.emulations.find(emu); it != rt.emulations.end()) {
        c.outputs[rt.name] = it->second.clone();
        continue;
      }
      Tensor o = rt.value.clone();
      const std::uint8_t* def = rt.defined.defined() ? rt.defined.data<std::uint8_t>() : nullptr;
      const double* mag = rt.magnitude.defined() ? rt.magnitude.data<double>() : nullptr;
      for (std::int64_t i = 0; i < o.numel(); ++i) {
        const double u = r.uniform(-1.0, 1.0);
        if (def && !def[i]) {
          o.set_value(i, 1000.0 * u);  // a kernel may leave anything in undefined elements
          continue;
        }
        const double v = rt.value.value(i);
        if (!std::isfinite(v)) continue;
        const double M = mag ? mag[i] : std::fabs(v);
        o.set_value(i, v + 0.3 * u * (tol.rtol * M + tol.atol));  // one rounding to the output dtype
      }
      c.outputs[rt.name] = o;
      continue;
    }
    // topk_set
    const TopkRef& t = rt.topk;
    Tensor o = rt.value.clone();
    const auto R = static_cast<std::int64_t>(t.len.size());
    const std::int64_t W = R ? o.numel() / R : 0;
    for (std::int64_t row = 0; row < R; ++row) {
      const cmp::TopkRow tr = cmp::topk_row(t, row, tol);
      if (t.fast_path && tr.len <= t.k) continue;
      std::vector<std::int64_t> sel;
      for (std::int64_t i = 0; i < tr.n; ++i) sel.push_back(t.from_index(row, rt.value.int_at(row * W + i)));
      const std::set<std::int64_t> in(sel.begin(), sel.end());
      std::vector<std::int64_t> band_out;
      for (std::int64_t p = 0; p < tr.len; ++p)
        if (tr.cls[static_cast<std::size_t>(p)] == cmp::Band::band && !in.count(p)) band_out.push_back(p);
      for (int s = 0; s < 2 && !band_out.empty(); ++s) {  // up to two in-band swaps
        std::vector<std::size_t> band_in;
        for (std::size_t i = 0; i < sel.size(); ++i)
          if (tr.cls[static_cast<std::size_t>(sel[i])] == cmp::Band::band) band_in.push_back(i);
        if (band_in.empty()) break;
        const auto a = band_in[static_cast<std::size_t>(r.randint(0, static_cast<std::int64_t>(band_in.size()) - 1))];
        const auto b = static_cast<std::size_t>(r.randint(0, static_cast<std::int64_t>(band_out.size()) - 1));
        std::swap(sel[a], band_out[b]);
      }
      if (t.sorted) {
        std::stable_sort(sel.begin(), sel.end(), [&](std::int64_t a, std::int64_t b) {
          return tr.score[static_cast<std::size_t>(a)] > tr.score[static_cast<std::size_t>(b)];
        });
      } else {
        for (std::size_t i = sel.size(); i > 1; --i)
          std::swap(sel[i - 1], sel[static_cast<std::size_t>(r.randint(0, static_cast<std::int64_t>(i) - 1))]);
      }
      for (std::int64_t i = 0; i < W; ++i) iset(o, row * W + i, i < tr.n ? t.to_index(row, sel[static_cast<std::size_t>(i)]) : -1);
    }
    c.outputs[rt.name] = o;
  }
}

std::vector<Case> base_cases(std::uint64_t seed) {
  Rng g(seed, 0xCA5E);
  std::vector<Case> v;
  {
    Case c = make("quant", "indexer.quant");
    Tensor x = bf16_normal({4, 256}, g.fork(1), 1.0);
    for (std::int64_t i = 0; i < x.numel(); ++i)  // per-block dynamic range
      x.data<std::uint16_t>()[i] = num::f64_to_bf16(x.value(i) * std::ldexp(1.0, static_cast<int>((i / 128) % 5) - 2));
    c.inputs["x"] = x;
    v.push_back(c);
  }
  {
    Case c = make("prolog", "indexer.prolog");
    const std::int64_t T = 3, H = 4, D = 128;
    c.inputs["q"] = bf16_normal({T, H, D}, g.fork(2), 1.0);
    c.inputs["k"] = bf16_normal({T, D}, g.fork(3), 1.0);
    c.inputs["w"] = f32_normal({T, H}, g.fork(4), 0.1);
    c.inputs["ln_weight"] = f32_normal({D}, g.fork(5), 0.1, 1.0);
    c.inputs["ln_bias"] = f32_normal({D}, g.fork(6), 0.05);
    Tensor cs(DType::f32, {T, 32}), sn(DType::f32, {T, 32});
    Rng r = g.fork(7);
    for (std::int64_t i = 0; i < cs.numel(); ++i) {
      const double u = r.uniform(-1.0, 1.0);
      cs.data<float>()[i] = static_cast<float>(u);
      sn.data<float>()[i] = static_cast<float>(std::sqrt(1.0 - u * u));
    }
    c.inputs["cos"] = cs;
    c.inputs["sin"] = sn;
    v.push_back(c);
  }
  {
    Case c = make("kcache", "indexer.kcache_store");
    const std::int64_t T = 5, D = 128;
    c.inputs["k_fp8"] = fp8_normal({T, D}, g.fork(8), 64.0);
    Tensor s(DType::f32, {T});
    Rng r = g.fork(9);
    for (std::int64_t i = 0; i < T; ++i) s.data<float>()[i] = pow2_scale(r, 4, 10);
    c.inputs["k_scale"] = s;
    c.inputs["slot_mapping"] = i32({T}, {3, 70, -1, 130, 69});
    c.inputs["kv_cache_in"] = planar_cache(3, 64, D, g.fork(10));
    v.push_back(c);
  }
  for (const bool sm90 : {false, true}) {
    Case c = make(sm90 ? "ragged_sm90" : "ragged", "indexer.logits_ragged");
    const std::int64_t S = 6, H = 32, D = 64, N = 40;
    c.inputs["q"] = fp8_normal({S, H, D}, g.fork(11), 2.0);
    c.inputs["kv"] = fp8_normal({N, D}, g.fork(12), 64.0);
    Tensor s(DType::f32, {N});
    Rng r = g.fork(13);
    for (std::int64_t i = 0; i < N; ++i) s.data<float>()[i] = static_cast<float>(r.uniform(0.002, 0.02));
    c.inputs["kv_scale"] = s;
    c.inputs["weights"] = f32_normal({S, H}, g.fork(14), 0.1);
    c.inputs["ks"] = i32({S}, {0, 2, 4, 6, 8, 10});
    c.inputs["ke"] = i32({S}, {20, 24, 28, 32, 36, 40});
    if (sm90) c.attrs["kernel"] = std::string("deepgemm-sm90");
    v.push_back(c);
  }
  {
    Case c = make("paged", "indexer.logits_paged");
    const std::int64_t B = 2, nn = 2, H = 32, D = 64;
    c.inputs["q"] = fp8_normal({B, nn, H, D}, g.fork(15), 2.0);
    c.inputs["kv_cache"] = planar_cache(4, 64, D, g.fork(16));
    c.inputs["weights"] = f32_normal({B * nn, H}, g.fork(17), 0.1);
    c.inputs["context_lens"] = i32({B}, {70, 100});
    c.inputs["block_table"] = i32({B, 2}, {2, 0, 3, 1});
    c.attrs["max_context_len"] = std::int64_t{128};
    v.push_back(c);
  }
  {
    Case c = make("topk_rel", "indexer.topk");
    c.inputs["logits"] = topk_logits(6, 48, 0, g.fork(18));
    c.inputs["lengths"] = i32({6}, {48, 30, 5, 0, 20, 12});
    c.attrs["k"] = std::int64_t{8};
    v.push_back(c);
  }
  {
    Case c = make("topk_abs", "indexer.topk");
    c.inputs["logits"] = topk_logits(6, 100, 50, g.fork(19));
    c.inputs["lengths"] = i32({6}, {48, 30, 5, 0, 20, 12});
    c.inputs["row_starts"] = i32({6}, {50, 50, 50, 50, 50, 50});
    c.attrs["k"] = std::int64_t{8};
    c.attrs["index_base"] = std::string("absolute");
    v.push_back(c);
  }
  {
    Case c = make("topk_page", "indexer.topk");
    c.inputs["logits"] = topk_logits(4, 48, 0, g.fork(20));
    c.inputs["lengths"] = i32({4}, {40, 41, 10, 33});
    c.inputs["page_table"] = i32({2, 4}, {7, 2, 5, 0, 1, 6, 3, 4});
    c.attrs["k"] = std::int64_t{8};
    c.attrs["index_base"] = std::string("page_slot");
    c.attrs["page_size"] = std::int64_t{16};
    c.attrs["rows_per_request"] = std::int64_t{2};
    v.push_back(c);
  }
  for (auto& c : v) apply_attr_defaults(c);
  return v;
}

TensorMap buggy_outputs(const Case& c, const std::function<void(Case&)>& bug, std::uint64_t seed) {
  Case b = c;
  bug(b);
  const Expected E = reference_for_check(b);
  plausible_outputs(b, E, seed);
  return b.outputs;
}

const std::vector<Mutant>& mutants() {
  using V = std::vector<Verdict>;
  auto buggy = [](std::function<void(Case&)> bug) {
    return [bug](Case& c, const Expected&, std::uint64_t seed) {
      for (auto& [n, t] : buggy_outputs(c, bug, seed)) c.outputs[n] = t;
    };
  };
  static const std::vector<Mutant> all{
      {"quant_fp32_scale", "B2", "quant", V{Verdict::FAIL}, "act_quant with fp32 amax/448 scales instead of ue8m0",
       buggy([](Case& c) { set_attr(c, "scale_fmt", std::string("fp32_div")); })},
      {"prolog_rope_flipped", "B1", "prolog", V{Verdict::FAIL}, "indexer RoPE interleaved instead of NeoX",
       buggy([](Case& c) { set_attr(c, "rope_layout", std::string("interleaved")); })},
      {"prolog_no_hadamard", "B3", "prolog", V{Verdict::FAIL}, "Hadamard rotation skipped",
       buggy([](Case& c) { set_attr(c, "hadamard", std::int64_t{0}); })},
      {"kcache_token_interleaved", "B5", "kcache", V{Verdict::FAIL}, "cache written as 132-byte token records",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "kv_cache");
         std::memcpy(o.raw(), c.input("kv_cache_in").raw(), o.nbytes());
         const auto L = ref::KCacheView::of(o).layout;
         const Tensor& sm = c.input("slot_mapping");
         for (std::int64_t i = 0; i < sm.numel(); ++i) {
           const std::int64_t slot = sm.int_at(i);
           if (slot < 0) continue;
           const std::int64_t rec = (slot / L.page_size) * L.page_bytes() + (slot % L.page_size) * (L.head_dim + 4);
           std::memcpy(o.data<std::uint8_t>() + rec, c.input("k_fp8").data<std::uint8_t>() + i * L.head_dim,
                       static_cast<std::size_t>(L.head_dim));
           std::memcpy(o.data<std::uint8_t>() + rec + L.head_dim, c.input("k_scale").data<float>() + i, 4);
         }
       }},
      {"kcache_padded_token_written", "B12", "kcache", V{Verdict::FAIL}, "padded token (slot -1) written to slot 0",
       buggy([](Case& c) {
         edit_input(c, "slot_mapping", [](Tensor& t) {
           for (std::int64_t i = 0; i < t.numel(); ++i)
             if (t.int_at(i) < 0) iset(t, i, 0);
         });
       })},
      {"ragged_k_scale_dropped", "B6", "ragged", V{Verdict::FAIL}, "kv_scale not applied (read as 1)",
       buggy([](Case& c) { edit_input(c, "kv_scale", [](Tensor& t) { for (auto& x : t.span<float>()) x = 1.0f; }); })},
      {"ragged_relu_missing", "B4", "ragged", V{Verdict::FAIL}, "head scores summed without ReLU",
       [](Case& c, const Expected& E, std::uint64_t) {
         Tensor& o = output(c, "logits");
         const RefTensor& rt = reft(E, "logits");
         const Tensor &q = c.input("q"), &kv = c.input("kv"), &sc = c.input("kv_scale"), &w = c.input("weights");
         const std::int64_t H = q.dim(1), D = q.dim(2), W = o.dim(1), msk = c.attr_int("max_seqlen_k", 0);
         for (std::int64_t f : finite_defined(rt)) {
           const std::int64_t i = f / W, j = msk > 0 ? c.input("ks").data<std::int32_t>()[i] + f % W : f % W;
           double sum = 0;
           for (std::int64_t h = 0; h < H; ++h) {
             double s = 0;
             for (std::int64_t d = 0; d < D; ++d) s += q.value((i * H + h) * D + d) * kv.value(j * D + d);
             sum += s * w.value(i * H + h);  // no relu
           }
           o.set_value(f, sum * sc.value(j));
         }
       }},
      {"ragged_causal_off_by_one", "B15", "ragged", V{Verdict::MASK_MISMATCH}, "one key past ke[i] is visible",
       buggy([](Case& c) {
         const std::int64_t N = c.input("kv").dim(0);
         edit_input(c, "ke", [N](Tensor& t) {
           for (std::int64_t i = 0; i < t.numel(); ++i)
             if (t.int_at(i) < N) iset(t, i, t.int_at(i) + 1);
         });
       })},
      {"ragged_nan_logit", "B14", "ragged", V{Verdict::NONFINITE}, "one defined logit is NaN (unwritten / OOB read)",
       [](Case& c, const Expected& E, std::uint64_t seed) {
         const auto fd = finite_defined(reft(E, "logits"));
         Rng r(seed, 7);
         output(c, "logits").set_value(fd[static_cast<std::size_t>(r.randint(0, static_cast<std::int64_t>(fd.size()) - 1))],
                                       std::numeric_limits<double>::quiet_NaN());
       }},
      {"ragged_zero_logits", "B6", "ragged", V{Verdict::FAIL}, "all logits zero (scale aliasing reads zeros)",
       [](Case& c, const Expected& E, std::uint64_t) {
         Tensor& o = output(c, "logits");
         for (std::int64_t f : finite_defined(reft(E, "logits"))) o.set_value(f, 0.0);
       }},
      {"sm90_not_bitexact", "B21", "ragged_sm90", V{Verdict::FAIL},
       "kernel claims deepgemm-sm90 but its logits differ from the emulation (inside the sm90 bound)",
       [](Case& c, const Expected& E, std::uint64_t seed) {
         Case tmp = c;
         tmp.attrs.erase("kernel");
         plausible_outputs(tmp, E, seed + 1);
         c.outputs["logits"] = tmp.outputs.at("logits");
       }},
      {"paged_mtp_row_shift", "B11", "paged", V{Verdict::FAIL}, "MTP rows of a request swapped (row b*next_n+t off by one)",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "logits");
         const std::int64_t R = o.dim(0), W = o.dim(1), nn = c.input("q").dim(1);
         const Tensor src = o.clone();
         for (std::int64_t r = 0; r < R; ++r) {
           const std::int64_t from = (r / nn) * nn + (r % nn + 1) % nn;
           std::memcpy(o.raw() + r * W * static_cast<std::int64_t>(dtype_size(o.dtype())),
                       src.raw() + from * W * static_cast<std::int64_t>(dtype_size(o.dtype())), static_cast<std::size_t>(W) * dtype_size(o.dtype()));
         }
       }},
      {"paged_wrong_page", "B7", "paged", V{Verdict::FAIL}, "block_table entries of request 0 used in the wrong order",
       buggy([](Case& c) {
         edit_input(c, "block_table", [](Tensor& t) {
           const std::int64_t a = t.int_at(0), b = t.int_at(1);
           iset(t, 0, b);
           iset(t, 1, a);
         });
       })},
      {"paged_scale_interleaved", "B5", "paged", V{Verdict::FAIL, Verdict::NONFINITE},
       "K cache read as 132-byte token records (scale at the token-interleaved offset)",
       buggy([](Case& c) { c.inputs["kv_cache"] = interleaved_view(c.input("kv_cache")); })},
      {"topk_index_base_plus1", "B12", "topk_rel", V{Verdict::STRUCTURE}, "indices emitted 1-based",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "indices");
         for (std::int64_t i = 0; i < o.numel(); ++i)
           if (o.int_at(i) >= 0) iset(o, i, o.int_at(i) + 1);
       }},
      {"topk_relative_not_absolute", "B11", "topk_abs", V{Verdict::STRUCTURE}, "relative positions where absolute columns are expected",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "indices");
         const Tensor& rs = c.input("row_starts");
         const std::int64_t W = o.dim(1);
         for (std::int64_t i = 0; i < o.numel(); ++i)
           if (o.int_at(i) >= 0) iset(o, i, o.int_at(i) - rs.int_at(i / W));
       }},
      {"topk_padding_missing", "B12", "topk_rel", V{Verdict::STRUCTURE}, "rows shorter than k padded with 0 instead of -1",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "indices");
         for (std::int64_t i = 0; i < o.numel(); ++i)
           if (o.int_at(i) == -1) iset(o, i, 0);
       }},
      {"topk_duplicate", "B9", "topk_rel", V{Verdict::STRUCTURE}, "one index emitted twice in a row",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "indices");
         iset(o, 1, o.int_at(0));
       }},
      {"topk_out_of_band_swap", "B9", "topk_rel", V{Verdict::FAIL}, "a clear winner replaced by the row's lowest score",
       [](Case& c, const Expected& E, std::uint64_t) {
         Tensor& o = output(c, "indices");
         const RefTensor& rt = reft(E, "indices");
         const cmp::TopkRow tr = cmp::topk_row(rt.topk, 0, cmp::resolve_tolerance(c, "indices", {}));
         std::int64_t worst = -1, best = -1;
         for (std::int64_t p = 0; p < tr.len; ++p) {
           const auto pu = static_cast<std::size_t>(p);
           if (tr.cls[pu] == cmp::Band::must_not && (worst < 0 || tr.score[pu] < tr.score[static_cast<std::size_t>(worst)])) worst = p;
           if (tr.cls[pu] == cmp::Band::must && (best < 0 || tr.score[pu] > tr.score[static_cast<std::size_t>(best)])) best = p;
         }
         if (worst < 0 || best < 0) throw std::runtime_error("topk_out_of_band_swap: row 0 has no clear winner/loser");
         for (std::int64_t i = 0; i < o.dim(1); ++i)
           if (rt.topk.from_index(0, o.int_at(i)) == best) iset(o, i, rt.topk.to_index(0, worst));
       }},
      {"topk_positional", "B22", "topk_rel", V{Verdict::FAIL}, "sparsity not engaged: first k positions selected",
       [](Case& c, const Expected& E, std::uint64_t) {
         Tensor& o = output(c, "indices");
         const TopkRef& t = reft(E, "indices").topk;
         const std::int64_t W = o.dim(1);
         for (std::int64_t r = 0; r < o.dim(0); ++r)
           if (t.len[static_cast<std::size_t>(r)] > t.k)
             for (std::int64_t i = 0; i < W; ++i) iset(o, r * W + i, i < t.k ? t.to_index(r, i) : -1);
       }},
      {"topk_causal_off_by_one", "B15", "topk_rel", V{Verdict::STRUCTURE}, "row lengths one too long",
       buggy([](Case& c) {
         const std::int64_t C = c.input("logits").dim(1);
         edit_input(c, "lengths", [C](Tensor& t) {
           for (std::int64_t i = 0; i < t.numel(); ++i)
             if (t.int_at(i) < C) iset(t, i, t.int_at(i) + 1);
         });
       })},
      {"topk_page_wrong_request", "B11", "topk_page", V{Verdict::STRUCTURE}, "slots mapped through another request's page table row",
       buggy([](Case& c) {
         edit_input(c, "page_table", [](Tensor& t) {
           const std::int64_t nb = t.dim(1);
           for (std::int64_t j = 0; j < nb; ++j) {
             const std::int64_t a = t.int_at(j), b = t.int_at(nb + j);
             iset(t, j, b);
             iset(t, nb + j, a);
           }
         });
       })},
  };
  return all;
}

}  // namespace dsa::selftest
