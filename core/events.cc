// Webhook events: body, signature and retry schedule (docs/events.md).
#include "core/events.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "base/hex.h"

namespace rackgate::core {

using nlohmann::json;

bool IsEventType(std::string_view type) {
  return std::find(std::begin(kEventTypes), std::end(kEventTypes), type) != std::end(kEventTypes);
}

namespace {

json Detail(const storage::Event& event) {
  json detail = json::parse(event.detail_json, nullptr, false);
  if (!detail.is_object()) detail = json::object();
  if (!event.actor.empty() && !detail.contains("actor")) detail["actor"] = event.actor;
  if (!event.why.empty() && !detail.contains("why")) detail["why"] = event.why;
  return detail;
}

}  // namespace

std::string EventDetailJson(const storage::Event& event) {
  return Detail(event).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string EventBody(const storage::Event& event) {
  json detail = Detail(event);
  json body = {{"id", event.id},
               {"type", event.type},
               {"at", event.at},
               {"machine", {{"hostname", event.hostname}, {"pool", event.pool}}},
               {"detail", std::move(detail)}};
  // Invalid UTF-8 in a stored text (it never should be) is replaced, not
  // thrown: a delivery must not die on one bad byte.
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string HmacSha256Hex(std::string_view key, std::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return hex::Encode(std::span<const uint8_t>(mac, len));
}

std::string SignatureHeader(std::string_view secret, int64_t timestamp, std::string_view body) {
  std::string message = std::to_string(timestamp);
  message.push_back('.');
  message.append(body);
  return "sha256=" + HmacSha256Hex(secret, message);
}

bool VerifySignature(std::string_view secret, int64_t timestamp, std::string_view body, std::string_view header) {
  const std::string want = SignatureHeader(secret, timestamp, body);
  // Constant time: a receiver that compared with memcmp would tell an
  // attacker how many leading characters of a forged signature are right.
  return header.size() == want.size() && CRYPTO_memcmp(header.data(), want.data(), want.size()) == 0;
}

int64_t RetryDelaySeconds(int64_t attempts, double jitter, int64_t base, int64_t cap) {
  base = std::max<int64_t>(base, 1);
  cap = std::max(cap, base);
  int64_t delay = base;
  for (int64_t i = 1; i < attempts && delay < cap; ++i) delay *= 2;
  delay = std::min(delay, cap);
  jitter = std::clamp(jitter, 0.0, 1.0);
  const int64_t half = delay / 2;
  return std::max<int64_t>(1, delay - static_cast<int64_t>(static_cast<double>(half) * jitter));
}

}  // namespace rackgate::core
