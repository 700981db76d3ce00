// v41.logits, the CUDA implementation's host side: the keys resolved on the host (key_ref, cpu.cpp), the logits on the
// device (cuda.cu running core.hpp), packaged as the CPU packages them. Same bytes as cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include "stages/v41/logits/cuda.hpp"
#include "stages/v41/logits/stage.hpp"

namespace dsa::v41::logits {

Expected cuda(const Case& c, const Params& p, const RefOptions&) {
  const Operands o = operands(c, p);
  const std::int64_t n = p.R * p.cols;
  std::vector<std::int64_t> off(static_cast<std::size_t>(n));
  std::vector<std::uint32_t> ksf(off.size());
  for (std::int64_t r = 0; r < p.R; ++r)
    for (std::int64_t col = 0; col < p.cols; ++col) {
      const KeyRef k = key_ref(c, p, r, col, Bug::none);
      off[static_cast<std::size_t>(r * p.cols + col)] = k.off, ksf[static_cast<std::size_t>(r * p.cols + col)] = k.sf;
    }
  CudaLogitsJob j;
  j.R = p.R, j.H = p.H, j.D = p.D, j.cols = p.cols;
  const Tensor& keys = p.paged ? c.input("kv_cache") : c.input("kv_fp4");
  j.key_bytes = static_cast<std::int64_t>(keys.nbytes());
  j.q = c.input("q_fp4").data<std::uint8_t>(), j.qsf = o.qsf.data(), j.w = o.w.data(), j.keys = o.keys, j.off = off.data(), j.ksf = ksf.data();
  std::vector<core::Logit> l(static_cast<std::size_t>(n), core::Logit{0, 0, 0});
  logits_cuda(j, l.data());
  return package(c, p, off, l);
}

}  // namespace dsa::v41::logits
#endif
