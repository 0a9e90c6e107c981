// A pool's settings JSON, read in one place.
#include "core/pool_settings.h"

#include <nlohmann/json.hpp>

#include "wire/protocol.h"

namespace rackgate::core {

using nlohmann::json;

namespace {

// "csr_approval": {"client": "manual"|"auto", "serving": ..., "renewal": ...}
Status ParseCsrApproval(const json& v, PoolSettings* s) {
  if (!v.is_object()) return Status::InvalidArgument("settings_invalid", "csr_approval is an object");
  for (const auto& [kind, mode] : v.items()) {
    bool* manual = kind == "client"    ? &s->client_csr_manual
                   : kind == "serving" ? &s->serving_csr_manual
                   : kind == "renewal" ? &s->renewal_csr_manual
                                       : nullptr;
    if (manual == nullptr) {
      return Status::InvalidArgument("settings_invalid", "csr_approval has client, serving and renewal; not '" +
                                                             kind + "'");
    }
    if (!mode.is_string() || (mode != "manual" && mode != "auto")) {
      return Status::InvalidArgument("settings_invalid", "csr_approval." + kind + " is \"manual\" or \"auto\"");
    }
    *manual = mode == "manual";
  }
  return Status::Ok();
}

}  // namespace

Result<PoolSettings> ParsePoolSettings(const std::string& settings_json) {
  const json j = json::parse(settings_json, nullptr, false);
  if (!j.is_object()) return Status::InvalidArgument("settings_invalid", "pool settings must be a JSON object");
  PoolSettings s;
  for (const auto& [k, v] : j.items()) {
    if (k == "require_tpm_key") {
      if (!v.is_boolean()) return Status::InvalidArgument("settings_invalid", "require_tpm_key is true or false");
      s.require_tpm_key = v.get<bool>();
    } else if (k == "client_csr_window_seconds") {
      if (!v.is_number_integer() || v.get<int64_t>() < 60 || v.get<int64_t>() > 30 * 86400) {
        return Status::InvalidArgument("settings_invalid", "client_csr_window_seconds is 60 s to 30 days");
      }
      s.client_window_seconds = v.get<int64_t>();
    } else if (k == "csr_approval") {
      if (Status st = ParseCsrApproval(v, &s); !st.ok()) return st;
    } else if (k == "renew_fraction") {
      // renew: 1 opens renewal at once; 0 would never open it before expiry.
      if (!v.is_number() || !(v.get<double>() > 0.0 && v.get<double>() <= 1.0)) {
        return Status::InvalidArgument("settings_invalid", "renew_fraction is a number in (0, 1]");
      }
      s.renew_fraction = v.get<double>();
    } else if (k == "max_attestation_age_seconds") {
      // Trust (docs/trust.md): a minute to a year.
      if (!v.is_number_integer() || v.get<int64_t>() < 60 || v.get<int64_t>() > 366 * 86400) {
        return Status::InvalidArgument("settings_invalid", "max_attestation_age_seconds is 60 s to 366 days");
      }
      s.max_attestation_age_seconds = v.get<int64_t>();
    } else if (k == "kubelet_certificates") {
      if (!v.is_string() || (v != "signer" && v != "approver")) {
        return Status::InvalidArgument("settings_invalid", "kubelet_certificates is \"signer\" or \"approver\"");
      }
      s.approver_mode = v == "approver";
    } else if (k == "apiserver") {
      // The agent's own check (wire::ValidApiserverUrl): a URL it would
      // refuse in the record is refused here, where the operator sees why.
      if (!v.is_string() || !wire::ValidApiserverUrl(v.get_ref<const std::string&>())) {
        return Status::InvalidArgument("settings_invalid",
                                       "apiserver is \"https://HOST[:PORT]\" (no spaces, quotes or backslashes)");
      }
      s.apiserver = v.get<std::string>();
    } else {
      return Status::InvalidArgument("settings_invalid", "unknown pool setting '" + k + "'");
    }
  }
  return s;
}

Result<std::shared_ptr<const PoolCache::Entry>> PoolCache::Get(const std::string& pool, int64_t now) {
  const auto at = std::chrono::steady_clock::now();
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(pool);
    if (it != entries_.end() && it->second->loaded_at + kTtl > at) return it->second;
    generation = generation_;
  }
  auto loaded = store_->GetPoolWithTokens(pool, now);
  if (!loaded.ok()) return loaded.status();
  auto entry = std::make_shared<Entry>();
  entry->pool = std::move(loaded->first);
  entry->tokens = std::move(loaded->second);
  entry->loaded_at = at;
  std::lock_guard<std::mutex> l(mu_);
  if (generation == generation_) entries_[pool] = entry;
  return std::shared_ptr<const Entry>(entry);
}

void PoolCache::Invalidate(const std::string& pool) {
  std::lock_guard<std::mutex> l(mu_);
  entries_.erase(pool);
  ++generation_;
}

void PoolCache::InvalidateAll() {
  std::lock_guard<std::mutex> l(mu_);
  entries_.clear();
  ++generation_;
}

}  // namespace rackgate::core
