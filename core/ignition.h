// Ignition configs (spec 3.x) as rackgate serves them: Accept negotiation,
// conversion between 3.x minors, validation of operator-uploaded templates
// (public and attested), placeholder rendering, and merging the attested
// config on top of the public one. Pure: no I/O, no storage, no HTTP.
//
// Thread safety: every function here is reentrant; a Template is immutable
// after ParseTemplate and may be rendered from many threads at once.
#ifndef RACKGATE_CORE_IGNITION_H_
#define RACKGATE_CORE_IGNITION_H_

#include <compare>
#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::core::ignition {

// An Ignition spec version "major.minor.patch". Ordered field by field.
struct SpecVersion {
  int major = 3;
  int minor = 0;
  int patch = 0;

  auto operator<=>(const SpecVersion&) const = default;
};

// The versions rackgate reads, writes and converts between. 3.3.0 is the
// newest that the Ignition in Debian 12 (2.14) reads as stable.
inline constexpr SpecVersion kOldestSpec{3, 0, 0};
inline constexpr SpecVersion kNewestSpec{3, 3, 0};
bool IsSupported(SpecVersion v);

// "3.2.0" exactly: three decimal numbers without leading zeros and no
// suffix. kInvalidArgument, reason ignition_version_invalid, otherwise. Says
// nothing about support; see IsSupported.
Result<SpecVersion> ParseSpecVersion(std::string_view text);
std::string FormatSpecVersion(SpecVersion v);

// Bounds on an Accept header; beyond them the header counts as malformed.
inline constexpr size_t kMaxAcceptBytes = 8 * 1024;
inline constexpr size_t kMaxAcceptRanges = 64;

// Which spec version to answer a config request with, from the request's
// Accept header (RFC 9110 §12.5.1) and the rendered config's own version.
//
// Each supported version X (`application/vnd.coreos.ignition+json;version=X`)
// gets the q of the most specific range that matches it: an ignition range
// naming exactly X; then an ignition range naming a newer version or a
// pre-release (the client reads everything up to it, so it maps to the newest
// supported version not above it: 3.4.0, 3.9.0 and 3.4.0-experimental map to
// 3.3.0, 3.3.0-experimental to 3.2.0); then the ignition type without a
// version, application/json, application/*, */*, which match only the
// config's own version. The highest q > 0 wins; ties go to the higher
// version. So `version=3.3.0;q=0, */*;q=0.1` refuses 3.3.0 even when the
// config is 3.3.0 (then nothing is acceptable).
//
// Returns config_version when the header is absent, empty or an empty list.
// Fails with kInvalidArgument, reason accept_malformed, when the header is not
// RFC 9110 syntax or exceeds the bounds above (the daemon answers 400); with
// kUnsupported, reason ignition_version_unsupported, when no version we can
// produce is acceptable (the daemon answers 406).
Result<SpecVersion> Negotiate(std::optional<std::string_view> accept_header,
                              SpecVersion config_version);

// The config rewritten to spec version `target`. 3.x minors only add fields,
// so upgrading rewrites ignition.version, and downgrading is the same when the
// config uses nothing introduced after `target`. Fails with kUnsupported and
// reason ignition_config_too_new, naming the JSON pointer of the first such
// field and the version that introduced it; with kUnsupported, reason
// ignition_version_unsupported, when `target` is not supported; with
// kInvalidArgument, reason ignition_config_invalid, when `config` has no
// readable ignition.version.
Result<nlohmann::json> ConvertToVersion(const nlohmann::json& config, SpecVersion target);

// The public template is served to anyone who may reach the pool, the attested
// one only to an attested machine (merged on top of the public one).
enum class TemplateKind { kPublic, kAttested };

inline constexpr size_t kMaxTemplateBytes = 4 * 1024 * 1024;
inline constexpr int kMaxTemplateDepth = 32;

// A validated template. `config` is the uploaded JSON as is, rackgate
// annotations included; Render strips them.
struct Template {
  TemplateKind kind = TemplateKind::kPublic;
  SpecVersion version;
  nlohmann::json config;
  // Every placeholder name the template uses, sorted, without duplicates.
  std::vector<std::string> placeholders;
};

// Parses and validates an operator's template. On failure, kInvalidArgument
// with one of these reasons and a message naming the JSON pointer (or byte
// offset) at fault:
//   template_invalid             not JSON, too large or deep, a duplicate or
//                                unknown key, a wrong type, a bad path or
//                                placeholder, a field newer than the declared
//                                version, an inline source that carries a
//                                placeholder and a verification hash
//   template_version_unsupported ignition.version is not 3.0.0 to 3.3.0
//   template_secret_in_public    (kPublic only) something secret; see below
//
// Placeholders are `{{name}}` inside JSON string values (never keys), and
// inside the decoded content of inline `data:` sources. Names:
//   both kinds:    pool, appliance.url, appliance.urls, appliance.ca_pem
//   attested only: hostname, ek_hash, machine.<var> with var of 1..63
//                  [A-Za-z0-9_-], address.{InternalIP,ExternalIP,InternalDNS,
//                  ExternalDNS,Hostname}
// `{{"{{"}}` is a literal "{{" (as in Go templates), for files that need one.
//
// A file may carry `"rackgate": {"secret": true}`; no other key is allowed in
// `rackgate`, and no other node may carry it. A public template is refused
// when it marks a file secret, writes a file or link at a credential path
// (the table in ignition/secret_checks.cc), inlines content holding a PEM private key or
// inlines content it cannot inspect (compressed), inlines a LUKS key file,
// sends an Authorization, Proxy-Authorization or Cookie header, puts
// credentials in a URL, or gives a user or group a passwordHash.
Result<Template> ParseTemplate(std::string_view json_text, TemplateKind kind);

// Placeholder values by name ("hostname", "machine.rack", ...).
struct Values {
  std::map<std::string, std::string> values;
};

// The template with every placeholder substituted and rackgate annotations
// removed. Inline `data:` sources that hold a placeholder are decoded,
// substituted and re-encoded in the same form (base64, or percent-encoding of
// everything but RFC 3986 unreserved characters); the others are left
// byte-identical. Fails with kNotFound, reason template_value_missing, naming
// a placeholder that `v` lacks; with kInvalidArgument, reason
// template_value_invalid, when a value that lands in a JSON string is not
// valid UTF-8. REQUIRES: `t` came from ParseTemplate.
Result<nlohmann::json> Render(const Template& t, const Values& v);

// `overlay` on top of `base` (the attested config on the public one), both
// rendered. Entries of keyed lists are replaced whole by key: storage.files,
// .directories and .links by path (a path replaces the base's node of any
// of the three kinds), systemd.units by name, passwd.users and .groups by
// name, storage.disks and .filesystems by device, storage.raid and .luks by
// name, certificate authorities and config merges by source. Other lists are
// concatenated without repeating an equal element; kernel arguments the
// overlay requires or forbids are removed from the base's opposite list.
// Objects merge recursively; a null in the overlay leaves the base's value;
// other scalars come from the overlay. ignition.version is the higher of the
// two. If either is not an object, the overlay is returned.
nlohmann::json Merge(const nlohmann::json& base, const nlohmann::json& overlay);

// Compact JSON with keys sorted, so equal configs serialize to equal bytes.
// REQUIRES: strings are valid UTF-8 (Render guarantees it); throws
// nlohmann::json::type_error otherwise.
std::string Serialize(const nlohmann::json& config);

}  // namespace rackgate::core::ignition

#endif  // RACKGATE_CORE_IGNITION_H_
