// CSR vouching: the token, the flood limits, the decision, the issuer, the record.
#include "core/csr_service.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "attest/tpm.h"
#include "core/csr_approval.h"
#include "core/secrets.h"
#include "core/trust.h"
#include "base/log.h"
#include "base/hex.h"
#include "storage/audit_detail.h"

namespace rackgate::core {

namespace {

using nlohmann::json;

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("csr");
  return log;
}

constexpr size_t kMaxCsrField = 64 * 1024;

std::string Who(const storage::Machine& m) { return m.hostname + " ek=" + hex::Encode(m.ek_hash).substr(0, 16); }

// The store's name of a kind: storage::kCertClient or kCertServing.
std::string KindName(csr::Kind kind) {
  return std::string(kind == csr::Kind::kClient ? storage::kCertClient : storage::kCertServing);
}

// The pool's kubelet_certificates against what the request is for.
Status CheckMode(const PoolSettings& settings, CsrService::Purpose purpose,
                 const Result<CsrSubmission>& submission) {
  if (purpose == CsrService::Purpose::kIssue && settings.approver_mode) {
    return Status::VerificationFailed(
        "csr_approver_mode",
        "the machine's pool has the cluster's signer issue kubelet certificates (kubelet_certificates: approver): "
        "register the kubelet's key (POST /v1/machine/kubelet-key) and let the kubelet file its own CSR");
  }
  if (purpose == CsrService::Purpose::kRegisterKey && !settings.approver_mode) {
    return Status::VerificationFailed(
        "kubelet_key_signer_mode",
        "the machine's pool has rackgate sign kubelet certificates (kubelet_certificates: signer): "
        "submit the CSR to POST /v1/machine/csr");
  }
  if (purpose == CsrService::Purpose::kRegisterKey && submission.ok() && submission->renewal) {
    return Status::InvalidArgument("field_invalid", "a key registration carries no renewal proof");
  }
  return Status::Ok();
}

}  // namespace

csr::MachineFacts MachineFactsOf(const storage::Machine& m) {
  csr::MachineFacts f;
  f.hostname = m.hostname;
  for (const auto& a : m.addresses) {
    if (a.kind == storage::kAddressInternalIP || a.kind == storage::kAddressExternalIP) {
      f.ip_addresses.push_back(a.value);
    } else {
      f.dns_names.push_back(a.value);
    }
  }
  f.state = std::string(storage::StateName(m.state));
  f.last_attested_at = m.last_attested_at;
  f.client_cert_issued_at = m.client_cert_issued_at;
  return f;
}

namespace {

// Holds a CSR slot for the request's lifetime.
class Slot {
 public:
  Slot(std::mutex* mu, int* total, std::map<int64_t, int>* by_machine, int64_t machine)
      : mu_(mu), total_(total), by_machine_(by_machine), machine_(machine) {}
  ~Slot() {
    std::lock_guard<std::mutex> l(*mu_);
    --*total_;
    if (--(*by_machine_)[machine_] == 0) by_machine_->erase(machine_);
  }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

 private:
  std::mutex* mu_;
  int* total_;
  std::map<int64_t, int>* by_machine_;
  int64_t machine_;
};

}  // namespace


CsrService::CsrService(storage::CsrStore* store, AttestationService* attestation, CsrOptions options, Metrics* metrics)
    : CsrService(store, attestation, std::move(options), metrics, nullptr) {}

CsrService::CsrService(storage::CsrStore* store, AttestationService* attestation, CsrOptions options, Metrics* metrics,
                       Issuer* issuer)
    : store_(store), attestation_(attestation), options_(std::move(options)), metrics_(metrics), issuer_(issuer) {
  if (issuer_ == nullptr) {
    owned_issuer_ = std::make_unique<LocalCaIssuer>(options_.cluster_ca_certificate, options_.cluster_ca_key);
    issuer_ = owned_issuer_.get();
  }
}

Status CsrService::Reload() { return issuer_->Reload(); }

Status CsrService::RefusalOf(const storage::Machine& m, const CsrVerdict& refused) {
  if (refused.trace == CsrVerdict::Trace::kNone) return refused.refusal;
  return Refuse(m, refused.refusal, refused.kind, refused.trace == CsrVerdict::Trace::kCounted);
}

Status CsrService::Refuse(const storage::Machine& m, Status refusal, const std::string& kind, bool waitable) {
  const std::string& reason = refusal.reason();
  const std::string& message = refusal.message();
  if (metrics_ != nullptr) {
    metrics_->CounterInc("rackgate_csr_total", "CSR decisions by verdict, kind and reason.",
                         {{"verdict", "refused"}, {"kind", kind}, {"reason", reason}});
  }
  Log()->warn("{} CSR of {} refused: {} ({})", kind.empty() ? "a" : kind, Who(m), reason, message);
  // Refusals the machine can wait out (busy) are not decisions about it.
  if (!waitable) {
    storage::AuditDetail detail;
    detail.Text("kind", kind).Text("reason", reason).Text("message", message);
    if (Status s = store_->AuditMachineEvent(m.id, "csr_refused", detail.Json(),
                                             storage::Actor{"rackgated", "CSR vouching"}, attestation_->Now());
        !s.ok()) {
      Log()->error("CSR refusal of {} not audited: {}", Who(m), s.ToString());
    }
  }
  return refusal;
}

CsrIssued CsrService::Answer(const storage::IssuedCertificate& cert, const storage::Machine& m) {
  CsrIssued out;
  out.certificate_pem = cert.certificate_pem;
  out.ca_pem = issuer_->ca_pem();
  out.serial = cert.serial;
  out.not_before = cert.not_before;
  out.not_after = cert.not_after;
  out.tpm_resident = cert.tpm_resident;
  out.state = std::string(storage::StateName(m.state));
  return out;
}

Result<storage::IssuedCertificate> CsrService::CheckRenewal(const storage::Machine& m, const storage::Token& token,
                                                            const std::string& kind, const wire::RenewalProof& proof,
                                                            const csr::Csr& csr, const PoolSettings& settings, int64_t now,
                                                            std::optional<storage::IssuedCertificate>* done) {
  // Only a joined machine renews: anything before has no certificate to
  // renew yet, a revoked one has no token, and a reset one starts over.
  if (m.state != storage::MachineState::kJoined) {
    return Status::InvalidArgument("state_conflict", "only a joined machine renews its certificates");
  }
  // The certificate must be one this appliance issued to THIS machine, of
  // this kind, byte for byte: the store's record is the reference, never the
  // presented text (a certificate forged with a serial of ours, or another
  // machine's, is refused).
  auto presented = csr::ParsePresentedCertificate(proof.certificate_pem);
  if (!presented.ok()) return presented.status();
  auto stored = store_->GetCertificate(presented->serial_hex);
  if (!stored.ok()) {
    if (stored.status().code() == Status::Code::kIoError) return StoreBusy(stored.status());
    return Status::VerificationFailed("renewal_proof_invalid", "the certificate was not issued by this appliance");
  }
  if (stored->machine_id != m.id) {
    return Status::VerificationFailed("renewal_proof_invalid", "the certificate was issued to another machine");
  }
  if (stored->kind != kind) {
    return Status::VerificationFailed("renewal_proof_invalid", "the certificate is not a " + kind + " certificate");
  }
  auto reference = csr::ParsePresentedCertificate(stored->certificate_pem);
  if (!reference.ok() || reference->der != presented->der) {
    return Status::VerificationFailed("renewal_proof_invalid", "the certificate is not the one issued");
  }
  if (!stored->since_reset) {
    return Status::VerificationFailed("renewal_proof_invalid",
                                      "the certificate predates the machine's last reset; the operator's reset "
                                      "starts the machine over");
  }

  // Possession: the certificate's key signed this session's nonce (fresh:
  // the token comes from the attestation that just passed) and the new key
  // (so the proof is good for this CSR's key only).
  if (token.nonce.empty()) {
    return Status::VerificationFailed("renewal_proof_invalid", "attest again: this token predates renewal proofs");
  }
  const attest::Bytes message = wire::RenewalSignedMessage(token.nonce, Sha256(csr.spki_der));
  if (Status s = csr::CheckRenewalSignature(*presented, message, proof.signature); !s.ok()) return s;

  if (stored->replaced_by) {
    // Renewed already. The same new key again is a renewal whose answer was
    // lost: the same answer. Another key would be a second successor.
    auto successor = store_->GetCertificate(*stored->replaced_by);
    if (!successor.ok() && successor.status().code() == Status::Code::kIoError) return StoreBusy(successor.status());
    if (successor.ok() && successor->machine_id == m.id && successor->public_key_sha256 == Sha256(csr.spki_der) &&
        !successor->certificate_pem.empty()) {
      *done = std::move(*successor);
      return std::move(*stored);
    }
    return Status::VerificationFailed("renewal_proof_invalid",
                                      "the certificate was already renewed; renew the newest one");
  }

  // Renewal opens in the last renew_fraction of the validity, or after it
  // ended; the stored validity counts, not the presented text's.
  if (!csr::RenewalDue(stored->not_before, stored->not_after, settings.renew_fraction, now)) {
    return Status::VerificationFailed("renewal_not_due",
                                      "the certificate is not due for renewal yet (renewal opens when " +
                                          std::to_string(settings.renew_fraction) + " of its validity is left)");
  }
  return std::move(*stored);
}

CsrVerdict CsrService::Refused(Status refusal, CsrVerdict::Trace trace, std::string kind) {
  CsrVerdict v;
  v.outcome = CsrVerdict::Outcome::kRefused;
  v.refusal = std::move(refusal);
  v.trace = trace;
  v.kind = std::move(kind);
  return v;
}

std::optional<CsrVerdict> CsrService::LostClientAnswer(const storage::Machine& m, const CsrSubmission& body,
                                                       const csr::Csr& csr, const std::string& kind) {
  // A client whose answer was lost (the appliance crashed after recording
  // the certificate, the connection was cut) asks again with the same key:
  // it gets the same certificate, not client_cert_already_issued. Proof of
  // possession is the CSR's self-signature; the token is the machine's. A
  // reboot that kept its key asks the same way. A renewal has its own
  // answer for a lost reply (CheckRenewal).
  if (kind != storage::kCertClient || !m.client_cert_issued_at || body.renewal) return std::nullopt;
  auto earlier = store_->FindClientCertificate(m.id, Sha256(csr.spki_der));
  // A store failure is not "none issued": signing anew would make the
  // machine a second client certificate.
  if (!earlier.ok() && earlier.status().code() == Status::Code::kIoError) {
    return Refused(StoreBusy(earlier.status()), CsrVerdict::Trace::kCounted, kind);
  }
  if (!earlier.ok() || earlier->certificate_pem.empty()) return std::nullopt;
  CsrVerdict v;
  v.outcome = CsrVerdict::Outcome::kAnswered;
  v.kind = kind;
  v.answered_because = "same key";
  v.earlier = std::move(*earlier);
  return v;
}

std::optional<CsrVerdict> CsrService::CheckRulesAndApproval(const storage::Machine& m, const CsrSubmission& body,
                                                            const csr::Csr& csr, csr::Kind kind,
                                                            const std::vector<std::string>& usages,
                                                            const PoolSettings& settings, bool tpm_key_proven,
                                                            bool renewal, int64_t now) {
  const std::string kind_name = KindName(kind);
  csr::RuleOptions rules;
  rules.client_window_seconds = settings.client_window_seconds.value_or(options_.client_window_seconds);
  rules.require_tpm_key = settings.require_tpm_key;
  csr::MachineFacts facts = MachineFactsOf(m);
  // A renewal is the one client certificate's successor, not a second
  // identity: every rule of a first CSR applies but the mark's.
  if (renewal) facts.client_cert_issued_at.reset();
  const auto refusals = csr::Check(csr, kind, usages, facts, rules, tpm_key_proven, now);
  if (!refusals.empty()) {
    std::string all;
    for (const auto& r : refusals) all += (all.empty() ? "" : "; ") + r.reason + ": " + r.message;
    // reason-helper: VerificationFailed (the reasons of csr::Check's refuse, core/csr.cc)
    return Refused(Status::VerificationFailed(refusals.front().reason, all), CsrVerdict::Trace::kAudited, kind_name);
  }

  // Manual approval (core/csr_approval.h): every rule passed, nothing issued
  // yet. An approved key is issued now, the rules above checked again now.
  if (Status s = CheckCsrApproval(store_, settings,
                                  {&m, kind_name, Sha256(csr.spki_der), body.csr_pem, usages, tpm_key_proven, renewal},
                                  now);
      !s.ok()) {
    return Refused(s.code() == Status::Code::kIoError ? StoreBusy(s) : s,
                   s.reason() != "csr_denied" ? CsrVerdict::Trace::kCounted : CsrVerdict::Trace::kAudited,
                   kind_name);
  }
  return std::nullopt;
}

CsrVerdict CsrService::Approved(const storage::Machine& m, const storage::Token& token, const CsrSubmission& body,
                                csr::Csr csr, csr::Kind kind, std::vector<std::string> usages, bool tpm_key_proven,
                                std::optional<std::string> replaces, int64_t now) {
  CsrVerdict v;
  v.outcome = CsrVerdict::Outcome::kApproved;
  v.kind = KindName(kind);
  v.decided_at = now;

  IssueRequest& r = v.request;
  r.machine_id = m.id;
  r.hostname = m.hostname;
  r.kind = kind;
  r.csr_pem = body.csr_pem;
  r.usages = std::move(usages);
  r.profile = csr::DefaultProfile(kind);
  r.profile.validity_seconds =
      kind == csr::Kind::kClient ? options_.client_validity_seconds : options_.serving_validity_seconds;
  r.public_key_sha256 = Sha256(csr.spki_der);

  // What the record will say; the issuer adds serial, validity and PEM.
  storage::IssuedCertificate& rec = v.record.certificate;
  rec.machine_id = m.id;
  rec.kind = v.kind;
  rec.subject = "O=system:nodes, CN=" + csr.common_names.front();
  if (kind == csr::Kind::kServing) {
    rec.sans = csr.dns_names;
    rec.sans.insert(rec.sans.end(), csr.ip_addresses.begin(), csr.ip_addresses.end());
  }
  rec.public_key_sha256 = r.public_key_sha256;
  rec.tpm_resident = tpm_key_proven;
  v.record.replaces = std::move(replaces);
  // One nonce, one use (docs/csr.md): the session's nonce certifies the key
  // of ONE CSR. Consumed in the transaction that records the certificate
  // (a refusal, a wait or a pending issuer leaves it for the request that
  // asks again), so that of two CSRs certified over one nonce one is recorded
  // and only a recorded certificate leaves.
  if (tpm_key_proven) v.record.certify_token_hash = token.hash;
  r.csr = std::move(csr);
  return v;
}

CsrVerdict CsrService::Decide(const storage::Bearer& auth, const Result<CsrSubmission>& submission,
                              Purpose purpose) {
  const storage::Machine& m = auth.machine;
  const storage::Token& token = auth.token;
  using Trace = CsrVerdict::Trace;

  // The one gate of every release (docs/trust.md): a machine whose latest
  // attestation failed, or whose last good one is older than its pool
  // allows, gets no certificate of any kind (first, renewal, client,
  // serving, nor a lost answer sent again) until it attests well again. Its
  // token may predate the failure.
  auto release = attestation_->AuthorizeRelease(auth);
  if (!release.ok()) {
    const bool waitable = release.status().code() != Status::Code::kVerificationFailed;
    return Refused(release.status(), waitable ? Trace::kCounted : Trace::kAudited, "");
  }
  const PoolSettings& settings = release->settings;
  if (Status s = CheckMode(settings, purpose, submission); !s.ok()) return Refused(s, Trace::kNone, "");

  if (!submission.ok()) return Refused(submission.status(), Trace::kNone, "");
  const CsrSubmission& body = *submission;
  auto kind = csr::KindFromSigner(body.signer);
  if (!kind.ok()) return Refused(Status::InvalidArgument("signer_unknown", kind.status().message()), Trace::kNone, "");
  const std::string kind_name = KindName(*kind);
  // Kubelet's defaults for each signer.
  std::vector<std::string> usages =
      body.usages ? *body.usages
                  : (*kind == csr::Kind::kClient ? std::vector<std::string>{"digital signature", "client auth"}
                                                 : std::vector<std::string>{"digital signature", "server auth"});
  if (body.csr_pem.size() > kMaxCsrField) {
    return Refused(Status::InvalidArgument("csr_malformed", "the CSR is too large"), Trace::kNone, kind_name);
  }
  auto parsed = csr::ParseCsr(body.csr_pem);
  if (!parsed.ok()) return Refused(parsed.status(), Trace::kAudited, kind_name);

  // A TPM-resident key: the AK that attested certified it, over the nonce of
  // the session this token was issued for.
  bool tpm_key_proven = false;
  if (body.tpm_key) {
    const TpmKeyProof& k = *body.tpm_key;
    if (!k.public_area || !k.certify_info || !k.certify_signature) {
      return Refused(Status::InvalidArgument("field_invalid",
                                             "tpm_key needs public, certify_info and certify_signature (base64)"),
                     Trace::kNone, kind_name);
    }
    if (token.nonce.empty() || token.ak_public.empty()) {
      return Refused(Status::VerificationFailed("csr_tpm_key_unprovable",
                                                "attest again: this token predates TPM key proofs"),
                     Trace::kAudited, kind_name);
    }
    if (Status s = csr::CheckTpmKey(*k.public_area, *k.certify_info, *k.certify_signature, token.ak_public,
                                    token.nonce, *parsed);
        !s.ok()) {
      return Refused(s, Trace::kAudited, kind_name);
    }
    tpm_key_proven = true;
  }

  if (auto lost = LostClientAnswer(m, body, *parsed, kind_name)) return std::move(*lost);

  const int64_t now = attestation_->Now();

  // A renewal: the machine's current certificate of this kind, its key's
  // signature over this session's nonce and the new key, and the window.
  std::optional<std::string> replaces;
  if (body.renewal) {
    std::optional<storage::IssuedCertificate> done;
    auto current = CheckRenewal(m, token, kind_name, *body.renewal, *parsed, settings, now, &done);
    if (!current.ok()) {
      const bool waitable = current.status().code() == Status::Code::kIoError;
      return Refused(current.status(), waitable ? Trace::kCounted : Trace::kAudited, kind_name);
    }
    if (done) {
      CsrVerdict v;
      v.outcome = CsrVerdict::Outcome::kAnswered;
      v.kind = kind_name;
      v.answered_because = "renewal of " + current->serial + " with the same key";
      v.earlier = std::move(*done);
      return v;
    }
    replaces = current->serial;
  }

  if (auto refused = CheckRulesAndApproval(m, body, *parsed, *kind, usages, settings, tpm_key_proven,
                                           replaces.has_value(), now)) {
    return std::move(*refused);
  }
  return Approved(m, token, body, std::move(parsed).value(), *kind, std::move(usages), tpm_key_proven,
                  std::move(replaces), now);
}

Result<CsrIssued> CsrService::Submit(const std::optional<std::string>& bearer_token,
                                     const Result<CsrSubmission>& submission) {
  auto auth = attestation_->Authenticate(bearer_token);
  if (!auth.ok()) return auth.status();
  const storage::Machine& m = auth->machine;

  if (Status s = EnterFloodLimits(m); !s.ok()) return s;
  Slot slot(&mu_, &in_flight_, &in_flight_by_machine_, m.id);

  return Carry(m, Decide(*auth, submission));
}

Status CsrService::EnterFloodLimits(const storage::Machine& m) {
  // Flood limits first, before any parsing or crypto: the approver's lesson
  // is that an unbounded queue of pending CSRs takes the signer down. Key
  // registrations count as CSRs: each costs the same parsing, crypto and
  // store write.
  std::lock_guard<std::mutex> l(mu_);
  if (in_flight_by_machine_[m.id] >= options_.max_in_flight_per_machine) {
    if (in_flight_by_machine_[m.id] == 0) in_flight_by_machine_.erase(m.id);
    return Refuse(m, Status::Unsupported("csr_flood_machine", "too many CSRs in flight from this machine"), "", true);
  }
  if (in_flight_ >= options_.max_in_flight) {
    if (in_flight_by_machine_[m.id] == 0) in_flight_by_machine_.erase(m.id);
    return Refuse(m, Status::Unsupported("csr_flood", "too many CSRs in flight; come back later"), "", true);
  }
  ++in_flight_;
  ++in_flight_by_machine_[m.id];
  return Status::Ok();
}

Result<storage::AttestedKey> CsrService::RegisterKey(const std::optional<std::string>& bearer_token,
                                                     const Result<CsrSubmission>& submission) {
  if (keys_ == nullptr) {
    return Status::VerificationFailed("kubelet_key_signer_mode", "this appliance has no approver mode");
  }
  auto auth = attestation_->Authenticate(bearer_token);
  if (!auth.ok()) return auth.status();
  const storage::Machine& m = auth->machine;
  if (Status s = EnterFloodLimits(m); !s.ok()) return s;
  Slot slot(&mu_, &in_flight_, &in_flight_by_machine_, m.id);
  CsrVerdict verdict = Decide(*auth, submission, Purpose::kRegisterKey);
  if (verdict.outcome == CsrVerdict::Outcome::kRefused) {
    return RefusalOf(m, verdict);
  }
  if (verdict.outcome == CsrVerdict::Outcome::kAnswered) {
    // A client certificate rackgate itself issued for this key (the pool
    // was in signer mode then): that key has its certificate already.
    return Refuse(m, Status::VerificationFailed("client_cert_already_issued",
                                                "this key already has a client certificate from rackgate"),
                  verdict.kind);
  }
  const storage::IssuedCertificateRecord& r = verdict.record;
  storage::AttestedKey key;
  key.machine_id = m.id;
  key.kind = verdict.kind;
  key.public_key_sha256 = r.certificate.public_key_sha256;
  key.tpm_resident = r.certificate.tpm_resident;
  auto stored = keys_->RegisterAttestedKey(key, r.certify_token_hash, storage::Actor{"rackgated", "approver mode"},
                                          verdict.decided_at);
  if (!stored.ok()) {
    const Status& s = stored.status();
    return Refuse(m, s.code() == Status::Code::kIoError ? StoreBusy(s) : s, verdict.kind,
                  s.code() == Status::Code::kIoError);
  }
  Log()->info("{} kubelet key of {} registered ({}{})", verdict.kind, Who(m),
              hex::Encode(key.public_key_sha256).substr(0, 16), key.tpm_resident ? ", TPM-resident" : "");
  if (metrics_ != nullptr) {
    metrics_->CounterInc("rackgate_kubelet_keys_registered_total",
                         "Kubelet keys registered by attested machines (approver mode), by kind.",
                         {{"kind", verdict.kind}});
  }
  return stored;
}

Result<CsrIssued> CsrService::Carry(const storage::Machine& m, CsrVerdict verdict) {
  switch (verdict.outcome) {
    case CsrVerdict::Outcome::kRefused:
      return RefusalOf(m, verdict);
    case CsrVerdict::Outcome::kAnswered:
      Log()->info("{} certificate {} sent again to {} ({})", verdict.kind, verdict.earlier->serial, Who(m),
                  verdict.answered_because);
      return Answer(*verdict.earlier, m);
    case CsrVerdict::Outcome::kApproved:
      break;
  }
  return IssueAndRecord(m, std::move(verdict));
}

Result<CsrIssued> CsrService::IssueAndRecord(const storage::Machine& m, CsrVerdict verdict) {
  const std::string& kind = verdict.kind;
  const int64_t now = verdict.decided_at;
  const IssueResult result = issuer_->Issue(verdict.request, now);
  if (Status s = result.status(); !s.ok()) return Refuse(m, s, kind, s.code() == Status::Code::kIoError);
  if (result.pending()) {
    // Approved, not issued yet (an issuer that issues later): nothing is
    // recorded, and the machine asks again; its next submission is decided
    // again from scratch and finds the issuer's certificate.
    const IssuePending& p = result.pending_answer();
    return Refuse(m,
                  Status::Unsupported("csr_issuing", "the certificate is being issued (" + p.reference +
                                                         "); ask again in " + std::to_string(p.retry_after_seconds) +
                                                         " s"),
                  kind, true);
  }
  const csr::Issued& issued = result.certificate();

  // Recorded, in one transaction, before it is sent: a certificate nobody
  // knows of never leaves.
  storage::IssuedCertificateRecord& record = verdict.record;
  record.certificate.serial = issued.serial_hex;
  record.certificate.not_before = issued.not_before;
  record.certificate.not_after = issued.not_after;
  record.certificate.certificate_pem = issued.certificate_pem;
  const bool renewal = record.replaces.has_value();
  auto after = store_->RecordIssuedCertificate(
      record, renewal ? storage::Actor{"rackgated", "certificate renewed"} : storage::Actor{"rackgated", "CSR vouched for"},
      now);
  if (!after.ok()) {
    if (after.status().code() == Status::Code::kIoError) return Refuse(m, StoreBusy(after.status()), kind, true);
    return Refuse(m, after.status(), kind);
  }
  if (metrics_ != nullptr) {
    metrics_->CounterInc("rackgate_csr_total", "CSR decisions by verdict, kind and reason.",
                         {{"verdict", renewal ? "renewed" : "signed"}, {"kind", kind}, {"reason", ""}});
  }
  Log()->info("{} certificate {} {} for {}{}; until {}; state {}", kind, issued.serial_hex,
              renewal ? "renewed (replaces " + *record.replaces + ")" : std::string("signed"), Who(m),
              record.certificate.tpm_resident ? " (TPM-resident key)" : "", issued.not_after,
              storage::StateName(after->state));
  CsrIssued out;
  out.certificate_pem = issued.certificate_pem;
  out.ca_pem = issued.ca_pem;
  out.serial = issued.serial_hex;
  out.not_before = issued.not_before;
  out.not_after = issued.not_after;
  out.tpm_resident = record.certificate.tpm_resident;
  out.state = std::string(storage::StateName(after->state));
  return out;
}

}  // namespace rackgate::core
