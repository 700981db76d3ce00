// indexer.prolog, the CUDA implementation's host side: the tokens' RoPE rows (rope_rows, cpu.cpp), every token's k row
// and q heads on the GPU (cuda.cu running core.hpp's token_k / token_q_head), then the same packaging as the CPU
// reference (package). Same bytes as cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include <vector>

#include "stages/indexer/prolog/cuda.hpp"
#include "stages/indexer/prolog/stage.hpp"

namespace dsa::indexer::prolog {

Expected cuda(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& q = c.input("q");
  const std::int64_t T = q.dim(0), H = q.dim(1), Dh = q.dim(2);
  std::vector<float> cs, sn;
  rope_rows(c, p, T, opt.thread_count(), cs, sn);
  Outputs o = make_outputs(T, H, Dh);
  auto u16 = [](Tensor& t) { return t.data<std::uint16_t>(); };
  const HostOut out{o.q_fp8.data<std::uint8_t>(), o.k_fp8.data<std::uint8_t>(), o.q_scale.data<float>(), o.k_scale.data<float>(),
                    o.weights.data<float>(), u16(o.k_norm), u16(o.k_rope), u16(o.k_rot), u16(o.q_rope), u16(o.q_rot)};
  prolog_cuda(token_params(p), T, H, Dh, q.data<std::uint16_t>(), c.input("k").data<std::uint16_t>(), c.input("w").data<float>(),
              c.input("ln_weight").data<float>(), c.input("ln_bias").data<float>(), cs.data(), sn.data(), softmax_scale(Dh), out);
  return package(std::move(o), p, H, Dh);
}

}  // namespace dsa::indexer::prolog
#endif
