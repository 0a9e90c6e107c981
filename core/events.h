// Webhook events (docs/events.md): the event types, the JSON body a webhook
// receives, its HMAC-SHA256 signature, and the retry schedule. No HTTP here:
// daemon/webhooks.cc sends what this file forms.
#ifndef RACKGATE_CORE_EVENTS_H_
#define RACKGATE_CORE_EVENTS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "storage/types.h"

namespace rackgate::core {

// The event types on the wire, as the events table stores them.
inline constexpr std::string_view kEventTypes[] = {
    "attestation_failed",      "machine_untrusted",     "machine_trusted",        "machine_revoked",
    "certificate_issued",      "certificate_renewed",   "csr_waiting",            "anonymous_refusals",
    "kubernetes_csr_approved", "kubernetes_csr_denied", "kubernetes_csr_waiting",
};
bool IsEventType(std::string_view type);

// The HTTP headers of a delivery (docs/events.md, "Verifying a delivery").
inline constexpr char kHeaderEvent[] = "X-Rackgate-Event";          // the type
inline constexpr char kHeaderDelivery[] = "X-Rackgate-Delivery";    // "<event id>.<attempt>"
inline constexpr char kHeaderTimestamp[] = "X-Rackgate-Timestamp";  // unix seconds, when sent
inline constexpr char kHeaderSignature[] = "X-Rackgate-Signature";  // "sha256=<hex>"

// A webhook secret shorter than this is refused at start: 32 bytes is the
// SHA-256 block's half, the length RFC 2104 recommends at least (the hash's
// output length).
inline constexpr size_t kMinWebhookSecretBytes = 32;

// The body POSTed for `event`: {"id", "type", "at", "machine": {"hostname",
// "pool"}, "detail": {...}}. detail is the stored detail object plus "actor"
// and, when set, "why" (the operator's reason). Never a secret: the stored
// detail never holds one (storage/store.h). A stored detail that is not a
// JSON object becomes {}.
std::string EventBody(const storage::Event& event);
// The body's "detail" alone, as compact JSON text.
std::string EventDetailJson(const storage::Event& event);

// Lower-case hex of HMAC-SHA256(key, message).
std::string HmacSha256Hex(std::string_view key, std::string_view message);

// The X-Rackgate-Signature value: "sha256=" + hex HMAC-SHA256 over
// "<timestamp>.<body>" with the webhook's secret. Signing the timestamp with
// the body lets a receiver refuse a replayed delivery by its age.
std::string SignatureHeader(std::string_view secret, int64_t timestamp, std::string_view body);

// Whether `header` is SignatureHeader(secret, timestamp, body), compared in
// constant time.
bool VerifySignature(std::string_view secret, int64_t timestamp, std::string_view body, std::string_view header);

// The retry schedule: the delay before attempt `attempts + 1` after
// `attempts` (>= 1) failed ones. Exponential from `base` seconds, doubled per
// failure, capped at `cap`; `jitter` in [0, 1) spreads it over
// [delay/2, delay] so that webhooks failing together do not retry together.
int64_t RetryDelaySeconds(int64_t attempts, double jitter, int64_t base = 5, int64_t cap = 3600);

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_EVENTS_H_
