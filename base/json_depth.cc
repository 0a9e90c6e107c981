// The nesting depth of a JSON text, before parsing (base/json_depth.h).
#include "base/json_depth.h"

#include <algorithm>

namespace rackgate {

size_t JsonDepth(std::string_view text) {
  size_t max = 0;
  ScanJson(text, [&](const JsonToken& t) {
    if (t.kind == JsonToken::Kind::kOpen) max = std::max(max, t.depth + 1);
    return true;
  });
  return max;
}

}  // namespace rackgate
