// JSON pointers (RFC 6901) that name the place of a fault in messages.
#include "core/ignition.h"

#include "core/ignition/internal.h"

namespace rackgate::core::ignition {

std::string Child(const std::string& pointer, std::string_view key) {
  std::string out = pointer + "/";
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Child(const std::string& pointer, size_t index) {
  return pointer + "/" + std::to_string(index);
}

std::string Where(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

Status Invalid(const std::string& pointer, const std::string& why) {
  return Status::InvalidArgument("template_invalid", Where(pointer) + ": " + why);
}

}  // namespace rackgate::core::ignition
