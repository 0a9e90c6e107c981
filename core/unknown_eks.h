// Unknown EKs that knocked recently (docs/observability.md): a bounded,
// in-memory table of the challenges refused because no machine has the EK,
// so that `rackgatectl status` can show a rack that boots before it was
// imported. Nothing here reaches the store: an unknown caller must not be
// able to grow the database.
#ifndef RACKGATE_CORE_UNKNOWN_EKS_H_
#define RACKGATE_CORE_UNKNOWN_EKS_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace rackgate::core {

struct UnknownEk {
  std::string ek_hash;  // hex SHA-256 of the EK's SubjectPublicKeyInfo
  int64_t first_seen = 0;
  int64_t last_seen = 0;
  uint64_t count = 0;
  std::string address;  // the latest caller's address, no port
  std::string reason;   // the latest refusal's reason code
  // From the EK certificate when one was sent (parsed, not trusted: it may
  // not chain to any root), RFC 2253, at most kMaxNameBytes each; "" when
  // none was sent or it did not parse.
  std::string cert_issuer;
  std::string cert_subject;
  // The EK public area (TPM2B_PUBLIC) the latest caller sent, already
  // parsed by the caller (at most wire::kMaxTpm2bPublic bytes): what
  // `rackgatectl ek-cert urls` derives the vendor's certificate URL from.
  std::vector<uint8_t> ek_public;
};

// Thread-safe. Least recently seen entries go first when full.
class UnknownEkTable {
 public:
  static constexpr size_t kDefaultCapacity = 256;
  static constexpr size_t kMaxNameBytes = 256;
  static constexpr size_t kMaxEkPublicBytes = 1024;

  explicit UnknownEkTable(size_t capacity = kDefaultCapacity);
  UnknownEkTable(const UnknownEkTable&) = delete;
  UnknownEkTable& operator=(const UnknownEkTable&) = delete;

  // One refused challenge. `cert_der` is the EK certificate the caller sent,
  // if any (its names are kept; the latest parsable one wins); `ek_public`
  // its EK public area (kept, the latest wins; at most kMaxEkPublicBytes, a
  // longer one is not kept).
  void Record(const std::string& ek_hash, const std::string& address, const std::string& reason,
              std::optional<std::span<const uint8_t>> cert_der, int64_t now,
              std::span<const uint8_t> ek_public = {});
  // Entries last seen at or after `since`, the most recent first.
  std::vector<UnknownEk> SeenSince(int64_t since) const;
  size_t size() const;

 private:
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<UnknownEk> entries_;  // most recently seen first
  std::unordered_map<std::string, std::list<UnknownEk>::iterator> index_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_UNKNOWN_EKS_H_
