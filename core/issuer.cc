// The local cluster CA as an Issuer: loads the CA files lazily and again on
// Reload, and signs at once.
#include "core/issuer.h"

#include <utility>

#include "base/log.h"

namespace rackgate::core {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("csr");
  return log;
}

}  // namespace

LocalCaIssuer::LocalCaIssuer(std::string cert_path, std::string key_path)
    : cert_path_(std::move(cert_path)), key_path_(std::move(key_path)) {}

Status LocalCaIssuer::Reload() {
  auto loaded = csr::LocalCaSigner::Load(cert_path_, key_path_);
  if (!loaded.ok()) return loaded.status();
  std::lock_guard<std::mutex> l(mu_);
  signer_ = std::shared_ptr<csr::Signer>(std::move(loaded).value());
  return Status::Ok();
}

std::shared_ptr<csr::Signer> LocalCaIssuer::Current() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (signer_) return signer_;
  }
  if (Status s = Reload(); !s.ok()) {
    Log()->error("cluster CA not loaded from {}: {}", cert_path_, s.ToString());
    return nullptr;
  }
  std::lock_guard<std::mutex> l(mu_);
  return signer_;
}

IssueResult LocalCaIssuer::Issue(const IssueRequest& request, int64_t now) {
  auto signer = Current();
  if (!signer) return Status::IoError("signer_unavailable", "the cluster CA is not configured");
  auto issued = signer->Sign(request.csr, request.profile, now);
  if (!issued.ok()) {
    Log()->error("signing for {} failed: {}", request.hostname, issued.status().ToString());
    return Status::IoError("signer_unavailable", "the certificate could not be signed");
  }
  return std::move(issued).value();
}

std::string LocalCaIssuer::ca_pem() {
  auto signer = Current();
  return signer ? signer->ca_pem() : std::string();
}

}  // namespace rackgate::core
