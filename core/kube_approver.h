// Approver mode (docs/kubernetes.md): the decision about a kubelet's
// certificates.k8s.io/v1 CSR that the API server holds, bound to what the
// machine proved to rackgate with its TPM. The cluster's own signer issues;
// rackgate approves or denies. No HTTP and no Kubernetes client here: the
// daemon's watcher hands each CSR in as a KubeCsr and carries out the
// KubeAction in the API server.
//
// Every decision is recorded (storage::KubeApprovalStore::RecordKubeCsr, one
// transaction with its audit row) BEFORE the API server is told, keyed by
// the API object's uid: a restart, a relist or a second appliance carries
// out the recorded decision again and never decides the same CSR twice.
#ifndef RACKGATE_CORE_KUBE_APPROVER_H_
#define RACKGATE_CORE_KUBE_APPROVER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"
#include "core/csr.h"
#include "core/pool_settings.h"
#include "storage/roles.h"

namespace rackgate::core {

// A certificates.k8s.io/v1 CSR as the API server reported it. The requester
// (username, groups) was authenticated by the API server; everything else
// is the requester's and untrusted.
struct KubeCsr {
  std::string uid;
  std::string name;
  std::string signer_name;
  std::string username;
  std::vector<std::string> groups;
  std::vector<std::string> usages;
  std::string request_pem;
  // From status.conditions: any Approved, Denied or Failed condition means
  // the CSR is decided in the API and is left alone.
  bool decided = false;
};

struct KubeApproverOptions {
  // Who may file a new node's client CSR (the kubelet's bootstrap
  // credential): a requester in one of these groups.
  std::vector<std::string> bootstrapper_groups = {"system:bootstrappers"};
  // A rotation or serving CSR needs the machine's last good attestation to
  // be at most this old, when its pool sets no max_attestation_age_seconds.
  int64_t max_attestation_age_seconds = 86400;
  // How long after a good attestation a new node's client CSR is approved
  // (the approver's two hours), when its pool sets none.
  int64_t client_window_seconds = 7200;
};

// What to do in the API server.
struct KubeAction {
  enum class Kind {
    kNone,     // leave the CSR alone (`reason` says why; for the log)
    kApprove,  // add the Approved condition with `reason` and `message`
    kDeny,     // add the Denied condition with `reason` and `message`
  };
  Kind kind = Kind::kNone;
  // The API object (metadata.uid) the action was decided for: it is written
  // to that object only, never to another CSR that carries its name later.
  std::string uid;
  std::string reason;
  std::string message;
  // Set when the action comes from a decision about a rackgate machine.
  std::string hostname;
  std::string purpose;  // storage::kKubePurpose*
  // kNone only: the decision could not be made or recorded now (the store
  // failed); the watcher tries again at its next resync.
  bool retry = false;
  // kNone only: every rule passed and the pool's csr_approval asks an
  // operator (serving, or renewal for a rotation): recorded as waiting;
  // `rackgatectl csr approve NAME` decides it and the watcher carries the
  // decision out at its next resync.
  bool waiting = false;
};

// Reasons of kNone (not decisions; logged and counted):
inline constexpr std::string_view kKubeIgnoreSigner = "not_kubelet_signer";
inline constexpr std::string_view kKubeIgnoreDecided = "decided_in_api";
inline constexpr std::string_view kKubeIgnoreNotNode = "not_node_name";
inline constexpr std::string_view kKubeIgnoreUnknown = "node_unknown";
inline constexpr std::string_view kKubeIgnoreSignerPool = "pool_signer_mode";
inline constexpr std::string_view kKubeIgnoreWaiting = "waiting_for_operator";
inline constexpr std::string_view kKubeIgnoreBusy = "store_busy";
// An approval recorded in an earlier epoch of the machine (reset since) and
// never written to the API server: not written now.
inline constexpr std::string_view kKubeIgnoreEpochEnded = "epoch_ended";
// Reasons of approvals:
inline constexpr std::string_view kKubeApproveJoin = "RackgateAttestedJoin";
inline constexpr std::string_view kKubeApproveRotation = "RackgateAttestedRotation";
inline constexpr std::string_view kKubeApproveServing = "RackgateAttestedServing";

// Decides kubelet CSRs for machines of approver-mode pools. Thread-safe
// (the store is).
class KubeApprover {
 public:
  // BORROWED: store and metrics (may be null) outlive the approver.
  KubeApprover(storage::KubeApprovalStore* store, KubeApproverOptions options, Metrics* metrics,
               std::function<int64_t()> clock);

  // The action for `csr`: the one recorded for its uid when there is one,
  // else a new decision, recorded first. Reasons of denials (docs/kubernetes.md):
  //   csr_requester_not_allowed  neither the node itself nor a bootstrapper
  //   csr_malformed, csr_signature_invalid  the request does not parse
  //   machine_untrusted          the trust gate (core/trust.h), or the last
  //                              good attestation older than allowed
  //   key_not_attested           a new node's (or, by pool setting, a
  //                              serving) key the machine never registered
  //   key_already_used           a registered key approved for another CSR
  //   machine_not_joined         a rotation or serving CSR of a machine that
  //                              has not joined in its current epoch (after
  //                              a reset, until the new owner joined)
  //   csr_* of csr::Check        the approver's rules against the enrollment
  //   client_cert_already_issued a second join without an operator's reset
  KubeAction Handle(const KubeCsr& csr);

 private:
  // The decision, not recorded; `purpose` and `key` filled once known.
  KubeAction Decide(const KubeCsr& csr, storage::Machine* machine, storage::KubeCsrDecision* record);
  KubeAction Record(storage::KubeCsrDecision record, KubeAction action);
  // The action a recorded decision stands for.
  static KubeAction Carry(const storage::KubeCsrDecision& d);
  // `approval` (Carry of `d`), or kNone epoch_ended when the machine was
  // reset (and maybe joined again) since `d` was decided.
  KubeAction UnlessEpochEnded(const storage::KubeCsrDecision& d, KubeAction approval);
  void Count(const KubeAction& a);

  storage::KubeApprovalStore* store_;
  KubeApproverOptions options_;
  Metrics* metrics_;
  std::function<int64_t()> clock_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_KUBE_APPROVER_H_
