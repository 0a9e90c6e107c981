// TCG PC Client event log parsing, replay and comparison with quoted PCRs.
#include "attest/eventlog.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "base/byte_reader.h"
#include "attest/digest.h"
#include "base/ossl.h"

namespace rackgate::attest {

namespace {

// TCG_EfiSpecIDEvent.signature, NUL included.
constexpr std::string_view kSpecIdSignature{"Spec ID Event03\0", 16};
// The data of the StartupLocality EV_NO_ACTION event: this signature, NUL
// included, then one locality byte.
constexpr std::string_view kStartupLocalitySignature{"StartupLocality\0", 16};
constexpr size_t kSha1DigestSize = 20;
// A TPM 2.0 locality is 0..4; the H-CRTM sequence runs at locality 4.
constexpr uint8_t kMaxLocality = 4;
constexpr uint8_t kHcrtmLocality = 4;

bool HasPrefix(std::span<const uint8_t> data, std::string_view prefix) {
  return data.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), data.begin(),
                    [](char a, uint8_t b) { return static_cast<uint8_t>(a) == b; });
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Parse state: the reader over the whole log plus what an error message needs.
class Parser {
 public:
  explicit Parser(std::span<const uint8_t> log) : log_size_(log.size()), r_(log) {}

  Result<EventLog> Parse();

 private:
  size_t Offset() const { return log_size_ - r_.remaining(); }
  Status Fail(const char* reason, const std::string& what) const {  // reason-helper: InvalidArgument
    return Status::InvalidArgument(
        reason, "event " + std::to_string(index_) + " at offset " +
                    Hex(event_offset_) + ": " + what);
  }
  Status Truncated(const char* field) const {
    return Fail("eventlog_truncated", std::string("log ends inside ") + field);
  }

  Status BeginEvent();
  Status ReadPcrAndType(Event* ev);
  Status ReadEventData(Event* ev);
  Status ReadTcgPcrEvent(Event* ev);
  Status ReadTcgPcrEvent2(Event* ev);
  Status ParseTcgEfiSpecIdEvent(const Event& ev, TcgEfiSpecIdEvent* out);

  const size_t log_size_;
  ByteReader r_;
  uint32_t index_ = 0;        // of the event being read
  size_t event_offset_ = 0;   // of the event being read
  // Declared digest size per algorithm (crypto-agile logs).
  std::map<uint16_t, uint16_t> digest_sizes_;
};

Status Parser::BeginEvent() {
  event_offset_ = Offset();
  // The count includes the event about to be read.
  if (index_ >= kMaxEvents) {
    return Fail("eventlog_too_many_events",
                "more than " + std::to_string(kMaxEvents) + " events");
  }
  return Status::Ok();
}

Status Parser::ReadPcrAndType(Event* ev) {
  ev->index = index_;
  ev->offset = event_offset_;
  if (!r_.ReadU32LE(&ev->pcr)) return Truncated("pcrIndex");
  if (!r_.ReadU32LE(&ev->type)) return Truncated("eventType");
  // EV_NO_ACTION events extend nothing, and Windows logs some on PCR
  // 0xffffffff (WBCL trust-point data): any index passes through.
  if (ev->type != kEvNoAction && ev->pcr > kMaxPcrIndex) {
    return Fail("eventlog_bad_pcr_index",
                "pcrIndex " + std::to_string(ev->pcr) + " is above " +
                    std::to_string(kMaxPcrIndex));
  }
  return Status::Ok();
}

Status Parser::ReadEventData(Event* ev) {
  uint32_t size;
  if (!r_.ReadU32LE(&size)) return Truncated("eventSize");
  // SECURITY: the size is checked against the limit and against the bytes
  // that remain before anything is copied.
  if (size > kMaxEventDataSize) {
    return Fail("eventlog_event_too_large",
                "eventSize " + std::to_string(size) + " is above " +
                    std::to_string(kMaxEventDataSize));
  }
  std::span<const uint8_t> data;
  if (!r_.ReadSpan(size, &data)) return Truncated("event data");
  ev->data.assign(data.begin(), data.end());
  return Status::Ok();
}

// TCG_PCR_EVENT: the SHA-1 log's event, and the crypto-agile log's first.
Status Parser::ReadTcgPcrEvent(Event* ev) {
  if (Status s = ReadPcrAndType(ev); !s.ok()) return s;
  std::span<const uint8_t> digest;
  if (!r_.ReadSpan(kSha1DigestSize, &digest)) return Truncated("digest");
  ev->digests[kAlgSha1].assign(digest.begin(), digest.end());
  return ReadEventData(ev);
}

// TCG_PCR_EVENT2, with digest sizes from the Spec ID event.
Status Parser::ReadTcgPcrEvent2(Event* ev) {
  if (Status s = ReadPcrAndType(ev); !s.ok()) return s;
  uint32_t count;
  if (!r_.ReadU32LE(&count)) return Truncated("digest count");
  // SECURITY: at most one digest per declared bank, so a huge count costs
  // nothing and the loop below is bounded by kMaxBanks.
  if (count > digest_sizes_.size()) {
    return Fail("eventlog_bad_digest_count",
                "digest count " + std::to_string(count) + " is above the " +
                    std::to_string(digest_sizes_.size()) + " declared banks");
  }
  for (uint32_t i = 0; i < count; ++i) {
    uint16_t alg;
    if (!r_.ReadU16LE(&alg)) return Truncated("digest algorithm");
    auto it = digest_sizes_.find(alg);
    // SECURITY: a digest's size comes only from the Spec ID event; an
    // undeclared algorithm has no size, so the rest of the log is unreadable.
    if (it == digest_sizes_.end()) {
      return Fail("eventlog_unknown_digest_alg",
                  "digest algorithm " + HashAlgName(alg) +
                      " was not declared by the Spec ID event");
    }
    std::span<const uint8_t> digest;
    if (!r_.ReadSpan(it->second, &digest)) return Truncated("digest");
    auto [slot, inserted] = ev->digests.try_emplace(alg);
    if (!inserted) {
      return Fail("eventlog_duplicate_digest_alg",
                  "two " + HashAlgName(alg) + " digests");
    }
    slot->second.assign(digest.begin(), digest.end());
  }
  return ReadEventData(ev);
}

Status Parser::ParseTcgEfiSpecIdEvent(const Event& ev, TcgEfiSpecIdEvent* out) {
  auto bad = [this](const std::string& what) {
    return Fail("eventlog_bad_spec_id", what);
  };
  if (ev.pcr != 0) return bad("Spec ID event on PCR " + std::to_string(ev.pcr));
  const Bytes& digest = ev.digests.at(kAlgSha1);
  if (std::any_of(digest.begin(), digest.end(), [](uint8_t b) { return b != 0; })) {
    return bad("Spec ID event with a non-zero digest");
  }

  ByteReader r(ev.data);
  std::span<const uint8_t> signature;
  uint32_t count;
  if (!r.ReadSpan(kSpecIdSignature.size(), &signature) ||
      !HasPrefix(signature, kSpecIdSignature) ||
      !r.ReadU32LE(&out->platform_class) || !r.ReadU8(&out->spec_version_minor) ||
      !r.ReadU8(&out->spec_version_major) || !r.ReadU8(&out->spec_errata) ||
      !r.ReadU8(&out->uintn_size) || !r.ReadU32LE(&count)) {
    return bad("short or malformed TCG_EfiSpecIDEvent header");
  }
  if (count == 0 || count > kMaxBanks) {
    return bad("numberOfAlgorithms " + std::to_string(count) + " is not in 1.." +
               std::to_string(kMaxBanks));
  }
  for (uint32_t i = 0; i < count; ++i) {
    SpecIdAlgorithm a;
    if (!r.ReadU16LE(&a.alg) || !r.ReadU16LE(&a.digest_size)) {
      return bad("short digestSizes array");
    }
    if (a.digest_size == 0 || a.digest_size > kMaxDigestSize) {
      return bad("digest size " + std::to_string(a.digest_size) + " for " +
                 HashAlgName(a.alg));
    }
    // A known algorithm must have its own size: a wrong one would shift
    // every later field of the log.
    const size_t known = DigestSize(a.alg);
    if (known != 0 && known != a.digest_size) {
      return bad("digest size " + std::to_string(a.digest_size) + " for " +
                 HashAlgName(a.alg) + ", which has " + std::to_string(known));
    }
    if (!digest_sizes_.emplace(a.alg, a.digest_size).second) {
      return bad("algorithm " + HashAlgName(a.alg) + " declared twice");
    }
    out->algorithms.push_back(a);
  }
  uint8_t vendor_size;
  std::span<const uint8_t> vendor;
  if (!r.ReadU8(&vendor_size) || !r.ReadSpan(vendor_size, &vendor)) {
    return bad("short vendorInfo");
  }
  out->vendor_info.assign(vendor.begin(), vendor.end());
  if (!r.empty()) {
    return bad(std::to_string(r.remaining()) + " bytes after vendorInfo");
  }
  return Status::Ok();
}

Result<EventLog> Parser::Parse() {
  if (log_size_ > kMaxEventLogSize) {
    return Status::InvalidArgument(
        "eventlog_too_large", "event log of " + std::to_string(log_size_) +
                                  " bytes is above " +
                                  std::to_string(kMaxEventLogSize));
  }
  if (log_size_ == 0) {
    return Status::InvalidArgument("eventlog_empty", "event log is empty");
  }

  EventLog log;
  // The first event is always a TCG_PCR_EVENT.
  {
    if (Status s = BeginEvent(); !s.ok()) return s;
    Event first;
    if (Status s = ReadTcgPcrEvent(&first); !s.ok()) return s;
    // A signature prefix without its NUL still claims to be a Spec ID event:
    // it is judged as one (and refused), never silently read as a SHA-1 log.
    log.crypto_agile = first.type == kEvNoAction &&
                       HasPrefix(first.data, kSpecIdSignature.substr(0, 15));
    if (log.crypto_agile) {
      if (Status s = ParseTcgEfiSpecIdEvent(first, &log.spec_id); !s.ok()) {
        return s;
      }
      for (const SpecIdAlgorithm& a : log.spec_id.algorithms) {
        log.banks.push_back(a.alg);
      }
    } else {
      log.banks.push_back(kAlgSha1);
    }
    log.events.push_back(std::move(first));
    ++index_;
  }

  while (!r_.empty()) {
    if (Status s = BeginEvent(); !s.ok()) return s;
    Event ev;
    Status s = log.crypto_agile ? ReadTcgPcrEvent2(&ev) : ReadTcgPcrEvent(&ev);
    if (!s.ok()) return s;
    log.events.push_back(std::move(ev));
    ++index_;
  }
  return log;
}

// --- Replay ---------------------------------------------------------------

// *pcr := H(*pcr || digest). One context serves a whole replay: a fresh one
// per extend would cost more than the hashing.
void Extend(EVP_MD_CTX* ctx, const EVP_MD* md, Bytes* pcr, const Bytes& digest) {
  unsigned int len = 0;
  uint8_t out[EVP_MAX_MD_SIZE];
  if (EVP_DigestInit_ex2(ctx, md, nullptr) != 1 ||
      EVP_DigestUpdate(ctx, pcr->data(), pcr->size()) != 1 ||
      EVP_DigestUpdate(ctx, digest.data(), digest.size()) != 1 ||
      EVP_DigestFinal_ex(ctx, out, &len) != 1 || len != pcr->size()) {
    throw std::runtime_error("PCR extend failed: " + ossl::DrainErrors());
  }
  pcr->assign(out, out + len);
}

struct ReplayBank {
  const EVP_MD* md = nullptr;
  size_t size = 0;
  bool complete = true;  // every extending event carried this bank's digest
  PcrBank pcrs;
};

}  // namespace

std::string EventTypeName(uint32_t type) {
  switch (type) {
    case kEvPrebootCert: return "EV_PREBOOT_CERT";
    case kEvPostCode: return "EV_POST_CODE";
    case kEvUnused: return "EV_UNUSED";
    case kEvNoAction: return "EV_NO_ACTION";
    case kEvSeparator: return "EV_SEPARATOR";
    case kEvAction: return "EV_ACTION";
    case kEvEventTag: return "EV_EVENT_TAG";
    case kEvSCrtmContents: return "EV_S_CRTM_CONTENTS";
    case kEvSCrtmVersion: return "EV_S_CRTM_VERSION";
    case kEvCpuMicrocode: return "EV_CPU_MICROCODE";
    case kEvPlatformConfigFlags: return "EV_PLATFORM_CONFIG_FLAGS";
    case kEvTableOfDevices: return "EV_TABLE_OF_DEVICES";
    case kEvCompactHash: return "EV_COMPACT_HASH";
    case kEvIpl: return "EV_IPL";
    case kEvIplPartitionData: return "EV_IPL_PARTITION_DATA";
    case kEvNonhostCode: return "EV_NONHOST_CODE";
    case kEvNonhostConfig: return "EV_NONHOST_CONFIG";
    case kEvNonhostInfo: return "EV_NONHOST_INFO";
    case kEvOmitBootDeviceEvents: return "EV_OMIT_BOOT_DEVICE_EVENTS";
    case kEvEfiEventBase: return "EV_EFI_EVENT_BASE";
    case kEvEfiVariableDriverConfig: return "EV_EFI_VARIABLE_DRIVER_CONFIG";
    case kEvEfiVariableBoot: return "EV_EFI_VARIABLE_BOOT";
    case kEvEfiBootServicesApplication: return "EV_EFI_BOOT_SERVICES_APPLICATION";
    case kEvEfiBootServicesDriver: return "EV_EFI_BOOT_SERVICES_DRIVER";
    case kEvEfiRuntimeServicesDriver: return "EV_EFI_RUNTIME_SERVICES_DRIVER";
    case kEvEfiGptEvent: return "EV_EFI_GPT_EVENT";
    case kEvEfiAction: return "EV_EFI_ACTION";
    case kEvEfiPlatformFirmwareBlob: return "EV_EFI_PLATFORM_FIRMWARE_BLOB";
    case kEvEfiHandoffTables: return "EV_EFI_HANDOFF_TABLES";
    case kEvEfiPlatformFirmwareBlob2: return "EV_EFI_PLATFORM_FIRMWARE_BLOB2";
    case kEvEfiHandoffTables2: return "EV_EFI_HANDOFF_TABLES2";
    case kEvEfiVariableBoot2: return "EV_EFI_VARIABLE_BOOT2";
    case kEvEfiHcrtmEvent: return "EV_EFI_HCRTM_EVENT";
    case kEvEfiVariableAuthority: return "EV_EFI_VARIABLE_AUTHORITY";
    case kEvEfiSpdmFirmwareBlob: return "EV_EFI_SPDM_FIRMWARE_BLOB";
    case kEvEfiSpdmFirmwareConfig: return "EV_EFI_SPDM_FIRMWARE_CONFIG";
  }
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", type);
  return buf;
}

Result<EventLog> ParseEventLog(std::span<const uint8_t> log) {
  return Parser(log).Parse();
}

Bytes InitialPcrValue(uint32_t pcr, size_t size, uint8_t locality) {
  // PC Client Platform TPM Profile: PCRs 17-22 reset to all ones and are
  // zeroed only by a dynamic launch; PCR 0 carries the startup locality.
  Bytes v(size, (pcr >= 17 && pcr <= 22) ? 0xff : 0x00);
  if (pcr == 0 && size > 0) v.back() = locality;
  return v;
}

Result<PcrValues> Replay(const EventLog& log) {
  std::map<uint16_t, ReplayBank> banks;
  for (uint16_t alg : log.banks) {
    const EVP_MD* md = EvpMd(alg);
    size_t size = alg == kAlgSha1 && !log.crypto_agile ? kSha1DigestSize : 0;
    for (const SpecIdAlgorithm& a : log.spec_id.algorithms) {
      if (a.alg == alg) size = a.digest_size;
    }
    // A bank we cannot hash, or whose declared size is not its hash's, has
    // unknown PCR values: leave it out rather than guess.
    if (md == nullptr || static_cast<size_t>(EVP_MD_get_size(md)) != size) continue;
    banks[alg] = ReplayBank{md, size, true, {}};
  }

  auto fail = [](const Event& ev, const char* reason, const std::string& what) {  // reason-helper: InvalidArgument
    return Status::InvalidArgument(reason, "event " + std::to_string(ev.index) +
                                               " at offset " + Hex(ev.offset) +
                                               ": " + what);
  };

  std::optional<uint8_t> locality;
  bool pcr0_extended = false;
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) throw std::bad_alloc();

  for (const Event& ev : log.events) {
    if (ev.type == kEvNoAction) {
      if (ev.pcr != 0 || ev.data.size() != kStartupLocalitySignature.size() + 1 ||
          !HasPrefix(ev.data, kStartupLocalitySignature)) {
        continue;  // EV_NO_ACTION extends nothing
      }
      // SECURITY: the locality decides PCR 0's starting value; a second or
      // late one would let the log pick whichever value matches.
      if (locality.has_value() || pcr0_extended) {
        return fail(ev, "eventlog_bad_startup_locality",
                    "StartupLocality event after PCR 0 was set or extended");
      }
      const uint8_t value = ev.data.back();
      if (value > kMaxLocality) {
        return fail(ev, "eventlog_bad_startup_locality",
                    "startup locality " + std::to_string(value));
      }
      locality = value;
      continue;
    }
    if (ev.pcr > kMaxReplayPcrIndex) {
      return fail(ev, "eventlog_bad_pcr_index",
                  EventTypeName(ev.type) + " extends PCR " + std::to_string(ev.pcr) +
                      ", above " + std::to_string(kMaxReplayPcrIndex));
    }
    if (ev.type == kEvEfiHcrtmEvent && ev.pcr == 0) {
      // TPM 2.0 Part 1, "H-CRTM before TPM2_Startup": _TPM_Hash_Start at
      // locality 4 resets PCR 0 to 4 before the H-CRTM digest is extended.
      if (pcr0_extended || (locality.has_value() && *locality != kHcrtmLocality)) {
        return fail(ev, "eventlog_bad_startup_locality",
                    "H-CRTM event after PCR 0 was set or extended");
      }
      locality = kHcrtmLocality;
    }
    if (ev.pcr == 0) pcr0_extended = true;
    for (auto& [alg, bank] : banks) {
      if (!bank.complete) continue;
      auto d = ev.digests.find(alg);
      if (d == ev.digests.end()) {
        bank.complete = false;
        continue;
      }
      auto [slot, inserted] = bank.pcrs.try_emplace(ev.pcr);
      if (inserted) slot->second = InitialPcrValue(ev.pcr, bank.size, locality.value_or(0));
      Extend(ctx.get(), bank.md, &slot->second, d->second);
    }
  }

  PcrValues out;
  for (auto& [alg, bank] : banks) {
    if (!bank.complete) continue;
    if (locality.has_value()) {
      bank.pcrs.try_emplace(0, InitialPcrValue(0, bank.size, *locality));
    }
    out.emplace(alg, std::move(bank.pcrs));
  }
  return out;
}

Status ComparePcrs(const PcrValues& replayed, const PcrValues& quoted) {
  for (const auto& [alg, quoted_bank] : quoted) {
    auto rb = replayed.find(alg);
    // SECURITY: a bank the log does not describe can hold anything that was
    // extended into it; there is nothing to check it against.
    if (rb == replayed.end()) {
      return Status::VerificationFailed(
          "eventlog_bank_missing",
          "the event log does not replay the " + HashAlgName(alg) + " bank");
    }
    for (const auto& [pcr, value] : quoted_bank) {
      auto rv = rb->second.find(pcr);
      Bytes initial;
      const Bytes* expected = nullptr;
      if (rv != rb->second.end()) {
        expected = &rv->second;
      } else {
        const size_t size = DigestSize(alg) != 0 ? DigestSize(alg) : value.size();
        initial = InitialPcrValue(pcr, size);
        expected = &initial;
      }
      if (*expected != value) {
        return Status::VerificationFailed(
            "eventlog_pcr_mismatch", HashAlgName(alg) + " PCR " + std::to_string(pcr) +
                                         " does not match the event log");
      }
    }
  }
  return Status::Ok();
}

}  // namespace rackgate::attest
