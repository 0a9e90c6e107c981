// The admin API's refusal body, {"error": {"reason": ..., "message": ...}}
// (daemon/status_http.h writes it from the one reason table), as
// rackgatectl reads it: whole, since an operator's messages name their fix
// at length (the machines' reading is wire/protocol.h's DecodeErrorBody).
#ifndef RACKGATE_WIRE_ADMIN_ERRORS_H_
#define RACKGATE_WIRE_ADMIN_ERRORS_H_

#include <string>
#include <string_view>

namespace rackgate::wire {

struct AdminRefusal {
  std::string reason;
  std::string message;
  bool operator==(const AdminRefusal&) const = default;
};
// `fallback` with its reason and message replaced by the body's where the
// body is a JSON object whose "error" object has them as strings (a refusal
// may come from something else than rackgated: a proxy, a crash). Never
// fails.
AdminRefusal DecodeAdminRefusal(std::string_view body, AdminRefusal fallback);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_ADMIN_ERRORS_H_
