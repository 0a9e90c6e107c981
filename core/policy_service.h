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
#include "storage/roles.h"

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

class PolicyService {
 public:
  using Clock = std::function<int64_t()>;
  // `store` is BORROWED and must outlive the service.
  PolicyService(storage::PolicyStore* store, Clock clock);

  // pool_unknown; store failures as StoreBusy.
  Result<ProposalReport> Propose(const std::string& pool);
  // Stores the proposal made now as the pool's policy and (unless
  // keep_observing) sets the pool enforcing, under one audit row whose
  // detail holds the diff and the odd machines. When `expect_sha256` is
  // given, the proposal made now must be that one (proposal_changed, 409:
  // machines were observed since). nothing_observed (409) when no observed
  // machine is usable: an empty proposal would enforce nothing.
  Result<PolicyApplied> Accept(const std::string& pool, const std::optional<std::string>& expect_sha256,
                               bool keep_observing, const storage::Actor& actor);
  // Puts an operator's policy (its text; nullopt clears the policy) in force:
  // policy_malformed for a text the parser refuses; keep_observing as Accept.
  Result<PolicyApplied> Put(const std::string& pool, const std::optional<std::string>& policy_text,
                            bool keep_observing, const storage::Actor& actor);
  // kPolicyModeObserve or kPolicyModeEnforce; field_invalid otherwise.
  Result<storage::Pool> SetMode(const std::string& pool, const std::string& mode, const storage::Actor& actor);

 private:
  Result<PolicyApplied> Apply(const storage::Pool& pool, const std::optional<std::string>& policy_text,
                              bool keep_observing, nlohmann::json detail, const storage::Actor& actor);

  storage::PolicyStore* store_;
  Clock clock_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_POLICY_SERVICE_H_
