// Test support: writes synthetic TCG event logs and the UEFI structures inside
// their events (UEFI_VARIABLE_DATA, EFI_SIGNATURE_LIST, UEFI_IMAGE_LOAD_EVENT),
// so tests can build exactly the log a case needs, including hostile ones.
// Linked into tests, benchmarks and fuzz seeds only, never into the product.
#ifndef RACKGATE_ATTEST_TESTING_EVENT_LOG_BUILDER_H_
#define RACKGATE_ATTEST_TESTING_EVENT_LOG_BUILDER_H_

#include <openssl/evp.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attest/boot_facts.h"
#include "attest/eventlog.h"
#include "attest/tpm.h"

namespace rackgate::testing {

using attest::Bytes;

inline Bytes Digest(uint16_t alg, const Bytes& data) {
  const EVP_MD* md = alg == attest::kAlgSha1 ? EVP_sha1() : EVP_sha256();
  uint8_t out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), out, &n, md, nullptr) != 1) {
    throw std::runtime_error("EVP_Digest failed");
  }
  return Bytes(out, out + n);
}

inline Bytes Str(std::string_view s) { return Bytes(s.begin(), s.end()); }

// Little-endian appenders.
inline void PutU16(Bytes* b, uint16_t v) {
  for (int i = 0; i < 2; ++i) b->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void PutU32(Bytes* b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void PutU64(Bytes* b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void Put(Bytes* b, const Bytes& v) { b->insert(b->end(), v.begin(), v.end()); }

inline Bytes Utf16(std::string_view ascii, bool nul = false) {
  Bytes out;
  for (char c : ascii) PutU16(&out, static_cast<uint8_t>(c));
  if (nul) PutU16(&out, 0);
  return out;
}

// UEFI_VARIABLE_DATA.
inline Bytes UefiVariable(const attest::EfiGuid& vendor, std::string_view name,
                          const Bytes& data) {
  Bytes b(vendor.bytes.begin(), vendor.bytes.end());
  PutU64(&b, name.size());
  PutU64(&b, data.size());
  Put(&b, Utf16(name));
  Put(&b, data);
  return b;
}

// One EFI_SIGNATURE_LIST of `sigs` (each owner || data, all of one size).
inline Bytes SignatureList(const attest::EfiGuid& type, const Bytes& header,
                           const std::vector<Bytes>& sigs) {
  const uint32_t sig_size = sigs.empty() ? 16 + 32 : static_cast<uint32_t>(sigs[0].size());
  Bytes b(type.bytes.begin(), type.bytes.end());
  PutU32(&b, static_cast<uint32_t>(28 + header.size() + sig_size * sigs.size()));
  PutU32(&b, static_cast<uint32_t>(header.size()));
  PutU32(&b, sig_size);
  Put(&b, header);
  for (const Bytes& s : sigs) Put(&b, s);
  return b;
}

// EFI_SIGNATURE_DATA for a SHA-256 entry: owner GUID (16 x `owner`) || hash.
inline Bytes Sha256Signature(uint8_t owner, uint8_t fill) {
  Bytes b(16 + 32, fill);
  std::fill(b.begin(), b.begin() + 16, owner);
  return b;
}

// UEFI_IMAGE_LOAD_EVENT whose device path is one media file-path node.
inline Bytes ImageLoadEvent(std::string_view path, uint64_t length = 4096) {
  Bytes node;
  node.push_back(0x04);  // media device
  node.push_back(0x04);  // file path
  const Bytes name = Utf16(path, true);
  PutU16(&node, static_cast<uint16_t>(4 + name.size()));
  Put(&node, name);
  node.insert(node.end(), {0x7f, 0xff, 0x04, 0x00});  // end of path
  Bytes b;
  PutU64(&b, 0x1000);
  PutU64(&b, length);
  PutU64(&b, 0);
  PutU64(&b, node.size());
  Put(&b, node);
  return b;
}

// A crypto-agile log with sha1 and sha256 banks.
class EventLogBuilder {
 public:
  EventLogBuilder() {
    Bytes spec = Str(std::string_view("Spec ID Event03\0", 16));
    PutU32(&spec, 0);  // platformClass
    spec.insert(spec.end(), {0, 2, 0, 2});  // version 2.0, errata 0, uintnSize 2
    PutU32(&spec, 2);
    PutU16(&spec, attest::kAlgSha1);
    PutU16(&spec, 20);
    PutU16(&spec, attest::kAlgSha256);
    PutU16(&spec, 32);
    spec.push_back(0);  // vendorInfoSize
    PutU32(&log_, 0);
    PutU32(&log_, attest::kEvNoAction);
    log_.insert(log_.end(), 20, 0);
    PutU32(&log_, static_cast<uint32_t>(spec.size()));
    Put(&log_, spec);
  }

  // An event whose digests are H(measured) and whose data is `data`.
  EventLogBuilder& Measure(uint32_t pcr, uint32_t type, const Bytes& measured, const Bytes& data) {
    return Raw(pcr, type,
               {{attest::kAlgSha1, Digest(attest::kAlgSha1, measured)},
                {attest::kAlgSha256, Digest(attest::kAlgSha256, measured)}},
               data);
  }
  // An event whose data is covered by its digests.
  EventLogBuilder& Add(uint32_t pcr, uint32_t type, const Bytes& data) {
    return Measure(pcr, type, data, data);
  }
  EventLogBuilder& Separator(uint32_t pcr, uint32_t value = 0) {
    Bytes v;
    PutU32(&v, value);
    return Add(pcr, attest::kEvSeparator, v);
  }
  EventLogBuilder& Raw(uint32_t pcr, uint32_t type,
                       const std::vector<std::pair<uint16_t, Bytes>>& digests, const Bytes& data) {
    PutU32(&log_, pcr);
    PutU32(&log_, type);
    PutU32(&log_, static_cast<uint32_t>(digests.size()));
    for (const auto& [alg, d] : digests) {
      PutU16(&log_, alg);
      Put(&log_, d);
    }
    PutU32(&log_, static_cast<uint32_t>(data.size()));
    Put(&log_, data);
    return *this;
  }

  // The usual Secure Boot configuration on PCR 7, without the separator.
  EventLogBuilder& SecureBootConfig(uint8_t secure_boot) {
    Add(7, attest::kEvEfiVariableDriverConfig,
        UefiVariable(attest::kEfiGlobalVariableGuid, "SecureBoot", Bytes{secure_boot}));
    Add(7, attest::kEvEfiVariableDriverConfig,
        UefiVariable(attest::kEfiGlobalVariableGuid, "PK",
                     SignatureList(attest::kEfiCertSha256Guid, {}, {Sha256Signature(1, 0xaa)})));
    Add(7, attest::kEvEfiVariableDriverConfig,
        UefiVariable(attest::kEfiGlobalVariableGuid, "KEK",
                     SignatureList(attest::kEfiCertSha256Guid, {}, {Sha256Signature(1, 0xbb)})));
    Add(7, attest::kEvEfiVariableDriverConfig,
        UefiVariable(attest::kEfiImageSecurityDatabaseGuid, "db",
                     SignatureList(attest::kEfiCertSha256Guid, {},
                                   {Sha256Signature(2, 0xcc), Sha256Signature(2, 0xcd)})));
    return Add(7, attest::kEvEfiVariableDriverConfig,
               UefiVariable(attest::kEfiImageSecurityDatabaseGuid, "dbx",
                            SignatureList(attest::kEfiCertSha256Guid, {}, {Sha256Signature(3, 0xdd)})));
  }

  const Bytes& bytes() const { return log_; }

  // The events of `log` after its Spec ID event, written again in order,
  // each passed through `edit` first: it may change an event's data and
  // digests, or return false to leave the event out. For variants of a real
  // log (sha1 and sha256 banks, as this builder declares) that a test makes
  // the way firmware and boot loaders would have measured them.
  template <typename Edit>
  EventLogBuilder& CopyOf(const attest::EventLog& log, const Edit& edit) {
    for (attest::Event ev : log.events) {
      if (ev.index == 0 && log.crypto_agile) continue;  // the Spec ID event: ours
      if (!edit(ev)) continue;
      std::vector<std::pair<uint16_t, Bytes>> digests(ev.digests.begin(), ev.digests.end());
      Raw(ev.pcr, ev.type, digests, ev.data);
    }
    return *this;
  }

 private:
  Bytes log_;
};

// `log` written again with its event `index` logged as `type` with `data`,
// its digests those of `measured` when given (the file or code a machine
// really measured there), else as logged: the log a machine forges to pass
// a measurement off as another kind of event.
inline Bytes Relabelled(const attest::EventLog& log, uint32_t index, uint32_t type,
                        const Bytes& data, const std::optional<Bytes>& measured = std::nullopt) {
  EventLogBuilder b;
  b.CopyOf(log, [&](attest::Event& ev) {
    if (ev.index != index) return true;
    ev.type = type;
    ev.data = data;
    if (measured) {
      for (auto& [alg, digest] : ev.digests) digest = Digest(alg, *measured);
    }
    return true;
  });
  return b.bytes();
}

}  // namespace rackgate::testing

#endif  // RACKGATE_ATTEST_TESTING_EVENT_LOG_BUILDER_H_
