// What the backup's writer and reader share (ctl/state/backup_util.h).
#include "ctl/state/backup_util.h"

#include <cstdio>
#include <new>

#include "base/files.h"
#include "base/hex.h"

namespace rackgate::ctl::backup_internal {

Status Damaged(const std::string& what) {
  return Status::Corruption("backup_damaged",
                            what + ": the archive is damaged; nothing was written. Take the backup's other copy, "
                                   "or a newer backup (`rackgatectl backup --out FILE`)");
}

Status Foreign(const std::string& what) {
  return Status::Unsupported("backup_foreign", what + ": give an archive `rackgatectl backup` wrote");
}

// ---------------------------------------------------------------- hashing --

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
}

std::string Sha256::Hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx_.get(), md, &n);
  return hex::Encode(std::span<const uint8_t>(md, n));
}

std::string Sha256Of(const std::vector<uint8_t>& data) {
  Sha256 h;
  h.Update(data.data(), data.size());
  return h.Hex();
}

std::string ModeText(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

bool Under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

Result<nlohmann::json> ReadConfig(const std::string& path) {
  auto bytes = ReadFile(path, kMaxConfig);
  if (!bytes.ok()) return Status::IoError("config_unreadable", "cannot read config file " + path + ": " +
                                                                   bytes.status().message());
  nlohmann::json config = nlohmann::json::parse(bytes->begin(), bytes->end(), nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    return Status::InvalidArgument("config_invalid", path + " is not a JSON object");
  }
  return config;
}

}  // namespace rackgate::ctl::backup_internal
