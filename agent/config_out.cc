// The attested config to each --config-out.
#include "agent/config_out.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/files.h"

namespace rackgate::agent {

namespace {

// Why `path` cannot be written, as an errno: its directory's state, checked
// after the write failed (WriteFileAtomic reports text, not errno). 0 when
// the directory looks writable (the failure was something else).
int DirectoryErrno(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (::faccessat(AT_FDCWD, dir.c_str(), W_OK, AT_EACCESS) == 0) return 0;
  return errno;
}

}  // namespace

bool SkipConfigOut(size_t outputs_given, int error_number) {
  return outputs_given > 1 && (error_number == ENOENT || error_number == EROFS);
}

Result<std::vector<std::string>> WriteConfigOuts(const std::vector<std::string>& paths,
                                                 std::span<const uint8_t> data,
                                                 const std::function<void(const std::string&)>& note) {
  std::vector<std::string> written;
  std::string skipped;
  for (const auto& path : paths) {
    Status s = WriteFileAtomic(path, data);
    if (s.ok()) {
      written.push_back(path);
      continue;
    }
    const int err = DirectoryErrno(path);
    if (!SkipConfigOut(paths.size(), err)) return s;
    note("config-out skipped path=" + path + " why=\"" + std::strerror(err) + "\"");
    skipped += (skipped.empty() ? "" : ", ") + path;
  }
  if (written.empty()) {
    return Status::IoError("file_unwritable", "no --config-out could be written (" + skipped +
                                                  "): each directory is missing or read-only");
  }
  return written;
}

}  // namespace rackgate::agent
