// Webhook delivery (docs/events.md): a background thread of rackgated that
// POSTs queued events (core/webhook_outbox.h) to the configured URLs
// with libcurl, signs them (core/events.h), records each attempt, retries
// with capped exponential backoff and jitter, and purges old events. It never
// runs on a request thread: a slow or dead receiver delays only its own
// deliveries.
#ifndef RACKGATE_DAEMON_WEBHOOKS_H_
#define RACKGATE_DAEMON_WEBHOOKS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "daemon/config.h"

namespace rackgate {
class Metrics;
namespace core {
class WebhookOutbox;
}
}  // namespace rackgate

namespace rackgate::daemon {

// A configured webhook with its secret loaded.
struct WebhookEndpoint {
  std::string url;
  std::string secret;  // the HMAC key: never logged, never stored
  std::vector<std::string> events;  // empty: every type
  std::string ca_file;
};

// Reads each webhook's secret file (trailing newlines dropped). Refuses, with
// kInvalidArgument "config_invalid" naming the webhook and the file (never
// the content): a missing or unreadable file, one shorter than
// core::kMinWebhookSecretBytes, one over 4 KiB, and a ca_file that cannot be
// read.
Result<std::vector<WebhookEndpoint>> LoadWebhookEndpoints(const std::vector<Config::Webhook>& webhooks);

// The URL with everything after its authority cut: what logs name a webhook
// by, since many webhook URLs carry a token in their path.
std::string WebhookLogName(const std::string& url);

struct WebhookDispatcherOptions {
  int max_in_flight = 8;  // deliveries sent at once, over all webhooks
  int connect_timeout_ms = 5000;
  int request_timeout_ms = 10000;  // the whole exchange
  int poll_interval_ms = 1000;     // how often the queue is read
  int64_t retention_seconds = 14 * 86400;  // events older than this are purged
  int64_t max_events = 100000;             // and only the newest this many kept
  int purge_interval_seconds = 3600;
};

// fleet: how long a claimed delivery stays this dispatcher's
// (core::WebhookOutbox::Claim): one whole exchange and a margin. A
// dispatcher that dies mid-send leaves it to another after this.
int64_t ClaimLeaseSeconds(const WebhookDispatcherOptions& options);

class WebhookDispatcher {
 public:
  // Subscribes the outbox's webhooks to `endpoints` (logging the undelivered
  // deliveries a removed webhook drops; the retry schedule is the outbox's)
  // and starts the thread. Runs with no endpoints too: events are still
  // purged and counted.
  // BORROWED: outbox and metrics outlive the dispatcher.
  static Result<std::unique_ptr<WebhookDispatcher>> Start(core::WebhookOutbox* outbox,
                                                          std::vector<WebhookEndpoint> endpoints,
                                                          const WebhookDispatcherOptions& options, Metrics* metrics);

  // Stops the thread (Stop()).
  ~WebhookDispatcher();
  WebhookDispatcher(const WebhookDispatcher&) = delete;
  WebhookDispatcher& operator=(const WebhookDispatcher&) = delete;

  // Stops sending and joins the thread within about a poll interval.
  // Deliveries in flight are abandoned unrecorded: they are still queued and
  // are sent again after a restart (at least once, never lost).
  void Stop();

 private:
  struct State;
  explicit WebhookDispatcher(std::unique_ptr<State> state);
  // The dispatcher thread: fetches, sends, records and purges until Stop.
  void Run();
  // Claims due deliveries while there is room in flight and starts them;
  // *store_failing keeps a failing store to one log line.
  void FetchDue(bool* store_failing);
  // Records the finished transfers (delivered, or failed with the next
  // attempt's time); returns whether any finished.
  bool ReapFinished();
  // Drops events past retention, or over the maximum count.
  void PurgeExpired();

  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_WEBHOOKS_H_
