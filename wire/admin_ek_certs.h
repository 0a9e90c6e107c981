// The admin API's EK certificate bodies (docs/operations.md, "EK
// certificates a TPM does not hold"): POST /v1/admin/ek-certs (an operator's
// certificate, verified and put on record for the machine with its EK) and
// GET /v1/admin/ek-certs/missing (what lacks one: machines enrolled by EK
// public without a certificate, and unknown EKs that sent none). rackgated
// and rackgatectl both go through these; decoding fails as
// wire/admin_pools.h says.
#ifndef RACKGATE_WIRE_ADMIN_EK_CERTS_H_
#define RACKGATE_WIRE_ADMIN_EK_CERTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::wire {

// An imported certificate: its DER (base64), and where the operator had it
// from ("ek.json": a file name; for the audit row, never interpreted).
struct EkCertImportRequest {
  std::string certificate_base64;
  std::string source;
  bool operator==(const EkCertImportRequest&) const = default;
};

// What an import did: outcome "stored" (now on record) or "unchanged" (the
// machine already had exactly this certificate).
struct EkCertImportAnswer {
  std::string outcome;
  std::string hostname;
  std::string ek_hash;  // hex
  std::string issuer;   // RFC 2253, escaped
  std::string anchor;   // the SHA-256 of the anchor its path ended at ("" when unknown)
  std::vector<std::string> relaxations;  // the anchor's relaxations it needed
  std::string summary;                   // one line for the operator
  bool operator==(const EkCertImportAnswer&) const = default;
};

// One EK without a certificate on record.
struct EkCertMissingView {
  std::string hostname;  // "" for an EK no machine has
  std::string state;     // the machine's state; "" for an unknown EK
  std::string ek_hash;   // hex
  std::string ek_public_base64;  // TPM2B_PUBLIC; "" when the appliance does not have it
  std::string reason;    // an unknown EK's latest refusal; "" for a machine
  int64_t last_seen = 0;  // an unknown EK's; 0 for a machine
  std::string address;    // an unknown EK's latest caller
  bool operator==(const EkCertMissingView&) const = default;
};

struct EkCertMissingList {
  bool require_ek_certificate = true;  // the appliance refuses these (ek_cert_missing)
  std::vector<EkCertMissingView> missing;
  bool operator==(const EkCertMissingList&) const = default;
};

std::string EncodeEkCertImportRequest(const EkCertImportRequest& r);
// field_missing when there is no certificate.
Result<EkCertImportRequest> DecodeEkCertImportRequest(std::string_view body);
std::string EncodeEkCertImportAnswer(const EkCertImportAnswer& a);
Result<EkCertImportAnswer> DecodeEkCertImportAnswer(std::string_view body);
std::string EncodeEkCertMissingList(const EkCertMissingList& l);
Result<EkCertMissingList> DecodeEkCertMissingList(std::string_view body);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_ADMIN_EK_CERTS_H_
