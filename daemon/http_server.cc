// rackgated's server on libmicrohttpd 0.9.75: the MHD callbacks and the listeners' lifecycle.
//
// Accept, TLS, limits, dispatch to Routers, access log, metrics, graceful
// stop and certificate reload; the credentials, sockets and handler threads
// it uses have their own files (tls_credentials, listen_sockets,
// handler_pool).
#include "daemon/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#include <unordered_map>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>

#include "daemon/handler_pool.h"
#include "daemon/http_framing.h"
#include "daemon/listen_sockets.h"
#include "base/log.h"
#include "base/metrics.h"
#include "daemon/tls_credentials.h"
#include "wire/refusal.h"

namespace rackgate::daemon {

namespace {

using Clock = std::chrono::steady_clock;

// TLS 1.2 and 1.3, AEAD ciphers only, in the server's order: AES-128-GCM
// first, whose SHA-256 key schedule and transcript hash run on the CPU's SHA
// extensions, where SHA-384's do not (under a boot storm's burst of new
// connections, SHA-512 compression was a fifth of rackgated's time).
// X25519 first among the groups: it is the one key share that OpenSSL's,
// Go's and GnuTLS's clients send by default. With NORMAL's order (P-256
// first) and the server's precedence, every TLS 1.3 handshake took a
// HelloRetryRequest: a second round trip and a second key exchange.
// SECURITY: handshake signatures are named one by one, SHA-256 and up:
// NORMAL keeps rsa_pkcs1_sha1 and ecdsa_sha1 for TLS 1.2 (issue 27), and an
// allow-list cannot grow a SHA-1, MD5 or DSA one back with another GnuTLS's
// NORMAL. This is NORMAL's list and order without its two SHA-1 entries;
// Go's crypto/tls (Ignition), OpenSSL 3 (curl, the agent) and GnuTLS
// clients all offer SHA-256 ones. A TLS 1.2 client that sends no
// signature_algorithms (RFC 5246 then implies SHA-1) cannot connect.
constexpr char kTlsPriorities[] =
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM:+CHACHA20-POLY1305:+AES-256-GCM:"
    "-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:"
    "-SIGN-ALL:"
    "+SIGN-RSA-SHA256:+SIGN-RSA-PSS-SHA256:+SIGN-RSA-PSS-RSAE-SHA256:"
    "+SIGN-ECDSA-SHA256:+SIGN-ECDSA-SECP256R1-SHA256:+SIGN-EdDSA-Ed25519:"
    "+SIGN-RSA-SHA384:+SIGN-RSA-PSS-SHA384:+SIGN-RSA-PSS-RSAE-SHA384:"
    "+SIGN-ECDSA-SHA384:+SIGN-ECDSA-SECP384R1-SHA384:+SIGN-EdDSA-Ed448:"
    "+SIGN-RSA-SHA512:+SIGN-RSA-PSS-SHA512:+SIGN-RSA-PSS-RSAE-SHA512:"
    "+SIGN-ECDSA-SHA512:+SIGN-ECDSA-SECP521R1-SHA512:"
    "%SERVER_PRECEDENCE";
// After the limit, an upload is read and dropped up to this much more so the
// client can still be told 413; past that the connection is closed.
constexpr uint64_t kOversizeDrainBytes = 1 << 20;
constexpr unsigned kAdminConnectionLimit = 64;
constexpr int kDrainRetryAfterSeconds = 5;

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("http");
  return log;
}

struct MhdResponseDeleter {
  void operator()(MHD_Response* r) const { MHD_destroy_response(r); }
};
using MhdResponse = std::unique_ptr<MHD_Response, MhdResponseDeleter>;

// A client-chosen path, capped for one log line. Its control bytes are
// escaped by the log sink itself (base/log.h), as every message's are.
std::string LogSafe(const std::string& s) {
  constexpr size_t kMax = 256;
  if (s.size() <= kMax) return s;
  return s.substr(0, kMax) + "...";
}

struct Listener {
  HttpServer::Impl* server = nullptr;
  bool admin = false;
  bool plain = false;  // the metrics listener: plain HTTP on TCP
  std::string name;  // "127.0.0.1:22623", "unix:/run/rackgate/admin.sock"
  const Router* router = nullptr;
  MHD_Daemon* daemon = nullptr;
};

// Per connection (MHD's socket_context).
struct ConnectionContext {
  Listener* listener = nullptr;
  std::shared_ptr<const TlsCredentials> credentials;  // pinned at handshake
};

// Per request (MHD's con_cls).
struct RequestState {
  Listener* listener = nullptr;
  Clock::time_point start;
  std::string method;
  std::string path;
  std::string peer;
  std::string body;
  bool too_large = false;
  uint64_t dropped = 0;
  unsigned status = 0;  // 0 until a response is queued
  bool close_connection = false;  // the answer closes the connection
  std::string route = "unmatched";
  std::map<std::string, std::string> params;  // the router's, for the refusal log
  std::optional<PeerCred> cred;  // the admin socket's peer
  // Handed to the handler pool: the connection is suspended until `ready`.
  bool dispatched = false;
  bool ready = false;
  Response response;  // the handler's answer, once ready
};



}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  uint16_t port = 0;
  uint16_t metrics_port = 0;
  std::optional<gid_t> admin_gid;
  std::optional<UnixSocket> admin_socket;
  std::vector<std::unique_ptr<Listener>> listeners;

  mutable std::mutex credentials_mu;
  std::shared_ptr<const TlsCredentials> credentials;

  std::atomic<bool> draining{false};
  std::atomic<bool> cut_off{false};  // the drain timed out: answers are no longer sent
  mutable std::mutex flight_mu;
  std::condition_variable flight_cv;
  size_t in_flight = 0;

  std::unique_ptr<HandlerPool> handlers;  // null: handlers run on the event loop

  std::mutex stop_mu;
  bool started = false;  // every listener came up
  bool stopped = false;

  std::shared_ptr<const TlsCredentials> CurrentCredentials() const {
    std::lock_guard lock(credentials_mu);
    return credentials;
  }

  void BeginRequest() {
    std::lock_guard lock(flight_mu);
    ++in_flight;
  }
  void EndRequest() {
    {
      std::lock_guard lock(flight_mu);
      --in_flight;
    }
    flight_cv.notify_all();
  }

  Status StartListener(std::unique_ptr<Listener> listener, int fd);
  void Shutdown();
  ~Impl() { Shutdown(); }
};

namespace {

// Connections of TLS listeners, so that the certificate callback, which
// GnuTLS calls with nothing but the session, can find its connection's
// context. MHD 0.9.75 stores its MHD_Connection* as the GnuTLS session
// pointer (daemon.c, new_connection_prepare_); looking it up here instead of
// casting it blindly keeps a different MHD from crashing us: an unknown
// pointer fails the handshake.
std::mutex g_tls_connections_mu;
std::unordered_map<const void*, ConnectionContext*> g_tls_connections;

void MhdLogger(void* cls, const char* format, va_list ap) {
  (void)cls;
  try {
    char buf[512];
    va_list copy;
    va_copy(copy, ap);
    const int n = std::vsnprintf(buf, sizeof buf, format, copy);
    va_end(copy);
    if (n < 0) return;
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    Log()->info("mhd: {}", line);
  } catch (...) {
  }
}

void NotifyConnection(void* cls, MHD_Connection* connection, void** socket_context,
                      MHD_ConnectionNotificationCode code) {
  auto* listener = static_cast<Listener*>(cls);
  try {
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      auto context = std::make_unique<ConnectionContext>();
      context->listener = listener;
      if (!listener->admin && !listener->plain) {
        std::lock_guard lock(g_tls_connections_mu);
        g_tls_connections[connection] = context.get();
      }
      *socket_context = context.release();
      return;
    }
    std::unique_ptr<ConnectionContext> context(static_cast<ConnectionContext*>(*socket_context));
    *socket_context = nullptr;
    if (!listener->admin && !listener->plain) {
      std::lock_guard lock(g_tls_connections_mu);
      g_tls_connections.erase(connection);
    }
  } catch (const std::exception& e) {
    Log()->error("connection bookkeeping failed: {}", e.what());
  } catch (...) {
  }
}

// gnutls_certificate_retrieve_function2: the current chain and key.
int RetrieveCertificate(gnutls_session_t session, const gnutls_datum_t* req_ca_dn, int nreqs,
                        const gnutls_pk_algorithm_t* pk_algos, int pk_algos_length,
                        gnutls_pcert_st** pcert, unsigned int* pcert_length,
                        gnutls_privkey_t* privkey) {
  (void)req_ca_dn;
  (void)nreqs;
  (void)pk_algos;
  (void)pk_algos_length;
  try {
    const void* connection = gnutls_session_get_ptr(session);
    ConnectionContext* context = nullptr;
    {
      std::lock_guard lock(g_tls_connections_mu);
      auto it = g_tls_connections.find(connection);
      if (it != g_tls_connections.end()) context = it->second;
    }
    if (context == nullptr) {
      Log()->error("TLS handshake on an unknown connection refused");
      return -1;
    }
    if (!context->credentials) context->credentials = context->listener->server->CurrentCredentials();
    const TlsCredentials& c = *context->credentials;
    *pcert = const_cast<gnutls_pcert_st*>(c.chain.data());
    *pcert_length = static_cast<unsigned int>(c.chain.size());
    *privkey = c.key;
    return 0;
  } catch (...) {
    return -1;
  }
}

MHD_Result CollectHeader(void* cls, MHD_ValueKind kind, const char* key, const char* value) {
  (void)kind;
  auto* headers = static_cast<Headers*>(cls);
  const std::string v = value != nullptr ? value : "";
  auto [it, inserted] = headers->emplace(key, v);
  // A repeated field is a comma-separated list (RFC 9110 §5.3).
  if (!inserted) it->second += ", " + v;
  return MHD_YES;
}

MHD_Result CollectField(void* cls, MHD_ValueKind kind, const char* key, const char* value) {
  (void)kind;
  static_cast<std::vector<HeaderField>*>(cls)->push_back({key, value != nullptr ? value : ""});
  return MHD_YES;
}

MHD_Result CollectQuery(void* cls, MHD_ValueKind kind, const char* key, const char* value) {
  (void)kind;
  // The first occurrence of a repeated argument wins.
  static_cast<std::map<std::string, std::string>*>(cls)->emplace(key, value != nullptr ? value : "");
  return MHD_YES;
}

// MHD's free callback of a response's body: drops the response's reference
// to the shared buffer (BuildResponse).
void ReleaseBody(void* cls) { delete static_cast<std::shared_ptr<const std::string>*>(cls); }

// Builds the MHD response; null when MHD refuses a header (a handler bug) or
// memory runs out. The body is never copied: a string body moves into a
// shared buffer (response->shared_body, so the caller still reads it), and
// MHD holds a reference to that buffer until it destroys the response, which
// is after the last byte was sent or the connection was dropped. Answers in
// flight thus hold one copy of a body that many share (the agent bundle),
// whatever the number of clients that do not read (issue 40).
MhdResponse BuildResponse(Response* response, bool close) {
  if (!response->shared_body) {
    response->shared_body = std::make_shared<const std::string>(std::move(response->body));
    response->body.clear();
  }
  auto reference = std::make_unique<std::shared_ptr<const std::string>>(response->shared_body);
  const std::string& bytes = **reference;
  MhdResponse r(MHD_create_response_from_buffer_with_free_callback_cls(
      bytes.size(), const_cast<char*>(bytes.data()), &ReleaseBody, reference.get()));
  if (!r) return nullptr;  // MHD calls no callback for a response it did not make
  reference.release();     // MHD's now: ReleaseBody frees it
  if (!response->content_type.empty() &&
      MHD_add_response_header(r.get(), MHD_HTTP_HEADER_CONTENT_TYPE,
                              response->content_type.c_str()) != MHD_YES) {
    return nullptr;
  }
  for (const auto& [name, value] : response->headers) {
    if (MHD_add_response_header(r.get(), name.c_str(), value.c_str()) != MHD_YES) return nullptr;
  }
  if (close && MHD_add_response_header(r.get(), MHD_HTTP_HEADER_CONNECTION, "close") != MHD_YES) {
    return nullptr;
  }
  return r;
}

constexpr char kRequestsHelp[] =
    "HTTP requests by method, route pattern and status (\"aborted\": not delivered).";
constexpr char kDurationHelp[] = "Time from request headers to the last byte of the response.";

// The fixed answer to a handler's exception (CWE-209: the cause stays in the
// log).
Response InternalError() {
  Response r = Response::Json(500, std::string(wire::kInternalRefusalBody));
  r.reason = "internal";
  return r;
}

// Observability: bounded label values. The method as a label only when it is
// a standard one (a client may send any token).
std::string MethodLabel(const std::string& method) {
  for (const char* m : {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    if (method == m) return method;
  }
  return "other";
}

// The pattern of Router::Dispatch's "METHOD PATTERN" (or the pattern alone,
// for a 405); "other" when no route matched.
std::string RouteLabel(const std::string& dispatched) {
  if (dispatched.empty() || dispatched == "unmatched") return "other";
  const size_t space = dispatched.find(' ');
  return space == std::string::npos ? dispatched : dispatched.substr(space + 1);
}

void ReportAdminRefusal(const RequestState& state, const Response& response) {
  const auto& hook = state.listener->server->options.on_admin_refusal;
  if (!state.listener->admin || response.status < 400 || !hook) return;
  AdminRefusal r;
  r.method = MethodLabel(state.method);
  r.route = RouteLabel(state.route);
  r.status = response.status;
  r.reason = response.reason;
  r.peer = state.cred;
  r.params = state.params;
  try {
    hook(r);
  } catch (const std::exception& e) {
    Log()->error("admin refusal hook failed: {}", e.what());
  }
}

MHD_Result Queue(MHD_Connection* connection, RequestState* state, Response response) {
  const bool close = state->close_connection || state->listener->server->draining.load();
  if (response.status < 200 || response.status > 599) {
    Log()->error("handler for {} answered status {}", state->route, response.status);
    response = InternalError();
  }
  MhdResponse r = BuildResponse(&response, close);
  if (!r) {
    Log()->error("response of {} refused by MHD (invalid header?)", state->route);
    response = InternalError();
    r = BuildResponse(&response, close);
    if (!r) return MHD_NO;
  }
  state->status = static_cast<unsigned>(response.status);
  ReportAdminRefusal(*state, response);
  // MHD keeps its own reference to a queued response; ours goes at scope
  // exit.
  return MHD_queue_response(connection, state->status, r.get());
}

std::optional<PeerCred> PeerCredentials(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info == nullptr) return std::nullopt;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(info->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
      len != sizeof cred) {
    return std::nullopt;
  }
  PeerCred out{cred.pid, cred.uid, cred.gid, {}};
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 2; ++attempt) {
    socklen_t glen = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(info->connect_fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &glen) == 0) {
      groups.resize(glen / sizeof(gid_t));
      out.groups = std::move(groups);
      break;
    }
    // ERANGE: glen says how much room it needs (NGROUPS_MAX bounds it).
    if (errno != ERANGE || glen / sizeof(gid_t) > 65536) break;
    groups.resize(glen / sizeof(gid_t));
  }
  return out;
}

// How long ago the connection's last bytes arrived from the peer
// (TCP_INFO's tcpi_last_data_recv, in the kernel's clock ticks: a few ms of
// resolution); zero when the socket is not TCP (the admin socket) or the
// kernel does not say. When the event loop gets to a request late, its
// bytes waited in the socket's receive buffer: this is that wait, which no
// timestamp taken in user space can see.
Clock::duration SinceLastReceived(MHD_Connection* connection, const Listener& listener) {
  if (listener.admin) return Clock::duration::zero();
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info == nullptr) return Clock::duration::zero();
  tcp_info ti{};
  socklen_t len = sizeof ti;
  if (getsockopt(info->connect_fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
      len < offsetof(tcp_info, tcpi_last_data_recv) + sizeof ti.tcpi_last_data_recv) {
    return Clock::duration::zero();
  }
  return std::chrono::milliseconds(ti.tcpi_last_data_recv);
}

// Runs the route's handler; never throws.
Response Dispatch(RequestState* state, Request request) {
  try {
    return state->listener->router->Dispatch(std::move(request), &state->route, &state->params);
  } catch (const std::exception& e) {
    Log()->error("{} {} ({}) failed: {}", state->method, LogSafe(state->path), state->route,
                 e.what());
  } catch (...) {
    Log()->error("{} {} ({}) failed: unknown exception", state->method, LogSafe(state->path),
                 state->route);
  }
  return InternalError();
}

MHD_Result Respond(MHD_Connection* connection, RequestState* state) {
  if (state->too_large) {
    return Queue(connection, state,
                 Response::Error(413, "body_too_large", "request body too large"));
  }
  Request request;
  request.method = state->method;
  request.path = state->path;
  MHD_get_connection_values(connection, MHD_HEADER_KIND, &CollectHeader, &request.headers);
  MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &CollectQuery, &request.query);
  request.body = std::move(state->body);
  request.peer_address = state->listener->admin ? "unix" : state->peer;
  request.admin = state->listener->admin;
  if (request.admin) request.peer_cred = PeerCredentials(connection);

  // The appliance's queueing delay, for admission: how long the request's
  // last bytes waited for this thread's event loop, plus, with a handler
  // pool, the wait for a handler thread.
  const Clock::duration waited = SinceLastReceived(connection, *state->listener);

  // By default handlers run here, on the MHD worker thread that read the
  // request, which also sends the answer: no hand-off to another thread. The
  // admin socket and the metrics listener always answer on their own loop.
  HandlerPool* pool =
      state->listener->admin || state->listener->plain ? nullptr : state->listener->server->handlers.get();
  if (pool == nullptr) {
    request.queued = std::chrono::duration_cast<std::chrono::microseconds>(waited);
    return Queue(connection, state, Dispatch(state, std::move(request)));
  }
  // Off the event loop: suspended first, so that the resume cannot come
  // before it; MHD calls AccessHandler again once resumed, and the answer is
  // queued there.
  state->dispatched = true;
  MHD_suspend_connection(connection);
  pool->Post([connection, state, request = std::move(request), handed = Clock::now(), waited]() mutable {
    request.queued = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - handed + waited);
    Response response = Dispatch(state, std::move(request));
    // After the drain timeout an answer is not sent; the connection is
    // resumed only to be closed.
    if (!state->listener->server->cut_off.load()) {
      state->response = std::move(response);
      state->ready = true;
    }
    MHD_resume_connection(connection);
  });
  return MHD_YES;
}

// While draining, a new connection is closed as soon as it is accepted; the
// ones in flight finish. (MHD_quiesce_daemon would stop the accepts instead,
// but with a thread pool on epoll it raced the workers, which take the listen
// socket out of their epoll sets at the connection limit: MHD 0.9.75 then
// panicked with "Failed to remove listen FD from epoll set". The listener is
// on poll now; the accept policy stays, as it works on either.)
MHD_Result AcceptPolicy(void* cls, const sockaddr*, socklen_t) {
  return static_cast<Listener*>(cls)->server->draining ? MHD_NO : MHD_YES;
}

size_t BodyLimit(const Listener& l) {
  return l.admin ? l.server->options.admin_max_body_bytes : l.server->options.max_body_bytes;
}

MHD_Result AccessHandler(void* cls, MHD_Connection* connection, const char* url,
                         const char* method, const char* version, const char* upload_data,
                         size_t* upload_data_size, void** con_cls) {
  auto* listener = static_cast<Listener*>(cls);
  try {
    auto* state = static_cast<RequestState*>(*con_cls);
    if (state == nullptr) {
      // Headers are in; no body has been read yet.
      auto owned = std::make_unique<RequestState>();
      owned->listener = listener;
      // From the headers' arrival: the time they waited for the event loop
      // counts as the request's (rackgate_http_request_duration_seconds).
      owned->start = Clock::now() - SinceLastReceived(connection, *listener);
      owned->method = method;
      owned->path = url;
      if (listener->admin) {
        const std::optional<PeerCred> cred = PeerCredentials(connection);
        owned->cred = cred;
        owned->peer = cred.has_value() ? "unix:uid=" + std::to_string(cred->uid) +
                                             ",pid=" + std::to_string(cred->pid)
                                       : "unix";
      } else {
        const MHD_ConnectionInfo* info =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        owned->peer = FormatPeer(info != nullptr ? info->client_addr : nullptr);
      }
      state = owned.release();
      *con_cls = state;
      listener->server->BeginRequest();

      // SECURITY: a request whose body length is ambiguous is refused before
      // MHD reads its body, and the connection closed: whatever follows on
      // it might be the rest of the body or a smuggled request (RFC 9112
      // §6.3). MHD gives every occurrence of a repeated field here.
      std::vector<HeaderField> fields;
      MHD_get_connection_values(connection, MHD_HEADER_KIND, &CollectField, &fields);
      if (Status framing = CheckFraming(fields, version != nullptr ? version : ""); !framing.ok()) {
        Log()->info("{} {} from {}: {}; refused, connection closed", state->method, LogSafe(state->path),
                    state->peer, framing.message());
        state->close_connection = true;
        return Queue(connection, state, Response::Error(400, framing.reason(), framing.message()));
      }

      if (listener->server->draining.load()) {
        return Queue(connection, state,
                     Response::Error(503, "shutting_down", "the appliance is restarting",
                                     kDrainRetryAfterSeconds));
      }
      // A declared length over the limit is refused before its body is read
      // (and before a 100 Continue is sent).
      const char* length =
          MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
      if (length != nullptr) {
        uint64_t n = 0;
        const char* end = length + std::strlen(length);
        auto [ptr, ec] = std::from_chars(length, end, n);
        if (ec == std::errc::result_out_of_range ||
            (ec == std::errc() && ptr == end && n > BodyLimit(*listener))) {
          state->too_large = true;
          return Respond(connection, state);
        }
      }
      return MHD_YES;
    }

    if (*upload_data_size > 0) {
      const size_t n = *upload_data_size;
      *upload_data_size = 0;
      if (state->status != 0) return MHD_YES;  // answered early: drop the rest
      if (!state->too_large && state->body.size() + n > BodyLimit(*listener)) {
        // SECURITY: checked on every piece of a chunked upload, not only
        // against Content-Length; what was stored is released at once.
        state->too_large = true;
        state->dropped = state->body.size();
        std::string().swap(state->body);
      }
      if (state->too_large) {
        state->dropped += n;
        if (state->dropped > BodyLimit(*listener) + kOversizeDrainBytes) {
          Log()->info("{} {} from {}: oversized upload still streaming, connection closed",
                      state->method, LogSafe(state->path), state->peer);
          return MHD_NO;
        }
        return MHD_YES;
      }
      state->body.append(upload_data, n);
      return MHD_YES;
    }

    if (state->ready) {
      // Back from the handler pool (MHD's resume orders the handler's writes
      // before this read).
      state->ready = false;
      return Queue(connection, state, std::move(state->response));
    }
    if (state->dispatched) return listener->server->cut_off.load() ? MHD_NO : MHD_YES;
    if (state->status != 0) return MHD_YES;
    return Respond(connection, state);
  } catch (const std::exception& e) {
    // Only allocation or MHD bookkeeping can get here (handlers are caught
    // in Respond); closing the connection is all that is left.
    Log()->error("request handling failed: {}", e.what());
    return MHD_NO;
  } catch (...) {
    return MHD_NO;
  }
}

const char* TerminationName(MHD_RequestTerminationCode code) {
  switch (code) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK:
      return "ok";
    case MHD_REQUEST_TERMINATED_WITH_ERROR:
      return "error";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED:
      return "timeout";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN:
      return "shutdown";
    case MHD_REQUEST_TERMINATED_READ_ERROR:
      return "read_error";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
      return "client_abort";
  }
  return "unknown";
}

void RequestCompleted(void* cls, MHD_Connection* connection, void** con_cls,
                      MHD_RequestTerminationCode code) {
  (void)connection;
  auto* listener = static_cast<Listener*>(cls);
  std::unique_ptr<RequestState> state(static_cast<RequestState*>(*con_cls));
  *con_cls = nullptr;
  if (!state) return;
  try {
    const double seconds = std::chrono::duration<double>(Clock::now() - state->start).count();
    const std::string status = state->status != 0 ? std::to_string(state->status) : "-";
    if (code == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
      Log()->info("{} {} {} {} {:.2f}ms peer={}", listener->admin ? "admin" : "public",
                  state->method, LogSafe(state->path), status, seconds * 1000, state->peer);
    } else {
      Log()->info("{} {} {} {} {:.2f}ms peer={} terminated={}", listener->admin ? "admin" : "public",
                  state->method, LogSafe(state->path), status, seconds * 1000, state->peer,
                  TerminationName(code));
    }
    Metrics* metrics = listener->server->options.metrics;
    if (metrics != nullptr) {
      // A response that was never fully delivered counts as "aborted".
      const bool delivered = code == MHD_REQUEST_TERMINATED_COMPLETED_OK && state->status != 0;
      const std::string method = MethodLabel(state->method), route = RouteLabel(state->route);
      metrics->CounterInc("rackgate_http_requests_total", kRequestsHelp,
                          {{"method", method}, {"route", route}, {"status", delivered ? status : "aborted"}});
      metrics->HistogramObserve("rackgate_http_request_duration_seconds", kDurationHelp,
                                {{"method", method}, {"route", route}}, seconds);
    }
  } catch (const std::exception& e) {
    Log()->error("request accounting failed: {}", e.what());
  } catch (...) {
  }
  listener->server->EndRequest();
}

}  // namespace

Status HttpServer::Impl::StartListener(std::unique_ptr<Listener> listener, int fd) {
  // poll(), not epoll: MHD 0.9.75 on epoll calls into GnuTLS again and again
  // while a TLS handshake waits for the peer (recv, EAGAIN), which made a
  // handshake cost rackgated ~4 ms of CPU; on poll 0.6 ms, what gnutls-serv
  // itself takes (`openssl s_time -new`, docs/performance.md).
  // Why, in MHD's source: a connection leaves epoll's "ready" list only when
  // MHD's own recv sees EAGAIN; gnutls_handshake reads the socket itself, so
  // a handshake waiting for the peer stays "ready" and MHD_get_timeout()
  // answers 0 while any does. An external loop driving MHD_USE_EPOLL would
  // spin the same way (or, ignoring that 0, stall a body larger than MHD's
  // read buffer, which also relies on it). StalledHandshakesCostNoCpu
  // (http_server_tls_test.cc) fails on epoll.
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
  std::vector<MHD_OptionItem> items;
  items.push_back({MHD_OPTION_LISTEN_SOCKET, fd, nullptr});
  items.push_back({MHD_OPTION_CONNECTION_TIMEOUT, options.connection_timeout_seconds, nullptr});
  if (listener->admin) {
    items.push_back({MHD_OPTION_CONNECTION_LIMIT, kAdminConnectionLimit, nullptr});
  } else if (listener->plain) {
    items.push_back({MHD_OPTION_CONNECTION_LIMIT, kAdminConnectionLimit, nullptr});
    if (options.per_client_connections > 0) {
      items.push_back({MHD_OPTION_PER_IP_CONNECTION_LIMIT, options.per_client_connections, nullptr});
    }
  } else {
    flags |= MHD_USE_TLS;
    items.push_back({MHD_OPTION_CONNECTION_LIMIT, options.max_connections, nullptr});
    if (options.per_client_connections > 0) {
      items.push_back({MHD_OPTION_PER_IP_CONNECTION_LIMIT, options.per_client_connections, nullptr});
    }
    if (options.threads > 1) {
      items.push_back({MHD_OPTION_THREAD_POOL_SIZE, options.threads, nullptr});
    }
    if (options.handler_threads > 0) flags |= MHD_ALLOW_SUSPEND_RESUME;
    items.push_back({MHD_OPTION_HTTPS_PRIORITIES, 0, const_cast<char*>(kTlsPriorities)});
    gnutls_certificate_retrieve_function2* retrieve = &RetrieveCertificate;
    items.push_back({MHD_OPTION_HTTPS_CERT_CALLBACK, 0, reinterpret_cast<void*>(retrieve)});
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});

  Listener* l = listener.get();
  listeners.push_back(std::move(listener));
  // From here the listening socket is MHD's: it closes it on most of its own
  // failure paths, so it is never closed here on failure (at worst one
  // socket leaks on a start that fails anyway).
  l->daemon = MHD_start_daemon(
      flags, 0, &AcceptPolicy, l, &AccessHandler, l,
      MHD_OPTION_EXTERNAL_LOGGER, &MhdLogger, l,
      MHD_OPTION_NOTIFY_COMPLETED, &RequestCompleted, l,
      MHD_OPTION_NOTIFY_CONNECTION, &NotifyConnection, l,
      MHD_OPTION_ARRAY, items.data(),
      MHD_OPTION_END);
  if (l->daemon == nullptr) {
    return Status::IoError("listen_failed", "libmicrohttpd could not start on " + l->name);
  }
  return Status::Ok();
}

void HttpServer::Impl::Shutdown() {
  std::lock_guard stop_lock(stop_mu);
  if (stopped) return;
  stopped = true;
  draining = true;
  {
    std::unique_lock lock(flight_mu);
    if (!flight_cv.wait_for(lock, options.drain_timeout, [this] { return in_flight == 0; })) {
      cut_off = true;
      Log()->warn("drain timeout: {} request(s) still in flight are cut off", in_flight);
    }
  }
  // Handlers still running finish and resume their connections before MHD
  // stops: a suspended connection must not outlive its daemon.
  if (handlers) handlers->Stop();
  for (auto& l : listeners) {
    if (l->daemon != nullptr) MHD_stop_daemon(l->daemon);
    l->daemon = nullptr;
  }
  if (admin_socket.has_value()) {
    // Only our own socket file: a successor may already have replaced it.
    struct stat st {};
    if (lstat(options.admin_socket_path.c_str(), &st) == 0 && st.st_dev == admin_socket->dev &&
        st.st_ino == admin_socket->ino) {
      unlink(options.admin_socket_path.c_str());
    }
    admin_socket.reset();
  }
  if (started) Log()->info("stopped");
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options) {
  if (options.listen_addresses.empty()) {
    return Status::InvalidArgument("listen_address_invalid", "no listen address configured");
  }
  if (options.threads == 0) {
    return Status::InvalidArgument("threads_invalid", "threads must be at least 1");
  }
  if (options.tls_certificate_path.empty() || options.tls_key_path.empty()) {
    return Status::InvalidArgument("tls_credentials_invalid",
                                   "a TLS certificate and key are required");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  const HttpServerOptions& o = impl->options;

  auto credentials = LoadTlsCredentials(o.tls_certificate_path, o.tls_key_path);
  if (!credentials.ok()) return credentials.status();
  impl->credentials = *credentials;
  if (o.handler_threads > 0) impl->handlers = std::make_unique<HandlerPool>(o.handler_threads);

  uint16_t port = o.port;
  for (const auto& address : o.listen_addresses) {
    uint16_t bound = 0;
    auto fd = BindTcp(address, port, &bound);
    if (!fd.ok()) return fd.status();
    port = bound;  // with port 0, every address gets the first one's port
    auto listener = std::make_unique<Listener>();
    listener->server = impl.get();
    listener->router = &impl->options.router;
    listener->name = (address.find(':') != std::string::npos ? "[" + address + "]" : address) + ":" +
                     std::to_string(bound);
    Status s = impl->StartListener(std::move(listener), *fd);
    if (!s.ok()) return s;
  }
  impl->port = port;

  if (!o.metrics_address.empty()) {
    uint16_t bound = 0;
    auto fd = BindTcp(o.metrics_address, o.metrics_port, &bound);
    if (!fd.ok()) return fd.status();
    auto listener = std::make_unique<Listener>();
    listener->server = impl.get();
    listener->plain = true;
    listener->router = &impl->options.metrics_router;
    listener->name = "http://" +
                     (o.metrics_address.find(':') != std::string::npos ? "[" + o.metrics_address + "]"
                                                                       : o.metrics_address) +
                     ":" + std::to_string(bound);
    impl->metrics_port = bound;
    Status s = impl->StartListener(std::move(listener), *fd);
    if (!s.ok()) return s;
  }

  if (!o.admin_socket_path.empty()) {
    impl->admin_gid = LookupGroup(o.admin_group);
    if (!impl->admin_gid.has_value() && !o.admin_group.empty()) {
      Log()->warn("group '{}' does not exist: admin socket {} keeps the daemon's group",
                  o.admin_group, o.admin_socket_path);
    }
    auto sock = BindUnix(o.admin_socket_path, impl->admin_gid);
    if (!sock.ok()) return sock.status();
    impl->admin_socket = *sock;
    auto listener = std::make_unique<Listener>();
    listener->server = impl.get();
    listener->admin = true;
    listener->router = &impl->options.admin_router;
    listener->name = "unix:" + o.admin_socket_path;
    Status s = impl->StartListener(std::move(listener), sock->fd);
    if (!s.ok()) return s;
  }

  if (o.metrics != nullptr) {
    o.metrics->Declare("rackgate_http_requests_total", kRequestsHelp, MetricType::kCounter,
                       {"method", "route", "status"});
    // Fine below 100 ms, where a step's p99 target lives (docs/observability.md).
    o.metrics->DefineHistogram("rackgate_http_request_duration_seconds", kDurationHelp,
                               {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
                                0.075, 0.1, 0.15, 0.2, 0.25, 0.5, 1, 2.5, 5, 10});
    o.metrics->Declare("rackgate_http_request_duration_seconds", kDurationHelp, MetricType::kHistogram,
                       {"method", "route"});
  }
  impl->started = true;
  std::string names;
  for (const auto& l : impl->listeners) names += (names.empty() ? "" : ", ") + l->name;
  Log()->info("listening on {} ({} threads, {} handler threads, body limit {} bytes ({} on the admin socket), "
              "idle timeout {} s)",
              names, o.threads, o.handler_threads, o.max_body_bytes, o.admin_max_body_bytes,
              o.connection_timeout_seconds);
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const { return impl_->port; }

uint16_t HttpServer::metrics_port() const { return impl_->metrics_port; }

std::optional<gid_t> HttpServer::admin_group_id() const { return impl_->admin_gid; }

Status HttpServer::ReloadCertificates() {
  auto credentials =
      LoadTlsCredentials(impl_->options.tls_certificate_path, impl_->options.tls_key_path);
  if (!credentials.ok()) {
    Log()->error("certificate reload failed, keeping the current certificate: {}",
                 credentials.status().ToString());
    return credentials.status();
  }
  {
    std::lock_guard lock(impl_->credentials_mu);
    impl_->credentials = *credentials;
  }
  Log()->info("certificate reloaded from {}", impl_->options.tls_certificate_path);
  return Status::Ok();
}

void HttpServer::Stop() { impl_->Shutdown(); }

size_t HttpServer::requests_in_flight() const {
  std::lock_guard lock(impl_->flight_mu);
  return impl_->in_flight;
}

}  // namespace rackgate::daemon
