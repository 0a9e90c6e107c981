// CSR vouching's decisions (docs/csr.md): POST /v1/machine/csr. A machine holding an
// attestation token submits its kubelet client or serving CSR; the
// approver's rules are applied against its attested identity (core/csr.h),
// a TPM-resident key is proven with a TPM2_Certify by the attested AK over
// the session's nonce; that decision is a value (CsrVerdict), and an Issuer
// (core/issuer.h) turns an approved one into a certificate, now or later.
// Every decision is audited and logged with the machine and the reason.
// Flood limits refuse (csr_flood_machine, csr_flood) before any crypto runs.
#ifndef RACKGATE_CORE_CSR_SERVICE_H_
#define RACKGATE_CORE_CSR_SERVICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/attestation.h"
#include "core/csr.h"
#include "core/issuer.h"
#include "core/pool_settings.h"
#include "storage/store.h"
#include "wire/protocol.h"

namespace rackgate::core {


// The machine's enrolled names and addresses, state and times, as the CSR
// rules (csr::Check) compare a request with them.
csr::MachineFacts MachineFactsOf(const storage::Machine& m);

// A TPM-resident key's proof as sent (base64 decoded); a field that was
// absent or not base64 is nullopt, and the request is refused field_invalid.
struct TpmKeyProof {
  std::optional<attest::Bytes> public_area;        // TPM2B_PUBLIC
  std::optional<attest::Bytes> certify_info;       // TPMS_ATTEST
  std::optional<attest::Bytes> certify_signature;  // TPMT_SIGNATURE
};

// The body of POST /v1/machine/csr, decoded.
struct CsrSubmission {
  std::string signer;  // kubernetes.io/kube-apiserver-client-kubelet or kubernetes.io/kubelet-serving
  std::string csr_pem;
  std::optional<std::vector<std::string>> usages;  // nullopt: kubelet's defaults for the signer
  std::optional<TpmKeyProof> tpm_key;
  // A renewal of the machine's current certificate of this kind (docs/csr.md,
  // "Renewal"): that certificate and a signature by its key.
  std::optional<wire::RenewalProof> renewal;
};

// A signed certificate (or the one already issued for the same key).
// The issued certificate, as the wire module defines the answer.
using CsrIssued = wire::IssuedCertificate;

struct CsrOptions {
  // Where LocalCaIssuer finds the cluster CA; read at the first CSR and at
  // every Reload, so `rackgatectl ca import` needs no restart.
  std::string cluster_ca_certificate;
  std::string cluster_ca_key;
  int64_t client_window_seconds = 7200;
  int64_t client_validity_seconds = 365 * 86400;
  int64_t serving_validity_seconds = 365 * 86400;
  int max_in_flight = 64;
  int max_in_flight_per_machine = 2;
};

// What the decision says about one submission (docs/csr.md, "Decision and
// issuer"): refused, answered with a certificate issued before, or approved
// with the request for the issuer and what to record once it issued. The
// decision issues nothing and records no certificate; it reads the store
// (the machine's certificates) and may queue a CSR for manual approval.
struct CsrVerdict {
  enum class Outcome {
    kRefused,   // `refusal` is the answer
    kAnswered,  // `earlier`, issued before for this very key (a lost answer)
    kApproved,  // issue `request`, then record `record`
  };
  // What a refusal leaves behind: kNone (the body never made a decision
  // about the machine: bad JSON, unknown signer, a proof missing a field),
  // kCounted (the machine waits it out: logged and counted), kAudited (a
  // final decision: logged, counted and one csr_refused audit row).
  enum class Trace { kNone, kCounted, kAudited };

  Outcome outcome = Outcome::kRefused;
  std::string kind;  // storage::kCertClient or kCertServing; "" before the signer was read
  int64_t decided_at = 0;

  // kRefused.
  Status refusal;
  Trace trace = Trace::kNone;

  // kAnswered: the certificate, and for the log what it answers.
  std::optional<storage::IssuedCertificate> earlier;
  std::string answered_because;

  // kApproved: the machine, kind, profile and CSR for the issuer; and the
  // record, complete but for what the issuer makes (serial, validity, PEM).
  IssueRequest request;
  storage::IssuedCertificateRecord record;
};

class CsrService {
 public:
  // BORROWED: store, attestation and metrics (may be null) outlive the
  // service. Issues with the cluster CA of `options` (LocalCaIssuer).
  CsrService(storage::CsrStore* store, AttestationService* attestation, CsrOptions options, Metrics* metrics);
  // The same, issuing with `issuer` (BORROWED, outlives the service).
  CsrService(storage::CsrStore* store, AttestationService* attestation, CsrOptions options, Metrics* metrics,
             Issuer* issuer);

  // POST /v1/machine/csr, in docs/csr.md's order: the token, the flood
  // limits, then Decide, then for an approved request the issuer and the
  // record (one store transaction: RecordIssuedCertificate). An issuer that
  // answers pending makes it csr_issuing (kUnsupported: 503 + Retry-After);
  // nothing is recorded and the machine asks again.
  Result<CsrIssued> Submit(const std::optional<std::string>& bearer_token,
                           const Result<CsrSubmission>& submission);
  // The decision for an authenticated machine's submission (`submission` is
  // its decoding, or why it did not decode): the trust gate
  // (AttestationService::AuthorizeRelease), the body, the CSR, the TPM key
  // proof, a lost answer, the renewal proof, the rules, manual approval.
  // Neither logs, counts nor audits a refusal: Submit does, from the verdict.
  //
  // `purpose` says what the approved request is for: a certificate rackgate
  // issues (a signer-mode pool; an approver-mode pool's machine is refused
  // csr_approver_mode) or a key the kubelet puts in its own
  // certificates.k8s.io CSR (RegisterKey; refused kubelet_key_signer_mode
  // in a signer-mode pool, and a renewal proof is refused field_invalid).
  enum class Purpose { kIssue, kRegisterKey };
  CsrVerdict Decide(const storage::Bearer& auth, const Result<CsrSubmission>& submission,
                    Purpose purpose = Purpose::kIssue);
  // POST /v1/machine/kubelet-key (approver mode, docs/kubernetes.md): the
  // machine registers the key its kubelet will put in its client (or
  // serving) CSR. Decided as a CSR (Decide with kRegisterKey: the token, the
  // trust gate, the CSR's self-signature, the TPM proof, the rules, manual
  // approval), then recorded in `keys` (RegisterAttestedKey, one
  // transaction, audited; a TPM proof's nonce consumed in it) instead of
  // issued. Refusals are counted, logged and audited as Submit's are.
  // Without SetKubeletKeys: kubelet_key_signer_mode.
  Result<storage::AttestedKey> RegisterKey(const std::optional<std::string>& bearer_token,
                                           const Result<CsrSubmission>& submission);
  // Where RegisterKey records keys (BORROWED; the composition root sets it).
  void SetKubeletKeys(storage::KubeApprovalStore* keys) { keys_ = keys; }
  // Reads the issuer's configuration again (SIGHUP). An error keeps the
  // running one.
  Status Reload();

 private:
  Status Refuse(const storage::Machine& m, Status refusal, const std::string& kind, bool waitable = false);
  // The flood limits (max_in_flight, max_in_flight_per_machine): takes a
  // place for one request of `m` (the caller's Slot gives it back), or
  // answers the waitable refusal csr_flood_machine / csr_flood. Submit's and
  // RegisterKey's one gate, before any parsing or crypto.
  Status EnterFloodLimits(const storage::Machine& m);
  // A refused verdict's answer, leaving the trace it asks for (Refuse, or
  // nothing for kNone). Submit's and RegisterKey's one way to refuse.
  Status RefusalOf(const storage::Machine& m, const CsrVerdict& refused);
  // A verdict refused with `refusal`, leaving `trace`.
  static CsrVerdict Refused(Status refusal, CsrVerdict::Trace trace, std::string kind);
  // The client certificate already issued for this key, when the machine
  // asks again without a renewal; a refusal when the store failed.
  std::optional<CsrVerdict> LostClientAnswer(const storage::Machine& m, const CsrSubmission& body,
                                             const csr::Csr& csr, const std::string& kind);
  // The rules (core/csr.h Check) and manual approval; nullopt when both pass.
  std::optional<CsrVerdict> CheckRulesAndApproval(const storage::Machine& m, const CsrSubmission& body,
                                                  const csr::Csr& csr, csr::Kind kind,
                                                  const std::vector<std::string>& usages,
                                                  const PoolSettings& settings, bool tpm_key_proven,
                                                  bool renewal, int64_t now);
  // The approved verdict for `csr`.
  CsrVerdict Approved(const storage::Machine& m, const storage::Token& token, const CsrSubmission& body,
                      csr::Csr csr, csr::Kind kind, std::vector<std::string> usages, bool tpm_key_proven,
                      std::optional<std::string> replaces, int64_t now);
  // The certificate a renewal replaces, after every renewal check but the
  // rules (docs/csr.md, "Renewal"); or, for a renewal already recorded for
  // this very key (an answer that was lost), that renewal in *done.
  Result<storage::IssuedCertificate> CheckRenewal(const storage::Machine& m, const storage::Token& token,
                                                  const std::string& kind, const wire::RenewalProof& proof,
                                                  const csr::Csr& csr, const PoolSettings& settings, int64_t now,
                                                  std::optional<storage::IssuedCertificate>* done);
  // Carries out the verdict: the answer, the refusal's trace, or the issuer
  // and the record.
  Result<CsrIssued> Carry(const storage::Machine& m, CsrVerdict verdict);
  Result<CsrIssued> IssueAndRecord(const storage::Machine& m, CsrVerdict verdict);
  CsrIssued Answer(const storage::IssuedCertificate& cert, const storage::Machine& m);

  storage::CsrStore* store_;
  AttestationService* attestation_;
  CsrOptions options_;
  Metrics* metrics_;
  std::unique_ptr<Issuer> owned_issuer_;  // the LocalCaIssuer of options_, when no issuer was given
  Issuer* issuer_;                        // BORROWED or owned_issuer_
  storage::KubeApprovalStore* keys_ = nullptr;  // BORROWED; RegisterKey's

  std::mutex mu_;
  int in_flight_ = 0;                            // guarded by mu_
  std::map<int64_t, int> in_flight_by_machine_;  // guarded by mu_
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_CSR_SERVICE_H_
