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
  add("POST", "/v1/admin/machines/{hostname}/approve", [this](const Request& r) { return ApproveMachine(r); });
  add("POST", "/v1/admin/machines/{hostname}/revoke", [this](const Request& r) { return RevokeMachine(r); });
  add("POST", "/v1/admin/machines/{hostname}/reset", [this](const Request& r) { return ResetMachine(r); });
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
  return Serve(
      request, [&] { return wire::DecodeEnrollRequest(request.body); },
      [this](const auto& enroll, const storage::Actor& actor) { return core_->machines.Enroll(enroll, actor); },
      [](const auto& enrolled) {
        return Response::Json(enrolled.created ? 201 : 200, wire::EncodeEnrollAnswer(enrolled.answer));
      });
}

// Streamed: the core takes each row as the wire decodes it.
Result<Response> AdminApi::Import(const Request& request) {
  const auto decode = [&request](const wire::ImportRowSink& row) {
    return wire::DecodeImportRequest(request.body, row);
  };
  return Serve(
      request, [&](const storage::Actor& actor) { return core_->machines.Import(decode, actor); },
      Json200(wire::EncodeImportAnswer));
}

// GET /v1/admin/machines?pool=P&state=S.
Result<Response> AdminApi::List(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodeMachineListQuery(request.query); },
      [this](const auto& query, const storage::Actor&) { return core_->machines.List(query.pool, query.state); },
      Json200(wire::EncodeMachineList));
}

Result<Response> AdminApi::Show(const Request& request) {
  return Serve(
      request, [&](const storage::Actor&) { return core_->machines.Show(request.PathParam("hostname")); },
      Json200(wire::EncodeMachineView));
}

namespace {

// POST .../revoke and .../reset: a body that is no JSON object is read as
// none, as the appliance always did (the core then refuses a revoke without
// a reason, and a reset of a revoked machine without unrevoke).
Result<wire::ReasonRequest> LenientReason(const Request& request) {
  auto decoded = wire::DecodeReasonRequest(request.body);
  return decoded.ok() ? *decoded : wire::ReasonRequest{};
}

}  // namespace

Result<Response> AdminApi::RevokeMachine(const Request& request) {
  return Serve(
      request, [&] { return LenientReason(request); },
      [&](const wire::ReasonRequest& body, const storage::Actor& actor) {
        return core_->machines.Revoke(request.PathParam("hostname"), body.reason, actor);
      },
      Json200(wire::EncodeMachineView));
}

Result<Response> AdminApi::ResetMachine(const Request& request) {
  return Serve(
      request, [&] { return LenientReason(request); },
      [&](const wire::ReasonRequest& body, const storage::Actor& actor) {
        return core_->machines.Reset(request.PathParam("hostname"), body.reason, body.unrevoke, actor);
      },
      Json200(wire::EncodeMachineView));
}

Result<Response> AdminApi::ApproveMachine(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodeApprovalRequest(request.body); },
      [&](const auto& approval, const storage::Actor& actor) {
        return core_->machines.Approve(request.PathParam("hostname"), approval, actor);
      },
      Json200(wire::EncodeMachineView));
}

Result<Response> AdminApi::DeleteMachine(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodeReasonRequest(request.body); },
      [&](const auto& body, const storage::Actor& actor) {
        return core_->machines.Delete(request.PathParam("hostname"), body.reason, actor);
      },
      Json200(wire::EncodeMachineView));
}

Result<Response> AdminApi::RenameMachine(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodeRenameRequest(request.body); },
      [&](const auto& rename, const storage::Actor& actor) {
        return core_->machines.Rename(request.PathParam("hostname"), rename, actor);
      },
      Json200(wire::EncodeMachineView));
}

// POST /v1/admin/ek-certs: one certificate per request, so that each file
// of `rackgatectl ek-cert import` gets its own result.
Result<Response> AdminApi::ImportEkCert(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodeEkCertImportRequest(request.body); },
      [this](const auto& body, const storage::Actor& actor) { return core_->ek_certs.Import(body, actor); },
      Json200(wire::EncodeEkCertImportAnswer));
}

Result<Response> AdminApi::MissingEkCerts(const Request& request) {
  return Serve(
      request, [this](const storage::Actor&) { return core_->ek_certs.Missing(); },
      Json200(wire::EncodeEkCertMissingList));
}

// GET /v1/admin/audit?hostname=H&limit=N&since=ID.
Result<Response> AdminApi::Audit(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodeAuditQuery(request.query); },
      [this](const auto& query, const storage::Actor&) {
        return core_->audit.List(query.hostname, query.limit, query.since);
      },
      Json200(wire::EncodeAuditList));
}

// GET /v1/admin/status.
Result<Response> AdminApi::StatusReport(const Request& request) {
  return Serve(
      request, [this](const storage::Actor&) { return core_->status.Report(); }, Json200(wire::EncodeStatusView));
}

// PUT /v1/admin/pools/{name} (docs/ignition.md): decoded, put by the core,
// answered 201 when the put made the pool.
Result<Response> AdminApi::PutPool(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodePoolPutRequest(request.body); },
      [&](const auto& put, const storage::Actor& actor) {
        return core_->pools.Put(request.PathParam("name"), put, actor);
      },
      [](const auto& stored) {
        return Response::Json(stored.created ? 201 : 200, wire::EncodePoolView(stored.pool));
      });
}

// PUT /v1/admin/pools/{name}/templates/{which}: the body is the template;
// DELETE removes it.
Result<Response> AdminApi::PutTemplate(const Request& request) {
  std::optional<std::string_view> text;
  if (request.method != "DELETE") text = request.body;
  return Serve(
      request,
      [&](const storage::Actor& actor) {
        return core_->pools.SetTemplate(request.PathParam("name"), request.PathParam("which"), text, actor);
      },
      Json200(wire::EncodePoolView));
}

// GET /v1/admin/certificates?hostname=H&limit=N.
Result<Response> AdminApi::Certificates(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodeCertificateQuery(request.query); },
      [this](const auto& query, const storage::Actor&) {
        return core_->certificates.List(query.hostname, query.limit);
      },
      Json200(wire::EncodeCertificateList));
}

Result<Response> AdminApi::RotateToken(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodeTokenRotateRequest(request.body); },
      [&](const auto& rotate, const storage::Actor& actor) {
        return core_->pools.RotateToken(request.PathParam("name"), rotate.grace_seconds, actor);
      },
      Json200(wire::EncodeTokenRotation));
}

Result<Response> AdminApi::GetPools(const Request& request) {
  const std::optional<std::string> one = request.OptionalPathParam("name");
  return Serve(
      request, [&](const storage::Actor&) { return core_->pools.List(one); },
      [&](const auto& pools) {
        return Response::Json(200, one ? wire::EncodePoolView(pools.front()) : wire::EncodePoolList(pools));
      });
}

// --- Webhook events (docs/events.md) -----------------------------------------

// GET /v1/admin/events?pending=1&limit=N.
Result<Response> AdminApi::Events(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodeEventQuery(request.query); },
      [this](const auto& query, const storage::Actor&) { return core_->events.List(query.limit, query.pending); },
      Json200(wire::EncodeEventList));
}

// --- Manual CSR approval and discovery -----------------------------------------

// GET /v1/admin/csrs[?all=1][&limit=N].
Result<Response> AdminApi::Csrs(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodeCsrQuery(request.query); },
      [this](const auto& query, const storage::Actor&) { return core_->csr_approvals.List(query.all, query.limit); },
      Json200(wire::EncodeCsrList));
}

// POST /v1/admin/csrs/{id}/approve|deny.
Result<Response> AdminApi::DecideCsr(const Request& request, bool approve) {
  return Serve(
      request, [&] { return wire::DecodeCsrDecisionRequest(request.body); },
      [&](const auto& decision, const storage::Actor& actor) {
        return core_->csr_approvals.Decide(request.PathParam("id"), approve, decision.reason, actor, decision.uid);
      },
      Json200(wire::EncodeCsrView));
}

// --- The audit chain (docs/audit.md) -----------------------------------------

// GET /v1/admin/audit/verify[?anchor=ID:HASH]: 200 with the report, or
// 409 audit_chain_broken with the report beside the refusal.
Result<Response> AdminApi::VerifyAudit(const Request& request) {
  const auto encode = [](const auto& verdict) {
    if (verdict.report.intact) return Response::Json(200, wire::EncodeAuditChain(verdict.report));
    Response r = AdminErrorResponse(Status::Corruption("audit_chain_broken", verdict.message));
    r.body = wire::AddAuditChainReport(r.body, verdict.report);
    return r;
  };
  return Serve(
      request, [&] { return wire::DecodeAuditVerifyQuery(request.query); },
      [this](const auto& query, const storage::Actor& actor) { return core_->audit.Verify(query.anchor, actor); },
      encode);
}

}  // namespace rackgate::daemon
