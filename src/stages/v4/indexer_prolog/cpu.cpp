// v4.indexer_prolog CPU reference: rows in parallel (each row independent; exact: any thread count, same bytes).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "numerics/formats.hpp"
#include "stages/v4/indexer_prolog/core.hpp"

namespace dsa::v4::indexer_prolog {

using i64 = std::int64_t;

float dynamic_quant_int8(const std::uint16_t* x, i64 n, AmaxZero az, std::int8_t* codes, Bug bug) {
  float amax = 0;
  bool nan = false;
  for (i64 i = 0; i < n; ++i) {
    const float a = std::fabs(num::bf16_to_f32(x[i]));
    nan |= a != a;
    amax = a > amax ? a : amax;
  }
  if (nan) {
    std::fill(codes, codes + n, std::int8_t{0});
    return std::numeric_limits<float>::quiet_NaN();
  }
  if (amax == 0) {
    std::fill(codes, codes + n, std::int8_t{0});
    return az == AmaxZero::scale1 ? 1.0f : 0.0f;
  }
  const float scale = bug == Bug::scale_div127 ? amax / 127.0f : amax * (1.0f / 127.0f);
  const float inv = 127.0f / amax;
  for (i64 i = 0; i < n; ++i) {
    const float y = num::bf16_to_f32(x[i]) * inv;
    const float r = bug == Bug::codes_trunc ? std::trunc(y) : std::nearbyint(y);  // default FE_TONEAREST: half to even
    codes[i] = std::isnan(r) ? std::int8_t{0} : static_cast<std::int8_t>(std::clamp(r, -127.0f, 127.0f));  // inf * 0 = NaN -> 0
  }
  return scale;
}

std::uint16_t a3_weight(std::uint16_t w_bf16, Bug bug) {
  const float w = num::bf16_to_f32(w_bf16);
  if (bug == Bug::weights_unscaled) return num::f32_to_fp16(w);
  return num::f32_to_fp16(num::round_to_bf16(w * static_cast<float>(0.011048543456039806)));
}

i64 slot_of(const Case& c, const Params& p, i64 r) {
  const Tensor& sm = c.input("slot_mapping");
  if (!p.pairs) return sm.int_at(r) < 0 ? -1 : sm.int_at(r);
  const i64 blk = sm.int_at(2 * r), off = sm.int_at(2 * r + 1);
  return blk < 0 ? -1 : blk * p.bs + off;
}

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  Expected e;
  const int nt = std::max(1, threads);
  auto fp16_nan = [](float s) { return std::isnan(s) ? std::uint16_t{0x7FFF} : num::f32_to_fp16(s); };  // CUDA-canonical
  if (const Tensor* q = c.input_opt("q")) {
    const i64 T = q->dim(0), H = q->dim(1), D = q->dim(2);
    Tensor q8(DType::int8, {T, H, D}, Tensor::Uninit{}), qs(DType::fp16, {T, H}, Tensor::Uninit{});
#pragma omp parallel for schedule(static) num_threads(nt)
    for (i64 r = 0; r < T * H; ++r)
      qs.data<std::uint16_t>()[r] = fp16_nan(dynamic_quant_int8(q->data<std::uint16_t>() + r * D, D, p.amax_zero, q8.data<std::int8_t>() + r * D, bug));
    RefTensor a;
    a.name = "q_int8";
    a.value = q8;
    a.describe = [H, D](i64 f) { return "token " + std::to_string(f / (H * D)) + " head " + std::to_string(f / D % H) + " dim " + std::to_string(f % D); };
    RefTensor b;
    b.name = "q_scale";
    b.value = qs;
    b.describe = [H](i64 f) { return "token " + std::to_string(f / H) + " head " + std::to_string(f % H); };
    e.tensors.push_back(std::move(a));
    e.tensors.push_back(std::move(b));
  }
  if (const Tensor* w = c.input_opt("weights")) {
    const i64 H = w->dim(-1);
    Tensor w16(DType::fp16, w->shape(), Tensor::Uninit{});
    for (i64 i = 0; i < w->numel(); ++i) w16.data<std::uint16_t>()[i] = a3_weight(w->data<std::uint16_t>()[i], bug);
    RefTensor a;
    a.name = "weights_fp16";
    a.value = w16;
    a.describe = [H](i64 f) { return "token " + std::to_string(f / H) + " head " + std::to_string(f % H); };
    e.tensors.push_back(std::move(a));
  }
  if (const Tensor* k = c.input_opt("k")) {
    const i64 R = k->dim(0), D = p.D, bs = p.bs;
    Tensor kc = c.input("k_cache_in").clone(), ksc = c.input("k_scale_cache_in").clone();
    std::vector<std::int8_t> codes(static_cast<std::size_t>(R * D));
    std::vector<std::uint16_t> sc(static_cast<std::size_t>(R));
#pragma omp parallel for schedule(static) num_threads(nt)
    for (i64 r = 0; r < R; ++r)
      sc[static_cast<std::size_t>(r)] = fp16_nan(dynamic_quant_int8(k->data<std::uint16_t>() + r * D, D, p.amax_zero, codes.data() + r * D, bug));
    for (i64 r = 0; r < R; ++r) {  // distinct slots (parse): order-free
      const i64 s = slot_of(c, p, r);
      if (s < 0) continue;
      std::copy(codes.begin() + r * D, codes.begin() + (r + 1) * D, kc.data<std::int8_t>() + s * D);
      ksc.data<std::uint16_t>()[s] = sc[static_cast<std::size_t>(r)];
    }
    RefTensor a;
    a.name = "k_cache";
    a.value = kc;
    a.describe = [bs, D](i64 f) { return "block " + std::to_string(f / (bs * D)) + " slot " + std::to_string(f / D % bs) + " dim " + std::to_string(f % D); };
    RefTensor b;
    b.name = "k_scale_cache";
    b.value = ksc;
    b.describe = [bs](i64 f) { return "block " + std::to_string(f / bs) + " slot " + std::to_string(f % bs) + " scale"; };
    e.tensors.push_back(std::move(a));
    e.tensors.push_back(std::move(b));
  }
  return e;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

}  // namespace dsa::v4::indexer_prolog
