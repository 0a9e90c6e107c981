// The one table from what the API server answers (an HTTP status, or the code
// of a Status object in a watch's ERROR event) to our Status and its reason.
// Internal to kube/.
#ifndef RACKGATE_KUBE_API_STATUS_H_
#define RACKGATE_KUBE_API_STATUS_H_

#if !defined(RACKGATE_KUBE_INTERNAL)
#error "kube/api_status.h is internal to kube/"
#endif

#include <string_view>

#include "base/status.h"

namespace rackgate::kube {

// An answer of HTTP status `code` (not 2xx) whose body may be a Kubernetes
// Status object: its message (printable, cut) goes into ours.
//   401 kube_unauthorized, 403 kube_forbidden (naming the RBAC needed),
//   404 kube_not_found, 409 kube_conflict, 410 kube_gone, 422 kube_invalid,
//   429 and 5xx kube_unavailable, anything else kube_http_error.
Status FromHttpAnswer(long code, std::string_view body);

// The same table for a Status object's fields (a watch's ERROR event).
Status FromApiStatus(long code, std::string_view reason, std::string_view message);

}  // namespace rackgate::kube

#endif  // RACKGATE_KUBE_API_STATUS_H_
