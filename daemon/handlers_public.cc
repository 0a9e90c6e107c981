// The public API's handlers: decode, call the core, encode.
#include "daemon/handlers_public.h"

#include "base/hex.h"
#include "wire/agent_bundle_paths.h"
#include "wire/codec.h"
#include "wire/protocol.h"

namespace rackgate::daemon {

namespace {

core::Caller CallerOf(const Request& r) { return core::Caller{r.peer_address, r.queued}; }

Response Config(const core::ConfigResult& config) {
  return Response::Shared(200, config.body, core::kIgnitionMediaType + config.spec_version);
}

}  // namespace

Result<core::CsrSubmission> DecodeCsrSubmission(std::string_view text) {
  // The wire module's one definition of the body, shared with the agent:
  // the renewal proof (docs/csr.md, "Renewal") comes with it.
  auto req = wire::DecodeCsrRequest(text);
  if (!req.ok()) return req.status();
  core::CsrSubmission out;
  out.signer = std::move(req->signer);
  out.csr_pem = std::move(req->csr_pem);
  out.usages = std::move(req->usages);
  if (req->tpm_key) {
    out.tpm_key = core::TpmKeyProof{std::move(req->tpm_key->public_area), std::move(req->tpm_key->certify_info),
                                    std::move(req->tpm_key->certify_signature)};
  }
  out.renewal = std::move(req->renewal);
  return out;
}

PublicHandlers::PublicHandlers(core::AttestationService* attestation, core::IgnitionService* ignition,
                               core::CsrService* csrs, RetryPolicy retry)
    : attestation_(attestation), ignition_(ignition), csrs_(csrs), retry_(retry) {}

void PublicHandlers::Register(Router* router) {
  router->Add("POST", "/v1/attest/challenge", [this](const Request& r) { return Challenge(r); });
  router->Add("POST", "/v1/attest/evidence", [this](const Request& r) { return Evidence(r); });
  router->Add("GET", "/v1/machine", [this](const Request& r) { return WhoAmI(r); });
  router->Add("GET", "/v1/machine/config", [this](const Request& r) { return AttestedConfig(r); });
  router->Add("GET", "/config/{pool}", [this](const Request& r) { return PublicConfig(r); });
  router->Add("POST", "/v1/machine/csr", [this](const Request& r) { return SubmitCsr(r); });
  if (reports_ != nullptr) {
    router->Add("POST", "/v1/machine/report", [this](const Request& r) { return Report(r); });
  }
  router->Add("POST", "/v1/machine/kubelet-key", [this](const Request& r) { return RegisterKubeletKey(r); });
  if (bundle_ != nullptr) {
    router->Add("GET", wire::kAgentInitramfsPath, [this](const Request& r) { return AgentInitramfs(r); });
    router->Add("GET", wire::kAgentInitramfsDigestPath, [this](const Request& r) { return AgentInitramfsDigest(r); });
  }
}

Response PublicHandlers::Challenge(const Request& request) {
  auto result =
      attestation_->Challenge([&request] { return wire::ParseChallengeRequest(request.body); }, CallerOf(request));
  if (!result.ok()) return Refused(result.status());
  return Response::Json(200, wire::EncodeChallenge(*result));
}

Response PublicHandlers::Evidence(const Request& request) {
  auto req = wire::ParseEvidenceRequest(request.body);
  if (!req.ok()) return Refused(req.status());
  auto result = attestation_->Evidence(*req, CallerOf(request));
  if (!result.ok()) return Refused(result.status());
  // The CA bundle rides on the answer the machine trusts already (TLS to
  // this appliance, after it proved its TPM): how installed agents follow
  // a CA rotation (docs/operations.md, "Rotating the appliance CA").
  return Response::Json(
      200, wire::EncodeToken({result->token, result->expires_in, result->hostname, result->state, result->ca_bundle}));
}

Response PublicHandlers::WhoAmI(const Request& request) {
  auto view = attestation_->WhoAmI(request.BearerToken());
  if (!view.ok()) return Refused(view.status());
  return Response::Json(200, wire::EncodeMachineRecord(*view));
}

Response PublicHandlers::AttestedConfig(const Request& request) {
  auto config = ignition_->AttestedConfig({request.BearerToken(), request.Header("Accept"), request.peer_address});
  if (!config.ok()) return Refused(config.status());
  return Config(*config);
}

// The provisioning token travels as `Authorization: Bearer TOKEN` or, for an
// Ignition of spec 3.0 (which has no httpHeaders), as `?token=TOKEN`
// (docs/protocol.md). The header wins when both are sent: it is the form
// that stays out of logs on both ends. SECURITY: the URL form never reaches
// a log here; http_server.cc logs the path without the query.
std::optional<std::string> ProvisioningToken(const Request& request) {
  if (auto bearer = request.BearerToken()) return bearer;
  auto it = request.query.find("token");
  if (it == request.query.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

Response PublicHandlers::PublicConfig(const Request& request) {
  auto config = ignition_->PublicConfig(
      {request.PathParam("pool"), ProvisioningToken(request), request.Header("Accept"), request.peer_address});
  if (!config.ok()) return Refused(config.status());
  return Config(*config);
}

Response PublicHandlers::SubmitCsr(const Request& request) {
  auto issued = csrs_->Submit(request.BearerToken(), DecodeCsrSubmission(request.body));
  if (!issued.ok()) return Refused(issued.status());
  return Response::Json(200, wire::EncodeIssuedCertificate(*issued));
}

Response PublicHandlers::RegisterKubeletKey(const Request& request) {
  auto key = csrs_->RegisterKey(request.BearerToken(), DecodeCsrSubmission(request.body));
  if (!key.ok()) return Refused(key.status());
  return Response::Json(200, wire::EncodeKubeletKeyRegistered({key->kind, hex::Encode(key->public_key_sha256),
                                                               key->tpm_resident, key->registered_at}));
}

Response PublicHandlers::Report(const Request& request) {
  Status s = reports_->Record(request.BearerToken(), wire::DecodeProvisioningReport(request.body));
  if (!s.ok()) return Refused(s);
  return Response::Json(200, wire::EncodeReportRecorded());
}

Response PublicHandlers::AgentInitramfs(const Request&) {
  auto bundle = bundle_->Get();
  if (!bundle.ok()) return Refused(bundle.status());
  // The cache's own buffer: every answer in flight shares it (issue 40).
  Response r = Response::Shared(200, bundle->bytes, "application/octet-stream");
  r.headers.emplace_back("ETag", "\"" + bundle->sha256_hex + "\"");
  return r;
}

Response PublicHandlers::AgentInitramfsDigest(const Request&) {
  auto bundle = bundle_->Get();
  if (!bundle.ok()) return Refused(bundle.status());
  return Response::Text(200, bundle->sha256_hex + "  agent-initramfs.cpio.zst\n");
}

}  // namespace rackgate::daemon
