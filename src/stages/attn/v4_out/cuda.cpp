// attn.v4_out, the CUDA implementation's host side: the reference's tensors (make_outputs, cpu.cpp), the three loops
// on the device (cuda.cu running core.hpp's rot_elem, lora_elem, out_elem), then the same packaging as the CPU
// reference (package). Same bytes as cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include "stages/attn/v4_out/cuda.hpp"
#include "stages/attn/v4_out/stage.hpp"

namespace dsa::attn::v4_out {

Expected cuda(const Case& c, const Params& p, const RefOptions&) {
  const std::int64_t Ka = p.N * p.D / p.G, Kb = p.G * p.R;
  Outputs out = make_outputs(p);
  v4_out_cuda(dims(p), c.input("o").data<std::uint16_t>(), c.input("cos").data<float>(), c.input("sin").data<float>(),
              c.input("wo_a").data<std::uint16_t>(), c.input("wo_b").data<std::uint16_t>(), gamma_sum(Ka), gamma_sum(Kb),
              out.rot.data<std::uint16_t>(), out.rot_m.data<double>(), out.ua.data<std::uint16_t>(), out.ua_m.data<double>(),
              out.y.data<std::uint16_t>(), out.y_m.data<double>());
  return package(c, p, std::move(out));
}

}  // namespace dsa::attn::v4_out
#endif
