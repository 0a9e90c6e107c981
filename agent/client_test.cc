// HttpClient against a small TLS server of OpenSSL's: one connection for a
// boot's requests when the appliance keeps it, a new one when it does not.
#include "agent/client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

namespace rackgate::agent {
namespace {

namespace fs = std::filesystem;

// A self-signed certificate for localhost and 127.0.0.1, made by the openssl
// command; the client trusts it as the appliance CA.
class TlsServer {
 public:
  explicit TlsServer(bool keep_alive) : keep_alive_(keep_alive) {
    static std::atomic<int> made{0};
    dir_ = fs::temp_directory_path() /
           ("rackgate-client-test-" + std::to_string(::getpid()) + "-" + std::to_string(++made));
    fs::create_directories(dir_);
    const std::string cmd = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "
                            "/CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
                            (dir_ / "key.pem").string() + " -out " + (dir_ / "cert.pem").string() +
                            " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("openssl req failed");
    ctx_ = SSL_CTX_new(TLS_server_method());
    if (ctx_ == nullptr || SSL_CTX_use_certificate_file(ctx_, ca_file().c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx_, (dir_ / "key.pem").c_str(), SSL_FILETYPE_PEM) != 1) {
      throw std::runtime_error("SSL_CTX set-up failed");
    }
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (listen_ < 0 || ::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listen_, 8) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error("listen failed");
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }

  ~TlsServer() {
    stop_ = true;
    ::shutdown(listen_, SHUT_RDWR);
    thread_.join();
    ::close(listen_);
    SSL_CTX_free(ctx_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string ca_file() const { return (dir_ / "cert.pem").string(); }
  int port() const { return port_; }
  int connections() const { return connections_; }
  int requests() const { return requests_; }

 private:
  void Serve() {
    while (!stop_) {
      const int fd = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      ++connections_;
      SSL* ssl = SSL_new(ctx_);
      SSL_set_fd(ssl, fd);
      if (SSL_accept(ssl) == 1) {
        // Requests one after the other on this connection, until the client
        // closes it (or, without keep-alive, after the first answer).
        for (;;) {
          std::string in;
          char buf[4096];
          size_t header_end = std::string::npos;
          while ((header_end = in.find("\r\n\r\n")) == std::string::npos) {
            const int n = SSL_read(ssl, buf, sizeof(buf));
            if (n <= 0) break;
            in.append(buf, static_cast<size_t>(n));
          }
          if (header_end == std::string::npos) break;
          size_t length = 0;
          if (const size_t at = in.find("Content-Length: "); at != std::string::npos && at < header_end) {
            length = std::strtoul(in.c_str() + at + 16, nullptr, 10);
          }
          while (in.size() < header_end + 4 + length) {
            const int n = SSL_read(ssl, buf, sizeof(buf));
            if (n <= 0) break;
            in.append(buf, static_cast<size_t>(n));
          }
          ++requests_;
          const std::string answer = std::string("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n") +
                                     (keep_alive_ ? "" : "Connection: close\r\n") + "Content-Length: 2\r\n\r\n{}";
          if (SSL_write(ssl, answer.data(), static_cast<int>(answer.size())) <= 0 || !keep_alive_) break;
        }
      }
      SSL_shutdown(ssl);
      SSL_free(ssl);
      ::close(fd);
    }
  }

  bool keep_alive_;
  fs::path dir_;
  SSL_CTX* ctx_ = nullptr;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

// What a boot sends: challenge, evidence, config, CSR.
void SendBoot(const HttpClient& client, const Endpoint& at) {
  const std::string body = R"({"x":1})";
  for (const char* path : {"/v1/attest/challenge", "/v1/attest/evidence"}) {
    auto r = client.Send(at, path, &body, {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "{}");
  }
  auto config = client.Send(at, "/v1/machine/config", nullptr, {"Authorization: Bearer t"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto csr = client.Send(at, "/v1/machine/csr", &body, {"Authorization: Bearer t"});
  ASSERT_TRUE(csr.ok()) << csr.status().ToString();
}

class HttpClientTest : public testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK); }
};

TEST_F(HttpClientTest, OneConnectionForABootsRequests) {
  TlsServer server(/*keep_alive=*/true);
  auto client = HttpClient::Create({server.ca_file()});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const Endpoint at{"https://localhost:" + std::to_string(server.port()), "localhost", server.port(), "127.0.0.1"};
  SendBoot(*client, at);
  EXPECT_EQ(server.requests(), 4);
  EXPECT_EQ(server.connections(), 1);
}

TEST_F(HttpClientTest, ANewConnectionWhenTheApplianceClosedIt) {
  TlsServer server(/*keep_alive=*/false);
  auto client = HttpClient::Create({server.ca_file()});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const Endpoint at{"https://localhost:" + std::to_string(server.port()), "localhost", server.port(), "127.0.0.1"};
  SendBoot(*client, at);
  EXPECT_EQ(server.requests(), 4);
  EXPECT_EQ(server.connections(), 4);
}

TEST_F(HttpClientTest, AKeptConnectionIsStillVerifiedAgainstTheCa) {
  // A second appliance with another certificate on the same name: the
  // client must not take the first one's connection or trust for it.
  TlsServer first(/*keep_alive=*/true), second(/*keep_alive=*/true);
  auto client = HttpClient::Create({first.ca_file()});
  ASSERT_TRUE(client.ok());
  const Endpoint a{"https://localhost:" + std::to_string(first.port()), "localhost", first.port(), "127.0.0.1"};
  const Endpoint b{"https://localhost:" + std::to_string(second.port()), "localhost", second.port(), "127.0.0.1"};
  SendBoot(*client, a);
  auto r = client->Send(b, "/v1/machine/config", nullptr, {});
  ASSERT_FALSE(r.ok());
  // Issue 44: a certificate that does not verify says so, and names the
  // likely cause (a CA rotation missed) and the way back.
  EXPECT_EQ(r.status().reason(), "appliance_untrusted");
  EXPECT_NE(r.status().message().find("rackgatectl ca bundle --appliance"), std::string::npos) << r.status().message();
  EXPECT_EQ(second.requests(), 0);
  auto again = client->Send(a, "/v1/machine/config", nullptr, {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(first.connections(), 1);
}

}  // namespace
}  // namespace rackgate::agent
