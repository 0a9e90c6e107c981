// The admin API over the Unix socket: decode (wire/admin_*.h), call a core service, encode.
#include "daemon/handlers_admin.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <string>

#include "daemon/status_http.h"
#include "wire/admin_audit.h"
#include "wire/admin_certificates.h"
#include "wire/admin_csrs.h"
#include "wire/admin_ek_certs.h"
#include "wire/admin_events.h"
#include "wire/admin_machines.h"
#include "wire/admin_pools.h"
#include "wire/admin_query.h"
#include "wire/admin_status.h"

namespace rackgate::daemon {

AdminApi::AdminApi(core::AdminCore* core, std::optional<gid_t> admin_gid)
    : core_(core),
      admin_gid_(admin_gid) {}

Result<storage::Actor> AdminApi::Authorize(const Request& request) const {
  if (!request.admin || !request.peer_cred) {
    return Status::VerificationFailed("admin_forbidden", "the admin API is only served on the admin socket");
  }
  const PeerCred& p = *request.peer_cred;
  // The socket's mode (0660, admin group) is the first gate; the peer's
  // credentials are the second, so a socket file made too permissive by
  // hand still admits only root, our own user and the admin group.
  bool allowed = p.uid == 0 || p.uid == ::geteuid();
  if (!allowed && admin_gid_) {
    allowed = p.gid == *admin_gid_;
    for (gid_t g : p.groups) allowed = allowed || g == *admin_gid_;
  }
  std::string name = "uid " + std::to_string(p.uid);
  if (struct passwd* pw = ::getpwuid(p.uid)) name = pw->pw_name;
  if (!allowed) {
    // Logged and audited with the user by the server's refusal hook
    // (daemon/observability.cc), as every refused admin request is.
    std::string group = "the admin group";
    if (admin_gid_) {
      if (struct group* gr = ::getgrgid(*admin_gid_)) group = std::string("the admin group ") + gr->gr_name;
    }
    return Status::VerificationFailed("admin_forbidden", "you are not root, the daemon's user or in " + group);
  }
  return storage::Actor{name, ""};
}

void AdminApi::Register(Router* router) {
  // Every route answers a refusal through the one reason table.
  const auto add = [router](const char* method, const std::string& path,
                            std::function<Result<Response>(const Request&)> f) {
    router->Add(method, path, [f = std::move(f)](const Request& r) {
      Result<Response> answer = f(r);
      return answer.ok() ? std::move(answer).value() : AdminErrorResponse(answer.status());
    });
  };
  add("POST", "/v1/admin/machines", [this](const Request& r) { return Enroll(r); });
  add("GET", "/v1/admin/machines", [this](const Request& r) { return List(r); });
  add("POST", "/v1/admin/import", [this](const Request& r) { return Import(r); });
  add("GET", "/v1/admin/machines/{hostname}", [this](const Request& r) { return Show(r); });
  for (const char* verb : {"approve", "revoke", "reset"}) {
    add("POST", std::string("/v1/admin/machines/{hostname}/") + verb,
        [this, v = std::string(verb)](const Request& r) { return Action(r, v); });
  }
  add("GET", "/v1/admin/audit", [this](const Request& r) { return Audit(r); });
  add("GET", "/v1/admin/status", [this](const Request& r) { return StatusReport(r); });
  add("GET", "/v1/admin/pools", [this](const Request& r) { return GetPools(r); });
  add("GET", "/v1/admin/pools/{name}", [this](const Request& r) { return GetPools(r); });
  add("PUT", "/v1/admin/pools/{name}", [this](const Request& r) { return PutPool(r); });
  add("PUT", "/v1/admin/pools/{name}/templates/{which}", [this](const Request& r) { return PutTemplate(r); });
  add("DELETE", "/v1/admin/pools/{name}/templates/{which}", [this](const Request& r) { return PutTemplate(r); });
  add("POST", "/v1/admin/pools/{name}/token/rotate", [this](const Request& r) { return RotateToken(r); });
  add("GET", "/v1/admin/certificates", [this](const Request& r) { return Certificates(r); });
  add("GET", "/v1/admin/events", [this](const Request& r) { return Events(r); });
  add("GET", "/v1/admin/csrs", [this](const Request& r) { return Csrs(r); });
  add("POST", "/v1/admin/csrs/{id}/approve", [this](const Request& r) { return DecideCsr(r, true); });
  add("POST", "/v1/admin/csrs/{id}/deny", [this](const Request& r) { return DecideCsr(r, false); });
  // Delete, rename, the audit chain (docs/lifecycle.md, docs/audit.md).
  add("DELETE", "/v1/admin/machines/{hostname}", [this](const Request& r) { return DeleteMachine(r); });
  add("POST", "/v1/admin/machines/{hostname}/rename", [this](const Request& r) { return RenameMachine(r); });
  add("GET", "/v1/admin/audit/verify", [this](const Request& r) { return VerifyAudit(r); });
  // EK certificates a TPM does not hold (docs/operations.md).
  add("POST", "/v1/admin/ek-certs", [this](const Request& r) { return ImportEkCert(r); });
  add("GET", "/v1/admin/ek-certs/missing", [this](const Request& r) { return MissingEkCerts(r); });
  // Boot policy (docs/policy.md, "From observation to enforcement").
  add("GET", "/v1/admin/pools/{name}/policy", [this](const Request& r) { return PolicyShow(r); });
  add("PUT", "/v1/admin/pools/{name}/policy", [this](const Request& r) { return PolicyPut(r); });
  add("POST", "/v1/admin/pools/{name}/policy/mode", [this](const Request& r) { return PolicyMode(r); });
  add("GET", "/v1/admin/pools/{name}/policy/proposal", [this](const Request& r) { return PolicyPropose(r); });
  add("POST", "/v1/admin/pools/{name}/policy/accept", [this](const Request& r) { return PolicyAccept(r); });
}

// --- Machines (docs/operations.md, docs/inventory.md, docs/lifecycle.md) ------

Result<Response> AdminApi::Enroll(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto enroll = wire::DecodeEnrollRequest(request.body);
  if (!enroll.ok()) return enroll.status();
  auto enrolled = core_->machines.Enroll(*enroll, *actor);
  if (!enrolled.ok()) return enrolled.status();
  return Response::Json(enrolled->created ? 201 : 200, wire::EncodeEnrollAnswer(enrolled->answer));
}

// Streamed: the core takes each row as the wire decodes it.
Result<Response> AdminApi::Import(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  const auto decode = [&request](const wire::ImportRowSink& row) {
    return wire::DecodeImportRequest(request.body, row);
  };
  auto answer = core_->machines.Import(decode, *actor);
  if (!answer.ok()) return answer.status();
  return Response::Json(200, wire::EncodeImportAnswer(*answer));
}

// GET /v1/admin/machines?pool=P&state=S.
Result<Response> AdminApi::List(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto query = wire::DecodeMachineListQuery(request.query);
  if (!query.ok()) return query.status();
  auto list = core_->machines.List(query->pool, query->state);
  if (!list.ok()) return list.status();
  return Response::Json(200, wire::EncodeMachineList(*list));
}

Result<Response> AdminApi::Show(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto m = core_->machines.Show(request.PathParam("hostname"));
  if (!m.ok()) return m.status();
  return Response::Json(200, wire::EncodeMachineView(*m));
}

// POST .../revoke and .../reset: a body that is no JSON object is read as
// none, as the appliance always did (the core then refuses a revoke without
// a reason, and a reset of a revoked machine without unrevoke).
Result<Response> AdminApi::Action(const Request& request, const std::string& verb) {
  if (verb == "approve") return ApproveMachine(request);
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto decoded = wire::DecodeReasonRequest(request.body);
  const wire::ReasonRequest body = decoded.ok() ? *decoded : wire::ReasonRequest{};
  const std::string& host = request.PathParam("hostname");
  auto m = verb == "revoke" ? core_->machines.Revoke(host, body.reason, *actor)
                            : core_->machines.Reset(host, body.reason, body.unrevoke, *actor);
  if (!m.ok()) return m.status();
  return Response::Json(200, wire::EncodeMachineView(*m));
}

Result<Response> AdminApi::ApproveMachine(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto approval = wire::DecodeApprovalRequest(request.body);
  if (!approval.ok()) return approval.status();
  auto m = core_->machines.Approve(request.PathParam("hostname"), *approval, *actor);
  if (!m.ok()) return m.status();
  return Response::Json(200, wire::EncodeMachineView(*m));
}

Result<Response> AdminApi::DeleteMachine(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto body = wire::DecodeReasonRequest(request.body);
  if (!body.ok()) return body.status();
  auto m = core_->machines.Delete(request.PathParam("hostname"), body->reason, *actor);
  if (!m.ok()) return m.status();
  return Response::Json(200, wire::EncodeMachineView(*m));
}

Result<Response> AdminApi::RenameMachine(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto rename = wire::DecodeRenameRequest(request.body);
  if (!rename.ok()) return rename.status();
  auto m = core_->machines.Rename(request.PathParam("hostname"), *rename, *actor);
  if (!m.ok()) return m.status();
  return Response::Json(200, wire::EncodeMachineView(*m));
}

// POST /v1/admin/ek-certs: one certificate per request, so that each file
// of `rackgatectl ek-cert import` gets its own result.
Result<Response> AdminApi::ImportEkCert(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto body = wire::DecodeEkCertImportRequest(request.body);
  if (!body.ok()) return body.status();
  auto answer = core_->ek_certs.Import(*body, *actor);
  if (!answer.ok()) return answer.status();
  return Response::Json(200, wire::EncodeEkCertImportAnswer(*answer));
}

Result<Response> AdminApi::MissingEkCerts(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto list = core_->ek_certs.Missing();
  if (!list.ok()) return list.status();
  return Response::Json(200, wire::EncodeEkCertMissingList(*list));
}

// GET /v1/admin/audit?hostname=H&limit=N&since=ID.
Result<Response> AdminApi::Audit(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto query = wire::DecodeAuditQuery(request.query);
  if (!query.ok()) return query.status();
  auto entries = core_->audit.List(query->hostname, query->limit, query->since);
  if (!entries.ok()) return entries.status();
  return Response::Json(200, wire::EncodeAuditList(*entries));
}

// GET /v1/admin/status.
Result<Response> AdminApi::StatusReport(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto status = core_->status.Report();
  if (!status.ok()) return status.status();
  return Response::Json(200, wire::EncodeStatusView(*status));
}

// PUT /v1/admin/pools/{name} (docs/ignition.md): decoded, put by the core,
// answered 201 when the put made the pool.
Result<Response> AdminApi::PutPool(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto put = wire::DecodePoolPutRequest(request.body);
  if (!put.ok()) return put.status();
  auto stored = core_->pools.Put(request.PathParam("name"), *put, *actor);
  if (!stored.ok()) return stored.status();
  return Response::Json(stored->created ? 201 : 200, wire::EncodePoolView(stored->pool));
}

// PUT /v1/admin/pools/{name}/templates/{which}: the body is the template;
// DELETE removes it.
Result<Response> AdminApi::PutTemplate(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  std::optional<std::string_view> text;
  if (request.method != "DELETE") text = request.body;
  auto stored = core_->pools.SetTemplate(request.PathParam("name"), request.PathParam("which"), text, *actor);
  if (!stored.ok()) return stored.status();
  return Response::Json(200, wire::EncodePoolView(*stored));
}

// GET /v1/admin/certificates?hostname=H&limit=N.
Result<Response> AdminApi::Certificates(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto query = wire::DecodeCertificateQuery(request.query);
  if (!query.ok()) return query.status();
  auto certs = core_->certificates.List(query->hostname, query->limit);
  if (!certs.ok()) return certs.status();
  return Response::Json(200, wire::EncodeCertificateList(*certs));
}

Result<Response> AdminApi::RotateToken(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto rotate = wire::DecodeTokenRotateRequest(request.body);
  if (!rotate.ok()) return rotate.status();
  auto rotated = core_->pools.RotateToken(request.PathParam("name"), rotate->grace_seconds, *actor);
  if (!rotated.ok()) return rotated.status();
  return Response::Json(200, wire::EncodeTokenRotation(*rotated));
}

Result<Response> AdminApi::GetPools(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  const std::optional<std::string> one = request.OptionalPathParam("name");
  auto pools = core_->pools.List(one);
  if (!pools.ok()) return pools.status();
  if (one) return Response::Json(200, wire::EncodePoolView(pools->front()));
  return Response::Json(200, wire::EncodePoolList(*pools));
}

// --- Webhook events (docs/events.md) -----------------------------------------

// GET /v1/admin/events?pending=1&limit=N.
Result<Response> AdminApi::Events(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto query = wire::DecodeEventQuery(request.query);
  if (!query.ok()) return query.status();
  auto events = core_->events.List(query->limit, query->pending);
  if (!events.ok()) return events.status();
  return Response::Json(200, wire::EncodeEventList(*events));
}

// --- Manual CSR approval and discovery -----------------------------------------

// GET /v1/admin/csrs[?all=1][&limit=N].
Result<Response> AdminApi::Csrs(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto query = wire::DecodeCsrQuery(request.query);
  if (!query.ok()) return query.status();
  auto list = core_->csr_approvals.List(query->all, query->limit);
  if (!list.ok()) return list.status();
  return Response::Json(200, wire::EncodeCsrList(*list));
}

// POST /v1/admin/csrs/{id}/approve|deny.
Result<Response> AdminApi::DecideCsr(const Request& request, bool approve) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto decision = wire::DecodeCsrDecisionRequest(request.body);
  if (!decision.ok()) return decision.status();
  auto decided = core_->csr_approvals.Decide(request.PathParam("id"), approve, decision->reason, *actor,
                                                   decision->uid);
  if (!decided.ok()) return decided.status();
  return Response::Json(200, wire::EncodeCsrView(*decided));
}

// --- The audit chain (docs/audit.md) -----------------------------------------

// GET /v1/admin/audit/verify[?anchor=ID:HASH]: 200 with the report, or
// 409 audit_chain_broken with the report beside the refusal.
Result<Response> AdminApi::VerifyAudit(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto query = wire::DecodeAuditVerifyQuery(request.query);
  if (!query.ok()) return query.status();
  auto verdict = core_->audit.Verify(query->anchor, *actor);
  if (!verdict.ok()) return verdict.status();
  if (verdict->report.intact) return Response::Json(200, wire::EncodeAuditChain(verdict->report));
  Response r = AdminErrorResponse(Status::Corruption("audit_chain_broken", verdict->message));
  r.body = wire::AddAuditChainReport(r.body, verdict->report);
  return r;
}

}  // namespace rackgate::daemon
