// Status and Result<T>: how every public function of attest/ and storage/ says
// what went wrong. A Status carries a named code (what kind of failure), a
// stable machine-readable reason (what a 403 body or a metric label carries)
// and a human message (what an operator reads in a log). The message may name
// the input that was refused but never the value it was compared against.
#ifndef RACKGATE_BASE_STATUS_H_
#define RACKGATE_BASE_STATUS_H_

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace rackgate {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,     // the caller's input is unusable (malformed, wrong size)
    kNotFound,            // a named thing does not exist
    kCorruption,          // stored or transferred bytes are inconsistent
    kVerificationFailed,  // well-formed evidence that does not verify
    kUnsupported,         // well-formed, but an algorithm or form we refuse
    kTpmError,            // the TPM answered with an error
    kIoError,             // the file system or network failed
  };

  Status() = default;

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string reason, std::string message) {
    return Status(Code::kInvalidArgument, std::move(reason), std::move(message));
  }
  static Status NotFound(std::string reason, std::string message) {
    return Status(Code::kNotFound, std::move(reason), std::move(message));
  }
  static Status Corruption(std::string reason, std::string message) {
    return Status(Code::kCorruption, std::move(reason), std::move(message));
  }
  static Status VerificationFailed(std::string reason, std::string message) {
    return Status(Code::kVerificationFailed, std::move(reason), std::move(message));
  }
  static Status Unsupported(std::string reason, std::string message) {
    return Status(Code::kUnsupported, std::move(reason), std::move(message));
  }
  static Status TpmError(std::string reason, std::string message) {
    return Status(Code::kTpmError, std::move(reason), std::move(message));
  }
  static Status IoError(std::string reason, std::string message) {
    return Status(Code::kIoError, std::move(reason), std::move(message));
  }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  // Stable identifier, lower_snake_case, e.g. "quote_nonce_mismatch".
  const std::string& reason() const { return reason_; }
  const std::string& message() const { return message_; }
  // "reason: message", or "ok".
  std::string ToString() const {
    return ok() ? std::string("ok") : reason_ + ": " + message_;
  }

  // Prefixes the message with context, keeping code and reason.
  Status Annotate(std::string_view context) const {
    if (ok()) return *this;
    return Status(code_, reason_, std::string(context) + ": " + message_);
  }

 private:
  Status(Code code, std::string reason, std::string message)
      : code_(code), reason_(std::move(reason)), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  std::string reason_;
  std::string message_;
};

// Either a T or a failed Status. Constructing a Result from an ok Status is a
// bug (asserted): there would be no value to return.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok());
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // The failure; Status::Ok() when ok().
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace rackgate

#endif  // RACKGATE_BASE_STATUS_H_
