// indexer.quant — act_quant per 1 x block_size block (spec v32 §2.5). Bit-exact by construction.
#include <omp.h>

#include <string>

#include "numerics/formats.hpp"
#include "reference/act_quant.hpp"
#include "reference/v32_indexer.hpp"

namespace dsa::ref {

Expected indexer_quant(const Case& c, const RefOptions& opt) {
  const Tensor& x = c.input("x");
  const std::int64_t T = x.dim(0), K = x.dim(1), bs = c.attr_int("block_size", 128), nb = K / bs;
  QuantParams p;
  p.fmt = parse_scale_fmt(c.attr_str("scale_fmt", "ue8m0"));
  p.apply = parse_scale_apply(c.attr_str("scale_apply", "div"));
  p.amax_eps = static_cast<float>(c.attr_float("amax_eps", 1e-4));
  p.clamp = c.attr_bool("clamp", true);

  Tensor y(DType::fp8_e4m3fn, {T, K});
  Tensor scale(DType::f32, {T, nb});
  const bool is_bf16 = x.dtype() == DType::bf16;
  const int threads = opt.thread_count();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<float> row(static_cast<std::size_t>(K));
    for (std::int64_t i = 0; i < K; ++i)
      row[static_cast<std::size_t>(i)] = is_bf16 ? num::bf16_to_f32(x.data<std::uint16_t>()[t * K + i]) : x.data<float>()[t * K + i];
    for (std::int64_t b = 0; b < nb; ++b)
      scale.data<float>()[t * nb + b] = quantize_block(row.data() + b * bs, bs, p, y.data<std::uint8_t>() + t * K + b * bs);
  }
  Expected e;
  e.tensors.push_back({"y", CompareKind::bytes, y, {}, {}, false, {}, {},
                       [K](std::int64_t f) { return "token " + std::to_string(f / K) + " dim " + std::to_string(f % K); }});
  e.tensors.push_back({"scale", CompareKind::bytes, scale, {}, {}, false, {}, {}, [nb, bs](std::int64_t f) {
                         return "token " + std::to_string(f / nb) + " block " + std::to_string(f % nb) + " (dims " +
                                std::to_string((f % nb) * bs) + ".." + std::to_string((f % nb) * bs + bs - 1) + ")";
                       }});
  return e;
}

}  // namespace dsa::ref
