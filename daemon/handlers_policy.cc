// The admin API's boot policy routes (docs/policy.md, "From observation to
// enforcement"): decode (wire/admin_policy.h), call core::PolicyService,
// encode.
#include <string>

#include "daemon/handlers_admin.h"
#include "wire/admin_policy.h"

namespace rackgate::daemon {

// GET /v1/admin/pools/{name}/policy.
Result<Response> AdminApi::PolicyShow(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto shown = core_->policies.Show(request.PathParam("name"));
  if (!shown.ok()) return shown.status();
  return Response::Json(200, wire::EncodePolicyShowView(*shown));
}

// POST /v1/admin/pools/{name}/policy/mode.
Result<Response> AdminApi::PolicyMode(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto mode = wire::DecodePolicyModeRequest(request.body);
  if (!mode.ok()) return mode.status();
  auto pool = core_->policies.SetMode(request.PathParam("name"), *mode, *actor);
  if (!pool.ok()) return pool.status();
  return Response::Json(200, wire::EncodePolicyModeView(*pool));
}

// GET /v1/admin/pools/{name}/policy/proposal.
Result<Response> AdminApi::PolicyPropose(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto proposal = core_->policies.ShowProposal(request.PathParam("name"));
  if (!proposal.ok()) return proposal.status();
  return Response::Json(200, wire::EncodePolicyProposalView(*proposal));
}

// POST /v1/admin/pools/{name}/policy/accept.
Result<Response> AdminApi::PolicyAccept(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto accept = wire::DecodePolicyAcceptRequest(request.body);
  if (!accept.ok()) return accept.status();
  auto applied = core_->policies.Accept(request.PathParam("name"), *accept, *actor);
  if (!applied.ok()) return applied.status();
  return Response::Json(200, wire::EncodePolicyAppliedView(*applied));
}

// PUT /v1/admin/pools/{name}/policy.
Result<Response> AdminApi::PolicyPut(const Request& request) {
  auto actor = Authorize(request);
  if (!actor.ok()) return actor.status();
  auto put = wire::DecodePolicyPutRequest(request.body);
  if (!put.ok()) return put.status();
  auto applied = core_->policies.Put(request.PathParam("name"), *put, *actor);
  if (!applied.ok()) return applied.status();
  return Response::Json(200, wire::EncodePolicyAppliedView(*applied));
}

}  // namespace rackgate::daemon
