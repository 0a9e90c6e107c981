// What kube/ does with text from a kubeconfig or an API server before
// trusting it: bounded JSON parsing (base64 is base/base64.h; printable cuts
// for messages are base/text.h). Internal to kube/.
#ifndef RACKGATE_KUBE_UNTRUSTED_H_
#define RACKGATE_KUBE_UNTRUSTED_H_

#if !defined(RACKGATE_KUBE_INTERNAL)
#error "kube/untrusted.h is internal to kube/"
#endif

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace rackgate::kube {

// No JSON document from the API server nests deeper than this: a
// CertificateSigningRequest is about 5 levels, a list 7, a watch event 6.
inline constexpr size_t kMaxJsonDepth = 32;

// `text` parsed as JSON, or nullopt when it is malformed or nests deeper than
// kMaxJsonDepth brackets (measured on the text before parsing,
// base/json_depth.h, so a hostile document never builds a deep tree).
std::optional<nlohmann::json> ParseJson(std::string_view text);

// `j[key]` as a string when `j` is an object holding a string there; nullopt
// otherwise (absent, null or another type). Never operator[] on const json.
std::optional<std::string> StringField(const nlohmann::json& j, std::string_view key);

// `value` dumped as JSON; invalid UTF-8 in a string becomes U+FFFD rather
// than an exception.
std::string DumpJson(const nlohmann::json& value);

}  // namespace rackgate::kube

#endif  // RACKGATE_KUBE_UNTRUSTED_H_
