// The boot storm's lab PKI and fleet: a lab EK manufacturer CA (root and
// intermediate) whose EK certificates pass rackgated's EK checks
// (attest/ek_cert.h), simulated machines with software TPM keys
// (attest/testing/soft_tpm.h), their kubelet client CSRs, and the OpenSSL
// reference operations the benchmark's ceiling is measured with. Benchmark
// support only; none of it is linked into the product.
#ifndef RACKGATE_BENCH_STORM_PKI_H_
#define RACKGATE_BENCH_STORM_PKI_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/ossl.h"
#include "attest/testing/soft_tpm.h"

namespace rackgate::bench {

using attest::Bytes;

// A CA: its certificate and key.
struct LabCa {
  ossl::X509Ptr cert;
  ossl::PkeyPtr key;
  std::string cert_pem() const;
  std::string key_pem() const;
};

// The lab EK manufacturer: an RSA-2048 root (CA:TRUE) and an RSA-2048
// intermediate (CA:TRUE, pathlen 0) that signs the EK certificates, as
// swtpm_localca and most TPM vendors do.
struct EkManufacturer {
  LabCa root;
  LabCa intermediate;
  static EkManufacturer Create(const std::string& name);
  // Loads one written by Write from DIR (root.pem, root.key,
  // intermediate.pem, intermediate.key); false when DIR has none.
  static bool Load(const std::string& dir, EkManufacturer* out);
  void Write(const std::string& dir) const;

  // A TCG EK Credential Profile certificate for `ek`: empty subject, a
  // critical SubjectAltName directoryName with the TPM manufacturer, model
  // and version (2.23.133.2.1/2/3), EKU tcg-kp-EKCertificate
  // (2.23.133.8.1), keyUsage keyEncipherment (RSA) or keyAgreement (ECC),
  // basicConstraints CA:FALSE, AKI; SHA-256 by the intermediate. DER.
  Bytes IssueEkCertificate(EVP_PKEY* ek, uint64_t serial) const;
};

// RSA-2048 key pairs made quickly for a large fleet: a pool of 1024-bit
// primes (top two bits set, p mod 65537 != 1), and every pair of distinct
// primes is a valid RSA-2048 key with e = 65537. Keys of one pool share
// factors: test material only, never keys anyone should trust.
class RsaKeyFactory {
 public:
  // Enough primes for `keys` distinct moduli, generated on `threads` threads.
  RsaKeyFactory(size_t keys, int threads);
  size_t capacity() const;
  // The i-th key (i < capacity()); a new EVP_PKEY owned by the caller.
  EVP_PKEY* Key(size_t i) const;

 private:
  std::vector<ossl::BnPtr> primes_;
};

// The kind of EK and AK the fleet's TPMs have.
struct FleetSpec {
  uint16_t ek_type = attest::kAlgRsa;  // kAlgRsa or kAlgEcc
  uint16_t ek_curve = attest::kEccNistP256;
  uint16_t ak_type = attest::kAlgEcc;  // AK: ECC P-256 ECDSA or RSA-2048 RSASSA
  // RSA keys from the factory: machine i's EK is key i, its RSA AK key
  // rsa_ak_offset + i.
  size_t rsa_ak_offset = 0;
};

// One simulated machine: its TPM's EK and AK (software keys holding exactly
// the public areas a TPM would), its EK certificate, and the kubelet client
// CSR (ECDSA P-256 software key, O=system:nodes, CN=system:node:<hostname>)
// made before the storm, as kubelet would have it ready.
struct SimMachine {
  std::string hostname;
  testing::SoftKey ek;
  testing::SoftKey ak;
  Bytes ak_name;
  Bytes ak_qualified_name;  // TPMS_ATTEST.qualifiedSigner of its quotes
  Bytes ek_cert_der;
  std::string csr_pem;
  std::string challenge_body;  // POST /v1/attest/challenge, JSON
};

// Makes machines [first, first + count) of a fleet; `rsa` serves the RSA keys.
std::vector<SimMachine> MakeMachines(const FleetSpec& spec, const EkManufacturer& mfr,
                                     const RsaKeyFactory* rsa, const std::string& host_prefix,
                                     size_t first, size_t count);

// A kubelet client CSR for `hostname`, PEM (a fresh P-256 key).
std::string KubeletClientCsr(const std::string& hostname);

// The appliance's own cryptographic work per machine, with OpenSSL alone:
// the EK encryption of MakeCredential (RSA-2048 OAEP-SHA256 encrypt of a
// seed, or an ephemeral ECDH for an ECC EK), the quote signature check
// (ECDSA P-256 / RSASSA-2048 verify, SHA-256), the CSR's self-signature check
// (ECDSA P-256) and the certificate signature by the cluster CA's key.
//
// With a serving key, also one TLS 1.3 server handshake's own public-key
// work: an X25519 key share made and its shared secret derived, and the
// CertificateVerify signature with the serving key (what rackgated's
// priorities choose with an OpenSSL or libcurl client).
struct CryptoCeiling {
  double ek_encrypt_per_s = 0;
  double quote_verify_per_s = 0;
  double csr_verify_per_s = 0;
  double cert_sign_per_s = 0;
  double tls_kex_per_s = 0;   // 0: not measured (no serving key)
  double tls_sign_per_s = 0;
  std::string ek_op, quote_op, csr_op, sign_op, tls_sign_op;
  // Seconds of one core per machine: the sum of 1/rate of EK encryption,
  // quote check and certificate signature (the two-core ceiling's terms).
  double seconds_per_machine() const;
  // What any appliance must compute for one machine (issue 18's "essential
  // cryptography"): the above, the CSR's self-signature check and one TLS
  // server handshake's public-key work.
  double essential_seconds_per_machine() const;
  // The best of each rate of this and `other`.
  void KeepBest(const CryptoCeiling& other);
};
// Measures each operation in interleaved rounds of about `round_seconds`;
// the best round of each counts. `machine` supplies EK and AK; `ca_key` is the
// cluster CA key (PEM file); `serving_key`, when not empty, the appliance's
// HTTPS key (PEM file).
CryptoCeiling MeasureCeiling(const SimMachine& machine, const std::string& ca_key_path, int rounds,
                             double round_seconds, const std::string& serving_key_path = "");

}  // namespace rackgate::bench

#endif  // RACKGATE_BENCH_STORM_PKI_H_
