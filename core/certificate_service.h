// The kubelet certificates rackgate signed, as the admin API lists them
// (GET /v1/admin/certificates, `rackgatectl certs`; docs/operations.md).
// The admin API calls this; the handler only decodes and encodes.
//
// Thread safety: as the store's; no state of its own.
#ifndef RACKGATE_CORE_CERTIFICATE_SERVICE_H_
#define RACKGATE_CORE_CERTIFICATE_SERVICE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "storage/roles.h"
#include "wire/admin_certificates.h"

namespace rackgate::core {

// The most certificates one list answers.
inline constexpr int64_t kMaxCertificateList = 100000;

class CertificateService {
 public:
  // BORROWED: store outlives the service.
  explicit CertificateService(storage::CsrStore* store);

  // The newest `limit` certificates (clamped to 1 .. kMaxCertificateList),
  // newest first; only `hostname`'s when given. Refusals: the store's only.
  Result<std::vector<wire::CertificateView>> List(const std::optional<std::string>& hostname, int64_t limit);

 private:
  storage::CsrStore* store_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_CERTIFICATE_SERVICE_H_
