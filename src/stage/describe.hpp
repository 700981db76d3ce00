// Machine-readable description of the registry (`dsa-check stages --json`): the schema users script against.
#pragma once
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include <ostream>

namespace dsa {
nlohmann::json stages_json();
// Every stage (and the profiles, layouts), or only the stages named in `only` (their schema and formula).
void print_stages_text(std::ostream& os, const std::vector<std::string>& only = {});
}  // namespace dsa
