// JSON bodies of the attestation protocol.
#include "wire/protocol.h"

#include <charconv>
#include <nlohmann/json.hpp>
#include <set>

#include "wire/codec.h"

namespace rackgate::wire {

namespace {

using nlohmann::json;

Status Missing(const char* field) {
  return Status::InvalidArgument("field_missing", std::string("field '") + field + "' is required");
}
Status Invalid(const std::string& field, const std::string& why) {
  return Status::InvalidArgument("field_invalid", "field '" + field + "': " + why);
}

Result<json> ParseObject(std::string_view body, const std::set<std::string>& allowed) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::InvalidArgument("bad_json", "body is not a JSON object");
  }
  for (const auto& [key, value] : doc.items()) {
    if (!allowed.count(key)) return Invalid(key, "unknown field");
  }
  return doc;
}

Result<Bytes> B64Field(const json& doc, const char* field, size_t max) {
  if (!doc.contains(field)) return Missing(field);
  const json& v = doc.at(field);
  if (!v.is_string()) return Invalid(field, "expected a base64 string");
  auto b = Base64Decode(v.get_ref<const std::string&>(), max);
  if (!b || b->empty()) return Invalid(field, "not canonical base64 of 1.." + std::to_string(max) + " bytes");
  return std::move(*b);
}

Result<Bytes> HexField(const json& doc, const char* field, size_t max) {
  if (!doc.contains(field)) return Missing(field);
  const json& v = doc.at(field);
  if (!v.is_string()) return Invalid(field, "expected a hex string");
  auto b = HexDecode(v.get_ref<const std::string&>(), max);
  if (!b || b->empty()) return Invalid(field, "not hex of 1.." + std::to_string(max) + " bytes");
  return std::move(*b);
}

Result<attest::PcrValues> PcrsFromJson(const json& v) {
  if (!v.is_object()) return Invalid("pcrs", "expected an object of banks");
  attest::PcrValues out;
  for (const auto& [bank_name, bank] : v.items()) {
    uint16_t alg = attest::HashAlgFromName(bank_name);
    if (alg == attest::kAlgNull) return Invalid("pcrs", "unknown bank '" + bank_name + "'");
    if (!bank.is_object()) return Invalid("pcrs." + bank_name, "expected an object of PCRs");
    for (const auto& [index, value] : bank.items()) {
      uint32_t pcr = 0;
      auto [p, ec] = std::from_chars(index.data(), index.data() + index.size(), pcr);
      if (index.empty() || ec != std::errc() || p != index.data() + index.size() || pcr > 23 ||
          (index.size() > 1 && index[0] == '0')) {
        return Invalid("pcrs." + bank_name, "bad PCR index '" + index + "'");
      }
      const size_t size = attest::DigestSize(alg);
      auto digest = value.is_string() ? HexDecode(value.get_ref<const std::string&>(), size)
                                      : std::nullopt;
      if (!digest || digest->size() != size) {
        return Invalid("pcrs." + bank_name + "." + index, "expected " + std::to_string(size) + " bytes of hex");
      }
      out[alg][pcr] = std::move(*digest);
    }
  }
  return out;
}

}  // namespace

Result<ChallengeRequest> ParseChallengeRequest(std::string_view body) {
  auto doc = ParseObject(body, {"ek_public", "ek_certificate", "ek_intermediates", "ak_public"});
  if (!doc.ok()) return doc.status();
  ChallengeRequest r;
  auto ek = B64Field(*doc, "ek_public", kMaxTpm2bPublic);
  if (!ek.ok()) return ek.status();
  r.ek_public = std::move(ek).value();
  auto ak = B64Field(*doc, "ak_public", kMaxTpm2bPublic);
  if (!ak.ok()) return ak.status();
  r.ak_public = std::move(ak).value();
  if (doc->contains("ek_certificate") && !doc->at("ek_certificate").is_null()) {
    auto cert = B64Field(*doc, "ek_certificate", kMaxCertificate);
    if (!cert.ok()) return cert.status();
    r.ek_certificate = std::move(cert).value();
  }
  if (doc->contains("ek_intermediates")) {
    const json& list = doc->at("ek_intermediates");
    if (!list.is_array() || list.size() > kMaxIntermediates) {
      return Invalid("ek_intermediates", "expected at most " + std::to_string(kMaxIntermediates) +
                                             " base64 certificates");
    }
    for (const json& e : list) {
      auto b = e.is_string() ? Base64Decode(e.get_ref<const std::string&>(), kMaxCertificate) : std::nullopt;
      if (!b || b->empty()) return Invalid("ek_intermediates", "not canonical base64");
      r.ek_intermediates.push_back(std::move(*b));
    }
  }
  return r;
}

Result<EvidenceRequest> ParseEvidenceRequest(std::string_view body) {
  auto doc = ParseObject(body, {"session", "secret", "quote", "signature", "pcrs", "event_log"});
  if (!doc.ok()) return doc.status();
  EvidenceRequest r;
  if (!doc->contains("session")) return Missing("session");
  const json& session = doc->at("session");
  if (!session.is_string() || session.get_ref<const std::string&>().empty() ||
      session.get_ref<const std::string&>().size() > kMaxSessionId) {
    return Invalid("session", "expected a session id");
  }
  r.session = session.get<std::string>();
  auto secret = HexField(*doc, "secret", kMaxSecret);
  if (!secret.ok()) return secret.status();
  r.secret = std::move(secret).value();
  auto quote = B64Field(*doc, "quote", kMaxAttest);
  if (!quote.ok()) return quote.status();
  r.quote = std::move(quote).value();
  auto sig = B64Field(*doc, "signature", kMaxSignature);
  if (!sig.ok()) return sig.status();
  r.signature = std::move(sig).value();
  if (!doc->contains("pcrs")) return Missing("pcrs");
  auto pcrs = PcrsFromJson(doc->at("pcrs"));
  if (!pcrs.ok()) return pcrs.status();
  r.pcrs = std::move(pcrs).value();
  if (doc->contains("event_log") && !doc->at("event_log").is_null()) {
    auto log = B64Field(*doc, "event_log", kMaxEventLog);
    if (!log.ok()) return log.status();
    r.event_log = std::move(log).value();
  }
  return r;
}

}  // namespace rackgate::wire
