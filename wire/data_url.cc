// data: URLs (RFC 2397): encoding and bounded decoding.
#include "wire/data_url.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/hex.h"
#include "wire/codec.h"

namespace rackgate::wire {

namespace {

constexpr std::string_view kScheme = "data:";
constexpr std::string_view kBase64 = ";base64";

char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool EndsWithNoCase(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  s.remove_prefix(s.size() - suffix.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (AsciiLower(s[i]) != suffix[i]) return false;
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Status Invalid(std::string why) { return Status::InvalidArgument("data_url_invalid", std::move(why)); }

}  // namespace

bool IsDataUrl(std::string_view text) {
  if (text.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (AsciiLower(text[i]) != kScheme[i]) return false;
  }
  return true;
}

Result<DataUrl> DecodeDataUrl(std::string_view url, size_t max_bytes) {
  if (!IsDataUrl(url)) return Invalid("not a data URL");
  const std::string_view rest = url.substr(kScheme.size());
  const size_t comma = rest.find(',');
  if (comma == std::string_view::npos) return Invalid("data URL without a comma");
  std::string_view header = rest.substr(0, comma);
  const std::string_view data = rest.substr(comma + 1);
  DataUrl out;
  if (EndsWithNoCase(header, kBase64)) {
    out.base64 = true;
    header.remove_suffix(kBase64.size());
  }
  out.media_type = std::string(header);
  if (out.base64) {
    // Base64Decode checks the decoded size against max_bytes before it
    // allocates.
    std::optional<std::vector<uint8_t>> bytes = Base64Decode(data, max_bytes);
    if (!bytes) return Invalid("data URL is not canonical base64 (or too large)");
    out.data.assign(bytes->begin(), bytes->end());
    return out;
  }
  // Percent-decoding only shrinks, so the reservation is bounded by both the
  // input and max_bytes.
  out.data.reserve(std::min(data.size(), max_bytes));
  for (size_t i = 0; i < data.size(); ++i) {
    if (out.data.size() == max_bytes) return Invalid("data URL too large");
    if (data[i] != '%') {
      out.data.push_back(data[i]);
      continue;
    }
    // Remaining length by subtraction: i < data.size() here.
    const int hi = data.size() - i > 2 ? HexValue(data[i + 1]) : -1;
    const int lo = hi >= 0 ? HexValue(data[i + 2]) : -1;
    if (lo < 0) {
      return Invalid("data URL has a bad percent escape at offset " +
                     std::to_string(kScheme.size() + comma + 1 + i));
    }
    out.data.push_back(static_cast<char>(hi << 4 | lo));
    i += 2;
  }
  return out;
}

std::string EncodeDataUrl(const DataUrl& url) {
  std::string out;
  out.reserve(kScheme.size() + url.media_type.size() + kBase64.size() + 1 + url.data.size() * 3);
  out.append(kScheme).append(url.media_type).append(url.base64 ? ";base64," : ",");
  if (url.base64) {
    out += Base64Encode(std::span(reinterpret_cast<const uint8_t*>(url.data.data()), url.data.size()));
    return out;
  }
  out += hex::PercentEncode(url.data);
  return out;
}

}  // namespace rackgate::wire
