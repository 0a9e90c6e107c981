// Boot facts from a measured-boot event log: event data verification, fact
// extraction and event descriptions (the UEFI structures themselves are parsed
// in efi_structures.cc).
#include "attest/boot_facts.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <string_view>
#include <utility>

#include "base/byte_reader.h"
#include "attest/digest.h"
#include "base/hex.h"
#include "base/text.h"

namespace rackgate::attest {

namespace {

constexpr std::string_view kGrubCmdPrefix = "grub_cmd: ";
constexpr std::string_view kGrubKernelCmdlinePrefix = "kernel_cmdline: ";
constexpr std::string_view kGrubModuleCmdlinePrefix = "module_cmdline: ";
constexpr std::string_view kUefiDebugMode = "UEFI Debug Mode";

// The action strings firmware writes as EV_EFI_ACTION / EV_ACTION events
// (docs/eventlog.md, "Known action strings", gives each one's source). An
// action event accounts for its digest only when its data is one of these,
// byte for byte: its digest is then of a constant, never of code or a file.
constexpr std::array<std::string_view, 7> kKnownActions = {
    "Calling EFI Application from Boot Option",
    "Returning from EFI Application from Boot Option",
    "Exit Boot Services Invocation",
    "Exit Boot Services Returned with Success",
    "Exit Boot Services Returned with Failure",
    kUefiDebugMode,
    "DMA Protection Disabled",
};


// The PCRs the boot loader's command line lands on (grub and old
// systemd-boot: 8; systemd-boot >= 251 and systemd-stub: 12).
constexpr uint32_t kPcrKernelCmdline = 8;
constexpr uint32_t kPcrSystemdKernelConfig = 12;
constexpr uint32_t kPcrOptionRoms = 2;
constexpr uint32_t kPcrBootApplications = 4;
constexpr uint32_t kPcrSecureBoot = 7;
constexpr uint32_t kMaxSeparatorPcr = 7;

bool StartsWith(std::span<const uint8_t> data, std::string_view prefix) {
  return data.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), data.begin(),
                    [](char a, uint8_t b) { return static_cast<uint8_t>(a) == b; });
}

bool Equals(std::span<const uint8_t> data, std::string_view s) {
  return data.size() == s.size() && StartsWith(data, s);
}

bool IsKnownAction(std::span<const uint8_t> data) {
  return std::any_of(kKnownActions.begin(), kKnownActions.end(),
                     [&](std::string_view a) { return Equals(data, a); });
}

std::optional<uint32_t> SeparatorValue(std::span<const uint8_t> data) {
  if (data.size() != 4) return std::nullopt;
  return static_cast<uint32_t>(data[0]) | static_cast<uint32_t>(data[1]) << 8 |
         static_cast<uint32_t>(data[2]) << 16 | static_cast<uint32_t>(data[3]) << 24;
}

// A separator's data is a 4-byte value: 0 (normal), 1 (an error, the PC
// Client PFP), 0xffffffff (an error, the PC Client BIOS specification),
// "WBCL" (Windows, on PCRs 12-14). Four bytes measured stand for no file,
// authority or command line, so any 4-byte value accounts for its digest.
bool IsSeparatorValue(std::span<const uint8_t> data) { return SeparatorValue(data).has_value(); }

}  // namespace

namespace {

std::string HexU64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}


// Text of a logged string: UTF-16LE when it looks like it (even length,
// second byte zero), else ASCII; up to the first NUL. Nullopt when the bytes
// before the NUL are not text.
std::optional<std::string> TextOf(std::span<const uint8_t> data) {
  if (data.empty()) return std::string();
  if (data.size() >= 2 && data.size() % 2 == 0 && data[1] == 0 && data[0] != 0) {
    std::string s = Utf16ToUtf8(data);
    s = s.substr(0, s.find('\0'));
    return s;
  }
  std::string s;
  for (uint8_t b : data) {
    if (b == 0) break;
    if ((b < 0x20 && b != '\t' && b != '\n') || b >= 0x7f) return std::nullopt;
    s.push_back(static_cast<char>(b));
  }
  return s;
}

// A TCG_PCClientTaggedEvent (EV_EVENT_TAG's data): u32 id, then a u32
// length and that many bytes, and nothing after. Nullopt when malformed.
struct TaggedEvent {
  uint32_t id = 0;
  std::span<const uint8_t> payload;
};
std::optional<TaggedEvent> ParseTaggedEvent(std::span<const uint8_t> data) {
  ByteReader r(data);
  TaggedEvent t;
  ByteReader payload;
  if (!r.ReadU32LE(&t.id) || !r.ReadU32LEPrefixed(&payload) || !r.empty()) return std::nullopt;
  t.payload = payload.rest();
  return t;
}

bool IsSecureBootVariableName(const std::string& name) {
  return name == "SecureBoot" || name == "PK" || name == "KEK" || name == "db" ||
         name == "dbx" || name == "dbt" || name == "dbr";
}

const EfiGuid& SecureBootVariableVendor(const std::string& name) {
  return (name == "SecureBoot" || name == "PK" || name == "KEK")
             ? kEfiGlobalVariableGuid
             : kEfiImageSecurityDatabaseGuid;
}

// The PCRs the PC Client PFP (and EDK2) put an event type on, as a bit mask;
// 0 for types that may appear on any PCR (EV_NO_ACTION, EV_SEPARATOR,
// EV_EFI_ACTION, EV_IPL, EV_EVENT_TAG, ...).
uint32_t ExpectedPcrMask(uint32_t type) {
  auto bits = [](std::initializer_list<uint32_t> pcrs) {
    uint32_t m = 0;
    for (uint32_t p : pcrs) m |= 1u << p;
    return m;
  };
  switch (type) {
    case kEvPostCode:
    case kEvSCrtmContents:
    case kEvSCrtmVersion:
    case kEvEfiHcrtmEvent:
      return bits({0});
    case kEvCpuMicrocode:
    case kEvPlatformConfigFlags:
    case kEvTableOfDevices:
    case kEvEfiHandoffTables:
    case kEvEfiHandoffTables2:
    case kEvEfiVariableBoot:
    case kEvEfiVariableBoot2:
      return bits({1});
    case kEvEfiVariableDriverConfig:
      return bits({1, 3, 7});
    case kEvEfiSpdmFirmwareConfig:
      return bits({1, 3});
    case kEvEfiPlatformFirmwareBlob:
    case kEvEfiPlatformFirmwareBlob2:
    case kEvEfiSpdmFirmwareBlob:
      return bits({0, 2});
    case kEvEfiBootServicesDriver:
    case kEvEfiRuntimeServicesDriver:
      return bits({2});
    case kEvEfiBootServicesApplication:
      return bits({4});
    case kEvEfiGptEvent:
      return bits({5});
    case kEvEfiVariableAuthority:
      return bits({7});
    default:
      return 0;
  }
}

bool IsKnownEventType(uint32_t type) { return EventTypeName(type).rfind("EV_", 0) == 0; }

// Bytes that, hashed, should give the event's digests: empty when the data
// is not covered. EV_EFI_VARIABLE_BOOT has two candidates.
std::vector<std::span<const uint8_t>> CoveredBytes(const Event& ev) {
  std::span<const uint8_t> data(ev.data);
  switch (ev.type) {
    case kEvSeparator:
    case kEvEfiVariableDriverConfig:
    case kEvEfiVariableAuthority:
    case kEvEfiAction:
    case kEvAction:
    case kEvEfiGptEvent:
    case kEvSCrtmVersion:
      return {data};
    case kEvEfiVariableBoot:
    case kEvEfiVariableBoot2: {
      // EDK2 measures only VariableData for Boot####; the PFP says the
      // whole UEFI_VARIABLE_DATA. Either proves the data.
      std::vector<std::span<const uint8_t>> out{data};
      ByteReader r(data);
      uint64_t name_chars, data_len;
      if (r.Skip(kEfiGuidSize) && r.ReadU64LE(&name_chars) && r.ReadU64LE(&data_len) &&
          name_chars <= kMaxUefiVariableNameChars && r.Skip(name_chars * 2) &&
          r.remaining() == data_len) {
        out.push_back(r.rest());
      }
      return out;
    }
    case kEvIpl: {
      for (std::string_view prefix :
           {kGrubCmdPrefix, kGrubKernelCmdlinePrefix, kGrubModuleCmdlinePrefix}) {
        if (StartsWith(data, prefix)) {
          auto text = data.subspan(prefix.size());
          if (!text.empty() && text.back() == 0) text = text.first(text.size() - 1);
          return {text};
        }
      }
      if (ev.pcr == kPcrKernelCmdline) return {data};
      if (ev.pcr == kPcrSystemdKernelConfig) {
        // systemd hashes the UTF-16 command line it logs with its NUL
        // (systemd 251-257 do); its documentation says without. Either
        // proves the same text.
        std::vector<std::span<const uint8_t>> out{data};
        if (data.size() >= 2 && data.size() % 2 == 0 && data[data.size() - 1] == 0 &&
            data[data.size() - 2] == 0) {
          out.push_back(data.first(data.size() - 2));
        }
        return out;
      }
      return {};
    }
    case kEvEventTag: {
      auto tag = ParseTaggedEvent(data);
      if (ev.pcr == kPcrSystemdKernelConfig && tag && tag->id == kLoadOptionsEventTagId) return {tag->payload};
      return {};
    }
    default:
      return {};
  }
}

EventDataCheck CheckCovered(const Event& ev, const std::vector<std::span<const uint8_t>>& cands) {
  if (cands.empty()) return EventDataCheck::kNotCovered;
  bool any_bank = false;
  for (const auto& [alg, digest] : ev.digests) {
    if (EvpMd(alg) != nullptr) any_bank = true;
  }
  if (!any_bank) return EventDataCheck::kNoUsableDigest;
  for (std::span<const uint8_t> c : cands) {
    bool all = true;
    for (const auto& [alg, digest] : ev.digests) {
      if (EvpMd(alg) == nullptr) continue;
      if (Hash(alg, {c}) != digest) {
        all = false;
        break;
      }
    }
    if (all) return EventDataCheck::kMatches;
  }
  return EventDataCheck::kMismatch;
}

// An EFI_LOAD_OPTION's description (Boot####): u32 Attributes,
// u16 FilePathListLength, CHAR16 Description[] (NUL-terminated), ...
std::optional<std::string> LoadOptionDescription(std::span<const uint8_t> data) {
  ByteReader r(data);
  uint32_t attributes;
  uint16_t path_len;
  if (!r.ReadU32LE(&attributes) || !r.ReadU16LE(&path_len)) return std::nullopt;
  Bytes units;
  uint16_t u;
  while (true) {
    if (!r.ReadU16LE(&u)) return std::nullopt;
    if (u == 0) break;
    units.push_back(static_cast<uint8_t>(u));
    units.push_back(static_cast<uint8_t>(u >> 8));
  }
  return Utf16ToUtf8(units);
}

std::string DescribeVariable(const Event& ev) {
  auto var = ParseUefiVariableData(ev.data);
  if (!var.ok()) {
    return "malformed UEFI_VARIABLE_DATA (" + std::to_string(ev.data.size()) + " bytes)";
  }
  std::string s = var->name;
  if (ev.type == kEvEfiVariableAuthority) {
    // Firmware logs one EFI_SIGNATURE_DATA (owner, then the certificate
    // that verified the image); shim logs a bare DER certificate, or text
    // (SbatLevel).
    const Bytes& d = var->data;
    if (d.size() > 2 && d[0] == 0x30 && d[1] == 0x82) {
      return s + ": certificate (" + std::to_string(d.size()) + " bytes)";
    }
    if (d.size() > 18 && d[16] == 0x30 && d[17] == 0x82) {
      EfiGuid owner;
      std::copy(d.begin(), d.begin() + 16, owner.bytes.begin());
      return s + ": certificate (" + std::to_string(d.size() - 16) + " bytes), owner " +
             owner.ToString();
    }
    if (auto text = TextOf(d); text && !text->empty()) return s + ": " + *text;
    return s + " (" + std::to_string(d.size()) + " bytes)";
  }
  if (var->name == "SecureBoot") {
    if (var->data.empty()) return s + " (absent)";
    if (var->data.size() == 1) return s + " = " + std::to_string(var->data[0]);
  }
  if (IsSecureBootVariableName(var->name) || var->name == "dbDefault" ||
      var->name == "dbxDefault" || var->name == "KEKDefault" || var->name == "PKDefault") {
    auto lists = ParseEfiSignatureLists(var->data);
    if (!lists.ok()) return s + ": malformed EFI_SIGNATURE_LIST (" +
                            std::to_string(var->data.size()) + " bytes)";
    size_t sigs = 0;
    for (const EfiSignatureList& l : *lists) sigs += l.signatures.size();
    return s + ": " + std::to_string(lists->size()) + " lists, " + std::to_string(sigs) +
           " signatures";
  }
  if (ev.type == kEvEfiVariableBoot || ev.type == kEvEfiVariableBoot2) {
    if (var->name == "BootOrder") {
      s += " =";
      ByteReader r(var->data);
      uint16_t n;
      char buf[8];
      while (r.ReadU16LE(&n)) {
        std::snprintf(buf, sizeof(buf), " %04X", n);
        s += buf;
      }
      return s;
    }
    if (auto d = LoadOptionDescription(var->data)) return s + ": \"" + *d + "\"";
  }
  return s + " (" + std::to_string(var->data.size()) + " bytes)";
}

std::string DescribeImageLoad(const Event& ev) {
  auto img = ParseUefiImageLoadEvent(ev.data);
  if (!img.ok()) return "malformed UEFI_IMAGE_LOAD_EVENT (" + std::to_string(ev.data.size()) + " bytes)";
  auto path = DevicePathFilePath(img->device_path);
  std::string size = std::to_string(img->image_length) + " bytes";
  if (path.ok() && !path->empty()) return *path + " (" + size + ")";
  return "image of " + size + (path.ok() ? "" : ", malformed device path");
}

// A PCR 9 measurement for people: grub's path, or what the Linux EFI stub
// measured. SECURITY: the stub's load options are the kernel command line,
// which may carry a secret (see KernelCmdlinePolicy); only their size is
// shown, as for any tagged event other than the initrd's.
std::string DescribeBootFile(const Event& ev) {
  if (ev.type == kEvEventTag) {
    auto tag = ParseTaggedEvent(ev.data);
    if (tag && tag->id == kInitrdEventTagId) return "Linux EFI stub initrd";
    if (tag && tag->id == kLoadOptionsEventTagId) {
      return "Linux EFI stub load options (" + std::to_string(tag->payload.size()) + " bytes)";
    }
    return "tagged event (" + std::to_string(ev.data.size()) + " bytes)";
  }
  return DescribeEvent(ev);
}

// The PE section name an event's data gives, as systemd-stub logs it:
// UTF-16LE with one terminating NUL, 2..8 printable ASCII characters (no
// space), the first a '.'. Nullopt for anything else.
std::optional<std::string> UkiSectionNameText(std::span<const uint8_t> data) {
  if (data.size() % 2 != 0 || data.size() < 6) return std::nullopt;
  const size_t chars = data.size() / 2 - 1;
  if (chars > kMaxUkiSectionNameChars) return std::nullopt;
  std::string s;
  for (size_t i = 0; i < chars; ++i) {
    const uint8_t lo = data[2 * i], hi = data[2 * i + 1];
    if (hi != 0 || lo <= 0x20 || lo >= 0x7f) return std::nullopt;
    s.push_back(static_cast<char>(lo));
  }
  if (data[2 * chars] != 0 || data[2 * chars + 1] != 0 || s[0] != '.') return std::nullopt;
  return s;
}

// A systemd-stub section-name event: EV_IPL on PCR 11 naming a section,
// whose digests (every bank we can hash, at least one) are of that name in
// ASCII with its NUL. Nullopt for anything else.
std::optional<std::string> UkiSectionNameOf(const Event& ev) {
  if (ev.pcr != kPcrUkiSections || ev.type != kEvIpl) return std::nullopt;
  auto name = UkiSectionNameText(ev.data);
  if (!name) return std::nullopt;
  const std::span<const uint8_t> ascii(reinterpret_cast<const uint8_t*>(name->c_str()),
                                       name->size() + 1);
  if (CheckCovered(ev, {ascii}) != EventDataCheck::kMatches) return std::nullopt;
  return name;
}

// The command-line facts of one event, if it carries one.
struct CmdlineCandidate {
  std::string source;
  std::span<const uint8_t> text_bytes;
  bool utf16 = false;
};

std::optional<CmdlineCandidate> KernelCmdlineOf(const Event& ev) {
  std::span<const uint8_t> data(ev.data);
  if (ev.pcr == kPcrKernelCmdline) {
    if (StartsWith(data, kGrubKernelCmdlinePrefix)) {
      return CmdlineCandidate{"grub", data.subspan(kGrubKernelCmdlinePrefix.size()), false};
    }
    if (ev.type == kEvIpl && !StartsWith(data, kGrubCmdPrefix) &&
        !StartsWith(data, kGrubModuleCmdlinePrefix)) {
      return CmdlineCandidate{"systemd-boot", data, true};
    }
    return std::nullopt;
  }
  if (ev.pcr == kPcrSystemdKernelConfig) {
    if (ev.type == kEvIpl) return CmdlineCandidate{"systemd", data, true};
    if (ev.type == kEvEventTag) {
      auto tag = ParseTaggedEvent(data);
      if (tag && tag->id == kLoadOptionsEventTagId) return CmdlineCandidate{"systemd", tag->payload, true};
    }
  }
  return std::nullopt;
}

// The text of a command line: the bytes up to one terminating NUL. Nullopt
// when there is anything after a NUL, since the kernel stops reading there
// and a policy would be judging text the kernel never saw.
std::optional<std::string> CmdlineText(const CmdlineCandidate& c) {
  std::string s = c.utf16 ? Utf16ToUtf8(c.text_bytes)
                          : std::string(c.text_bytes.begin(), c.text_bytes.end());
  const size_t nul = s.find('\0');
  if (nul == std::string::npos) return s;
  if (s.find_first_not_of('\0', nul) != std::string::npos) return std::nullopt;
  s.resize(nul);
  return s;
}

class Extractor {
 public:
  BootFacts Run(const EventLog& log);

 private:
  void Anomalous(const Event& ev, const char* reason, const std::string& what) {
    facts_.anomalies.push_back(Anomaly{ev.index, ev.pcr, ev.type, reason,
                                       "event " + std::to_string(ev.index) + " (PCR " +
                                           std::to_string(ev.pcr) + ", " +
                                           EventTypeName(ev.type) + "): " + what});
  }
  // Records a PCR 7 configuration event seen before the separator. True when
  // it is a verified, well-formed UEFI variable (Secure Boot or not:
  // AuditMode, DeployedMode, ...), which accounts for its digest.
  bool SecureBootConfig(const Event& ev, bool verified);
  void AddKernelCmdline(const Event& ev, bool verified);
  // Whether the event's digest is of a constant the firmware writes (a
  // verified separator value or known action string), so that it is judged
  // by no rule; records the anomaly when its type says more than its data.
  bool AccountsForItsDigest(const Event& ev, bool verified);
  void AddSeparator(const Event& ev, bool verified);
  // PCR 11: pairs systemd-stub's section-name events with the contents
  // event that follows each; FinishUki after the last event.
  void AddUkiEvent(const Event& ev);
  void FinishUki();

  BootFacts facts_;
  // The verified section-name event waiting for its contents event.
  std::optional<std::pair<const Event*, std::string>> uki_name_;
  bool pcr7_separator_seen_ = false;
  bool pcr7_config_problem_ = false;
  int secure_boot_events_ = 0;
  std::map<uint32_t, int> separators_per_pcr_;
};

bool Extractor::SecureBootConfig(const Event& ev, bool verified) {
  if (!verified) {
    // Its data proves nothing; it may have been the SecureBoot variable.
    pcr7_config_problem_ = true;
    return false;
  }
  auto var = ParseUefiVariableData(ev.data);
  if (!var.ok()) {
    pcr7_config_problem_ = true;
    Anomalous(ev, "event_data_malformed", var.status().message());
    return false;
  }
  if (!IsSecureBootVariableName(var->name)) return true;
  // SECURITY: a name alone does not make a Secure Boot variable; the vendor
  // GUID is part of the variable's identity.
  if (var->vendor != SecureBootVariableVendor(var->name)) {
    Anomalous(ev, "secure_boot_variable_bad_vendor",
              text::PrintableAscii(var->name, kMaxDescriptionChars) + " with vendor " + var->vendor.ToString());
    return true;
  }
  for (const SecureBootVariable& v : facts_.secure_boot_variables) {
    if (v.name == var->name) {
      // SECURITY: firmware measures each once. A second one is what a
      // relabelled authority (whose data also names "db") looks like: it
      // accounts for nothing, and the configuration it muddles is unknown.
      Anomalous(ev, "secure_boot_variable_duplicate",
                var->name + " already measured by event " + std::to_string(v.event_index));
      pcr7_config_problem_ = true;
      return false;
    }
  }
  SecureBootVariable v;
  v.event_index = ev.index;
  v.name = var->name;
  v.digests = ev.digests;
  v.data = std::move(var->data);
  if (v.name == "SecureBoot") {
    ++secure_boot_events_;
  } else {
    auto lists = ParseEfiSignatureLists(v.data);
    if (lists.ok()) {
      v.signature_lists = std::move(lists).value();
    } else {
      v.signature_lists_valid = false;
      Anomalous(ev, "efi_signature_list_malformed", v.name + ": " + lists.status().message());
    }
  }
  facts_.secure_boot_variables.push_back(std::move(v));
  return true;
}

void Extractor::AddKernelCmdline(const Event& ev, bool verified) {
  if (ev.pcr != kPcrKernelCmdline && StartsWith(ev.data, kGrubKernelCmdlinePrefix)) {
    Anomalous(ev, "kernel_cmdline_outside_pcr8", "a grub kernel_cmdline string off PCR 8");
    return;
  }
  auto c = KernelCmdlineOf(ev);
  if (!c) return;
  // systemd-stub also logs initrd contents (credentials, sysexts) as EV_IPL
  // on PCR 12 with a description for data; those never verify, so only a
  // verified PCR 12 EV_IPL is taken for a command line. Anything else
  // labelled as a command line counts, verified or not.
  if (ev.pcr == kPcrSystemdKernelConfig && ev.type == kEvIpl && !verified) return;
  KernelCmdline k;
  k.event_index = ev.index;
  k.pcr = ev.pcr;
  k.type = ev.type;
  k.source = c->source;
  k.verified = verified;
  if (auto text = CmdlineText(*c)) {
    k.text = std::move(*text);
  } else {
    k.verified = false;
    Anomalous(ev, "event_data_malformed", "kernel command line with text after a NUL");
  }
  facts_.kernel_cmdlines.push_back(std::move(k));
}

void Extractor::AddUkiEvent(const Event& ev) {
  if (uki_name_) {
    // SECURITY: the name is the verified one; this event's own data is not
    // covered by its digest, so a different name there changes nothing
    // but is reported.
    auto [name_event, name] = *std::move(uki_name_);
    uki_name_.reset();
    if (ev.type != kEvIpl || UkiSectionNameText(ev.data) != name) {
      Anomalous(ev, "uki_section_mislabelled",
                "the contents of UKI section " + name + " (event " +
                    std::to_string(name_event->index) + ") are logged as \"" + DescribeEvent(ev) +
                    "\"");
    }
    facts_.uki_sections.push_back(UkiSection{name_event->index, ev.index, name, ev.digests});
    if (name == ".cmdline") {
      KernelCmdline k;
      k.event_index = ev.index;
      k.pcr = ev.pcr;
      k.type = ev.type;
      k.source = "uki";
      k.by_digest = true;
      k.digests = ev.digests;
      facts_.kernel_cmdlines.push_back(std::move(k));
    }
    return;
  }
  if (auto name = UkiSectionNameOf(ev)) {
    uki_name_.emplace(&ev, std::move(*name));
    return;
  }
  facts_.uki_unrecognized.push_back(
      Measurement{ev.index, ev.pcr, ev.type, ev.digests, DescribeEvent(ev)});
}

void Extractor::FinishUki() {
  if (!uki_name_) return;
  const Event& ev = *uki_name_->first;
  Anomalous(ev, "uki_section_incomplete",
            "UKI section " + uki_name_->second + " has no contents event after it on PCR 11");
  facts_.uki_unrecognized.push_back(
      Measurement{ev.index, ev.pcr, ev.type, ev.digests, DescribeEvent(ev)});
  uki_name_.reset();
}

bool Extractor::AccountsForItsDigest(const Event& ev, bool verified) {
  // SECURITY: only what a digest covers decides. An event accounts for
  // its digest — is left out of the measurements rules judge — only when
  // that digest is of a constant the firmware writes: a separator value or
  // a known action string, verified. Any other data under one of those
  // types (a file, an authority, a command line relabelled as an action or
  // a separator) is a relabelled event: it still counts as a measurement
  // of its PCR, and the anomaly refuses under every policy that reads the
  // PCR (Evaluate, rule eventlog). So does a tagged event that is not one.
  const bool is_action = ev.type == kEvEfiAction || ev.type == kEvAction;
  const bool known_action = is_action && IsKnownAction(ev.data);
  const bool accounted = verified && ((ev.type == kEvSeparator && IsSeparatorValue(ev.data)) || known_action);
  if (is_action && !known_action) {
    Anomalous(ev, "event_relabelled", "an action whose data is not an action string firmware writes");
  } else if (ev.type == kEvSeparator && !IsSeparatorValue(ev.data)) {
    Anomalous(ev, "event_relabelled", "a separator whose data is not a separator value");
  } else if ((is_action || ev.type == kEvSeparator) && !verified) {
    Anomalous(ev, "event_relabelled", "its digest is not of its data: something else was measured");
  } else if (ev.type == kEvEventTag && !ParseTaggedEvent(ev.data)) {
    Anomalous(ev, "event_relabelled", "an EV_EVENT_TAG whose data is not a tagged event");
  }
  return accounted;
}

void Extractor::AddSeparator(const Event& ev, bool verified) {
  Separator sep;
  sep.event_index = ev.index;
  sep.pcr = ev.pcr;
  const auto value = SeparatorValue(ev.data);
  sep.value = value.value_or(0);
  if (!value || !verified) {
    sep.kind = SeparatorKind::kMalformed;
  } else {
    sep.kind = sep.value == 0 ? SeparatorKind::kNormal : SeparatorKind::kError;
  }
  if (++separators_per_pcr_[ev.pcr] > 1) {
    Anomalous(ev, "separator_duplicate",
              "a second separator on PCR " + std::to_string(ev.pcr));
  }
  facts_.separators.push_back(sep);
}

BootFacts Extractor::Run(const EventLog& log) {
  for (const Event& ev : log.events) {
    if (ev.type == kEvNoAction) continue;  // extends nothing, proves nothing

    const EventDataCheck check = CheckEventData(ev);
    const bool verified = check == EventDataCheck::kMatches;
    if (check == EventDataCheck::kMismatch || check == EventDataCheck::kNoUsableDigest) {
      facts_.data_mismatches.push_back(DataMismatch{ev.index, ev.pcr, ev.type});
    }

    // SECURITY: the type is not covered by the digest. A fact-bearing type
    // off its PCR is the mark of a relabelled event (or odd firmware): it is
    // reported and, below, contributes no fact.
    if (!IsKnownEventType(ev.type)) {
      Anomalous(ev, "event_type_unknown", "an event type the PC Client PFP does not define");
    } else if (const uint32_t mask = ExpectedPcrMask(ev.type);
               mask != 0 && (ev.pcr >= 32 || (mask & (1u << ev.pcr)) == 0)) {
      Anomalous(ev, "event_type_unexpected_for_pcr",
                EventTypeName(ev.type) + " does not belong on PCR " + std::to_string(ev.pcr));
    }

    bool accounted = AccountsForItsDigest(ev, verified);

    if (ev.type == kEvSeparator && ev.pcr <= kMaxSeparatorPcr) AddSeparator(ev, verified);

    if (ev.pcr == kPcrSecureBoot) {
      if (ev.type == kEvSeparator) {
        // SECURITY: order within a PCR is bound by the hash chain; anything
        // logged on PCR 7 after its separator was measured after the
        // firmware handed over, possibly by the OS.
        pcr7_separator_seen_ = true;
      } else if (ev.type == kEvEfiVariableDriverConfig) {
        if (!pcr7_separator_seen_) {
          accounted = SecureBootConfig(ev, verified);
        } else {
          Anomalous(ev, "secure_boot_config_after_separator",
                    "configuration measured after PCR 7's separator is not Secure Boot state");
        }
      } else if (ev.type == kEvEfiAction && verified) {
        if (Equals(ev.data, kUefiDebugMode)) facts_.uefi_debug_mode = true;
        Anomalous(ev, "pcr7_action",
                  "\"" + text::PrintableAscii(TextOf(ev.data).value_or("?"), kMaxDescriptionChars) + "\"");
      }
    } else if (ev.type == kEvEfiVariableDriverConfig) {
      auto var = ParseUefiVariableData(ev.data);
      if (var.ok() && IsSecureBootVariableName(var->name)) {
        Anomalous(ev, "secure_boot_variable_outside_pcr7",
                  text::PrintableAscii(var->name, kMaxDescriptionChars) + " is Secure Boot state only on PCR 7");
      }
    }

    if (!accounted) {
      std::vector<Measurement>* list = nullptr;
      if (ev.pcr == kPcrSecureBoot) list = &facts_.authorities;
      if (ev.pcr == kPcrBootApplications) list = &facts_.boot_applications;
      if (ev.pcr == kPcrOptionRoms) list = &facts_.option_roms;
      if (list != nullptr) {
        list->push_back(Measurement{ev.index, ev.pcr, ev.type, ev.digests, DescribeEvent(ev)});
      }
      if (ev.pcr == kPcrBootFiles) {
        facts_.boot_files.push_back(Measurement{ev.index, ev.pcr, ev.type, ev.digests, DescribeBootFile(ev)});
      }
    }

    AddKernelCmdline(ev, verified);
    if (ev.pcr == kPcrUkiSections) AddUkiEvent(ev);
  }
  FinishUki();

  // Secure Boot state, from PCR 7's configuration phase only.
  const SecureBootVariable* sb = nullptr;
  for (const SecureBootVariable& v : facts_.secure_boot_variables) {
    if (v.name == "SecureBoot") sb = &v;
  }
  if (pcr7_config_problem_ || secure_boot_events_ > 1) {
    facts_.secure_boot = SecureBootState::kUnverifiable;
  } else if (sb == nullptr) {
    facts_.secure_boot = SecureBootState::kNotMeasured;
  } else if (sb->data.empty() || (sb->data.size() == 1 && sb->data[0] == 0)) {
    // An empty SecureBoot variable was not set: Secure Boot is off.
    facts_.secure_boot = SecureBootState::kDisabled;
  } else if (sb->data.size() == 1 && sb->data[0] == 1) {
    facts_.secure_boot = SecureBootState::kEnabled;
  } else {
    facts_.secure_boot = SecureBootState::kUnverifiable;
    facts_.anomalies.push_back(Anomaly{sb->event_index, kPcrSecureBoot,
                                       kEvEfiVariableDriverConfig, "event_data_malformed",
                                       "event " + std::to_string(sb->event_index) +
                                           ": SecureBoot value is neither 0 nor 1"});
  }
  return std::move(facts_);
}

}  // namespace

EventDataCheck CheckEventData(const Event& ev) { return CheckCovered(ev, CoveredBytes(ev)); }

const char* SecureBootStateName(SecureBootState s) {
  switch (s) {
    case SecureBootState::kNotMeasured: return "not measured";
    case SecureBootState::kEnabled: return "enabled";
    case SecureBootState::kDisabled: return "disabled";
    case SecureBootState::kUnverifiable: return "unverifiable";
  }
  return "unknown";
}

BootFacts ExtractBootFacts(const EventLog& log) { return Extractor().Run(log); }

std::string DescribeEvent(const Event& ev) {
  std::span<const uint8_t> data(ev.data);
  const std::string size = std::to_string(data.size()) + " bytes";
  std::string s;
  switch (ev.type) {
    case kEvNoAction:
      if (StartsWith(data, std::string_view("Spec ID Event03", 15))) {
        s = "Spec ID Event03";
      } else if (data.size() == 17 && StartsWith(data, std::string_view("StartupLocality\0", 16))) {
        s = "StartupLocality " + std::to_string(data[16]);
      } else {
        s = TextOf(data).value_or(size);
      }
      break;
    case kEvSeparator:
      if (data.size() == 4) {
        s = hex::Encode(data);
        if (hex::Encode(data) == "00000000") s += " (normal)";
        if (hex::Encode(data) == "01000000") s += " (error)";
      } else {
        s = "separator of " + size;
      }
      break;
    case kEvEfiVariableDriverConfig:
    case kEvEfiVariableBoot:
    case kEvEfiVariableBoot2:
    case kEvEfiVariableAuthority:
      s = DescribeVariable(ev);
      break;
    case kEvEfiBootServicesApplication:
    case kEvEfiBootServicesDriver:
    case kEvEfiRuntimeServicesDriver:
      s = DescribeImageLoad(ev);
      break;
    case kEvEfiPlatformFirmwareBlob: {
      ByteReader r(data);
      uint64_t base, length;
      if (r.ReadU64LE(&base) && r.ReadU64LE(&length) && r.empty()) {
        s = "base " + HexU64(base) + ", length " + HexU64(length);
      } else {
        s = size;
      }
      break;
    }
    case kEvEfiPlatformFirmwareBlob2: {
      ByteReader r(data);
      uint8_t n;
      std::span<const uint8_t> desc;
      if (r.ReadU8(&n) && r.ReadSpan(n, &desc)) {
        s = TextOf(desc).value_or(size);
      } else {
        s = size;
      }
      break;
    }
    case kEvEventTag: {
      if (auto tag = ParseTaggedEvent(data)) {
        char buf[24];
        std::snprintf(buf, sizeof(buf), "tag 0x%08x: ", tag->id);
        s = buf + TextOf(tag->payload).value_or(std::to_string(tag->payload.size()) + " bytes");
      } else {
        s = size;
      }
      break;
    }
    default:
      s = TextOf(data).value_or(size);
      if (s.empty() && !data.empty()) s = size;
      break;
  }
  return text::PrintableAscii(s, kMaxDescriptionChars);
}

}  // namespace rackgate::attest
