// The one lexical scanner of JSON structure, for the readers that must look
// at a JSON text before (or instead of) parsing it: the nesting depth every
// untrusted document is checked against before any parser builds a tree
// (wire's decoders, kube's API answers, core's Ignition templates) and the
// line of each row of an inventory (ctl/inventory_format.h). It builds
// nothing and needs no JSON library.
#ifndef RACKGATE_BASE_JSON_DEPTH_H_
#define RACKGATE_BASE_JSON_DEPTH_H_

#include <cstddef>
#include <string_view>

namespace rackgate {

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

// The deepest nesting of [ and { outside strings, without building
// anything, so that a hostile document cannot make the parser build (or
// later destroy) a deep tree: a reader refuses a text whose JsonDepth is over
// its bound, then parses it. Malformed JSON is left for the parser to refuse.
// Pure; O(text.size()).
size_t JsonDepth(std::string_view text);

}  // namespace rackgate

#endif  // RACKGATE_BASE_JSON_DEPTH_H_
