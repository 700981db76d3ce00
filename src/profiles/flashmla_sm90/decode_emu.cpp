// The flashmla-sm90 sparse decode emulation (decode_emu.hpp): reference/flashmla_sm90.py's sparse_decode in C++. The
// scheduler splits each request's 64-key blocks over num_sm_parts CTAs; a CTA covering a whole request writes out /
// lse, the others write fp32 partials that the combine kernel merges. fp32 steps are IEEE single operations with
// the kernel's flush of subnormals; the WGMMA model runs exactly in integers (sm90_ops.hpp).
#include "profiles/flashmla_sm90/decode_emu.hpp"

#include <omp.h>

#include <algorithm>
#include <limits>

#include "profiles/flashmla_sm90/prefill_emu.hpp"
#include "profiles/flashmla_sm90/sm90_ops.hpp"

namespace dsa::profiles::flashmla_emu {

namespace {

using namespace ops;
constexpr float kNeg = -std::numeric_limits<float>::infinity(), kInf = std::numeric_limits<float>::infinity();
constexpr float kLn2 = 0.6931471805599453f, kL2e = 1.4426950408889634f;
constexpr std::int64_t kBlock = 64, kFixed = 5;  // TOPK_BLOCK_SIZE; fixed_overhead_num_blocks

std::int64_t ceil64(std::int64_t x) { return (x + kBlock - 1) / kBlock * kBlock; }
bool model1(const DecodeCall& c) { return c.d_qk == 512; }
std::int64_t num_sm_parts(const DecodeCall& c) {
  return std::max<std::int64_t>(c.num_sms / std::max<std::int64_t>(c.s_q, 1) / std::max<std::int64_t>(c.h_q / 64, 1), 1);
}

// A request's blocks: the main scope's (topk / 64 for V3.2; max(ceil64(topk_length), 64) / 64 for MODEL1), then the
// extra scope's ceil64(extra_topk_length) / 64.
struct Req {
  std::int64_t norig, total, len, xlen;
};
Req req(const DecodeCall& c, std::int64_t b) {
  if (!model1(c)) return {c.topk / kBlock, c.topk / kBlock, c.topk, 0};
  const std::int64_t len = c.length.empty() ? c.topk : c.length[static_cast<std::size_t>(b)];
  const std::int64_t xlen = c.xidx.empty() ? 0 : (c.xlength.empty() ? c.xtopk : c.xlength[static_cast<std::size_t>(b)]);
  const std::int64_t orig = std::max(ceil64(len), kBlock);
  return {orig / kBlock, (orig + ceil64(xlen)) / kBlock, len, xlen};
}

// One CTA's run over blocks [st, en) of request b, query token s, heads h0 .. h0+63: O [64, 512] (fp32 values), the
// row max rM and the row sum L. False: a valid key holds a non-finite value.
bool run_blocks(const DecodeCall& c, std::int64_t b, std::int64_t s, std::int64_t h0, std::int64_t st, std::int64_t en,
                std::vector<double>& O, std::vector<float>& rM, std::vector<float>& L) {
  const std::int64_t D = c.d_qk;
  const Req r = req(c, b);
  const float scale = c.sm_scale * 1.44269504f;  // sm_scale_div_log2 (LOG_2_E = 1.44269504f, host fp32)
  std::vector<Op> qo(static_cast<std::size_t>(64 * D)), Ko(static_cast<std::size_t>(64 * D)), P(64 * 64);
  std::vector<Op> Vt(512 * 64);  // V transposed: [dim][key], the 16 keys of a PV k-step contiguous
  for (std::int64_t i = 0; i < 64 * D; ++i) qo[i] = op(bf16f(c.q[((b * c.s_q + s) * c.h_q + h0) * D + i]));
  std::vector<float> rL(64 * 4, 0.0f), sc(64 * 64), p(64 * 64);
  std::vector<char> ok(64);
  rM.assign(64, -1e30f);
  O.assign(64 * 512, 0.0);
  std::vector<double> k(static_cast<std::size_t>(D));
  for (std::int64_t j = st; j < en; ++j) {
    const bool extra = j >= r.norig;
    const std::int64_t base = extra ? (j - r.norig) * kBlock : j * kBlock;
    const std::int64_t lim = extra ? r.xlen : r.len, width = extra ? c.xtopk : c.topk;
    const std::vector<std::int64_t>& ids = extra ? c.xidx : c.idx;
    for (std::int64_t t = 0; t < 64; ++t) {
      const std::int64_t pos = base + t;
      const std::int64_t id = pos < width ? ids[static_cast<std::size_t>((b * c.s_q + s) * width + pos)] : -1;
      ok[t] = id != -1 && pos < lim;
      if (ok[t]) c.key(extra ? 1 : 0, id, k.data());
      for (std::int64_t d = 0; d < D; ++d) {
        const double v = ok[t] ? k[d] : 0.0;
        if (!std::isfinite(v)) return false;
        Ko[t * D + d] = op(v);
        if (d < 512) Vt[d * 64 + t] = Ko[t * D + d];
      }
    }
    // S = Q K^T over d_qk in k-steps of 16 (tiles 0 .. d_qk/64 - 1), masked keys -inf.
    for (std::int64_t h = 0; h < 64; ++h)
      for (std::int64_t t = 0; t < 64; ++t) {
        if (!ok[t]) {
          sc[h * 64 + t] = kNeg;
          continue;
        }
        double acc = 0;
        for (std::int64_t d0 = 0; d0 < D; d0 += 16)
          acc = wgmma_k16(acc, qo.data() + h * D + d0, Ko.data() + t * D + d0);
        sc[h * 64 + t] = static_cast<float>(acc);
      }
    // scale_softmax: the block max, the rescaling of O and of each thread's row sum, P = ex2(fma(s, scale, -max)).
    for (std::int64_t h = 0; h < 64; ++h) {
      float mx = kNeg;
      for (std::int64_t t = 0; t < 64; ++t) mx = std::max(mx, sc[h * 64 + t]);
      const float nw = std::max(mul(mx, scale), rM[h]);
      const float f = ex2_approx(add(rM[h], -nw));
      for (std::int64_t d = 0; d < 512; ++d) O[h * 512 + d] = mul(static_cast<float>(O[h * 512 + d]), f);
      for (std::int64_t t = 0; t < 64; ++t) p[h * 64 + t] = ex2_approx(ops::fma(sc[h * 64 + t], scale, -nw));
      for (int th = 0; th < 4; ++th) {  // thread th of the row's quad: keys 8m + 2th, 8m + 2th + 1 in turn
        float sum = 0.0f;
        for (int m = 0; m < 8; ++m) sum = add(add(sum, p[h * 64 + 8 * m + 2 * th]), p[h * 64 + 8 * m + 2 * th + 1]);
        rL[h * 4 + th] = ops::fma(rL[h * 4 + th], f, sum);
      }
      rM[h] = nw;
    }
    // O += bf16(P) V (V = the key's first 512 dims), 16 keys per k-step.
    for (std::int64_t i = 0; i < 64 * 64; ++i) P[i] = op(bf16f(bf16(p[i])));
    for (std::int64_t h = 0; h < 64; ++h)
      for (std::int64_t d = 0; d < 512; ++d) {
        double acc = O[h * 512 + d];
        for (std::int64_t c4 = 0; c4 < 4; ++c4)
          acc = wgmma_k16(acc, P.data() + h * 64 + 16 * c4, Vt.data() + d * 64 + 16 * c4);
        O[h * 512 + d] = acc;
      }
  }
  L.resize(64);
  for (std::int64_t h = 0; h < 64; ++h) L[h] = add(add(rL[h * 4], rL[h * 4 + 1]), add(rL[h * 4 + 2], rL[h * 4 + 3]));
  return true;
}

}  // namespace

void decode_schedule(const DecodeCall& c, std::vector<SchedPart>& parts, std::vector<std::int64_t>& num_splits) {
  const std::int64_t B = c.b, n_parts = num_sm_parts(c);
  std::vector<std::int64_t> cur(static_cast<std::size_t>(B)), nblk(cur.size()), last(cur.size());
  std::int64_t total = 0;
  for (std::int64_t i = 0; i < B; ++i) {
    std::int64_t s = (model1(c) && !c.length.empty()) ? c.length[static_cast<std::size_t>(i)] : c.topk;
    if (s == 0) s = 1;
    if (!c.xidx.empty() && c.xtopk) s = ceil64(s) + (c.xlength.empty() ? c.xtopk : c.xlength[static_cast<std::size_t>(i)]);
    cur[i] = s, last[i] = std::max<std::int64_t>(s - 1, 0) / kBlock, nblk[i] = last[i] + 1;
    total += nblk[i] + kFixed;
  }
  const std::int64_t payload = (total + n_parts - 1) / n_parts + kFixed;
  std::int64_t req_i = 0, blk = 0, nsp = 0, cum = 0;
  num_splits.assign(static_cast<std::size_t>(B + 1), 0);
  parts.clear();
  for (std::int64_t pi = 0; pi < n_parts; ++pi) {
    SchedPart m{req_i, blk, nsp, 0, 0, blk != 0, false};
    std::int64_t rem = payload;
    while (req_i < B) {
      const std::int64_t left = nblk[req_i] - blk;
      if (rem >= left + kFixed) {
        cum += nsp + 1;
        num_splits[static_cast<std::size_t>(req_i + 1)] = cum;
        rem -= left + kFixed;
        ++req_i, blk = 0, nsp = 0;
      } else {
        if (rem - kFixed > 0) blk += rem - kFixed, ++nsp, rem = 0;
        break;
      }
    }
    m.end_req = blk > 0 ? req_i : req_i - 1;
    if (blk > 0) m.end_block = blk;
    else m.end_block = (req_i == 0 || cur[req_i - 1] == 0) ? 0 : last[req_i - 1] + 1;
    m.last_split = m.end_req >= 0 && m.end_req < B && m.end_block != last[m.end_req] + 1 && cur[m.end_req] != 0;
    if (m.begin_req == m.end_req) m.first_split = m.last_split = m.first_split || m.last_split;
    parts.push_back(m);
  }
}

bool decode(const DecodeCall& c, int threads, std::uint16_t* out, float* lse, std::string& why, std::vector<float>* o_accum,
            std::vector<float>* lse_accum) {
  const std::int64_t B = c.b, S = c.s_q, H = c.h_q, D = c.d_qk;
  if (B < 1 || S < 1) return why = "an empty call (b " + std::to_string(B) + ", s_q " + std::to_string(S) + ")", false;
  if (D != 576 && D != 512) return why = "d_qk " + std::to_string(D) + " (the sm90 decode: 576 or 512)", false;
  if (H != 64 && H != 128) return why = "h_q " + std::to_string(H) + " (the sm90 decode instantiates 64 and 128)", false;
  if (c.topk <= 0 || c.topk % kBlock != 0) return why = "topk " + std::to_string(c.topk) + " not a positive multiple of 64 (the kernel asserts it)", false;
  if (!model1(c) && (!c.length.empty() || !c.xidx.empty()))
    return why = "a V3.2 (576) call with topk_length or an extra scope (the sm90 kernel refuses both)", false;
  if (!c.xidx.empty() && c.xtopk % kBlock != 0)
    return why = "extra_topk " + std::to_string(c.xtopk) + " not a multiple of 64 (the kernel reads whole 64-index blocks)", false;
  if (c.num_sms < 1) return why = "num_sms " + std::to_string(c.num_sms), false;
  if (num_sm_parts(c) > 160)
    return why = "num_sm_parts " + std::to_string(num_sm_parts(c)) + " > 160 (FlashMLA's combine kernel takes at most 160 splits)", false;
  for (std::int64_t i = 0; i < B * S * H * D; ++i)
    if (!std::isfinite(bf16f(c.q[i]))) return why = "a non-finite q value", false;
  std::vector<SchedPart> parts;
  std::vector<std::int64_t> ns;
  decode_schedule(c, parts, ns);
  const std::int64_t n_parts = static_cast<std::int64_t>(parts.size()), n_splits = ns[static_cast<std::size_t>(B)];
  // The CTAs' work: (request, first block, end block, whole request?, split slot), per query token and head block.
  struct Item {
    std::int64_t b, st, en, split;
    bool whole;
  };
  std::vector<Item> items;
  for (const SchedPart& m : parts) {
    if (m.begin_req >= B) continue;
    for (std::int64_t b = m.begin_req; b <= m.end_req; ++b) {
      const Req r = req(c, b);
      Item it{b, b == m.begin_req ? m.begin_block : 0, b == m.end_req ? m.end_block : r.total, 0, true};
      it.whole = b == m.begin_req ? !m.first_split : (b == m.end_req ? !m.last_split : true);
      it.split = ns[static_cast<std::size_t>(b)] + (b == m.begin_req ? m.begin_split : 0);
      items.push_back(it);
    }
  }
  std::vector<float> oacc(static_cast<std::size_t>(n_splits * S * H * 512), 0.0f), lacc(static_cast<std::size_t>(n_splits * S * H), 0.0f);
  const std::int64_t n_work = static_cast<std::int64_t>(items.size()) * S * (H / 64);
  bool finite = true, below_one = false;  // below_one: a value that depends on lg2.approx below 1 (not measured)
  std::vector<std::uint16_t> o_out(static_cast<std::size_t>(B * S * H * 512), 0);
  std::vector<float> l_out(static_cast<std::size_t>(B * S * H), 0.0f);
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::max(threads, 1))
  for (std::int64_t w = 0; w < n_work; ++w) {
    const Item& it = items[static_cast<std::size_t>(w / (S * (H / 64)))];
    const std::int64_t s = w / (H / 64) % S, h0 = w % (H / 64) * 64;
    std::vector<double> O;
    std::vector<float> rM, L;
    if (!run_blocks(c, it.b, s, h0, it.st, it.en, O, rM, L)) {
#pragma omp atomic write
      finite = false;
      continue;
    }
    // lg2(L) + c for L >= 1; for L in (0, 1) (one dominant key) the value both ends of lg2_unmeasured_bounds give,
    // else the call is declined.
    auto lg2_then = [&](float l, auto&& f) {
      if (l >= 1.0f) return f(lg2_approx(l));
      float lo, hi;
      lg2_unmeasured_bounds(l, lo, hi);
      const float a = f(lo), b = f(hi);
      if (num::f32_bits(a) != num::f32_bits(b)) {
#pragma omp atomic write
        below_one = true;
      }
      return a;
    };
    for (std::int64_t h = 0; h < 64; ++h) {
      if (it.whole) {
        const float sl = c.sink ? mul(c.sink[h0 + h], kL2e) : kNeg;
        const float inv = L[h] == 0 ? 0.0f : rcp_approx(add(L[h], ex2_approx(add(sl, -rM[h]))));
        const std::int64_t f = (it.b * S + s) * H + h0 + h;
        for (std::int64_t d = 0; d < 512; ++d) o_out[f * 512 + d] = bf16(mul(static_cast<float>(O[h * 512 + d]), inv));
        l_out[f] = L[h] == 0 ? kInf : lg2_then(L[h], [&](float y) { return ops::fma(y, kLn2, mul(rM[h], kLn2)); });
      } else {
        const float inv = L[h] == 0 ? 0.0f : rcp_approx(L[h]);
        const std::int64_t f = (it.split * S + s) * H + h0 + h;
        for (std::int64_t d = 0; d < 512; ++d) oacc[f * 512 + d] = mul(static_cast<float>(O[h * 512 + d]), inv);
        lacc[f] = L[h] == 0 ? kNeg : lg2_then(L[h], [&](float y) { return add(y, rM[h]); });
      }
    }
  }
  if (!finite) return why = "a non-finite value in a selected cache key", false;
  if (below_one)
    return why = "a row sum in (0, 1) (one dominant key) whose lse or split partial depends on lg2.approx below 1 (not measured)", false;
  // The combine kernel: per request with several splits, query token and head.
  const std::int64_t max_splits = n_parts <= 32 ? 32 : n_parts <= 64 ? 64 : n_parts <= 96 ? 96 : n_parts <= 128 ? 128 : 160;
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::max(threads, 1))
  for (std::int64_t w = 0; w < B * S * H; ++w) {
    const std::int64_t b = w / (S * H), s = w / H % S, h = w % H;
    const std::int64_t a = ns[static_cast<std::size_t>(b)], n = ns[static_cast<std::size_t>(b + 1)] - a;
    if (n == 1) continue;
    std::vector<float> loc(static_cast<std::size_t>(max_splits), kNeg);
    for (std::int64_t i = 0; i < n; ++i) loc[i] = lacc[((a + i) * S + s) * H + h];
    float mx = kNeg;
    for (float v : loc) mx = std::max(mx, v);
    if (mx == kNeg) mx = 0.0f;
    float lanes[32] = {};
    for (std::int64_t i = 0; i < max_splits / 32; ++i)
      for (int l = 0; l < 32; ++l) lanes[l] = add(lanes[l], ex2_approx(add(loc[i * 32 + l], -mx)));
    for (int off = 16; off >= 1; off /= 2) {  // __shfl_xor_sync butterfly
      float nx[32];
      for (int l = 0; l < 32; ++l) nx[l] = add(lanes[l], lanes[l ^ off]);
      std::copy(nx, nx + 32, lanes);
    }
    float g = lanes[0] == 0.0f ? kInf : add(lg2_approx(lanes[0]), mx);
    l_out[(b * S + s) * H + h] = mul(g, kLn2);  // global_lse / (float)M_LOG2E, a multiplication by ln 2 under fast math
    if (c.sink) {
      const float sk = c.sink[h];
      if (g != kInf) g = add(g, lg2_approx(add(1.0f, ex2_approx(ops::fma(sk, kL2e, -g)))));
      else g = sk == kNeg ? kInf : mul(sk, kL2e);
    }
    std::vector<float> r(512, 0.0f);
    for (std::int64_t i = 0; i < n; ++i) {
      const float f = ex2_approx(add(loc[i], -g));
      const float* src = oacc.data() + ((a + i) * S + s) * H * 512 + h * 512;
      for (std::int64_t d = 0; d < 512; ++d) r[d] = ops::fma(f, src[d], r[d]);
    }
    for (std::int64_t d = 0; d < 512; ++d) o_out[((b * S + s) * H + h) * 512 + d] = bf16(r[d]);
  }
  std::copy(o_out.begin(), o_out.end(), out);
  std::copy(l_out.begin(), l_out.end(), lse);
  if (o_accum) *o_accum = std::move(oacc);
  if (lse_accum) *lse_accum = std::move(lacc);
  return true;
}

}  // namespace dsa::profiles::flashmla_emu
