// Untrusted text made safe to show: the one escaper of bytes a peer sent
// (event log strings, a CSR's names, an API server's messages, an EK
// certificate's strings) before they reach a log line, an error message or an
// operator's terminal; and the two checks of text that must be printable.
// (The log sink, base/log.h, escapes the same control bytes in its own
// buffer and passes UTF-8 through.)
#ifndef RACKGATE_BASE_TEXT_H_
#define RACKGATE_BASE_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace rackgate::text {

// Printable ASCII only, anything else as \xNN, so that the text can never
// carry terminal escape sequences to an operator's screen or a log; cut to
// at most `max` characters, ending in "..." when cut.
std::string PrintableAscii(std::string_view s, size_t max);

// Whether every byte of `s` is printable ASCII, space included (0x20..0x7e):
// what PrintableAscii keeps as it is. True when empty.
bool IsPrintableAscii(std::string_view s);

// Whether every byte of `s` is printable ASCII other than the space
// (0x21..0x7e): a name, an address or an identifier. True when empty.
bool IsVisibleAscii(std::string_view s);

}  // namespace rackgate::text

#endif  // RACKGATE_BASE_TEXT_H_
