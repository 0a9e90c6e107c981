// Boot policies and TOFU values, parsed once per stored text.
#include "core/policy_cache.h"

#include "core/secrets.h"
#include "wire/boot_policy_json.h"

namespace rackgate::core {

Result<std::shared_ptr<const attest::BootPolicy>> PolicyCache::Policy(const std::string& text) {
  if (text.empty() || text == "null" || text == "{}") return std::shared_ptr<const attest::BootPolicy>();
  const std::string key = Sha256Hex(text);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = policies_.find(key); it != policies_.end()) return it->second;
  }
  auto parsed = wire::ParseBootPolicy(text);
  if (!parsed.ok()) return parsed.status();
  auto policy = std::make_shared<const attest::BootPolicy>(std::move(parsed).value());
  std::lock_guard<std::mutex> l(mu_);
  if (policies_.size() >= kMaxEntries) policies_.clear();
  policies_[key] = policy;
  return policy;
}

std::shared_ptr<const attest::PcrValues> PolicyCache::TofuValues(const std::string& text) {
  if (text.empty()) return nullptr;
  const std::string key = Sha256Hex(text);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = tofu_.find(key); it != tofu_.end()) return it->second;
  }
  auto parsed = wire::ParsePcrValuesJson(text);
  if (!parsed.ok()) return nullptr;
  auto values = std::make_shared<const attest::PcrValues>(std::move(parsed).value());
  std::lock_guard<std::mutex> l(mu_);
  if (tofu_.size() >= kMaxEntries) tofu_.clear();
  tofu_[key] = values;
  return values;
}

}  // namespace rackgate::core
