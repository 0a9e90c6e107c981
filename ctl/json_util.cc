// rackgatectl's own JSON: files an operator gives and what --json prints.
#include "ctl/json_util.h"

#include <algorithm>
#include <cstdio>

#include "base/files.h"

namespace rackgate::ctl {

using nlohmann::json;

std::string Str(const json& o, const char* key, const char* fallback) {
  if (o.is_object() && o.contains(key) && o.at(key).is_string()) return o.at(key).get<std::string>();
  return fallback;
}

Result<json> ReadJsonFile(const std::string& path, size_t max) {
  auto b = ReadFile(path, max);
  if (!b.ok()) return b.status();
  return ParseJsonText(std::string_view(reinterpret_cast<const char*>(b->data()), b->size()), path);
}

Result<json> ParseJsonText(std::string_view text, const std::string& name) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based offset of the byte where parsing stopped.
    const size_t at = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    // what(): "[json.exception.parse_error.101] parse error at line 1, column 5: WHAT".
    std::string what = e.what();
    if (const size_t col = what.find("column "); col != std::string::npos) {
      if (const size_t colon = what.find(": ", col); colon != std::string::npos) what = what.substr(colon + 2);
    }
    return Status::InvalidArgument("bad_json", name + ":" + std::to_string(line) + ":" + std::to_string(column) +
                                                   ": " + what);
  }
}

void PrintJson(const json& j) { std::printf("%s\n", j.dump(2).c_str()); }

void PrintJsonText(std::string_view text) { PrintJson(json::parse(text)); }

}  // namespace rackgate::ctl
