// Boot facts: what a parsed measured-boot event log says about how a machine
// booted (Secure Boot state and databases, authorities, boot applications,
// option ROMs, kernel command line, separators), extracted so that a policy
// can judge it. See docs/eventlog.md and docs/policy.md.
//
// Trust model. A replayed log binds, per PCR, the order of the events and
// their digests — nothing else. The event type is not covered by any digest,
// and the event data only for some types. So:
//  - facts come only from events whose type is expected on their PCR
//    (Secure Boot variables only from EV_EFI_VARIABLE_DRIVER_CONFIG on PCR 7,
//    before PCR 7's separator); an event of a fact-bearing type elsewhere is
//    reported as an anomaly and contributes nothing;
//  - where the data is covered by the digest (UEFI variables, separators,
//    actions, boot loader strings), the digest is recomputed from the data
//    before the data is believed; a mismatch is recorded and the data ignored;
//  - where it is not (boot applications, drivers, option ROMs, authorities
//    that do not verify), the fact is the digest itself, and every
//    measurement on the PCR counts whatever its type, so relabelling an
//    event cannot hide it from an allow-list.
//
// Thread safety: all functions are pure and may be called concurrently.
#ifndef RACKGATE_ATTEST_BOOT_FACTS_H_
#define RACKGATE_ATTEST_BOOT_FACTS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "attest/eventlog.h"
#include "base/status.h"
#include "attest/tpm.h"

namespace rackgate::attest {

// Limits on structures inside event data. The data itself is already bounded
// by kMaxEventDataSize; these bound the work and the copies made from it.
inline constexpr uint64_t kMaxUefiVariableNameChars = 1024;  // UnicodeNameLength
inline constexpr size_t kMaxEfiSignatures = 16384;           // per variable, all lists
inline constexpr size_t kMaxDevicePathNodes = 256;           // per EFI_DEVICE_PATH
inline constexpr size_t kMaxDescriptionChars = 160;          // DescribeEvent output

// An EFI_GUID as it appears on the wire: 16 bytes, the first three fields
// little-endian.
struct EfiGuid {
  std::array<uint8_t, 16> bytes{};

  // "8be4df61-93ca-11d2-aa0d-00e098032b8c".
  std::string ToString() const;
  bool operator==(const EfiGuid&) const = default;
};

// EFI_GLOBAL_VARIABLE: SecureBoot, PK, KEK, Boot####, BootOrder.
inline constexpr EfiGuid kEfiGlobalVariableGuid{
    {0x61, 0xdf, 0xe4, 0x8b, 0xca, 0x93, 0xd2, 0x11, 0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c}};
// EFI_IMAGE_SECURITY_DATABASE_GUID: db, dbx, dbt, dbr.
inline constexpr EfiGuid kEfiImageSecurityDatabaseGuid{
    {0xcb, 0xb2, 0x19, 0xd7, 0x3a, 0x3d, 0x96, 0x45, 0xa3, 0xbc, 0xda, 0xd0, 0x0e, 0x67, 0x65, 0x6f}};
// EFI_CERT_SHA256_GUID and EFI_CERT_X509_GUID (EFI_SIGNATURE_LIST types).
inline constexpr EfiGuid kEfiCertSha256Guid{
    {0x26, 0x16, 0xc4, 0xc1, 0x4c, 0x50, 0x92, 0x40, 0xac, 0xa9, 0x41, 0xf9, 0x36, 0x93, 0x43, 0x28}};
inline constexpr EfiGuid kEfiCertX509Guid{
    {0xa1, 0x59, 0xc0, 0xa5, 0xe4, 0x94, 0xa7, 0x4a, 0x87, 0xb5, 0xab, 0x15, 0x5c, 0x2b, 0xf0, 0x72}};

// systemd / Linux EFI stub tagged-event ids (TCG_PCClientTaggedEvent).
inline constexpr uint32_t kInitrdEventTagId = 0x8F3B22EC;
inline constexpr uint32_t kLoadOptionsEventTagId = 0x8F3B22ED;

// UEFI_VARIABLE_DATA { EFI_GUID VariableName; u64 UnicodeNameLength;
// u64 VariableDataLength; CHAR16 UnicodeName[]; INT8 VariableData[] }.
struct UefiVariableData {
  EfiGuid vendor;
  std::string name;  // UnicodeName as UTF-8 (invalid UTF-16 becomes U+FFFD)
  Bytes data;        // VariableData
};

// Parses UEFI_VARIABLE_DATA. The lengths must describe the data exactly: no
// bytes short, none left over. kInvalidArgument "uefi_variable_malformed"
// otherwise, or for a name longer than kMaxUefiVariableNameChars.
Result<UefiVariableData> ParseUefiVariableData(std::span<const uint8_t> data);

// EFI_SIGNATURE_DATA { EFI_GUID SignatureOwner; u8 SignatureData[] }.
struct EfiSignatureData {
  EfiGuid owner;
  Bytes data;  // SignatureSize - 16 bytes: a hash, a DER certificate, ...
};

// EFI_SIGNATURE_LIST { EFI_GUID SignatureType; u32 SignatureListSize;
// u32 SignatureHeaderSize; u32 SignatureSize;
// u8 SignatureHeader[SignatureHeaderSize]; EFI_SIGNATURE_DATA Signatures[] }.
struct EfiSignatureList {
  EfiGuid type;
  Bytes header;  // SignatureHeader, kept apart: it is never a signature
  std::vector<EfiSignatureData> signatures;
};

// Parses the contents of PK, KEK, db, dbx, ...: zero or more EFI_SIGNATURE_LISTs
// back to back, filling `data` exactly. Each list is read through its own
// sub-reader of SignatureListSize bytes; its SignatureHeaderSize bytes are
// skipped as the header (never read as signatures — the bug class where an
// ignored header let attacker bytes into a trusted list); the rest must be a
// whole number of SignatureSize-byte entries, SignatureSize > 16 and, for
// the fixed-size types (EFI_CERT_SHA1/SHA256/SHA384/SHA512, X509_SHA*,
// RSA2048), exactly that type's size (48 for EFI_CERT_SHA256).
// kInvalidArgument "efi_signature_list_malformed" otherwise, or for more
// than kMaxEfiSignatures signatures in all.
Result<std::vector<EfiSignatureList>> ParseEfiSignatureLists(std::span<const uint8_t> data);

// UEFI_IMAGE_LOAD_EVENT { EFI_PHYSICAL_ADDRESS ImageLocationInMemory;
// UINTN ImageLengthInMemory; UINTN ImageLinkTimeAddress;
// UINTN LengthOfDevicePath; EFI_DEVICE_PATH DevicePath[] } (UINTN = 8 bytes).
struct UefiImageLoadEvent {
  uint64_t image_location = 0;
  uint64_t image_length = 0;
  uint64_t link_time_address = 0;
  Bytes device_path;
};

// kInvalidArgument "uefi_image_load_malformed" unless LengthOfDevicePath
// covers the rest of the data exactly.
Result<UefiImageLoadEvent> ParseUefiImageLoadEvent(std::span<const uint8_t> data);

// The file path an EFI_DEVICE_PATH names: its media file-path nodes (type 4,
// subtype 4) joined, as UTF-8, e.g. "\EFI\BOOT\BOOTX64.EFI". Empty when the
// path has none. kInvalidArgument "device_path_malformed" for a node shorter
// than its header or running past the data, or above kMaxDevicePathNodes.
Result<std::string> DevicePathFilePath(std::span<const uint8_t> device_path);

// Whether an event's data is covered by its digests, and if so whether it
// matches. Covered: EV_SEPARATOR, EV_EFI_VARIABLE_DRIVER_CONFIG,
// EV_EFI_VARIABLE_AUTHORITY, EV_EFI_ACTION, EV_ACTION, EV_EFI_GPT_EVENT,
// EV_S_CRTM_VERSION (digest = H(data)); EV_EFI_VARIABLE_BOOT/BOOT2 (H(data),
// or H(VariableData) as EDK2 measures Boot####); grub's EV_IPL strings
// "grub_cmd: ", "kernel_cmdline: ", "module_cmdline: " (H(text after the
// prefix, without its NUL)); other EV_IPL on PCR 8 and 12 (systemd-boot's
// UTF-16 command line, H(data)); EV_EVENT_TAG on PCR 12 with the load-options
// tag (H(tagged payload)). Every digest the event carries for a bank we can
// hash must match the same covered bytes.
enum class EventDataCheck {
  kNotCovered,      // the digest is of something not in the log (code, files)
  kMatches,
  kMismatch,
  kNoUsableDigest,  // covered, but no digest of a bank we can compute
};
EventDataCheck CheckEventData(const Event& ev);

// A digest extended into a PCR that policy judges by value.
struct Measurement {
  uint32_t event_index = 0;
  uint32_t pcr = 0;
  uint32_t type = 0;
  std::map<uint16_t, Bytes> digests;  // as logged, every bank
  // From the untrusted data, for people only (a path, a variable name);
  // printable ASCII, bounded. Never a basis for a decision.
  std::string description;
};

// A Secure Boot variable measured on PCR 7 before its separator, with data
// that verified against its digest.
struct SecureBootVariable {
  uint32_t event_index = 0;
  std::string name;  // SecureBoot, PK, KEK, db, dbx, dbt, dbr
  std::map<uint16_t, Bytes> digests;
  Bytes data;        // VariableData
  // PK/KEK/db/dbx/dbt/dbr: the parsed EFI_SIGNATURE_LISTs; empty for
  // SecureBoot. When the lists do not parse, `signature_lists_valid` is false,
  // `signature_lists` is empty and an anomaly says why.
  std::vector<EfiSignatureList> signature_lists;
  bool signature_lists_valid = true;
};

enum class SecureBootState {
  kNotMeasured,   // no verified SecureBoot variable on PCR 7
  kEnabled,       // exactly one, value 1
  kDisabled,      // exactly one, value 0 or empty (the variable did not exist)
  kUnverifiable,  // a PCR 7 configuration event did not verify or parse,
                  // SecureBoot was measured more than once, or its value is
                  // neither 0 nor 1
};
// "not measured", "enabled", "disabled", "unverifiable".
const char* SecureBootStateName(SecureBootState s);

enum class SeparatorKind {
  kNormal,     // data 00000000, digest verified
  kError,      // data 01000000 (PFP: an error before the OS) or any other value
  kMalformed,  // not 4 bytes, or the digest does not match the data
};

struct Separator {
  uint32_t event_index = 0;
  uint32_t pcr = 0;
  SeparatorKind kind = SeparatorKind::kMalformed;
  uint32_t value = 0;  // little-endian value when the data is 4 bytes
};

struct KernelCmdline {
  uint32_t event_index = 0;
  uint32_t pcr = 0;
  uint32_t type = 0;
  // "grub" (PCR 8 "kernel_cmdline: " string, whose text starts with the
  // kernel's path), "systemd-boot" (PCR 8 UTF-16) or "systemd" (PCR 12).
  std::string source;
  std::string text;    // UTF-8; only meaningful when `verified`
  bool verified = false;
};

// Something in the log that does not fit its PCR, its type or its own
// structure. Reported; never a source of facts.
struct Anomaly {
  uint32_t event_index = 0;
  uint32_t pcr = 0;
  uint32_t type = 0;
  // event_type_unexpected_for_pcr, event_type_unknown, event_data_malformed,
  // secure_boot_variable_outside_pcr7, secure_boot_variable_bad_vendor,
  // secure_boot_variable_duplicate, secure_boot_config_after_separator,
  // efi_signature_list_malformed, kernel_cmdline_outside_pcr8,
  // separator_duplicate, pcr7_action
  std::string reason;
  std::string message;  // names the event; printable ASCII
};

struct DataMismatch {
  uint32_t event_index = 0;
  uint32_t pcr = 0;
  uint32_t type = 0;
};

struct BootFacts {
  SecureBootState secure_boot = SecureBootState::kNotMeasured;
  // Verified Secure Boot variables (SecureBoot, PK, KEK, db, dbx, ...), in
  // log order.
  std::vector<SecureBootVariable> secure_boot_variables;
  // PCR 7 measurements other than verified Secure Boot configuration before
  // the separator, separators and verified action strings: the authorities
  // (EV_EFI_VARIABLE_AUTHORITY) that verified what ran, and anything else
  // that reached PCR 7 (each with an anomaly when its type is not AUTHORITY).
  std::vector<Measurement> authorities;
  // PCR 4 measurements other than verified separators and action strings:
  // EV_EFI_BOOT_SERVICES_APPLICATION events (description: the file path), and
  // anything else that reached PCR 4.
  std::vector<Measurement> boot_applications;
  // PCR 2 measurements other than verified separators and action strings:
  // option ROMs and add-in drivers (EV_EFI_BOOT_SERVICES_DRIVER,
  // EV_EFI_RUNTIME_SERVICES_DRIVER, EV_EFI_PLATFORM_FIRMWARE_BLOB(2)).
  std::vector<Measurement> option_roms;
  std::vector<KernelCmdline> kernel_cmdlines;  // in log order
  std::vector<Separator> separators;           // PCRs 0-7, in log order
  // "UEFI Debug Mode" was logged on PCR 7: the firmware let a debugger run,
  // so its Secure Boot verdicts prove nothing.
  bool uefi_debug_mode = false;
  std::vector<DataMismatch> data_mismatches;   // covered events that do not verify
  std::vector<Anomaly> anomalies;
};

// Extracts the facts from a parsed log. Never fails: malformed event data
// becomes an anomaly and contributes no fact. The facts describe the log; only
// after ComparePcrs against a verified quote do they describe a machine.
// Throws only on OpenSSL resource failure.
BootFacts ExtractBootFacts(const EventLog& log);

// Printable ASCII only, anything else as \xNN, so that log data can never
// carry terminal escape sequences to an operator's screen or a log; cut to
// at most `max` characters, ending in "..." when cut.
std::string PrintableAscii(std::string_view s, size_t max = kMaxDescriptionChars);

// A one-line description of an event's data for people: the variable name,
// the application's path, the separator value, the logged string, ... .
// Printable ASCII only (anything else escaped), at most
// kMaxDescriptionChars characters. Untrusted: the data says it, nothing
// proves it.
std::string DescribeEvent(const Event& ev);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_BOOT_FACTS_H_
