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

std::vector<std::string> DiffForAudit(const PolicyDiff& diff) {
  std::vector<std::string> lines;
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

// The audit's why: the operator's reason, bounded, or what they did.
std::string Why(const std::string& reason, const std::string& fallback) {
  return reason.empty() ? fallback : reason.substr(0, 1024);
}

// A policy as it may be shown (PolicyForDisplay); nullopt when none.
std::optional<std::string> Shown(const std::optional<std::string>& policy_json) {
  if (!policy_json) return std::nullopt;
  return PolicyForDisplay(*policy_json).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void AddProposalParts(const Proposal& p, wire::PolicyProposalView* v) {
  v->machines = p.machines;
  for (const PlatformGroup& g : p.platforms) {
    v->platforms.push_back({g.firmware, g.tpm_manufacturer, g.tpm_model, g.hostnames});
  }
  for (const RuleOutcome& r : p.rules) {
    wire::ProposalRuleView rule{r.rule, r.decided, r.proposed, r.agreeing, {}};
    for (const RuleValue& value : r.values) rule.values.push_back({value.items, value.hostnames});
    v->rules.push_back(std::move(rule));
  }
  for (const OddMachine& o : p.odd) {
    wire::ProposalOddView odd{o.hostname, {}, {}};
    for (const Difference& d : o.differences) odd.differences.push_back({d.rule, d.message});
    for (const attest::Violation& x : o.violations) odd.violations.push_back({x.rule, x.reason, x.message});
    v->odd.push_back(std::move(odd));
  }
  for (const UnusableMachine& u : p.unusable) v->unusable.push_back({u.hostname, u.reason, u.message});
}

}  // namespace

wire::PolicyDiffView PolicyDiffViewOf(const PolicyDiff& diff) {
  wire::PolicyDiffView v{diff.had_current, diff.note, {}};
  for (const PolicyChange& c : diff.changes) v.changes.push_back({c.rule, c.kind, c.added, c.removed});
  return v;
}

wire::PolicyProposalView ProposalViewOf(const ProposalReport& report) {
  wire::PolicyProposalView v;
  v.pool = report.pool.name;
  v.mode = report.pool.boot_policy_mode;
  v.observed = static_cast<int64_t>(report.observed);
  v.proposal_sha256 = report.proposal_sha256;
  v.policy_shown_json = *Shown(report.proposal.policy_json);
  AddProposalParts(report.proposal, &v);
  v.diff = PolicyDiffViewOf(report.diff);
  // The CLI links no core: it prints these as they are.
  v.text = FormatProposalText(report.proposal);
  v.diff_text = FormatPolicyDiffText(report.diff);
  v.policy_shown = FormatPolicyForDisplay(report.proposal.policy_json);
  // The document itself, for `policy propose --output FILE` only: the CLI
  // writes it to the operator's file and never prints it.
  v.policy_text = report.proposal.policy_json;
  return v;
}

wire::PolicyAppliedView AppliedViewOf(const PolicyApplied& a) {
  return {a.pool.name, a.pool.boot_policy_mode, Shown(a.pool.boot_policy_json), PolicyDiffViewOf(a.diff),
          FormatPolicyDiffText(a.diff)};
}

PolicyService::PolicyService(storage::PolicyStore* store, Clock clock) : store_(store), clock_(std::move(clock)) {}

Result<wire::PolicyShowView> PolicyService::Show(const std::string& name) {
  auto pool = LoadPool(store_, name);
  if (!pool.ok()) return pool.status();
  auto observed = store_->ListBootObservations(name);
  if (!observed.ok()) return StoreBusy(observed.status());
  wire::PolicyShowView v;
  v.pool = name;
  v.mode = pool->boot_policy_mode;
  v.policy_shown_json = Shown(pool->boot_policy_json);
  v.observed = static_cast<int64_t>(observed->size());
  v.verdicts = {{"pass", 0}, {"fail", 0}, {"none", 0}};
  for (const storage::BootObservation& o : *observed) {
    ++v.verdicts[o.verdict];
    v.machines.push_back({o.hostname, o.at, o.verdict, o.violations});
  }
  // The document itself, for `policy show --output FILE` only: the CLI
  // writes it to the operator's file and never prints it.
  v.policy_text = pool->boot_policy_json;
  return v;
}

Result<wire::PolicyProposalView> PolicyService::ShowProposal(const std::string& name) {
  auto report = Propose(name);
  if (!report.ok()) return report.status();
  return ProposalViewOf(*report);
}

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
                                           bool keep_observing, storage::AuditDetail detail,
                                           const storage::Actor& actor) {
  PolicyDiff diff;
  if (policy_text) diff = DiffBootPolicies(pool.boot_policy_json, *policy_text);
  detail.Texts("diff", DiffForAudit(diff));
  storage::PoolPolicyChange change;
  change.pool = pool.name;
  change.boot_policy_json = policy_text;
  change.mode = keep_observing ? storage::kPolicyModeObserve : storage::kPolicyModeEnforce;
  change.audit_detail_json = detail.Json();
  auto stored = store_->SetPoolBootPolicy(change, actor, clock_());
  if (!stored.ok()) {
    if (stored.status().code() == Status::Code::kIoError) return StoreBusy(stored.status());
    return stored.status();
  }
  Log()->info("{} put a boot policy in force on pool {} ({}): mode {}", actor.name, pool.name,
              detail.FindText("source") != nullptr ? *detail.FindText("source") : "put", stored->boot_policy_mode);
  return PolicyApplied{std::move(stored).value(), std::move(diff)};
}

Result<wire::PolicyAppliedView> PolicyService::Accept(const std::string& name,
                                                     const wire::PolicyAcceptRequest& request,
                                                     const storage::Actor& actor) {
  auto report = Propose(name);
  if (!report.ok()) return report.status();
  if (request.proposal_sha256 && *request.proposal_sha256 != report->proposal_sha256) {
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
  std::vector<std::string> odd;
  for (const auto& m : report->proposal.odd) odd.push_back(m.hostname);
  storage::AuditDetail detail;
  detail.Text("source", "proposal")
      .Text("proposal_sha256", report->proposal_sha256)
      .Int("machines", static_cast<int64_t>(report->proposal.machines.size()))
      .Texts("odd", std::move(odd));
  storage::Actor a = actor;
  a.why = Why(request.reason, "boot policy proposal accepted by an operator");
  auto applied = Apply(report->pool, report->proposal.policy_json, request.keep_observing, std::move(detail), a);
  if (!applied.ok()) return applied.status();
  return AppliedViewOf(*applied);
}

Result<wire::PolicyAppliedView> PolicyService::Put(const std::string& name, const wire::PolicyPutRequest& request,
                                                  const storage::Actor& actor) {
  const std::optional<std::string>& text = request.policy_text;
  if (text) {
    if (auto parsed = wire::ParseBootPolicy(*text); !parsed.ok()) return parsed.status();
  }
  auto pool = LoadPool(store_, name);
  if (!pool.ok()) return pool.status();
  storage::Actor a = actor;
  a.why = Why(request.reason, text ? "boot policy put by an operator" : "boot policy cleared by an operator");
  auto applied = Apply(*pool, text, request.keep_observing,
                       storage::AuditDetail().Text("source", text ? "put" : "cleared"), a);
  if (!applied.ok()) return applied.status();
  return AppliedViewOf(*applied);
}

Result<wire::PolicyModeView> PolicyService::SetMode(const std::string& name, const wire::PolicyModeRequest& request,
                                                    const storage::Actor& actor) {
  const std::string& mode = request.mode;
  if (mode != storage::kPolicyModeObserve && mode != storage::kPolicyModeEnforce) {
    return Status::InvalidArgument("field_invalid", "mode is observe or enforce");
  }
  storage::Actor a = actor;
  a.why = Why(request.reason, "boot policy mode set to " + mode + " by an operator");
  storage::PoolPolicyChange change;
  change.pool = name;
  change.mode = mode;
  change.audit_detail_json = storage::AuditDetail().Text("source", "mode").Json();
  auto stored = store_->SetPoolBootPolicy(change, a, clock_());
  if (!stored.ok() && stored.status().code() == Status::Code::kIoError) return StoreBusy(stored.status());
  if (!stored.ok()) return stored.status();
  if (mode == storage::kPolicyModeObserve) {
    Log()->warn("{} set pool {} to OBSERVE boot policy: the policy is evaluated and recorded, NOT ENFORCED",
                a.name, name);
  } else {
    Log()->info("{} set pool {} to enforce its boot policy", a.name, name);
  }
  return wire::PolicyModeView{stored->name, stored->boot_policy_mode, Shown(stored->boot_policy_json)};
}

}  // namespace rackgate::core
