// Internal to rackgatectl's backup and restore (ctl/state/backup_*.cc,
// restore_archive.cc): what the writer and the reader of the archive share.
#ifndef RACKGATE_CTL_STATE_BACKUP_UTIL_H_
#define RACKGATE_CTL_STATE_BACKUP_UTIL_H_

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace rackgate::ctl::backup_internal {

constexpr size_t kMaxManifest = 4 << 20;
constexpr size_t kMaxConfig = 1 << 20;
// A file other than the store: certificates, keys, the config, EK anchors.
constexpr int64_t kMaxSmallFile = 16 << 20;
constexpr size_t kMaxFiles = 20000;
constexpr char kDefaultStateDir[] = "/var/lib/rackgate";
// The state directory's folders a backup holds whole (a CA rotation's next,
// previous and retired files with them).
constexpr const char* kStateDirs[] = {"ca", "tls", "cluster-ca"};

// backup_damaged (kCorruption) and backup_foreign (kUnsupported), each
// naming the fix.
Status Damaged(const std::string& what);
Status Foreign(const std::string& what);

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

// SHA-256 over data given in pieces; Hex() once, at the end.
class Sha256 {
 public:
  Sha256();
  void Update(const void* p, size_t n) { EVP_DigestUpdate(ctx_.get(), p, n); }
  std::string Hex();

 private:
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx_;
};

std::string Sha256Of(const std::vector<uint8_t>& data);
// "0600"
std::string ModeText(mode_t mode);
// `path` is `dir` or inside it.
bool Under(const std::string& path, const std::string& dir);
// rackgated's config as a JSON object: config_unreadable, config_invalid.
Result<nlohmann::json> ReadConfig(const std::string& path);

struct ArchiveWriteFree {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct ArchiveReadFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

}  // namespace rackgate::ctl::backup_internal

#endif  // RACKGATE_CTL_STATE_BACKUP_UTIL_H_
