// Readers for the neutral (non-schema) DeepGEMM sm90 measurement files in ../shared/data/
// (layout: ../shared/specs/sm90_fp8_wgmma.md §3). They turn real kernel output into schema-v1 cases so the
// registered references and `dsa-check check` can judge it. Test support only (not in the tool). HDF5 C API; every
// error names file, group, dataset.
#pragma once
#include <string>
#include <vector>

#include "tensor/case.hpp"

namespace dsa::io {

// deepgemm_sm90_logits.h5 -> one case per group and logits dtype:
//   ragged_* groups -> stage indexer.logits_ragged, cases "<group>" (float32) and "<group>_bf16"
//   paged_*  groups -> stage indexer.logits_paged,  case  "<group>" (float32, 2-D context_lens)
// outputs/logits = the real DeepGEMM output; attr kernel = "deepgemm-sm90". Throws std::runtime_error.
std::vector<Case> import_deepgemm_sm90_logits(const std::string& path);

// sm90_fp8_wgmma_probe.h5: isolated WGMMA dot products.
struct Sm90Probe {
  Tensor q_rows;  // u8 [512, 128] e4m3 codes
  Tensor k;       // u8 [1024, 128]
  Tensor logits;  // f32 [1024, 1024]: row 2i = relu(s(q_i, k_j)), row 2i+1 = relu(s(-q_i, k_j))
};
Sm90Probe read_sm90_probe(const std::string& path);

}  // namespace dsa::io
