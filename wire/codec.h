// Text encodings of binary fields on the wire: standard base64 for TPM
// structures, base64url for tokens. These forward to the one base64 codec,
// base/base64.h (hex, for nonces and digests, is base/hex.h). Decoders are
// strict (no whitespace, canonical padding) and bounded.
#ifndef RACKGATE_WIRE_CODEC_H_
#define RACKGATE_WIRE_CODEC_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>


namespace rackgate::wire {

std::string Base64Encode(std::span<const uint8_t> data);
// nullopt for anything but canonical base64 of at most max_bytes decoded bytes.
std::optional<std::vector<uint8_t>> Base64Decode(std::string_view text, size_t max_bytes);
// RFC 4648 §5 without padding.
std::string Base64UrlEncode(std::span<const uint8_t> data);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_CODEC_H_
