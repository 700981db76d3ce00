#include "io/text_file.hpp"

#include "io/paths.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace dsa::io {

std::string write_text_atomic(const std::string& path, const std::string& text, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  OutputTarget t;
  if (auto e = resolve_output(path, inputs, t); !e.empty()) return e;
  if (t.direct) {
    std::ofstream f(t.path, std::ios::binary);
    f << text;
    f.flush();
    return f ? "" : path + ": write failed";
  }
  const fs::path p(t.path);
  const fs::path tmp = p.parent_path() / ("." + p.filename().string() + ".tmp." + std::to_string(::getpid()));
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return path + ": cannot write (directory missing or not writable)";
    f << text;
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return path + ": write failed (disk full?)";
    }
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return path + ": cannot rename the temp file into place: " + ec.message();
  }
  return "";
}

std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace dsa::io
