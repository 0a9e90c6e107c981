// Issuing a certificate for a CSR that CSR vouching approved (docs/csr.md,
// "Decision and issuer"): the Issuer interface, whose answer may be "pending,
// ask again", and LocalCaIssuer, the cluster CA on the appliance.
#ifndef RACKGATE_CORE_ISSUER_H_
#define RACKGATE_CORE_ISSUER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"
#include "core/csr.h"
#include "core/signer.h"

namespace rackgate::core {

// An approved request, as the decision hands it to the issuer. Everything in
// it was checked (rules, proofs, trust); the issuer decides nothing and only
// turns it into a certificate.
struct IssueRequest {
  int64_t machine_id = 0;
  std::string hostname;
  csr::Kind kind = csr::Kind::kClient;
  csr::Csr csr;                     // parsed and self-signature checked
  std::string csr_pem;              // as the machine sent it
  std::vector<std::string> usages;  // Kubernetes' spelling, as checked
  csr::Profile profile;
  csr::Bytes public_key_sha256;     // SHA-256 of csr.spki_der: names the request across retries
};

// The issuer took the request and issues later: the machine asks again after
// `retry_after_seconds`, and the issuer finds its request by `reference`
// (or by the request's machine, kind and key) then.
struct IssuePending {
  int64_t retry_after_seconds = 0;
  std::string reference;  // the issuer's name for the request, for logs
};

// Issued, pending, or refused (a Status that is not ok: kIoError
// signer_unavailable when the machine can wait, anything else final).
class IssueResult {
 public:
  // Implicit, as Result<T>'s, so an issuer returns any of the three.
  IssueResult(csr::Issued issued) : value_(std::move(issued)) {}     // NOLINT(google-explicit-constructor)
  IssueResult(IssuePending pending) : value_(std::move(pending)) {}  // NOLINT(google-explicit-constructor)
  // REQUIRES: !refusal.ok().
  IssueResult(Status refusal) : value_(std::move(refusal)) {}        // NOLINT(google-explicit-constructor)

  bool issued() const { return std::holds_alternative<csr::Issued>(value_); }
  bool pending() const { return std::holds_alternative<IssuePending>(value_); }
  // REQUIRES: issued().
  const csr::Issued& certificate() const { return std::get<csr::Issued>(value_); }
  // REQUIRES: pending().
  const IssuePending& pending_answer() const { return std::get<IssuePending>(value_); }
  // Ok when issued or pending.
  Status status() const {
    const Status* s = std::get_if<Status>(&value_);
    return s != nullptr ? *s : Status::Ok();
  }

 private:
  std::variant<csr::Issued, IssuePending, Status> value_;
};

// Turns approved requests into certificates, now or later. The caller
// (CsrService) records a certificate only once Issue returned it, in one
// store transaction; a pending answer records nothing, and the same request
// comes back with the machine's next submission, decided again from scratch.
// An issuer must therefore answer a repeated request for the same machine,
// kind and key with the same certificate or the same pending request, never
// a second one. Implementations are thread-safe.
class Issuer {
 public:
  virtual ~Issuer() = default;
  // Issues a certificate for `request` at time `now` (unix seconds).
  virtual IssueResult Issue(const IssueRequest& request, int64_t now) = 0;
  // The CA certificate (PEM) that issued certificates chain to, sent beside
  // each certificate; "" when not known yet.
  virtual std::string ca_pem() = 0;
  // Reads the issuer's configuration again (SIGHUP). An error keeps the
  // running one.
  virtual Status Reload() = 0;
};

// Issues at once with the cluster CA whose PEM files are on the appliance
// (csr::LocalCaSigner; docs/csr.md, "Issued certificates"). The files are
// read at the first request and at every Reload, so `rackgatectl ca import`
// needs no restart. The CA PEM sent beside a certificate is the rotation's
// bundle (csr::ReadClusterCaState: the current CA, plus next.crt or
// previous.crt beside it during a rotation). Never pending. Without a usable CA: kIoError
// signer_unavailable (the machine waits for the operator).
class LocalCaIssuer final : public Issuer {
 public:
  LocalCaIssuer(std::string cert_path, std::string key_path);
  LocalCaIssuer(const LocalCaIssuer&) = delete;
  LocalCaIssuer& operator=(const LocalCaIssuer&) = delete;

  IssueResult Issue(const IssueRequest& request, int64_t now) override;
  std::string ca_pem() override;
  Status Reload() override;

 private:
  // The signer and the bundle loaded with it (*bundle_pem).
  std::shared_ptr<csr::Signer> Current(std::string* bundle_pem);

  const std::string cert_path_;
  const std::string key_path_;
  std::mutex mu_;
  std::shared_ptr<csr::Signer> signer_;  // guarded by mu_
  std::string bundle_pem_;                // guarded by mu_
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_ISSUER_H_
