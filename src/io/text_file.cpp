#include "io/text_file.hpp"

#include "io/cleanup.hpp"
#include "io/paths.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <filesystem>

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
  TempGuard guard(tmp.string());  // removed by the SIGINT/SIGTERM handler while it exists
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int e = errno;
    return path + ": cannot create a file in " + (p.has_parent_path() ? p.parent_path().string() : std::string(".")) +
           " (" + std::strerror(e) + ")";
  }
  auto fail = [&](const char* what, int e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return path + ": " + what + " (" + std::strerror(e) + "); nothing written";
  };
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write failed", n < 0 ? errno : ENOSPC);
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) {  // NFS and some full filesystems report the failure here
    const int e = errno;
    ::unlink(tmp.c_str());
    return path + ": write failed (" + std::strerror(e) + "); nothing written";
  }
  test_hold_before_rename(tmp.string());
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) {
    std::error_code ec2;
    fs::remove(tmp, ec2);
    return path + ": cannot rename the temp file into place: " + ec.message();
  }
  return "";
}

std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace dsa::io
