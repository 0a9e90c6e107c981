// data: URLs (RFC 2397): the one encoder and bounded decoder of the project.
//
// "data:[<mediatype>][;base64],<data>". Used for the inline contents of
// Ignition configs by rackgated (template checks, rendering), the agent
// (applying a config) and rackgatectl (the pointer config's CA).
#ifndef RACKGATE_WIRE_DATA_URL_H_
#define RACKGATE_WIRE_DATA_URL_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace rackgate::wire {

struct DataUrl {
  // What stands between "data:" and ",", verbatim, without a final
  // ";base64" (so "" or "text/plain;charset=utf-8").
  std::string media_type;
  bool base64 = false;
  // The decoded bytes (not necessarily text).
  std::string data;
};

// Whether `text` starts with "data:" (case-insensitive, as URL schemes are).
bool IsDataUrl(std::string_view text);

// Decodes `url`. The plain form is percent-decoded (every "%" must start two
// hex digits); the ";base64" form (matched case-insensitively) must be
// canonical base64 with no percent escapes, no whitespace and canonical
// padding, which is what Ignition reads. Decoded data over `max_bytes` is
// refused before it is all allocated. Fails with kInvalidArgument, reason
// data_url_invalid, and the fault in words ("data URL without a comma",
// "data URL has a bad percent escape at offset N", "data URL is not
// canonical base64 (or too large)", "data URL too large", "not a data URL").
Result<DataUrl> DecodeDataUrl(std::string_view url, size_t max_bytes);

// "data:" + media_type + (";base64," or ",") + data: standard base64 with
// padding, or percent-encoding of every byte but the RFC 3986 unreserved
// characters (every data URL parser decodes that the same way, whatever it
// thinks of reserved ones). DecodeDataUrl(EncodeDataUrl(u)) gives u back.
std::string EncodeDataUrl(const DataUrl& url);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_DATA_URL_H_
