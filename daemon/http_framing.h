// HTTP/1.1 request framing (RFC 9112 §6): a request is served only when its body length is unambiguous.
//
// A request whose length two parsers could read differently (Content-Length
// beside Transfer-Encoding, two Content-Lengths, a transfer coding other than
// a lone "chunked") lets bytes after the body be taken for a second request:
// request smuggling. The server refuses such a request before reading its
// body and closes the connection (docs/protocol.md, "HTTP framing").
#ifndef RACKGATE_DAEMON_HTTP_FRAMING_H_
#define RACKGATE_DAEMON_HTTP_FRAMING_H_

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::daemon {

// One request header field as received: a repeated field appears once per
// occurrence, in order.
struct HeaderField {
  std::string name;
  std::string value;
};

// Ok when the request's framing is unambiguous:
//  - no field name holds a space or a tab (RFC 9112 §5.1: such a
//    "Content-Length :" is no Content-Length to one parser and is to
//    another);
//  - at most one Transfer-Encoding field, whose whole value is "chunked"
//    (any case), only in an HTTP/1.1 request, and then no Content-Length;
//  - at most one Content-Length field, whose value is one or more decimal
//    digits and nothing else (its size is judged elsewhere).
// Otherwise kInvalidArgument with reason "bad_framing"; the message names
// the rule, never a field's value.
Status CheckFraming(const std::vector<HeaderField>& fields, std::string_view http_version);

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_HTTP_FRAMING_H_
