// The admin API on the Unix socket (docs/operations.md): enrollment, import,
// listing, approve/revoke/reset, audit, status, pools with their Ignition
// templates and provisioning tokens, for rackgatectl.
// Every request is checked against the peer's credentials, and every change
// is audited with the peer's user and the operator's reason.
#ifndef RACKGATE_DAEMON_HANDLERS_ADMIN_H_
#define RACKGATE_DAEMON_HANDLERS_ADMIN_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "core/admin_core.h"
#include "daemon/http.h"

namespace rackgate::daemon {

class AdminApi {
 public:
  // BORROWED: core outlives the API. `admin_gid` is the group whose members
  // may call it (besides root and the daemon's own user); nullopt when the
  // group does not exist.
  AdminApi(core::AdminCore* core, std::optional<gid_t> admin_gid);

  // Adds the /v1/admin/... routes.
  void Register(Router* router);

 private:
  // The actor for the audit log; admin_forbidden (403) when the peer may
  // not administer.
  Result<storage::Actor> Authorize(const Request& request) const;

  // The lines every admin route shares, once: Authorize, then `decode()`
  // (the request's body or query through wire/, a Result), then
  // `call(decoded, actor)` (one core call, a Result), then `encode(value)`
  // (a Response). The first refusal is the answer; nothing is decoded for a
  // peer that may not administer.
  template <typename Decode, typename Call, typename Encode>
  Result<Response> Serve(const Request& request, Decode decode, Call call, Encode encode) const;
  // As above for a route with nothing to decode: `call(actor)`.
  template <typename Call, typename Encode>
  Result<Response> Serve(const Request& request, Call call, Encode encode) const;

  // Each route's handler: its answer, or the refusal that Register's
  // wrapper answers through the one reason table (daemon/status_http.h).

  Result<Response> Enroll(const Request& request);
  Result<Response> Import(const Request& request);
  Result<Response> List(const Request& request);
  Result<Response> Show(const Request& request);
  Result<Response> RevokeMachine(const Request& request);
  Result<Response> ResetMachine(const Request& request);
  Result<Response> Audit(const Request& request);
  Result<Response> StatusReport(const Request& request);
  Result<Response> PutPool(const Request& request);
  Result<Response> GetPools(const Request& request);
  Result<Response> PutTemplate(const Request& request);  // PUT and DELETE
  Result<Response> RotateToken(const Request& request);
  Result<Response> Certificates(const Request& request);
  // Webhook events (docs/events.md).
  Result<Response> Events(const Request& request);
  // Manual CSR approval and discovery (docs/csr.md, docs/operations.md).
  Result<Response> ApproveMachine(const Request& request);
  Result<Response> Csrs(const Request& request);
  Result<Response> DecideCsr(const Request& request, bool approve);
  // Delete, rename, the audit chain (docs/lifecycle.md, docs/audit.md).
  Result<Response> DeleteMachine(const Request& request);
  Result<Response> RenameMachine(const Request& request);
  Result<Response> VerifyAudit(const Request& request);
  // EK certificates a TPM does not hold (docs/operations.md).
  Result<Response> ImportEkCert(const Request& request);
  Result<Response> MissingEkCerts(const Request& request);
  // Boot policy: observe/enforce, propose, accept, put, show
  // (daemon/handlers_policy.cc; docs/policy.md).
  Result<Response> PolicyShow(const Request& request);
  Result<Response> PolicyMode(const Request& request);
  Result<Response> PolicyPropose(const Request& request);
  Result<Response> PolicyAccept(const Request& request);
  Result<Response> PolicyPut(const Request& request);

  core::AdminCore* core_;
  std::optional<gid_t> admin_gid_;
};

// An encoder for Serve: 200 with `encode(value)` (a wire/admin_*.h
// encoder) as the body.
template <typename T>
auto Json200(std::string (*encode)(const T&)) {
  return [encode](const T& value) { return Response::Json(200, encode(value)); };
}

template <typename Decode, typename Call, typename Encode>
Result<Response> AdminApi::Serve(const Request& request, Decode decode, Call call, Encode encode) const {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto decoded = decode();
  if (!decoded.ok()) return decoded.status();
  auto result = call(*decoded, *actor);
  if (!result.ok()) return result.status();
  return encode(*result);
}

template <typename Call, typename Encode>
Result<Response> AdminApi::Serve(const Request& request, Call call, Encode encode) const {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto result = call(*actor);
  if (!result.ok()) return result.status();
  return encode(*result);
}

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_HANDLERS_ADMIN_H_
