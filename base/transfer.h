// Bounded HTTP transfers over libcurl: the easy handle, the answer's sinks
// and what a failed transfer is said as. Shared by every client of ours that
// makes an HTTP call (agent, kube, ctl, daemon's webhooks); never used by
// attest, wire, storage or core (script/check-layers).
//
// The header names no libcurl type: libcurl's `CURL` is `void`, so a
// `void*` here is the `CURL*` a caller passes to curl_easy_setopt. Callers
// set their own options (TLS, headers, timeouts); this library owns the
// handle, the byte bounds and the error text.
#ifndef RACKGATE_BASE_TRANSFER_H_
#define RACKGATE_BASE_TRANSFER_H_

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace rackgate::transfer {

class BodySink;
struct Outcome;

// Owns one libcurl easy handle and its error buffer. Not thread-safe: one
// transfer at a time.
class EasyHandle {
 public:
  // Throws std::bad_alloc when libcurl cannot make a handle.
  EasyHandle();
  ~EasyHandle();
  EasyHandle(EasyHandle&& other) noexcept;
  EasyHandle& operator=(EasyHandle&& other) noexcept;
  EasyHandle(const EasyHandle&) = delete;
  EasyHandle& operator=(const EasyHandle&) = delete;

  // The CURL*, borrowed: valid while this object lives (null after a move).
  void* get() const { return curl_; }

 private:
  friend Outcome Perform(EasyHandle& handle, const BodySink* body);
  void* curl_ = nullptr;
  std::unique_ptr<char[]> error_;  // CURLOPT_ERRORBUFFER, CURL_ERROR_SIZE bytes
};

// Request header lines for CURLOPT_HTTPHEADER: a curl_slist, owned, typed
// void* here. Move-only.
class HeaderList {
 public:
  HeaderList() = default;
  ~HeaderList();
  HeaderList(HeaderList&& other) noexcept;
  HeaderList& operator=(HeaderList&& other) noexcept;
  HeaderList(const HeaderList&) = delete;
  HeaderList& operator=(const HeaderList&) = delete;

  // Appends one "Name: value" line (libcurl copies it). Throws
  // std::bad_alloc when libcurl cannot.
  void Add(const std::string& line);
  // The curl_slist*, borrowed; null while no line was added.
  void* get() const { return list_; }

 private:
  void* list_ = nullptr;
};

// Holds an answer's body up to `max_bytes`. SECURITY: an answer over the
// bound fails the transfer as soon as it is known (a declared
// Content-Length through CURLOPT_MAXFILESIZE_LARGE, else at the byte that
// crosses it) and is never truncated into something that parses.
class BodySink {
 public:
  explicit BodySink(size_t max_bytes) : max_(max_bytes) {}
  BodySink(const BodySink&) = delete;
  BodySink& operator=(const BodySink&) = delete;

  // Makes `curl` write its answer here and refuse one over the bound.
  // REQUIRES: this sink outlives the transfer. False when libcurl refused
  // an option.
  [[nodiscard]] bool Attach(void* curl);

  bool too_large() const { return too_large_; }
  size_t max_bytes() const { return max_; }
  std::string TakeBody() { return std::move(body_); }

 private:
  static size_t Write(char* data, size_t size, size_t nmemb, void* self);
  std::string body_;
  size_t max_;
  bool too_large_ = false;
};

// Keeps the value of one response header of the final answer (a 100
// Continue's headers are forgotten), verbatim after the colon, without its
// line end. A value over `max_value_bytes` is not kept: value() stays empty,
// as if the header were absent.
class HeaderSink {
 public:
  // `name` without the colon; matched without regard to case.
  HeaderSink(std::string_view name, size_t max_value_bytes);
  HeaderSink(const HeaderSink&) = delete;
  HeaderSink& operator=(const HeaderSink&) = delete;

  // REQUIRES: this sink outlives the transfer. False when libcurl refused
  // an option.
  [[nodiscard]] bool Attach(void* curl);

  const std::optional<std::string>& value() const { return value_; }
  std::optional<std::string> TakeValue() { return std::move(value_); }

 private:
  static size_t Write(char* data, size_t size, size_t nmemb, void* self);
  std::string prefix_;  // lower-case name and colon
  size_t max_;
  std::optional<std::string> value_;
};

// Hands the answer to `on_chunk` as it arrives, with the answer's HTTP
// status: for a stream that has no end to wait for (a Kubernetes watch).
// `on_chunk` returns false to end the transfer (CURLE_WRITE_ERROR). An
// exception from it never crosses libcurl's C frames: it ends the transfer
// and RethrowIfThrown() throws it again.
class StreamSink {
 public:
  using OnChunk = std::function<bool(long http_status, std::string_view chunk)>;
  explicit StreamSink(OnChunk on_chunk) : on_chunk_(std::move(on_chunk)) {}
  StreamSink(const StreamSink&) = delete;
  StreamSink& operator=(const StreamSink&) = delete;

  // REQUIRES: this sink outlives the transfer. False when libcurl refused
  // an option.
  [[nodiscard]] bool Attach(void* curl);

  // The status of the answer whose bytes arrived; 0 before the first.
  long http_status() const { return status_; }
  void RethrowIfThrown() const {
    if (exception_) std::rethrow_exception(exception_);
  }

 private:
  static size_t Write(char* data, size_t size, size_t nmemb, void* self);
  OnChunk on_chunk_;
  void* curl_ = nullptr;
  long status_ = 0;
  std::exception_ptr exception_;
};

// SECURITY: HTTPS only, also for a redirect, and no redirect followed (one
// would carry the caller's bearer token to wherever the answer points).
// False when libcurl refused (one built without HTTPS).
[[nodiscard]] bool HttpsOnlyNoRedirects(void* curl);

// SECURITY: the peer is trusted through the CA the caller sets (CAINFO or
// CAINFO_BLOB) and nothing else: no system store (CAPATH cleared), peer and
// host name always verified, TLS 1.2 at least. Deliberately nothing turns
// it off. False when libcurl refused.
[[nodiscard]] bool VerifyPeerAgainstCallersCa(void* curl);

// Counts an answer's body away: for a caller that reads only the status. No
// byte is held, however long the answer. False when libcurl refused.
[[nodiscard]] bool DiscardBody(void* curl);

// What one curl_easy_perform came to.
struct Outcome {
  int curl_code = 0;        // the CURLcode; 0 is CURLE_OK
  bool too_large = false;   // the body sink's bound (or CURLOPT_MAXFILESIZE) stopped it
  long http_status = 0;     // CURLINFO_RESPONSE_CODE; 0 when no answer came
  long os_errno = 0;        // CURLINFO_OS_ERRNO of a failed connect, else 0
  std::string error;        // libcurl's text for a failure (its error buffer, else its
                            // name for the code), no trailing newline; empty on success
  bool ok() const { return curl_code == 0 && !too_large; }
};

// Runs the transfer `handle` is set up for. `body` is the sink attached to
// it, or null (a StreamSink's or no body). Sets the handle's error buffer.
Outcome Perform(EasyHandle& handle, const BodySink* body);

// How a client says a failed transfer: each client keeps its own reasons.
struct FailureReasons {
  // "<peer>'s answer is larger than N bytes", raised with `too_large`.
  std::string_view peer;
  Status (*too_large_code)(std::string reason, std::string message);
  std::string_view too_large;
  // IoError `unreachable`, message `unreachable_prefix` + libcurl's text.
  std::string_view unreachable;
  std::string_view unreachable_prefix;
};

// The Status of a failed outcome. REQUIRES: !outcome.ok().
Status FailureStatus(const Outcome& outcome, size_t max_bytes, const FailureReasons& reasons);

}  // namespace rackgate::transfer

#endif  // RACKGATE_BASE_TRANSFER_H_
