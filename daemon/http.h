// The HTTP seam between rackgated's handlers and libmicrohttpd: plain request
// and response values, a router, and the error shape every refusal uses.
// Handlers never see MHD; the server (daemon/http_server.h) never sees the
// protocol.
#ifndef RACKGATE_DAEMON_HTTP_H_
#define RACKGATE_DAEMON_HTTP_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rackgate::daemon {

// Case-insensitive header names (RFC 9110 §5.1).
struct HeaderLess {
  bool operator()(const std::string& a, const std::string& b) const;
};
using Headers = std::map<std::string, std::string, HeaderLess>;

// Credentials of a peer on the admin Unix socket (SO_PEERCRED).
struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  // Supplementary groups at connect time (SO_PEERGROUPS): from the socket,
  // not /proc, so they hold under ProtectProc=invisible and cannot be
  // swapped by a PID reused after the connect.
  std::vector<gid_t> groups;
};

struct Request {
  std::string method;  // "GET", "HEAD", "POST", ...
  std::string path;    // decoded path without the query string
  std::map<std::string, std::string> query;
  // The route's {name} segments: filled by the Router only, read only with
  // PathParam and OptionalPathParam (script/check-admin-path).
  std::map<std::string, std::string> path_params;
  Headers headers;
  std::string body;          // complete; the server enforced the size limit
  std::string peer_address;  // "127.0.0.1:4711", or "unix" on the admin socket
  std::optional<PeerCred> peer_cred;  // set on the admin socket only
  bool admin = false;        // arrived on the admin socket
  // The appliance's own queueing delay (admission control reads it): how
  // long the request's last bytes waited in the socket for its worker
  // thread (TCP_INFO, a few ms of resolution), plus the wait for a handler
  // thread when there are handler threads.
  std::chrono::microseconds queued{0};

  // The header's value, or nullopt.
  std::optional<std::string> Header(const std::string& name) const;
  // The credentials of `Authorization: Bearer <token>` (scheme matched
  // without case, RFC 9110 §11.1); nullopt when absent or another scheme.
  std::optional<std::string> BearerToken() const;
  // The route's {name} parameter (Router::Add's pattern names it; a handler
  // asks only for its own route's).
  const std::string& PathParam(const std::string& name) const { return path_params.at(name); }
  // The {name} parameter when the route that answered has one (a handler
  // served on two routes, one with the parameter and one without).
  std::optional<std::string> OptionalPathParam(const std::string& name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // When set, the body is *shared_body and `body` is unused. SHARED and
  // immutable: the server hands MHD a reference, kept until MHD has sent
  // the last byte or dropped the connection, and never copies it, so any
  // number of answers in flight hold one buffer (the agent bundle, a pool's
  // public config: docs/performance.md, "Memory per answer").
  std::shared_ptr<const std::string> shared_body;
  std::vector<std::pair<std::string, std::string>> headers;
  // The refusal's reason code, set by Error ("" for any other answer): the
  // server reports admin refusals by it without reading the body again.
  std::string reason;

  // The body, whichever of the two holds it; valid while this Response (or
  // the shared buffer) is.
  std::string_view Body() const { return shared_body ? std::string_view(*shared_body) : std::string_view(body); }

  // The refusal body (wire/refusal.h's EncodeRefusal) with `reason` set.
  // MESSAGE goes to the client: it must never hold a secret or the value a
  // check compared against. With retry_after_seconds, adds Retry-After.
  static Response Error(int status, const std::string& reason, const std::string& message,
                        std::optional<int> retry_after_seconds = std::nullopt);
  static Response Json(int status, std::string json_text);
  static Response Text(int status, std::string text,
                       std::string content_type = "text/plain; charset=utf-8");
  // A body served from a shared buffer (above); `bytes` must not be null.
  static Response Shared(int status, std::shared_ptr<const std::string> bytes, std::string content_type);
};

using Handler = std::function<Response(const Request&)>;

// Routes (method, path pattern) to handlers. A pattern is a literal path whose
// segments may be `{name}` (one non-empty segment, captured into
// path_params). Matching is exact otherwise; no prefix matches, no
// normalisation beyond what the server did once. Unknown path: 404; known path
// with another method: 405 with Allow. Not thread-safe to modify; safe to
// Dispatch from many threads once built.
//
// When several patterns match a path, the one with a literal segment at the
// first position where they differ wins (`/m/import` over `/m/{id}`); the
// method is then looked up among that pattern's routes only. HEAD is served
// by the pattern's GET handler when it has no HEAD route (the server drops
// the body and keeps Content-Length), and Allow lists HEAD wherever GET is.
// Handlers' exceptions propagate out of Dispatch; the server catches them.
class Router {
 public:
  // A malformed pattern (not starting with '/', empty or repeated `{name}`)
  // or a repeated (method, pattern) is a bug: throws std::invalid_argument.
  void Add(const std::string& method, const std::string& pattern, Handler handler);
  Response Dispatch(Request request) const;
  // As above; *route receives "METHOD PATTERN" of the route that answered, or
  // the pattern alone for a 405, or "unmatched" for a 404 — a bounded label
  // for metrics, never the client's path. *params receives the matched
  // pattern's {name} segments as the path gave them (also for a 405; empty
  // for a 404): client text, escape before logging. Either may be null.
  Response Dispatch(Request request, std::string* route,
                    std::map<std::string, std::string>* params = nullptr) const;

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;
    Handler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_HTTP_H_
