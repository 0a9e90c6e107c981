// Approver mode's watcher: the API server's CSRs through core::KubeApprover.
#include "daemon/kube_watch.h"

#include <utility>

#include "attest/boot_facts.h"
#include "base/log.h"
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
  Log()->info("approver mode: watching kubelet CSRs at {}", attest::PrintableAscii(server, 200));
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
  const bool approve = a.kind == core::KubeAction::Kind::kApprove;
  Status s = client_.UpdateApproval(c, approve, a.reason, a.message);
  if (s.reason() == "kube_conflict") {
    // The object changed since it was read (its status, another
    // approver): read it again and carry out the same recorded decision.
    auto fresh = client_.GetCsr(c.name);
    s = fresh.ok() ? client_.UpdateApproval(*fresh, approve, a.reason, a.message) : fresh.status();
  }
  const char* verdict = approve ? "approved" : "denied";
  if (s.ok() || s.reason() == "kube_already_decided") {
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
