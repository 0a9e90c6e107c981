// The one refusal body, {"error": {"reason": ..., "message": ...}}: what
// rackgated answers for every refused request (daemon/http.h's
// Response::Error writes it; daemon/status_http.h picks reason and status
// from the reason table) and what the agent, rackgatectl and boot-storm
// read. docs/protocol.md, "Errors". The key "error" is written only in
// wire/refusal.{h,cc} (script/check-admin-path).
#ifndef RACKGATE_WIRE_REFUSAL_H_
#define RACKGATE_WIRE_REFUSAL_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace rackgate::wire {

struct Refusal {
  std::string reason;
  std::string message;
  bool operator==(const Refusal&) const = default;
};

// {"error":{"message":MESSAGE,"reason":REASON}}: compact, keys sorted (as
// nlohmann::json writes an object). Never throws: invalid UTF-8 in either string is replaced (U+FFFD),
// so a refusal cannot itself fail.
std::string EncodeRefusal(const Refusal& r);

// Strict: the refusal of `body`, both strings whole (an absent one is "").
// bad_json unless a JSON object no deeper than kMaxAdminJsonDepth;
// field_missing without an "error" member; field_invalid when "error" is
// not an object or its reason or message is not a string. REQUIRES of the
// caller: the strings are the peer's text; make them printable before a
// terminal or a log line sees them.
Result<Refusal> DecodeRefusal(std::string_view body);

// Lenient, for a body that may come from something else than rackgated (a
// proxy, a crash): the body's reason and message where DecodeRefusal would
// read them as strings, each one alone; otherwise `fallback_reason` and the
// whole body as the message. Never fails.
Refusal DecodeRefusalOr(std::string_view body, std::string_view fallback_reason);

// The fixed answer to a handler's exception (CWE-209: the cause stays in
// the log), as a constant the server can answer when nothing else works.
// The same refusal as {"internal", "internal error"} (its keys in the order
// the server has always sent them: reason first).
inline constexpr std::string_view kInternalRefusalBody =
    R"({"error":{"reason":"internal","message":"internal error"}})";

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_REFUSAL_H_
