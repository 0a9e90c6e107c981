// rackgatectl status over the admin API (wire/admin_status.h,
// core/status_service.h): the appliance at a glance.
#include "ctl/commands.h"

#include <cstdio>
#include <string>

#include "base/utc_time.h"
#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/command_line.h"
#include "wire/admin_status.h"

namespace rackgate::ctl {

namespace {

constexpr char kStatusHelp[] =
    "Usage: rackgatectl status [--json]\n"
    "\n"
    "The appliance at a glance: machines by state, untrusted machines, and the\n"
    "recent attestation failures with their reason codes.\n"
    "\n"
    "Options:\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

}  // namespace

int RunStatus(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{}, {"json"}, 0});
  if (!args.ok()) return UsageError(kStatusHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kStatusHelp);
  int code = kExitOk;
  auto r = Send(socket, "GET", "/v1/admin/status", &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
  auto status = DecodeAnswer(*r, wire::DecodeStatusView, &code);
  if (!status.ok()) return code;
  // First and loud: an observing pool must never be taken for an enforcing
  // one (docs/policy.md, "Observe").
  for (const std::string& p : status->pools_observing_boot_policy) {
    std::printf("WARNING: pool %s is OBSERVING: its boot policy is NOT ENFORCED (rackgatectl policy show --pool %s)\n",
                p.c_str(), p.c_str());
  }
  // docs/operations.md, "Rotating the appliance CA".
  if (!status->appliance_ca_rotation.empty()) {
    std::printf("appliance CA rotation: %s (prepared %s; rackgatectl ca rotate --appliance status)\n",
                status->appliance_ca_rotation.c_str(), UtcTime(status->appliance_ca_rotation_since).c_str());
  }
  std::printf("machines by state:\n");
  for (const auto& [state, n] : status->machines_by_state) {
    std::printf("  %-12s %lld\n", state.c_str(), static_cast<long long>(n));
  }
  // Trust (docs/trust.md).
  std::printf("untrusted machines: %lld\n", static_cast<long long>(status->machines_untrusted));
  // The cluster CA and its rotation (docs/operations.md §9), when signer
  // mode has one.
  if (const wire::ClusterCaView& ca = status->cluster_ca; !ca.stage.empty()) {
    std::printf("cluster CA: rotation %s, expires %s", ca.stage.c_str(), UtcTime(ca.not_after).c_str());
    if (ca.other_not_after != 0) {
      std::printf("; %s CA expires %s", ca.stage == "prepared" ? "next" : "previous",
                  UtcTime(ca.other_not_after).c_str());
    }
    std::printf("\n");
  }
  std::printf("recent attestation failures:\n");
  for (const wire::StatusFailureView& f : status->recent_failures) {
    std::printf("  %-21s %-20s %s\n", UtcTime(f.at).c_str(), f.hostname.c_str(), f.reason.c_str());
  }
  // Observability (docs/observability.md).
  std::printf("unknown EKs knocking (last hour): %zu\n", status->unknown_eks.size());
  for (const wire::UnknownEkView& k : status->unknown_eks) {
    std::printf("  %-16s  %-21s %-21s %5llu  %-15s %s\n", k.ek_hash.substr(0, 16).c_str(),
                UtcTime(k.first_seen).c_str(), UtcTime(k.last_seen).c_str(),
                static_cast<unsigned long long>(k.count), k.address.c_str(), k.reason.c_str());
    if (!k.ek_certificate_issuer.empty()) std::printf("    EK certificate issuer: %s\n", k.ek_certificate_issuer.c_str());
  }
  if (!status->unknown_eks.empty()) {
    std::printf("  enroll them with `rackgatectl enroll` or `rackgatectl import` (the full hash is in --json)\n");
  }
  // Trust (docs/trust.md): refusals before proof of the TPM leave the
  // machine's trust alone; this is where an operator sees them.
  std::printf("refused before proof of the TPM (last hour; trust unchanged): %zu machines\n",
              status->anonymous_refusals.size());
  for (const wire::AnonymousRefusalView& a : status->anonymous_refusals) {
    std::printf("  %-21s %-20s %6llu  %-15s %s\n", UtcTime(a.last_seen).c_str(), a.hostname.c_str(),
                static_cast<unsigned long long>(a.count), a.address.c_str(), a.reason.c_str());
  }
  return kExitOk;
}

}  // namespace rackgate::ctl
