// Finds and executes rackgatectl-state with rackgatectl's argv.
#include "ctl/state_exec.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "ctl/offline.h"

namespace rackgate::ctl {

namespace {

bool IsExecutableFile(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string FindStateBinary() {
  // SECURITY: /proc/self/exe is the resolved path of the running binary, so a
  // symlink to rackgatectl in a directory someone else writes does not make
  // rackgatectl run that directory's rackgatectl-state: only the directory
  // the real binary is in (root's /usr/bin once installed) is searched.
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::string beside = (self.parent_path() / kStateBinary).string();
    if (IsExecutableFile(beside)) return beside;
  }
  const std::string installed = std::string(RACKGATE_LIBEXEC_DIR) + "/" + kStateBinary;
  if (IsExecutableFile(installed)) return installed;
  return "";
}

int ExecStateBinary(char** argv) {
  const std::string path = FindStateBinary();
  if (path.empty()) {
    std::fprintf(stderr, "rackgatectl: %s not found next to rackgatectl nor in %s\n", kStateBinary,
                 RACKGATE_LIBEXEC_DIR);
    return kExitUnusable;
  }
  ::execv(path.c_str(), argv);
  std::fprintf(stderr, "rackgatectl: cannot run %s: %s\n", path.c_str(), std::strerror(errno));
  return kExitUnusable;
}

}  // namespace rackgate::ctl
