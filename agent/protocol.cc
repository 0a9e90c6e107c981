// JSON bodies of the attestation, config and CSR endpoints.
#include "agent/protocol.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "agent/backoff.h"
#include "agent/encoding.h"
#include "attest/boot_facts.h"

namespace rackgate::agent {

namespace {

using nlohmann::json;

// Bounds on fields of the appliance's answers.
constexpr size_t kMaxCredentialBytes = 4096;
constexpr size_t kMaxNonceBytes = 64;  // TPM2B_DATA
constexpr size_t kMaxFieldChars = 256;
constexpr size_t kMaxPemChars = 256 * 1024;

Failure BadResponse(const std::string& what) {
  return Failure::Refused("bad_response", "the appliance's answer is unusable: " + what);
}

Outcome<json> ParseObject(std::string_view body) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return BadResponse("not a JSON object");
  return doc;
}

// A string member of at most `max` characters; nullopt when absent or not a string.
std::optional<std::string> Str(const json& obj, const char* key, size_t max = kMaxFieldChars) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return std::nullopt;
  std::string v = it->get<std::string>();
  if (v.size() > max) return std::nullopt;
  return v;
}

}  // namespace

ErrorBody ParseErrorBody(std::string_view body) {
  ErrorBody out;
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return out;
  auto e = doc.find("error");
  if (e == doc.end() || !e->is_object()) return out;
  // Printable only: these strings go to a terminal or the journal.
  if (auto r = Str(*e, "reason")) out.reason = attest::PrintableAscii(*r, 64);
  if (auto m = Str(*e, "message", 4096)) out.message = attest::PrintableAscii(*m, 200);
  return out;
}

Outcome<HttpResponse> Classify(Result<HttpResponse> exchange, std::time_t now) {
  if (!exchange.ok()) {
    if (exchange.status().reason() == "response_too_large") return BadResponse(exchange.status().message());
    return Failure::Retry("appliance_unreachable", attest::PrintableAscii(exchange.status().message(), 200));
  }
  HttpResponse r = std::move(exchange).value();
  if (r.status >= 200 && r.status < 300) return r;
  ErrorBody e = ParseErrorBody(r.body);
  const int status = static_cast<int>(r.status);
  // 429 (too many CSRs in flight from this machine) is waited out like 503.
  if (r.status == 503 || r.status == 429) {
    std::optional<long> after;
    if (r.retry_after) after = ParseRetryAfter(*r.retry_after, now);
    return Failure::Wait(e.reason.empty() ? "unavailable" : e.reason, e.message, after);
  }
  if (r.status >= 500 && r.status < 600) {
    return Failure::Retry(e.reason.empty() ? "http_" + std::to_string(r.status) : e.reason, e.message, status);
  }
  // A session that is used, expired or unknown says nothing about the
  // machine: an evidence whose answer was lost (the appliance restarted, the
  // connection was cut and retried) finds its session used. Start again.
  if (r.status == 403 && (e.reason == "session_used" || e.reason == "session_expired" ||
                          e.reason == "session_unknown")) {
    return Failure::Retry(e.reason, e.message, status);
  }
  if (r.status >= 400 && r.status < 500) {
    return Failure::Refused(e.reason.empty() ? "http_" + std::to_string(r.status) : e.reason, e.message, status);
  }
  return Failure::Refused("bad_response", "unexpected HTTP status " + std::to_string(r.status), status);
}

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

Outcome<Challenge> ParseChallenge(std::string_view body) {
  auto doc = ParseObject(body);
  if (!doc.ok()) return doc.failure();
  Challenge c;
  auto session = Str(*doc, "session");
  auto nonce = Str(*doc, "nonce");
  auto selection = Str(*doc, "pcr_selection");
  auto credential = Str(*doc, "credential", kMaxCredentialBytes * 2);
  if (!session || session->empty() || !nonce || !selection || !credential) {
    return BadResponse("challenge fields missing");
  }
  c.session = *session;
  auto n = HexDecode(*nonce, kMaxNonceBytes);
  if (!n || n->empty()) return BadResponse("nonce");
  c.nonce = std::move(*n);
  auto sel = attest::ParsePcrSelectionList(*selection);
  if (!sel.ok()) return BadResponse("pcr_selection");
  c.pcr_selection = std::move(sel).value();
  auto cred = Base64Decode(*credential, kMaxCredentialBytes);
  if (!cred) return BadResponse("credential");
  c.credential = std::move(*cred);
  return c;
}

std::string EncodeEvidenceRequest(const EvidenceRequest& r) {
  json pcrs = json::object();
  for (const auto& [alg, bank] : r.pcrs) {
    json values = json::object();
    for (const auto& [pcr, value] : bank) values[std::to_string(pcr)] = attest::HexString(value);
    pcrs[attest::HashAlgName(alg)] = values;
  }
  json body = {{"session", r.session},
               {"secret", attest::HexString(r.secret)},
               {"quote", Base64Encode(r.quote)},
               {"signature", Base64Encode(r.signature)},
               {"pcrs", pcrs}};
  if (r.event_log) body["event_log"] = Base64Encode(*r.event_log);
  return body.dump();
}

Outcome<Token> ParseToken(std::string_view body) {
  auto doc = ParseObject(body);
  if (!doc.ok()) return doc.failure();
  Token t;
  auto token = Str(*doc, "token");
  if (!token || token->empty()) return BadResponse("token missing");
  // The token goes into an HTTP header: printable ASCII without spaces only.
  for (char c : *token) {
    if (c <= 0x20 || c >= 0x7f) return BadResponse("token is not printable");
  }
  t.token = *token;
  if (auto it = doc->find("expires_in"); it != doc->end() && it->is_number_integer()) {
    t.expires_in = it->get<long>();
  }
  t.hostname = attest::PrintableAscii(Str(*doc, "hostname").value_or(""), 253);
  t.state = attest::PrintableAscii(Str(*doc, "state").value_or(""), 32);
  return t;
}

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

Outcome<MachineRecord> ParseMachineRecord(std::string_view body) {
  auto doc = ParseObject(body);
  if (!doc.ok()) return doc.failure();
  MachineRecord m;
  auto hostname = Str(*doc, "hostname");
  // SECURITY: the hostname becomes the CSR's CN and SAN; anything but a DNS
  // name is refused rather than escaped.
  if (!hostname || !ValidHostname(*hostname)) return BadResponse("hostname");
  m.hostname = *hostname;
  m.pool = attest::PrintableAscii(Str(*doc, "pool").value_or(""), 64);
  m.state = attest::PrintableAscii(Str(*doc, "state").value_or(""), 32);
  m.require_tpm_key = doc->contains("require_tpm_key") && (*doc)["require_tpm_key"].is_boolean() &&
                      (*doc)["require_tpm_key"].get<bool>();
  return m;
}

std::string EncodeCsrRequest(const CsrRequest& r) {
  json body = {{"signer", r.signer}, {"csr", r.csr_pem}, {"usages", r.usages}};
  if (r.tpm_public) {
    body["tpm_key"] = {{"public", Base64Encode(*r.tpm_public)},
                       {"certify_info", Base64Encode(r.certify_info)},
                       {"certify_signature", Base64Encode(r.certify_signature)}};
  }
  return body.dump();
}

Outcome<IssuedCertificate> ParseIssuedCertificate(std::string_view body) {
  auto doc = ParseObject(body);
  if (!doc.ok()) return doc.failure();
  IssuedCertificate out;
  auto cert = Str(*doc, "certificate", kMaxPemChars);
  auto ca = Str(*doc, "ca", kMaxPemChars);
  if (!cert || !ca) return BadResponse("certificate or ca missing");
  out.certificate_pem = *cert;
  out.ca_pem = *ca;
  out.serial = attest::PrintableAscii(Str(*doc, "serial").value_or(""), 64);
  if (auto it = doc->find("not_after"); it != doc->end() && it->is_number_integer()) {
    out.not_after = it->get<long long>();
  }
  return out;
}

}  // namespace rackgate::agent
