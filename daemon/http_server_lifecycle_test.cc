// The server's handler threads, graceful stop, drain and start-up refusals.
#include "daemon/http_server.h"

#include <gtest/gtest.h>

#include "daemon/testing/http_server_test_util.h"

namespace rackgate::daemon {
namespace {

// Handlers run on the handler threads, not on the event loop: with one
// event-loop thread, a handler that takes 1.5 s holds up no other request;
// with handlers on the event loop (handler_threads 0) it holds up the next.
TEST_F(HttpServerTest, ASlowHandlerHoldsUpNoOtherConnection) {
  for (const unsigned handler_threads : {4u, 0u}) {
    options_.threads = 1;
    options_.handler_threads = handler_threads;
    slow_started_ = false;
    auto server = StartServer();
    ASSERT_TRUE(server);
    Client slow_client(server->port(), ca_path_);
    Client client(server->port(), ca_path_);
    Reply slow;
    std::thread t([&] {
      Call c;
      c.path = "/slow";
      slow = slow_client.Do(c);
    });
    while (!slow_started_) std::this_thread::sleep_for(10ms);
    const auto start = std::chrono::steady_clock::now();
    Call hello;
    hello.path = "/hello";
    Reply fast = client.Do(hello);
    const auto took = std::chrono::steady_clock::now() - start;
    t.join();
    EXPECT_EQ(fast.status, 200) << handler_threads;
    EXPECT_EQ(slow.status, 200) << handler_threads;
    if (handler_threads > 0) {
      EXPECT_LT(took, 1000ms) << "the event loop waited for the slow handler";
    } else {
      EXPECT_GE(took, 1000ms) << "handlers on the event loop: the second request waits";
    }
  }
}

// Admission reads Request::queued: how long a request waited in the
// appliance before its handler ran. A request that arrives on a kept-alive
// connection while its worker thread runs a 1.5 s handler waits for it, and
// says so, whether handlers run on the worker thread (its bytes wait in the
// socket: TCP_INFO) or on a handler thread (the pool's queue); its duration
// in the histogram counts the wait too. On an idle server it waited nothing.
TEST_F(HttpServerTest, ARequestKnowsHowLongItWaitedForItsThread) {
  options_.router.Add("GET", "/queued", [](const Request& r) {
    return Response::Text(200, std::to_string(
                                   std::chrono::duration_cast<std::chrono::milliseconds>(r.queued).count()));
  });
  for (const unsigned handler_threads : {0u, 1u}) {
    options_.threads = 1;
    options_.handler_threads = handler_threads;
    slow_started_ = false;
    Metrics metrics;
    options_.metrics = &metrics;
    auto server = StartServer();
    ASSERT_TRUE(server);
    static CurlGlobal global;
    CURL* curl = curl_easy_init();
    std::string body;
    const std::string base = "https://127.0.0.1:" + std::to_string(server->port());
    curl_easy_setopt(curl, CURLOPT_CAINFO, ca_path_.c_str());
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendTo);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    // Connected and idle: nothing waited.
    curl_easy_setopt(curl, CURLOPT_URL, (base + "/queued").c_str());
    ASSERT_EQ(curl_easy_perform(curl), CURLE_OK);
    EXPECT_LT(std::stol(body), 50) << handler_threads;

    Client slow_client(server->port(), ca_path_);
    std::thread t([&] { EXPECT_EQ(slow_client.Get("/slow").status, 200); });
    while (!slow_started_) std::this_thread::sleep_for(10ms);
    body.clear();
    ASSERT_EQ(curl_easy_perform(curl), CURLE_OK);  // the same connection
    t.join();
    long reused = 0;
    curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &reused);
    EXPECT_EQ(reused, 0) << "the second request was to use the kept-alive connection";
    EXPECT_GE(std::stol(body), 1000) << handler_threads;
    curl_easy_cleanup(curl);
    server->Stop();
    // Both /queued requests are in the histogram; one took over a second.
    const std::string text = metrics.Render();
    EXPECT_NE(text.find(R"(rackgate_http_request_duration_seconds_bucket{method="GET",route="/queued",le="1"} 1)"),
              std::string::npos)
        << text;
  }
}

TEST_F(HttpServerTest, GracefulStopLetsInFlightHandlerFinish) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  const uint16_t port = server->port();
  Client client(port, ca_path_);
  Reply slow;
  std::thread t([&] {
    Call c;
    c.path = "/slow";
    slow = client.Do(c);
  });
  while (!slow_started_) std::this_thread::sleep_for(10ms);
  const auto start = std::chrono::steady_clock::now();
  server->Stop();
  const auto stop_took = std::chrono::steady_clock::now() - start;
  t.join();
  EXPECT_EQ(slow.code, CURLE_OK) << curl_easy_strerror(slow.code);
  EXPECT_EQ(slow.status, 200);
  EXPECT_EQ(slow.body, "done");
  EXPECT_LT(stop_took, 4s);
  EXPECT_EQ(server->requests_in_flight(), 0u);
  // Nothing listens any more.
  EXPECT_LT(ConnectTcp(port), 0);
  server->Stop();  // idempotent
}

// An upload that sends a few bytes, then waits for `release` before ending.
struct HeldUpload {
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  int calls = 0;
};

size_t ReadHeld(char* buf, size_t size, size_t n, void* cls) {
  auto* h = static_cast<HeldUpload*>(cls);
  if (size * n < 4) return 0;
  switch (h->calls++) {
    case 0:
      h->started = true;
      std::memcpy(buf, "head", 4);
      return 4;
    case 1:
      while (!h->release) std::this_thread::sleep_for(10ms);
      std::memcpy(buf, "tail", 4);
      return 4;
    default:
      return 0;
  }
}

CURL* NewEasy(const std::string& url, const std::string& ca, std::string* body,
              std::string* headers) {
  static CurlGlobal global;
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CAINFO, ca.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendTo);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &AppendTo);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, headers);
  return curl;
}

TEST_F(HttpServerTest, KeptAliveConnectionIsToldToComeBackDuringDrain) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  const std::string base = "https://127.0.0.1:" + std::to_string(server->port());
  std::string body, headers;
  CURL* keep = NewEasy(base + "/hello", ca_path_, &body, &headers);
  ASSERT_EQ(curl_easy_perform(keep), CURLE_OK);
  long status = 0;
  curl_easy_getinfo(keep, CURLINFO_RESPONSE_CODE, &status);
  EXPECT_EQ(status, 200);

  // A request whose upload is held open keeps the server draining without
  // occupying a worker thread (a running handler would block its worker's
  // other connections until it returns).
  HeldUpload held;
  std::string up_body, up_headers;
  long up_status = 0;
  CURLcode up_code = CURLE_OK;
  std::thread upload([&] {
    CURL* c = NewEasy(base + "/echo", ca_path_, &up_body, &up_headers);
    curl_slist* h = curl_slist_append(nullptr, "Transfer-Encoding: chunked");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, &ReadHeld);
    curl_easy_setopt(c, CURLOPT_READDATA, &held);
    up_code = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &up_status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
  });
  while (!held.started) std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(100ms);
  std::thread stopper([&] { server->Stop(); });
  while (server->requests_in_flight() == 0) std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(200ms);  // Stop() is now draining

  body.clear();
  headers.clear();
  const CURLcode code = curl_easy_perform(keep);
  long connects = -1;
  curl_easy_getinfo(keep, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_getinfo(keep, CURLINFO_NUM_CONNECTS, &connects);
  curl_easy_cleanup(keep);
  held.release = true;
  upload.join();
  stopper.join();

  ASSERT_EQ(code, CURLE_OK) << curl_easy_strerror(code);
  EXPECT_EQ(connects, 0);  // the same connection, accepted before the stop
  EXPECT_EQ(status, 503);
  EXPECT_NE(headers.find("Retry-After: 5"), std::string::npos) << headers;
  EXPECT_NE(headers.find("Connection: close"), std::string::npos) << headers;
  EXPECT_EQ(json::parse(body).at("error").at("reason"), "shutting_down");
  // The held request still completes, and is told to close.
  EXPECT_EQ(up_code, CURLE_OK) << curl_easy_strerror(up_code);
  EXPECT_EQ(up_status, 200);
  EXPECT_EQ(up_body, "8:headtail");
  EXPECT_NE(up_headers.find("Connection: close"), std::string::npos) << up_headers;
}

TEST_F(HttpServerTest, DrainTimeoutCutsOffSlowHandler) {
  options_.drain_timeout = 200ms;
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  Reply slow;
  std::thread t([&] {
    Call c;
    c.path = "/slow";
    slow = client.Do(c);
  });
  while (!slow_started_) std::this_thread::sleep_for(10ms);
  server->Stop();  // returns once the handler does: threads cannot be killed
  t.join();
  EXPECT_NE(slow.status, 200);
  EXPECT_EQ(server->requests_in_flight(), 0u);
  EXPECT_NE(metrics_.Render().find(
                "rackgate_http_requests_total{method=\"GET\",route=\"/slow\",status=\"aborted\"} 1\n"),
            std::string::npos)
      << metrics_.Render();
}

TEST_F(HttpServerTest, StartRefusesBadOptions) {
  HttpServerOptions o = options_;
  o.listen_addresses.clear();
  EXPECT_EQ(HttpServer::Start(o).status().reason(), "listen_address_invalid");
  o = options_;
  o.listen_addresses = {"localhost"};
  EXPECT_EQ(HttpServer::Start(o).status().reason(), "listen_address_invalid");
  o = options_;
  const Pem other = MakeCertificate("other");
  WriteFile(dir_.path() + "/other.key", other.key);
  o.tls_key_path = dir_.path() + "/other.key";
  EXPECT_EQ(HttpServer::Start(o).status().reason(), "tls_credentials_invalid");
  o = options_;
  o.tls_certificate_path = dir_.path() + "/missing.crt";
  EXPECT_EQ(HttpServer::Start(o).status().code(), Status::Code::kIoError);
}

TEST_F(HttpServerTest, PortInUseIsAnError) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  HttpServerOptions o = options_;
  o.port = server->port();
  auto second = HttpServer::Start(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().reason(), "listen_failed");
  EXPECT_NE(second.status().message().find("127.0.0.1"), std::string::npos);
}

TEST_F(HttpServerTest, TwoAddressesShareTheEphemeralPort) {
  options_.listen_addresses = {"127.0.0.1", "::1"};
  auto server = HttpServer::Start(options_);
  if (!server.ok() && server.status().message().find("::1") != std::string::npos) {
    GTEST_SKIP() << "no IPv6 loopback: " << server.status().ToString();
  }
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Client client((*server)->port(), ca_path_);
  EXPECT_EQ(client.Get("/hello").status, 200);
}

}  // namespace
}  // namespace rackgate::daemon
