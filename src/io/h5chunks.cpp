#include "io/h5chunks.hpp"

#include <omp.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "io/h5handle.hpp"

namespace dsa::io {

namespace {

using H = H5Handle;
using i64 = std::int64_t;

struct Raw {
  std::vector<i64> off;             // chunk origin
  std::vector<unsigned char> data;  // as stored (filtered)
  std::uint32_t mask = 0;           // filters skipped for this chunk
};

// Undoes the filter pipeline of one chunk; "" or what went wrong.
// direct: where a chunk that only needs inflating lands whole and contiguous in the destination (nullptr: not so):
// inflated there, without the staging copy; returns "" with `a` left empty.
std::string unfilter(const Raw& c, const std::vector<H5Z_filter_t>& filters, std::size_t chunk_bytes, std::size_t es,
                     std::vector<unsigned char>& a, std::vector<unsigned char>& b, unsigned char* direct = nullptr) {
  bool only_deflate = true, any = false;
  for (std::size_t k = 0; k < filters.size(); ++k)
    if (!(c.mask & (1u << k))) {
      if (filters[k] == H5Z_FILTER_DEFLATE) any = true;
      else if (es > 1) only_deflate = false;  // shuffle of 1-byte elements is the identity
    }
  if (direct && only_deflate && any) {
    uLongf n = static_cast<uLongf>(chunk_bytes);
    const int rc = ::uncompress(direct, &n, c.data.data(), static_cast<uLong>(c.data.size()));
    if (rc != Z_OK || n != chunk_bytes)
      return "a gzip chunk that does not inflate to its " + std::to_string(chunk_bytes) + " bytes (zlib " +
             std::to_string(rc) + ", " + std::to_string(n) + " bytes)";
    a.clear();
    return "";
  }
  a.assign(c.data.begin(), c.data.end());
  for (std::size_t k = filters.size(); k-- > 0;) {
    if (c.mask & (1u << k)) continue;
    if (filters[k] == H5Z_FILTER_DEFLATE) {
      b.resize(chunk_bytes);
      uLongf n = static_cast<uLongf>(chunk_bytes);
      const int rc = ::uncompress(b.data(), &n, a.data(), static_cast<uLong>(a.size()));
      if (rc != Z_OK || n != chunk_bytes)
        return "a gzip chunk that does not inflate to its " + std::to_string(chunk_bytes) + " bytes (zlib " +
               std::to_string(rc) + ", " + std::to_string(n) + " bytes)";
      a.swap(b);
    } else {  // shuffle: byte k of every element together
      if (a.size() != chunk_bytes) return "a shuffled chunk of " + std::to_string(a.size()) + " bytes, not " + std::to_string(chunk_bytes);
      if (es > 1) {
        b.resize(chunk_bytes);
        const std::size_t n = chunk_bytes / es;
        for (std::size_t byte = 0; byte < es; ++byte) {
          const unsigned char* src = a.data() + byte * n;
          for (std::size_t i = 0; i < n; ++i) b[i * es + byte] = src[i];
        }
        a.swap(b);
      }
    }
  }
  if (a.size() != chunk_bytes) return "a chunk of " + std::to_string(a.size()) + " bytes, not " + std::to_string(chunk_bytes);
  return "";
}

}  // namespace

ChunkRead read_chunked_rows(hid_t ds, i64 row0, i64 row1, std::size_t es, void* dst, std::string& err, bool inflate,
                            std::size_t batch_bytes) {
  H dcpl(H5Dget_create_plist(ds), H5Pclose);
  if (!dcpl.ok() || H5Pget_layout(dcpl) != H5D_CHUNKED) return ChunkRead::unsupported;
  H type(H5Dget_type(ds), H5Tclose);
  if (!type.ok() || H5Tget_size(type) != es) return ChunkRead::unsupported;
  const H5T_class_t cls = H5Tget_class(type);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT && cls != H5T_OPAQUE) return ChunkRead::unsupported;
  if (es > 1 && cls != H5T_OPAQUE && H5Tget_order(type) != H5T_ORDER_LE) return ChunkRead::unsupported;
  const int nf = H5Pget_nfilters(dcpl);
  if (nf < 0 || nf > 8) return ChunkRead::unsupported;
  std::vector<H5Z_filter_t> filters;
  for (int k = 0; k < nf; ++k) {
    unsigned flags = 0, cd[8];
    std::size_t ncd = 8;
    unsigned fcfg = 0;
    const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(k), &flags, &ncd, cd, 0, nullptr, &fcfg);
    if (id != H5Z_FILTER_DEFLATE && id != H5Z_FILTER_SHUFFLE) return ChunkRead::unsupported;
    if (id == H5Z_FILTER_SHUFFLE && ncd >= 1 && cd[0] != es) return ChunkRead::unsupported;
    filters.push_back(id);
  }
  H space(H5Dget_space(ds), H5Sclose);
  const int rank = space.ok() ? H5Sget_simple_extent_ndims(space) : -1;
  if (rank < 1 || rank > 8) return ChunkRead::unsupported;
  hsize_t hd[8], hc[8];
  if (H5Sget_simple_extent_dims(space, hd, nullptr) < 0 || H5Pget_chunk(dcpl, rank, hc) != rank) return ChunkRead::unsupported;
  std::vector<i64> dims(hd, hd + rank), cd(hc, hc + rank);
  std::size_t chunk_bytes = es;
  for (int i = 0; i < rank; ++i) {
    if (cd[i] <= 0) return ChunkRead::unsupported;
    chunk_bytes *= static_cast<std::size_t>(cd[i]);
  }
  if (row1 <= row0) return ChunkRead::done;
  // The chunk grid over [row0, row1) x the other dims, in row-major order.
  std::vector<i64> lo(rank, 0), hi(rank);
  lo[0] = row0 / cd[0];
  hi[0] = (row1 - 1) / cd[0] + 1;
  for (int i = 1; i < rank; ++i) hi[i] = (dims[i] + cd[i] - 1) / cd[i];
  std::vector<i64> inner_dst(rank, 1);  // dst strides (elements)
  for (int i = rank - 2; i >= 0; --i) inner_dst[i] = inner_dst[i + 1] * dims[i + 1];
  auto* out = static_cast<unsigned char*>(dst);

  std::vector<Raw> batch;
  bool failed = false;
  auto flush = [&]() {
    const i64 n = static_cast<i64>(batch.size());
#pragma omp parallel
    {
      std::vector<unsigned char> a, b;
#pragma omp for schedule(dynamic, 1)
      for (i64 k = 0; k < n; ++k) {
        const Raw& c = batch[static_cast<std::size_t>(k)];
        // A chunk of whole rows inside [row0, row1) (every other dim exactly one chunk wide): contiguous in dst.
        bool whole = c.off[0] >= row0 && c.off[0] + cd[0] <= std::min(row1, dims[0]);
        for (int i = 1; i < rank && whole; ++i) whole = cd[i] == dims[i];
        unsigned char* direct = whole ? out + static_cast<std::size_t>(c.off[0] - row0) * (chunk_bytes / static_cast<std::size_t>(cd[0])) : nullptr;
        const std::string e = unfilter(c, filters, chunk_bytes, es, a, b, direct);
        if (!e.empty()) {
#pragma omp critical(dsa_chunk_err)
          if (!failed) failed = true, err = e;
          continue;
        }
        if (direct && a.empty()) continue;  // inflated in place
        // Scatter the chunk's part inside [row0, row1) x dims: runs along the last dim.
        std::vector<i64> ext(rank), first(rank, 0);
        for (int i = 0; i < rank; ++i) ext[i] = std::min(cd[i], dims[i] - c.off[i]);
        first[0] = std::max<i64>(0, row0 - c.off[0]);
        ext[0] = std::min(ext[0], row1 - c.off[0]);
        std::vector<i64> idx(first);
        const std::size_t run = static_cast<std::size_t>(rank == 1 ? ext[0] - first[0] : ext[rank - 1]) * es;
        if (rank == 1) {
          std::memcpy(out + static_cast<std::size_t>(c.off[0] + first[0] - row0) * es, a.data() + static_cast<std::size_t>(first[0]) * es, run);
          continue;
        }
        for (;;) {
          i64 src = 0, dpos = 0, cstride = 1;
          for (int i = rank - 1; i >= 0; --i) {
            src += idx[i] * cstride;
            cstride *= cd[i];
            dpos += (i == 0 ? c.off[0] + idx[0] - row0 : c.off[i] + idx[i]) * inner_dst[i];
          }
          std::memcpy(out + static_cast<std::size_t>(dpos) * es, a.data() + static_cast<std::size_t>(src) * es, run);
          int i = rank - 2;
          for (; i >= 0; --i) {
            if (++idx[i] < ext[i]) break;
            idx[i] = first[i];
          }
          if (i < 0) break;
        }
      }
    }
    batch.clear();
  };
  // Chunks are fetched (HDF5, one thread) in batches of ~batch_bytes; while the cores inflate one batch, a second thread
  // fetches the next (HDF5 is never called by two threads at once).
  std::vector<i64> g(lo);
  bool grid_done = false;
  std::string ferr;
  auto fetch_batch = [&](std::vector<Raw>& into) {
    std::size_t bytes = 0;
    while (!grid_done && bytes < batch_bytes) {
      Raw c;
      c.off.resize(rank);
      std::vector<hsize_t> off(rank);
      for (int i = 0; i < rank; ++i) off[i] = static_cast<hsize_t>(c.off[i] = g[i] * cd[i]);
      hsize_t stored = 0;
      if (H5Dget_chunk_storage_size(ds, off.data(), &stored) < 0 || stored == 0 || stored > chunk_bytes + chunk_bytes / 8 + (1u << 16)) {
        ferr = "a chunk at offset " + std::to_string(c.off[0]) + " with an unreadable or implausible stored size (" +
               std::to_string(stored) + " bytes)";
        return false;
      }
      c.data.resize(static_cast<std::size_t>(stored));
      if (H5Dread_chunk(ds, H5P_DEFAULT, off.data(), &c.mask, c.data.data()) < 0) {
        ferr = "an unreadable chunk at offset " + std::to_string(c.off[0]) + " (truncated or corrupt file?)";
        return false;
      }
      bytes += c.data.size() + chunk_bytes;
      if (inflate) into.push_back(std::move(c));
      int i = rank - 1;
      for (; i >= 0; --i) {
        if (++g[i] < hi[i]) break;
        g[i] = lo[i];
      }
      if (i < 0) grid_done = true;
    }
    return true;
  };
  if (!fetch_batch(batch)) {
    err = ferr;
    return ChunkRead::failed;
  }
  while (!batch.empty() || !grid_done) {
    std::vector<Raw> next;
    bool fetched = true;
    std::thread fetcher;
    if (!grid_done) fetcher = std::thread([&] { fetched = fetch_batch(next); });
    if (!batch.empty()) flush();
    if (fetcher.joinable()) fetcher.join();
    if (failed) return ChunkRead::failed;
    if (!fetched) {
      err = ferr;
      return ChunkRead::failed;
    }
    batch.swap(next);
  }
  return failed ? ChunkRead::failed : ChunkRead::done;
}

}  // namespace dsa::io
