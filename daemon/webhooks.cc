// Webhook delivery: secrets, the sending thread, retries and retention.
#include "daemon/webhooks.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <utility>

#include "base/files.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/transfer.h"
#include "core/events.h"
#include "core/webhook_outbox.h"

namespace rackgate::daemon {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("webhooks");
  return log;
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct MultiDeleter {
  void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};
struct EasyDeleter {
  void operator()(CURL* e) const { curl_easy_cleanup(e); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using MultiPtr = std::unique_ptr<CURLM, MultiDeleter>;
using EasyPtr = std::unique_ptr<CURL, EasyDeleter>;
using SlistPtr = std::unique_ptr<curl_slist, SlistDeleter>;

Status BadWebhook(size_t i, const std::string& why) {
  return Status::InvalidArgument("config_invalid", "config key 'webhooks[" + std::to_string(i) + "]': " + why);
}

constexpr char kDeliveriesHelp[] = "Webhook delivery attempts, by result (delivered, failed).";
constexpr char kQueueHelp[] = "Webhook deliveries queued and not yet delivered.";

}  // namespace

Result<std::vector<WebhookEndpoint>> LoadWebhookEndpoints(const std::vector<Config::Webhook>& webhooks) {
  std::vector<WebhookEndpoint> out;
  for (size_t i = 0; i < webhooks.size(); ++i) {
    const Config::Webhook& w = webhooks[i];
    // The file's content never reaches a message: only its name and size.
    auto bytes = ReadFile(w.secret_file, 4096);
    if (!bytes.ok()) {
      return BadWebhook(i, "cannot read secret_file " + w.secret_file + " (" + bytes.status().message() + ")");
    }
    std::string secret(bytes->begin(), bytes->end());
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
    if (secret.size() < core::kMinWebhookSecretBytes) {
      return BadWebhook(i, "secret_file " + w.secret_file + " holds " + std::to_string(secret.size()) +
                               " bytes; at least " + std::to_string(core::kMinWebhookSecretBytes) +
                               " are needed (e.g. `openssl rand -hex 32 > FILE`)");
    }
    if (!w.ca_file.empty()) {
      if (auto ca = ReadFile(w.ca_file, 1 << 20); !ca.ok()) {
        return BadWebhook(i, "cannot read ca_file " + w.ca_file + " (" + ca.status().message() + ")");
      }
    }
    out.push_back({w.url, std::move(secret), w.events, w.ca_file});
  }
  return out;
}

std::string WebhookLogName(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "<webhook>";
  const size_t end = url.find_first_of("/?#", scheme + 3);
  return end == std::string::npos ? url : url.substr(0, end) + "/...";
}

// One delivery on the wire.
struct InFlight {
  EasyPtr easy;
  SlistPtr headers;
  core::OutboundDelivery delivery;
  char error[CURL_ERROR_SIZE] = {};
};

namespace {

// A delivery of `d` to `endpoint`, ready to add to the multi handle: its
// body, signed headers and transfer options. nullptr when curl has no handle.
std::unique_ptr<InFlight> NewDelivery(core::OutboundDelivery d, const WebhookEndpoint& endpoint,
                                      const WebhookDispatcherOptions& options) {
  auto f = std::make_unique<InFlight>();
  f->delivery = std::move(d);
  f->easy.reset(curl_easy_init());
  if (!f->easy) return nullptr;
  const int64_t ts = NowSeconds();
  curl_slist* h = nullptr;
  auto add = [&](const std::string& line) {
    curl_slist* next = curl_slist_append(h, line.c_str());
    if (next != nullptr) h = next;
  };
  add("Content-Type: application/json");
  const core::OutboundDelivery& o = f->delivery;
  add(std::string(core::kHeaderEvent) + ": " + o.event_type);
  add(std::string(core::kHeaderDelivery) + ": " + std::to_string(o.event_id) + "." + std::to_string(o.attempts + 1));
  add(std::string(core::kHeaderTimestamp) + ": " + std::to_string(ts));
  add(std::string(core::kHeaderSignature) + ": " + core::SignatureHeader(endpoint.secret, ts, o.body));
  add("Expect:");  // no 100-continue round trip for a small body
  f->headers.reset(h);
  CURL* e = f->easy.get();
  curl_easy_setopt(e, CURLOPT_URL, o.webhook.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect is a failure, not a new target
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout_ms));
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(options.request_timeout_ms));
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!endpoint.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, endpoint.ca_file.c_str());
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->headers.get());
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, o.body.c_str());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, static_cast<long>(o.body.size()));
  // A receiver's answer is not read: only its status matters. Counting the
  // bytes away keeps a chatty receiver from costing memory.
  (void)transfer::DiscardBody(e);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, f->error);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "rackgated-webhooks");
  return f;
}

}  // namespace

struct WebhookDispatcher::State {
  core::WebhookOutbox* outbox = nullptr;
  Metrics* metrics = nullptr;
  WebhookDispatcherOptions options;
  std::map<std::string, WebhookEndpoint> endpoints;  // by URL
  MultiPtr multi;
  std::atomic<bool> stopping{false};
  std::mt19937_64 rng{std::random_device{}()};
  std::map<CURL*, std::unique_ptr<InFlight>> in_flight;
};

WebhookDispatcher::WebhookDispatcher(std::unique_ptr<State> state) : state_(std::move(state)) {}

Result<std::unique_ptr<WebhookDispatcher>> WebhookDispatcher::Start(core::WebhookOutbox* outbox,
                                                                    std::vector<WebhookEndpoint> endpoints,
                                                                    const WebhookDispatcherOptions& options,
                                                                    Metrics* metrics) {
  // rackgated calls this once, from its main thread, before any other curl
  // user exists in the process.
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    return Status::IoError("webhooks_unavailable", "curl_global_init failed");
  }
  auto state = std::make_unique<State>();
  state->outbox = outbox;
  state->metrics = metrics;
  state->options = options;
  state->options.max_in_flight = std::max(1, options.max_in_flight);
  std::vector<core::WebhookSubscription> subscriptions;
  for (WebhookEndpoint& e : endpoints) {
    subscriptions.push_back({e.url, e.events});
    std::string url = e.url;
    state->endpoints.emplace(std::move(url), std::move(e));
  }
  auto dropped = outbox->Subscribe(subscriptions, NowSeconds());
  if (!dropped.ok()) return dropped.status().Annotate("webhooks");
  if (*dropped > 0) {
    Log()->warn("{} undelivered webhook deliveries dropped with webhooks no longer configured", *dropped);
  }
  state->multi.reset(curl_multi_init());
  if (!state->multi) return Status::IoError("webhooks_unavailable", "curl_multi_init failed");
  curl_multi_setopt(state->multi.get(), CURLMOPT_MAX_TOTAL_CONNECTIONS, static_cast<long>(options.max_in_flight));
  for (const auto& [url, e] : state->endpoints) {
    Log()->info("webhook {}: {}", WebhookLogName(url),
                e.events.empty() ? std::string("every event type") : std::to_string(e.events.size()) + " event types");
  }
  std::unique_ptr<WebhookDispatcher> d(new WebhookDispatcher(std::move(state)));
  d->thread_ = std::thread([p = d.get()] { p->Run(); });
  return d;
}

WebhookDispatcher::~WebhookDispatcher() { Stop(); }

void WebhookDispatcher::Stop() {
  if (!thread_.joinable()) return;
  state_->stopping = true;
  curl_multi_wakeup(state_->multi.get());
  thread_.join();
  for (auto& [easy, f] : state_->in_flight) curl_multi_remove_handle(state_->multi.get(), easy);
  state_->in_flight.clear();
}

int64_t ClaimLeaseSeconds(const WebhookDispatcherOptions& o) {
  return (o.connect_timeout_ms + o.request_timeout_ms) / 1000 + 30;
}

void WebhookDispatcher::FetchDue(bool* store_failing) {
  State& s = *state_;
  const int room = s.options.max_in_flight - static_cast<int>(s.in_flight.size());
  if (room <= 0) return;
  // fleet (docs/ha.md): claimed, not just read, so that two appliances
  // on one database never send the same delivery at once; the lease
  // outlasts one whole exchange.
  auto due = s.outbox->Claim(NowSeconds(), room, ClaimLeaseSeconds(s.options));
  if (!due.ok()) {
    if (!*store_failing) Log()->warn("cannot read the event queue: {}", due.status().ToString());
    *store_failing = true;
    return;
  }
  *store_failing = false;
  std::set<std::pair<int64_t, std::string>> busy;
  for (const auto& [easy, f] : s.in_flight) busy.emplace(f->delivery.event_id, f->delivery.webhook);
  int added = 0;
  for (core::OutboundDelivery& d : *due) {
    if (added >= room) break;
    if (busy.count({d.event_id, d.webhook})) continue;
    auto ep = s.endpoints.find(d.webhook);
    if (ep == s.endpoints.end()) continue;  // Subscribe removed it; cannot happen after Start
    busy.emplace(d.event_id, d.webhook);
    auto f = NewDelivery(std::move(d), ep->second, s.options);
    if (!f) return;
    CURL* e = f->easy.get();
    if (curl_multi_add_handle(s.multi.get(), e) != CURLM_OK) return;
    s.in_flight.emplace(e, std::move(f));
    ++added;
  }
}

bool WebhookDispatcher::ReapFinished() {
  State& s = *state_;
  bool any = false;
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(s.multi.get(), &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    CURL* easy = msg->easy_handle;
    const CURLcode result = msg->data.result;
    auto it = s.in_flight.find(easy);
    curl_multi_remove_handle(s.multi.get(), easy);
    if (it == s.in_flight.end()) continue;
    std::unique_ptr<InFlight> f = std::move(it->second);
    s.in_flight.erase(it);
    any = true;
    long code = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
    const bool delivered = result == CURLE_OK && code >= 200 && code < 300;
    std::string error;
    if (!delivered) {
      error = result != CURLE_OK ? std::string(curl_easy_strerror(result)) + (f->error[0] ? ": " : "") + f->error
                                 : "HTTP " + std::to_string(code);
    }
    const core::OutboundDelivery& d = f->delivery;
    const double jitter = std::uniform_real_distribution<double>(0.0, 1.0)(s.rng);
    auto delay = s.outbox->Record(d, delivered, error, jitter, NowSeconds());
    if (!delay.ok()) {
      // Not recorded: the delivery stays due and is sent again (at least
      // once), which receivers must tolerate anyway.
      Log()->warn("event {}: cannot record the delivery to {}: {}", d.event_id, WebhookLogName(d.webhook),
                  delay.status().ToString());
    }
    if (s.metrics != nullptr) {
      s.metrics->CounterInc("rackgate_webhook_deliveries_total", kDeliveriesHelp,
                            {{"result", delivered ? "delivered" : "failed"}});
    }
    if (delivered) {
      Log()->debug("event {} delivered to {} (HTTP {})", d.event_id, WebhookLogName(d.webhook), code);
    } else {
      Log()->warn("event {} to {}: attempt {} failed ({}), next in {} s", d.event_id, WebhookLogName(d.webhook),
                  d.attempts + 1, error, delay.ok() ? *delay : 0);
    }
  }
  return any;
}

void WebhookDispatcher::PurgeExpired() {
  State& s = *state_;
  auto purged = s.outbox->Purge(NowSeconds() - s.options.retention_seconds, s.options.max_events);
  if (!purged.ok()) {
    Log()->warn("event purge failed: {}", purged.status().ToString());
  } else if (*purged > 0) {
    Log()->info("purged {} events past retention", *purged);
  }
}

void WebhookDispatcher::Run() {
  State& s = *state_;
  using Clock = std::chrono::steady_clock;
  auto next_fetch = Clock::now();
  auto next_gauge = Clock::now();
  int64_t next_purge = NowSeconds();
  bool store_failing = false;
  while (!s.stopping) {
    const auto now = Clock::now();
    if (now >= next_fetch) {
      FetchDue(&store_failing);
      next_fetch = now + std::chrono::milliseconds(s.options.poll_interval_ms);
    }
    int running = 0;
    curl_multi_perform(s.multi.get(), &running);
    if (ReapFinished()) FetchDue(&store_failing);  // a slot freed: fill it without waiting a poll
    if (now >= next_gauge && s.metrics != nullptr) {
      next_gauge = now + std::chrono::seconds(5);
      if (auto depth = s.outbox->Pending(); depth.ok()) {
        s.metrics->GaugeSet("rackgate_webhook_queue_depth", kQueueHelp, {}, static_cast<double>(*depth));
      }
    }
    if (NowSeconds() >= next_purge) {
      next_purge = NowSeconds() + s.options.purge_interval_seconds;
      PurgeExpired();
    }
    const auto until_fetch =
        std::chrono::duration_cast<std::chrono::milliseconds>(next_fetch - Clock::now()).count();
    const int wait_ms = static_cast<int>(std::clamp<int64_t>(until_fetch, 0, s.options.poll_interval_ms));
    curl_multi_poll(s.multi.get(), nullptr, 0, wait_ms, nullptr);
  }
}

}  // namespace rackgate::daemon
