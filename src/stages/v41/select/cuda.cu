// v41.select on the GPU: every candidate of a row becomes one canonical 64-bit key (engines/topk/topk_keys.cuh; the id
// is the position or block id, ascending with the candidate list, so ties go to the lower entry as on the CPU).
// Non-candidates get the key ~0 and sort last. Rows are segments of one sort; the picks are the first min(k, len).
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda.hpp"
#include "engines/topk/topk_keys.cuh"
#include "stages/v41/select/core.hpp"
#include "stages/v41/select/cuda.hpp"

namespace dsa::v41::select {
namespace {

constexpr std::uint64_t kNone = ~std::uint64_t{0};

__device__ inline std::uint64_t key_of(double v, std::int64_t id) {  // (every score is an fp32 value: exact)
  return engines::topk::canonical_key(static_cast<float>(v), static_cast<std::uint32_t>(id));
}

// Key x of row r. Items: positions x < reach (no list, the REF quirk, or scores_layout positions), entries
// x = e * bs + t of the list (a consumer's scores_layout candidates without the quirk: the id is x, which the host maps
// to its position), or blocks x < nblocks.
__global__ void keys_kernel(CudaSelectJob j, std::int64_t C, std::uint64_t* keys) {
  const std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= j.S * C) return;
  const std::int64_t r = e / C, x = e % C, n = j.reach[r];
  const float* row = j.scores + r * j.N;
  const std::int32_t* list = j.cand ? j.cand + r * j.M : nullptr;
  const double ninf = -hd::inf64();
  std::uint64_t key = kNone;
  if (j.blocks) {
    if (x < (n + j.bs - 1) / j.bs) {
      const double m = core::block_score([row](std::int64_t q) { return static_cast<double>(row[q]); }, n, j.bs, x);
      if (m != ninf) key = key_of(m, x);
    }
  } else if (list && j.cand_layout && !j.short_ref) {
    const std::int64_t en = x / j.bs, b = list[en], pos = b * j.bs + x % j.bs;
    if (b >= 0 && pos < n) {
      const double v = row[x];
      if (v != ninf) key = key_of(v, x);  // the entry, not the position (< 2^32; the same order: the list ascends)
    }
  } else if (x < n) {
    const std::int64_t en = list ? core::entry_of(list, j.M, x / j.bs) : 0;
    const double v = en < 0 ? ninf : static_cast<double>(row[j.cand_layout ? en * j.bs + x % j.bs : x]);
    if (v != ninf || j.short_ref) key = key_of(v, x);
  }
  keys[e] = key;
}

__global__ void pick_kernel(const std::uint64_t* sorted, std::int64_t S, std::int64_t C, std::int64_t k, std::int64_t* ids, std::int64_t* len) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= S) return;
  std::int64_t lo = 0, hi = C;  // the number of candidate keys (those before the first ~0)
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (sorted[r * C + mid] == kNone) hi = mid;
    else lo = mid + 1;
  }
  len[r] = lo;
  for (std::int64_t q = 0; q < k; ++q) ids[r * k + q] = q < lo ? static_cast<std::int64_t>(sorted[r * C + q] & 0xFFFFFFFFu) : -1;
}


}  // namespace

std::int64_t select_cuda(const CudaSelectJob& job, std::vector<std::int64_t>& ids, std::vector<std::int64_t>& len) {
  const std::int64_t S = job.S;
  std::int64_t C = 0;  // items per row
  for (std::int64_t r = 0; r < S; ++r) {
    const std::int64_t n = job.reach[r];
    const std::int64_t c = job.blocks ? (n + job.bs - 1) / job.bs : job.cand && job.cand_layout && !job.short_ref ? job.M * job.bs : n;
    C = c > C ? c : C;
  }
  if (C >= (std::int64_t{1} << 32)) throw std::runtime_error("v41.select on CUDA: more than 2^32 items in a row");
  const std::int64_t k = job.k < C ? job.k : C;  // no row has more picks than items
  ids.assign(static_cast<std::size_t>(S * k), -1), len.assign(static_cast<std::size_t>(S), 0);
  std::vector<std::int64_t> beg(static_cast<std::size_t>(S)), end(static_cast<std::size_t>(S));
  for (std::int64_t r = 0; r < S; ++r) beg[static_cast<std::size_t>(r)] = r * C, end[static_cast<std::size_t>(r)] = (r + 1) * C;
  const std::int64_t n = S * C;
  cuda::Buffer ds(static_cast<std::size_t>(S * job.N * 4 + 4)), dr(static_cast<std::size_t>(S * 8 + 8)),
      dc(static_cast<std::size_t>(job.cand ? S * job.M * 4 + 4 : 4)), din(static_cast<std::size_t>(n * 8 + 8)), dout(static_cast<std::size_t>(n * 8 + 8)),
      dbeg(static_cast<std::size_t>(S * 8 + 8)), dend(static_cast<std::size_t>(S * 8 + 8)), dids(static_cast<std::size_t>(S * k * 8 + 8)),
      dlen(static_cast<std::size_t>(S * 8 + 8));
  if (S == 0) return k;
  ds.upload(job.scores, static_cast<std::size_t>(S * job.N * 4));
  dr.upload(job.reach, static_cast<std::size_t>(S * 8));
  if (job.cand) dc.upload(job.cand, static_cast<std::size_t>(S * job.M * 4));
  dbeg.upload(beg.data(), static_cast<std::size_t>(S * 8));
  dend.upload(end.data(), static_cast<std::size_t>(S * 8));
  CudaSelectJob d = job;
  d.scores = static_cast<const float*>(ds.get());
  d.reach = static_cast<const std::int64_t*>(dr.get());
  d.cand = job.cand ? static_cast<const std::int32_t*>(dc.get()) : nullptr;
  if (n > 0) {
    keys_kernel<<<static_cast<unsigned>((n + 255) / 256), 256>>>(d, C, static_cast<std::uint64_t*>(din.get()));
    cuda::check_last("v41.select keys kernel");
    engines::topk::sort_segments(static_cast<const std::uint64_t*>(din.get()), static_cast<std::uint64_t*>(dout.get()), n, S,
                                 static_cast<const std::int64_t*>(dbeg.get()), static_cast<const std::int64_t*>(dend.get()));
  }
  pick_kernel<<<static_cast<unsigned>((S + 127) / 128), 128>>>(static_cast<const std::uint64_t*>(dout.get()), S, C, k,
                                                                static_cast<std::int64_t*>(dids.get()), static_cast<std::int64_t*>(dlen.get()));
  cuda::check_last("v41.select pick kernel");
  if (k > 0) dids.download(ids.data(), static_cast<std::size_t>(S * k * 8));
  dlen.download(len.data(), static_cast<std::size_t>(S * 8));
  return k;
}

}  // namespace dsa::v41::select
