// The admin API's query strings (docs/protocol.md, "Admin API: query
// parameters") as typed values: what GET /v1/admin/machines, /audit,
// /audit/verify, /events, /csrs and /certificates take, for rackgated (decoding the
// request's parameters) and rackgatectl (encoding them).
//
// Encoding gives the text to append to the route: "" or "?name=value&...",
// each value percent-encoded (everything but A-Z a-z 0-9 - . _ ~). Decoding
// reads the parameters as the HTTP layer hands them over, escapes undone;
// a parameter not named here is ignored, an absent one takes the default
// shown. Refusals: field_invalid (kInvalidArgument), naming the parameter,
// for a number that is not a whole decimal number in int64 range, and for
// a flag that is none of "1", "true", "" (on) or "0", "false" (off). The
// ranges (a limit's clamp, an anchor's form) are the core's to check.
#ifndef RACKGATE_WIRE_ADMIN_QUERY_H_
#define RACKGATE_WIRE_ADMIN_QUERY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "base/status.h"

namespace rackgate::wire {

// A request's query parameters by name, escapes undone (the first of a
// repeated name).
using QueryParams = std::map<std::string, std::string>;

// GET /v1/admin/audit: the newest `limit` rows, or the first ones after
// row `since` (0: none), of every machine or of `hostname`.
struct AuditQuery {
  std::optional<std::string> hostname;
  int64_t limit = 100;
  int64_t since = 0;
  bool operator==(const AuditQuery&) const = default;
};
std::string EncodeAuditQuery(const AuditQuery& q);
Result<AuditQuery> DecodeAuditQuery(const QueryParams& params);

// GET /v1/admin/audit/verify: `anchor` is ID:HASH as given.
struct AuditVerifyQuery {
  std::optional<std::string> anchor;
  bool operator==(const AuditVerifyQuery&) const = default;
};
std::string EncodeAuditVerifyQuery(const AuditVerifyQuery& q);
Result<AuditVerifyQuery> DecodeAuditVerifyQuery(const QueryParams& params);

// GET /v1/admin/events: the newest `limit` events; `pending`: only those
// some webhook has not received.
struct EventQuery {
  int64_t limit = 100;
  bool pending = false;
  bool operator==(const EventQuery&) const = default;
};
std::string EncodeEventQuery(const EventQuery& q);
Result<EventQuery> DecodeEventQuery(const QueryParams& params);

// GET /v1/admin/csrs: the waiting requests, or `all` of them; at most
// `limit`.
struct CsrQuery {
  bool all = false;
  int64_t limit = 1000;
  bool operator==(const CsrQuery&) const = default;
};
std::string EncodeCsrQuery(const CsrQuery& q);
Result<CsrQuery> DecodeCsrQuery(const QueryParams& params);

// GET /v1/admin/certificates: the newest `limit` certificates, of every
// machine or of `hostname`.
struct CertificateQuery {
  std::optional<std::string> hostname;
  int64_t limit = 1000;
  bool operator==(const CertificateQuery&) const = default;
};
std::string EncodeCertificateQuery(const CertificateQuery& q);
Result<CertificateQuery> DecodeCertificateQuery(const QueryParams& params);

// GET /v1/admin/machines: every machine, or those of `pool`, in `state`
// (a state's name; the core refuses an unknown one, state_invalid).
struct MachineListQuery {
  std::optional<std::string> pool;
  std::optional<std::string> state;
  bool operator==(const MachineListQuery&) const = default;
};
std::string EncodeMachineListQuery(const MachineListQuery& q);
Result<MachineListQuery> DecodeMachineListQuery(const QueryParams& params);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_ADMIN_QUERY_H_
