// The appliance's own PKI: the appliance CA (the trust anchor a pointer config
// carries) and the HTTPS serving certificate it issues, as PEM files in the
// state directory. Keys are written with mode 0600.
#ifndef RACKGATE_CORE_PKI_H_
#define RACKGATE_CORE_PKI_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace rackgate::core {

struct CaOptions {
  std::string common_name = "rackgate appliance CA";
  int validity_days = 3650;  // ten years
};

struct ServingCertOptions {
  std::vector<std::string> dns_names;     // SAN dNSName entries
  std::vector<std::string> ip_addresses;  // SAN iPAddress entries (v4 or v6 literals)
  int validity_days = 825;
};

// Creates an ECDSA P-256 CA (basicConstraints CA:TRUE pathlen 0, critical;
// keyUsage keyCertSign|cRLSign) and writes cert_path and key_path. Refuses
// (kInvalidArgument "pki_exists") to overwrite either file.
Status CreateCa(const CaOptions& options, const std::string& cert_path, const std::string& key_path);

// Issues a serving certificate (ECDSA P-256, EKU serverAuth, the given SANs,
// backdated five minutes for clock skew) signed by the CA at ca_cert_path /
// ca_key_path, and writes the chain (leaf then CA) to cert_path and the key to
// key_path, replacing them atomically. kInvalidArgument ("pki_invalid") for an
// empty SAN list or a bad IP literal; kIoError for unreadable or unwritable files.
Status IssueServingCertificate(const ServingCertOptions& options, const std::string& ca_cert_path,
                               const std::string& ca_key_path, const std::string& cert_path,
                               const std::string& key_path);

// The subjectAltName DNS names and IP addresses (as text) of the first
// certificate in a PEM file, in the certificate's order: what renewing the
// serving certificate keeps when not told other names. kIoError
// (file_unreadable); kInvalidArgument (pki_invalid) for no certificate or
// one without a DNS or IP SAN.
Result<ServingCertOptions> ReadServingCertNames(const std::string& pem_path);

// The SHA-256 fingerprint (lower-case hex) of the first certificate in a PEM file.
Result<std::string> CertificateFingerprint(const std::string& pem_path);

// A CA certificate as the rotation shows it (docs/operations.md, "Rotating
// the appliance CA"): the first certificate of a PEM file, re-encoded.
struct CaCertInfo {
  std::string pem;       // that certificate alone, PEM
  std::string sha256;    // its fingerprint, lower-case hex
  std::string subject;   // one line, RFC 2253
  int64_t not_after = 0; // unix seconds
};
// kIoError (file_unreadable); kInvalidArgument (pki_invalid) for no
// certificate or one that is no CA (basicConstraints CA:TRUE).
Result<CaCertInfo> ReadCaCertificate(const std::string& pem_path);

// Whether the key at key_path is the certificate's at cert_path: Ok, or
// pki_invalid (kInvalidArgument) naming both files; kIoError when unreadable.
Status CheckCaKeyPair(const std::string& cert_path, const std::string& key_path);

// Whether the first certificate of cert_path carries a signature of the
// first certificate's key in ca_path (the serving certificate is under that
// CA). kIoError or pki_invalid when either cannot be read.
Result<bool> SignedBy(const std::string& cert_path, const std::string& ca_path);

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_PKI_H_
