// Untrusted text made safe to show: the one escaper of bytes a peer sent
// (event log strings, a CSR's names, an API server's messages) before they
// reach a log line, an error message or an operator's terminal.
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

}  // namespace rackgate::text

#endif  // RACKGATE_BASE_TEXT_H_
