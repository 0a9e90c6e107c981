// The one lexical scanner of JSON structure, for the readers that must look
// at a JSON text before (or instead of) parsing it: the depth bound every
// untrusted document is checked against (wire/json_depth.h) and the line of
// each row of an inventory (ctl/inventory_format.h). It builds nothing.
#ifndef RACKGATE_WIRE_JSON_SCAN_H_
#define RACKGATE_WIRE_JSON_SCAN_H_

#include <cstddef>
#include <string_view>

namespace rackgate::wire {

// One token outside whitespace: a bracket, a comma, a whole string, or any
// other character (of a number, a literal, a colon).
struct JsonToken {
  enum class Kind { kOpen, kClose, kComma, kString, kOther };
  Kind kind = Kind::kOther;
  char c = 0;            // the character (kString: '"')
  size_t depth = 0;      // the nesting before the token
  size_t line = 1;       // where the token starts, from 1
  std::string_view text; // kString: its raw contents, escapes undecoded
};

// Calls `visit(const JsonToken&)` for each token of `text` in order, until
// it returns false. Malformed JSON is scanned as far as it goes (a close
// bracket at depth 0 leaves the depth 0; an unterminated string runs to the
// end), for the caller or the parser to refuse. Pure; O(text.size()).
template <typename Visit>
void ScanJson(std::string_view text, Visit&& visit) {
  size_t depth = 0, line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    JsonToken t{JsonToken::Kind::kOther, c, depth, line, {}};
    if (c == '"') {
      const size_t start = i + 1;
      bool escaped = false;
      for (i = start; i < text.size(); ++i) {
        if (text[i] == '\n') ++line;
        if (escaped) {
          escaped = false;
        } else if (text[i] == '\\') {
          escaped = true;
        } else if (text[i] == '"') {
          break;
        }
      }
      t.kind = JsonToken::Kind::kString;
      t.text = text.substr(start, i - start);
    } else if (c == '[' || c == '{') {
      t.kind = JsonToken::Kind::kOpen;
      ++depth;
    } else if (c == ']' || c == '}') {
      t.kind = JsonToken::Kind::kClose;
      if (depth > 0) --depth;
    } else if (c == ',') {
      t.kind = JsonToken::Kind::kComma;
    }
    if (!visit(static_cast<const JsonToken&>(t))) return;
  }
}

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_JSON_SCAN_H_
