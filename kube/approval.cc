// An approver's decision written to the object it was made for.
#include "kube/approval.h"

#include "base/text.h"

namespace rackgate::kube {

Status WriteDecision(CsrApprovalWriter* api, const Csr& object, const ApprovalDecision& decision,
                     const Redecide& redecide) {
  Status s = api->UpdateApproval(object, decision.approve, decision.reason, decision.message);
  if (s.reason() != "kube_conflict") return s;
  // The object changed since it was read, or the name is another object's
  // now. SECURITY: only the same object (uid) is decided again; a decision
  // never moves to another object by its name.
  Result<Csr> fresh = api->GetCsr(object.name);
  if (!fresh.ok()) return fresh.status();
  if (fresh->uid != object.uid) {
    return Status::InvalidArgument("kube_csr_replaced",
                                   "CSR " + object.name + " is another object now (uid " +
                                       text::PrintableAscii(fresh->uid, 64) + "; the decision was made for uid " +
                                       text::PrintableAscii(object.uid, 64) +
                                       "): it was deleted and re-created, and the decision is not written to it; "
                                       "the new object is decided on its own");
  }
  if (fresh->Approved() || fresh->Denied()) {
    return Status::InvalidArgument("kube_already_decided",
                                   "CSR " + object.name + " is already " + (fresh->Approved() ? "approved" : "denied"));
  }
  std::optional<ApprovalDecision> again = redecide(*fresh);
  if (!again) {
    return Status::InvalidArgument("kube_not_written", "CSR " + object.name + " changed and, decided again, has "
                                                      "nothing to write");
  }
  return api->UpdateApproval(*fresh, again->approve, again->reason, again->message);
}

}  // namespace rackgate::kube
