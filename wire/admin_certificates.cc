// Encoder and decoder of the admin API's certificate list.
#include "wire/admin_certificates.h"

#include <nlohmann/json.hpp>

#include "wire/admin_json.h"

namespace rackgate::wire {

namespace {

using nlohmann::json;

Result<CertificateView> CertificateFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("field_invalid", "a certificate is a JSON object");
  auto serial = admin_json::String(j, "serial");
  auto hostname = admin_json::String(j, "hostname");
  auto kind = admin_json::String(j, "kind");
  auto subject = admin_json::String(j, "subject");
  auto key = admin_json::String(j, "public_key_sha256");
  auto tpm = admin_json::Bool(j, "tpm_resident");
  auto not_before = admin_json::Int(j, "not_before");
  auto not_after = admin_json::Int(j, "not_after");
  auto issued_at = admin_json::Int(j, "issued_at");
  if (Status s = admin_json::FirstError({serial.status(), hostname.status(), kind.status(), subject.status(),
                                         key.status(), tpm.status(), not_before.status(), not_after.status(),
                                         issued_at.status()});
      !s.ok()) {
    return s;
  }
  CertificateView c{serial->value_or(""),  hostname->value_or(""), kind->value_or(""),
                    subject->value_or(""), {},                     key->value_or(""),
                    tpm->value_or(false),  not_before->value_or(0), not_after->value_or(0),
                    issued_at->value_or(0)};
  if (j.contains("sans")) {
    const json& sans = j.at("sans");
    if (!sans.is_array()) return Status::InvalidArgument("field_invalid", "sans must be a list of strings");
    for (const json& s : sans) {
      if (!s.is_string()) return Status::InvalidArgument("field_invalid", "sans must be a list of strings");
      c.sans.push_back(s.get<std::string>());
    }
  }
  return c;
}

}  // namespace

std::string EncodeCertificateList(const std::vector<CertificateView>& certificates) {
  json out = json::array();
  for (const auto& c : certificates) {
    out.push_back({{"serial", c.serial},
                   {"hostname", c.hostname},
                   {"kind", c.kind},
                   {"subject", c.subject},
                   {"sans", c.sans},
                   {"public_key_sha256", c.public_key_sha256},
                   {"tpm_resident", c.tpm_resident},
                   {"not_before", c.not_before},
                   {"not_after", c.not_after},
                   {"issued_at", c.issued_at}});
  }
  return json{{"certificates", out}}.dump();
}

Result<std::vector<CertificateView>> DecodeCertificateList(std::string_view body) {
  return admin_json::ListBody<CertificateView>(body, "certificates", CertificateFromJson);
}

}  // namespace rackgate::wire
