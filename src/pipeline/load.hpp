// Reading dumps validated against the stage table: io::read_file with the table's validator and attr defaults.
#pragma once
#include <string>

#include "io/h5io.hpp"

namespace dsa::pipeline {

// ReadOptions whose validator is validate_case (schema + the stage's parse) and whose defaults are the stage's.
io::ReadOptions read_options();
io::ReadResult load_file(const std::string& path, io::ReadOptions opt = read_options());

}  // namespace dsa::pipeline
