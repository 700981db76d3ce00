#include "io/paths.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace dsa::io {

namespace fs = std::filesystem;

namespace {

std::string kind_of(const fs::file_status& s) {
  switch (s.type()) {
    case fs::file_type::regular: return "a regular file";
    case fs::file_type::directory: return "a directory";
    case fs::file_type::symlink: return "a symlink";
    case fs::file_type::block: return "a block device";
    case fs::file_type::character: return "a character device";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::not_found: return "nothing (no such file)";
    default: return "an unknown kind of file";
  }
}

// The status of `p` with symlinks followed; a loop or an unreadable link is reported in `err`.
fs::file_status follow(const std::string& p, std::string& err) {
  std::error_code ec;
  const fs::file_status s = fs::status(p, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    err = ec == std::errc::too_many_symbolic_link_levels ? "a symlink loop" : "an unreadable path (" + ec.message() + ")";
    return fs::file_status(fs::file_type::unknown);
  }
  if (ec || s.type() == fs::file_type::not_found) {
    std::error_code ec2;
    if (fs::is_symlink(fs::symlink_status(p, ec2))) err = "a dangling symlink";
  }
  return s;
}

}  // namespace

std::string input_file_problem(const std::string& path) {
  std::string err;
  const fs::file_status s = follow(path, err);
  if (!err.empty()) return err;
  if (s.type() == fs::file_type::not_found) return "no such file";
  if (s.type() != fs::file_type::regular) return kind_of(s) + ", not a regular file";
  if (::access(path.c_str(), R_OK) != 0) return "an unreadable file (" + std::string(std::strerror(errno)) + ")";
  return "";
}

std::string resolve_output(const std::string& path, const std::vector<std::string>& inputs, OutputTarget& t) {
  if (path.empty()) return "an empty output path";
  std::string err;
  const fs::file_status s = follow(path, err);
  if (!err.empty()) return path + ": " + err + " (refusing to write there)";
  std::error_code ec;
  t = OutputTarget{};
  if (s.type() == fs::file_type::not_found) {
    // A new file (or the target of a dangling symlink, which we refuse above). Its directory must exist.
    const fs::path p(path);
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    if (!fs::is_directory(dir, ec)) return path + ": no such directory " + dir.string();
    t.path = path;
    return "";
  }
  for (const auto& in : inputs) {
    std::error_code e2;
    if (fs::exists(in, e2) && fs::equivalent(path, in, e2)) return path + ": is the input file " + in + " (refusing to overwrite an input)";
  }
  switch (s.type()) {
    case fs::file_type::regular: {
      const fs::path real = fs::canonical(path, ec);  // write the link's target, keep the link
      if (ec) return path + ": cannot resolve the path (" + ec.message() + ")";
      t.path = real.string();
      return "";
    }
    case fs::file_type::fifo:
    case fs::file_type::character:
      t.path = path;
      t.direct = true;
      return "";
    default: return path + ": " + kind_of(s) + ", not a file to write a report to";
  }
}

}  // namespace dsa::io
