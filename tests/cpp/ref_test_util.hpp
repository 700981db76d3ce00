// Shared by the reference tests: validate an in-memory case against the registry, then run its reference.
#pragma once
#include <doctest/doctest.h>

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

}  // namespace dsa::test
