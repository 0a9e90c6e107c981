// The nesting depth of a JSON text, measured before it is parsed: the bound
// every JSON document the wire module reads from an untrusted source is
// checked against. Internal to wire/.
#ifndef RACKGATE_WIRE_JSON_DEPTH_H_
#define RACKGATE_WIRE_JSON_DEPTH_H_

#if !defined(RACKGATE_WIRE_INTERNAL)
#error "wire/json_depth.h is internal to wire/"
#endif

#include <cstddef>
#include <string_view>

namespace rackgate::wire {

// The deepest nesting of [ and { outside strings, without building
// anything, so that a hostile document cannot make the parser build (or
// later destroy) a deep tree. Malformed JSON is left for the parser to
// refuse. Pure.
size_t JsonDepth(std::string_view text);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_JSON_DEPTH_H_
