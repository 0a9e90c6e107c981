// The CertificateSigningRequest reader on an already parsed JSON value, for
// the list and watch decoders of the client. Internal to kube/.
#ifndef RACKGATE_KUBE_CSR_JSON_H_
#define RACKGATE_KUBE_CSR_JSON_H_

#if !defined(RACKGATE_KUBE_INTERNAL)
#error "kube/csr_json.h is internal to kube/"
#endif

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "kube/csr.h"

namespace rackgate::kube {

// As ParseCsrJson (csr.h), on a value that is already parsed: the object of a
// list's items[] or a watch event's "object".
Result<Csr> ParseCsr(const nlohmann::json& object);

// A CertificateSigningRequestList page (JSON text): its items (an item that
// fails ParseCsr is named in `skipped`, not fatal), metadata.resourceVersion
// and metadata.continue. kCorruption "kube_response_invalid" when the text is
// not such a list (not JSON, no items list, a resourceVersion or continue
// token that is not a short printable string).
Result<CsrList> ParseCsrListJson(std::string_view text);

}  // namespace rackgate::kube

#endif  // RACKGATE_KUBE_CSR_JSON_H_
