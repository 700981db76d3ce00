// indexer.kcache_store — write k_fp8 + k_scale into the paged indexer K cache (spec v32 §3.4), bit-exact:
// kv_cache = copy of kv_cache_in; for each token t with slot = slot_mapping[t] >= 0: page = slot / page_size,
// offset = slot % page_size; the codes and the raw fp32 scale bytes go where layout `indexer_kcache_planar`
// (src/layouts/indexer_kcache.hpp) puts them. slot -1 = padded token, skipped. parse() rejects out-of-range and
// duplicate slots, so every token writes distinct bytes and the parallel store is order-independent.
#pragma once
#include <memory>
#include <vector>

#include "layouts/indexer_kcache.hpp"
#include "stage/stage.hpp"

namespace dsa::indexer::kcache_store {

struct Params : dsa::Params {
  layouts::IndexerKCache layout;  // page_size and head_dim of this cache
};

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the store on the GPU
#endif
// The Expected of a stored cache (cpu.cpp; both backends); writer[slot] = the k token stored into the slot (-1: none),
// for describe.
Expected expected_of(Tensor cache, const layouts::IndexerKCache& layout, std::shared_ptr<std::vector<std::int64_t>> writer);
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::indexer::kcache_store
