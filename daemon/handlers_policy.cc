// The admin API's boot policy routes (docs/policy.md, "From observation to
// enforcement"): decode (wire/admin_policy.h), call core::PolicyService,
// encode.
#include <string>

#include "daemon/handlers_admin.h"
#include "wire/admin_policy.h"

namespace rackgate::daemon {

// GET /v1/admin/pools/{name}/policy.
Result<Response> AdminApi::PolicyShow(const Request& request) {
  return Serve(
      request, [&](const storage::Actor&) { return core_->policies.Show(request.PathParam("name")); },
      Json200(wire::EncodePolicyShowView));
}

// POST /v1/admin/pools/{name}/policy/mode.
Result<Response> AdminApi::PolicyMode(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodePolicyModeRequest(request.body); },
      [&](const auto& mode, const storage::Actor& actor) {
        return core_->policies.SetMode(request.PathParam("name"), mode, actor);
      },
      Json200(wire::EncodePolicyModeView));
}

// GET /v1/admin/pools/{name}/policy/proposal.
Result<Response> AdminApi::PolicyPropose(const Request& request) {
  return Serve(
      request, [&](const storage::Actor&) { return core_->policies.ShowProposal(request.PathParam("name")); },
      Json200(wire::EncodePolicyProposalView));
}

// POST /v1/admin/pools/{name}/policy/accept.
Result<Response> AdminApi::PolicyAccept(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodePolicyAcceptRequest(request.body); },
      [&](const auto& accept, const storage::Actor& actor) {
        return core_->policies.Accept(request.PathParam("name"), accept, actor);
      },
      Json200(wire::EncodePolicyAppliedView));
}

// PUT /v1/admin/pools/{name}/policy.
Result<Response> AdminApi::PolicyPut(const Request& request) {
  return Serve(
      request, [&] { return wire::DecodePolicyPutRequest(request.body); },
      [&](const auto& put, const storage::Actor& actor) {
        return core_->policies.Put(request.PathParam("name"), put, actor);
      },
      Json200(wire::EncodePolicyAppliedView));
}

}  // namespace rackgate::daemon
