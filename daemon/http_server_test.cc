// The server on 127.0.0.1:0: routing, body limits, errors, access log, metrics and timeouts.
#include "daemon/http_server.h"

#include <gtest/gtest.h>

#include "daemon/testing/http_server_test_util.h"

namespace rackgate::daemon {
namespace {

TEST_F(HttpServerTest, RoutingParamsQueryHeaders) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  EXPECT_NE(server->port(), 0);
  Client client(server->port(), ca_path_);

  Reply r = client.Get("/hello");
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"hello":"world"})");
  EXPECT_NE(r.headers.find("Content-Type: application/json"), std::string::npos) << r.headers;

  Call c;
  c.path = "/items/abc?q=x%20y";
  c.headers = {"X-Test: yes"};
  r = client.Do(c);
  EXPECT_EQ(r.status, 200);
  json j = json::parse(r.body);
  EXPECT_EQ(j.at("id"), "abc");
  EXPECT_EQ(j.at("q"), "x y");
  EXPECT_EQ(j.at("ua"), "yes");
  EXPECT_EQ(j.at("peer_prefix"), "127.0.0.1:");
  EXPECT_EQ(j.at("admin"), false);

  r = client.Get("/nope");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body).at("error").at("reason"), "not_found");

  c = Call();
  c.method = "DELETE";
  c.path = "/hello";
  r = client.Do(c);
  EXPECT_EQ(r.status, 405);
  EXPECT_NE(r.headers.find("Allow: GET, HEAD, POST"), std::string::npos) << r.headers;
}

TEST_F(HttpServerTest, HeadKeepsContentLengthDropsBody) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  Call c;
  c.method = "HEAD";
  c.path = "/hello";
  Reply r = client.Do(c);
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(r.content_length, static_cast<curl_off_t>(std::strlen(R"({"hello":"world"})")));
}

TEST_F(HttpServerTest, BodyLimitWithContentLength) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  Call c;
  c.method = "POST";
  c.path = "/echo";
  c.send_body = true;
  c.body = std::string(1024, 'a');
  Reply r = client.Do(c);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.substr(0, 5), "1024:");

  c.body = std::string(1025, 'a');
  r = client.Do(c);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(json::parse(r.body).at("error").at("reason"), "body_too_large");
}

TEST_F(HttpServerTest, BodyLimitWithChunkedUpload) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  Call c;
  c.path = "/echo";
  c.chunked = true;
  c.stream_bytes = 1000;
  Reply r = client.Do(c);
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.substr(0, 5), "1000:");

  // No Content-Length at all: only the accumulation check can see this.
  c.stream_bytes = 64 * 1024;
  r = client.Do(c);
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(json::parse(r.body).at("error").at("reason"), "body_too_large");
}

TEST_F(HttpServerTest, EndlessChunkedUploadIsCut) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  Call c;
  c.path = "/echo";
  c.chunked = true;
  c.stream_bytes = 64 * 1024 * 1024;
  Reply r = client.Do(c);
  EXPECT_NE(r.code, CURLE_OK);  // the connection was closed mid-upload
  EXPECT_NE(r.status, 200);
  EXPECT_EQ(client.Get("/hello").status, 200);  // and the server carries on
}

TEST_F(HttpServerTest, HandlerExceptionIsFixed500) {
  ASSERT_TRUE(ConfigureLogging({"info", LogOptions::Style::kJournal}).ok());
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  testing::internal::CaptureStderr();
  Reply r = client.Get("/boom");
  server->Stop();  // the access log line is written once the response is sent
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, R"({"error":{"reason":"internal","message":"internal error"}})");
  EXPECT_EQ(r.body.find("deadbeef"), std::string::npos);
  EXPECT_NE(log.find("secret detail 0xdeadbeef"), std::string::npos) << log;
}

TEST_F(HttpServerTest, AccessLogHasNoBodiesOrCredentials) {
  ASSERT_TRUE(ConfigureLogging({"info", LogOptions::Style::kJournal}).ok());
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  testing::internal::CaptureStderr();
  Call c;
  c.method = "POST";
  c.path = "/echo?token=QUERYSECRET";
  c.send_body = true;
  c.body = "BODYSECRET";
  c.headers = {"Authorization: Bearer HEADERSECRET"};
  Reply r = client.Do(c);
  server->Stop();
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(log.find("<6>[http] public POST /echo 200 "), std::string::npos) << log;
  EXPECT_NE(log.find("peer=127.0.0.1:"), std::string::npos) << log;
  for (const char* secret : {"QUERYSECRET", "BODYSECRET", "HEADERSECRET"}) {
    EXPECT_EQ(log.find(secret), std::string::npos) << secret << " in " << log;
  }
}

// CWE-117, the log injection an outside test found: a path that decodes to
// a newline and a journal priority stays inside its one access log line.
TEST_F(HttpServerTest, Cwe117PathCannotForgeALogLine) {
  ASSERT_TRUE(ConfigureLogging({"info", LogOptions::Style::kJournal}).ok());
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  testing::internal::CaptureStderr();
  Reply r = client.Get("/items/x%0A%3C3%3Eforged%0D%1B%5B2K");
  server->Stop();
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(log.find("\n<3>"), std::string::npos) << log;
  EXPECT_EQ(log.find('\r'), std::string::npos) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << log;
  EXPECT_NE(log.find("<6>[http] public GET /items/x\\n<3>forged\\r\\x1b[2K "), std::string::npos) << log;
}

TEST_F(HttpServerTest, MetricsRecordRouteAndStatus) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  EXPECT_EQ(client.Get("/items/1").status, 200);
  EXPECT_EQ(client.Get("/items/2").status, 200);
  EXPECT_EQ(client.Get("/nope/x").status, 404);
  server->Stop();
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("rackgate_http_requests_total{method=\"GET\",route=\"/items/{id}\",status=\"200\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rackgate_http_requests_total{method=\"GET\",route=\"other\",status=\"404\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rackgate_http_request_duration_seconds_count{method=\"GET\",route=\"/items/{id}\"} 2\n"),
            std::string::npos)
      << text;
}

TEST_F(HttpServerTest, SilentClientDroppedAfterTimeout) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  const int fd = ConnectTcp(server->port());
  ASSERT_GE(fd, 0);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const auto start = std::chrono::steady_clock::now();
  // The server may say goodbye with a TLS alert before closing; read to the
  // end.
  char buf[64];
  ssize_t n = 0;
  size_t total = 0;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) total += static_cast<size_t>(n);
  const int err = errno;
  const auto elapsed = std::chrono::steady_clock::now() - start;
  close(fd);
  EXPECT_TRUE(n == 0 || err == ECONNRESET) << "recv: " << std::strerror(err);  // not our 10 s
  EXPECT_LT(total, 64u);  // an alert at most, never an HTTP answer
  EXPECT_GE(elapsed, 1500ms);
  EXPECT_LT(elapsed, 6s);
}

}  // namespace
}  // namespace rackgate::daemon
