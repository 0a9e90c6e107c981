// Hex, the one codec: lower-case to text, either case back, bounded. Used for
// digests, names, nonces and EK identities on the wire, in the store, in logs;
// and the one percent-encoder (a URL's %XX).
#ifndef RACKGATE_BASE_HEX_H_
#define RACKGATE_BASE_HEX_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rackgate::hex {

// Lower-case hex of `data`: two characters per byte.
std::string Encode(std::span<const uint8_t> data);

// The bytes of `text`, or nullopt unless it is an even number of hex digits
// (either case) of at most max_bytes bytes. Untrusted text is bounded before
// anything is allocated.
std::optional<std::vector<uint8_t>> Decode(std::string_view text, size_t max_bytes);

// The lower-case hex digit of the low four bits of `nibble`: for escapers
// that write a byte as \xNN into a buffer of their own (base/text.h, the log
// sink).
inline char Digit(unsigned nibble) { return "0123456789abcdef"[nibble & 0xf]; }

// Whether every character of `text` is a lower-case hex digit (true when
// empty): the spelling Encode writes.
bool IsLowerHex(std::string_view text);

// Whether `text` is a SHA-256 digest as Encode writes it: exactly 64
// lower-case hex digits.
bool IsSha256Hex(std::string_view text);

// RFC 3986 percent-encoding of `text` for a URL's query or userinfo: every
// byte but the unreserved A-Z a-z 0-9 - . _ ~ as %XX (upper-case hex).
std::string PercentEncode(std::string_view text);

}  // namespace rackgate::hex

#endif  // RACKGATE_BASE_HEX_H_
