// Shared by the reference tests: validate an in-memory case against the registry, then run its reference.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda.hpp"
#include "pipeline/backend_diff.hpp"
#include "pipeline/golden.hpp"
#include "stage/stage.hpp"

namespace dsa::test {

inline Expected run_reference(Case c, int threads = 1) {
  apply_attr_defaults(c);
  const auto probs = validate_case(c);
  for (const auto& p : probs) MESSAGE(p.str());
  REQUIRE(probs.empty());
  RefOptions o;
  o.threads = threads;
  return dsa::run_reference(c, o);
}

// Every spec of `stage` given plus its goldens and selftest cases, seeds 1 and 2: body(case, params, options) -- the
// stage's scorer on one thread, say -- equals the CPU reference (all threads); so does the CUDA backend when a device
// is present.
template <class Params, class Body>
void check_thread_and_gpu_agreement(const std::string& stage, std::vector<golden::GoldenSpec> specs, Body body) {
  for (const Stage& s : stages())
    if (s.name == stage)
      for (const auto* v : {&s.goldens, &s.selftest}) specs.insert(specs.end(), v->begin(), v->end());
  const bool gpu = cuda::device_problem().empty();
  for (const auto& spec : specs)
    for (std::uint64_t seed : {1u, 2u}) {
      const Case c = golden::make_case(spec, seed, 0);
      BoundCase b;
      REQUIRE(validate_case(c, true, &b).empty());
      const auto& p = dynamic_cast<const Params&>(*b.params);
      const Expected cpu = dsa::run_reference(b, {}, Backend::cpu);
      const auto d = pipeline::diff_expected(cpu, body(c, p, RefOptions{}), "cpu", "body");
      INFO(spec.name << " seed " << seed << (d.empty() ? "" : ": " + d[0].tensor + ": " + d[0].message));
      CHECK(d.empty());
      if (gpu) CHECK(pipeline::diff_expected(cpu, dsa::run_reference(b, {}, Backend::cuda), "cpu", "cuda").empty());
    }
}

}  // namespace dsa::test
