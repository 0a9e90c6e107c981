// Base64, bounded JSON and printable cuts for kube/.
#include "kube/untrusted.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>

#include "base/text.h"

namespace rackgate::kube {

namespace {

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Sextet(char c) {
  const size_t i = kAlphabet.find(c);
  return i == std::string_view::npos ? -1 : static_cast<int>(i);
}

}  // namespace

std::optional<std::string> Base64Decode(std::string_view text, size_t max_bytes) {
  if (text.size() % 4 != 0) return std::nullopt;
  // Compare by division, never by multiplication: a huge text must not wrap.
  if (text.size() / 4 > max_bytes / 3 + 1) return std::nullopt;
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') pad = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  const size_t out_size = text.size() / 4 * 3 - pad;
  if (out_size > max_bytes) return std::nullopt;
  std::string out;
  out.reserve(out_size);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    std::array<int, 4> s{};
    for (size_t k = 0; k < 4; ++k) {
      const bool padded = last && k >= 4 - pad;
      s[k] = padded ? 0 : Sextet(text[i + k]);
      if (s[k] < 0) return std::nullopt;
    }
    const uint32_t v = (uint32_t(s[0]) << 18) | (uint32_t(s[1]) << 12) | (uint32_t(s[2]) << 6) | uint32_t(s[3]);
    out.push_back(static_cast<char>(v >> 16));
    if (!(last && pad == 2)) out.push_back(static_cast<char>((v >> 8) & 0xff));
    if (!(last && pad >= 1)) out.push_back(static_cast<char>(v & 0xff));
    // Canonical only: the bits the padding drops must be zero.
    if (last && ((pad == 2 && (v & 0xffff) != 0) || (pad == 1 && (v & 0xff) != 0))) return std::nullopt;
  }
  return out;
}

std::string Base64Encode(std::string_view data) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  for (size_t i = 0; i < data.size(); i += 3) {
    const size_t n = std::min<size_t>(3, data.size() - i);
    uint32_t v = uint32_t(static_cast<uint8_t>(data[i])) << 16;
    if (n > 1) v |= uint32_t(static_cast<uint8_t>(data[i + 1])) << 8;
    if (n > 2) v |= uint32_t(static_cast<uint8_t>(data[i + 2]));
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(n > 1 ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back(n > 2 ? kAlphabet[v & 63] : '=');
  }
  return out;
}

std::optional<nlohmann::json> ParseJson(std::string_view text) {
  bool too_deep = false;
  // The callback sees every value with its depth as the parser reaches it;
  // refusing there stops a deep document before its tree is built.
  auto bound = [&too_deep](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > static_cast<int>(kMaxJsonDepth)) too_deep = true;
    return !too_deep;
  };
  nlohmann::json doc = nlohmann::json::parse(text.begin(), text.end(), bound, /*allow_exceptions=*/false);
  if (too_deep || doc.is_discarded()) return std::nullopt;
  return doc;
}

std::string Printable(std::string_view s, size_t max) { return text::PrintableAscii(s, max); }

std::optional<std::string> StringField(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace rackgate::kube
#include "base/text.h"
