// Host side of the CUDA logits engine shared by indexer.logits_ragged and indexer.logits_paged (see logits_cuda.hpp):
// the device run, then the exact rounding of the logits whose certificate failed on the device; the deepgemm-sm90
// emulation on the device when asked.
#ifdef DSA_CUDA_BACKEND
#include <cstdio>
#include <cstring>

#include "backend/cuda_stats.hpp"
#include "profiles/deepgemm_sm90/emulate_cuda.hpp"
#include "engines/logits/logits_cuda.hpp"
#include "engines/logits/logits_engine.hpp"

namespace dsa::engines::logits {

void run_gpu_logits(GpuLogitsJob& job, LogitsTensors& lt, const std::function<std::uint32_t(i64 r, i64 col)>& exact, bool emulate) {
  job.bf16 = lt.bf16;
  job.value = lt.value.raw();
  job.M = lt.mag.data<double>();
  job.defined = lt.def.data<std::uint8_t>();
  logits_cuda(job);
  std::uint8_t* def = job.defined;
  const i64 n = job.rows * job.cols;
  i64 fallbacks = 0;
  const std::uint8_t* const end = def + n;
  for (const std::uint8_t* p = def; p < end; ++p) {
    p = static_cast<const std::uint8_t*>(std::memchr(p, 2, static_cast<sz>(end - p)));
    if (!p) break;
    const i64 e = p - def;
    store_bits(lt.value, e, exact(e / job.cols, e % job.cols));
    def[e] = 1;
    ++fallbacks;
  }
  if (emulate) {  // deepgemm-sm90 on the device as well (the same bits as the host emulation)
    lt.emu = Tensor(lt.value.dtype(), lt.value.shape(), Tensor::Uninit{});
    profiles::sm90::emulate_logits_cuda(job, lt.emu.raw());
  }
  if (cuda::stats_on())
    std::fprintf(stderr, "cuda logits: %lld rows x %lld cols, H %d, D %d: device %.3f ms (uploads, digit planes, kernel), kernel %.3f ms (%s), %.1f MiB device memory, %lld exact fallback(s)\n",
                 static_cast<long long>(job.rows), static_cast<long long>(job.cols), job.H, job.D, job.device_ms, job.kernel_ms, job.engine,
                 static_cast<double>(job.device_bytes) / 1048576.0, static_cast<long long>(fallbacks));
}

}  // namespace dsa::engines::logits
#endif
