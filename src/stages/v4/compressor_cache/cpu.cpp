// v4.compressor_cache reference: the state rows (exact), then one compressed entry per emitting token in parallel
// (distinct KV slots, checked by parse), each value in fp64 with its bound (engines/v4_compress: pool, norm_rope), stored
// as the bytes of the exact value plus the candidate bytes of the roundings the bound reaches.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engines/quant/byte_cands.hpp"
#include "engines/quant/quant_core.hpp"
#include "layouts/indexer_kcache.hpp"
#include "layouts/mla_kcache.hpp"
#include "numerics/formats.hpp"
#include "numerics/fp8_core.hpp"
#include "engines/v4_compress/pool.hpp"
#include "stages/v4/compressor_cache/stage.hpp"

namespace dsa::v4::compressor_cache {
namespace {

using Cands = quant::ByteCandMap;
using quant::bf16_cands;
using quant::ByteOut;

// One ue8m0 / fp8 block of n values (engines/quant/byte_cands): codes at code_off(i), the scale through
// put_scale(reference scale, every candidate scale).
template <class CodeOff, class PutScale>
void quant_block(const double* y, const double* ey, std::int64_t n, const quant::ScaleRule& rule, ByteOut& o, CodeOff code_off, PutScale put_scale) {
  const quant::Fp8Cands q = quant::fp8_block_cands(y, ey, n, rule);
  for (std::int64_t i = 0; i < n; ++i) o.put(code_off(i), q.codes[static_cast<std::size_t>(i)][0], q.codes[static_cast<std::size_t>(i)]);
  put_scale(q.scale, q.scales);
}

}  // namespace

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  const Tensor& ks = c.input("kv_score");
  const Tensor& ape = c.input("ape");
  const Tensor& cs = c.input("cos_sin_cache");
  const Tensor& pos = c.input("positions");
  const Tensor& req = c.input("token_to_req_indices");
  const Tensor& sm = c.input("slot_mapping");
  const Tensor& km = c.input("kv_slot_mapping");
  const Tensor& bt = c.input("block_table");
  const std::int64_t T = p.T, C2 = p.C2, W = 2 * C2, D = p.D;
  // Which token writes which state slot / KV slot (describe).
  auto swriter = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(p.nblk * p.sbs), -1);
  auto kwriter = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(p.kblk * p.kbs), -1);
  // 1. save_partial_states (in token order; slots distinct).
  Tensor st = c.input("state_cache_in").clone();
  std::vector<std::int64_t> last_of_req(static_cast<std::size_t>(p.B), -1);
  for (std::int64_t t = 0; t < T; ++t)
    if (sm.int_at(t) >= 0) last_of_req[static_cast<std::size_t>(req.int_at(t))] = t;
  for (std::int64_t t = 0; t < T; ++t) {
    std::int64_t s = sm.int_at(t);
    if (s < 0) {
      if (bug != Bug::pad_written) continue;
      s = 0;  // the pad's row lands in the null block's first row
    } else if (bug == Bug::state_not_saved && last_of_req[static_cast<std::size_t>(req.int_at(t))] == t) {
      continue;
    }
    const std::int64_t ar = pos.int_at(t) % p.r;
    float* row = st.data<float>() + s * W;
    const float* src = ks.data<float>() + t * W;
    for (std::int64_t o = 0; o < C2; ++o) {
      row[o] = src[o];
      row[C2 + o] = bug == Bug::ape_not_added ? src[C2 + o] : src[C2 + o] + ape.data<float>()[ar * C2 + o];
    }
    if (sm.int_at(t) >= 0) (*swriter)[static_cast<std::size_t>(s)] = t;
  }
  // 2. the emitting tokens.
  std::vector<std::int64_t> emit;
  for (std::int64_t t = 0; t < T; ++t)
    if (sm.int_at(t) >= 0 && (pos.int_at(t) + 1) % p.r == 0 && km.int_at(t) >= 0) emit.push_back(t);
  Tensor kc = c.input("kv_cache_in").clone();
  using M = layouts::Model1KCache;
  M m1;
  m1.page_size = p.kbs;
  layouts::IndexerKCache ik;
  ik.page_size = p.kbs, ik.head_dim = D;
  namespace vc = engines::v4_compress;
  const std::uint16_t* gamma = c.input("norm_weight").data<std::uint16_t>();
  const quant::ScaleRule rule = bug == Bug::scale_fp32 ? quant::fp32_mul_rule() : quant::ue8m0_rule();
  std::vector<ByteOut> outs(emit.size());
  const std::vector<double> zeros(static_cast<std::size_t>(C2), 0.0);
#pragma omp parallel num_threads(threads)
  {
    std::vector<double> esb(static_cast<std::size_t>(p.coff * p.r * C2), 0.0);
    std::vector<double> rows(static_cast<std::size_t>(p.coff * p.r * W)), C(static_cast<std::size_t>(D)), eC(C.size()), y(C.size()), ey(C.size());
    std::vector<float> cosr(static_cast<std::size_t>(p.rope)), sinr(cosr.size()), one(cosr.size(), 1.0f), zero(cosr.size(), 0.0f);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(emit.size()); ++k) {
      const std::int64_t t = emit[static_cast<std::size_t>(k)], ps = pos.int_at(t), b = req.int_at(t);
      std::vector<vc::RowRef> rr;
      for (std::int64_t i = 0; i < p.coff * p.r; ++i) {
        vc::RowRef r;
        r.current = p.coff == 1 || i >= p.r;
        const std::int64_t q = ps - p.coff * p.r + 1 + i;
        if (q < 0) {
          r.missing = true;
        } else {
          const std::int64_t blk = bt.int_at(b * p.maxblk + q / p.sbs);
          const float* src = st.data<float>() + (blk * p.sbs + q % p.sbs) * W;
          double* d = rows.data() + i * W;
          for (std::int64_t o = 0; o < W; ++o) d[o] = src[o];
          r.kv = d, r.s = d + C2, r.ekv = zeros.data(), r.es = esb.data() + i * C2;
        }
        rr.push_back(r);
      }
      // Triton's exp is ex2.approx(fl32(z * log2 e)) of z = fl32(s - max): the two roundings of the argument act as a
      // perturbation of each score by up to 2^-22 |s - max| (the values themselves are exact inputs); pool() bounds
      // the weights under that perturbation.
      for (std::int64_t ch = 0; ch < D; ++ch) {
        double mx = -std::numeric_limits<double>::infinity();
        for (std::int64_t i = 0; i < p.coff * p.r; ++i)
          if (!rr[static_cast<std::size_t>(i)].missing) mx = std::max(mx, rr[static_cast<std::size_t>(i)].s[(rr[static_cast<std::size_t>(i)].current && p.coff == 2 ? D : 0) + ch]);
        for (std::int64_t i = 0; i < p.coff * p.r; ++i) {
          const auto& r = rr[static_cast<std::size_t>(i)];
          if (r.missing) continue;
          const std::int64_t o = (r.current && p.coff == 2 ? D : 0) + ch;
          esb[static_cast<std::size_t>(i * C2 + o)] = std::isfinite(mx) ? 0x1p-22 * std::fabs(r.s[o] - mx) : 0.0;
        }
      }
      vc::pool(D, p.coff, rr, vc::PoolBug::none, C.data(), eC.data());
      const std::int64_t cpos = ps / p.r * p.r, half = p.rope / 2;
      for (std::int64_t i = 0; i < half; ++i) {
        cosr[2 * i] = cosr[2 * i + 1] = cs.data<float>()[cpos * p.rope + i];
        sinr[2 * i] = sinr[2 * i + 1] = cs.data<float>()[cpos * p.rope + half + i];
      }
      if (bug == Bug::rope_unnormed) {  // RoPE on the pooled c, then the norm with identity rows
        for (std::int64_t i = 0; i < half; ++i) {
          const std::int64_t a = D - p.rope + 2 * i;
          const double ca = C[a], cb = C[a + 1];
          C[a] = ca * cosr[2 * i] - cb * sinr[2 * i], C[a + 1] = cb * cosr[2 * i] + ca * sinr[2 * i];
          eC[a] = eC[a + 1] = eC[a] + eC[a + 1];
        }
        vc::norm_rope(D, p.rope, p.eps, false, false, C.data(), eC.data(), gamma, one.data(), zero.data(), y.data(), ey.data());
      } else {
        vc::norm_rope(D, p.rope, p.eps, false, false, C.data(), eC.data(), gamma, cosr.data(), sinr.data(), y.data(), ey.data());
      }
      if (bug == Bug::hadamard) {  // fp32 H128 * 128^-0.5 of the RoPE'd values before the bf16 cast
        std::vector<double> h(static_cast<std::size_t>(D));
        double es = 0;
        for (std::int64_t i = 0; i < D; ++i) es += ey[i];
        for (std::int64_t i = 0; i < D; ++i) {
          double a = 0;
          for (std::int64_t j = 0; j < D; ++j) a += (__builtin_popcountll(static_cast<unsigned long long>(i & j)) & 1) ? -y[j] : y[j];
          h[i] = a / std::sqrt(static_cast<double>(D));
        }
        for (std::int64_t i = 0; i < D; ++i) y[i] = h[i], ey[i] = es / std::sqrt(static_cast<double>(D));
      }
      std::int64_t slot = km.int_at(t);
      if (bug == Bug::kv_slot_next) slot = (slot + 1) % (p.kblk * p.kbs);
      if (bug == Bug::null_block_written) slot = slot % p.kbs;
      ByteOut& o = outs[static_cast<std::size_t>(k)];
      if (D == 512) {
        const std::int64_t tok = m1.token_offset(slot), sc = m1.scale_offset(slot), nope = M::kNope;
        for (std::int64_t j = 0; j < M::kTiles; ++j)
          quant_block(y.data() + j * M::kTile, ey.data() + j * M::kTile, M::kTile, rule, o, [&](std::int64_t i) { return tok + j * M::kTile + i; },
                      [&](float s, const std::vector<float>& all) {
                        std::vector<std::uint8_t> bs;
                        for (float x : all) bs.push_back(fp8core::e8m0_of(x));
                        o.put(sc + j, fp8core::e8m0_of(s), bs);
                      });
        o.put(sc + M::kTiles, 0, {0});
        for (std::int64_t i = 0; i < p.rope; ++i) {
          const auto cb = bf16_cands(y[nope + i], ey[nope + i]);
          for (int byte = 0; byte < 2; ++byte) {
            std::vector<std::uint8_t> all;
            for (auto v : cb) all.push_back(static_cast<std::uint8_t>(v >> (8 * byte)));
            o.put(tok + nope + 2 * i + byte, static_cast<std::uint8_t>(cb[0] >> (8 * byte)), all);
          }
        }
      } else {
        const std::int64_t page = slot / p.kbs, off = slot % p.kbs, sc = ik.scale_offset(page, off);
        quant_block(y.data(), ey.data(), D, rule, o, [&](std::int64_t i) { return ik.value_offset(page, off, i); },
                    [&](float s, const std::vector<float>& all) { o.put_f32(sc, s, all); });
      }
    }
  }
  auto cands = std::make_shared<Cands>();
  std::uint8_t* kb = kc.data<std::uint8_t>();
  for (std::size_t k = 0; k < emit.size(); ++k) {
    outs[k].apply(kb, *cands);
    (*kwriter)[static_cast<std::size_t>(km.int_at(emit[k]))] = emit[k];
  }
  Expected e;
  RefTensor rs;
  rs.name = "state_cache";
  rs.kind = CompareKind::bytes;
  rs.value = st;
  const std::int64_t sbs = p.sbs;
  rs.describe = [sbs, C2, W, swriter](std::int64_t f) {
    const std::int64_t row = f / W, col = f % W;
    const std::int64_t w = (*swriter)[static_cast<std::size_t>(row)];
    return "block " + std::to_string(row / sbs) + " row " + std::to_string(row % sbs) + " (slot " + std::to_string(row) + ")" +
           (col < C2 ? " kv " : " score ") + std::to_string(col % C2) +
           (w >= 0 ? " (saved from token " + std::to_string(w) + ")" : " (not written by this step: must equal state_cache_in)");
  };
  RefTensor rk;
  rk.name = "kv_cache";
  rk.kind = CompareKind::bytes;
  rk.value = kc;
  if (!cands->empty()) rk.candidates = cands;
  const std::int64_t kbs = p.kbs, rec = p.rec, tokb = D == 512 ? M::kToken : D, scb = D == 512 ? M::kScaleRec : 4;
  const bool main = D == 512;
  rk.describe = [kbs, rec, tokb, scb, main, m1, ik, kwriter](std::int64_t f) {
    const std::int64_t blk = f / (kbs * rec), in = f % (kbs * rec);
    const std::int64_t off = in < kbs * tokb ? in / tokb : (in - kbs * tokb) / scb, slot = blk * kbs + off;
    const std::int64_t w = (*kwriter)[static_cast<std::size_t>(slot)];
    return (main ? m1.describe(f) : ik.describe(f)) + " (slot " + std::to_string(slot) +
           (w >= 0 ? ", written by token " + std::to_string(w) + ")" : blk == 0 ? ", null block 0: must equal kv_cache_in)" : ", not written by this step: must equal kv_cache_in)");
  };
  e.tensors = {std::move(rs), std::move(rk)};
  return e;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

}  // namespace dsa::v4::compressor_cache
