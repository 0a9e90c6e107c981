// libFuzzer target: the Accept header of a config request (core/ignition.h
// Negotiate, RFC 9110 syntax), negotiated against every supported config
// version, and the spec version text parser on the same bytes. Round trip: a
// version that parses formats back to the same text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/ignition.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rackgate::core::ignition;  // NOLINT
  const std::string_view header(reinterpret_cast<const char*>(data), size);
  for (int minor = kOldestSpec.minor; minor <= kNewestSpec.minor; ++minor) {
    const SpecVersion config{3, minor, 0};
    rackgate::Result<SpecVersion> v = Negotiate(header, config);
    if (v.ok() && !IsSupported(*v)) std::abort();
  }
  rackgate::Result<SpecVersion> parsed = ParseSpecVersion(header);
  if (parsed.ok() && FormatSpecVersion(*parsed) != header) std::abort();
  return 0;
}
