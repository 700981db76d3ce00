// Named input generators (see generators.hpp). Every generator draws from Rng(seed).fork(tensor).fork(row) only,
// so rows can be generated in parallel and the bits do not depend on the thread count.
#include "golden/generators.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "golden/rng.hpp"
#include "numerics/formats.hpp"
#include "reference/act_quant.hpp"
#include "reference/kcache_layout.hpp"

namespace dsa::golden {
namespace {

// Sub-stream ids, one per generated tensor (never reuse an id for two tensors of one case).
enum Stream : std::uint64_t { kX = 1, kQ, kK, kW, kLnW, kLnB, kKv, kSlots, kPoison, kPerm, kLogits, kRows, kPad };

int nthreads(int t) { return t > 0 ? t : omp_get_max_threads(); }
float f32(double x) { return static_cast<float>(x); }
double pow2(std::int64_t e) { return std::ldexp(1.0, static_cast<int>(e)); }

// Parallel loop over rows; row r draws from its own sub-stream of tensor stream `tid`.
template <class F>
void for_rows(const Rng& root, std::uint64_t tid, std::int64_t rows, int threads, F&& fn) {
  const Rng base = root.fork(tid);
#pragma omp parallel for schedule(static) num_threads(nthreads(threads))
  for (std::int64_t r = 0; r < rows; ++r) {
    Rng rng = base.fork(static_cast<std::uint64_t>(r));
    fn(r, rng);
  }
}

// N(0, sigma) with probability p_out of an outlier scaled by 2^U{3..10} (activation outliers).
double gauss_outlier(Rng& r, double sigma, double p_out) {
  double v = sigma * r.normal();
  if (p_out > 0.0 && r.uniform() < p_out) v *= pow2(r.randint(3, 10));
  return v;
}

// Fisher-Yates permutation of [0, n) from one stream.
std::vector<std::int64_t> permutation(Rng rng, std::int64_t n) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = i;
  for (std::int64_t i = n - 1; i > 0; --i) std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(rng.randint(0, i))]);
  return p;
}

ref::QuantParams ue8m0() { return ref::QuantParams{}; }

// act_quant of one bf16 row (length n, one block when n <= 128, else 128-blocks): codes into y, returns the
// scale of the first block (callers quantize one block per row).
float quant_bf16(const std::uint16_t* x, std::int64_t n, std::uint8_t* y) {
  std::vector<float> f(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) f[static_cast<std::size_t>(i)] = num::bf16_to_f32(x[i]);
  return ref::quantize_block(f.data(), n, ue8m0(), y);
}

const float kInvSqrt128 = num::f32_from_bits(0x3DB504F3u);  // fl32(128^-0.5)

// What the engines feed the logits kernels: q = act_quant(bf16 q) per head (scale folded into the gates),
// W = fl32(fl32(w * q_scale) * fl32(128^-0.5)). `sign` < 0 forces negative q entries (pre-ReLU scores < 0 when
// the keys are positive), `mixed_every` > 0 keeps every mixed_every-th head unconstrained.
struct QBuild {
  Tensor q_fp8, weights;
};
QBuild make_q(const Rng& root, std::int64_t rows, std::int64_t H, std::int64_t D, int threads, int sign = 0,
              std::int64_t mixed_every = 0, std::int64_t mixed_row_mod = 2) {
  QBuild b;
  b.q_fp8 = Tensor(DType::fp8_e4m3fn, {rows, H, D});
  b.weights = Tensor(DType::f32, {rows, H});
  std::vector<float> qs(static_cast<std::size_t>(rows * H));
  for_rows(root, kQ, rows * H, threads, [&](std::int64_t rh, Rng& rng) {
    std::vector<std::uint16_t> x(static_cast<std::size_t>(D));
    const std::int64_t row = rh / H, h = rh % H;
    const bool constrained = sign != 0 && !(mixed_every > 0 && row % mixed_row_mod == 1 && h % mixed_every == 0);
    for (auto& v : x) {
      double g = gauss_outlier(rng, 1.0, 0.004);
      if (constrained) g = sign * std::fabs(g);
      v = num::f64_to_bf16(g);
    }
    qs[static_cast<std::size_t>(rh)] = quant_bf16(x.data(), D, b.q_fp8.data<std::uint8_t>() + rh * D);
  });
  for_rows(root, kW, rows, threads, [&](std::int64_t r, Rng& rng) {
    for (std::int64_t h = 0; h < H; ++h) {
      const float w = f32(rng.normal() * 0.125);  // weights_proj(x) * 64^-0.5
      b.weights.data<float>()[r * H + h] = (w * qs[static_cast<std::size_t>(r * H + h)]) * kInvSqrt128;
    }
  });
  return b;
}

// Keys: bf16 gaussian (or |gaussian| when positive) -> act_quant per token (ue8m0): codes [N, D], scales [N].
void make_keys(const Rng& root, std::uint64_t tid, std::int64_t N, std::int64_t D, int threads, bool positive,
               std::uint8_t* codes, float* scales) {
  for_rows(root, tid, N, threads, [&](std::int64_t j, Rng& rng) {
    std::vector<std::uint16_t> x(static_cast<std::size_t>(D));
    const double sigma = pow2(rng.randint(-3, 3));  // per-token magnitude spread -> distinct pow2 scales
    for (auto& v : x) {
      double g = gauss_outlier(rng, sigma, 0.004);
      v = num::f64_to_bf16(positive ? std::fabs(g) : g);
    }
    scales[j] = quant_bf16(x.data(), D, codes + j * D);
  });
}

std::vector<std::int64_t> list_or(const GoldenSpec& s, const std::string& k, std::vector<std::int64_t> def) {
  return s.has_list(k) ? s.list(k) : def;
}

// ---------------------------------------------------------------- indexer.quant
enum class QuantDist { gaussian_outliers, saturation, subnormal };

void gen_quant(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c, QuantDist dist) {
  const Rng root(seed);
  const std::int64_t T = s.dim("T", 64), K = s.dim("K", 512);
  const std::int64_t bs = c.attr_int("block_size", 128);
  const bool f32_in = s.param("f32_input", 0) != 0;
  Tensor x(f32_in ? DType::f32 : DType::bf16, {T, K});
  const double sigma = s.param("sigma", 1.0), p_out = s.param("outlier_p", 0.01);
  for_rows(root, kX, T, threads, [&](std::int64_t t, Rng& rng) {
    std::vector<double> v(static_cast<std::size_t>(K));
    for (std::int64_t b0 = 0; b0 < K; b0 += bs) {
      const std::int64_t n = std::min(bs, K - b0);
      double* blk = v.data() + b0;
      switch (dist) {
        case QuantDist::gaussian_outliers: {
          const bool zero_block = s.param("zero_block_every", 0) > 0 &&
                                  t % static_cast<std::int64_t>(s.param("zero_block_every", 0)) == 0 && b0 == 0;
          for (std::int64_t i = 0; i < n; ++i) blk[i] = zero_block ? 0.0 : gauss_outlier(rng, sigma, p_out);
          break;
        }
        case QuantDist::saturation: {
          // amax A anywhere in 2^[-10, 10]; many elements at +-A or within 3% of it, so x/s lands at or just
          // below 448 (and above it with fp32 scales before the clamp).
          const double A = num::bf16_to_f32(num::f64_to_bf16(pow2(rng.randint(-10, 10)) * rng.uniform(1.0, 2.0)));
          for (std::int64_t i = 0; i < n; ++i) {
            const double u = rng.uniform();
            const double sg = rng.uniform() < 0.5 ? -1.0 : 1.0;
            blk[i] = u < 0.1 ? sg * A : u < 0.3 ? sg * A * rng.uniform(0.97, 1.0) : rng.uniform(-1.0, 1.0) * A;
          }
          break;
        }
        case QuantDist::subnormal: {
          // One element at +-A, the rest 2^-6..2^-14 below it: their codes are e4m3 subnormals or round to 0.
          // Every 8th block lies entirely below the amax clamp (1e-4): the eps path.
          const bool tiny = rng.uniform() < 0.125;
          const double A = tiny ? pow2(rng.randint(-30, -15)) : pow2(rng.randint(-4, 4)) * rng.uniform(1.0, 2.0);
          const std::int64_t at = rng.randint(0, n - 1);
          for (std::int64_t i = 0; i < n; ++i)
            blk[i] = i == at ? (rng.uniform() < 0.5 ? -A : A) : A * pow2(-rng.randint(6, 14)) * rng.normal();
          break;
        }
      }
    }
    for (std::int64_t i = 0; i < K; ++i) {
      if (f32_in) x.data<float>()[t * K + i] = f32(v[static_cast<std::size_t>(i)]);
      else x.data<std::uint16_t>()[t * K + i] = num::f64_to_bf16(v[static_cast<std::size_t>(i)]);
    }
  });
  c.inputs["x"] = x;
}

// ---------------------------------------------------------------- indexer.prolog
// RoPE tables of the demo (spec v32 §2.2): f_i = 10000^(-2i/64), YaRN (factor 40, low 10, high 23),
// theta = fl32(pos * f_i'), cos/sin in double (deterministic series) rounded to fp32.
void rope_tables(const std::vector<std::int64_t>& pos, std::int64_t R2, Tensor& cs, Tensor& sn) {
  const std::int64_t T = static_cast<std::int64_t>(pos.size());
  cs = Tensor(DType::f32, {T, R2});
  sn = Tensor(DType::f32, {T, R2});
  // r = 10000^(-1/32) (double, from Python); f_i = r^(i * 32 / R2) for R2 = 32.
  const double r = 0x1.7ff2224115d9ap-1;
  std::vector<float> f(static_cast<std::size_t>(R2));
  double fi = 1.0;
  for (std::int64_t i = 0; i < R2; ++i) {
    const float base = f32(fi);
    const double ramp = std::clamp((static_cast<double>(i) - 10.0) / 13.0, 0.0, 1.0);
    const float smooth = f32(1.0 - ramp);
    f[static_cast<std::size_t>(i)] = base / 40.0f * (1.0f - smooth) + base * smooth;
    for (std::int64_t k = 0; k < 32 / R2; ++k) fi *= r;
  }
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < R2; ++i) {
      const float th = static_cast<float>(pos[static_cast<std::size_t>(t)]) * f[static_cast<std::size_t>(i)];
      cs.data<float>()[t * R2 + i] = f32(det_cos(th));
      sn.data<float>()[t * R2 + i] = f32(det_sin(th));
    }
}

void gen_prolog(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  const Rng root(seed);
  const std::int64_t T = s.dim("T", 16), H = s.dim("H", s.model.n_heads), D = s.dim("D", s.model.head_dim);
  const std::int64_t rope_dim = c.attr_int("rope_dim", s.model.rope_dim);
  Tensor q(DType::bf16, {T, H, D}), k(DType::bf16, {T, D}), w(DType::f32, {T, H});
  for_rows(root, kQ, T * H, threads, [&](std::int64_t r, Rng& rng) {
    for (std::int64_t d = 0; d < D; ++d) q.data<std::uint16_t>()[r * D + d] = num::f64_to_bf16(gauss_outlier(rng, 1.0, 0.004));
  });
  // k before LayerNorm: per-token mean and spread, so the normalization matters.
  for_rows(root, kK, T, threads, [&](std::int64_t t, Rng& rng) {
    const double mu = rng.uniform(-2.0, 2.0), sd = rng.uniform(0.25, 4.0);
    for (std::int64_t d = 0; d < D; ++d) k.data<std::uint16_t>()[t * D + d] = num::f64_to_bf16(mu + gauss_outlier(rng, sd, 0.004));
  });
  for_rows(root, kW, T, threads, [&](std::int64_t t, Rng& rng) {
    for (std::int64_t h = 0; h < H; ++h) w.data<float>()[t * H + h] = f32(rng.normal() * 0.125);
  });
  Tensor lw(DType::f32, {D}), lb(DType::f32, {D});  // checkpoint stores bf16: bf16-representable fp32
  {
    Rng a = root.fork(kLnW), b = root.fork(kLnB);
    for (std::int64_t d = 0; d < D; ++d) {
      lw.data<float>()[d] = num::bf16_to_f32(num::f64_to_bf16(1.0 + 0.2 * a.normal()));
      lb.data<float>()[d] = num::bf16_to_f32(num::f64_to_bf16(0.1 * b.normal()));
    }
  }
  // Positions: chunked prefill from start_pos (list "positions" overrides).
  std::vector<std::int64_t> pos = list_or(s, "positions", {});
  if (pos.empty())
    for (std::int64_t t = 0; t < T; ++t) pos.push_back(s.dim("start_pos", 0) + t);
  if (static_cast<std::int64_t>(pos.size()) != T) throw std::invalid_argument(s.name + ": list positions must have T entries");
  Tensor cs, sn;
  rope_tables(pos, rope_dim / 2, cs, sn);
  Tensor pt(DType::i64, {T});
  for (std::int64_t t = 0; t < T; ++t) pt.data<std::int64_t>()[t] = pos[static_cast<std::size_t>(t)];
  c.inputs = {{"q", q}, {"k", k}, {"w", w}, {"ln_weight", lw}, {"ln_bias", lb}, {"cos", cs}, {"sin", sn}, {"positions", pt}};
}

// ---------------------------------------------------------------- indexer.kcache_store
void gen_kcache(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  const Rng root(seed);
  const std::int64_t T = s.dim("T", 100), P = s.dim("P", 4), D = s.dim("D", s.model.head_dim), ps = s.model.page_size;
  if (T > P * ps) throw std::invalid_argument(s.name + ": T must be <= P * page_size");
  Tensor kf(DType::fp8_e4m3fn, {T, D}), ksc(DType::f32, {T});
  make_keys(root, kK, T, D, threads, false, kf.data<std::uint8_t>(), ksc.data<float>());
  // Shuffled slots: token t -> perm[t] (any page, any offset); a fraction of tokens padded (slot -1).
  const auto perm = permutation(root.fork(kPerm), P * ps);
  Tensor slots(DType::i64, {T});
  const double pad = s.param("pad_frac", 0.1);
  for_rows(root, kPad, T, threads, [&](std::int64_t t, Rng& rng) {
    slots.data<std::int64_t>()[t] = rng.uniform() < pad ? -1 : perm[static_cast<std::size_t>(t)];
  });
  // The cache before the store: poison bytes (random, NaN scales included) that must survive untouched.
  Tensor cache(DType::u8, {P, ps, 1, D + 4});
  for_rows(root, kPoison, P * ps, threads, [&](std::int64_t r, Rng& rng) {
    for (std::int64_t b = 0; b < D + 4; ++b) cache.data<std::uint8_t>()[r * (D + 4) + b] = static_cast<std::uint8_t>(rng.next_u64() >> 56);
  });
  c.inputs = {{"k_fp8", kf}, {"k_scale", ksc}, {"slot_mapping", slots}, {"kv_cache_in", cache}};
}

// ---------------------------------------------------------------- indexer.logits_ragged
struct RaggedRows {
  std::vector<std::int32_t> ks, ke;
  std::int64_t N = 0;
};

void build_ragged(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c, const RaggedRows& rr, bool all_negative) {
  const Rng root(seed);
  const std::int64_t S = static_cast<std::int64_t>(rr.ks.size()), H = s.dim("H", s.model.n_heads), D = s.dim("D", s.model.head_dim);
  QBuild qb = make_q(root, S, H, D, threads, all_negative ? -1 : 0, all_negative ? 8 : 0);
  Tensor kv(DType::fp8_e4m3fn, {rr.N, D}), kvs(DType::f32, {rr.N});
  make_keys(root, kKv, rr.N, D, threads, all_negative, kv.data<std::uint8_t>(), kvs.data<float>());
  c.inputs = {{"q", qb.q_fp8},
              {"kv", kv},
              {"kv_scale", kvs},
              {"weights", qb.weights},
              {"ks", Tensor::from_vector(DType::i32, {S}, rr.ks)},
              {"ke", Tensor::from_vector(DType::i32, {S}, rr.ke)}};
}

// Packed prefill batch: sequence i has prefix[i] cached keys (chunked prefill: ks > 0 for i > 0, rows start
// after the prefix) and rows[i] new query tokens; row t of sequence i sees keys [base_i, base_i + prefix_i + t].
RaggedRows prefill_rows(const GoldenSpec& s) {
  const auto prefix = list_or(s, "prefix", {0});
  const auto rows = list_or(s, "rows", {16});
  if (prefix.size() != rows.size()) throw std::invalid_argument(s.name + ": lists prefix and rows differ in length");
  RaggedRows rr;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto base = static_cast<std::int32_t>(rr.N);
    for (std::int64_t t = 0; t < rows[i]; ++t) {
      rr.ks.push_back(base);
      rr.ke.push_back(static_cast<std::int32_t>(base + prefix[i] + t + 1));
    }
    rr.N += prefix[i] + rows[i];
  }
  rr.N += s.dim("tail_keys", 0);  // keys no row may see
  return rr;
}

// Context parallelism (prev/next split): the sequence of 2*cp*chunk tokens is cut into 2*cp chunks; rank r
// holds chunk r ("prev") and chunk 2cp-1-r ("next"); its rows see keys [0, pos+1) of the gathered sequence.
RaggedRows cp_rows(const GoldenSpec& s) {
  const std::int64_t cp = s.dim("cp", 2), ch = s.dim("chunk", 8), rank = s.dim("rank", 0);
  RaggedRows rr;
  rr.N = 2 * cp * ch;
  for (std::int64_t part : {rank, 2 * cp - 1 - rank})
    for (std::int64_t t = 0; t < ch; ++t) {
      rr.ks.push_back(0);
      rr.ke.push_back(static_cast<std::int32_t>(part * ch + t + 1));
    }
  return rr;
}

// ---------------------------------------------------------------- indexer.logits_paged
void gen_paged(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  const Rng root(seed);
  const std::int64_t next_n = s.dim("next_n", 1), H = s.dim("H", s.model.n_heads), D = s.dim("D", s.model.head_dim);
  const std::int64_t ps = s.model.page_size;
  const auto L = s.list("context_lens");  // per request: every cached token incl. the next_n new ones
  const std::int64_t B = static_cast<std::int64_t>(L.size());
  const bool two_d = s.param("context_lens_2d", 0) != 0;
  std::int64_t max_blocks = 0, used = 0, maxL = 0;
  for (auto l : L) {
    max_blocks = std::max(max_blocks, (l + ps - 1) / ps);
    used += (l + ps - 1) / ps;
    maxL = std::max(maxL, l);
  }
  max_blocks += s.dim("spare_blocks", 1);               // block_table wider than needed: unused entries -1
  const std::int64_t P = used + s.dim("extra_pages", 2);  // pages nobody owns (poison)
  // Shuffled, sparse block table: request b's pages are a random subset of the pool, in random order.
  const auto perm = permutation(root.fork(kPerm), P);
  Tensor bt(DType::i32, {B, max_blocks});
  std::fill_n(bt.data<std::int32_t>(), B * max_blocks, -1);
  std::size_t next = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < (L[static_cast<std::size_t>(b)] + ps - 1) / ps; ++j)
      bt.data<std::int32_t>()[b * max_blocks + j] = static_cast<std::int32_t>(perm[next++]);
  // Cache: poison everywhere, then the planar pages of every request's tokens.
  Tensor cache(DType::u8, {P, ps, 1, D + 4});
  std::uint8_t* cb = cache.data<std::uint8_t>();
  for_rows(root, kPoison, P * ps, threads, [&](std::int64_t r, Rng& rng) {
    for (std::int64_t b = 0; b < D + 4; ++b) cb[r * (D + 4) + b] = static_cast<std::uint8_t>(rng.next_u64() >> 56);
  });
  ref::KCacheLayout lay{ps, D};
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t Lb = L[static_cast<std::size_t>(b)];
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(Lb * D));
    std::vector<float> sc(static_cast<std::size_t>(Lb));
    make_keys(root.fork(kKv), static_cast<std::uint64_t>(b), Lb, D, threads, false, codes.data(), sc.data());
    for (std::int64_t j = 0; j < Lb; ++j) {
      const std::int64_t pg = bt.data<std::int32_t>()[b * max_blocks + j / ps];
      std::memcpy(cb + lay.value_offset(pg, j % ps), codes.data() + j * D, static_cast<std::size_t>(D));
      std::memcpy(cb + lay.scale_offset(pg, j % ps), &sc[static_cast<std::size_t>(j)], 4);
    }
  }
  QBuild qb = make_q(root, B * next_n, H, D, threads);
  Tensor cl = two_d ? Tensor(DType::i32, {B, next_n}) : Tensor(DType::i32, {B});
  for (std::int64_t b = 0; b < B; ++b) {
    const auto Lb = static_cast<std::int32_t>(L[static_cast<std::size_t>(b)]);
    if (!two_d) cl.data<std::int32_t>()[b] = Lb;
    else  // vLLM/sglang expanded per-row lengths: row (b,t) sees j < L - next_n + t + 1
      for (std::int64_t t = 0; t < next_n; ++t)
        cl.data<std::int32_t>()[b * next_n + t] = Lb == 0 ? 0 : static_cast<std::int32_t>(Lb - next_n + t + 1);
  }
  c.inputs = {{"q", qb.q_fp8.reshape({B, next_n, H, D})}, {"kv_cache", cache}, {"weights", qb.weights},
              {"context_lens", cl}, {"block_table", bt}};
  if (!c.has_attr("max_context_len")) c.attrs["max_context_len"] = AttrValue{std::max<std::int64_t>(1, (maxL + ps - 1) / ps * ps)};
}

// ---------------------------------------------------------------- indexer.topk
enum class TopkDist { gaussian, ties_at_kth, near_ties, constant };

float topk_value(TopkDist d, Rng& rng, std::int64_t row, std::int64_t p, float base) {
  switch (d) {
    case TopkDist::gaussian: return f32(base + 2.0 * rng.normal());
    case TopkDist::near_ties: {  // within one ulp of the row's base value
      const std::uint32_t b = num::f32_bits(base);
      return num::f32_from_bits(static_cast<std::uint32_t>(static_cast<std::int64_t>(b) + rng.randint(-1, 1)));
    }
    case TopkDist::constant: {
      static const float kConst[] = {0.0f, -3.5f, 1.0f, 0.0f, 1e-30f, -2.0f};
      const float v = kConst[row % 6];
      return (row % 6 == 3 && (p % 3 == 1)) ? -0.0f : v;  // row 3: +0 / -0 mixed (equal values, different bits)
    }
    case TopkDist::ties_at_kth: break;  // built by gen_topk (needs the row's permutation)
  }
  return base;
}

void gen_topk(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c, TopkDist dist) {
  const Rng root(seed);
  const std::int64_t k = c.attr_int("k", s.model.topk);
  const auto lens = s.list("lengths");
  const std::int64_t R = static_cast<std::int64_t>(lens.size());
  const auto starts = list_or(s, "row_starts", std::vector<std::int64_t>(static_cast<std::size_t>(R), 0));
  if (static_cast<std::int64_t>(starts.size()) != R) throw std::invalid_argument(s.name + ": lists lengths and row_starts differ in length");
  std::int64_t C = s.dim("C", 1);
  for (std::int64_t r = 0; r < R; ++r) C = std::max(C, starts[static_cast<std::size_t>(r)] + lens[static_cast<std::size_t>(r)]);
  // Columns outside a row's range hold +1e20 garbage (vLLM's padding trick; uncleaned DeepGEMM logits) or -inf.
  const float outside = s.param("outside_garbage", 1) != 0 ? 1e20f : -std::numeric_limits<float>::infinity();
  Tensor lg(DType::f32, {R, C});
  const std::int64_t ties = s.dim("ties", 1024);
  for_rows(root, kLogits, R, threads, [&](std::int64_t r, Rng& rng) {
    float* row = lg.data<float>() + r * C;
    std::fill_n(row, C, outside);
    const std::int64_t L = lens[static_cast<std::size_t>(r)], s0 = starts[static_cast<std::size_t>(r)];
    const float base = f32(rng.uniform(-4.0, 4.0));
    if (dist == TopkDist::ties_at_kth) {
      const std::int64_t above = std::max<std::int64_t>(0, std::min(L, k - ties / 2));
      const std::int64_t tie_n = std::min(L - above, ties);
      const auto perm = permutation(rng.fork(1), L);
      Rng vr = rng.fork(2);
      for (std::int64_t i = 0; i < L; ++i) {
        const float v = i < above ? f32(2.0 + vr.uniform()) : i < above + tie_n ? 1.0f : f32(vr.uniform(-5.0, 0.875));
        row[s0 + perm[static_cast<std::size_t>(i)]] = v;
      }
      return;
    }
    for (std::int64_t p = 0; p < L; ++p) row[s0 + p] = topk_value(dist, rng, r, p, base);
  });
  c.inputs["logits"] = lg;
  std::vector<std::int32_t> l32, s32;
  for (std::int64_t r = 0; r < R; ++r) {
    l32.push_back(static_cast<std::int32_t>(lens[static_cast<std::size_t>(r)]));
    s32.push_back(static_cast<std::int32_t>(starts[static_cast<std::size_t>(r)]));
  }
  c.inputs["lengths"] = Tensor::from_vector(DType::i32, {R}, l32);
  if (s.has_list("row_starts")) c.inputs["row_starts"] = Tensor::from_vector(DType::i32, {R}, s32);
  const std::string base = c.attr_str("index_base", "relative");
  if (base == "ragged_offset") {  // rows of a packed ragged batch: offset = where the row's keys start
    std::vector<std::int32_t> off;
    std::int64_t acc = 0;
    for (std::int64_t r = 0; r < R; ++r) {
      off.push_back(static_cast<std::int32_t>(acc));
      acc += lens[static_cast<std::size_t>(r)];
    }
    c.inputs["offsets"] = Tensor::from_vector(DType::i32, {R}, off);
  }
  if (base == "page_slot") {  // shuffled pages per request (rows_per_request rows share a page_table row)
    const std::int64_t rpr = c.attr_int("rows_per_request", 1);
    const std::int64_t ps = c.attr_int("page_size", s.model.page_size);
    if (R % rpr != 0) throw std::invalid_argument(s.name + ": rows must be a multiple of rows_per_request");
    const std::int64_t Q = R / rpr;
    std::int64_t nb = 1;
    for (std::int64_t r = 0; r < R; ++r) nb = std::max(nb, (starts[static_cast<std::size_t>(r)] + lens[static_cast<std::size_t>(r)] + ps - 1) / ps);
    const auto perm = permutation(root.fork(kPerm), Q * nb + 3);
    std::vector<std::int32_t> pt(static_cast<std::size_t>(Q * nb));
    for (std::size_t i = 0; i < pt.size(); ++i) pt[i] = static_cast<std::int32_t>(perm[i]);
    c.inputs["page_table"] = Tensor::from_vector(DType::i32, {Q, nb}, pt);
  }
}

GenerateFn topk_gen(TopkDist d) {
  return [d](const GoldenSpec& s, std::uint64_t seed, int th, Case& c) { gen_topk(s, seed, th, c, d); };
}
GenerateFn quant_gen(QuantDist d) {
  return [d](const GoldenSpec& s, std::uint64_t seed, int th, Case& c) { gen_quant(s, seed, th, c, d); };
}

}  // namespace

// ---- deterministic sin/cos: x = n*(pi/2) + r (Cody-Waite, 3-part pi/2), Taylor on |r| <= pi/4 ----
namespace {
double sin_poly(double r) {
  const double r2 = r * r;
  double t = r, s = r;
  for (int i = 1; i <= 11; ++i) {
    t = -t * r2 / static_cast<double>((2 * i) * (2 * i + 1));
    s = s + t;
  }
  return s;
}
double cos_poly(double r) {
  const double r2 = r * r;
  double t = 1.0, s = 1.0;
  for (int i = 1; i <= 11; ++i) {
    t = -t * r2 / static_cast<double>((2 * i - 1) * (2 * i));
    s = s + t;
  }
  return s;
}
void reduce(double x, double& r, std::int64_t& q) {
  const double inv_pio2 = 0x1.45f306dc9c883p-1;
  const double p1 = 0x1.921fb54400000p+0, p2 = 0x1.0b4611a600000p-34, p3 = 0x1.3198a2e037073p-69;
  const double n = std::nearbyint(x * inv_pio2);  // exact integer (round to nearest even; IEEE, not libm math)
  r = ((x - n * p1) - n * p2) - n * p3;
  q = static_cast<std::int64_t>(n);
}
}  // namespace

double det_sin(double x) {
  double r;
  std::int64_t q;
  reduce(x, r, q);
  switch (((q % 4) + 4) % 4) {
    case 0: return sin_poly(r);
    case 1: return cos_poly(r);
    case 2: return -sin_poly(r);
    default: return -cos_poly(r);
  }
}
double det_cos(double x) {
  double r;
  std::int64_t q;
  reduce(x, r, q);
  switch (((q % 4) + 4) % 4) {
    case 0: return cos_poly(r);
    case 1: return -sin_poly(r);
    case 2: return -cos_poly(r);
    default: return sin_poly(r);
  }
}

const std::vector<Generator>& generators() {
  static const std::vector<Generator> all{
      {"quant.gaussian_outliers", "indexer.quant",
       "bf16 N(0, sigma) activations, outliers x2^U{3..10} with prob outlier_p; every zero_block_every-th row has an "
       "all-zero first block (amax clamp). dims T, K; params sigma, outlier_p, zero_block_every, f32_input",
       quant_gen(QuantDist::gaussian_outliers)},
      {"quant.fp8_saturation", "indexer.quant",
       "per block amax A in 2^[-10,10]; 10% of elements +-A, 20% within 3% of A: x/s at or just below 448 (above it "
       "before the clamp with fp32 scales). dims T, K",
       quant_gen(QuantDist::saturation)},
      {"quant.subnormal", "indexer.quant",
       "one element +-A per block, the rest 2^-6..2^-14 below it (e4m3 subnormal codes, rounding to 0); 1/8 of the "
       "blocks entirely below the 1e-4 amax clamp. dims T, K",
       quant_gen(QuantDist::subnormal)},
      {"prolog.gaussian", "indexer.prolog",
       "q bf16 N(0,1)+outliers [T,H,D]; k bf16 with per-token mean/spread (LayerNorm matters); w = N(0,1)/8 fp32; "
       "LayerNorm weight/bias bf16-valued fp32; YaRN RoPE cos/sin tables for positions start_pos.. (or list positions). "
       "dims T, H, D, start_pos",
       gen_prolog},
      {"kcache.shuffled_slots", "indexer.kcache_store",
       "k = act_quant(bf16 keys) per token; slot_mapping a random permutation of the P*64 slots with pad_frac of the "
       "tokens padded (-1); kv_cache_in full of random poison bytes. dims T, P, D; params pad_frac",
       gen_kcache},
      {"logits.ragged_prefill", "indexer.logits_ragged",
       "packed prefill batch: sequence i has prefix[i] cached keys (chunked prefill, ks > 0) and rows[i] query rows, "
       "row t sees [base, base+prefix+t]; q/kv = act_quant(bf16 N(0,1)+outliers), W = fl32(fl32(w*q_scale)*128^-0.5). "
       "lists prefix, rows; dims H, D, tail_keys",
       [](const GoldenSpec& s, std::uint64_t seed, int th, Case& c) { build_ragged(s, seed, th, c, prefill_rows(s), false); }},
      {"logits.ragged_cp_split", "indexer.logits_ragged",
       "context-parallel prev/next split: rank holds chunk rank and chunk 2cp-1-rank of a 2*cp*chunk sequence; rows "
       "see [0, pos]. dims cp, chunk, rank, H, D",
       [](const GoldenSpec& s, std::uint64_t seed, int th, Case& c) { build_ragged(s, seed, th, c, cp_rows(s), false); }},
      {"logits.ragged_all_negative", "indexer.logits_ragged",
       "all pre-ReLU scores <= 0 (keys >= 0, q <= 0) on even rows: logits exactly 0 (+-0); odd rows keep every 8th "
       "head unconstrained. Same row layout as ragged_prefill",
       [](const GoldenSpec& s, std::uint64_t seed, int th, Case& c) { build_ragged(s, seed, th, c, prefill_rows(s), true); }},
      {"logits.paged_mtp", "indexer.logits_paged",
       "decode/MTP over the paged cache: context_lens per request (incl. the next_n new tokens; 0 allowed), pages "
       "shuffled from a pool with extra_pages unowned poison pages, block_table spare_blocks wider (-1), tails of "
       "last pages poisoned. list context_lens; dims next_n, H, D, spare_blocks, extra_pages; params context_lens_2d",
       gen_paged},
      {"topk.gaussian", "indexer.topk",
       "rows N(base, 2) over [row_start, row_start+len), +1e20 garbage (or -inf) outside. list lengths, row_starts; "
       "params outside_garbage",
       topk_gen(TopkDist::gaussian)},
      {"topk.ties_at_kth", "indexer.topk",
       "k - ties/2 values in [2,3), `ties` exact copies of 1.0, the rest below: the k-th value is tied ~ties times. "
       "list lengths; dims ties",
       topk_gen(TopkDist::ties_at_kth)},
      {"topk.near_ties", "indexer.topk", "every value within one fp32 ulp of the row's base value. list lengths",
       topk_gen(TopkDist::near_ties)},
      {"topk.constant_rows", "indexer.topk",
       "per-row constant logits (0, -3.5, 1, +0/-0 mixed, 1e-30, -2): the whole row is one tie. list lengths",
       topk_gen(TopkDist::constant)},
  };
  return all;
}

const Generator* find_generator(const std::string& name) {
  for (const auto& g : generators())
    if (g.name == name) return &g;
  return nullptr;
}

}  // namespace dsa::golden
