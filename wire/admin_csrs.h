// The admin API's CSR approval bodies (docs/csr.md, "Manual approval";
// docs/operations.md) as typed values with an encoder and a decoder:
// GET /v1/admin/csrs and POST /v1/admin/csrs/{id}/approve|deny, for
// rackgated and `rackgatectl csr`. Decoding fails as wire/admin_pools.h
// says.
#ifndef RACKGATE_WIRE_ADMIN_CSRS_H_
#define RACKGATE_WIRE_ADMIN_CSRS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::wire {

// A CSR waiting for an operator, or decided by one.
struct CsrView {
  int64_t id = 0;
  std::string hostname;
  std::string kind;               // client or serving
  std::string public_key_sha256;  // hex
  std::vector<std::string> usages;
  bool tpm_resident = false;
  std::string state;  // waiting, approved or denied
  int64_t created_at = 0;
  int64_t age_seconds = 0;
  bool current = true;  // false once its machine was reset or re-keyed
  std::string csr_pem;
  std::optional<int64_t> decided_at;  // with decided_by, once decided
  std::string decided_by;
  std::string deny_reason;  // "" is left out
  // Where the request is: "agent" (a machine's submission to rackgate,
  // identified by `id`) or "kubernetes" (a kubelet's CSR in the API server
  // that approver mode decided, identified by `name`; docs/kubernetes.md).
  std::string source = "agent";
  std::string name;     // kubernetes: metadata.name; "" is left out
  std::string purpose;  // kubernetes: join, rotation or serving; "" is left out
  std::string reason;   // kubernetes: rackgate's reason code; "" is left out
  std::string uid;      // kubernetes: metadata.uid, what the decision is bound to; "" is left out
  bool operator==(const CsrView&) const = default;
};
std::string EncodeCsrView(const CsrView& c);
Result<CsrView> DecodeCsrView(std::string_view body);

// GET /v1/admin/csrs: {"csrs": [...]}.
std::string EncodeCsrList(const std::vector<CsrView>& csrs);
Result<std::vector<CsrView>> DecodeCsrList(std::string_view body);

// POST /v1/admin/csrs/{id}/approve|deny: the operator's reason ("" for
// none; a denial needs one, which the core checks). An empty body is a
// decision without a reason.
struct CsrDecisionRequest {
  std::string reason;
  // A kubelet CSR in the API server named by its NAME: which object of that
  // name (metadata.uid), when the name was reused; "" is left out.
  std::string uid;
  bool operator==(const CsrDecisionRequest&) const = default;
};
std::string EncodeCsrDecisionRequest(const CsrDecisionRequest& r);
Result<CsrDecisionRequest> DecodeCsrDecisionRequest(std::string_view body);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_ADMIN_CSRS_H_
