// Ignition spec versions: parsing, formatting and which ones rackgate serves.
#include "core/ignition.h"

#include <algorithm>
#include <iterator>

#include "core/ignition/internal.h"

namespace rackgate::core::ignition {

using nlohmann::json;

namespace {

// One decimal component: no sign, no leading zero, at most 6 digits (so no
// overflow and no second spelling of the same number).
bool ParseComponent(std::string_view s, int* out) {
  if (s.empty() || s.size() > 6 || (s.size() > 1 && s[0] == '0')) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

std::optional<VersionText> ParseVersionText(std::string_view s, bool allow_suffix) {
  VersionText out;
  if (size_t dash = s.find('-'); dash != std::string_view::npos) {
    std::string_view suffix = s.substr(dash + 1);
    if (!allow_suffix || suffix.empty() || suffix.size() > 64) return std::nullopt;
    for (char c : suffix) {
      if (!IsAsciiAlnum(c) && c != '.' && c != '-') return std::nullopt;
    }
    out.prerelease = true;
    s = s.substr(0, dash);
  }
  size_t d1 = s.find('.');
  if (d1 == std::string_view::npos) return std::nullopt;
  size_t d2 = s.find('.', d1 + 1);
  if (d2 == std::string_view::npos) return std::nullopt;
  // The third component cannot hold another '.': ParseComponent refuses it.
  if (!ParseComponent(s.substr(0, d1), &out.version.major) ||
      !ParseComponent(s.substr(d1 + 1, d2 - d1 - 1), &out.version.minor) ||
      !ParseComponent(s.substr(d2 + 1), &out.version.patch)) {
    return std::nullopt;
  }
  return out;
}

std::optional<SpecVersion> NewestNotAbove(const VersionText& v) {
  if (v.version.major != kNewestSpec.major) return std::nullopt;
  std::optional<SpecVersion> best;
  for (SpecVersion s : kSupported) {  // ascending
    if (v.prerelease ? s < v.version : s <= v.version) best = s;
  }
  return best;
}

std::optional<SpecVersion> ConfigVersion(const json& config) {
  if (!config.is_object() || !config.contains("ignition")) return std::nullopt;
  const json& ign = config.at("ignition");
  if (!ign.is_object() || !ign.contains("version") || !ign.at("version").is_string()) {
    return std::nullopt;
  }
  std::optional<VersionText> v =
      ParseVersionText(ign.at("version").get_ref<const std::string&>(), /*allow_suffix=*/false);
  if (!v) return std::nullopt;
  return v->version;
}

bool IsSupported(SpecVersion v) {
  return std::find(std::begin(kSupported), std::end(kSupported), v) != std::end(kSupported);
}

Result<SpecVersion> ParseSpecVersion(std::string_view text) {
  std::optional<VersionText> v = ParseVersionText(text, /*allow_suffix=*/false);
  if (!v) {
    return Status::InvalidArgument("ignition_version_invalid",
                                   "not a spec version of the form X.Y.Z");
  }
  return v->version;
}

std::string FormatSpecVersion(SpecVersion v) {
  return std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch);
}

}  // namespace rackgate::core::ignition
