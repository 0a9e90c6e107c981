// Text encodings on the agent's side of the wire (docs/protocol.md): standard
// base64 for TPM structures and data: URLs, lower-case hex for nonces and
// secrets. Base64 is OpenSSL's EVP_EncodeBlock/EVP_DecodeBlock behind a strict
// check, so the agent carries no base64 coder of its own; hex encoding is
// attest::HexString.
#ifndef RACKGATE_AGENT_ENCODING_H_
#define RACKGATE_AGENT_ENCODING_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/encoding.h is internal to rackgate-agent"
#endif

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rackgate::agent {

std::string Base64Encode(std::span<const uint8_t> data);

// nullopt unless `text` is canonical standard base64 (RFC 4648 §4: the
// alphabet A-Z a-z 0-9 + /, padded to a multiple of 4 with at most two '=',
// unused bits zero, no whitespace) decoding to at most `max_bytes` bytes.
std::optional<std::vector<uint8_t>> Base64Decode(std::string_view text, size_t max_bytes);

// nullopt unless `text` is an even number of hex digits (either case)
// decoding to at most `max_bytes` bytes.
std::optional<std::vector<uint8_t>> HexDecode(std::string_view text, size_t max_bytes);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_ENCODING_H_
