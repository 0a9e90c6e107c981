// The admin API's status (GET /v1/admin/status; docs/trust.md,
// docs/observability.md, docs/policy.md) as a typed value with an encoder
// and a decoder, for rackgated and `rackgatectl status`. Decoding fails as
// wire/admin_pools.h says.
#ifndef RACKGATE_WIRE_ADMIN_STATUS_H_
#define RACKGATE_WIRE_ADMIN_STATUS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::wire {

// A refused attestation of an enrolled machine.
struct StatusFailureView {
  int64_t at = 0;
  std::string hostname;
  std::string reason;                // the refusal's reason code
  std::vector<std::string> reasons;  // every reason (e.g. each policy violation)
  bool operator==(const StatusFailureView&) const = default;
};

// An EK no machine has that asked for a challenge (docs/observability.md).
struct UnknownEkView {
  std::string ek_hash;  // hex
  int64_t first_seen = 0;
  int64_t last_seen = 0;
  uint64_t count = 0;
  std::string address;
  std::string reason;
  // From the EK certificate it sent, untrusted; "" is left out.
  std::string ek_certificate_issuer;
  std::string ek_certificate_subject;
  bool operator==(const UnknownEkView&) const = default;
};

// Evidence refused before its sender proved it holds the machine's TPM
// (docs/trust.md, "Only proof moves trust"), per machine.
struct AnonymousRefusalView {
  std::string hostname;
  uint64_t count = 0;
  int64_t first_seen = 0;
  int64_t last_seen = 0;
  std::string address;
  std::string reason;
  bool operator==(const AnonymousRefusalView&) const = default;
};

// The cluster CA's files (signer mode) and its rotation's stage
// (docs/operations.md, "Rotating the cluster CA"): stage "none",
// "prepared", "switching" or "switched"; "" when the appliance has no
// cluster CA (the JSON then has no "cluster_ca").
struct ClusterCaView {
  std::string stage;
  int64_t not_after = 0;        // the current CA's
  int64_t other_not_after = 0;  // the next (prepared) or previous (switched) CA's; 0 when none
  bool operator==(const ClusterCaView&) const = default;
};

// The appliance at a glance.
struct StatusView {
  std::map<std::string, int64_t> machines_by_state;  // every state, 0 when none
  std::vector<StatusFailureView> recent_failures;    // newest first
  int64_t machines_untrusted = 0;
  std::vector<std::string> pools_observing_boot_policy;
  std::vector<UnknownEkView> unknown_eks;                // the last hour's, most recent first
  std::vector<AnonymousRefusalView> anonymous_refusals;  // the last hour's, most recent first
  uint64_t anonymous_refusals_total = 0;                 // since the appliance started
  // The fleet's appliance CA rotation (docs/operations.md, "Rotating the
  // appliance CA"): "" when none runs, else "prepared" or "switched", and
  // since when (prepared_at). Absent from an appliance before 0.2.0.
  std::string appliance_ca_rotation;
  int64_t appliance_ca_rotation_since = 0;
  ClusterCaView cluster_ca;
  bool operator==(const StatusView&) const = default;
};

// Encoding: invalid UTF-8 in a text (a hostname or an EK certificate's
// names come from machines) is replaced (U+FFFD), never thrown.
std::string EncodeStatusView(const StatusView& status);
Result<StatusView> DecodeStatusView(std::string_view body);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_ADMIN_STATUS_H_
