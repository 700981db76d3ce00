#include "io/h5chunks.hpp"

#include <emmintrin.h>
#include <omp.h>
#include <zlib.h>
#ifdef DSA_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
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

// Inflates one zlib stream (HDF5's deflate filter) of exactly `want` bytes into dst; "" or what went wrong. With
// libdeflate (one decompressor per thread) where the build has it, else zlib's uncompress: both check the stream's
// Adler-32 and accept the same streams.
std::string inflate_exact(const unsigned char* src, std::size_t n, unsigned char* dst, std::size_t want) {
#ifdef DSA_HAVE_LIBDEFLATE
  thread_local std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> d(libdeflate_alloc_decompressor(),
                                                                                              libdeflate_free_decompressor);
  if (!d) return "out of memory for a gzip decompressor";
  std::size_t got = 0;
  const libdeflate_result rc = libdeflate_zlib_decompress(d.get(), src, n, dst, want, &got);
  if (rc != LIBDEFLATE_SUCCESS || got != want)
    return "a gzip chunk that does not inflate to its " + std::to_string(want) + " bytes (" +
           (rc == LIBDEFLATE_BAD_DATA ? std::string("corrupt stream") : rc == LIBDEFLATE_INSUFFICIENT_SPACE ? std::string("longer") : std::string("shorter")) +
           ", libdeflate)";
  return "";
#else
  uLongf got = static_cast<uLongf>(want);
  const int rc = ::uncompress(dst, &got, src, static_cast<uLong>(n));
  if (rc != Z_OK || got != want)
    return "a gzip chunk that does not inflate to its " + std::to_string(want) + " bytes (zlib " + std::to_string(rc) + ", " +
           std::to_string(got) + " bytes)";
  return "";
#endif
}

// HDF5's shuffle undone: plane k (byte k of every element, n bytes) back into the n elements of es bytes. Element
// sizes 2, 4 and 8 interleave 16 elements at a time with SSE2 byte / word / dword unpacks (x86-64 baseline).
void unshuffle(const unsigned char* src, unsigned char* dst, std::size_t n, std::size_t es) {
  std::size_t i = 0;
#if defined(__SSE2__)
  auto ld = [&](std::size_t plane) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + plane * n + i)); };
  auto st = [&](std::size_t k, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i * es + 16 * k), v); };
  if (es == 2) {
    for (; i + 16 <= n; i += 16) {
      const __m128i p0 = ld(0), p1 = ld(1);
      st(0, _mm_unpacklo_epi8(p0, p1)), st(1, _mm_unpackhi_epi8(p0, p1));
    }
  } else if (es == 4) {
    for (; i + 16 <= n; i += 16) {
      const __m128i p0 = ld(0), p1 = ld(1), p2 = ld(2), p3 = ld(3);
      const __m128i a0 = _mm_unpacklo_epi8(p0, p1), a1 = _mm_unpackhi_epi8(p0, p1);  // bytes 0,1 of elements 0-7 / 8-15
      const __m128i b0 = _mm_unpacklo_epi8(p2, p3), b1 = _mm_unpackhi_epi8(p2, p3);  // bytes 2,3
      st(0, _mm_unpacklo_epi16(a0, b0)), st(1, _mm_unpackhi_epi16(a0, b0));
      st(2, _mm_unpacklo_epi16(a1, b1)), st(3, _mm_unpackhi_epi16(a1, b1));
    }
  } else if (es == 8) {
    for (; i + 16 <= n; i += 16) {
      __m128i p[8];
      for (std::size_t k = 0; k < 8; ++k) p[k] = ld(k);
      __m128i a[8], c[8];
      for (std::size_t k = 0; k < 4; ++k) a[2 * k] = _mm_unpacklo_epi8(p[2 * k], p[2 * k + 1]), a[2 * k + 1] = _mm_unpackhi_epi8(p[2 * k], p[2 * k + 1]);
      // a[2k] / a[2k+1]: byte pair (2k, 2k+1) of elements 0-7 / 8-15; then pairs of pairs, then quads of pairs
      for (std::size_t h = 0; h < 2; ++h) {
        c[4 * h + 0] = _mm_unpacklo_epi16(a[h], a[2 + h]), c[4 * h + 1] = _mm_unpackhi_epi16(a[h], a[2 + h]);
        c[4 * h + 2] = _mm_unpacklo_epi16(a[4 + h], a[6 + h]), c[4 * h + 3] = _mm_unpackhi_epi16(a[4 + h], a[6 + h]);
      }
      // c[4h + 0/1]: bytes 0-3 of elements (8h + 0-3 / 8h + 4-7); c[4h + 2/3]: bytes 4-7 of the same
      for (std::size_t h = 0; h < 2; ++h) {
        st(4 * h + 0, _mm_unpacklo_epi32(c[4 * h], c[4 * h + 2])), st(4 * h + 1, _mm_unpackhi_epi32(c[4 * h], c[4 * h + 2]));
        st(4 * h + 2, _mm_unpacklo_epi32(c[4 * h + 1], c[4 * h + 3])), st(4 * h + 3, _mm_unpackhi_epi32(c[4 * h + 1], c[4 * h + 3]));
      }
    }
  }
#endif
  for (; i < n; ++i)
    for (std::size_t byte = 0; byte < es; ++byte) dst[i * es + byte] = src[byte * n + i];
}

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
    if (std::string e = inflate_exact(c.data.data(), c.data.size(), direct, chunk_bytes); !e.empty()) return e;
    a.clear();
    return "";
  }
  a.assign(c.data.begin(), c.data.end());
  for (std::size_t k = filters.size(); k-- > 0;) {
    if (c.mask & (1u << k)) continue;
    if (filters[k] == H5Z_FILTER_DEFLATE) {
      b.resize(chunk_bytes);
      if (std::string e = inflate_exact(a.data(), a.size(), b.data(), chunk_bytes); !e.empty()) return e;
      a.swap(b);
    } else {  // shuffle: byte k of every element together
      if (a.size() != chunk_bytes) return "a shuffled chunk of " + std::to_string(a.size()) + " bytes, not " + std::to_string(chunk_bytes);
      if (es > 1) {
        b.resize(chunk_bytes);
        unshuffle(a.data(), b.data(), chunk_bytes / es, es);
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
