// Approver mode's decision about a kubelet CSR held by the API server.
#include "core/kube_approver.h"

#include <algorithm>
#include <utility>

#include "attest/boot_facts.h"
#include "base/log.h"
#include "base/text.h"
#include "core/csr_service.h"
#include "core/secrets.h"
#include "core/trust.h"

namespace rackgate::core {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("kubernetes");
  return log;
}

constexpr std::string_view kNodePrefix = "system:node:";
constexpr std::string_view kNodesGroup = "system:nodes";

KubeAction None(std::string_view reason, bool retry = false) {
  KubeAction a;
  a.reason = std::string(reason);
  a.retry = retry;
  return a;
}

KubeAction Deny(std::string reason, std::string message) {  // reason-helper: KubeDeny
  KubeAction a;
  a.kind = KubeAction::Kind::kDeny;
  a.reason = std::move(reason);
  a.message = std::move(message);
  return a;
}

// The node name a CSR claims: the request's one CN "system:node:<name>" (the
// certificate would be that node's), else, for a request that does not
// parse, the requester's own when it is a node; "" when it claims none.
std::string ClaimedNode(const KubeCsr& c, const Result<csr::Csr>& parsed) {
  if (parsed.ok()) {
    if (parsed->common_names.size() != 1) return "";
    const std::string& cn = parsed->common_names.front();
    return cn.rfind(kNodePrefix, 0) == 0 ? cn.substr(kNodePrefix.size()) : "";
  }
  return c.username.rfind(kNodePrefix, 0) == 0 ? c.username.substr(kNodePrefix.size()) : "";
}

bool InAny(const std::vector<std::string>& groups, const std::vector<std::string>& wanted) {
  return std::any_of(groups.begin(), groups.end(), [&](const std::string& g) {
    return std::find(wanted.begin(), wanted.end(), g) != wanted.end();
  });
}

// What the requester is asking for, or a denial: the node itself (rotation
// of its client certificate, or its serving certificate), or a bootstrapper
// for a new node's client certificate.
Result<std::string> Purpose(const KubeCsr& c, csr::Kind kind, const std::string& node,
                            const KubeApproverOptions& options) {
  const bool is_node = c.username == std::string(kNodePrefix) + node &&
                       std::find(c.groups.begin(), c.groups.end(), kNodesGroup) != c.groups.end();
  if (kind == csr::Kind::kServing) {
    if (is_node) return std::string(storage::kKubePurposeServing);
  } else if (is_node) {
    return std::string(storage::kKubePurposeRotation);
  } else if (InAny(c.groups, options.bootstrapper_groups)) {
    return std::string(storage::kKubePurposeJoin);
  }
  return Status::VerificationFailed(
      "csr_requester_not_allowed",
      "requested by '" + text::PrintableAscii(c.username, 80) + "', which is " +
          (kind == csr::Kind::kServing ? "not the node itself (system:node:<name> in system:nodes)"
                                       : "neither the node itself nor in a bootstrapper group"));
}

}  // namespace

KubeApprover::KubeApprover(storage::KubeApprovalStore* store, KubeApproverOptions options, Metrics* metrics,
                           std::function<int64_t()> clock)
    : store_(store), options_(std::move(options)), metrics_(metrics), clock_(std::move(clock)) {}

KubeAction KubeApprover::Handle(const KubeCsr& c) {
  KubeAction action;
  if (c.signer_name != csr::kClientSignerName && c.signer_name != csr::kServingSignerName) {
    return None(kKubeIgnoreSigner);  // not counted: every CSR of the cluster passes here
  }
  if (c.decided) {
    action = None(kKubeIgnoreDecided);
  } else if (auto recorded = store_->GetKubeCsr(c.uid); recorded.ok()) {
    action = Carry(*recorded);
    if (action.kind == KubeAction::Kind::kApprove) action = UnlessEpochEnded(*recorded, std::move(action));
  } else if (recorded.status().code() != Status::Code::kNotFound) {
    Log()->error("CSR {}: store: {}", text::PrintableAscii(c.name, 80), recorded.status().ToString());
    action = None(kKubeIgnoreBusy, true);
  } else {
    storage::Machine machine;
    storage::KubeCsrDecision record;
    action = Decide(c, &machine, &record);
    if (action.kind != KubeAction::Kind::kNone || action.waiting) {
      action.hostname = machine.hostname;
      action.purpose = record.purpose;
      action = Record(std::move(record), std::move(action));
    }
  }
  // The object the action is for: the watcher writes it to that uid only.
  action.uid = c.uid;
  Count(action);
  return action;
}

KubeAction KubeApprover::Decide(const KubeCsr& c, storage::Machine* m, storage::KubeCsrDecision* d) {
  const auto kind = csr::KindFromSigner(c.signer_name);
  const auto parsed = csr::ParseCsr(c.request_pem);
  const std::string node = ClaimedNode(c, parsed);
  if (node.empty()) return None(kKubeIgnoreNotNode);
  auto machine = store_->GetMachine(node);
  if (!machine.ok()) {
    if (machine.status().code() == Status::Code::kNotFound) return None(kKubeIgnoreUnknown);
    return None(kKubeIgnoreBusy, true);
  }
  *m = std::move(machine).value();
  auto pool = store_->GetPool(m->pool);
  if (!pool.ok()) return None(kKubeIgnoreBusy, true);
  auto settings = ParsePoolSettings(pool->settings_json);
  if (!settings.ok()) return None(kKubeIgnoreBusy, true);
  if (!settings->approver_mode) return None(kKubeIgnoreSignerPool);

  // From here on the CSR claims a machine of an approver-mode pool: every
  // failed rule is a denial with its reason.
  d->uid = c.uid;
  d->name = c.name;
  d->machine_id = m->id;
  d->kind = std::string(*kind == csr::Kind::kClient ? storage::kCertClient : storage::kCertServing);
  d->requester = text::PrintableAscii(c.username, 256);
  d->decided_by = "rackgate";
  auto purpose = Purpose(c, *kind, node, options_);
  d->purpose = purpose.ok() ? *purpose : std::string(*kind == csr::Kind::kClient ? storage::kKubePurposeJoin
                                                                                  : storage::kKubePurposeServing);
  if (!parsed.ok()) {
    d->public_key_sha256 = Sha256(c.request_pem);  // no key to name: the request's bytes
    return Deny(parsed.status().reason(), parsed.status().message());
  }
  d->public_key_sha256 = Sha256(parsed->spki_der);
  if (!purpose.ok()) return Deny(purpose.status().reason(), purpose.status().message());

  const bool join = d->purpose == storage::kKubePurposeJoin;
  // SECURITY: a rotation or a serving certificate follows the client
  // certificate the machine joined with in its current epoch. After a reset
  // (or a new EK) the API server still accepts the old owner's certificate
  // as system:node:<name>, and it is the only credential a rotation shows:
  // nothing but a new join is approved until the machine joined again
  // (checked again in the store's transaction).
  if (!join && (m->state != storage::MachineState::kJoined || !m->client_cert_issued_at)) {
    return Deny(std::string(storage::kKubeReasonNotJoined),
                m->hostname + " has not joined since its last reset (it is " +
                    std::string(storage::StateName(m->state)) + "): a " + d->purpose +
                    " certificate is approved only for a machine that joined in its current epoch; its kubelet "
                    "joins first with its bootstrap credential and the key rackgate-agent registers");
  }
  const int64_t now = clock_();
  if (Status s = CheckTrust(*m, *settings, now); !s.ok()) return Deny(s.reason(), s.message());
  // The attestation's age: a join within the client window after it; a
  // rotation or a serving certificate within the pool's (or the
  // approver's) maximum age, so a node renews only while it attests.
  const int64_t age = join ? settings->client_window_seconds.value_or(options_.client_window_seconds)
                           : settings->max_attestation_age_seconds.value_or(options_.max_attestation_age_seconds);

  bool key_registered = false;
  // A new node's key must be one its agent registered; a rotation's and a
  // serving certificate's keys are the kubelet's own, made after it joined
  // (kubelet 1.20 cannot be handed them), so the requester's identity (the
  // node's current certificate, checked by the API server), trust and
  // attestation age stand for them.
  if (join) {
    auto key = store_->FindAttestedKey(m->id, d->kind, d->public_key_sha256);
    if (!key.ok() && key.status().code() != Status::Code::kNotFound) return None(kKubeIgnoreBusy, true);
    if (!key.ok()) {
      return Deny("key_not_attested",
                  "the CSR's public key was never registered by the node's rackgate-agent in an attested "
                  "session; the agent registers the kubelet's key after it attests");
    }
    if (!key->used_by_uid.empty() && key->used_by_uid != c.uid) {
      return Deny("key_already_used", "this registered key was approved for another CSR; a node's key joins once");
    }
    key_registered = true;
    if (settings->require_tpm_key && !key->tpm_resident) {
      return Deny("csr_tpm_key_required", "the pool requires a TPM-resident kubelet key (require_tpm_key)");
    }
  }

  csr::RuleOptions rules;
  rules.client_window_seconds = age;
  csr::MachineFacts facts = MachineFactsOf(*m);
  // A rotation is the one client certificate's successor, not a second
  // identity: every rule of a join but the one-certificate mark.
  if (!join) facts.client_cert_issued_at.reset();
  const auto refusals = csr::Check(*parsed, *kind, c.usages, facts, rules, /*tpm_key_proven=*/false, now);
  if (!refusals.empty()) {
    std::string all;
    for (const auto& r : refusals) all += (all.empty() ? "" : "; ") + r.reason + ": " + r.message;
    return Deny(refusals.front().reason, all);
  }
  // Manual approval (docs/csr.md): a new node's key went through it when
  // it was registered; a serving certificate or a rotation waits here.
  const std::string approval(join                           ? kKubeApproveJoin
                             : *kind == csr::Kind::kServing ? kKubeApproveServing
                                                            : kKubeApproveRotation);
  if ((!join && *kind == csr::Kind::kServing && settings->serving_csr_manual) ||
      (!join && *kind == csr::Kind::kClient && settings->renewal_csr_manual)) {
    // Recorded as waiting with the reason an approval will carry.
    KubeAction w = None(approval);
    w.waiting = true;
    w.message = "every rule passed; waiting for an operator: rackgatectl csr approve " +
                text::PrintableAscii(c.name, 253);
    return w;
  }
  KubeAction a;
  a.kind = KubeAction::Kind::kApprove;
  a.reason = approval;
  a.message = "approved by rackgate: " + m->hostname + " attested with its TPM" +
              (key_registered ? " and registered this key" : "") + "; enrolled names and rules checked";
  return a;
}

KubeAction KubeApprover::Record(storage::KubeCsrDecision d, KubeAction a) {
  const storage::Actor actor{"rackgated", "approver mode"};
  d.decision = std::string(a.waiting                             ? storage::kCsrWaiting
                           : a.kind == KubeAction::Kind::kApprove ? storage::kCsrApproved
                                                                  : storage::kCsrDenied);
  d.reason = a.reason;
  d.message = a.message.substr(0, 512);
  auto recorded = store_->RecordKubeCsr(d, actor, clock_());
  if (recorded.ok()) return a;
  const Status& s = recorded.status();
  if (s.reason() == "kube_csr_decided") {
    // Another appliance (or this one, before a restart) decided it first.
    auto earlier = store_->GetKubeCsr(d.uid);
    if (earlier.ok()) return Carry(*earlier);
    return None(kKubeIgnoreBusy, true);
  }
  if (s.code() == Status::Code::kIoError) return None(kKubeIgnoreBusy, true);
  if (a.kind == KubeAction::Kind::kApprove) {
    // The transaction's own checks (the key used meanwhile, a client
    // certificate already approved, the state) refused the approval.
    KubeAction denied = Deny(s.reason(), s.message());
    denied.hostname = a.hostname;
    denied.purpose = a.purpose;
    return Record(std::move(d), std::move(denied));
  }
  Log()->error("CSR {} of {}: denial not recorded: {}", text::PrintableAscii(d.name, 80), a.hostname, s.ToString());
  return None(kKubeIgnoreBusy, true);
}

KubeAction KubeApprover::UnlessEpochEnded(const storage::KubeCsrDecision& d, KubeAction approval) {
  // SECURITY: an approval recorded but not yet written (the API server was
  // away) belongs to the epoch it was made in. An approval marks the
  // machine joined at or before its decision, a reset clears the mark and
  // a new join sets it later: either way this machine is no longer the one
  // that was approved, and the approval is not written.
  auto m = store_->GetMachineById(d.machine_id);
  if (!m.ok()) return None(kKubeIgnoreBusy, m.status().code() != Status::Code::kNotFound);
  if (m->state == storage::MachineState::kJoined && m->client_cert_issued_at && d.decided_at &&
      *m->client_cert_issued_at <= *d.decided_at) {
    return approval;
  }
  Log()->warn("CSR {} of {}: approved in an earlier epoch (the machine was reset since) and never written to the "
              "API server; left alone",
              text::PrintableAscii(d.name, 80), d.hostname);
  KubeAction none = None(kKubeIgnoreEpochEnded);
  none.hostname = d.hostname;
  none.purpose = d.purpose;
  return none;
}

KubeAction KubeApprover::Carry(const storage::KubeCsrDecision& d) {
  if (d.decision == storage::kCsrWaiting) return None(kKubeIgnoreWaiting);
  KubeAction a;
  a.kind = d.decision == storage::kCsrApproved ? KubeAction::Kind::kApprove : KubeAction::Kind::kDeny;
  a.reason = d.reason;
  a.message = d.message;
  a.hostname = d.hostname;
  a.purpose = d.purpose;
  return a;
}

void KubeApprover::Count(const KubeAction& a) {
  const char* verdict = a.kind == KubeAction::Kind::kApprove ? "approved"
                        : a.kind == KubeAction::Kind::kDeny  ? "denied"
                        : a.waiting                          ? "waiting"
                                                             : "ignored";
  if (a.kind == KubeAction::Kind::kNone && !a.waiting) {
    Log()->debug("CSR left alone: {}", a.reason);
  } else {
    Log()->info("kubelet {} CSR of {} {}: {}", a.purpose, a.hostname, verdict, a.reason);
  }
  if (metrics_ != nullptr) {
    metrics_->CounterInc("rackgate_kubernetes_csr_total",
                         "Kubelet CSRs in the API server by rackgate's verdict, purpose and reason.",
                         {{"verdict", verdict}, {"purpose", a.purpose}, {"reason", a.reason}});
  }
}

}  // namespace rackgate::core
