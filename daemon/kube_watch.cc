// Approver mode's watcher: the API server's CSRs through core::KubeApprover.
#include "daemon/kube_watch.h"

#include <utility>

#include "attest/boot_facts.h"
#include "base/log.h"
#include "base/text.h"
#include "kube/approval.h"
#include "kube/kubeconfig.h"

namespace rackgate::daemon {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("kubernetes");
  return log;
}

// Every CSR again every 30 s: a decision that could not be written, or an
// operator's decision on a waiting one (`rackgatectl csr approve NAME`),
// reaches the API server at the next list.
kube::InformerOptions InformerOptions() {
  kube::InformerOptions o;
  o.resync = std::chrono::seconds(30);
  return o;
}

core::KubeCsr CoreView(const kube::Csr& c) {
  core::KubeCsr k;
  k.uid = c.uid;
  k.name = c.name;
  k.signer_name = c.signer_name;
  k.username = c.username;
  k.groups = c.groups;
  k.usages = c.usages;
  k.request_pem = c.request_pem;
  k.decided = c.Approved() || c.Denied() || c.Failed();
  return k;
}

}  // namespace

Result<std::unique_ptr<KubeWatch>> KubeWatch::Start(const KubeWatchOptions& options, core::KubeApprover* approver,
                                                    Metrics* metrics) {
  auto credentials =
      options.in_cluster ? kube::InClusterCredentials() : kube::LoadKubeconfig(options.kubeconfig, options.context);
  if (!credentials.ok()) return credentials.status();
  const std::string server = credentials->server;
  auto client = kube::Client::Create(std::move(credentials).value());
  if (!client.ok()) return client.status();
  std::unique_ptr<KubeWatch> w(new KubeWatch(std::move(client).value(), approver, metrics));
  w->thread_ = std::thread([p = w.get()] { p->informer_.Run(); });
  Log()->info("approver mode: watching kubelet CSRs at {}", text::PrintableAscii(server, 200));
  return w;
}

KubeWatch::KubeWatch(kube::Client client, core::KubeApprover* approver, Metrics* metrics)
    : client_(std::move(client)),
      approver_(approver),
      metrics_(metrics),
      informer_(&client_, [this](const kube::Csr& c) { Handle(c); }, InformerOptions()) {}

KubeWatch::~KubeWatch() {
  informer_.Stop();
  if (thread_.joinable()) thread_.join();
}

void KubeWatch::Handle(const kube::Csr& c) {
  const core::KubeAction a = approver_->Handle(CoreView(c));
  if (a.kind == core::KubeAction::Kind::kNone) return;
  // The decision is written to the object it was made for, and only there
  // (kube/approval.h): the body carries c's uid and resourceVersion, and
  // after a 409 a CSR re-created under the name is not decided again here
  // (the informer hands it in as the new object it is).
  if (a.uid != c.uid) {
    Log()->error("CSR {}: a decision for uid {} handed with uid {}; not written", c.name,
                 text::PrintableAscii(a.uid, 64), text::PrintableAscii(c.uid, 64));
    return;
  }
  const bool approve = a.kind == core::KubeAction::Kind::kApprove;
  Status s = kube::WriteDecision(&client_, c, kube::ApprovalDecision{approve, a.reason, a.message},
                                 [this](const kube::Csr& fresh) -> std::optional<kube::ApprovalDecision> {
                                   // The same object, changed (its status,
                                   // another approver): decided again, which
                                   // carries out its recorded decision.
                                   const core::KubeAction again = approver_->Handle(CoreView(fresh));
                                   if (again.kind == core::KubeAction::Kind::kNone || again.uid != fresh.uid) {
                                     return std::nullopt;
                                   }
                                   return kube::ApprovalDecision{again.kind == core::KubeAction::Kind::kApprove,
                                                                 again.reason, again.message};
                                 });
  const char* verdict = approve ? "approved" : "denied";
  if (s.reason() == "kube_csr_replaced") {
    // The object it was decided for is gone: nothing to carry out later.
    Log()->warn("CSR {} ({} of {}): {}", c.name, a.purpose, a.hostname, s.message());
  } else if (s.ok() || s.reason() == "kube_already_decided") {
    Log()->info("CSR {} ({} of {}) {} in the API server: {}", c.name, a.purpose, a.hostname, verdict, a.reason);
  } else {
    // The decision is recorded; the next relist carries it out again.
    Log()->error("CSR {} ({} of {}): {} but not written to the API server: {}", c.name, a.purpose, a.hostname,
                 verdict, s.ToString());
  }
  if (metrics_ != nullptr) {
    metrics_->CounterInc("rackgate_kubernetes_approval_updates_total",
                         "Approvals and denials written to the API server, by verdict and result.",
                         {{"verdict", verdict}, {"result", s.ok() ? "ok" : s.reason()}});
  }
}

}  // namespace rackgate::daemon
