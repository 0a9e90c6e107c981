// Base64, the one codec (RFC 4648): standard, padded base64 for TPM
// structures on the wire and the bytes a kubeconfig or an API server sends;
// base64url without padding for tokens. Decoders are strict (no whitespace,
// canonical padding and trailing bits) and bounded before they allocate.
#ifndef RACKGATE_BASE_BASE64_H_
#define RACKGATE_BASE_BASE64_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rackgate::base64 {

// Standard padded base64 of `data` (RFC 4648 §4).
std::string Encode(std::span<const uint8_t> data);
std::string Encode(std::string_view data);

// The bytes of `text`, or nullopt unless it is canonical standard base64 (a
// multiple of four characters of the alphabet, at most two '=' at the end,
// unused bits zero) of at most max_bytes decoded bytes. Untrusted text is
// bounded before anything is allocated.
std::optional<std::vector<uint8_t>> Decode(std::string_view text, size_t max_bytes);
// The same, the bytes as a string.
std::optional<std::string> DecodeToString(std::string_view text, size_t max_bytes);

// Base64url without padding (RFC 4648 §5).
std::string UrlEncode(std::span<const uint8_t> data);

}  // namespace rackgate::base64

#endif  // RACKGATE_BASE_BASE64_H_
