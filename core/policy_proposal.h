// Proposing a boot policy from what a fleet really boots
// (docs/policy-proposal.md): each machine's latest observed boot in, the rules
// a strict majority of them agree on out, with the machines that differ
// named and what the proposal would refuse; and the diff of two policy
// documents. Pure: no store, no I/O.
//
// Thread safety: all functions are pure and may be called concurrently.
#ifndef RACKGATE_CORE_POLICY_PROPOSAL_H_
#define RACKGATE_CORE_POLICY_PROPOSAL_H_

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attest/boot_policy.h"
#include "attest/tpm.h"

namespace rackgate::core {

// One machine's latest observation.
struct ObservedBoot {
  std::string hostname;
  std::string tpm_manufacturer, tpm_model;  // from its EK certificate ("" if none)
  attest::Bytes event_log;                  // as the machine sent it
  attest::PcrValues quoted;                 // what its verified quote vouched for
};

// A machine left out of the proposal: its log is missing, does not parse or
// replay, or is not the one its quote vouched for; or it quoted no sha256
// PCR. `reason` is the failing check's reason code (eventlog_missing,
// eventlog_*, sha256_not_quoted).
struct UnusableMachine {
  std::string hostname;
  std::string reason;
  std::string message;
};

// Machines on one platform: firmware version (the EV_S_CRTM_VERSION event's
// data on PCR 0, printable; "" when none or when its data does not match its
// digest) and the TPM's manufacturer and model.
struct PlatformGroup {
  std::string firmware, tpm_manufacturer, tpm_model;
  std::vector<std::string> hostnames;  // sorted
};

// One value a candidate rule took, and the machines that had it. `items`
// describes it: digests as "sha256:<hex> (what)", a boolean or state as a
// word, a command line as "kernel command line sha256:<hex of its text>"
// (never the text).
struct RuleValue {
  std::vector<std::string> items;
  std::vector<std::string> hostnames;  // sorted
};

// One candidate rule: "require_secure_boot", "require_separators",
// "boot_applications.allowed", "authorities.allowed", "db.required",
// "dbx.required", "kernel_cmdline.exact", "boot_files.allowed",
// "uki.sections", "pcrs.sha256.N" (N = 0..9 and 14, each PCR its own rule).
struct RuleOutcome {
  std::string rule;
  // A strict majority agreed. When its value sets nothing (Secure Boot not
  // enabled, no command line, no UKI, an empty db), `decided` is true but
  // `proposed` false: the policy gets no such rule, rightly.
  bool decided = false;
  bool proposed = false;
  std::vector<std::string> agreeing;  // sorted; empty when undecided
  // Every value seen, the majority's first, the others by machine count;
  // when undecided, these are what an operator must choose between.
  std::vector<RuleValue> values;
};

// One way a machine differs from the majority, under a rule ("platform" for
// its firmware or TPM).
struct Difference {
  std::string rule;
  std::string message;
};

// A machine that differs from the majority or that the proposal would refuse.
struct OddMachine {
  std::string hostname;
  std::vector<Difference> differences;
  std::vector<attest::Violation> violations;  // attest::Evaluate of the proposal
};

struct Proposal {
  attest::BootPolicy policy;
  std::string policy_json;                // wire::FormatBootPolicyJson(policy)
  std::vector<std::string> machines;      // usable, sorted
  std::vector<UnusableMachine> unusable;  // in input order
  std::vector<PlatformGroup> platforms;   // largest first
  std::vector<RuleOutcome> rules;         // in the order listed at RuleOutcome
  std::vector<OddMachine> odd;            // sorted by hostname
};

// For each usable machine: parse the log, replay it, CompareLogWithQuote
// against `quoted`, ExtractBootFacts; facts are taken only from PCRs in the
// quote's sha256 bank. Each candidate rule is proposed with the value a
// STRICT majority of the usable machines hold; without one it is left out
// and listed undecided (never widened to cover everyone). Then the proposed
// policy is evaluated against every usable machine. No machines (or none
// usable) proposes the empty policy. Throws only on resource exhaustion.
Proposal ProposeBootPolicy(std::span<const ObservedBoot> boots);
// Its admin API form is wire::PolicyProposalView (core::ProposalViewOf,
// core/policy_service.h).

// For rackgatectl: a summary line ("N machines, K platforms, M odd"), the
// odd machines by name with what differs and the rules they would break,
// the undecided rules with each value's machines, the unusable machines.
std::string FormatProposalText(const Proposal& proposal);

// One top-level field of the policy that the proposal adds, removes or
// changes; `added` and `removed` are its entries, each "path value"
// (a digest list's entries one by one, e.g.
// "boot_applications.allowed sha256:<hex>"; a scalar as JSON).
struct PolicyChange {
  std::string rule;
  std::string kind;  // "added", "removed", "changed"
  std::vector<std::string> added;
  std::vector<std::string> removed;
};

struct PolicyDiff {
  bool had_current = false;
  // Set when the current text does not parse as a policy: it is then
  // compared as plain JSON (or as empty, when not JSON), and this says why.
  std::string note;
  std::vector<PolicyChange> changes;  // by rule name
};

// Rule by rule (top-level fields). Both texts are normalized through
// wire::ParseBootPolicy and FormatBootPolicyJson when they parse, so that
// "sha256:<HEX>" and bare hex, key order or a false boolean make no
// difference. No current policy: everything is added. A kernel command line
// (kernel_cmdline.exact, or any other kernel_cmdline value than the
// required and forbidden lists) is never an entry's value: its entry is
// "kernel_cmdline.exact sha256:<hex of its text>".
PolicyDiff DiffBootPolicies(const std::optional<std::string>& current_json,
                            const std::string& proposed_json);

// One line per entry: "+ path value", "- path value"; "(no change)" when
// none; the note first when set.
std::string FormatPolicyDiffText(const PolicyDiff& diff);

// A policy document as it may be shown (on a screen, in an answer's JSON):
// the document with each kernel_cmdline value other than the required and
// forbidden lists replaced by the SHA-256 of its text, under its name with
// "_sha256" added: {"kernel_cmdline": {"exact_sha256": "sha256:<hex>",
// "forbidden": [...]}}. The new name keeps a shown policy from being put
// back as one that pins the digest's text: the parser refuses it. A text
// that is not a JSON object is shown as "not a JSON object (sha256:<hex>)".
// The document itself (the store, `--output FILE`) keeps the text: there
// it is the rule.
nlohmann::json PolicyForDisplay(const std::string& policy_text);
// The same, as text: the document's own key order, 2-space indent, and a
// newline at the end.
std::string FormatPolicyForDisplay(const std::string& policy_text);

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_POLICY_PROPOSAL_H_
