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

#include <cstdint>
#include <optional>
#include <string>
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
  std::optional<KernelCmdlinePolicy> kernel_cmdline;
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
};

// One broken rule.
struct Violation {
  std::string rule;     // policy field: eventlog, pcrs, secure_boot, separators,
                        // boot_applications, authorities, kernel_cmdline, tofu
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

// Judges the evidence. The log must replay to the quoted PCRs
// (eventlog_bank_missing, eventlog_pcr_mismatch, or the replay's own reason),
// then each rule the policy sets is checked. A rule that reads facts needs
// their PCR quoted, else pcr_not_quoted under that rule (PCR 7 for
// secure_boot and authorities, 4 for boot_applications, 0-7 for separators;
// command lines on unquoted PCRs do not count). Reasons:
//   pcrs:               pcr_not_quoted, pcr_mismatch
//   secure_boot:        secure_boot_disabled, secure_boot_not_measured,
//                       secure_boot_unverifiable, secure_boot_no_separator,
//                       secure_boot_debug_mode
//   separators:         separator_missing, separator_error, separator_malformed
//   boot_applications:  boot_application_not_allowed, boot_application_forbidden
//   authorities:        authority_not_allowed, authority_forbidden
//   kernel_cmdline:     kernel_cmdline_missing, kernel_cmdline_unverified,
//                       kernel_cmdline_mismatch, kernel_cmdline_required_missing,
//                       kernel_cmdline_forbidden_present
//   tofu:               pcr_not_quoted, tofu_mismatch
// A null log fails with rule "eventlog", reason "eventlog_missing".
// Throws only on OpenSSL resource failure.
Verdict Evaluate(const BootPolicy& policy, const BootFacts& facts, const Evidence& evidence);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_BOOT_POLICY_H_
