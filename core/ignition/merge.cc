// Merging the attested config on top of the public one, and serializing a config.
#include "core/ignition.h"

#include <algorithm>
#include <set>

#include "core/ignition/internal.h"

namespace rackgate::core::ignition {

using nlohmann::json;

namespace {

// Lists whose entries Ignition identifies by a key; an overlay entry replaces
// the base entry with the same key.
struct KeyedList {
  std::string_view pointer;
  const char* key;
};

constexpr KeyedList kKeyedLists[] = {
    {"/storage/files", "path"},
    {"/storage/directories", "path"},
    {"/storage/links", "path"},
    {"/storage/disks", "device"},
    {"/storage/filesystems", "device"},
    {"/storage/raid", "name"},
    {"/storage/luks", "name"},
    {"/systemd/units", "name"},
    {"/passwd/users", "name"},
    {"/passwd/groups", "name"},
    {"/ignition/security/tls/certificateAuthorities", "source"},
    {"/ignition/config/merge", "source"},
};

const char* ListKey(const std::string& pointer) {
  for (const KeyedList& k : kKeyedLists) {
    if (k.pointer == pointer) return k.key;
  }
  return nullptr;
}

std::optional<std::string> EntryKey(const json& entry, const char* key) {
  if (!entry.is_object() || !entry.contains(key) || !entry.at(key).is_string()) {
    return std::nullopt;
  }
  const std::string& v = entry.at(key).get_ref<const std::string&>();
  return std::string_view(key) == "path" ? CleanPath(v) : v;
}

json MergeKeyed(const json& base, const json& overlay, const char* key) {
  std::map<std::string, size_t> by_key;  // overlay entry per key (the first)
  for (size_t i = 0; i < overlay.size(); ++i) {
    if (std::optional<std::string> k = EntryKey(overlay.at(i), key)) by_key.emplace(*k, i);
  }
  std::vector<bool> used(overlay.size(), false);
  json out = json::array();
  for (const json& e : base) {
    std::optional<std::string> k = EntryKey(e, key);
    auto it = k ? by_key.find(*k) : by_key.end();
    if (it == by_key.end()) {
      out.push_back(e);
    } else if (!used[it->second]) {
      out.push_back(overlay.at(it->second));
      used[it->second] = true;
    }
  }
  for (size_t i = 0; i < overlay.size(); ++i) {
    if (!used[i]) out.push_back(overlay.at(i));
  }
  return out;
}

json MergeValue(const json& base, const json& overlay, const std::string& pointer) {
  if (overlay.is_null()) return base;
  if (base.is_object() && overlay.is_object()) {
    json out = base;
    for (const auto& [key, value] : overlay.items()) {
      out[key] = out.contains(key) ? MergeValue(out.at(key), value, Child(pointer, key)) : value;
    }
    return out;
  }
  if (base.is_array() && overlay.is_array()) {
    if (const char* key = ListKey(pointer)) return MergeKeyed(base, overlay, key);
    // Ignition refuses duplicate list entries, so equal ones are not repeated.
    json out = base;
    for (const json& e : overlay) {
      if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
    }
    return out;
  }
  return overlay;
}

// Cleaned paths of the overlay's nodes of every kind but `except`.
std::set<std::string> OverlayNodePaths(const json& overlay, std::string_view except) {
  std::set<std::string> out;
  if (!overlay.contains("storage") || !overlay.at("storage").is_object()) return out;
  const json& s = overlay.at("storage");
  for (const char* list : {"files", "directories", "links"}) {
    if (list == except || !s.contains(list) || !s.at(list).is_array()) continue;
    for (const json& n : s.at(list)) {
      if (std::optional<std::string> k = EntryKey(n, "path")) out.insert(*k);
    }
  }
  return out;
}

// Removes from base's kernel argument list `list` what the overlay puts in
// `opposite`: the overlay's word wins, and Ignition refuses an argument that
// is both required and forbidden.
void DropOpposedKernelArguments(json* merged, const json& overlay, const char* list,
                                const char* opposite) {
  if (!merged->contains("kernelArguments") || !overlay.contains("kernelArguments")) return;
  json& mine = (*merged)["kernelArguments"];
  const json& theirs = overlay.at("kernelArguments");
  if (!mine.is_object() || !theirs.is_object() || !mine.contains(list) ||
      !mine.at(list).is_array() || !theirs.contains(opposite) || !theirs.at(opposite).is_array()) {
    return;
  }
  json kept = json::array();
  for (const json& arg : mine.at(list)) {
    const json& forbidden = theirs.at(opposite);
    if (std::find(forbidden.begin(), forbidden.end(), arg) == forbidden.end()) kept.push_back(arg);
  }
  mine[list] = std::move(kept);
}

}  // namespace

json Merge(const json& base, const json& overlay) {
  if (!base.is_object() || !overlay.is_object()) return overlay;
  // A node path the overlay sets replaces the base's node at that path even
  // when it is of another kind (a file over a directory): Ignition refuses
  // two nodes at one path. Same-kind entries are replaced in place below.
  json trimmed = base;
  if (trimmed.contains("storage") && trimmed.at("storage").is_object()) {
    json& s = trimmed["storage"];
    for (const char* list : {"files", "directories", "links"}) {
      if (!s.contains(list) || !s.at(list).is_array()) continue;
      std::set<std::string> taken = OverlayNodePaths(overlay, list);
      json kept = json::array();
      for (const json& n : s.at(list)) {
        std::optional<std::string> k = EntryKey(n, "path");
        if (!k || taken.count(*k) == 0) kept.push_back(n);
      }
      s[list] = std::move(kept);
    }
  }
  json out = MergeValue(trimmed, overlay, "");
  DropOpposedKernelArguments(&out, overlay, "shouldExist", "shouldNotExist");
  DropOpposedKernelArguments(&out, overlay, "shouldNotExist", "shouldExist");

  std::optional<SpecVersion> a = ConfigVersion(base);
  std::optional<SpecVersion> b = ConfigVersion(overlay);
  if (a && b && out.contains("ignition") && out.at("ignition").is_object()) {
    out["ignition"]["version"] = FormatSpecVersion(std::max(*a, *b));
  }
  return out;
}

std::string Serialize(const json& config) { return config.dump(); }

}  // namespace rackgate::core::ignition
