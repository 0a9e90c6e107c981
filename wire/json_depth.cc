// The nesting depth of a JSON text, before parsing.
#include "wire/json_depth.h"

#include <algorithm>

namespace rackgate::wire {

size_t JsonDepth(std::string_view text) {
  size_t depth = 0, max = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max = std::max(max, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return max;
}

}  // namespace rackgate::wire
