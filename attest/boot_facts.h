// Boot facts: what a parsed measured-boot event log says about how a machine
// booted (Secure Boot state and databases, authorities, boot applications,
// boot files, option ROMs, kernel command line, separators), extracted so that a policy
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
//    event cannot hide it from an allow-list;
//  - only a digest of a constant the firmware writes (a separator value, a
//    known action string: docs/eventlog.md) accounts for a measurement
//    without being judged; an action or separator with other data is a
//    relabelled event (anomaly event_relabelled) and counts, as does a
//    second measurement of a Secure Boot variable.
//
// Thread safety: all functions are pure and may be called concurrently.
#ifndef RACKGATE_ATTEST_BOOT_FACTS_H_
#define RACKGATE_ATTEST_BOOT_FACTS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "attest/efi_structures.h"
#include "attest/eventlog.h"
#include "base/status.h"
#include "attest/tpm.h"

namespace rackgate::attest {

// Bound on DescribeEvent's output.
inline constexpr size_t kMaxDescriptionChars = 160;

// systemd / Linux EFI stub tagged-event ids (TCG_PCClientTaggedEvent).
inline constexpr uint32_t kInitrdEventTagId = 0x8F3B22EC;
inline constexpr uint32_t kLoadOptionsEventTagId = 0x8F3B22ED;

// Whether an event's data is covered by its digests, and if so whether it
// matches. Covered: EV_SEPARATOR, EV_EFI_VARIABLE_DRIVER_CONFIG,
// EV_EFI_VARIABLE_AUTHORITY, EV_EFI_ACTION, EV_ACTION, EV_EFI_GPT_EVENT,
// EV_S_CRTM_VERSION (digest = H(data)); EV_EFI_VARIABLE_BOOT/BOOT2 (H(data),
// or H(VariableData) as EDK2 measures Boot####); grub's EV_IPL strings
// "grub_cmd: ", "kernel_cmdline: ", "module_cmdline: " (H(text after the
// prefix, without its NUL)); other EV_IPL on PCR 8 (systemd-boot's UTF-16
// command line, H(data)) and 12 (systemd-boot's and systemd-stub's UTF-16
// command line: H(data), or H(data without its UTF-16 NUL), which systemd's
// documentation describes); EV_EVENT_TAG on PCR 12 with the load-options
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
  // kernel's path), "systemd-boot" (PCR 8 UTF-16, systemd-boot < 251),
  // "systemd" (PCR 12: the command line systemd-boot >= 251 passes to what
  // it loads, or the one systemd-stub received; the log does not say which)
  // or "uki" (PCR 11: a Unified Kernel Image's .cmdline section, measured by
  // systemd-stub as a digest of the section, its text not logged).
  std::string source;
  std::string text;    // UTF-8; only meaningful when `verified`
  bool verified = false;
  // "uki" only: the text is not in the log, only its digests (of the
  // section's bytes, every bank, as logged); `text` is empty and `verified`
  // false. A policy can compare them with the digest of a text it expects.
  bool by_digest = false;
  std::map<uint16_t, Bytes> digests;
};

// PCR 11, where systemd-stub measures the PE sections of a Unified Kernel
// Image before it uses them: per section, in the UKI specification's order,
// two EV_IPL events whose data is the section name in UTF-16LE with its NUL
// (e.g. ".linux"): the first's digest is of the name in ASCII with its NUL,
// the second's of the section's contents.
inline constexpr uint32_t kPcrUkiSections = 11;
// PCR 9, where grub measures every file it reads (its grub.cfg, the kernel,
// the initramfs; EV_IPL, the data a path no digest covers) and the Linux EFI
// stub measures the initrd it loads (EV_EVENT_TAG kInitrdEventTagId).
inline constexpr uint32_t kPcrBootFiles = 9;

// A PE section name has at most 8 bytes.
inline constexpr size_t kMaxUkiSectionNameChars = 8;

// One UKI section systemd-stub measured. Its name comes from the first
// event, whose digest verified against the name; its digests are those of
// the event that follows it on PCR 11 (the hash chain binds that order), the
// contents of the section. The second event's own data is not covered by
// its digest and is not believed (a different name there is an anomaly).
struct UkiSection {
  uint32_t name_event_index = 0;
  uint32_t event_index = 0;           // the contents' event
  std::string name;                   // ".linux", ".initrd", ".cmdline", ...
  std::map<uint16_t, Bytes> digests;  // of the contents, every bank, as logged
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
  // separator_duplicate, pcr7_action, event_relabelled (an action or a
  // separator whose data is not a known action string or separator value, or
  // does not match its digest; an EV_EVENT_TAG whose data is not a tagged
  // event: what such an event measured is unknown), uki_section_mislabelled (a section's
  // contents event names another section), uki_section_incomplete (a
  // section name with no contents after it on PCR 11)
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
  // PCR 9 measurements other than verified separators and action strings:
  // the files grub read (EV_IPL, description: the logged path), the initrd
  // the Linux EFI stub loaded, and anything else that reached PCR 9. The
  // path is the log's word only; each is judged by its digest.
  std::vector<Measurement> boot_files;
  // PCR 2 measurements other than verified separators and action strings:
  // option ROMs and add-in drivers (EV_EFI_BOOT_SERVICES_DRIVER,
  // EV_EFI_RUNTIME_SERVICES_DRIVER, EV_EFI_PLATFORM_FIRMWARE_BLOB(2)).
  std::vector<Measurement> option_roms;
  std::vector<KernelCmdline> kernel_cmdlines;  // in log order
  // PCR 11: the UKI sections systemd-stub measured, in log order, and every
  // other PCR 11 measurement (anything not a verified section name followed
  // by its contents: Windows' EV_COMPACT_HASH, a dangling name, ...).
  std::vector<UkiSection> uki_sections;
  std::vector<Measurement> uki_unrecognized;
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

// A one-line description of an event's data for people: the variable name,
// the application's path, the separator value, the logged string, ... .
// Printable ASCII only (anything else escaped), at most
// kMaxDescriptionChars characters. Untrusted: the data says it, nothing
// proves it.
std::string DescribeEvent(const Event& ev);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_BOOT_FACTS_H_
