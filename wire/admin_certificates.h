// The admin API's certificate list (GET /v1/admin/certificates;
// docs/operations.md) as a typed value with an encoder and a decoder, for
// rackgated and `rackgatectl certs`. Decoding fails as wire/admin_pools.h
// says.
#ifndef RACKGATE_WIRE_ADMIN_CERTIFICATES_H_
#define RACKGATE_WIRE_ADMIN_CERTIFICATES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::wire {

// A kubelet certificate rackgate signed.
struct CertificateView {
  std::string serial;  // lower-case hex
  std::string hostname;
  std::string kind;  // client or serving
  std::string subject;
  std::vector<std::string> sans;
  std::string public_key_sha256;  // hex
  bool tpm_resident = false;
  int64_t not_before = 0;
  int64_t not_after = 0;
  int64_t issued_at = 0;
  bool operator==(const CertificateView&) const = default;
};

// {"certificates": [...]}.
std::string EncodeCertificateList(const std::vector<CertificateView>& certificates);
Result<std::vector<CertificateView>> DecodeCertificateList(std::string_view body);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_ADMIN_CERTIFICATES_H_
