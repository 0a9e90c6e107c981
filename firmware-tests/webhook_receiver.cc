// rackgate-webhook-receiver: a webhook receiver for the lab and the tests
// (docs/events.md). Listens on 127.0.0.1 (plain HTTP), checks each POST's
// X-Rackgate-Signature with the secret file and its timestamp's age, and
// appends each verified body as one JSON line to --out. A bad or missing
// signature gets 401 and is not written. Its HMAC is computed here with
// OpenSSL directly, not with rackgate's core, so it checks the daemon's
// signing independently.
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

namespace {

constexpr char kUsage[] =
    "Usage: rackgate-webhook-receiver --secret-file FILE --out FILE\n"
    "         [--port N] [--port-file FILE] [--fail-first N] [--max-skew SECONDS]\n"
    "\n"
    "Receives rackgated's webhook POSTs on 127.0.0.1:N (0, the default, picks a\n"
    "free port; --port-file gets the port once listening). Each delivery's\n"
    "X-Rackgate-Signature (sha256=HEX, HMAC-SHA256 over \"<X-Rackgate-Timestamp>.<body>\"\n"
    "with the secret file's content, trailing newlines dropped) is checked, and\n"
    "the timestamp must be within --max-skew seconds (300) of now. Verified\n"
    "bodies are appended to --out, one JSON line each, and answered 200; a bad\n"
    "signature or an old timestamp gets 401, a body over 1 MiB 413. --fail-first N\n"
    "answers the first N verified deliveries 500 without writing them (to see\n"
    "the daemon retry). Runs until SIGTERM or SIGINT; exits 2 on bad arguments.\n";

constexpr size_t kMaxBody = 1 << 20;

struct Options {
  std::string secret;
  std::string out;
  long fail_first = 0;
  long max_skew = 300;
};

Options g_options;
std::mutex g_mu;
long g_verified = 0;

struct Upload {
  std::string body;
  bool too_big = false;
};

std::string HmacHex(const std::string& key, const std::string& message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len)) {
    return "";
  }
  std::string hex;
  char b[3];
  for (unsigned int i = 0; i < len; ++i) {
    std::snprintf(b, sizeof(b), "%02x", mac[i]);
    hex += b;
  }
  return hex;
}

MHD_Result Answer(MHD_Connection* c, unsigned int status, const std::string& text) {
  MHD_Response* r = MHD_create_response_from_buffer(text.size(), const_cast<char*>(text.data()),
                                                    MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(r, "Content-Type", "text/plain");
  MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

// Whether the delivery is signed with our secret and recent. `why` says what
// failed, for our own stderr.
bool Verified(MHD_Connection* c, const std::string& body, std::string* why) {
  const char* ts = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Rackgate-Timestamp");
  const char* sig = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Rackgate-Signature");
  if (ts == nullptr || sig == nullptr) return *why = "no timestamp or signature header", false;
  char* end = nullptr;
  errno = 0;
  const long long t = std::strtoll(ts, &end, 10);
  if (errno != 0 || end == ts || *end != '\0') return *why = "timestamp is not a number", false;
  const long long now = static_cast<long long>(std::time(nullptr));
  if (t < now - g_options.max_skew || t > now + g_options.max_skew) return *why = "timestamp too old or new", false;
  const std::string want = "sha256=" + HmacHex(g_options.secret, std::string(ts) + "." + body);
  const size_t n = std::strlen(sig);
  if (n != want.size() || CRYPTO_memcmp(sig, want.data(), n) != 0) return *why = "signature mismatch", false;
  return true;
}

MHD_Result Handle(void*, MHD_Connection* c, const char* url, const char* method, const char*, const char* data,
                  size_t* size, void** ctx) {
  if (*ctx == nullptr) {
    *ctx = new Upload();
    return MHD_YES;
  }
  auto* up = static_cast<Upload*>(*ctx);
  if (*size > 0) {
    if (up->body.size() + *size > kMaxBody) {
      up->too_big = true;
    } else {
      up->body.append(data, *size);
    }
    *size = 0;
    return MHD_YES;
  }
  if (std::strcmp(method, "POST") != 0) return Answer(c, 405, "POST only\n");
  if (up->too_big) return Answer(c, 413, "too big\n");
  std::string why;
  if (!Verified(c, up->body, &why)) {
    std::fprintf(stderr, "webhook-receiver: %s %s refused: %s\n", method, url, why.c_str());
    return Answer(c, 401, "bad signature\n");
  }
  std::lock_guard<std::mutex> lock(g_mu);
  if (++g_verified <= g_options.fail_first) return Answer(c, 500, "failing on purpose\n");
  // One line per event: the body is compact JSON (newlines in strings are
  // escaped), appended with O_APPEND so a reader never sees half a line.
  std::string line = up->body;
  line.erase(line.find_last_not_of("\r\n") + 1);
  line.push_back('\n');
  const int fd = ::open(g_options.out.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    if (fd >= 0) ::close(fd);
    return Answer(c, 500, "cannot write\n");
  }
  ::close(fd);
  return Answer(c, 200, "ok\n");
}

void Done(void*, MHD_Connection*, void** ctx, MHD_RequestTerminationCode) {
  delete static_cast<Upload*>(*ctx);
  *ctx = nullptr;
}

int Usage(const char* why) {
  if (why) std::fprintf(stderr, "rackgate-webhook-receiver: %s\n\n", why);
  std::fputs(kUsage, why ? stderr : stdout);
  return why ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string secret_file, port_file;
  long port = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--help" || a == "-h") return Usage(nullptr);
    if (a == "--secret-file" && (v = value())) secret_file = v;
    else if (a == "--out" && (v = value())) g_options.out = v;
    else if (a == "--port" && (v = value())) port = std::strtol(v, nullptr, 10);
    else if (a == "--port-file" && (v = value())) port_file = v;
    else if (a == "--fail-first" && (v = value())) g_options.fail_first = std::strtol(v, nullptr, 10);
    else if (a == "--max-skew" && (v = value())) g_options.max_skew = std::strtol(v, nullptr, 10);
    else return Usage(("bad argument " + a).c_str());
  }
  if (secret_file.empty() || g_options.out.empty()) return Usage("--secret-file and --out are required");
  if (port < 0 || port > 65535) return Usage("--port is 0..65535");
  std::ifstream f(secret_file, std::ios::binary);
  if (!f) return Usage("cannot read the secret file");
  std::ostringstream ss;
  ss << f.rdbuf();
  g_options.secret = ss.str();
  while (!g_options.secret.empty() && (g_options.secret.back() == '\n' || g_options.secret.back() == '\r')) {
    g_options.secret.pop_back();
  }
  if (g_options.secret.empty()) return Usage("the secret file is empty");

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // loopback only: plain HTTP never leaves the host
  addr.sin_port = htons(static_cast<uint16_t>(port));
  MHD_Daemon* d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, nullptr, nullptr,
                                   &Handle, nullptr, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_NOTIFY_COMPLETED,
                                   &Done, nullptr, MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
  if (d == nullptr) {
    std::fprintf(stderr, "rackgate-webhook-receiver: cannot listen on 127.0.0.1:%ld\n", port);
    return 1;
  }
  const unsigned bound = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
  if (!port_file.empty()) {
    // Written whole, then renamed: a waiting script never reads half a port.
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << bound << "\n";
    std::rename(tmp.c_str(), port_file.c_str());
  }
  std::fprintf(stderr, "rackgate-webhook-receiver: listening on 127.0.0.1:%u, writing %s\n", bound,
               g_options.out.c_str());
  int sig = 0;
  sigwait(&signals, &sig);
  MHD_stop_daemon(d);
  return 0;
}
