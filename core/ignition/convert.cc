// Conversion between Ignition 3.x minors, and the fields each minor added.
#include "core/ignition.h"

#include "core/ignition/internal.h"

namespace rackgate::core::ignition {

using nlohmann::json;

namespace {

// Fields added by 3.x minors
//
// Checked against Ignition's JSON schemas config/v3_{0,1,2,3}/schema/
// ignition.json (coreos/ignition a5d574a8, every property path of each
// version diffed against the previous one) and docs/migrating-configs.md
// ("From Version 3.x.0 to 3.y.0") for changes of allowed values. Notes:
// wipePartitionEntry is already in 3.0.0; boot_device is Butane sugar, not an
// Ignition field; 3.3.0's only other change is the filesystem format "none".

enum class Need {
  kPresent,     // the field exists (with any value, null included)
  kSha256Hash,  // a verification hash of type sha256 (3.1.0)
  kGsSource,    // a gs:// source URL (3.2.0)
  kFormatNone,  // filesystem format "none" (3.3.0)
};

struct Addition {
  SpecVersion since;
  std::string_view path;  // dotted; "name[]" steps into every element of an array
  Need need;
};

constexpr Addition kAdditions[] = {
    {{3, 1, 0}, "ignition.proxy", Need::kPresent},
    {{3, 1, 0}, "ignition.config.merge[].compression", Need::kPresent},
    {{3, 1, 0}, "ignition.config.merge[].httpHeaders", Need::kPresent},
    {{3, 1, 0}, "ignition.config.replace.compression", Need::kPresent},
    {{3, 1, 0}, "ignition.config.replace.httpHeaders", Need::kPresent},
    {{3, 1, 0}, "ignition.security.tls.certificateAuthorities[].compression", Need::kPresent},
    {{3, 1, 0}, "ignition.security.tls.certificateAuthorities[].httpHeaders", Need::kPresent},
    {{3, 1, 0}, "storage.files[].contents.httpHeaders", Need::kPresent},
    {{3, 1, 0}, "storage.files[].append[].httpHeaders", Need::kPresent},
    {{3, 1, 0}, "storage.filesystems[].mountOptions", Need::kPresent},
    {{3, 1, 0}, "ignition.config.merge[].verification.hash", Need::kSha256Hash},
    {{3, 1, 0}, "ignition.config.replace.verification.hash", Need::kSha256Hash},
    {{3, 1, 0},
     "ignition.security.tls.certificateAuthorities[].verification.hash",
     Need::kSha256Hash},
    {{3, 1, 0}, "storage.files[].contents.verification.hash", Need::kSha256Hash},
    {{3, 1, 0}, "storage.files[].append[].verification.hash", Need::kSha256Hash},
    {{3, 2, 0}, "storage.luks", Need::kPresent},
    {{3, 2, 0}, "storage.disks[].partitions[].resize", Need::kPresent},
    {{3, 2, 0}, "passwd.users[].shouldExist", Need::kPresent},
    {{3, 2, 0}, "passwd.groups[].shouldExist", Need::kPresent},
    {{3, 2, 0}, "ignition.config.merge[].source", Need::kGsSource},
    {{3, 2, 0}, "ignition.config.replace.source", Need::kGsSource},
    {{3, 2, 0}, "ignition.security.tls.certificateAuthorities[].source", Need::kGsSource},
    {{3, 2, 0}, "storage.files[].contents.source", Need::kGsSource},
    {{3, 2, 0}, "storage.files[].append[].source", Need::kGsSource},
    {{3, 3, 0}, "kernelArguments", Need::kPresent},
    {{3, 3, 0}, "storage.filesystems[].format", Need::kFormatNone},
};

bool Satisfies(const json& v, Need need) {
  auto starts = [&](std::string_view prefix) {
    return v.is_string() && StartsWithNoCase(v.get_ref<const std::string&>(), prefix);
  };
  switch (need) {
    case Need::kPresent:
      return true;
    case Need::kSha256Hash:
      return starts("sha256-");
    case Need::kGsSource:
      return starts("gs://");
    case Need::kFormatNone:
      return v.is_string() && v.get_ref<const std::string&>() == "none";
  }
  return false;
}

// The pointer of the first value at `path` under `node` that satisfies
// `need`, if any.
std::optional<std::string> FindAt(const json& node, std::string_view path, Need need,
                                  const std::string& pointer) {
  if (!node.is_object()) return std::nullopt;
  size_t dot = path.find('.');
  std::string_view step = path.substr(0, dot);
  std::string_view rest = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  const bool each = step.size() > 2 && step.substr(step.size() - 2) == "[]";
  if (each) step.remove_suffix(2);
  const std::string key(step);
  if (!node.contains(key)) return std::nullopt;
  const json& v = node.at(key);
  const std::string here = Child(pointer, key);
  if (!each) {
    if (rest.empty()) return Satisfies(v, need) ? std::optional(here) : std::nullopt;
    return FindAt(v, rest, need, here);
  }
  if (!v.is_array()) return std::nullopt;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& e = v.at(i);
    std::optional<std::string> hit =
        rest.empty() ? (Satisfies(e, need) ? std::optional(Child(here, i)) : std::nullopt)
                     : FindAt(e, rest, need, Child(here, i));
    if (hit) return hit;
  }
  return std::nullopt;
}

}  // namespace

std::optional<TooNew> FindNewerThan(const json& config, SpecVersion version) {
  for (const Addition& a : kAdditions) {
    if (a.since <= version) continue;
    if (std::optional<std::string> p = FindAt(config, a.path, a.need, "")) {
      return TooNew{*p, a.since};
    }
  }
  return std::nullopt;
}

Result<json> ConvertToVersion(const json& config, SpecVersion target) {
  if (!IsSupported(target)) {
    return Status::Unsupported("ignition_version_unsupported",
                               "cannot convert to spec " + FormatSpecVersion(target));
  }
  std::optional<SpecVersion> current = ConfigVersion(config);
  if (!current) {
    return Status::InvalidArgument("ignition_config_invalid",
                                   "config has no readable /ignition/version");
  }
  if (target < *current) {
    if (std::optional<TooNew> t = FindNewerThan(config, target)) {
      return Status::Unsupported("ignition_config_too_new",
                                 t->pointer + " needs spec " + FormatSpecVersion(t->since) +
                                     ", the client reads at most " + FormatSpecVersion(target));
    }
  }
  json out = config;
  out["ignition"]["version"] = FormatSpecVersion(target);
  return out;
}

}  // namespace rackgate::core::ignition
