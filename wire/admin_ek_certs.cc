// Encoders and decoders of the admin API's EK certificate bodies.
#include "wire/admin_ek_certs.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "wire/admin_json.h"

namespace rackgate::wire {

namespace {

using nlohmann::json;

json MissingJson(const EkCertMissingView& m) {
  return {{"hostname", m.hostname}, {"state", m.state},         {"ek_hash", m.ek_hash},
          {"ek_public", m.ek_public_base64}, {"reason", m.reason}, {"last_seen", m.last_seen},
          {"address", m.address}};
}

Result<EkCertMissingView> MissingFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "missing[] must be objects");
  auto hostname = admin_json::String(j, "hostname");
  auto state = admin_json::String(j, "state");
  auto ek_hash = admin_json::String(j, "ek_hash");
  auto ek_public = admin_json::String(j, "ek_public");
  auto reason = admin_json::String(j, "reason");
  auto last_seen = admin_json::Int(j, "last_seen");
  auto address = admin_json::String(j, "address");
  if (Status s = admin_json::FirstError({hostname.status(), state.status(), ek_hash.status(), ek_public.status(),
                                         reason.status(), last_seen.status(), address.status()});
      !s.ok()) {
    return s;
  }
  return EkCertMissingView{hostname->value_or(""), state->value_or(""), ek_hash->value_or(""),
                           ek_public->value_or(""), reason->value_or(""), last_seen->value_or(0),
                           address->value_or("")};
}

}  // namespace

std::string EncodeEkCertImportRequest(const EkCertImportRequest& r) {
  return json{{"certificate", r.certificate_base64}, {"source", r.source}}.dump();
}

Result<EkCertImportRequest> DecodeEkCertImportRequest(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  auto cert = admin_json::String(*doc, "certificate");
  auto source = admin_json::String(*doc, "source");
  if (Status s = admin_json::FirstError({cert.status(), source.status()}); !s.ok()) return s;
  if (!*cert || (*cert)->empty()) return Status::InvalidArgument("field_missing", "certificate is required");
  return EkCertImportRequest{**cert, source->value_or("")};
}

std::string EncodeEkCertImportAnswer(const EkCertImportAnswer& a) {
  return json{{"outcome", a.outcome}, {"hostname", a.hostname}, {"ek_hash", a.ek_hash},
              {"issuer", a.issuer},   {"anchor", a.anchor},     {"relaxations", a.relaxations},
              {"summary", a.summary}}
      .dump();
}

Result<EkCertImportAnswer> DecodeEkCertImportAnswer(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  auto outcome = admin_json::String(*doc, "outcome");
  auto hostname = admin_json::String(*doc, "hostname");
  auto ek_hash = admin_json::String(*doc, "ek_hash");
  auto issuer = admin_json::String(*doc, "issuer");
  auto anchor = admin_json::String(*doc, "anchor");
  auto relaxations = admin_json::Strings(*doc, "relaxations");
  auto summary = admin_json::String(*doc, "summary");
  if (Status s = admin_json::FirstError({outcome.status(), hostname.status(), ek_hash.status(), issuer.status(),
                                         anchor.status(), relaxations.status(), summary.status()});
      !s.ok()) {
    return s;
  }
  return EkCertImportAnswer{outcome->value_or(""), hostname->value_or(""), ek_hash->value_or(""),
                            issuer->value_or(""),  anchor->value_or(""),   std::move(relaxations).value(),
                            summary->value_or("")};
}

std::string EncodeEkCertMissingList(const EkCertMissingList& l) {
  json list = json::array();
  for (const auto& m : l.missing) list.push_back(MissingJson(m));
  return json{{"require_ek_certificate", l.require_ek_certificate}, {"missing", list}}.dump();
}

Result<EkCertMissingList> DecodeEkCertMissingList(std::string_view body) {
  auto doc = admin_json::ParseObject(body);
  if (!doc.ok()) return doc.status();
  auto require = admin_json::Bool(*doc, "require_ek_certificate");
  auto missing = admin_json::List<EkCertMissingView>(*doc, "missing", MissingFromJson);
  if (Status s = admin_json::FirstError({require.status(), missing.status()}); !s.ok()) return s;
  return EkCertMissingList{require->value_or(true), std::move(missing).value()};
}

}  // namespace rackgate::wire
