// The server's observability: bounded method and route labels, the plain
// metrics listener, and the admin socket's refusal hook.
#include <gtest/gtest.h>

#include <grp.h>

#include <mutex>
#include <vector>

#include "daemon/http_server.h"
#include "daemon/testing/http_server_test_util.h"

namespace rackgate::daemon {
namespace {

// A plain HTTP/1.0 exchange on 127.0.0.1:port; the whole answer.
std::string PlainGet(uint16_t port, const std::string& request) {
  const int fd = ConnectTcp(port);
  if (fd < 0) return "";
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

TEST_F(HttpServerTest, LabelsAreTheMethodAndThePatternNeverThePath) {
  options_.router.Add("GET", "/config/{pool}", [](const Request&) { return Response::Text(200, "ok"); });
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  EXPECT_EQ(client.Get("/config/worker?token=s3cr3t-token").status, 200);
  EXPECT_EQ(client.Get("/no/such/node-17").status, 404);
  Call odd;
  odd.method = "BREW";
  odd.path = "/hello";
  EXPECT_EQ(client.Do(odd).status, 405);
  server->Stop();
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("rackgate_http_requests_total{method=\"GET\",route=\"/config/{pool}\",status=\"200\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rackgate_http_requests_total{method=\"GET\",route=\"other\",status=\"404\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rackgate_http_requests_total{method=\"other\",route=\"/hello\",status=\"405\"} 1\n"),
            std::string::npos)
      << text;
  for (const char* leak : {"s3cr3t", "worker", "node-17", "BREW"}) {
    EXPECT_EQ(text.find(leak), std::string::npos) << leak << " in\n" << text;
  }
}

TEST_F(HttpServerTest, FamiliesAreDeclaredBeforeTheFirstRequest) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  const std::string text = metrics_.Render();
  server->Stop();
  EXPECT_NE(text.find("# TYPE rackgate_http_requests_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE rackgate_http_request_duration_seconds histogram\n"), std::string::npos) << text;
}

TEST_F(HttpServerTest, MetricsListenerServesPlainHttpItsOwnRoutesOnly) {
  options_.metrics_address = "127.0.0.1";
  options_.metrics_port = 0;
  options_.metrics_router.Add("GET", "/metrics", [](const Request& r) {
    return Response::Text(200, r.admin ? "admin\n" : "scrape\n");
  });
  auto server = StartServer();
  ASSERT_TRUE(server);
  ASSERT_NE(server->metrics_port(), 0);
  ASSERT_NE(server->metrics_port(), server->port());
  const std::string ok = PlainGet(server->metrics_port(), "GET /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(ok.find(" 200 "), 8u) << ok;
  EXPECT_NE(ok.find("\r\n\r\nscrape\n"), std::string::npos) << ok;
  // The public routes are not served there.
  const std::string other = PlainGet(server->metrics_port(), "GET /hello HTTP/1.0\r\n\r\n");
  EXPECT_EQ(other.find(" 404 "), 8u) << other;
  // The TLS port still answers TLS.
  Client client(server->port(), ca_path_);
  EXPECT_EQ(client.Get("/hello").status, 200);
  server->Stop();
}

TEST_F(HttpServerTest, MetricsListenerAddressInUseFailsTheStart) {
  options_.metrics_address = "127.0.0.1";
  auto first = StartServer();
  ASSERT_TRUE(first);
  options_.metrics_port = first->metrics_port();
  auto second = HttpServer::Start(options_);
  EXPECT_FALSE(second.ok());
  first->Stop();
}

TEST_F(HttpServerTest, AdminRefusalsReachTheHookWithRouteReasonAndPeer) {
  const std::string sock = dir_.path() + "/admin.sock";
  options_.admin_socket_path = sock;
  group* g = getgrgid(getegid());
  options_.admin_group = g != nullptr ? g->gr_name : "";
  options_.admin_router.Add("POST", "/v1/admin/machines/{hostname}/revoke", [](const Request&) {
    return Response::Error(409, "state_conflict", "no");
  });
  options_.admin_router.Add("GET", "/v1/admin/status", [](const Request&) { return Response::Json(200, "{}"); });
  std::mutex mu;
  std::vector<AdminRefusal> seen;
  options_.on_admin_refusal = [&](const AdminRefusal& r) {
    std::lock_guard lock(mu);
    seen.push_back(r);
  };
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  Call c;
  c.unix_socket = sock;
  c.method = "POST";
  c.path = "/v1/admin/machines/node%0A7/revoke";
  c.send_body = true;
  EXPECT_EQ(client.Do(c).status, 409);
  c.method = "GET";
  c.path = "/v1/admin/status";
  c.send_body = false;
  EXPECT_EQ(client.Do(c).status, 200);  // not a refusal
  c.path = "/v1/admin/nothing";
  EXPECT_EQ(client.Do(c).status, 404);
  // The public port's refusals are not admin refusals.
  EXPECT_EQ(client.Get("/nope").status, 404);
  server->Stop();
  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].route, "/v1/admin/machines/{hostname}/revoke");
  EXPECT_EQ(seen[0].status, 409);
  EXPECT_EQ(seen[0].reason, "state_conflict");
  EXPECT_EQ(seen[0].params.at("hostname"), "node\n7");
  ASSERT_TRUE(seen[0].peer.has_value());
  EXPECT_EQ(seen[0].peer->uid, geteuid());
  EXPECT_EQ(seen[1].route, "other");
  EXPECT_EQ(seen[1].reason, "not_found");
  EXPECT_TRUE(seen[1].params.empty());
}

}  // namespace
}  // namespace rackgate::daemon
