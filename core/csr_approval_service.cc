// The operator's side of manual CSR approval: list, approve, deny.
#include "core/csr_approval_service.h"

#include <algorithm>
#include <charconv>
#include <memory>
#include <utility>

#include "base/hex.h"
#include "base/log.h"

namespace rackgate::core {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("admin");
  return log;
}

}  // namespace

CsrApprovalService::CsrApprovalService(storage::CsrStore* store, storage::KubeApprovalStore* kube, Clock clock)
    : store_(store), kube_(kube), clock_(std::move(clock)) {}

wire::CsrView CsrApprovalService::View(const storage::CsrApprovalRequest& r, int64_t now) const {
  wire::CsrView c;
  c.id = r.id;
  c.hostname = r.hostname;
  c.kind = r.kind;
  c.public_key_sha256 = hex::Encode(r.public_key_sha256);
  c.usages = r.usages;
  c.tpm_resident = r.tpm_resident;
  c.state = r.state;
  c.created_at = r.created_at;
  c.age_seconds = std::max<int64_t>(0, now - r.created_at);
  c.current = r.current;
  c.csr_pem = r.csr_pem;
  if (r.decided_at) {
    c.decided_at = *r.decided_at;
    c.decided_by = r.decided_by;
  }
  c.deny_reason = r.deny_reason;
  return c;
}

Result<std::vector<wire::CsrView>> CsrApprovalService::List(bool all, int64_t limit) {
  const int n = static_cast<int>(std::clamp<int64_t>(limit, 1, kMaxCsrList));
  auto list = store_->ListCsrRequests(all, n);
  if (!list.ok()) return list.status();
  auto kube = kube_->ListKubeCsrs(/*waiting_only=*/!all, n);
  if (!kube.ok()) return kube.status();
  const int64_t now = clock_();
  std::vector<wire::CsrView> out;
  out.reserve(list->size() + kube->size());
  for (const auto& r : *list) out.push_back(View(r, now));
  for (const auto& d : *kube) out.push_back(View(d, now));
  // One order for both sources: waiting ones oldest first, all newest first.
  std::stable_sort(out.begin(), out.end(), [all](const wire::CsrView& a, const wire::CsrView& b) {
    return all ? a.created_at > b.created_at : a.created_at < b.created_at;
  });
  if (out.size() > static_cast<size_t>(n)) out.resize(static_cast<size_t>(n));
  return out;
}

Result<wire::CsrView> CsrApprovalService::DecideKube(std::string_view name, std::string_view uid, bool approve,
                                                     const std::string& reason, const storage::Actor& actor) {
  auto waiting = kube_->ListKubeCsrs(/*waiting_only=*/true, static_cast<int>(kMaxCsrList));
  if (!waiting.ok()) return waiting.status();
  // SECURITY: a name is not an object. A CSR deleted and re-created in the
  // API server under the same name is another object (uid) with its own
  // record; the operator's decision goes to the one named, never to the
  // oldest or newest of that name.
  std::vector<const storage::KubeCsrDecision*> named;
  for (const auto& d : *waiting) {
    if (d.name == name && (uid.empty() || d.uid == uid)) named.push_back(&d);
  }
  if (named.empty()) {
    return Status::NotFound("csr_request_unknown",
                            uid.empty() ? "no kubelet CSR of that name waits for an operator (rackgatectl csr list)"
                                        : "no kubelet CSR of that name and uid waits for an operator "
                                          "(rackgatectl csr list --json shows the uids)");
  }
  if (named.size() > 1) {
    std::string uids;
    for (const auto* d : named) uids += (uids.empty() ? "" : ", ") + d->uid;
    return Status::InvalidArgument(
        "csr_name_ambiguous",
        std::to_string(named.size()) + " kubelet CSRs named " + std::string(name) +
            " wait for an operator (the name was reused in the API server), uids " + uids +
            ": name the one to decide with --uid UID (kubectl get csr " + std::string(name) +
            " -o jsonpath='{.metadata.uid}' shows the one the API server holds now)");
  }
  const auto it = named.front();
  storage::Actor a = actor;
  a.why = reason.empty() ? "by " + a.name : reason;
  auto d = kube_->DecideKubeCsr(it->uid, approve, reason, a, clock_());
  if (!d.ok()) return d.status();
  Log()->info("{} {} the kubelet's CSR {} of {} ({}); the watcher writes it to the API server", a.name,
              approve ? "approved" : "denied", d->name, d->hostname, a.why);
  return View(*d, clock_());
}

wire::CsrView CsrApprovalService::View(const storage::KubeCsrDecision& d, int64_t now) {
  wire::CsrView v;
  v.source = "kubernetes";
  v.name = d.name;
  v.hostname = d.hostname;
  v.kind = d.kind;
  v.purpose = d.purpose;
  v.public_key_sha256 = hex::Encode(d.public_key_sha256);
  v.state = d.decision;
  v.reason = d.reason;
  v.uid = d.uid;
  if (d.decision == storage::kCsrDenied) v.deny_reason = d.message;
  v.created_at = d.created_at;
  v.age_seconds = now - d.created_at;
  v.decided_at = d.decided_at;
  if (d.decided_at) v.decided_by = d.decided_by;
  return v;
}

Result<wire::CsrView> CsrApprovalService::Decide(std::string_view id_text, bool approve, const std::string& reason,
                                                 const storage::Actor& actor, std::string_view uid) {
  // The machine is told why it was refused, so a denial must say it.
  if (!approve && reason.empty()) {
    return Status::InvalidArgument("field_missing", "a denial needs a reason (the machine is told it)");
  }
  int64_t id = 0;
  auto [p, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
  if (ec != std::errc() || p != id_text.data() + id_text.size() || id <= 0) {
    // Not a number: the name of a kubelet's CSR in the API server that
    // approver mode holds for an operator (docs/kubernetes.md).
    if (!id_text.empty() && id_text.front() >= 'a' && id_text.front() <= 'z') {
      return DecideKube(id_text, uid, approve, reason, actor);
    }
    return Status::InvalidArgument("field_invalid",
                                   "a CSR is named by its id (a positive number) or, for a kubelet's CSR in the "
                                   "API server, by its name");
  }
  storage::Actor a = actor;
  a.why = reason.empty() ? "by " + a.name : reason;
  auto r = store_->DecideCsrRequest(id, approve, reason, a, clock_());
  if (!r.ok()) return r.status();
  Log()->info("{} {} CSR {} of {} ({})", a.name, approve ? "approved" : "denied", id, r->hostname, a.why);
  return View(*r, clock_());
}

}  // namespace rackgate::core
