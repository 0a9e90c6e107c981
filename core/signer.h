// Signing kubelet certificates for requests that passed csr::Check with a
// CA the appliance holds: the Signer interface, the local CA signer (which
// core/issuer.h's LocalCaIssuer uses), and creating or validating the
// cluster CA files an operator gives the appliance.
#ifndef RACKGATE_CORE_SIGNER_H_
#define RACKGATE_CORE_SIGNER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "core/csr.h"

namespace rackgate::core::csr {

// What kind of certificate to issue and for how long.
struct Profile {
  Kind kind = Kind::kClient;
  // One year, Kubernetes' default cluster-signing-duration, for both kinds.
  // Renewal (DESIGN.md) starts in the last third, so a machine that stops
  // attesting loses its certificates within a year at the latest.
  int64_t validity_seconds = 365 * 86400;
  // notBefore lies this far in the past so a node whose clock is a little
  // behind the appliance's still accepts its own certificate.
  int64_t backdate_seconds = 300;
};

// The profile for a kind, with the defaults above.
Profile DefaultProfile(Kind kind);

// An issued certificate.
struct Issued {
  std::string certificate_pem;  // the leaf only
  std::string serial_hex;       // lower-case hex of the 16 serial bytes
  int64_t not_before = 0;       // unix seconds
  int64_t not_after = 0;
  std::string ca_pem;           // the issuing CA certificate
};

// Signs requests. Implementations are thread-safe: Sign may be called from
// several threads at once.
class Signer {
 public:
  virtual ~Signer() = default;
  // Issues a certificate for `csr` under `profile` at time `now` (unix
  // seconds). REQUIRES: csr::Check passed for this request and kind; Sign
  // re-checks only what the certificate's shape depends on (one CN).
  virtual Result<Issued> Sign(const Csr& csr, const Profile& profile, int64_t now) = 0;
  // The CA certificate (PEM) that issued certificates chain to.
  virtual const std::string& ca_pem() const = 0;
};

// A cluster CA whose certificate and private key are PEM files on the
// appliance. Issued certificates carry: the CSR's O and CN (nothing else of
// the subject), for serving only the CSR's DNS SANs (lower-cased, trailing dot
// dropped) and IP SANs, keyUsage digitalSignature (+ keyEncipherment for RSA
// keys, critical), extKeyUsage clientAuth or serverAuth, basicConstraints
// CA:FALSE (critical), subject and authority key identifiers, a random
// 128-bit serial, notBefore = now - backdate, notAfter = now + validity but
// never past the CA's notAfter; signed with SHA-256 (SHA-384 for a P-384 CA).
class LocalCaSigner : public Signer {
 public:
  // Loads and validates (as ValidateClusterCa) the CA. The key stays in
  // memory for the signer's lifetime and is never logged.
  static Result<std::unique_ptr<LocalCaSigner>> Load(const std::string& cert_path,
                                                     const std::string& key_path);

  LocalCaSigner(const LocalCaSigner&) = delete;
  LocalCaSigner& operator=(const LocalCaSigner&) = delete;
  ~LocalCaSigner() override;

  // kInvalidArgument: "ca_expired" when the CA's notAfter is not after `now`;
  // "csr_subject_common_name" unless the request has exactly one CN;
  // "csr_profile_invalid" for a non-positive validity or a negative backdate.
  Result<Issued> Sign(const Csr& csr, const Profile& profile, int64_t now) override;

  const std::string& ca_pem() const override;

 private:
  struct Impl;
  explicit LocalCaSigner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Creates a cluster CA for lab use: ECDSA P-256, CA:TRUE pathlen 0,
// keyCertSign|cRLSign, self-signed, valid `validity_days`. Production clusters
// import their own CA (rackgatectl ca import). Refuses (kInvalidArgument
// "pki_exists") to overwrite either file; the key is written with mode 0600.
Status GenerateClusterCa(const std::string& common_name, int validity_days,
                         const std::string& cert_path, const std::string& key_path);

// Checks that the files hold a usable cluster CA: the first certificate in
// `cert_pem_path` has basicConstraints CA:TRUE and keyUsage keyCertSign, is
// valid now, and its key is an ECDSA P-256/P-384 or RSA >= 2048 key that
// matches the unencrypted private key in `key_pem_path`. kIoError
// ("file_unreadable"); kInvalidArgument "ca_invalid" (with what is wrong),
// "ca_expired", "ca_key_mismatch", "ca_key_unsupported".
Status ValidateClusterCa(const std::string& cert_pem_path, const std::string& key_pem_path);

// The cluster CA's rotation (docs/operations.md, "Rotating the cluster CA";
// docs/csr.md, "Issued certificates"): the files beside the current CA in its
// directory, and the stage they spell. prepared: next.crt (and next.key)
// wait beside ca.*; switched: ca.* is the new CA and previous.* the old one,
// until retire moves it to retired/<UTC time>/; switching: next.crt and
// previous.crt both there (a switch interrupted between its steps; running
// switch again finishes it; ca.crt is there at every step).
enum class ClusterCaStage { kNone, kPrepared, kSwitching, kSwitched };
std::string_view ClusterCaStageName(ClusterCaStage stage);

// The file names of a cluster CA directory (ca.crt's directory).
struct ClusterCaFiles {
  std::string dir;
  std::string cert, key;                    // the current CA: ca.crt, ca.key
  std::string next_cert, next_key;          // next.crt, next.key
  std::string previous_cert, previous_key;  // previous.crt, previous.key
  std::string retired;                      // retired/
};
ClusterCaFiles ClusterCaFilesIn(const std::string& dir);

// What the files say now.
struct ClusterCaState {
  ClusterCaStage stage = ClusterCaStage::kNone;
  // The PEM bundle relying parties trust now (the API server's and the
  // kubelet's --client-ca-file, the CA file the agent writes for the
  // kubelet): the current CA, then next.crt (prepared) or previous.crt
  // (switched). Certificates as PEM, one after the other.
  std::string bundle_pem;
  int64_t not_after = 0;        // the current CA's
  int64_t other_not_after = 0;  // next's or previous's, 0 when none
  std::string subject;          // the current CA's, one line
  std::string other_subject;    // next's or previous's
  std::string sha256;           // the current CA certificate's DER SHA-256, hex
  std::string other_sha256;     // next's or previous's
};

// Reads the state of the rotation from the files beside `cert_path` (the
// current CA certificate; its siblings are next.crt and previous.crt).
// kIoError file_unreadable when `cert_path` cannot be read; kInvalidArgument
// ca_invalid when it or a sibling holds no certificate. Keys are not read.
Result<ClusterCaState> ReadClusterCaState(const std::string& cert_path);

}  // namespace rackgate::core::csr

#endif  // RACKGATE_CORE_SIGNER_H_
