// Boot policy administration (docs/policy.md, "From observation to
// enforcement"): a pool's mode, the proposal made from what its machines
// were observed booting, accepting it, or putting an edited policy in force.
// The admin API calls these; they decide, the handlers only decode and
// encode.
//
// Thread safety: as the store's; no state of its own.
#ifndef RACKGATE_CORE_POLICY_SERVICE_H_
#define RACKGATE_CORE_POLICY_SERVICE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/status.h"
#include "core/policy_proposal.h"
#include "storage/audit_detail.h"
#include "storage/roles.h"
#include "wire/admin_policy.h"

namespace rackgate::core {

// What `policy propose` shows.
struct ProposalReport {
  storage::Pool pool;       // with its current policy and mode
  size_t observed = 0;      // observations the proposal was made from
  Proposal proposal;
  PolicyDiff diff;          // the pool's current policy -> the proposal
  std::string proposal_sha256;  // of proposal.policy_json: what accept may pin
};

// A policy put in force (accept or put).
struct PolicyApplied {
  storage::Pool pool;
  PolicyDiff diff;
};

// The admin API's views (wire/admin_policy.h) of the core's values. A
// policy is shown through PolicyForDisplay: a kernel command line by its
// digest only.
wire::PolicyDiffView PolicyDiffViewOf(const PolicyDiff& diff);
// The report with its texts (FormatProposalText, FormatPolicyDiffText,
// FormatPolicyForDisplay) and the document itself (policy_text).
wire::PolicyProposalView ProposalViewOf(const ProposalReport& report);
wire::PolicyAppliedView AppliedViewOf(const PolicyApplied& applied);

class PolicyService {
 public:
  using Clock = std::function<int64_t()>;
  // `store` is BORROWED and must outlive the service.
  PolicyService(storage::PolicyStore* store, Clock clock);

  // Every method: pool_unknown (kNotFound) for a pool that does not exist;
  // store failures as StoreBusy. The audit's why is the request's reason
  // (at most 1024 bytes), or a sentence saying what an operator did.

  // GET .../policy: the pool's mode, its policy (as shown, and the document
  // for --output), its machines' latest observed boots and how many of them
  // passed, failed or had no policy to pass.
  Result<wire::PolicyShowView> Show(const std::string& pool);
  // The proposal made now from the pool's observed boots.
  Result<ProposalReport> Propose(const std::string& pool);
  // GET .../policy/proposal: Propose's report as the admin API shows it.
  Result<wire::PolicyProposalView> ShowProposal(const std::string& pool);
  // Stores the proposal made now as the pool's policy and (unless
  // keep_observing) sets the pool enforcing, under one audit row whose
  // detail holds the diff and the odd machines. When a proposal_sha256 is
  // given, the proposal made now must be that one (proposal_changed, 409:
  // machines were observed since). nothing_observed (409) when no observed
  // machine is usable: an empty proposal would enforce nothing.
  // proposal_invalid (kCorruption) when the proposal does not read back as
  // a policy (a bug).
  Result<wire::PolicyAppliedView> Accept(const std::string& pool, const wire::PolicyAcceptRequest& request,
                                         const storage::Actor& actor);
  // Puts an operator's policy (its text; nullopt clears the policy) in force:
  // the parser's refusal (policy_malformed, ...) for a text it refuses,
  // before the pool is read; keep_observing as Accept.
  Result<wire::PolicyAppliedView> Put(const std::string& pool, const wire::PolicyPutRequest& request,
                                      const storage::Actor& actor);
  // kPolicyModeObserve or kPolicyModeEnforce; field_invalid otherwise.
  Result<wire::PolicyModeView> SetMode(const std::string& pool, const wire::PolicyModeRequest& request,
                                       const storage::Actor& actor);

 private:
  Result<PolicyApplied> Apply(const storage::Pool& pool, const std::optional<std::string>& policy_text,
                              bool keep_observing, storage::AuditDetail detail, const storage::Actor& actor);

  storage::PolicyStore* store_;
  Clock clock_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_POLICY_SERVICE_H_
