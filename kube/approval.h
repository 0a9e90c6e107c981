// Writing an approver's decision to the API server, bound to the object it
// was made for: its metadata.uid and resourceVersion travel in the body of
// the PUT of /approval (csr.h ApprovalBody), so the API server refuses (409)
// to apply it to a changed object or to another object that carries the
// name now; on a 409 the object is read again and decided again only when
// it is the same object (same uid). A CSR deleted and re-created under the
// same name is a new object, decided from scratch by whoever watches, and
// never receives the old decision. See docs/kubernetes.md.
#ifndef RACKGATE_KUBE_APPROVAL_H_
#define RACKGATE_KUBE_APPROVAL_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "kube/csr.h"

namespace rackgate::kube {

// The calls that write a decision; kube::Client implements them, tests a
// fake.
class CsrApprovalWriter {
 public:
  virtual ~CsrApprovalWriter() = default;
  virtual Result<Csr> GetCsr(std::string_view name) = 0;
  virtual Status UpdateApproval(const Csr& csr, bool approve, std::string_view reason, std::string_view message) = 0;
};

struct ApprovalDecision {
  bool approve = false;
  std::string reason;
  std::string message;
};

// After a 409: the decision about `fresh`, the same object (same uid) as
// read again; nullopt writes nothing.
using Redecide = std::function<std::optional<ApprovalDecision>(const Csr& fresh)>;

// Writes `decision`, made for `object` (as read), to the API server. Ok when
// written. On kube_conflict (409) reads the CSR of that name once more:
//   - another uid (deleted and re-created): nothing written,
//     kInvalidArgument "kube_csr_replaced" naming both uids;
//   - already Approved or Denied: "kube_already_decided", nothing written;
//   - the same uid: `redecide(fresh)`, written once more (a second 409 is
//     returned as it is: the caller's next resync tries again); nullopt:
//     "kube_not_written".
// Errors of GetCsr and UpdateApproval as they are (kube_not_found when the
// CSR is gone). `api` is BORROWED.
Status WriteDecision(CsrApprovalWriter* api, const Csr& object, const ApprovalDecision& decision,
                     const Redecide& redecide);

}  // namespace rackgate::kube

#endif  // RACKGATE_KUBE_APPROVAL_H_
