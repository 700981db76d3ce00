// The golden catalogue (every stage's Stage::goldens, in table order) and the generator lookup.
// `dsa-check golden --list` prints it; `dsa-check golden --case NAME` writes a case.
#pragma once
#include <string>
#include <vector>

#include "stage/stage.hpp"

namespace dsa::golden {

const std::vector<GoldenSpec>& catalogue();
const GoldenSpec* find_spec(const std::string& name);
const Generator* find_generator(const std::string& name);
const Mutant* find_mutant(const std::string& name);  // across every stage's selftest mutants

// One-line summaries for --list.
std::string shapes_str(const GoldenSpec& s);   // "T=64 K=512 lengths=[0,1,...]"
std::string options_str(const GoldenSpec& s);  // "scale_fmt=ue8m0 clean_logits=1"

}  // namespace dsa::golden
