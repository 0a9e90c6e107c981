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
  // During a rotation (docs/operations.md, "Rotating the cluster CA") the
  // machines get the bundle, old and new CA, as their kubelet's CA file, so
  // a kubelet trusts an API server and clients of either CA.
  auto state = csr::ReadClusterCaState(cert_path_);
  if (!state.ok()) return state.status();
  std::lock_guard<std::mutex> l(mu_);
  signer_ = std::shared_ptr<csr::Signer>(std::move(loaded).value());
  bundle_pem_ = std::move(state->bundle_pem);
  return Status::Ok();
}

std::shared_ptr<csr::Signer> LocalCaIssuer::Current(std::string* bundle_pem) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (signer_) {
      *bundle_pem = bundle_pem_;
      return signer_;
    }
  }
  if (Status s = Reload(); !s.ok()) {
    Log()->error("cluster CA not loaded from {}: {}", cert_path_, s.ToString());
    return nullptr;
  }
  std::lock_guard<std::mutex> l(mu_);
  *bundle_pem = bundle_pem_;
  return signer_;
}

IssueResult LocalCaIssuer::Issue(const IssueRequest& request, int64_t now) {
  std::string bundle_pem;
  auto signer = Current(&bundle_pem);
  if (!signer) return Status::IoError("signer_unavailable", "the cluster CA is not configured");
  auto issued = signer->Sign(request.csr, request.profile, now);
  if (!issued.ok()) {
    Log()->error("signing for {} failed: {}", request.hostname, issued.status().ToString());
    return Status::IoError("signer_unavailable", "the certificate could not be signed");
  }
  issued->ca_pem = std::move(bundle_pem);
  return std::move(issued).value();
}

std::string LocalCaIssuer::ca_pem() {
  std::string bundle_pem;
  auto signer = Current(&bundle_pem);
  return signer ? bundle_pem : std::string();
}

}  // namespace rackgate::core
