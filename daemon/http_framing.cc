// HTTP/1.1 request framing checks: one unambiguous body length per request.
#include "daemon/http_framing.h"

#include <algorithm>

namespace rackgate::daemon {

namespace {

constexpr char kReason[] = "bad_framing";

char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return AsciiLower(x) == AsciiLower(y); });
}

bool IsDecimal(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

Status Refuse(std::string message) { return Status::InvalidArgument(kReason, std::move(message)); }

}  // namespace

Status CheckFraming(const std::vector<HeaderField>& fields, std::string_view http_version) {
  int content_lengths = 0;
  int transfer_encodings = 0;
  bool lone_chunked = false;
  bool plain_length = false;
  for (const HeaderField& f : fields) {
    // SECURITY: MHD 0.9.75 keeps the space of "Content-Length : 5" in the
    // name and so ignores the field, while a proxy in front may honour it;
    // RFC 9112 §5.1 says to refuse.
    if (f.name.find_first_of(" \t") != std::string::npos) {
      return Refuse("whitespace in a header field name");
    }
    if (EqualsIgnoringCase(f.name, "content-length")) {
      ++content_lengths;
      plain_length = IsDecimal(f.value);
    } else if (EqualsIgnoringCase(f.name, "transfer-encoding")) {
      ++transfer_encodings;
      // Compared whole, as MHD compares it: "chunked, gzip", "identity" or
      // "chunked " would be no chunked body to MHD, which then reads the
      // body until the connection ends.
      lone_chunked = EqualsIgnoringCase(f.value, "chunked");
    }
  }
  if (transfer_encodings > 0) {
    // SECURITY: with both, MHD uses Transfer-Encoding and another parser
    // may use Content-Length; whatever one of them takes for the end of the
    // body, the other may serve as the next request (RFC 9112 §6.3).
    if (content_lengths > 0) return Refuse("both Transfer-Encoding and Content-Length");
    if (transfer_encodings > 1) return Refuse("more than one Transfer-Encoding field");
    if (!lone_chunked) return Refuse("a transfer coding other than a lone chunked");
    // RFC 9112 §6.1: an HTTP/1.0 message's Transfer-Encoding is faulty
    // framing.
    if (http_version != "HTTP/1.1") return Refuse("Transfer-Encoding outside HTTP/1.1");
    return Status::Ok();
  }
  // MHD reads only the first of two Content-Length fields.
  if (content_lengths > 1) return Refuse("more than one Content-Length field");
  if (content_lengths == 1 && !plain_length) return Refuse("a Content-Length that is not a decimal number");
  return Status::Ok();
}

}  // namespace rackgate::daemon
