// What the files of core/ignition/ share with each other; not for use outside it.
#ifndef RACKGATE_CORE_IGNITION_INTERNAL_H_
#define RACKGATE_CORE_IGNITION_INTERNAL_H_

#if !defined(RACKGATE_CORE_INTERNAL)
#error "core/ignition/internal.h is internal to core/ignition/"
#endif

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/ignition.h"

namespace rackgate::core::ignition {

inline constexpr SpecVersion kSupported[] = {{3, 0, 0}, {3, 1, 0}, {3, 2, 0}, {3, 3, 0}};

// ASCII only, whatever the locale.
inline bool IsAsciiAlnum(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
inline char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
inline std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = AsciiLower(c);
  return out;
}
inline bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (AsciiLower(s[i]) != AsciiLower(prefix[i])) return false;
  }
  return true;
}

// --- version.cc

struct VersionText {
  SpecVersion version;
  bool prerelease = false;  // "3.4.0-experimental": below 3.4.0, above 3.3.x
};

// "X.Y.Z", or with allow_suffix also "X.Y.Z-suffix" (a semver pre-release of
// [0-9A-Za-z.-], as Ignition spells "3.4.0-experimental").
std::optional<VersionText> ParseVersionText(std::string_view s, bool allow_suffix);

// The newest supported version a client reading up to `v` also reads. A
// client is only assumed to read older minors of its own major.
std::optional<SpecVersion> NewestNotAbove(const VersionText& v);

// The config's /ignition/version, when it is there and reads X.Y.Z.
std::optional<SpecVersion> ConfigVersion(const nlohmann::json& config);

// --- pointer.cc

// `pointer` extended by one object key (escaped per RFC 6901) or array index.
std::string Child(const std::string& pointer, std::string_view key);
std::string Child(const std::string& pointer, size_t index);
// `pointer` for a message: "/" for the root.
std::string Where(const std::string& pointer);
// kInvalidArgument, reason template_invalid, "<pointer>: <why>".
Status Invalid(const std::string& pointer, const std::string& why);

// --- convert.cc

struct TooNew {
  std::string pointer;
  SpecVersion since;
};

// The first field of `config` that a spec newer than `version` introduced.
std::optional<TooNew> FindNewerThan(const nlohmann::json& config, SpecVersion version);

// --- resources (files' contents, CAs, config merges)

inline bool HasNonNullKey(const nlohmann::json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && !obj.at(key).is_null();
}

// An object that fetches something: it has a string "source".
inline bool IsResource(const nlohmann::json& obj) {
  return obj.is_object() && obj.contains("source") && obj.at("source").is_string();
}

// Inline content we cannot look into (gzip): neither placeholders nor secrets
// are searched in it.
inline bool IsCompressed(const nlohmann::json& resource) {
  return HasNonNullKey(resource, "compression") && resource.at("compression").is_string() &&
         !resource.at("compression").get_ref<const std::string&>().empty();
}

// Optional fields may be absent or null, as in Ignition's schemas.
inline bool Absent(const nlohmann::json& obj, const char* key) {
  return !obj.contains(key) || obj.at(key).is_null();
}

// --- structure.cc

// Lexically cleaned absolute path (as Go's path.Clean): so that
// "/etc//kubernetes/./admin.conf" is matched and deduplicated as
// "/etc/kubernetes/admin.conf".
std::string CleanPath(std::string_view path);

// Checks keys, types and paths of the whole template `root` and sets
// *version to its declared, supported spec version. template_invalid or
// template_version_unsupported (see ParseTemplate) otherwise.
Status CheckStructure(const nlohmann::json& root, SpecVersion* version);

// --- placeholders.cc

// The sorted placeholder names of a structurally valid template, checked
// against `kind`; template_invalid on a malformed, unknown or (public)
// per-machine placeholder, or a bad inline data URL. Leaves *config as it
// is: the pointer is there because the walk is the one Render writes with.
Result<std::vector<std::string>> CheckPlaceholders(TemplateKind kind, nlohmann::json* config);

// --- secret_checks.cc

// template_secret_in_public when `root` (a structurally valid template)
// carries anything ParseTemplate's contract calls secret.
Status CheckNoSecrets(const nlohmann::json& root);

}  // namespace rackgate::core::ignition

#endif  // RACKGATE_CORE_IGNITION_INTERNAL_H_
