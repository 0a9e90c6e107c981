// The server on 127.0.0.1:0 with throwaway certificates, driven with libcurl
// and raw sockets.
#include "daemon/http_server.h"

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <curl/curl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "daemon/log.h"
#include "daemon/metrics.h"

namespace rackgate::daemon {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// ---------------------------------------------------------------------------
// Fixtures: a temporary directory and self-signed certificates.

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/rackgate-http-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
  if (!f) throw std::runtime_error("write " + path);
}

struct Pem {
  std::string cert;
  std::string key;
};

struct EvpPkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};

std::string BioString(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

void AddExt(X509* x, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) throw std::runtime_error("extension");
  X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
}

// A self-signed P-256 certificate for 127.0.0.1 with the given CN.
Pem MakeCertificate(const std::string& cn) {
  std::unique_ptr<EVP_PKEY, EvpPkeyFree> key(EVP_EC_gen("P-256"));
  std::unique_ptr<X509, X509Free> x(X509_new());
  if (!key || !x) throw std::runtime_error("openssl");
  X509_set_version(x.get(), 2);
  static long serial = 1;
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), 86400);
  X509_set_pubkey(x.get(), key.get());
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x.get(), name);
  AddExt(x.get(), NID_basic_constraints, "critical,CA:TRUE");
  AddExt(x.get(), NID_key_usage, "critical,digitalSignature,keyCertSign");
  AddExt(x.get(), NID_subject_alt_name, "IP:127.0.0.1");
  if (X509_sign(x.get(), key.get(), EVP_sha256()) == 0) throw std::runtime_error("sign");
  std::unique_ptr<BIO, BioFree> cert_bio(BIO_new(BIO_s_mem()));
  std::unique_ptr<BIO, BioFree> key_bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(cert_bio.get(), x.get());
  PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  return Pem{BioString(cert_bio.get()), BioString(key_bio.get())};
}

// ---------------------------------------------------------------------------
// A libcurl client.

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
  ~CurlGlobal() { curl_global_cleanup(); }
};

struct Call {
  std::string method = "GET";
  std::string path = "/";
  std::string body;
  bool send_body = false;
  bool chunked = false;
  size_t stream_bytes = 0;  // chunked: this many 'x' bytes from a read callback
  std::vector<std::string> headers;
  long ssl_version = CURL_SSLVERSION_DEFAULT;
  std::string ciphers;
  std::string unix_socket;  // admin: plain HTTP over this socket
  bool certinfo = false;
  long timeout_ms = 10000;
};

struct Reply {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string body;
  std::string headers;
  curl_off_t content_length = -1;
  std::string server_cert;  // PEM, with certinfo
};

size_t AppendTo(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

struct Stream {
  size_t left;
};

size_t ReadStream(char* buf, size_t size, size_t n, void* cls) {
  auto* s = static_cast<Stream*>(cls);
  const size_t k = std::min(size * n, s->left);
  std::memset(buf, 'x', k);
  s->left -= k;
  return k;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

class Client {
 public:
  Client(uint16_t port, std::string ca_file) : port_(port), ca_file_(std::move(ca_file)) {
    static CurlGlobal global;
  }

  Reply Do(const Call& call) const {
    Reply reply;
    CURL* curl = curl_easy_init();
    std::string url = call.unix_socket.empty()
                          ? "https://127.0.0.1:" + std::to_string(port_) + call.path
                          : "http://localhost" + call.path;
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    if (!call.unix_socket.empty()) {
      curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, call.unix_socket.c_str());
    }
    curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file_.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLVERSION, call.ssl_version);
    if (!call.ciphers.empty()) curl_easy_setopt(curl, CURLOPT_SSL_CIPHER_LIST, call.ciphers.c_str());
    if (call.certinfo) curl_easy_setopt(curl, CURLOPT_CERTINFO, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, call.timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendTo);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &AppendTo);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply.headers);
    Stream stream{call.stream_bytes};
    if (call.method == "HEAD") {
      curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else if (call.chunked) {
      curl_easy_setopt(curl, CURLOPT_POST, 1L);
      curl_easy_setopt(curl, CURLOPT_READFUNCTION, &ReadStream);
      curl_easy_setopt(curl, CURLOPT_READDATA, &stream);
    } else if (call.send_body) {
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, call.body.data());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(call.body.size()));
    }
    if (call.method != "GET" && call.method != "HEAD" && call.method != "POST") {
      curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, call.method.c_str());
    }
    curl_slist* headers = nullptr;
    std::vector<std::string> all = call.headers;
    if (call.chunked) all.push_back("Transfer-Encoding: chunked");
    for (const auto& h : all) headers = curl_slist_append(headers, h.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

    reply.code = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
    curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &reply.content_length);
    if (call.certinfo && reply.code == CURLE_OK) {
      curl_certinfo* info = nullptr;
      curl_easy_getinfo(curl, CURLINFO_CERTINFO, &info);
      if (info != nullptr && info->num_of_certs > 0) {
        for (curl_slist* s = info->certinfo[0]; s != nullptr; s = s->next) {
          if (std::strncmp(s->data, "Cert:", 5) == 0) reply.server_cert = Trim(s->data + 5);
        }
      }
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return reply;
  }

  Reply Get(const std::string& path) const {
    Call c;
    c.path = path;
    return Do(c);
  }

 private:
  uint16_t port_;
  std::string ca_file_;
};

// ---------------------------------------------------------------------------

long SslVersion(long min, long max) { return min | max; }

int ConnectTcp(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

class HttpServerTest : public testing::Test {
 protected:
  void SetUp() override {
    pem_ = MakeCertificate("rackgate-test-a");
    cert_path_ = dir_.path() + "/server.crt";
    key_path_ = dir_.path() + "/server.key";
    ca_path_ = dir_.path() + "/ca.pem";
    WriteFile(cert_path_, pem_.cert);
    WriteFile(key_path_, pem_.key);
    WriteFile(ca_path_, pem_.cert);

    options_.listen_addresses = {"127.0.0.1"};
    options_.port = 0;
    options_.tls_certificate_path = cert_path_;
    options_.tls_key_path = key_path_;
    options_.max_body_bytes = 1024;
    options_.connection_timeout_seconds = 2;
    options_.drain_timeout = 5s;
    options_.metrics = &metrics_;

    options_.router.Add("GET", "/hello", [](const Request&) {
      return Response::Json(200, R"({"hello":"world"})");
    });
    options_.router.Add("POST", "/hello", [](const Request&) { return Response::Json(201, "{}"); });
    options_.router.Add("GET", "/items/{id}", [](const Request& r) {
      json j = {{"id", r.path_params.at("id")},
                {"q", r.query.count("q") ? r.query.at("q") : ""},
                {"ua", r.Header("x-test").value_or("")},
                {"peer_prefix", r.peer_address.substr(0, 10)},
                {"admin", r.admin}};
      return Response::Json(200, j.dump());
    });
    options_.router.Add("POST", "/echo", [](const Request& r) {
      return Response::Text(200, std::to_string(r.body.size()) + ":" + r.body.substr(0, 16));
    });
    options_.router.Add("GET", "/boom", [](const Request&) -> Response {
      throw std::runtime_error("secret detail 0xdeadbeef");
    });
    options_.router.Add("GET", "/slow", [this](const Request&) {
      slow_started_ = true;
      std::this_thread::sleep_for(1500ms);
      return Response::Text(200, "done");
    });
  }

  std::unique_ptr<HttpServer> StartServer() {
    auto server = HttpServer::Start(options_);
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    if (!server.ok()) return nullptr;
    return std::move(server).value();
  }

  TempDir dir_;
  Pem pem_;
  std::string cert_path_, key_path_, ca_path_;
  Metrics metrics_;
  HttpServerOptions options_;
  std::atomic<bool> slow_started_{false};
};

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

TEST_F(HttpServerTest, MetricsRecordRouteAndStatus) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  EXPECT_EQ(client.Get("/items/1").status, 200);
  EXPECT_EQ(client.Get("/items/2").status, 200);
  EXPECT_EQ(client.Get("/nope/x").status, 404);
  server->Stop();
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("rackgate_http_requests_total{route=\"GET /items/{id}\",status=\"200\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rackgate_http_requests_total{route=\"unmatched\",status=\"404\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rackgate_http_request_duration_seconds_count{route=\"GET /items/{id}\"} 2\n"),
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

TEST_F(HttpServerTest, TlsVersions) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  Call c;
  c.path = "/hello";
  // SECLEVEL=0 lets OpenSSL 3's client offer TLS 1.1 at all, so the refusal
  // seen here is the server's.
  c.ciphers = "DEFAULT:@SECLEVEL=0";
  c.ssl_version = SslVersion(CURL_SSLVERSION_TLSv1_1, CURL_SSLVERSION_MAX_TLSv1_1);
  Reply r = client.Do(c);
  EXPECT_EQ(r.code, CURLE_SSL_CONNECT_ERROR) << curl_easy_strerror(r.code);

  c.ssl_version = SslVersion(CURL_SSLVERSION_TLSv1_0, CURL_SSLVERSION_MAX_TLSv1_0);
  EXPECT_EQ(client.Do(c).code, CURLE_SSL_CONNECT_ERROR);

  c.ciphers.clear();
  c.ssl_version = SslVersion(CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_MAX_TLSv1_2);
  r = client.Do(c);
  EXPECT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 200);

  c.ssl_version = SslVersion(CURL_SSLVERSION_TLSv1_3, CURL_SSLVERSION_MAX_TLSv1_3);
  r = client.Do(c);
  EXPECT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 200);
}

// Counts the ServerHello messages a client receives: two mean the server
// answered with a HelloRetryRequest (a second round trip and a second key
// exchange on both sides).
void CountServerHellos(int write_p, int, int content_type, const void* buf, size_t len, SSL*, void* arg) {
  if (write_p == 0 && content_type == SSL3_RT_HANDSHAKE && len > 0 &&
      static_cast<const unsigned char*>(buf)[0] == SSL3_MT_SERVER_HELLO) {
    ++*static_cast<int*>(arg);
  }
}

TEST_F(HttpServerTest, Tls13HandshakeTakesTheCommonKeyShareWithoutARetry) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  // OpenSSL's default client sends one key share, X25519 (so do Go's and
  // GnuTLS's): a server that insisted on another group would ask again.
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  ASSERT_TRUE(ctx);
  ASSERT_EQ(SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION), 1);
  ASSERT_EQ(SSL_CTX_load_verify_locations(ctx.get(), ca_path_.c_str(), nullptr), 1);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  int server_hellos = 0;
  SSL_CTX_set_msg_callback(ctx.get(), &CountServerHellos);
  SSL_CTX_set_msg_callback_arg(ctx.get(), &server_hellos);

  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  ASSERT_TRUE(ssl);
  SSL_set_fd(ssl.get(), fd);
  EXPECT_EQ(SSL_connect(ssl.get()), 1);
  EXPECT_EQ(SSL_get_verify_result(ssl.get()), X509_V_OK);
  EXPECT_EQ(server_hellos, 1) << "the server asked for another key share (HelloRetryRequest)";
  EXPECT_EQ(SSL_get_negotiated_group(ssl.get()), NID_X25519);
  SSL_shutdown(ssl.get());
  ssl.reset();
  close(fd);
}

TEST_F(HttpServerTest, PerClientConnectionLimit) {
  options_.per_client_connections = 2;
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  const int a = ConnectTcp(server->port());
  const int b = ConnectTcp(server->port());
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  std::this_thread::sleep_for(300ms);  // let MHD accept both
  Call c;
  c.path = "/hello";
  c.timeout_ms = 3000;
  Reply r = client.Do(c);
  EXPECT_NE(r.code, CURLE_OK);
  close(a);
  std::this_thread::sleep_for(300ms);
  r = client.Do(c);
  EXPECT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 200);
  close(b);
}

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
                "rackgate_http_requests_total{route=\"GET /slow\",status=\"aborted\"} 1\n"),
            std::string::npos)
      << metrics_.Render();
}

TEST_F(HttpServerTest, CertificateReloadForNewConnections) {
  const Pem b = MakeCertificate("rackgate-test-b");
  WriteFile(ca_path_, pem_.cert + b.cert);
  auto server = StartServer();
  ASSERT_TRUE(server);
  Client client(server->port(), ca_path_);
  Call c;
  c.path = "/hello";
  c.certinfo = true;
  Reply r = client.Do(c);
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.server_cert, Trim(pem_.cert));

  WriteFile(cert_path_, b.cert);
  WriteFile(key_path_, b.key);
  ASSERT_TRUE(server->ReloadCertificates().ok());
  r = client.Do(c);
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.server_cert, Trim(b.cert));

  // A broken file keeps the current certificate.
  WriteFile(cert_path_, "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
  Status s = server->ReloadCertificates();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.reason(), "tls_credentials_invalid");
  // So does a key that belongs to another certificate.
  WriteFile(cert_path_, pem_.cert);
  s = server->ReloadCertificates();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.reason(), "tls_credentials_invalid");
  // And a missing file.
  std::filesystem::remove(key_path_);
  EXPECT_FALSE(server->ReloadCertificates().ok());

  r = client.Do(c);
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.server_cert, Trim(b.cert));
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
