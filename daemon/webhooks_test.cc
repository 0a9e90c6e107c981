// Tests of webhook delivery against a receiver on loopback: secrets refused
// at start, a 500 retried after its backoff, the signature a receiver checks,
// a dead receiver, the metrics.
#include "daemon/webhooks.h"

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/metrics.h"
#include "core/events.h"
#include "core/webhook_outbox.h"
#include "storage/store.h"
#include "storage/testing/test_store.h"

namespace rackgate::daemon {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kSecret = "0123456789abcdef0123456789abcdef-webhooks-test";

// A receiver on 127.0.0.1: answers the first `fail_first` requests with 500,
// the rest with 200, and keeps every request.
class Receiver {
 public:
  struct Hit {
    std::chrono::steady_clock::time_point at;
    std::string body;
    std::string event, delivery, timestamp, signature;
  };

  explicit Receiver(int fail_first) : fail_first_(fail_first) {
    daemon_ = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, nullptr, nullptr,
                               &Receiver::Handle, this, MHD_OPTION_SOCK_ADDR, Loopback(), MHD_OPTION_END);
    if (daemon_ != nullptr) port_ = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT)->port;
  }
  ~Receiver() {
    if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
  }
  uint16_t port() const { return port_; }

  // Waits until `n` requests arrived or `timeout` passed.
  std::vector<Hit> WaitFor(size_t n, std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return hits_.size() >= n; });
    return hits_;
  }

 private:
  static sockaddr* Loopback() {
    static sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    return reinterpret_cast<sockaddr*>(&a);
  }

  static MHD_Result Handle(void* self, MHD_Connection* c, const char*, const char*, const char*,
                           const char* data, size_t* size, void** ctx) {
    auto* r = static_cast<Receiver*>(self);
    if (*ctx == nullptr) {
      *ctx = new std::string();
      return MHD_YES;
    }
    auto* body = static_cast<std::string*>(*ctx);
    if (*size > 0) {
      body->append(data, *size);
      *size = 0;
      return MHD_YES;
    }
    auto header = [&](const char* name) {
      const char* v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
      return std::string(v ? v : "");
    };
    int status = 200;
    {
      std::lock_guard<std::mutex> lock(r->mu_);
      r->hits_.push_back({std::chrono::steady_clock::now(), *body, header(core::kHeaderEvent),
                          header(core::kHeaderDelivery), header(core::kHeaderTimestamp),
                          header(core::kHeaderSignature)});
      if (static_cast<int>(r->hits_.size()) <= r->fail_first_) status = 500;
    }
    r->cv_.notify_all();
    delete body;
    *ctx = nullptr;
    MHD_Response* resp = MHD_create_response_from_buffer(0, nullptr, MHD_RESPMEM_PERSISTENT);
    MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
  }

  const int fail_first_;
  MHD_Daemon* daemon_ = nullptr;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Hit> hits_;
};

class WebhooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = storage::testing::BackendUnavailable()) GTEST_SKIP() << *why;
    char tmpl[] = "/tmp/webhooks_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto s = storage::testing::OpenTestStore(dir_ + "/db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    // Fast retries: one second, then two.
    outbox_ = std::make_unique<core::WebhookOutbox>(store_.get(), core::RetrySchedule{1, 2});
    ASSERT_TRUE(store_->PutPool(storage::Pool{"workers"}, op_, 1).ok());
    storage::Enrollment e;
    e.hostname = "node-1";
    e.pool = "workers";
    e.ek_public = {1, 2, 3};
    e.ek_hash = {4, 5, 6};
    auto m = store_->Enroll(e, op_, false, 1);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    machine_id_ = m->id;
    secret_file_ = dir_ + "/secret";
    std::ofstream(secret_file_) << kSecret << "\n";
  }
  void TearDown() override {
    outbox_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }

  WebhookEndpoint Endpoint(uint16_t port) {
    auto eps = LoadWebhookEndpoints({{"http://127.0.0.1:" + std::to_string(port) + "/hook", secret_file_, {}, ""}});
    EXPECT_TRUE(eps.ok()) << eps.status().ToString();
    return eps.ok() ? eps->front() : WebhookEndpoint{};
  }

  static WebhookDispatcherOptions Fast() {
    WebhookDispatcherOptions o;
    o.poll_interval_ms = 100;
    o.connect_timeout_ms = 1000;
    o.request_timeout_ms = 2000;
    return o;
  }

  int64_t Now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  std::string dir_, secret_file_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<core::WebhookOutbox> outbox_;
  storage::Actor op_{"uid:0(root)", "test"};
  int64_t machine_id_ = 0;
};

TEST_F(WebhooksTest, SecretFilesAreCheckedAtStart) {
  EXPECT_TRUE(LoadWebhookEndpoints({{"https://a/", secret_file_, {}, ""}}).ok());
  auto missing = LoadWebhookEndpoints({{"https://a/", dir_ + "/nope", {}, ""}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().reason(), "config_invalid");
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  std::ofstream(dir_ + "/short") << "0123456789abcdef0123456789abcde\n";  // 31 bytes
  auto short_secret = LoadWebhookEndpoints({{"https://a/", dir_ + "/short", {}, ""}});
  ASSERT_FALSE(short_secret.ok());
  EXPECT_EQ(short_secret.status().message().find("0123456789"), std::string::npos) << "never the secret";
  auto no_ca = LoadWebhookEndpoints({{"https://a/", secret_file_, {}, dir_ + "/no-ca.pem"}});
  EXPECT_FALSE(no_ca.ok());
  EXPECT_EQ(WebhookLogName("https://hooks.example/T0K3N/x?y=1"), "https://hooks.example/...");
}

TEST_F(WebhooksTest, A500IsRetriedAfterItsBackoffThenDelivered) {
  Receiver receiver(/*fail_first=*/1);
  ASSERT_NE(receiver.port(), 0);
  Metrics metrics;
  auto d = WebhookDispatcher::Start(outbox_.get(), {Endpoint(receiver.port())}, Fast(), &metrics);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(store_->AuditMachineEvent(machine_id_, "untrusted", R"({"reason":"pcr_changed"})", op_, Now()).ok());

  auto hits = receiver.WaitFor(2, std::chrono::seconds(15));
  ASSERT_EQ(hits.size(), 2u);
  // The retry waited out its backoff: at least one second (whole seconds,
  // the clock the queue keeps) after the first attempt.
  EXPECT_GT(std::stoll(hits[1].timestamp), std::stoll(hits[0].timestamp));
  for (const auto& h : hits) {
    EXPECT_EQ(h.event, "machine_untrusted");
    EXPECT_TRUE(core::VerifySignature(kSecret, std::stoll(h.timestamp), h.body, h.signature)) << h.signature;
    json body = json::parse(h.body);
    EXPECT_EQ(body.at("type"), "machine_untrusted");
    EXPECT_EQ(body.at("machine").at("hostname"), "node-1");
    EXPECT_EQ(body.at("machine").at("pool"), "workers");
    EXPECT_EQ(body.at("detail").at("reason"), "pcr_changed");
  }
  EXPECT_EQ(hits[0].body, hits[1].body) << "the same event, again";
  EXPECT_EQ(hits[0].delivery.substr(hits[0].delivery.find('.')), ".1");
  EXPECT_EQ(hits[1].delivery.substr(hits[1].delivery.find('.')), ".2");

  // Recorded: delivered, two attempts, nothing pending.
  for (int i = 0; i < 50; ++i) {
    if (*store_->CountPendingDeliveries() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto events = store_->ListEvents({});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  ASSERT_EQ((*events)[0].deliveries.size(), 1u);
  EXPECT_EQ((*events)[0].deliveries[0].attempts, 2);
  EXPECT_TRUE((*events)[0].deliveries[0].delivered_at.has_value());
  EXPECT_EQ((*events)[0].deliveries[0].last_error, "HTTP 500");
  (*d)->Stop();
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("rackgate_webhook_deliveries_total{result=\"delivered\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("rackgate_webhook_deliveries_total{result=\"failed\"} 1"), std::string::npos) << text;
  EXPECT_EQ(text.find(kSecret), std::string::npos);
}

TEST_F(WebhooksTest, ADeadReceiverKeepsTheDeliveryQueued) {
  uint16_t port = 0;
  {
    Receiver gone(0);
    port = gone.port();
  }  // closed: connections are refused
  auto d = WebhookDispatcher::Start(outbox_.get(), {Endpoint(port)}, Fast(), nullptr);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(store_->Revoke("node-1", op_, Now()).ok());
  storage::Event e;
  for (int i = 0; i < 50; ++i) {
    auto events = store_->ListEvents({});
    ASSERT_TRUE(events.ok());
    if (!events->empty() && !(*events)[0].deliveries.empty() && (*events)[0].deliveries[0].attempts > 0) {
      e = (*events)[0];
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  (*d)->Stop();
  ASSERT_EQ(e.type, "machine_revoked");
  ASSERT_EQ(e.deliveries.size(), 1u);
  EXPECT_FALSE(e.deliveries[0].delivered_at.has_value());
  EXPECT_FALSE(e.deliveries[0].last_error.empty());
  EXPECT_GT(e.deliveries[0].next_attempt_at, e.at);
  EXPECT_EQ(*store_->CountPendingDeliveries(), 1);
}

}  // namespace
}  // namespace rackgate::daemon
