// HTTP answers and Kubernetes Status objects as our Status.
#include "kube/api_status.h"

#include <optional>
#include <string>

#include "base/text.h"
#include "kube/untrusted.h"

namespace rackgate::kube {

namespace {

// What the server wrote is untrusted: a printable cut, never the raw text.
constexpr size_t kMaxServerMessageChars = 200;

}  // namespace

Status FromApiStatus(long code, std::string_view reason, std::string_view message) {
  std::string said = text::PrintableAscii(message, kMaxServerMessageChars);
  if (!reason.empty()) said = text::PrintableAscii(reason, 64) + ": " + said;
  const std::string text = "the API server answered " + std::to_string(code) + " (" + said + ")";
  switch (code) {
    case 401:
      return Status::VerificationFailed(
          "kube_unauthorized", text + "; the kubeconfig's token or client certificate is not accepted");
    case 403:
      return Status::VerificationFailed(
          "kube_forbidden",
          text + "; the approver needs RBAC: get, list, watch on certificatesigningrequests and update on "
                 "certificatesigningrequests/approval (group certificates.k8s.io), and approve on signers "
                 "(resourceNames: the signer names, e.g. kubernetes.io/kube-apiserver-client-kubelet)");
    case 404:
      return Status::NotFound("kube_not_found", text);
    case 409:
      return Status::InvalidArgument("kube_conflict", text + "; read the object again and decide again");
    case 410:
      return Status::NotFound("kube_gone", text + "; the resourceVersion is too old: list again");
    case 422:
      return Status::InvalidArgument("kube_invalid", text);
    default:
      break;
  }
  if (code == 429 || (code >= 500 && code <= 599)) return Status::IoError("kube_unavailable", text);
  return Status::InvalidArgument("kube_http_error", text);
}

Status FromHttpAnswer(long code, std::string_view body) {
  std::string reason;
  std::string message;
  // A Status object ({"kind":"Status","reason":...,"message":...}) when the
  // body is one; otherwise the body itself (a proxy's HTML page), cut.
  std::optional<nlohmann::json> doc = ParseJson(body);
  if (doc && doc->is_object() && StringField(*doc, "kind") == "Status") {
    reason = StringField(*doc, "reason").value_or("");
    message = StringField(*doc, "message").value_or("");
  } else {
    message = std::string(body.substr(0, kMaxServerMessageChars * 4));
  }
  return FromApiStatus(code, reason, message);
}

}  // namespace rackgate::kube
