// Encoders and decoders of the admin API's query strings.
#include "wire/admin_query.h"

#include <charconv>
#include <utility>
#include <vector>

#include "base/hex.h"

namespace rackgate::wire {

namespace {

constexpr char kHostname[] = "hostname";
constexpr char kLimit[] = "limit";
constexpr char kSince[] = "since";
constexpr char kAnchor[] = "anchor";
constexpr char kPending[] = "pending";
constexpr char kAll[] = "all";
constexpr char kPool[] = "pool";
constexpr char kState[] = "state";

// "?a=1&b=2" from the pairs given, in order; "" for none.
std::string Join(const std::vector<std::pair<const char*, std::string>>& pairs) {
  std::string out;
  for (const auto& [name, value] : pairs) {
    out += (out.empty() ? "?" : "&") + std::string(name) + "=" + hex::PercentEncode(value);
  }
  return out;
}

// A number parameter: `fallback` when absent.
Result<int64_t> Number(const QueryParams& params, const char* name, int64_t fallback) {
  auto it = params.find(name);
  if (it == params.end()) return fallback;
  const std::string& text = it->second;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) {
    return Status::InvalidArgument("field_invalid", std::string(name) + " must be a whole number, not '" +
                                                        text.substr(0, 32) + "'");
  }
  return v;
}

// A flag parameter: false when absent.
Result<bool> Flag(const QueryParams& params, const char* name) {
  auto it = params.find(name);
  if (it == params.end()) return false;
  const std::string& v = it->second;
  if (v.empty() || v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  return Status::InvalidArgument("field_invalid", std::string(name) + " is 1 or 0, not '" + v.substr(0, 32) + "'");
}

std::optional<std::string> Text(const QueryParams& params, const char* name) {
  auto it = params.find(name);
  if (it == params.end()) return std::nullopt;
  return it->second;
}

}  // namespace

std::string EncodeAuditQuery(const AuditQuery& q) {
  std::vector<std::pair<const char*, std::string>> pairs = {{kLimit, std::to_string(q.limit)}};
  if (q.since != 0) pairs.emplace_back(kSince, std::to_string(q.since));
  if (q.hostname) pairs.emplace_back(kHostname, *q.hostname);
  return Join(pairs);
}

Result<AuditQuery> DecodeAuditQuery(const QueryParams& params) {
  AuditQuery q;
  auto limit = Number(params, kLimit, q.limit);
  if (!limit.ok()) return limit.status();
  auto since = Number(params, kSince, q.since);
  if (!since.ok()) return since.status();
  q.hostname = Text(params, kHostname);
  q.limit = *limit;
  q.since = *since;
  return q;
}

std::string EncodeAuditVerifyQuery(const AuditVerifyQuery& q) {
  if (!q.anchor) return "";
  return Join({{kAnchor, *q.anchor}});
}

Result<AuditVerifyQuery> DecodeAuditVerifyQuery(const QueryParams& params) {
  return AuditVerifyQuery{Text(params, kAnchor)};
}

std::string EncodeEventQuery(const EventQuery& q) {
  std::vector<std::pair<const char*, std::string>> pairs = {{kLimit, std::to_string(q.limit)}};
  if (q.pending) pairs.emplace_back(kPending, "1");
  return Join(pairs);
}

Result<EventQuery> DecodeEventQuery(const QueryParams& params) {
  EventQuery q;
  auto limit = Number(params, kLimit, q.limit);
  if (!limit.ok()) return limit.status();
  auto pending = Flag(params, kPending);
  if (!pending.ok()) return pending.status();
  q.limit = *limit;
  q.pending = *pending;
  return q;
}

std::string EncodeCsrQuery(const CsrQuery& q) {
  std::vector<std::pair<const char*, std::string>> pairs = {{kLimit, std::to_string(q.limit)}};
  if (q.all) pairs.emplace_back(kAll, "1");
  return Join(pairs);
}

Result<CsrQuery> DecodeCsrQuery(const QueryParams& params) {
  CsrQuery q;
  auto all = Flag(params, kAll);
  if (!all.ok()) return all.status();
  auto limit = Number(params, kLimit, q.limit);
  if (!limit.ok()) return limit.status();
  q.all = *all;
  q.limit = *limit;
  return q;
}

std::string EncodeCertificateQuery(const CertificateQuery& q) {
  std::vector<std::pair<const char*, std::string>> pairs = {{kLimit, std::to_string(q.limit)}};
  if (q.hostname) pairs.emplace_back(kHostname, *q.hostname);
  return Join(pairs);
}

Result<CertificateQuery> DecodeCertificateQuery(const QueryParams& params) {
  CertificateQuery q;
  auto limit = Number(params, kLimit, q.limit);
  if (!limit.ok()) return limit.status();
  q.hostname = Text(params, kHostname);
  q.limit = *limit;
  return q;
}

std::string EncodeMachineListQuery(const MachineListQuery& q) {
  std::vector<std::pair<const char*, std::string>> pairs;
  if (q.pool) pairs.emplace_back(kPool, *q.pool);
  if (q.state) pairs.emplace_back(kState, *q.state);
  return Join(pairs);
}

Result<MachineListQuery> DecodeMachineListQuery(const QueryParams& params) {
  return MachineListQuery{Text(params, kPool), Text(params, kState)};
}

}  // namespace rackgate::wire
