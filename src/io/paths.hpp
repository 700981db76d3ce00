// Where files may be read from and written to. Inputs are never modified: an output that resolves to an input (same
// device and inode, through symlinks or hard links) is refused. An output path is written through a temp file in the
// same directory and renamed into place only when it names a regular file or nothing yet; a symlink is followed (the
// link stays), a FIFO or character device (e.g. /dev/stdout, /dev/null) is written through directly, anything else
// (a directory, a socket, a symlink loop, a missing directory) is refused. Every message names the path.
#pragma once
#include <string>
#include <vector>

namespace dsa::io {

// "" when `path` is a readable regular file (symlinks followed), else what it is ("a FIFO", "a symlink loop", ...).
std::string input_file_problem(const std::string& path);

struct OutputTarget {
  std::string path;        // where to write (symlinks resolved)
  bool direct = false;     // a FIFO / character device: open and write, no temp file, no rename
};
// Resolves an output path against the inputs of the same command. Returns "" and fills `t`, or the problem.
std::string resolve_output(const std::string& path, const std::vector<std::string>& inputs, OutputTarget& t);

}  // namespace dsa::io
