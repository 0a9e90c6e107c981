// The admin API's boot policy bodies (docs/policy.md, "From observation to
// enforcement"; docs/policy-proposal.md) as typed values with encoders and
// decoders, for rackgated and `rackgatectl policy`: GET and PUT
// /v1/admin/pools/{name}/policy, POST .../policy/mode, GET
// .../policy/proposal, POST .../policy/accept. Decoding fails as
// wire/admin_pools.h says.
//
// SECURITY: a policy "as shown" has each kernel command line replaced by
// its digest (core::PolicyForDisplay; docs/policy-proposal.md, "What is
// shown where"); only `policy_text` holds the document itself, for the
// CLI's --output FILE, never for a screen.
#ifndef RACKGATE_WIRE_ADMIN_POLICY_H_
#define RACKGATE_WIRE_ADMIN_POLICY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::wire {

// --- Requests. An empty body is an empty object. "reason" (the audit's
// why) is read when it is a string and ignored otherwise, as the appliance
// always did; "" is none.

// POST .../policy/mode: "mode" is required (field_missing when absent or
// not a string); whether it is observe or enforce is the core's to check.
struct PolicyModeRequest {
  std::string mode;
  std::string reason;
  bool operator==(const PolicyModeRequest&) const = default;
};
std::string EncodePolicyModeRequest(const PolicyModeRequest& r);
Result<PolicyModeRequest> DecodePolicyModeRequest(std::string_view body);

// POST .../policy/accept: accept only the proposal with this digest when
// given (field_invalid when not a string); keep_observing: store it, keep
// observing (field_invalid when not a boolean).
struct PolicyAcceptRequest {
  std::optional<std::string> proposal_sha256;
  bool keep_observing = false;
  std::string reason;
  bool operator==(const PolicyAcceptRequest&) const = default;
};
std::string EncodePolicyAcceptRequest(const PolicyAcceptRequest& r);
Result<PolicyAcceptRequest> DecodePolicyAcceptRequest(std::string_view body);

// PUT .../policy: "policy" is required (field_missing): the policy's text
// as a JSON string (so that the parser sees duplicate keys a JSON object
// would have lost), a JSON object (taken as its compact text), or null to
// clear the pool's policy (policy_text nullopt). Encoded as a string.
struct PolicyPutRequest {
  std::optional<std::string> policy_text;
  bool keep_observing = false;
  std::string reason;
  bool operator==(const PolicyPutRequest&) const = default;
};
std::string EncodePolicyPutRequest(const PolicyPutRequest& r);
Result<PolicyPutRequest> DecodePolicyPutRequest(std::string_view body);

// --- Answers. A policy "as shown" travels as its compact JSON text (an
// object, or a JSON string saying it is not one); nullopt is null (no
// policy).

// The diff of two policies, rule by rule (core::PolicyDiff).
struct PolicyChangeView {
  std::string rule;
  std::string kind;  // added, removed, changed
  std::vector<std::string> added;
  std::vector<std::string> removed;
  bool operator==(const PolicyChangeView&) const = default;
};
struct PolicyDiffView {
  bool had_current = false;
  std::string note;
  std::vector<PolicyChangeView> changes;
  bool operator==(const PolicyDiffView&) const = default;
};

// One machine's latest observed boot and the verdict of the policy then.
struct ObservedMachineView {
  std::string hostname;
  int64_t at = 0;
  std::string verdict;  // pass, fail or none
  std::vector<std::string> violations;  // rule:reason
  bool operator==(const ObservedMachineView&) const = default;
};

// GET .../policy.
struct PolicyShowView {
  std::string pool;
  std::string mode;
  std::optional<std::string> policy_shown_json;
  int64_t observed = 0;
  std::map<std::string, int64_t> verdicts;  // pass, fail, none: machines each
  std::vector<ObservedMachineView> machines;
  std::optional<std::string> policy_text;  // the document, for --output FILE only
  bool operator==(const PolicyShowView&) const = default;
};
std::string EncodePolicyShowView(const PolicyShowView& v);
Result<PolicyShowView> DecodePolicyShowView(std::string_view body);

// POST .../policy/mode.
struct PolicyModeView {
  std::string pool;
  std::string mode;
  std::optional<std::string> policy_shown_json;
  bool operator==(const PolicyModeView&) const = default;
};
std::string EncodePolicyModeView(const PolicyModeView& v);
Result<PolicyModeView> DecodePolicyModeView(std::string_view body);

// POST .../policy/accept and PUT .../policy: the policy in force, its mode
// and the diff against the previous one (diff_text: as the CLI prints it).
struct PolicyAppliedView {
  std::string pool;
  std::string mode;
  std::optional<std::string> policy_shown_json;
  PolicyDiffView diff;
  std::string diff_text;
  bool operator==(const PolicyAppliedView&) const = default;
};
std::string EncodePolicyAppliedView(const PolicyAppliedView& v);
Result<PolicyAppliedView> DecodePolicyAppliedView(std::string_view body);

// The proposal's parts (core::Proposal, docs/policy-proposal.md).
struct ProposalPlatformView {
  std::string firmware, tpm_manufacturer, tpm_model;
  std::vector<std::string> hostnames;
  bool operator==(const ProposalPlatformView&) const = default;
};
struct ProposalValueView {
  std::vector<std::string> items;
  std::vector<std::string> hostnames;
  bool operator==(const ProposalValueView&) const = default;
};
struct ProposalRuleView {
  std::string rule;
  bool decided = false;
  bool proposed = false;
  std::vector<std::string> agreeing;
  std::vector<ProposalValueView> values;
  bool operator==(const ProposalRuleView&) const = default;
};
struct ProposalDifferenceView {
  std::string rule, message;
  bool operator==(const ProposalDifferenceView&) const = default;
};
struct ProposalViolationView {
  std::string rule, reason, message;
  bool operator==(const ProposalViolationView&) const = default;
};
struct ProposalOddView {
  std::string hostname;
  std::vector<ProposalDifferenceView> differences;
  std::vector<ProposalViolationView> violations;
  bool operator==(const ProposalOddView&) const = default;
};
struct ProposalUnusableView {
  std::string hostname, reason, message;
  bool operator==(const ProposalUnusableView&) const = default;
};

// GET .../policy/proposal. On the wire also "summary" ({"machines",
// "platforms", "odd", "unusable"}: the lists' sizes) and "undecided" (the
// rules not decided), both made by the encoder and not read back.
struct PolicyProposalView {
  std::string pool;
  std::string mode;
  int64_t observed = 0;            // observations the proposal was made from
  std::string proposal_sha256;     // of the document: what accept may pin
  std::string policy_shown_json = "{}";  // the proposed policy as shown
  std::vector<std::string> machines;  // usable, sorted
  std::vector<ProposalPlatformView> platforms;
  std::vector<ProposalRuleView> rules;
  std::vector<ProposalOddView> odd;
  std::vector<ProposalUnusableView> unusable;
  PolicyDiffView diff;  // the pool's current policy -> the proposal
  // What the CLI prints as it is (it links no core); nullopt is left out.
  std::optional<std::string> text;          // the report
  std::optional<std::string> diff_text;     // the diff
  std::optional<std::string> policy_shown;  // the proposed policy as shown, indented
  std::optional<std::string> policy_text;   // the document, for --output FILE only
  bool operator==(const PolicyProposalView&) const = default;
};
std::string EncodePolicyProposalView(const PolicyProposalView& v);
Result<PolicyProposalView> DecodePolicyProposalView(std::string_view body);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_ADMIN_POLICY_H_
