// indexer.topk on the GPU: every candidate becomes one canonical 64-bit key (engines/topk/topk_keys.cuh: the
// order of topk_canonical.hpp, ties by the lower position), rows sorted as segments (sort_segments).
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda.hpp"
#include "engines/topk/topk_keys.cuh"
#include "stages/indexer/topk/cuda.hpp"

namespace dsa::indexer::topk {

namespace {

__global__ void keys_kernel(const float* scores, std::int64_t R, std::int64_t C, const std::int64_t* start, const std::int64_t* len,
                            std::int64_t num_init, std::int64_t num_local, std::uint64_t* keys) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < R * C;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = e / C, q = e % C, n = len[r];
    if (q >= n) continue;
    const bool forced = q < num_init || q >= n - num_local;
    keys[e] = engines::topk::canonical_key(forced ? __int_as_float(0x7F800000) : scores[r * C + start[r] + q], static_cast<std::uint32_t>(q));
  }
}

__global__ void pick_kernel(const std::uint64_t* sorted, std::int64_t R, std::int64_t C, const std::int64_t* len, std::int64_t k,
                            std::int32_t* sel) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < R * k;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = e / k, j = e % k;
    sel[e] = j < len[r] ? static_cast<std::int32_t>(sorted[r * C + j] & 0xFFFFFFFFu) : -1;
  }
}

__global__ void last_kernel(const std::uint64_t* sorted, std::int64_t R, std::int64_t C, const std::int64_t* len, std::int32_t* last) {
  for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; r < R;
       r += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    last[r] = len[r] > 0 ? static_cast<std::int32_t>(sorted[r * C + len[r] - 1] & 0xFFFFFFFFu) : -1;
}


unsigned grid_for(std::int64_t n) { return static_cast<unsigned>(n < 1 ? 1 : (n + 255) / 256 < 65536 ? (n + 255) / 256 : 65536); }

}  // namespace

void select_cuda(const float* scores, std::int64_t R, std::int64_t C, const std::int64_t* start, const std::int64_t* len, std::int64_t k,
                 std::int64_t num_init, std::int64_t num_local, std::int32_t* sel, std::int32_t* last) {
  if (C >= (std::int64_t{1} << 32)) throw std::runtime_error("indexer.topk on CUDA: more than 2^32 candidate columns");
  const std::int64_t n = R * C;
  cuda::Buffer ds(static_cast<std::size_t>(n * 4)), dst(static_cast<std::size_t>(R * 8)), dlen(static_cast<std::size_t>(R * 8)),
      dbeg(static_cast<std::size_t>(R * 8)), dend(static_cast<std::size_t>(R * 8)), din(static_cast<std::size_t>(n * 8)),
      dout(static_cast<std::size_t>(n * 8)), dsel(static_cast<std::size_t>(R * k * 4)), dlast(static_cast<std::size_t>(R * 4));
  ds.upload(scores, static_cast<std::size_t>(n * 4));
  dst.upload(start, static_cast<std::size_t>(R * 8));
  dlen.upload(len, static_cast<std::size_t>(R * 8));
  std::vector<std::int64_t> beg(static_cast<std::size_t>(R)), end(static_cast<std::size_t>(R));
  for (std::int64_t r = 0; r < R; ++r) {
    beg[static_cast<std::size_t>(r)] = r * C;
    end[static_cast<std::size_t>(r)] = r * C + len[r];
  }
  dbeg.upload(beg.data(), static_cast<std::size_t>(R * 8));
  dend.upload(end.data(), static_cast<std::size_t>(R * 8));
  if (n > 0) {
    keys_kernel<<<grid_for(n), 256>>>(static_cast<const float*>(ds.get()), R, C, static_cast<const std::int64_t*>(dst.get()),
                                      static_cast<const std::int64_t*>(dlen.get()), num_init, num_local, static_cast<std::uint64_t*>(din.get()));
    cuda::check_last("indexer.topk keys kernel");
    engines::topk::sort_segments(static_cast<const std::uint64_t*>(din.get()), static_cast<std::uint64_t*>(dout.get()), n, R,
                                 static_cast<const std::int64_t*>(dbeg.get()), static_cast<const std::int64_t*>(dend.get()));
  }
  if (R * k > 0) {
    pick_kernel<<<grid_for(R * k), 256>>>(static_cast<const std::uint64_t*>(dout.get()), R, C, static_cast<const std::int64_t*>(dlen.get()), k,
                                          static_cast<std::int32_t*>(dsel.get()));
    cuda::check_last("indexer.topk pick kernel");
    dsel.download(sel, static_cast<std::size_t>(R * k * 4));
  }
  if (R > 0) {
    last_kernel<<<grid_for(R), 256>>>(static_cast<const std::uint64_t*>(dout.get()), R, C, static_cast<const std::int64_t*>(dlen.get()),
                                      static_cast<std::int32_t*>(dlast.get()));
    cuda::check_last("indexer.topk last kernel");
    dlast.download(last, static_cast<std::size_t>(R * 4));
  }
}

}  // namespace dsa::indexer::topk
