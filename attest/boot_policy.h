// Boot policy: what an operator says a machine's measured boot must look like
// (golden PCRs, Secure Boot, allowed and forbidden boot applications and
// authorities, kernel command line rules, PCRs pinned on first use), as a
// typed value, and its evaluation against the facts of a replayed event log
// and the PCRs a verified quote vouched for. The policy's JSON form is read
// outside libattest, in wire/boot_policy_json.h; the format, and what each
// rule defends against, is in docs/policy.md.
//
// Thread safety: all functions are pure and may be called concurrently.
#ifndef RACKGATE_ATTEST_BOOT_POLICY_H_
#define RACKGATE_ATTEST_BOOT_POLICY_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "attest/boot_facts.h"
#include "attest/eventlog.h"
#include "base/status.h"
#include "attest/tpm.h"

namespace rackgate::attest {

// A digest of a named bank, as a policy lists it ("sha256:<hex>").
struct PolicyDigest {
  uint16_t alg = kAlgNull;
  Bytes value;
};

struct KernelCmdlinePolicy {
  std::optional<std::string> exact;    // the whole command line, byte for byte
  std::vector<std::string> required;   // substrings that must all appear
  std::vector<std::string> forbidden;  // substrings that must not appear
};

// A Unified Kernel Image rule (PCR 11, where systemd-stub measures the
// UKI's sections; BootFacts::uki_sections).
struct UkiPolicy {
  // Section name (".linux", ".initrd", ".cmdline", ...) -> the digests its
  // contents may have. Each named section must be measured, and every
  // measurement of it must be in its list; sections not named are not
  // judged. Never empty.
  std::map<std::string, std::vector<PolicyDigest>> sections;
};

// Secure Boot databases, as the firmware measured them on PCR 7 before its
// separator (BootFacts::secure_boot_variables "db" and "dbx").
struct SecureBootDbPolicy {
  // SHA-256 fingerprints of X.509 certificates (the SHA-256 of the DER, as
  // `openssl x509 -fingerprint -sha256` prints it) that db must hold, and
  // that db must not hold. Each 32 bytes.
  std::vector<Bytes> db_required_certificates;
  std::vector<Bytes> db_forbidden_certificates;
  // SHA-256 hashes (EFI_CERT_SHA256 entries, 32 bytes each) that dbx must
  // hold at least: a revoked bootloader stays revoked.
  std::vector<Bytes> dbx_required_hashes;
};

// PCR 11 values an OS builder signed with `systemd-measure sign` (the
// `.pcrsig` section of a UKI): the quoted PCR 11 (sha256) passes when the
// machine sent a signature entry whose PolicyPCR digest is that of the
// quoted value and whose signature verifies under one of these keys.
struct SignedPcr11Policy {
  // Trusted signing keys, DER SubjectPublicKeyInfo; never empty.
  std::vector<Bytes> public_keys;
};

// One entry of a `systemd-measure sign` document, as the machine sent it
// (wire parses the JSON). Untrusted: the rule recomputes and verifies all of
// it.
struct PcrSignature {
  uint16_t bank = kAlgNull;          // "sha256" -> kAlgSha256
  std::vector<uint32_t> pcrs;        // "pcrs"
  Bytes key_fingerprint;             // "pkfp": SHA-256 of the signer's public key
  Bytes policy_digest;               // "pol": TPM2 PolicyPCR digest
  Bytes signature;                   // "sig"
};

struct BootPolicy {
  // Golden values: each listed PCR must be quoted and equal, exactly.
  PcrValues pcrs;
  bool require_secure_boot = false;
  // PCRs 0-7 each carry a normal separator, and none an error separator.
  bool require_separators = false;
  // When set, every boot application (PCR 4 measurement) must be in it.
  std::optional<std::vector<PolicyDigest>> allowed_boot_applications;
  std::vector<PolicyDigest> forbidden_boot_applications;
  // When set, every authority (PCR 7 measurement after Secure Boot
  // configuration) must be in it.
  std::optional<std::vector<PolicyDigest>> allowed_authorities;
  std::vector<PolicyDigest> forbidden_authorities;
  // When set, every boot file (PCR 9 measurement: grub's grub.cfg, kernel
  // and initramfs, the Linux EFI stub's initrd) must be in it.
  std::optional<std::vector<PolicyDigest>> allowed_boot_files;
  std::vector<PolicyDigest> forbidden_boot_files;
  // Judged on every command line the log carries on a quoted PCR: grub's
  // (PCR 8), systemd-boot's and systemd-stub's (PCR 12), a UKI's .cmdline
  // section (PCR 11, by digest: only `exact` can judge it).
  std::optional<KernelCmdlinePolicy> kernel_cmdline;
  std::optional<UkiPolicy> uki;
  // JSON "db" and "dbx" (docs/policy.md).
  std::optional<SecureBootDbPolicy> secure_boot_db;
  // JSON "uki_signed".
  std::optional<SignedPcr11Policy> uki_signed;
  // Trust on first use: these PCRs are pinned to the values of the first
  // attestation that passes, and must keep them until an operator resets
  // the machine.
  std::vector<PcrSelection> tofu;
};

// What Evaluate judges.
struct Evidence {
  // The event log, parsed. BORROWED; must outlive Evaluate. The BootFacts
  // passed beside it must have been extracted from this log.
  const EventLog* log = nullptr;
  // The PCR values a verified quote vouched for: every PCR the policy
  // names (golden and TOFU) must be among them.
  PcrValues quoted;
  // TOFU values recorded at the machine's first passing attestation;
  // nullopt when none were ever recorded (a new machine, or one an operator
  // reset), which makes this attestation the first use.
  std::optional<PcrValues> tofu_recorded;
  // The PCR signatures the machine sent with its evidence (its UKI's
  // `.pcrsig`); judged only by a `uki_signed` rule.
  std::vector<PcrSignature> pcr_signatures;
};

// One broken rule.
struct Violation {
  std::string rule;     // policy field: eventlog, pcrs, secure_boot, separators,
                        // boot_applications, authorities, boot_files,
                        // kernel_cmdline, uki, db, dbx, uki_signed, tofu
  std::string reason;   // stable, lower_snake_case
  std::string message;  // names the PCR, event or digest; never a value the
                        // evidence was compared against, never a secret
};

struct Verdict {
  bool ok = false;
  // Every rule the evidence breaks, in rule order (not only the first).
  std::vector<Violation> violations;
  // When ok: the TOFU values the caller must store — for each of the
  // policy's TOFU PCRs, its recorded value, or its quoted value when none was
  // recorded (first use). Empty when not ok (a failed attestation never pins
  // anything) or when the policy has no TOFU PCRs.
  PcrValues tofu_to_record;
};

// The PCRs whose events the policy's rules read from the log, each of which
// the machine must quote for its rule to pass: 0-7 (require_separators), 4
// (boot_applications), 7 (require_secure_boot, authorities), 9 (boot_files),
// 8, 9, 11 and 12 (kernel_cmdline: grub on 8, a UKI's .cmdline section on 11,
// systemd-boot and systemd-stub on 12; and 9, where the Linux EFI stub logs
// its load options — not read as a command line, but quoted so that a
// boot_files rule, or a pin, can judge it), 11 (uki, uki_signed), 7 (db/dbx).
// Golden and TOFU PCRs are the policy's own lists (BootPolicy::pcrs, ::tofu).
std::set<uint32_t> PcrsReadFromLog(const BootPolicy& policy);

// The boot phases systemd-pcrphase measures into PCR 11 from userspace, in
// order (systemd's TPM2_PCR_MEASUREMENTS.md; each digest is of the word in
// UTF-8 without a NUL). They are not in the firmware's event log.
inline constexpr std::array<std::string_view, 4> kSystemdBootPhases = {
    "enter-initrd", "leave-initrd", "sysinit", "ready"};

// ComparePcrs, except that a quoted PCR 11 may also hold the log's value
// extended by the first 1..4 of kSystemdBootPhases (a machine booted by
// systemd-stub quotes PCR 11 after systemd-pcrphase extended it; how far
// depends on when it quotes). Each extension is of a known constant, so the
// quote still binds PCR 11's logged events and nothing unknown. On a match,
// `*phase` (when not null) is set to the phases joined by ':' ("" when
// none). Same reasons as ComparePcrs.
Status CompareLogWithQuote(const PcrValues& replayed, const PcrValues& quoted,
                           std::string* phase = nullptr);

// Judges the evidence. The log must replay to the quoted PCRs
// (CompareLogWithQuote: eventlog_bank_missing, eventlog_pcr_mismatch, or
// the replay's own reason),
// and no event on a PCR the policy reads from the log (PcrsReadFromLog) may
// be relabelled (anomalies event_relabelled, event_type_unknown,
// event_type_unexpected_for_pcr: rule eventlog, reason event_relabelled),
// then each rule the policy sets is checked. A rule that reads facts needs
// their PCR quoted, else pcr_not_quoted under that rule (PCR 7 for
// secure_boot and authorities, 4 for boot_applications, 9 for boot_files,
// 0-7 for separators; 11 for uki; command lines on unquoted PCRs do not
// count). Reasons:
//   pcrs:               pcr_not_quoted, pcr_mismatch
//   secure_boot:        secure_boot_disabled, secure_boot_not_measured,
//                       secure_boot_unverifiable, secure_boot_no_separator,
//                       secure_boot_debug_mode
//   separators:         separator_missing, separator_error, separator_malformed
//   boot_applications:  boot_application_not_allowed, boot_application_forbidden
//   authorities:        authority_not_allowed, authority_forbidden
//   boot_files:         boot_file_not_allowed, boot_file_forbidden
//   kernel_cmdline:     kernel_cmdline_missing, kernel_cmdline_unverified,
//                       kernel_cmdline_mismatch, kernel_cmdline_required_missing,
//                       kernel_cmdline_forbidden_present
//   uki:                pcr_not_quoted, uki_missing, uki_section_missing,
//                       uki_section_not_allowed, uki_measurement_unrecognized
//   db:                 pcr_not_quoted, db_not_measured, db_certificate_missing,
//                       db_certificate_forbidden
//   dbx:                pcr_not_quoted, dbx_not_measured, dbx_hash_missing
//                       (db/dbx are "not measured" also when PCR 7's
//                       configuration does not verify or has no separator)
//   uki_signed:         pcr_not_quoted (sha256 PCR 11), uki_signature_missing,
//                       uki_signature_untrusted_key, uki_signature_invalid
//   tofu:               pcr_not_quoted, tofu_mismatch
// A null log fails with rule "eventlog", reason "eventlog_missing".
// Throws only on OpenSSL resource failure.
Verdict Evaluate(const BootPolicy& policy, const BootFacts& facts, const Evidence& evidence);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_BOOT_POLICY_H_
