// A certificates.k8s.io/v1 CertificateSigningRequest as an approver reads it:
// the fields a decision needs, validated and bounded (everything the API
// server sends is untrusted), and the body that approves or denies it.
// See docs/kubernetes-client.md for the limits.
#ifndef RACKGATE_KUBE_CSR_H_
#define RACKGATE_KUBE_CSR_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::kube {

// metadata.name: Kubernetes does not validate CSR names, but the names
// kubelets make ("csr-xyz12", "node-csr-<base64url>") fit [A-Za-z0-9._-];
// anything else could not be put into a URL path as it is.
inline constexpr size_t kMaxCsrNameChars = 253;
// spec.request decoded (a PEM CSR) and status.certificate decoded (a PEM
// chain).
inline constexpr size_t kMaxCsrRequestBytes = 64 * 1024;
inline constexpr size_t kMaxCsrCertificateBytes = 64 * 1024;
inline constexpr size_t kMaxCsrUsages = 16;
inline constexpr size_t kMaxCsrGroups = 64;
inline constexpr size_t kMaxCsrGroupBytes = 256;
inline constexpr size_t kMaxCsrConditions = 16;
// The whole object as JSON text: the request and the certificate in base64
// (about 2 x 88 KiB at most) with room for metadata.
inline constexpr size_t kMaxCsrObjectBytes = 512 * 1024;

struct CsrCondition {
  std::string type;     // "Approved", "Denied", "Failed" (others are kept as read)
  std::string status;   // "True", "False", "Unknown"
  std::string reason;   // may be empty
  std::string message;  // may be empty; text another client wrote: untrusted
};

struct Csr {
  std::string name;              // metadata.name, [A-Za-z0-9._-]{1,253}
  std::string uid;               // metadata.uid
  std::string resource_version;  // metadata.resourceVersion (opaque)
  int64_t creation_timestamp = 0;  // metadata.creationTimestamp, unix seconds
  std::string signer_name;       // spec.signerName, e.g. "kubernetes.io/kube-apiserver-client-kubelet"
  std::string username;          // spec.username: who the API server authenticated
  std::string requester_uid;     // spec.uid (may be empty)
  std::vector<std::string> groups;  // spec.groups
  std::vector<std::string> usages;  // spec.usages, e.g. "digital signature", "client auth"
  std::optional<int64_t> expiration_seconds;  // spec.expirationSeconds (Kubernetes 1.22+)
  std::string request_pem;       // spec.request decoded: the PEM CSR (not yet parsed or verified)
  std::vector<CsrCondition> conditions;  // status.conditions
  bool has_certificate = false;  // status.certificate is non-empty: issued
  std::string certificate_pem;   // status.certificate decoded
  // The object exactly as parsed, re-serialized (at most kMaxCsrObjectBytes):
  // an update must carry the whole spec and metadata, so ApprovalBody starts
  // from this. Opaque to callers.
  std::string object_json;

  // A condition of this type with status "True" exists.
  bool HasCondition(std::string_view type) const;
  bool Approved() const { return HasCondition("Approved"); }
  bool Denied() const { return HasCondition("Denied"); }
  bool Failed() const { return HasCondition("Failed"); }
};

// One page of a list of CertificateSigningRequests.
struct CsrList {
  std::vector<Csr> items;
  std::string resource_version;  // metadata.resourceVersion: watch from here
  std::string continue_token;    // metadata.continue: empty on the last page
  // Items that did not pass ParseCsrJson's checks, as "name: why"
  // (printable, cut): left out so that one odd object cannot keep an
  // approver from the rest.
  std::vector<std::string> skipped;
};

// A name Kubernetes may give a CSR and that we put into a URL path as it is:
// [A-Za-z0-9._-]{1,253}, not "." or "..".
bool IsValidCsrName(std::string_view name);

// One CertificateSigningRequest object (JSON text, as the API server sends
// it). Unknown fields are ignored; a missing required field (name, uid,
// resourceVersion, creationTimestamp, signerName, request), a wrong type or a
// value over its bound is refused: kInvalidArgument "kube_csr_invalid" whose
// message names the field (never its value beyond a printable cut).
Result<Csr> ParseCsrJson(std::string_view text);

// The body of PUT /apis/certificates.k8s.io/v1/certificatesigningrequests/
// NAME/approval: the object as read (metadata with its resourceVersion, so a
// concurrent change is a 409; the whole spec, which the update must carry)
// with one condition appended to status.conditions:
//   {type: "Approved" or "Denied", status: "True", reason, message,
//    lastUpdateTime: now (RFC 3339, UTC)}.
// An existing condition of the same type is replaced rather than repeated
// (the API server refuses duplicates). REQUIRES: `csr` came from ParseCsrJson
// or the client (its object_json is a JSON object).
std::string ApprovalBody(const Csr& csr, bool approve, std::string_view reason, std::string_view message,
                         int64_t now);

// A new CertificateSigningRequest, as a node files it (Client::CreateCsr).
struct CsrRequest {
  std::string name;           // metadata.name ([A-Za-z0-9._-]); "" uses generate_name
  std::string generate_name;  // metadata.generateName, e.g. "node-csr-"
  std::string signer_name;
  std::string request_pem;    // the PEM CSR; base64-encoded into spec.request
  std::vector<std::string> usages;
};
// The JSON body of POST .../certificatesigningrequests for `r`.
std::string CreateCsrBody(const CsrRequest& r);

// "2026-11-28T01:02:03Z" (optionally with a fraction of a second, or an
// offset "+01:00" instead of Z) as unix seconds; nullopt for anything else.
std::optional<int64_t> ParseRfc3339(std::string_view text);
// Unix seconds as "2026-11-28T01:02:03Z".
std::string FormatRfc3339(int64_t seconds);

}  // namespace rackgate::kube

#endif  // RACKGATE_KUBE_CSR_H_
