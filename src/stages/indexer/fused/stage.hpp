// indexer.fused — a fused lightning indexer: q, the paged fp8 K cache, head gates and context lengths in, the top-k
// key positions out, the logits never materialised (issue #17 item 3; sglang / vLLM fused decode indexers, FlashMLA-
// style "indexer + top-k" kernels). The reference is indexer.logits_paged's exact logits over the same inputs (its
// CPU or CUDA implementation) followed by the canonical top-k of indexer.topk. The kernel's selection is judged as a
// tie-aware set (topk_set) whose per-candidate band is the logits' own bound: rtol * M + one ulp of the logits dtype
// under the logits' tolerance policy (sm90-fp8, bf16-logits); with attr kernel (a profile that emulates the logits,
// e.g. deepgemm-sm90) the scores are the emulated kernel logits and the band is exact (bound 0).
// Row r = b*next_n + t; candidate p = key position p of request b, p < n_r (the paged stage's valid columns);
// emitted indices are key positions (relative index base), -1 padded.
#pragma once
#include <memory>
#include <string>

#include "stage/stage.hpp"

namespace dsa::indexer::fused {

struct Params : dsa::Params {
  std::int64_t k = 2048;
  bool sorted = false;
  bool fast_path = true;
  const Profile* logits_profile = nullptr;  // attr kernel: a profile emulating the logits (exact band on its logits)
  std::string band_policy = "sm90-fp8";  // tolerance policy of the logits the band comes from
  std::shared_ptr<const Case> logits_case;  // the same tensors as an indexer.logits_paged case (clean_logits 0)
};

// The indexer.logits_paged case over c's tensors (shared storage): attrs copied but the top-k ones, clean_logits 0.
Case logits_case(const Case& c);
// The reference on a backend (cpu.cpp: the logits on it, the top-k assembly on the host).
Expected reference(const Case& c, const Params& p, const RefOptions& opt, Backend backend);
Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the logits on the GPU
#endif
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::indexer::fused
