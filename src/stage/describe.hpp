// Machine-readable description of the registry (`dsa-check stages --json`): the schema users script against.
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>

namespace dsa {
nlohmann::json stages_json();
void print_stages_text(std::ostream& os);
}  // namespace dsa
