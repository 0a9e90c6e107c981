// Test helpers for storage/: scratch directories and ready-made rows.
#ifndef RACKGATE_STORAGE_TEST_UTIL_H_
#define RACKGATE_STORAGE_TEST_UTIL_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/test_util.h is internal to storage/ tests"
#endif

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "storage/store.h"

namespace rackgate::storage::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/rackgate-storage-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline Bytes B(std::string_view s) { return Bytes(s.begin(), s.end()); }

// An enrollment whose EK bytes are derived from `tag`, so that equal tags mean
// equal EKs.
inline Enrollment MakeEnrollment(const std::string& hostname, const std::string& ek_tag,
                                 const std::string& pool = "workers") {
  Enrollment e;
  e.hostname = hostname;
  e.pool = pool;
  e.ek_public = B("ekpub:" + ek_tag);
  e.ek_hash = B("ekhash:" + ek_tag);
  e.addresses = {{"InternalIP", "10.0.0.1"}, {"Hostname", hostname}};
  return e;
}

inline Actor Op(const std::string& why = "test") { return Actor{"uid:0(root)", why}; }

inline std::unique_ptr<Store> MustOpen(const std::string& path, const StoreOptions& options = {}) {
  auto s = Store::Open(path, options);
  if (!s.ok()) {
    ADD_FAILURE() << s.status().ToString();
    return nullptr;
  }
  return std::move(s).value();
}

}  // namespace rackgate::storage::testing

#endif  // RACKGATE_STORAGE_TEST_UTIL_H_
