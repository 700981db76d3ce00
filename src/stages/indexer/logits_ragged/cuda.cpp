// indexer.logits_ragged on the GPU (impl[Backend::cuda]): the rows' key ranges go to the shared CUDA engine
// (engines/logits/logits_cuda.cu, exact int8 tensor-core dots, the CPU's head reduction and certificate through
// engines/logits/logits_core.hpp); the logits whose certificate fails are rounded exactly on the host. Same bytes as cpu.cpp
// (dsa-check backend-diff). Host C++ (the device code is engines/logits/logits_cuda.cu).
#ifdef DSA_CUDA_BACKEND
#include <vector>

#include "profiles/profiles.hpp"
#include "engines/logits/logits_cuda.hpp"
#include "engines/logits/logits_engine.hpp"
#include "stages/indexer/logits_ragged/stage.hpp"

namespace dsa::indexer::logits_ragged {

using namespace engines::logits;

Expected cuda(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& q = c.input("q");
  const Tensor& kv = c.input("kv");
  const float* sc = c.input("kv_scale").data<float>();
  const float* w = c.input("weights").data<float>();
  const i64 S = q.dim(0), H = q.dim(1), D = q.dim(2), N = kv.dim(0);
  const Rows rows{c.input("ks").data<std::int32_t>(), c.input("ke").data<std::int32_t>(), N, p.max_seqlen_k};
  const i64 r0 = opt.row_begin, r1 = opt.rows_end(S), R = r1 - r0, cols = rows.cols();
  std::vector<i64> lo(static_cast<sz>(R)), hi(lo.size()), col0(lo.size()), batch(lo.size(), 0);
  for (i64 i = 0; i < R; ++i) {
    lo[static_cast<sz>(i)] = rows.lo(r0 + i);
    hi[static_cast<sz>(i)] = rows.hi(r0 + i);
    col0[static_cast<sz>(i)] = p.max_seqlen_k > 0 ? lo[static_cast<sz>(i)] : 0;  // column of key j = j - col0 (Rows::col)
  }
  const std::uint8_t* qc = q.data<std::uint8_t>() + r0 * H * D;
  const std::uint8_t* kc = kv.data<std::uint8_t>();
  GpuLogitsJob job;
  job.H = static_cast<int>(H);
  job.D = static_cast<int>(D);
  job.rows = R;
  job.q = qc;
  job.w = w + r0 * H;
  job.kv = kc;
  job.kv_scale = sc;
  job.nkeys = N;
  job.lo = lo.data();
  job.hi = hi.data();
  job.col0 = col0.data();
  job.batch = batch.data();
  job.cols = cols;
  job.all_defined = p.clean_logits && p.max_seqlen_k == 0;
  LogitsTensors lt(R, cols, p.bf16, Tensor::Uninit{});
  run_gpu_logits(job, lt, [&](i64 r, i64 col) {
    const i64 j = col + col0[static_cast<sz>(r)];
    return exact_from_codes(qc + r * H * D, kc + j * D, job.w + r * H, sc[j], job.H, job.D, p.bf16);
  }, opt.emulates(profiles::deepgemm_sm90()));
  return assemble(c, p, opt, lt);
}

}  // namespace dsa::indexer::logits_ragged
#endif
