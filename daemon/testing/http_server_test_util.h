// The HTTP server tests' fixture: throwaway certificates, a curl client, a server on loopback.
#ifndef RACKGATE_DAEMON_TESTING_HTTP_SERVER_TEST_UTIL_H_
#define RACKGATE_DAEMON_TESTING_HTTP_SERVER_TEST_UTIL_H_

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

#include "base/log.h"
#include "base/metrics.h"

namespace rackgate::daemon {

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

inline void WriteFile(const std::string& path, const std::string& data) {
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

inline std::string BioString(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

inline void AddExt(X509* x, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) throw std::runtime_error("extension");
  X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
}

enum class KeyKind { kP256, kRsa2048 };

// A self-signed certificate for 127.0.0.1 with the given CN, on a P-256 key
// unless told otherwise.
inline Pem MakeCertificate(const std::string& cn, KeyKind kind = KeyKind::kP256) {
  std::unique_ptr<EVP_PKEY, EvpPkeyFree> key(kind == KeyKind::kRsa2048 ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256"));
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

inline size_t AppendTo(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

struct Stream {
  size_t left;
};

inline size_t ReadStream(char* buf, size_t size, size_t n, void* cls) {
  auto* s = static_cast<Stream*>(cls);
  const size_t k = std::min(size * n, s->left);
  std::memset(buf, 'x', k);
  s->left -= k;
  return k;
}

inline std::string Trim(std::string s) {
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

inline long SslVersion(long min, long max) { return min | max; }

inline int ConnectTcp(uint16_t port) {
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
      json j = {{"id", r.PathParam("id")},
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

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_TESTING_HTTP_SERVER_TEST_UTIL_H_
