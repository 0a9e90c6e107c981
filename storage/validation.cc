// Checks on what callers store: sizes, names, states and addresses.
#include "storage/validation.h"

#include <arpa/inet.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "base/hex.h"
#include "base/text.h"
#include "storage/sqlite.h"

namespace rackgate::storage {

namespace {

// An RFC 1123 DNS name: labels of 1-63 letters, digits and inner hyphens,
// at most 253 bytes; `lowercase_only` refuses upper-case letters.
bool IsRfc1123Name(std::string_view n, bool lowercase_only) {
  if (n.empty() || n.size() > 253) return false;
  size_t label = 0;
  char prev = '.';
  for (char c : n) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (!lowercase_only && c >= 'A' && c <= 'Z');
    if (c == '.') {
      if (label == 0 || prev == '-') return false;
      label = 0;
    } else if (alnum || c == '-') {
      if (label == 0 && c == '-') return false;
      if (++label > 63) return false;
    } else {
      return false;
    }
    prev = c;
  }
  return label > 0 && prev != '-';
}

// A Kubernetes node name: a lowercase RFC 1123 subdomain. It becomes the CN
// "system:node:<hostname>" of a kubelet certificate, so nothing else may pass.
bool IsValidHostname(std::string_view h) { return IsRfc1123Name(h, true); }

// Pool names appear in URLs (/config/POOL).
bool IsValidPoolName(std::string_view p) {
  if (p.empty() || p.size() > 63) return false;
  for (char c : p) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && c != '.' && c != '_' && c != '-') return false;
  }
  return p[0] != '.' && p[0] != '_' && p[0] != '-';
}

}  // namespace

bool IsIpLiteral(const std::string& v) {
  unsigned char buf[sizeof(struct in6_addr)];
  return ::inet_pton(AF_INET, v.c_str(), buf) == 1 || ::inet_pton(AF_INET6, v.c_str(), buf) == 1;
}

bool IsDnsName(std::string_view n) { return IsRfc1123Name(n, false); }

void CheckHostname(const std::string& h) {
  if (!IsValidHostname(h)) {
    Fail(Status::InvalidArgument("hostname_invalid", "the hostname must be a lowercase RFC 1123 DNS name"));
  }
}

namespace {

void CheckAddresses(const std::vector<Address>& addresses) {
  CheckSize("addresses", addresses.size(), 0, kMaxAddresses);
  for (const auto& a : addresses) {
    if (!IsValidAddressKind(a.kind)) {
      Fail(Status::InvalidArgument("field_invalid", "unknown address kind '" + a.kind +
                                                        "': use InternalIP, ExternalIP, InternalDNS, "
                                                        "ExternalDNS or Hostname"));
    }
    if (a.value.empty() || a.value.size() > kMaxAddressValue || !text::IsVisibleAscii(a.value)) {
      Fail(Status::InvalidArgument("field_invalid", "address " + a.kind + "=" + a.value.substr(0, 64) +
                                                        " is not 1..253 printable characters (no spaces)"));
    }
    // The serving CSR's SANs must be a subset of these, so what is stored
    // must be what a certificate can carry: an IP literal for the IP kinds,
    // a DNS name for the others.
    if (a.kind == kAddressInternalIP || a.kind == kAddressExternalIP) {
      if (!IsIpLiteral(a.value)) {
        Fail(Status::InvalidArgument("field_invalid", "address " + a.kind + "=" + a.value +
                                                          " is not an IPv4 or IPv6 address (e.g. 10.0.0.6 "
                                                          "or fd00::6)"));
      }
    } else if (!IsDnsName(a.value)) {
      Fail(Status::InvalidArgument("field_invalid", "address " + a.kind + "=" + a.value +
                                                        " is not a DNS name (RFC 1123: labels of 1..63 letters, "
                                                        "digits and '-', joined by '.')"));
    }
  }
}

}  // namespace

void CheckSize(const char* field, size_t size, size_t min, size_t max) {
  if (size < min || size > max) {
    Fail(Status::InvalidArgument("field_invalid", std::string(field) + " must be " + std::to_string(min) + ".." +
                                                      std::to_string(max) + " bytes long"));
  }
}

void CheckPoolName(const std::string& p) {
  if (!IsValidPoolName(p)) {
    Fail(Status::InvalidArgument("pool_invalid", "a pool name is 1..63 of [A-Za-z0-9._-], starting alphanumeric"));
  }
}

void CheckState(MachineState s) {
  if (StateName(s).empty()) {
    Fail(Status::InvalidArgument("state_invalid",
                                 "unknown machine state " + std::to_string(static_cast<int>(s))));
  }
}

void CheckActor(const Actor& a) {
  CheckSize("actor name", a.name.size(), 1, kMaxActor);
  CheckSize("actor reason", a.why.size(), 0, kMaxWhy);
}

void CheckOptJson(const char* field, const std::optional<std::string>& j) {
  if (j) CheckSize(field, j->size(), 0, kMaxJson);
}

// Sorted and without duplicates, so that equal sets compare equal.

void CheckEnrollment(const Enrollment& e) {
  CheckHostname(e.hostname);
  CheckPoolName(e.pool);
  if (e.state != MachineState::kEnrolled && e.state != MachineState::kPending) {
    Fail(Status::InvalidArgument("state_invalid", "a machine is enrolled as enrolled or pending"));
  }
  // An EK public area, an EK certificate, or both: the identity (ek_hash)
  // is the same key either way.
  CheckSize("ek_public", e.ek_public.size(), e.ek_certificate ? 0 : 1, kMaxTpm2bPublic);
  CheckSize("ek_hash", e.ek_hash.size(), 1, kMaxHash);
  if (e.ek_certificate) CheckSize("ek_certificate", e.ek_certificate->size(), 1, kMaxCertificate);
  CheckSize("tpm_manufacturer", e.tpm_manufacturer.size(), 0, kMaxFact);
  CheckSize("tpm_model", e.tpm_model.size(), 0, kMaxFact);
  CheckSize("tpm_version", e.tpm_version.size(), 0, kMaxFact);
  CheckAddresses(e.addresses);
  CheckOptJson("policy_json", e.policy_json);
  CheckSize("vars_json", e.vars_json.size(), 2, kMaxJson);
}

Enrollment ApprovedEnrollment(const Machine& pending, const ApprovalChanges& changes) {
  Enrollment e;
  e.hostname = changes.hostname.value_or(pending.hostname);
  e.pool = changes.pool.value_or(pending.pool);
  e.ek_public = pending.ek_public;
  e.ek_hash = pending.ek_hash;
  e.ek_certificate = pending.ek_certificate;
  e.addresses = changes.addresses.value_or(pending.addresses);
  e.vars_json = changes.vars_json.value_or(pending.vars_json);
  e.state = MachineState::kEnrolled;
  CheckEnrollment(e);
  return e;
}

void CheckRecord(const AttestationRecord& r) {
  CheckSize("session_id", r.session_id.size(), 0, kMaxSessionId);
  CheckSize("reason", r.reason.size(), 0, kMaxReason);
  CheckSize("reasons", r.reasons.size(), 0, kMaxReasons);
  for (const auto& x : r.reasons) CheckSize("reasons[]", x.size(), 0, kMaxReason);
  CheckSize("pcrs_json", r.pcrs_json.size(), 0, kMaxJson);
}

Status CheckCertificate(const IssuedCertificate& cert) {
  CheckSize("serial", cert.serial.size(), 1, 64);
  CheckSize("subject", cert.subject.size(), 1, 1024);
  CheckSize("sans", cert.sans.size(), 0, kMaxAddresses);
  for (const auto& san : cert.sans) CheckSize("sans[]", san.size(), 1, kMaxAddressValue);
  CheckSize("public_key_sha256", cert.public_key_sha256.size(), 1, kMaxHash);
  CheckSize("certificate_pem", cert.certificate_pem.size(), 0, 64 * 1024);
  if (cert.kind != kCertClient && cert.kind != kCertServing) {
    return Status::InvalidArgument("field_invalid", "a certificate is client or serving");
  }
  return Status::Ok();
}

namespace {

// Printable ASCII, spaces allowed: what is shown to an operator or a machine.
void CheckText(const char* field, const std::string& v, size_t min, size_t max, bool spaces) {
  CheckSize(field, v.size(), min, max);
  if (!(spaces ? text::IsPrintableAscii(v) : text::IsVisibleAscii(v))) {
    Fail(Status::InvalidArgument("field_invalid", std::string(field) + " is not printable ASCII"));
  }
}

}  // namespace

void CheckAttestedKey(const AttestedKey& key) {
  if (key.kind != kCertClient && key.kind != kCertServing) {
    Fail(Status::InvalidArgument("field_invalid", "an attested key is client or serving"));
  }
  if (key.public_key_sha256.size() != 32) {
    Fail(Status::InvalidArgument("field_invalid", "public_key_sha256 is a SHA-256 of 32 bytes"));
  }
}

void CheckKubeCsrDecision(const KubeCsrDecision& d) {
  CheckText("uid", d.uid, 1, 128, false);
  CheckText("name", d.name, 1, 253, false);
  CheckText("reason", d.reason, 0, kMaxReason, false);
  CheckText("requester", d.requester, 0, 256, true);
  CheckText("message", d.message, 0, 512, true);
  CheckText("decided_by", d.decided_by, 0, kMaxActor, true);
  if (d.kind != kCertClient && d.kind != kCertServing) {
    Fail(Status::InvalidArgument("field_invalid", "a Kubernetes CSR is client or serving"));
  }
  const bool client_purpose = d.purpose == kKubePurposeJoin || d.purpose == kKubePurposeRotation;
  if (!client_purpose && d.purpose != kKubePurposeServing) {
    Fail(Status::InvalidArgument("field_invalid", "a Kubernetes CSR's purpose is join, rotation or serving"));
  }
  if (client_purpose != (d.kind == kCertClient)) {
    Fail(Status::InvalidArgument("field_invalid", "a join or rotation is a client CSR, a serving one serving"));
  }
  if (d.decision != kCsrWaiting && d.decision != kCsrApproved && d.decision != kCsrDenied) {
    Fail(Status::InvalidArgument("field_invalid", "a decision is waiting, approved or denied"));
  }
  const bool may_lack_key = d.decision == kCsrDenied && d.public_key_sha256.empty();
  if (d.public_key_sha256.size() != 32 && !may_lack_key) {
    Fail(Status::InvalidArgument("field_invalid", "public_key_sha256 is a SHA-256 of 32 bytes"));
  }
}

void CheckDenyReason(const std::string& reason) { CheckText("reason", reason, 1, kMaxReason, true); }

Status CheckSession(const Session& session) {
  CheckSize("session id", session.id.size(), 1, kMaxSessionId);
  if (!text::IsVisibleAscii(session.id)) {
    return Status::InvalidArgument("field_invalid", "a session id is printable ASCII");
  }
  CheckSize("nonce", session.nonce.size(), 1, kMaxHash);
  CheckSize("secret_hash", session.secret_hash.size(), 1, kMaxHash);
  CheckSize("ak_public", session.ak_public.size(), 1, kMaxTpmBlob);
  CheckSize("ak_name", session.ak_name.size(), 1, kMaxTpmBlob);
  CheckSize("pcr_selection", session.pcr_selection.size(), 0, kMaxPcrSelection);
  if (session.expires_at < session.created_at) {
    return Status::InvalidArgument("field_invalid", "a session expires after it is created");
  }
  return Status::Ok();
}

// import_duplicate unless every hostname and every EK appears once in the
// rows; the message names both rows of each pair (at most a few pairs).
void CheckNoImportDuplicates(const std::vector<ImportRow>& rows) {
  std::map<std::string, size_t> by_host;
  std::map<Bytes, size_t> by_ek;
  std::vector<std::string> found;
  size_t total = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Enrollment& e = rows[i].enrollment;
    auto [h, new_host] = by_host.emplace(e.hostname, i);
    auto [k, new_ek] = by_ek.emplace(e.ek_hash, i);
    if (!new_host) {
      if (++total <= 5) {
        found.push_back(rows[h->second].where + " and " + rows[i].where + " both enroll hostname " + e.hostname);
      }
    } else if (!new_ek) {
      if (++total <= 5) {
        found.push_back(rows[k->second].where + " (" + rows[k->second].enrollment.hostname + ") and " +
                        rows[i].where + " (" + e.hostname + ") carry the same EK (" + hex::Encode(e.ek_hash).substr(0, 16) +
                        ")");
      }
    }
  }
  if (found.empty()) return;
  std::string message;
  for (const auto& f : found) message += (message.empty() ? "" : "; ") + f;
  if (total > found.size()) message += "; and " + std::to_string(total - found.size()) + " more";
  Fail(Status::InvalidArgument("import_duplicate",
                               message + ": each machine appears once in an inventory; nothing was imported"));
}

Status RevokedRefusal(const std::string& hostname) {
  return Status::VerificationFailed(
      "machine_revoked", "'" + hostname + "' is revoked; a reset lifts a revocation only when asked to: " +
                             "rackgatectl reset " + hostname + " --unrevoke --reason TEXT");
}

}  // namespace rackgate::storage
