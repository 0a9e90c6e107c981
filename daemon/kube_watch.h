// Approver mode's watcher (docs/kubernetes.md): on a thread of its own, the
// list+watch loop over the API server's certificatesigningrequests
// (kube::CsrInformer); each CSR goes to core::KubeApprover, and what it
// decides is carried out in the API server (the /approval subresource).
#ifndef RACKGATE_DAEMON_KUBE_WATCH_H_
#define RACKGATE_DAEMON_KUBE_WATCH_H_

#include <memory>
#include <string>
#include <thread>

#include "base/metrics.h"
#include "base/status.h"
#include "core/kube_approver.h"
#include "kube/client.h"
#include "kube/informer.h"

namespace rackgate::daemon {

struct KubeWatchOptions {
  std::string kubeconfig;  // or in_cluster
  std::string context;
  bool in_cluster = false;
};

class KubeWatch {
 public:
  // Reads the credentials and starts the thread. kubeconfig_* and
  // kube_credentials_invalid refusals name the fix; nothing is contacted
  // yet (an unreachable API server is retried by the loop, with backoff).
  // BORROWED: approver and metrics outlive the watcher.
  static Result<std::unique_ptr<KubeWatch>> Start(const KubeWatchOptions& options, core::KubeApprover* approver,
                                                  Metrics* metrics);
  ~KubeWatch();  // stops the loop and joins its thread (within about a second)
  KubeWatch(const KubeWatch&) = delete;
  KubeWatch& operator=(const KubeWatch&) = delete;

 private:
  KubeWatch(kube::Client client, core::KubeApprover* approver, Metrics* metrics);
  void Handle(const kube::Csr& csr);

  kube::Client client_;
  core::KubeApprover* approver_;
  Metrics* metrics_;
  kube::CsrInformer informer_;
  std::thread thread_;
};

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_KUBE_WATCH_H_
