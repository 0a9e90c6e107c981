// The admin API's certificate list.
#include "core/certificate_service.h"

#include <algorithm>

#include "base/hex.h"

namespace rackgate::core {

CertificateService::CertificateService(storage::CsrStore* store) : store_(store) {}

Result<std::vector<wire::CertificateView>> CertificateService::List(const std::optional<std::string>& hostname,
                                                                    int64_t limit) {
  auto certs = store_->ListCertificates(hostname.value_or(""),
                                        static_cast<int>(std::clamp<int64_t>(limit, 1, kMaxCertificateList)));
  if (!certs.ok()) return certs.status();
  std::vector<wire::CertificateView> out;
  out.reserve(certs->size());
  for (const storage::IssuedCertificate& c : *certs) {
    out.push_back({c.serial, c.hostname, c.kind, c.subject, c.sans, hex::Encode(c.public_key_sha256), c.tpm_resident,
                   c.not_before, c.not_after, c.issued_at});
  }
  return out;
}

}  // namespace rackgate::core
