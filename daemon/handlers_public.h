// The public API's HTTP handlers (docs/protocol.md, docs/ignition.md,
// docs/csr.md): each decodes its request, calls the core once, and encodes
// the result, or the refusal through the one table (daemon/status_http.h).
// No decisions here.
#ifndef RACKGATE_DAEMON_HANDLERS_PUBLIC_H_
#define RACKGATE_DAEMON_HANDLERS_PUBLIC_H_

#include <string_view>

#include "core/agent_bundle.h"
#include "core/attestation.h"
#include "core/csr_service.h"
#include "core/ignition_service.h"
#include "core/report_service.h"
#include "daemon/http.h"
#include "daemon/status_http.h"

namespace rackgate::daemon {

// POST /v1/machine/csr's body: signer and csr (strings) are required; usages
// (at most 16 strings of at most 64 bytes) and tpm_key (an object of three
// base64 fields) are optional. bad_json, field_missing or field_invalid.
Result<core::CsrSubmission> DecodeCsrSubmission(std::string_view body);

// GET /config/{pool}'s provisioning token: the `Authorization: Bearer`
// header's, else the `token` URL parameter's (non-empty), else nullopt.
std::optional<std::string> ProvisioningToken(const Request& request);

class PublicHandlers {
 public:
  // BORROWED: the services outlive the handlers.
  PublicHandlers(core::AttestationService* attestation, core::IgnitionService* ignition, core::CsrService* csrs,
                 RetryPolicy retry);

  // Adds the routes of the public API: the attestation protocol, the
  // machine's own endpoints and the MCS-compatible /config/{pool}.
  void Register(Router* router);

  Response Challenge(const Request& request);
  Response Evidence(const Request& request);
  Response WhoAmI(const Request& request);
  Response AttestedConfig(const Request& request);
  Response PublicConfig(const Request& request);
  Response SubmitCsr(const Request& request);

  // Provisioning reports (docs/trust.md): POST /v1/machine/report, added by
  // Register when a report service is set first. BORROWED: outlives the
  // handlers.
  void SetReports(core::ReportService* reports) { reports_ = reports; }
  Response Report(const Request& request);

  // The agent bundle (docs/nodes.md): GET /v1/agent/initramfs (the
  // fragment, application/octet-stream, ETag its SHA-256) and GET
  // /v1/agent/initramfs.sha256 (`HEX  agent-initramfs.cpio.zst`, as
  // sha256sum prints it), added by Register when a bundle is set first. No
  // token: nothing in it is secret, and a node fetches it before it has
  // proven anything. BORROWED: outlives the handlers.
  void SetAgentBundle(core::AgentBundle* bundle) { bundle_ = bundle; }
  // Approver mode (docs/kubernetes.md): POST /v1/machine/kubelet-key, the
  // kubelet's key registered by an attested machine.
  Response RegisterKubeletKey(const Request& request);
  Response AgentInitramfs(const Request& request);
  Response AgentInitramfsDigest(const Request& request);

 private:
  Response Refused(const Status& s) const { return ErrorResponse(s, retry_); }

  core::AttestationService* attestation_;
  core::IgnitionService* ignition_;
  core::CsrService* csrs_;
  RetryPolicy retry_;
  core::ReportService* reports_ = nullptr;
  core::AgentBundle* bundle_ = nullptr;
};

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_HANDLERS_PUBLIC_H_
