// Atomic text output (JSON / JUnit reports, MANIFESTs): temp file in the target directory, then rename.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dsa::io {

// Writes `text` to `path` via a temp file in the same directory + rename (a FIFO or character device is written
// directly; see io/paths.hpp). Refuses a path that is one of `inputs`. Returns "" or an error message that names
// the path; never leaves the temp file behind.
std::string write_text_atomic(const std::string& path, const std::string& text, const std::vector<std::string>& inputs = {});

// JSON text of `j` (indent 2). Strings that are not valid UTF-8 (e.g. an HDF5 group name in Latin-1) are written
// with U+FFFD instead of throwing.
std::string json_text(const nlohmann::json& j);

}  // namespace dsa::io
