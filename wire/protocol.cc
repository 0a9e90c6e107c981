// JSON bodies of the attestation, machine and CSR endpoints, both directions.
#include "wire/protocol.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>
#include <set>

#include "attest/boot_facts.h"
#include "base/text.h"
#include "wire/codec.h"
#include "base/hex.h"

namespace rackgate::wire {

namespace {

using nlohmann::json;

// Base64 members of tpm_key in a CSR request.
constexpr size_t kMaxTpmKeyField = 4096;

Status BadJson() { return Status::InvalidArgument("bad_json", "body is not a JSON object"); }
Status Missing(const std::string& field) {
  return Status::InvalidArgument("field_missing", "field '" + field + "' is required");
}
Status Invalid(const std::string& field, const std::string& why) {
  return Status::InvalidArgument("field_invalid", "field '" + field + "': " + why);
}

Result<json> ParseAnyObject(std::string_view body) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return BadJson();
  return doc;
}

// An object whose members are all in `allowed`: what the appliance receives
// is refused rather than half understood.
Status CheckAllowed(const json& obj, const std::set<std::string>& allowed, const std::string& prefix = "") {
  for (const auto& [key, value] : obj.items()) {
    if (!allowed.count(key)) return Invalid(prefix + key, "unknown field");
  }
  return Status::Ok();
}

Result<json> ParseObject(std::string_view body, const std::set<std::string>& allowed) {
  auto doc = ParseAnyObject(body);
  if (!doc.ok()) return doc.status();
  if (Status s = CheckAllowed(*doc, allowed); !s.ok()) return s;
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
  auto b = hex::Decode(v.get_ref<const std::string&>(), max);
  if (!b || b->empty()) return Invalid(field, "not hex of 1.." + std::to_string(max) + " bytes");
  return std::move(*b);
}

// A string member of at most `max` characters; nullopt when absent, not a
// string or longer. For answers, which the agent reads leniently.
std::optional<std::string> Str(const json& obj, const char* key, size_t max = kMaxAnswerField) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return std::nullopt;
  const std::string& v = it->get_ref<const std::string&>();
  if (v.size() > max) return std::nullopt;
  return v;
}

// An integer member, or `fallback` when absent or not an integer.
template <typename T>
T Int(const json& obj, const char* key, T fallback = 0) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return fallback;
  return it->get<T>();
}

bool Bool(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

json PcrsToJson(const attest::PcrValues& pcrs) {
  json out = json::object();
  for (const auto& [alg, bank] : pcrs) {
    json values = json::object();
    for (const auto& [pcr, value] : bank) values[std::to_string(pcr)] = hex::Encode(value);
    out[attest::HashAlgName(alg)] = values;
  }
  return out;
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
      auto digest = value.is_string() ? hex::Decode(value.get_ref<const std::string&>(), size)
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

// --- Challenge ---------------------------------------------------------------

std::string EncodeChallengeRequest(const ChallengeRequest& r) {
  json body = {{"ek_public", Base64Encode(r.ek_public)}, {"ak_public", Base64Encode(r.ak_public)}};
  if (r.ek_certificate) body["ek_certificate"] = Base64Encode(*r.ek_certificate);
  if (!r.ek_intermediates.empty()) {
    json list = json::array();
    for (const auto& c : r.ek_intermediates) list.push_back(Base64Encode(c));
    body["ek_intermediates"] = list;
  }
  return body.dump();
}

Result<ChallengeRequest> DecodeChallengeRequest(std::string_view body) {
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

Result<ChallengeRequest> ParseChallengeRequest(std::string_view body) { return DecodeChallengeRequest(body); }

std::string EncodeChallenge(const Challenge& c) {
  json body = {{"session", c.session},
               {"nonce", hex::Encode(c.nonce)},
               {"pcr_selection", attest::FormatPcrSelectionList(c.pcr_selection)},
               {"credential", Base64Encode(c.credential)},
               {"expires_in", c.expires_in}};
  return body.dump();
}

Result<Challenge> DecodeChallenge(std::string_view body) {
  auto doc = ParseAnyObject(body);
  if (!doc.ok()) return doc.status();
  Challenge c;
  auto session = Str(*doc, "session");
  if (!session || session->empty()) return Missing("session");
  c.session = std::move(*session);
  auto nonce = Str(*doc, "nonce");
  if (!nonce) return Missing("nonce");
  auto selection = Str(*doc, "pcr_selection");
  if (!selection) return Missing("pcr_selection");
  auto credential = Str(*doc, "credential", kMaxCredential * 2);
  if (!credential) return Missing("credential");
  auto n = hex::Decode(*nonce, kMaxNonce);
  if (!n || n->empty()) return Invalid("nonce", "not hex of 1.." + std::to_string(kMaxNonce) + " bytes");
  c.nonce = std::move(*n);
  auto sel = attest::ParsePcrSelectionList(*selection);
  if (!sel.ok()) return Invalid("pcr_selection", sel.status().message());
  c.pcr_selection = std::move(sel).value();
  auto cred = Base64Decode(*credential, kMaxCredential);
  if (!cred) return Invalid("credential", "not canonical base64");
  c.credential = std::move(*cred);
  c.expires_in = Int<long>(*doc, "expires_in");
  return c;
}

// --- Evidence ----------------------------------------------------------------

std::string EncodeEvidenceRequest(const EvidenceRequest& r) {
  json body = {{"session", r.session},
               {"secret", hex::Encode(r.secret)},
               {"quote", Base64Encode(r.quote)},
               {"signature", Base64Encode(r.signature)},
               {"pcrs", PcrsToJson(r.pcrs)}};
  if (r.event_log) body["event_log"] = Base64Encode(*r.event_log);
  if (r.pcr_signature) {
    // Text that is not JSON goes as a string, for the appliance to refuse.
    json sig = json::parse(*r.pcr_signature, nullptr, /*allow_exceptions=*/false);
    body["pcr_signature"] = sig.is_discarded() ? json(*r.pcr_signature) : std::move(sig);
  }
  return body.dump();
}

Result<EvidenceRequest> DecodeEvidenceRequest(std::string_view body) {
  auto doc = ParseObject(body, {"session", "secret", "quote", "signature", "pcrs", "event_log",
                                 "pcr_signature"});
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
  if (doc->contains("pcr_signature") && !doc->at("pcr_signature").is_null()) {
    const json& sig = doc->at("pcr_signature");
    if (!sig.is_object()) return Invalid("pcr_signature", "expected the systemd-measure sign object");
    std::string text = sig.dump();
    if (text.size() > kMaxPcrSignatureField) {
      return Invalid("pcr_signature", "larger than " + std::to_string(kMaxPcrSignatureField) + " bytes");
    }
    r.pcr_signature = std::move(text);
  }
  return r;
}

Result<EvidenceRequest> ParseEvidenceRequest(std::string_view body) { return DecodeEvidenceRequest(body); }

std::string EncodeToken(const Token& t) {
  json body = {{"token", t.token}, {"expires_in", t.expires_in}, {"hostname", t.hostname}, {"state", t.state}};
  if (!t.ca_bundle.empty()) body["ca_bundle"] = t.ca_bundle;
  return body.dump();
}

namespace {

// ca_bundle's bounds (protocol.h): the text a PEM reader will see, before it
// sees it. The appliance is trusted by TLS, but a bundle still never grows
// the agent's CA file without bound.
Status CheckCaBundle(const std::string& pem) {
  if (pem.size() > kMaxCaBundleBytes) return Invalid("ca_bundle", "longer than 65536 bytes");
  for (char c : pem) {
    if ((c < 0x20 || c >= 0x7f) && c != '\n' && c != '\r') return Invalid("ca_bundle", "not PEM text");
  }
  constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  constexpr std::string_view kEnd = "-----END CERTIFICATE-----";
  size_t begins = 0, ends = 0;
  for (size_t at = pem.find(kBegin); at != std::string::npos; at = pem.find(kBegin, at + 1)) ++begins;
  for (size_t at = pem.find(kEnd); at != std::string::npos; at = pem.find(kEnd, at + 1)) ++ends;
  if (begins == 0 || begins != ends) return Invalid("ca_bundle", "not PEM certificates");
  if (begins > kMaxCaBundleCerts) return Invalid("ca_bundle", "more than 8 certificates");
  return Status::Ok();
}

}  // namespace

Result<Token> DecodeToken(std::string_view body) {
  auto doc = ParseAnyObject(body);
  if (!doc.ok()) return doc.status();
  Token t;
  auto token = Str(*doc, "token");
  if (!token || token->empty()) return Missing("token");
  // SECURITY: the token goes into an HTTP header; anything but printable
  // ASCII without spaces could add a header of the appliance's choosing.
  for (char c : *token) {
    if (c <= 0x20 || c >= 0x7f) return Invalid("token", "not printable ASCII without spaces");
  }
  t.token = std::move(*token);
  t.expires_in = Int<long>(*doc, "expires_in");
  t.hostname = text::PrintableAscii(Str(*doc, "hostname").value_or(""), 253);
  t.state = text::PrintableAscii(Str(*doc, "state").value_or(""), 32);
  if (doc->contains("ca_bundle")) {
    const json& v = doc->at("ca_bundle");
    if (!v.is_string()) return Invalid("ca_bundle", "expected a string");
    const std::string& pem = v.get_ref<const std::string&>();
    if (!pem.empty()) {
      if (Status s = CheckCaBundle(pem); !s.ok()) return s;
      t.ca_bundle = pem;
    }
  }
  return t;
}

// --- Machine -----------------------------------------------------------------

bool ValidHostname(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  size_t label = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '.') {
      if (label == 0 || name[i - 1] == '-') return false;
      label = 0;
      continue;
    }
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    if (c == '-' && label == 0) return false;
    if (++label > 63) return false;
  }
  return label > 0 && name.back() != '-';
}

bool ValidApiserverUrl(std::string_view url) {
  if (url.rfind("https://", 0) != 0 || url.size() <= 8 || url.size() > 2048) return false;
  for (char c : url) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '"' || c == '\\') return false;
  }
  return true;
}

bool ValidIpLiteral(const std::string& text) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

std::string EncodeMachineRecord(const MachineRecord& m) {
  json body = {{"hostname", m.hostname},
               {"pool", m.pool},
               {"state", m.state},
               {"require_tpm_key", m.require_tpm_key},
               {"renew_fraction", m.renew_fraction},
               {"kubelet_certificates", m.kubelet_certificates},
               {"apiserver", m.apiserver},
               {"addresses", m.addresses}};
  return body.dump();
}

namespace {

// The record's apiserver and addresses. An appliance before them sends
// neither: "" and none.
Status DecodeKubeletTarget(const json& doc, MachineRecord* m) {
  if (auto it = doc.find("apiserver"); it != doc.end()) {
    // SECURITY: the URL is written into the kubelet's kubeconfig (YAML):
    // refused rather than escaped, as the agent's --apiserver is.
    if (!it->is_string()) return Invalid("apiserver", "not a string");
    const std::string& url = it->get_ref<const std::string&>();
    if (!url.empty() && !ValidApiserverUrl(url)) return Invalid("apiserver", "not https://HOST[:PORT]");
    m->apiserver = url;
  }
  if (auto it = doc.find("addresses"); it != doc.end()) {
    if (!it->is_array()) return Invalid("addresses", "not a list");
    if (it->size() > kMaxAddresses) return Invalid("addresses", "more than " + std::to_string(kMaxAddresses));
    for (const json& a : *it) {
      // SECURITY: each becomes an IP SAN of the serving CSR.
      if (!a.is_string() || a.get_ref<const std::string&>().size() > 64 ||
          !ValidIpLiteral(a.get_ref<const std::string&>())) {
        return Invalid("addresses", "not an IPv4 or IPv6 address");
      }
      m->addresses.push_back(a.get<std::string>());
    }
  }
  return Status::Ok();
}

}  // namespace

Result<MachineRecord> DecodeMachineRecord(std::string_view body) {
  auto doc = ParseAnyObject(body);
  if (!doc.ok()) return doc.status();
  MachineRecord m;
  auto hostname = Str(*doc, "hostname");
  if (!hostname) return Missing("hostname");
  // SECURITY: the hostname becomes the CSR's CN and SAN; anything but a DNS
  // name is refused rather than escaped.
  if (!ValidHostname(*hostname)) return Invalid("hostname", "not a DNS name");
  m.hostname = std::move(*hostname);
  m.pool = text::PrintableAscii(Str(*doc, "pool").value_or(""), 64);
  m.state = text::PrintableAscii(Str(*doc, "state").value_or(""), 32);
  m.require_tpm_key = Bool(*doc, "require_tpm_key");
  // An appliance before renewal sends none: the default stands.
  if (auto it = doc->find("renew_fraction"); it != doc->end() && it->is_number()) {
    const double f = it->get<double>();
    if (f > 0.0 && f <= 1.0) m.renew_fraction = f;
  }
  // An appliance before approver mode sends none: signer.
  if (auto mode = Str(*doc, "kubelet_certificates")) {
    if (*mode != "signer" && *mode != "approver") return Invalid("kubelet_certificates", "not signer or approver");
    m.kubelet_certificates = std::move(*mode);
  }
  if (Status s = DecodeKubeletTarget(*doc, &m); !s.ok()) return s;
  return m;
}

// --- Approver mode -------------------------------------------------------------

std::string EncodeKubeletKeyRegistered(const KubeletKeyRegistered& k) {
  json body = {{"kind", k.kind},
               {"key_sha256", k.key_sha256},
               {"tpm_resident", k.tpm_resident},
               {"registered_at", k.registered_at}};
  return body.dump();
}

Result<KubeletKeyRegistered> DecodeKubeletKeyRegistered(std::string_view body) {
  auto doc = ParseAnyObject(body);
  if (!doc.ok()) return doc.status();
  KubeletKeyRegistered k;
  auto kind = Str(*doc, "kind");
  if (!kind) return Missing("kind");
  if (*kind != "client" && *kind != "serving") return Invalid("kind", "not client or serving");
  k.kind = std::move(*kind);
  auto hash = Str(*doc, "key_sha256");
  if (!hash) return Missing("key_sha256");
  if (!hex::IsSha256Hex(*hash)) {
    return Invalid("key_sha256", "not 64 lower-case hex digits");
  }
  k.key_sha256 = std::move(*hash);
  k.tpm_resident = Bool(*doc, "tpm_resident");
  if (auto it = doc->find("registered_at"); it != doc->end() && it->is_number_integer()) {
    k.registered_at = it->get<long long>();
  }
  return k;
}

// --- CSR ---------------------------------------------------------------------

std::string EncodeCsrRequest(const CsrRequest& r) {
  json body = {{"signer", r.signer}, {"csr", r.csr_pem}};
  if (r.usages) body["usages"] = *r.usages;
  if (r.tpm_key) {
    body["tpm_key"] = {{"public", Base64Encode(r.tpm_key->public_area)},
                       {"certify_info", Base64Encode(r.tpm_key->certify_info)},
                       {"certify_signature", Base64Encode(r.tpm_key->certify_signature)}};
  }
  if (r.renewal) {
    body["renewal"] = {{"certificate", r.renewal->certificate_pem},
                       {"signature", Base64Encode(r.renewal->signature)}};
  }
  return body.dump();
}

Bytes RenewalSignedMessage(std::span<const uint8_t> nonce, std::span<const uint8_t> new_spki_sha256) {
  static constexpr char kLabel[] = "rackgate-renewal-v1";  // with its NUL
  Bytes m(kLabel, kLabel + sizeof(kLabel));
  m.push_back(static_cast<uint8_t>(nonce.size() >> 8));
  m.push_back(static_cast<uint8_t>(nonce.size() & 0xff));
  m.insert(m.end(), nonce.begin(), nonce.end());
  m.insert(m.end(), new_spki_sha256.begin(), new_spki_sha256.end());
  return m;
}

Result<CsrRequest> DecodeCsrRequest(std::string_view body) {
  auto doc = ParseObject(body, {"signer", "csr", "usages", "tpm_key", "renewal"});
  if (!doc.ok()) return doc.status();
  CsrRequest r;
  for (const char* field : {"signer", "csr"}) {
    if (!doc->contains(field) || !doc->at(field).is_string()) return Missing(field);
  }
  r.signer = doc->at("signer").get<std::string>();
  if (r.signer.size() > kMaxAnswerField) return Invalid("signer", "too long");
  if (doc->contains("usages")) {
    const json& list = doc->at("usages");
    if (!list.is_array() || list.size() > kMaxUsages) {
      return Invalid("usages", "expected a list of at most " + std::to_string(kMaxUsages) + " strings");
    }
    r.usages.emplace();
    for (const json& u : list) {
      if (!u.is_string() || u.get_ref<const std::string&>().size() > kMaxUsageChars) {
        return Invalid("usages", "expected a list of short strings");
      }
      r.usages->push_back(u.get<std::string>());
    }
  }
  const std::string& pem = doc->at("csr").get_ref<const std::string&>();
  // The appliance has always answered an oversized CSR as a malformed one.
  if (pem.size() > kMaxCsrPem) return Status::InvalidArgument("csr_malformed", "the CSR is too large");
  r.csr_pem = pem;
  if (doc->contains("tpm_key")) {
    const json& k = doc->at("tpm_key");
    const char* kNeeds = "needs public, certify_info and certify_signature (base64)";
    if (!k.is_object()) return Invalid("tpm_key", kNeeds);
    if (Status s = CheckAllowed(k, {"public", "certify_info", "certify_signature"}, "tpm_key."); !s.ok()) return s;
    TpmKeyProof proof;
    for (auto [name, out] : {std::pair{"public", &proof.public_area}, std::pair{"certify_info", &proof.certify_info},
                             std::pair{"certify_signature", &proof.certify_signature}}) {
      auto it = k.find(name);
      auto b = it != k.end() && it->is_string() ? Base64Decode(it->get_ref<const std::string&>(), kMaxTpmKeyField)
                                                : std::nullopt;
      if (!b) return Invalid(std::string("tpm_key.") + name, kNeeds);
      *out = std::move(*b);
    }
    r.tpm_key = std::move(proof);
  }
  if (doc->contains("renewal")) {
    const json& k = doc->at("renewal");
    const char* kNeeds = "needs certificate (PEM) and signature (base64)";
    if (!k.is_object()) return Invalid("renewal", kNeeds);
    if (Status s = CheckAllowed(k, {"certificate", "signature"}, "renewal."); !s.ok()) return s;
    auto cert = k.find("certificate");
    if (cert == k.end() || !cert->is_string() || cert->get_ref<const std::string&>().empty() ||
        cert->get_ref<const std::string&>().size() > kMaxPemChars) {
      return Invalid("renewal.certificate", kNeeds);
    }
    auto sig = k.find("signature");
    auto b = sig != k.end() && sig->is_string() ? Base64Decode(sig->get_ref<const std::string&>(), kMaxSignature)
                                                : std::nullopt;
    if (!b || b->empty()) return Invalid("renewal.signature", kNeeds);
    r.renewal = RenewalProof{cert->get<std::string>(), std::move(*b)};
  }
  return r;
}

std::string EncodeIssuedCertificate(const IssuedCertificate& c) {
  json body = {{"certificate", c.certificate_pem}, {"ca", c.ca_pem},         {"serial", c.serial},
               {"not_before", c.not_before},       {"not_after", c.not_after}, {"tpm_resident", c.tpm_resident},
               {"state", c.state}};
  return body.dump();
}

Result<IssuedCertificate> DecodeIssuedCertificate(std::string_view body) {
  auto doc = ParseAnyObject(body);
  if (!doc.ok()) return doc.status();
  IssuedCertificate out;
  auto cert = Str(*doc, "certificate", kMaxPemChars);
  if (!cert) return Missing("certificate");
  auto ca = Str(*doc, "ca", kMaxPemChars);
  if (!ca) return Missing("ca");
  out.certificate_pem = std::move(*cert);
  out.ca_pem = std::move(*ca);
  out.serial = text::PrintableAscii(Str(*doc, "serial").value_or(""), 64);
  out.not_before = Int<long long>(*doc, "not_before");
  out.not_after = Int<long long>(*doc, "not_after");
  out.tpm_resident = Bool(*doc, "tpm_resident");
  out.state = text::PrintableAscii(Str(*doc, "state").value_or(""), 32);
  return out;
}

// --- Provisioning reports ----------------------------------------------------

namespace {

bool ReportName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

}  // namespace

std::string EncodeProvisioningReport(const ProvisioningReport& r) {
  json body = {{"outcome", r.outcome}, {"step", r.step},         {"reason", r.reason},
               {"message", r.message}, {"exit_status", r.exit_status}, {"done", r.done}};
  return body.dump();
}

Result<ProvisioningReport> DecodeProvisioningReport(std::string_view body) {
  auto doc = ParseObject(body, {"outcome", "step", "reason", "message", "exit_status", "done"});
  if (!doc.ok()) return doc.status();
  ProvisioningReport r;
  for (const char* field : {"outcome", "step"}) {
    if (!doc->contains(field) || !doc->at(field).is_string()) return Missing(field);
  }
  r.outcome = doc->at("outcome").get<std::string>();
  if (r.outcome != "ok" && r.outcome != "failed") return Invalid("outcome", "expected ok or failed");
  r.step = doc->at("step").get<std::string>();
  if (!ReportName(r.step)) return Invalid("step", "expected [a-z0-9_], 1..64 characters");
  if (doc->contains("reason")) {
    const json& v = doc->at("reason");
    if (!v.is_string()) return Invalid("reason", "expected a string");
    r.reason = v.get<std::string>();
    if (!r.reason.empty() && !ReportName(r.reason)) return Invalid("reason", "expected [a-z0-9_], 1..64 characters");
  }
  if (r.outcome == "failed" && r.reason.empty()) return Missing("reason");
  if (doc->contains("message")) {
    const json& v = doc->at("message");
    if (!v.is_string() || v.get_ref<const std::string&>().size() > kMaxReportMessage) {
      return Invalid("message", "expected a string of at most " + std::to_string(kMaxReportMessage) + " characters");
    }
    // SECURITY: shown on operators' terminals and logged: printable only.
    r.message = text::PrintableAscii(v.get<std::string>(), kMaxReportMessage);
  }
  if (doc->contains("exit_status")) {
    const json& v = doc->at("exit_status");
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > 255) {
      return Invalid("exit_status", "expected an integer 0..255");
    }
    r.exit_status = static_cast<int>(v.get<long long>());
  }
  if (doc->contains("done")) {
    const json& list = doc->at("done");
    if (!list.is_array() || list.size() > kMaxReportDone) {
      return Invalid("done", "expected a list of at most " + std::to_string(kMaxReportDone) + " names");
    }
    for (const json& d : list) {
      if (!d.is_string() || !ReportName(d.get_ref<const std::string&>())) {
        return Invalid("done", "expected names of [a-z0-9_]");
      }
      r.done.push_back(d.get<std::string>());
    }
  }
  return r;
}

std::string EncodeReportRecorded() { return json{{"recorded", true}}.dump(); }

}  // namespace rackgate::wire
