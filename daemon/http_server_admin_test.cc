// The admin API's Unix socket: peer credentials, mode, group, body limit and a path in the way.
#include "daemon/http_server.h"

#include <gtest/gtest.h>

#include "daemon/testing/http_server_test_util.h"

namespace rackgate::daemon {
namespace {

std::string CurrentGroupName() {
  group* g = getgrgid(getegid());
  return g != nullptr ? g->gr_name : "";
}

TEST_F(HttpServerTest, AdminSocketPeerCredentialsAndMode) {
  const std::string sock = dir_.path() + "/admin.sock";
  options_.admin_socket_path = sock;
  options_.admin_group = CurrentGroupName();
  options_.admin_router.Add("GET", "/v1/whoami", [](const Request& r) {
    json j = {{"admin", r.admin},
              {"peer", r.peer_address},
              {"uid", r.peer_cred ? static_cast<int64_t>(r.peer_cred->uid) : -1},
              {"pid", r.peer_cred ? static_cast<int64_t>(r.peer_cred->pid) : -1}};
    return Response::Json(200, j.dump());
  });
  // A stale socket left by a dead daemon is replaced.
  {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, sock.c_str(), sizeof(sa.sun_path) - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    close(fd);
  }
  auto server = StartServer();
  ASSERT_TRUE(server);
  EXPECT_EQ(server->admin_group_id(), getegid());

  struct stat st {};
  ASSERT_EQ(lstat(sock.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(st.st_gid, getegid());

  Client client(server->port(), ca_path_);
  Call c;
  c.unix_socket = sock;
  c.path = "/v1/whoami";
  Reply r = client.Do(c);
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  ASSERT_EQ(r.status, 200);
  json j = json::parse(r.body);
  EXPECT_EQ(j.at("admin"), true);
  EXPECT_EQ(j.at("peer"), "unix");
  EXPECT_EQ(j.at("uid"), static_cast<int64_t>(getuid()));
  EXPECT_EQ(j.at("pid"), static_cast<int64_t>(getpid()));

  // The public routes are not on the admin socket, nor the admin routes on
  // the public port.
  c.path = "/hello";
  EXPECT_EQ(client.Do(c).status, 404);
  EXPECT_EQ(client.Get("/v1/whoami").status, 404);

  // A second daemon must not steal a live socket.
  HttpServerOptions second = options_;
  auto other = HttpServer::Start(second);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().reason(), "admin_socket_in_use");

  server->Stop();
  EXPECT_NE(lstat(sock.c_str(), &st), 0);  // removed at stop
}

TEST_F(HttpServerTest, AdminSocketHasItsOwnBodyLimit) {
  const std::string sock = dir_.path() + "/admin.sock";
  options_.admin_socket_path = sock;
  options_.admin_group = CurrentGroupName();
  options_.max_body_bytes = 1024;
  options_.admin_max_body_bytes = 4096;
  options_.admin_router.Add("POST", "/v1/echo", [](const Request& r) {
    return Response::Text(200, std::to_string(r.body.size()));
  });
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  Call c;
  c.unix_socket = sock;
  c.method = "POST";
  c.path = "/v1/echo";
  c.send_body = true;
  // Over the public limit, within the admin socket's.
  c.body = std::string(4096, 'a');
  Reply r = client.Do(c);
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "4096");
  c.body = std::string(4097, 'a');
  r = client.Do(c);
  EXPECT_EQ(r.status, 413);
  // The public listener keeps its own.
  Call p;
  p.method = "POST";
  p.path = "/echo";
  p.send_body = true;
  p.body = std::string(1025, 'a');
  EXPECT_EQ(client.Do(p).status, 413);
}

TEST_F(HttpServerTest, AdminSocketUnknownGroupKeepsProcessGroup) {
  const std::string sock = dir_.path() + "/admin.sock";
  options_.admin_socket_path = sock;
  options_.admin_group = "rackgate-no-such-group-for-tests";
  auto server = StartServer();
  ASSERT_TRUE(server);
  EXPECT_FALSE(server->admin_group_id().has_value());
  struct stat st {};
  ASSERT_EQ(lstat(sock.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, getegid());
  EXPECT_EQ(st.st_mode & 07777, 0660u);
}

TEST_F(HttpServerTest, AdminSocketPathHoldingAFileIsRefused) {
  const std::string path = dir_.path() + "/not-a-socket";
  WriteFile(path, "keep me");
  options_.admin_socket_path = path;
  auto server = HttpServer::Start(options_);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().reason(), "admin_socket_invalid");
  std::ifstream f(path);
  std::string content;
  std::getline(f, content);
  EXPECT_EQ(content, "keep me");
}

}  // namespace
}  // namespace rackgate::daemon
