// rackgated's listeners: the public HTTPS server and the admin API's Unix
// socket, serving Routers (daemon/http.h) over libmicrohttpd.
//
// What the server guarantees to handlers and operators:
//  - A handler sees a complete body no larger than max_body_bytes. A larger
//    Content-Length is refused with 413 before any body is read; a chunked
//    upload that grows past the limit stops being stored at once and is
//    answered 413 when it ends (a client that keeps sending more than
//    another MiB past the limit is disconnected instead: MHD 0.9.75 cannot
//    queue a response in the middle of an upload).
//  - A request whose body length is ambiguous (daemon/http_framing.h) is
//    answered 400 bad_framing before its body is read, and its connection
//    closed; no handler sees it.
//  - Every exception out of a handler becomes a 500 with the fixed body
//    {"error":{"reason":"internal","message":"internal error"}}; the
//    exception's text goes to the log only.
//  - One access log line per request (logger "http", info): listener,
//    method, path, status, duration, peer. Never a body, a query string or a
//    header value.
//  - Time limits: a connection idle (or trickling nothing) for
//    connection_timeout_seconds is closed, which bounds slow and silent
//    clients, TLS handshakes included. A handler that runs long cannot be
//    interrupted: it occupies its worker thread (or handler thread) until it
//    returns, and with handlers on the worker threads (handler_threads 0)
//    the other connections of that thread wait meanwhile, so handlers must
//    bound their own work.
//  - Request::queued is the appliance's own queueing delay: how long the
//    request's last bytes waited in the socket for its worker thread
//    (TCP_INFO, a few ms of resolution), plus the wait for a handler thread
//    when there are handler threads. The request duration histogram starts
//    when the headers arrived at the socket, so it counts that wait too.
#ifndef RACKGATE_DAEMON_HTTP_SERVER_H_
#define RACKGATE_DAEMON_HTTP_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "daemon/http.h"

namespace rackgate {
class Metrics;
}  // namespace rackgate

namespace rackgate::daemon {


// A refused request on the admin socket, for the refusal log and audit.
struct AdminRefusal {
  std::string method;  // bounded: a standard method or "other"
  std::string route;   // the router's pattern, or "other"
  int status = 0;
  std::string reason;  // the refusal's reason code (Response::reason; "" when it has none)
  std::optional<PeerCred> peer;
  // The router's {name} segments of the matched pattern, as the request
  // gave them (client text: escape before logging).
  std::map<std::string, std::string> params;
};

struct HttpServerOptions {
  // The public HTTPS listener. IPv4 or IPv6 literals ("192.0.2.10", "::1");
  // at least one, and no default: the server never binds every interface by
  // accident. IPv6 sockets are IPV6_V6ONLY.
  std::vector<std::string> listen_addresses;
  // 0 binds an ephemeral port (the same one on every address; see port()).
  uint16_t port = 22623;
  // PEM files: the certificate chain (leaf first) and its unencrypted key.
  // TLS 1.2 and 1.3 only, no SHA-1 handshake signatures (docs/operations.md).
  std::string tls_certificate_path;
  std::string tls_key_path;

  size_t max_body_bytes = 1 << 20;
  // The admin socket's own limit: an inventory import is one request
  // (~1.3 KB a machine). Only the admin group can connect to the socket.
  size_t admin_max_body_bytes = 128 << 20;
  // Connections from one IP address beyond this are closed at accept; 0
  // means no limit.
  unsigned per_client_connections = 32;
  // Open connections per listener. MHD splits it evenly over the threads.
  unsigned max_connections = 2048;
  // A connection with no traffic for this long is closed (0: never).
  unsigned connection_timeout_seconds = 30;
  // Worker threads of the public listener (MHD's thread pool, on poll):
  // each accepts connections, does their TLS, reads their requests and
  // sends the answers; with handler_threads 0 it also runs their handlers,
  // so a request is served start to finish on the thread that read it, and
  // a handler that waits (a commit's fdatasync, a group commit under way)
  // holds up the other connections of its thread: then use many more
  // threads than cores (docs/performance.md, "MHD threads").
  unsigned threads = 2;
  // N > 0 (default 64): handlers are handed to N threads of their own and
  // the connection suspended until the answer is ready, so that a handler
  // waiting on the disk holds up no other connection. 0: handlers run on
  // the worker thread that read the request (no hand-off).
  unsigned handler_threads = 64;
  // How long Stop() waits for in-flight requests to finish and be sent.
  std::chrono::milliseconds drain_timeout{20000};
  Router router;

  // The admin listener: plain HTTP on a Unix socket (empty path: none).
  // The socket is created mode 0660, group `admin_group` when that group
  // exists (else the process's group, with a warning); a stale socket file
  // is replaced, a live one (another daemon answering) or a non-socket file
  // is an error. Requests carry admin=true and the peer's SO_PEERCRED.
  std::string admin_socket_path;
  std::string admin_group;
  Router admin_router;

  // BORROWED, may be null: outlives the server. The server records
  // rackgate_http_requests_total{method,route,status} and
  // rackgate_http_request_duration_seconds{method,route}: `route` is the
  // router's pattern ("/v1/admin/machines/{hostname}"), "other" for a path
  // no route matches; `method` is one of the standard methods or "other".
  // Never the client's path: bounded, and no token or hostname in a label.
  Metrics* metrics = nullptr;

  // Observability (docs/observability.md): a plain-HTTP listener for the
  // scraper only, away from the machines' TLS port ("" address: none). It
  // serves `metrics_router`, with the public listener's limits.
  std::string metrics_address;
  uint16_t metrics_port = 0;  // 0: an ephemeral port (see metrics_port())
  Router metrics_router;

  // Called for every answer of status >= 400 on the admin socket (a handler's
  // refusal, 404, 405, 413, 500), on the thread that answered, before the
  // answer is sent. Must not throw and should be quick.
  std::function<void(const AdminRefusal&)> on_admin_refusal;
};

// Thread-safe. Destroying a running server Stop()s it.
class HttpServer {
 public:
  // Binds every listener and starts serving. kInvalidArgument for unusable
  // options or certificate/key files (reason "tls_credentials_invalid"),
  // kIoError when a socket cannot be bound (the address is named). On
  // failure nothing is left listening.
  static Result<std::unique_ptr<HttpServer>> Start(HttpServerOptions options);

  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The public listener's bound port.
  uint16_t port() const;
  // The metrics listener's bound port; 0 when there is none.
  uint16_t metrics_port() const;
  // The group the admin socket was given; nullopt when admin_group does not
  // exist (or there is no admin socket).
  std::optional<gid_t> admin_group_id() const;

  // Re-reads the certificate and key files; connections accepted afterwards
  // use them, open ones keep what they negotiated. On any error (unreadable,
  // malformed, key not matching the certificate) the current credentials
  // stay in use and the error is returned.
  Status ReloadCertificates();

  // Graceful stop: stops accepting, answers new requests on kept-alive
  // connections with 503 + Retry-After + Connection: close, waits up to
  // drain_timeout for in-flight requests to be answered and sent, then shuts
  // the listeners down and removes the admin socket. A handler still running
  // after the drain timeout is waited for (threads cannot be killed), but its
  // response is dropped. Idempotent. Must not be called from a handler (it
  // would wait for itself).
  void Stop();

  // Requests received and not yet answered and sent.
  size_t requests_in_flight() const;

  struct Impl;  // opaque: holds the MHD daemons

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_HTTP_SERVER_H_
