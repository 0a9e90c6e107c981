// The operator's side of manual CSR approval (docs/csr.md, "Manual
// approval"; core/csr_approval.h is the machine's side): the CSRs waiting
// for a decision, and an operator's approval or denial of one. The admin
// API calls these; they decide, the handlers only decode and encode.
//
// Thread safety: as the store's; no state of its own.
#ifndef RACKGATE_CORE_CSR_APPROVAL_SERVICE_H_
#define RACKGATE_CORE_CSR_APPROVAL_SERVICE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/roles.h"
#include "wire/admin_csrs.h"

namespace rackgate::core {

// The most CSRs one list answers.
inline constexpr int64_t kMaxCsrList = 100000;

class CsrApprovalService {
 public:
  using Clock = std::function<int64_t()>;
  // BORROWED: the stores outlive the service.
  CsrApprovalService(storage::CsrStore* store, storage::KubeApprovalStore* kube, Clock clock);

  // GET /v1/admin/csrs: the waiting requests of current epochs, oldest
  // first; `all`: every request, newest first. Both the agents' requests
  // (source "agent") and the API server's CSRs that approver mode decided
  // (source "kubernetes", docs/kubernetes.md). At most `limit` (clamped to
  // 1 .. kMaxCsrList). The store's refusals.
  Result<std::vector<wire::CsrView>> List(bool all, int64_t limit);

  // POST /v1/admin/csrs/{id}/approve|deny: request `id` (its decimal text
  // from the path) approved, or denied with `reason`, which the machine is
  // told. The actor's why is the reason, or "by NAME" without one.
  // Refusals: field_invalid (kInvalidArgument) when `id` is not a positive
  // number; field_missing (kInvalidArgument) for a denial without a reason;
  // then the store's: csr_request_unknown (kNotFound), state_conflict (kInvalidArgument:
  // already decided), field_invalid (a denial's reason not 1..256 printable
  // characters).
  // A kubelet CSR of the API server is named by its NAME; when that name was
  // reused and two or more waiting objects carry it, `uid` (its
  // metadata.uid) picks one, else csr_name_ambiguous (kInvalidArgument,
  // 409 on the admin API) names their uids and the fix. Never the oldest or
  // newest silently: a decision is bound to the object it is for.
  Result<wire::CsrView> Decide(std::string_view id, bool approve, const std::string& reason,
                               const storage::Actor& actor, std::string_view uid = {});

 private:
  wire::CsrView View(const storage::CsrApprovalRequest& r, int64_t now) const;

  static wire::CsrView View(const storage::KubeCsrDecision& d, int64_t now);
  // Decide for a waiting kubelet CSR of the API server, by its name.
  Result<wire::CsrView> DecideKube(std::string_view name, std::string_view uid, bool approve,
                                   const std::string& reason, const storage::Actor& actor);

  storage::CsrStore* store_;
  storage::KubeApprovalStore* kube_;
  Clock clock_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_CSR_APPROVAL_SERVICE_H_
