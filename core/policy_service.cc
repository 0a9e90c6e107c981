// Boot policy administration: mode, propose, accept, put.
#include "core/policy_service.h"

#include <utility>
#include <vector>

#include "base/log.h"
#include "core/attestation.h"
#include "core/secrets.h"
#include "wire/boot_policy_json.h"

namespace rackgate::core {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("policy");
  return log;
}

Result<storage::Pool> LoadPool(storage::PoolReader* store, const std::string& name) {
  auto pool = store->GetPool(name);
  if (!pool.ok() && pool.status().code() == Status::Code::kIoError) return StoreBusy(pool.status());
  return pool;
}

// The audit row keeps the diff, bounded: a proposal over a large fleet can
// list thousands of digests, and the row's digests of both policies say
// exactly which texts were involved.
constexpr size_t kMaxAuditDiffLines = 200;

nlohmann::json DiffForAudit(const PolicyDiff& diff) {
  nlohmann::json lines = nlohmann::json::array();
  size_t n = 0, total = 0;
  for (const auto& c : diff.changes) {
    for (const auto& a : c.added) {
      ++total;
      if (n < kMaxAuditDiffLines) lines.push_back("+ " + a), ++n;
    }
    for (const auto& r : c.removed) {
      ++total;
      if (n < kMaxAuditDiffLines) lines.push_back("- " + r), ++n;
    }
  }
  if (total > n) lines.push_back("... " + std::to_string(total - n) + " more");
  return lines;
}

}  // namespace

PolicyService::PolicyService(storage::PolicyStore* store, Clock clock) : store_(store), clock_(std::move(clock)) {}

Result<ProposalReport> PolicyService::Propose(const std::string& name) {
  auto pool = LoadPool(store_, name);
  if (!pool.ok()) return pool.status();
  auto observations = store_->ListBootObservations(name);
  if (!observations.ok()) return StoreBusy(observations.status());
  std::vector<ObservedBoot> boots;
  boots.reserve(observations->size());
  for (auto& o : *observations) {
    ObservedBoot b;
    b.hostname = o.hostname;
    b.tpm_manufacturer = o.tpm_manufacturer;
    b.tpm_model = o.tpm_model;
    b.event_log = std::move(o.event_log);
    // Written by core from a verified quote; one that does not read back
    // leaves the machine without quoted PCRs, and so unusable, named.
    if (auto pcrs = wire::ParsePcrValuesJson(o.pcrs_json); pcrs.ok()) b.quoted = std::move(pcrs).value();
    boots.push_back(std::move(b));
  }
  ProposalReport out;
  out.pool = std::move(pool).value();
  out.observed = boots.size();
  out.proposal = ProposeBootPolicy(boots);
  out.diff = DiffBootPolicies(out.pool.boot_policy_json, out.proposal.policy_json);
  out.proposal_sha256 = Sha256Hex(out.proposal.policy_json);
  return out;
}

Result<PolicyApplied> PolicyService::Apply(const storage::Pool& pool, const std::optional<std::string>& policy_text,
                                           bool keep_observing, nlohmann::json detail,
                                           const storage::Actor& actor) {
  PolicyDiff diff;
  if (policy_text) diff = DiffBootPolicies(pool.boot_policy_json, *policy_text);
  detail["diff"] = DiffForAudit(diff);
  storage::PoolPolicyChange change;
  change.pool = pool.name;
  change.boot_policy_json = policy_text;
  change.mode = keep_observing ? storage::kPolicyModeObserve : storage::kPolicyModeEnforce;
  change.audit_detail_json = detail.dump();
  auto stored = store_->SetPoolBootPolicy(change, actor, clock_());
  if (!stored.ok()) {
    if (stored.status().code() == Status::Code::kIoError) return StoreBusy(stored.status());
    return stored.status();
  }
  Log()->info("{} put a boot policy in force on pool {} ({}): mode {}", actor.name, pool.name,
              detail.value("source", std::string("put")), stored->boot_policy_mode);
  return PolicyApplied{std::move(stored).value(), std::move(diff)};
}

Result<PolicyApplied> PolicyService::Accept(const std::string& name, const std::optional<std::string>& expect_sha256,
                                            bool keep_observing, const storage::Actor& actor) {
  auto report = Propose(name);
  if (!report.ok()) return report.status();
  if (expect_sha256 && *expect_sha256 != report->proposal_sha256) {
    return Status::Unsupported("proposal_changed",
                               "the proposal changed since you read it (machines were observed since): run "
                               "`rackgatectl policy propose --pool " + name + "` again and accept what it shows");
  }
  if (report->proposal.machines.empty()) {
    return Status::Unsupported("nothing_observed",
                               "no machine of pool " + name + " was observed with a usable boot: run `rackgatectl "
                               "policy observe --pool " + name + "`, boot its machines, then propose again");
  }
  // What is stored must be what attestation can read: a proposal the
  // parser refused would leave every machine of the pool waiting on
  // policy_invalid. (A writer and parser out of step is a bug; said so.)
  if (auto parsed = wire::ParseBootPolicy(report->proposal.policy_json); !parsed.ok()) {
    Log()->error("the proposal for pool {} does not read back: {}", name, parsed.status().ToString());
    return Status::Corruption("proposal_invalid",
                              "the proposal does not read back as a policy (a rackgate bug): write it with "
                              "`rackgatectl policy propose --output FILE` and `policy put` an edited one");
  }
  nlohmann::json detail = {{"source", "proposal"},
                           {"proposal_sha256", report->proposal_sha256},
                           {"machines", report->proposal.machines.size()}};
  nlohmann::json odd = nlohmann::json::array();
  for (const auto& m : report->proposal.odd) odd.push_back(m.hostname);
  detail["odd"] = odd;
  return Apply(report->pool, report->proposal.policy_json, keep_observing, std::move(detail), actor);
}

Result<PolicyApplied> PolicyService::Put(const std::string& name, const std::optional<std::string>& policy_text,
                                         bool keep_observing, const storage::Actor& actor) {
  if (policy_text) {
    if (auto parsed = wire::ParseBootPolicy(*policy_text); !parsed.ok()) return parsed.status();
  }
  auto pool = LoadPool(store_, name);
  if (!pool.ok()) return pool.status();
  return Apply(*pool, policy_text, keep_observing, {{"source", policy_text ? "put" : "cleared"}}, actor);
}

Result<storage::Pool> PolicyService::SetMode(const std::string& name, const std::string& mode,
                                             const storage::Actor& actor) {
  if (mode != storage::kPolicyModeObserve && mode != storage::kPolicyModeEnforce) {
    return Status::InvalidArgument("field_invalid", "mode is observe or enforce");
  }
  storage::PoolPolicyChange change;
  change.pool = name;
  change.mode = mode;
  change.audit_detail_json = nlohmann::json{{"source", "mode"}}.dump();
  auto stored = store_->SetPoolBootPolicy(change, actor, clock_());
  if (!stored.ok() && stored.status().code() == Status::Code::kIoError) return StoreBusy(stored.status());
  if (stored.ok()) {
    if (mode == storage::kPolicyModeObserve) {
      Log()->warn("{} set pool {} to OBSERVE boot policy: the policy is evaluated and recorded, NOT ENFORCED",
                  actor.name, name);
    } else {
      Log()->info("{} set pool {} to enforce its boot policy", actor.name, name);
    }
  }
  return stored;
}

}  // namespace rackgate::core
