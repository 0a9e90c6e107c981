// How one of the agent's steps failed, and what the agent does about it: wait
// and start again (503), back off and start again (the appliance could not be
// reached or failed), or stop with an exit code (refused, TPM, local I/O).
// Internal to rackgate-agent.
#ifndef RACKGATE_AGENT_FAILURE_H_
#define RACKGATE_AGENT_FAILURE_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/failure.h is internal to rackgate-agent"
#endif

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "base/status.h"

namespace rackgate::agent {

// Exit codes of rackgate-agent (also in its --help and docs/agent.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;  // an exception: a bug or resource exhaustion
inline constexpr int kExitUsage = 2;
inline constexpr int kExitRefused = 3;
inline constexpr int kExitUnreachable = 4;
inline constexpr int kExitTpm = 5;
inline constexpr int kExitLocalIo = 6;

struct Failure {
  enum class Kind {
    kWait,     // 503: a condition the machine waits out (Retry-After)
    kRetry,    // no answer, or a 5xx other than 503: back off exponentially
    kRefused,  // a 4xx, or an answer we cannot use: an operator must act
    kTpm,      // the TPM refused or failed
    kLocal,    // a local file or directory could not be read or written
  };

  Kind kind = Kind::kLocal;
  std::string reason;   // stable code: the appliance's, or ours
  std::string message;  // for people; already safe to print
  int http_status = 0;  // when the appliance answered
  std::optional<long> retry_after_seconds;  // kWait: the parsed Retry-After, if any

  static Failure Wait(std::string reason, std::string message, std::optional<long> retry_after) {
    return {Kind::kWait, std::move(reason), std::move(message), 503, retry_after};
  }
  static Failure Retry(std::string reason, std::string message, int http_status = 0) {
    return {Kind::kRetry, std::move(reason), std::move(message), http_status, std::nullopt};
  }
  static Failure Refused(std::string reason, std::string message, int http_status = 0) {
    return {Kind::kRefused, std::move(reason), std::move(message), http_status, std::nullopt};
  }
  // A local failure: kTpmError becomes kTpm, anything else kLocal.
  static Failure FromStatus(const Status& s) {
    return {s.code() == Status::Code::kTpmError ? Kind::kTpm : Kind::kLocal, s.reason(), s.message(), 0,
            std::nullopt};
  }

  int ExitCode() const {
    switch (kind) {
      case Kind::kWait:
      case Kind::kRetry: return kExitUnreachable;
      case Kind::kRefused: return kExitRefused;
      case Kind::kTpm: return kExitTpm;
      case Kind::kLocal: return kExitLocalIo;
    }
    return kExitLocalIo;
  }
  const char* KindName() const {
    switch (kind) {
      case Kind::kWait: return "wait";
      case Kind::kRetry: return "unreachable";
      case Kind::kRefused: return "refused";
      case Kind::kTpm: return "tpm-failure";
      case Kind::kLocal: return "io-failure";
    }
    return "failure";
  }
};

// Either a T or a Failure: what the agent's steps return.
template <typename T>
class [[nodiscard]] Outcome {
 public:
  Outcome(T value) : v_(std::move(value)) {}       // NOLINT: implicit by design
  Outcome(Failure failure) : v_(std::move(failure)) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  // REQUIRES: !ok().
  const Failure& failure() const { return std::get<Failure>(v_); }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Failure> v_;
};

// For steps that produce nothing but success.
struct Done {};

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_FAILURE_H_
