#include "io/text_file.hpp"

#include "io/paths.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <fstream>

namespace dsa::io {

std::string write_text_atomic(const std::string& path, const std::string& text, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  OutputTarget t;
  if (auto e = resolve_output(path, inputs, t); !e.empty()) return e;
  if (t.direct) {  // FIFO / character device: write through, never block on a FIFO nobody reads
    const int fd = ::open(t.path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
      return path + (errno == ENXIO ? ": a FIFO with no reader (refusing to block)" : ": cannot open for writing (" + std::string(std::strerror(errno)) + ")");
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        return path + ": write failed (" + std::string(std::strerror(errno)) + ")";
      }
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    return "";
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
