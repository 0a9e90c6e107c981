// Reading a CertificateSigningRequest object and writing its approval.
#include "kube/csr.h"

#include <cstdio>
#include <ctime>

#include "base/base64.h"
#include "base/text.h"
#include "kube/csr_json.h"
#include "kube/untrusted.h"

namespace rackgate::kube {

namespace {

using json = nlohmann::json;

// Bounds of the fields the header does not name: generous for what the API
// server writes, small enough that a hostile one cannot make us hold much.
constexpr size_t kMaxUidChars = 128;
constexpr size_t kMaxResourceVersionChars = 64;
constexpr size_t kMaxTimestampChars = 40;
constexpr size_t kMaxContinueChars = 16 * 1024;
constexpr size_t kMaxSignerNameChars = 571;  // Kubernetes: 253 domain + "/" + 317 path
constexpr size_t kMaxUsernameBytes = 512;
constexpr size_t kMaxUsageChars = 64;
constexpr size_t kMaxConditionTypeChars = 64;
constexpr size_t kMaxConditionReasonBytes = 1024;
constexpr size_t kMaxConditionMessageBytes = 32 * 1024;

Status Invalid(std::string_view field, std::string_view why) {
  return Status::InvalidArgument("kube_csr_invalid",
                                 "CertificateSigningRequest " + std::string(field) + ": " + std::string(why));
}

// `obj[key]` into *out: absent or null is "" (refused when required); a
// non-string or one over `max` bytes is refused.
Status ReadString(const json& obj, std::string_view key, bool required, size_t max, std::string_view field,
                  std::string* out) {
  out->clear();
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return required ? Invalid(field, "missing") : Status::Ok();
  }
  if (!it->is_string()) return Invalid(field, "not a string");
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() > max) return Invalid(field, "longer than " + std::to_string(max) + " bytes");
  if (required && s.empty()) return Invalid(field, "empty");
  *out = s;
  return Status::Ok();
}

Status ReadStringList(const json& obj, std::string_view key, size_t max_items, size_t max_each,
                      std::string_view field, std::vector<std::string>* out) {
  out->clear();
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return Invalid(field, "not a list");
  if (it->size() > max_items) return Invalid(field, "more than " + std::to_string(max_items) + " entries");
  for (const json& e : *it) {
    if (!e.is_string()) return Invalid(field, "an entry is not a string");
    if (e.get_ref<const std::string&>().size() > max_each) {
      return Invalid(field, "an entry is longer than " + std::to_string(max_each) + " bytes");
    }
    out->push_back(e.get<std::string>());
  }
  return Status::Ok();
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_';
}

bool IsPrintableToken(std::string_view s) {
  for (char c : s) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

Status ParseMetadata(const json& meta, Csr* csr) {
  Status s = ReadString(meta, "name", true, kMaxCsrNameChars, "metadata.name", &csr->name);
  if (!s.ok()) return s;
  // SECURITY: the name goes into URL paths of later requests; refuse anything
  // that is not a plain path segment rather than trusting an encoder alone.
  if (!IsValidCsrName(csr->name)) {
    return Invalid("metadata.name", "is not [A-Za-z0-9._-]{1,253} (or is \".\" or \"..\")");
  }
  s = ReadString(meta, "uid", true, kMaxUidChars, "metadata.uid", &csr->uid);
  if (s.ok() && !IsPrintableToken(csr->uid)) s = Invalid("metadata.uid", "not printable ASCII");
  if (!s.ok()) return s;
  s = ReadString(meta, "resourceVersion", true, kMaxResourceVersionChars, "metadata.resourceVersion",
                 &csr->resource_version);
  if (s.ok() && !IsPrintableToken(csr->resource_version)) {
    s = Invalid("metadata.resourceVersion", "not printable ASCII");
  }
  if (!s.ok()) return s;
  std::string created;
  s = ReadString(meta, "creationTimestamp", true, kMaxTimestampChars, "metadata.creationTimestamp", &created);
  if (!s.ok()) return s;
  const std::optional<int64_t> t = ParseRfc3339(created);
  if (!t) return Invalid("metadata.creationTimestamp", "not an RFC 3339 time");
  csr->creation_timestamp = *t;
  return Status::Ok();
}

Status ParseSpec(const json& spec, Csr* csr) {
  std::string request_b64;
  // base64 grows 3 bytes to 4; the decoder checks the decoded bound exactly.
  Status s = ReadString(spec, "request", true, (kMaxCsrRequestBytes + 2) / 3 * 4, "spec.request", &request_b64);
  if (!s.ok()) return s;
  std::optional<std::string> request = base64::DecodeToString(request_b64, kMaxCsrRequestBytes);
  if (!request) return Invalid("spec.request", "not base64 of at most " + std::to_string(kMaxCsrRequestBytes) + " bytes");
  csr->request_pem = std::move(*request);
  s = ReadString(spec, "signerName", true, kMaxSignerNameChars, "spec.signerName", &csr->signer_name);
  if (s.ok()) s = ReadString(spec, "username", false, kMaxUsernameBytes, "spec.username", &csr->username);
  if (s.ok()) s = ReadString(spec, "uid", false, kMaxUidChars, "spec.uid", &csr->requester_uid);
  if (s.ok()) {
    s = ReadStringList(spec, "groups", kMaxCsrGroups, kMaxCsrGroupBytes, "spec.groups", &csr->groups);
  }
  if (s.ok()) s = ReadStringList(spec, "usages", kMaxCsrUsages, kMaxUsageChars, "spec.usages", &csr->usages);
  if (!s.ok()) return s;
  const auto exp = spec.find("expirationSeconds");
  if (exp != spec.end() && !exp->is_null()) {
    if (!exp->is_number_integer()) return Invalid("spec.expirationSeconds", "not an integer");
    const int64_t v = exp->get<int64_t>();
    if (v < 0) return Invalid("spec.expirationSeconds", "negative");
    csr->expiration_seconds = v;
  }
  return Status::Ok();
}

Status ParseCondition(const json& c, CsrCondition* out) {
  if (!c.is_object()) return Invalid("status.conditions", "an entry is not an object");
  Status s = ReadString(c, "type", true, kMaxConditionTypeChars, "status.conditions[].type", &out->type);
  if (s.ok()) s = ReadString(c, "status", false, kMaxConditionTypeChars, "status.conditions[].status", &out->status);
  if (s.ok()) {
    s = ReadString(c, "reason", false, kMaxConditionReasonBytes, "status.conditions[].reason", &out->reason);
  }
  if (s.ok()) {
    s = ReadString(c, "message", false, kMaxConditionMessageBytes, "status.conditions[].message", &out->message);
  }
  return s;
}

Status ParseStatus(const json& status, Csr* csr) {
  const auto conds = status.find("conditions");
  if (conds != status.end() && !conds->is_null()) {
    if (!conds->is_array()) return Invalid("status.conditions", "not a list");
    if (conds->size() > kMaxCsrConditions) {
      return Invalid("status.conditions", "more than " + std::to_string(kMaxCsrConditions) + " entries");
    }
    for (const json& c : *conds) {
      CsrCondition cond;
      Status s = ParseCondition(c, &cond);
      if (!s.ok()) return s;
      csr->conditions.push_back(std::move(cond));
    }
  }
  std::string cert_b64;
  Status s = ReadString(status, "certificate", false, (kMaxCsrCertificateBytes + 2) / 3 * 4, "status.certificate",
                        &cert_b64);
  if (!s.ok()) return s;
  if (!cert_b64.empty()) {
    std::optional<std::string> cert = base64::DecodeToString(cert_b64, kMaxCsrCertificateBytes);
    if (!cert) {
      return Invalid("status.certificate",
                     "not base64 of at most " + std::to_string(kMaxCsrCertificateBytes) + " bytes");
    }
    csr->has_certificate = !cert->empty();
    csr->certificate_pem = std::move(*cert);
  }
  return Status::Ok();
}

// An optional object member: absent or null is an empty object.
const json* Member(const json& obj, std::string_view key, bool* wrong_type) {
  static const json kEmpty = json::object();
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return &kEmpty;
  if (!it->is_object()) {
    *wrong_type = true;
    return &kEmpty;
  }
  return &*it;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
// days_from_civil).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// Reads exactly `n` digits at *pos.
bool Digits(std::string_view text, size_t* pos, size_t n, int* out) {
  if (text.size() - *pos < n) return false;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = text[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

bool Expect(std::string_view text, size_t* pos, char c) {
  if (*pos >= text.size() || text[*pos] != c) return false;
  ++*pos;
  return true;
}

}  // namespace

bool IsValidCsrName(std::string_view name) {
  if (name.empty() || name.size() > kMaxCsrNameChars || name == "." || name == "..") return false;
  for (char c : name) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

bool Csr::HasCondition(std::string_view type) const {
  for (const CsrCondition& c : conditions) {
    if (c.type == type && c.status == "True") return true;
  }
  return false;
}

Result<Csr> ParseCsr(const json& object) {
  if (!object.is_object()) return Invalid("object", "not a JSON object");
  std::string kind;
  std::string api_version;
  Status s = ReadString(object, "kind", false, 64, "kind", &kind);
  if (s.ok()) s = ReadString(object, "apiVersion", false, 64, "apiVersion", &api_version);
  if (!s.ok()) return s;
  // List items carry neither; a watch event's object carries both.
  if (!kind.empty() && kind != "CertificateSigningRequest") return Invalid("kind", "not CertificateSigningRequest");
  if (!api_version.empty() && api_version != "certificates.k8s.io/v1") {
    return Invalid("apiVersion", "not certificates.k8s.io/v1");
  }
  bool wrong_type = false;
  const json* meta = Member(object, "metadata", &wrong_type);
  const json* spec = Member(object, "spec", &wrong_type);
  const json* status = Member(object, "status", &wrong_type);
  if (wrong_type) return Invalid("metadata, spec or status", "not an object");
  Csr csr;
  s = ParseMetadata(*meta, &csr);
  if (s.ok()) s = ParseSpec(*spec, &csr);
  if (s.ok()) s = ParseStatus(*status, &csr);
  if (!s.ok()) return s;
  csr.object_json = DumpJson(object);
  if (csr.object_json.size() > kMaxCsrObjectBytes) {
    return Invalid("object", "larger than " + std::to_string(kMaxCsrObjectBytes) + " bytes");
  }
  return csr;
}

Result<Csr> ParseCsrJson(std::string_view text) {
  if (text.size() > kMaxCsrObjectBytes) {
    return Invalid("object", "larger than " + std::to_string(kMaxCsrObjectBytes) + " bytes");
  }
  std::optional<json> doc = ParseJson(text);
  if (!doc) return Invalid("object", "not JSON (or nested too deep)");
  return ParseCsr(*doc);
}

Result<CsrList> ParseCsrListJson(std::string_view text) {
  auto bad = [](std::string_view why) {
    return Status::Corruption("kube_response_invalid", "a CertificateSigningRequest list " + std::string(why));
  };
  std::optional<json> doc = ParseJson(text);
  if (!doc || !doc->is_object()) return bad("is not a JSON object");
  const std::optional<std::string> kind = StringField(*doc, "kind");
  if (kind && *kind != "CertificateSigningRequestList") return bad("has kind " + text::PrintableAscii(*kind, 64));
  CsrList list;
  const auto meta = doc->find("metadata");
  if (meta != doc->end()) {
    list.resource_version = StringField(*meta, "resourceVersion").value_or("");
    list.continue_token = StringField(*meta, "continue").value_or("");
  }
  if (list.resource_version.size() > kMaxResourceVersionChars || !IsPrintableToken(list.resource_version) ||
      list.continue_token.size() > kMaxContinueChars || !IsPrintableToken(list.continue_token)) {
    return bad("has a resourceVersion or continue token that is too long or not printable");
  }
  const auto items = doc->find("items");
  if (items == doc->end() || !(items->is_array() || items->is_null())) return bad("has no items list");
  if (items->is_null()) return list;
  for (const json& item : *items) {
    Result<Csr> csr = ParseCsr(item);
    if (csr.ok()) {
      list.items.push_back(std::move(*csr));
      continue;
    }
    std::optional<std::string> name;
    if (item.is_object() && item.contains("metadata")) name = StringField(item.at("metadata"), "name");
    list.skipped.push_back(text::PrintableAscii(name.value_or("?"), 80) + ": " + csr.status().message());
  }
  return list;
}

std::string CreateCsrBody(const CsrRequest& r) {
  nlohmann::json body = {
      {"apiVersion", "certificates.k8s.io/v1"},
      {"kind", "CertificateSigningRequest"},
      {"metadata", r.name.empty() ? json{{"generateName", r.generate_name}} : json{{"name", r.name}}},
      {"spec", {{"signerName", r.signer_name}, {"request", base64::Encode(r.request_pem)}, {"usages", r.usages}}},
  };
  return body.dump();
}

std::string ApprovalBody(const Csr& csr, bool approve, std::string_view reason, std::string_view message,
                         int64_t now) {
  std::optional<json> parsed = ParseJson(csr.object_json);
  json object = parsed && parsed->is_object() ? std::move(*parsed) : json::object();
  object["apiVersion"] = "certificates.k8s.io/v1";
  object["kind"] = "CertificateSigningRequest";
  // SECURITY: the object the decision was made for, whatever object_json
  // holds: the API server checks both (a uid precondition and optimistic
  // concurrency) and answers 409 for any other object or version.
  if (!object["metadata"].is_object()) object["metadata"] = json::object();
  object["metadata"]["name"] = csr.name;
  object["metadata"]["uid"] = csr.uid;
  object["metadata"]["resourceVersion"] = csr.resource_version;
  if (!object["status"].is_object()) object["status"] = json::object();
  json& status = object["status"];
  const std::string type = approve ? "Approved" : "Denied";
  json conditions = json::array();
  const auto old = status.find("conditions");
  if (old != status.end() && old->is_array()) {
    for (const json& c : *old) {
      if (StringField(c, "type") != type) conditions.push_back(c);
    }
  }
  json condition = {{"type", type}, {"status", "True"}, {"lastUpdateTime", FormatRfc3339(now)}};
  if (!reason.empty()) condition["reason"] = std::string(reason);
  if (!message.empty()) condition["message"] = std::string(message);
  conditions.push_back(std::move(condition));
  status["conditions"] = std::move(conditions);
  return DumpJson(object);
}

std::optional<int64_t> ParseRfc3339(std::string_view text) {
  size_t pos = 0;
  int year, month, day, hour, minute, second;
  if (!(Digits(text, &pos, 4, &year) && Expect(text, &pos, '-') && Digits(text, &pos, 2, &month) &&
        Expect(text, &pos, '-') && Digits(text, &pos, 2, &day) && Expect(text, &pos, 'T') &&
        Digits(text, &pos, 2, &hour) && Expect(text, &pos, ':') && Digits(text, &pos, 2, &minute) &&
        Expect(text, &pos, ':') && Digits(text, &pos, 2, &second))) {
    return std::nullopt;
  }
  static constexpr int kDaysIn[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1 || day > kDaysIn[month - 1] || hour > 23 || minute > 59 || second > 59) {
    return std::nullopt;
  }
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (month == 2 && day == 29 && !leap) return std::nullopt;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    const size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9' && pos - start < 9) ++pos;
    if (pos == start) return std::nullopt;
  }
  int64_t offset = 0;
  if (Expect(text, &pos, 'Z')) {
    offset = 0;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos++] == '+' ? 1 : -1;
    int oh, om;
    if (!(Digits(text, &pos, 2, &oh) && Expect(text, &pos, ':') && Digits(text, &pos, 2, &om)) || oh > 23 ||
        om > 59) {
      return std::nullopt;
    }
    offset = sign * (oh * 3600 + om * 60);
  } else {
    return std::nullopt;
  }
  if (pos != text.size()) return std::nullopt;
  const int64_t days = DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  return days * 86400 + hour * 3600 + minute * 60 + second - offset;
}

std::string FormatRfc3339(int64_t seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace rackgate::kube
