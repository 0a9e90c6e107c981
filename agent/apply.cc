// Ignition config parsing (nlohmann/json, strict types) and application
// through Root.
#include "agent/apply.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "agent/rootfs.h"
#include "attest/tpm.h"
#include "wire/data_url.h"
#include "wire/codec.h"
#include "base/hex.h"

namespace rackgate::agent {

namespace {

using nlohmann::json;
using wire::Base64Decode;

constexpr char kUnitDir[] = "/etc/systemd/system/";
constexpr char kWantsDir[] = "/etc/systemd/system/multi-user.target.wants/";

Status Invalid(const std::string& where, const std::string& why) {
  return Status::InvalidArgument("config_invalid", where + ": " + why);
}

// Typed access to an optional member; `null` counts as absent, as Ignition
// treats it.
const json* Member(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Status GetString(const json& obj, const char* key, const std::string& where, std::optional<std::string>* out) {
  const json* v = Member(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_string()) return Invalid(where + "." + key, "must be a string");
  *out = v->get<std::string>();
  return Status::Ok();
}

Status GetBool(const json& obj, const char* key, const std::string& where, std::optional<bool>* out) {
  const json* v = Member(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_boolean()) return Invalid(where + "." + key, "must be a boolean");
  *out = v->get<bool>();
  return Status::Ok();
}

Status GetMode(const json& obj, const std::string& where, mode_t* out) {
  const json* v = Member(obj, "mode");
  if (v == nullptr) return Status::Ok();
  // Ignition modes are decimal JSON integers (420 is 0644).
  if (!v->is_number_integer()) return Invalid(where + ".mode", "must be an integer");
  const int64_t m = v->get<int64_t>();
  if (m < 0 || m > 07777) return Invalid(where + ".mode", "must be within 0..07777");
  *out = static_cast<mode_t>(m);
  return Status::Ok();
}

Status GetOwner(const json& obj, const char* key, const std::string& where, ConfigOwner* out) {
  const json* v = Member(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_object()) return Invalid(where + "." + key, "must be an object");
  if (const json* id = Member(*v, "id")) {
    if (!id->is_number_integer() || id->get<int64_t>() < 0 || id->get<int64_t>() > 0xfffffffe) {
      return Invalid(where + "." + key + ".id", "must be a non-negative integer");
    }
    out->id = id->get<int64_t>();
  }
  std::optional<std::string> name;
  if (Status s = GetString(*v, "name", where + "." + key, &name); !s.ok()) return s;
  if (name && !out->id) {
    if (name->empty() || name->size() > 64 || name->find_first_of(":\n") != std::string::npos) {
      return Invalid(where + "." + key + ".name", "unusable name");
    }
    out->name = name;
  }
  return Status::Ok();
}

// The list at obj[key], or an empty one; each element must be an object.
Result<std::vector<const json*>> GetObjects(const json& obj, const char* key, const std::string& where) {
  std::vector<const json*> out;
  const json* v = Member(obj, key);
  if (v == nullptr) return out;
  if (!v->is_array()) return Invalid(where + "." + key, "must be a list");
  if (v->size() > kMaxConfigEntries) return Invalid(where + "." + key, "too many entries");
  for (const auto& e : *v) {
    if (!e.is_object()) return Invalid(where + "." + key, "entries must be objects");
    out.push_back(&e);
  }
  return out;
}

Status GetPath(const json& obj, const std::string& where, std::string* out) {
  std::optional<std::string> path;
  if (Status s = GetString(obj, "path", where, &path); !s.ok()) return s;
  if (!path) return Invalid(where + ".path", "is required");
  auto parts = SplitCleanPath(*path);
  if (!parts.ok()) return Invalid(where + ".path", parts.status().message());
  *out = *path;
  return Status::Ok();
}

// Checks verification.hash ("sha512-<hex>" or "sha256-<hex>") over `data`.
Status CheckHash(const json& contents, const std::string& where, const std::vector<uint8_t>& data) {
  const json* verification = Member(contents, "verification");
  if (verification == nullptr) return Status::Ok();
  if (!verification->is_object()) return Invalid(where + ".verification", "must be an object");
  std::optional<std::string> hash;
  if (Status s = GetString(*verification, "hash", where + ".verification", &hash); !s.ok()) return s;
  if (!hash) return Status::Ok();
  const size_t dash = hash->find('-');
  const std::string alg = hash->substr(0, dash);
  const EVP_MD* md = alg == "sha512" ? EVP_sha512() : alg == "sha256" ? EVP_sha256() : nullptr;
  if (md == nullptr || dash == std::string::npos) {
    return Invalid(where + ".verification.hash", "expected sha512-<hex> or sha256-<hex>");
  }
  auto want = hex::Decode(std::string_view(*hash).substr(dash + 1), 64);
  if (!want || want->size() != static_cast<size_t>(EVP_MD_get_size(md))) {
    return Invalid(where + ".verification.hash", "malformed digest");
  }
  std::vector<uint8_t> got(EVP_MAX_MD_SIZE);
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), got.data(), &n, md, nullptr) != 1) {
    throw std::runtime_error("EVP_Digest failed");
  }
  got.resize(n);
  if (got != *want) return Invalid(where, "contents do not match verification.hash");
  return Status::Ok();
}

bool ValidUnitName(const std::string& name) {
  if (name.empty() || name.size() > 255 || name.front() == '.' || name.find('.') == std::string::npos) {
    return false;
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != ':' && c != '_' && c != '.' && c != '@' &&
        c != '-' && c != '\\') {
      return false;
    }
  }
  return true;
}

Status ParseStorage(const json& storage, IgnitionPlan* plan) {
  if (!storage.is_object()) return Invalid("storage", "must be an object");
  for (const char* section : {"disks", "raid", "filesystems", "luks"}) {
    const json* v = Member(storage, section);
    if (v != nullptr && (!v->is_array() || !v->empty())) {
      plan->not_applied.push_back(std::string("storage.") + section + " (" +
                                  std::to_string(v->is_array() ? v->size() : 1) + ")");
    }
  }

  auto dirs = GetObjects(storage, "directories", "storage");
  if (!dirs.ok()) return dirs.status();
  for (size_t i = 0; i < dirs->size(); ++i) {
    const json& d = *(*dirs)[i];
    const std::string where = "storage.directories[" + std::to_string(i) + "]";
    ConfigDirectory out;
    if (Status s = GetPath(d, where, &out.path); !s.ok()) return s;
    if (Status s = GetMode(d, where, &out.mode); !s.ok()) return s;
    if (Status s = GetOwner(d, "user", where, &out.user); !s.ok()) return s;
    if (Status s = GetOwner(d, "group", where, &out.group); !s.ok()) return s;
    plan->directories.push_back(std::move(out));
  }

  auto files = GetObjects(storage, "files", "storage");
  if (!files.ok()) return files.status();
  for (size_t i = 0; i < files->size(); ++i) {
    const json& f = *(*files)[i];
    const std::string where = "storage.files[" + std::to_string(i) + "]";
    ConfigFile out;
    if (Status s = GetPath(f, where, &out.path); !s.ok()) return s;
    if (Status s = GetMode(f, where, &out.mode); !s.ok()) return s;
    if (Status s = GetOwner(f, "user", where, &out.user); !s.ok()) return s;
    if (Status s = GetOwner(f, "group", where, &out.group); !s.ok()) return s;
    std::optional<bool> overwrite;
    if (Status s = GetBool(f, "overwrite", where, &overwrite); !s.ok()) return s;
    out.overwrite = overwrite.value_or(false);
    if (const json* append = Member(f, "append"); append != nullptr && (!append->is_array() || !append->empty())) {
      // Appending is not idempotent, and the agent may apply a config again
      // after a re-provisioning: refuse rather than grow a file each time.
      return Status::Unsupported("config_unsupported", where + ".append is not supported");
    }
    if (const json* contents = Member(f, "contents")) {
      if (!contents->is_object()) return Invalid(where + ".contents", "must be an object");
      std::optional<std::string> compression, source;
      if (Status s = GetString(*contents, "compression", where + ".contents", &compression); !s.ok()) return s;
      if (compression && !compression->empty()) {
        return Status::Unsupported("config_unsupported", where + ".contents.compression is not supported");
      }
      if (Status s = GetString(*contents, "source", where + ".contents", &source); !s.ok()) return s;
      if (source) {
        if (source->rfind("data:", 0) != 0) {
          // SECURITY: the attested config is the whole trust boundary; a
          // file fetched from elsewhere would not be covered by it.
          return Status::Unsupported("config_unsupported", where + ".contents.source: only data: URLs");
        }
        auto data = DecodeDataUrl(*source);
        if (!data.ok()) return Invalid(where + ".contents.source", data.status().message());
        if (Status s = CheckHash(*contents, where + ".contents", *data); !s.ok()) return s;
        out.contents = std::move(data).value();
      }
    }
    if (out.overwrite && !out.contents) return Invalid(where, "overwrite needs contents.source");
    plan->files.push_back(std::move(out));
  }

  auto links = GetObjects(storage, "links", "storage");
  if (!links.ok()) return links.status();
  for (size_t i = 0; i < links->size(); ++i) {
    const json& l = *(*links)[i];
    const std::string where = "storage.links[" + std::to_string(i) + "]";
    ConfigLink out;
    if (Status s = GetPath(l, where, &out.path); !s.ok()) return s;
    if (Status s = GetOwner(l, "user", where, &out.user); !s.ok()) return s;
    if (Status s = GetOwner(l, "group", where, &out.group); !s.ok()) return s;
    std::optional<std::string> target;
    if (Status s = GetString(l, "target", where, &target); !s.ok()) return s;
    if (!target || target->empty()) return Invalid(where + ".target", "is required");
    std::optional<bool> hard, overwrite;
    if (Status s = GetBool(l, "hard", where, &hard); !s.ok()) return s;
    if (Status s = GetBool(l, "overwrite", where, &overwrite); !s.ok()) return s;
    out.target = *target;
    out.hard = hard.value_or(false);
    out.overwrite = overwrite.value_or(false);
    // A hard link's target is a path in the root, and must be clean like
    // any other; a symlink's target is only stored.
    if (out.hard) {
      auto parts = SplitCleanPath(out.target);
      if (!parts.ok()) return Invalid(where + ".target", parts.status().message());
    }
    plan->links.push_back(std::move(out));
  }
  return Status::Ok();
}

Status ParseSystemd(const json& systemd, IgnitionPlan* plan) {
  if (!systemd.is_object()) return Invalid("systemd", "must be an object");
  auto units = GetObjects(systemd, "units", "systemd");
  if (!units.ok()) return units.status();
  for (size_t i = 0; i < units->size(); ++i) {
    const json& u = *(*units)[i];
    const std::string where = "systemd.units[" + std::to_string(i) + "]";
    ConfigUnit out;
    std::optional<std::string> name;
    if (Status s = GetString(u, "name", where, &name); !s.ok()) return s;
    // SECURITY: the name becomes a path component under /etc/systemd/system.
    if (!name || !ValidUnitName(*name)) return Invalid(where + ".name", "not a unit name");
    out.name = *name;
    if (Status s = GetString(u, "contents", where, &out.contents); !s.ok()) return s;
    if (Status s = GetBool(u, "enabled", where, &out.enabled); !s.ok()) return s;
    std::optional<bool> mask;
    if (Status s = GetBool(u, "mask", where, &mask); !s.ok()) return s;
    out.mask = mask.value_or(false);
    auto dropins = GetObjects(u, "dropins", where);
    if (!dropins.ok()) return dropins.status();
    for (size_t j = 0; j < dropins->size(); ++j) {
      const std::string dwhere = where + ".dropins[" + std::to_string(j) + "]";
      std::optional<std::string> dname, dcontents;
      if (Status s = GetString(*(*dropins)[j], "name", dwhere, &dname); !s.ok()) return s;
      if (Status s = GetString(*(*dropins)[j], "contents", dwhere, &dcontents); !s.ok()) return s;
      if (!dname || !ValidUnitName(*dname) || dname->size() < 6 ||
          dname->compare(dname->size() - 5, 5, ".conf") != 0) {
        return Invalid(dwhere + ".name", "not a drop-in name (NAME.conf)");
      }
      out.dropins.push_back({*dname, dcontents.value_or("")});
    }
    plan->units.push_back(std::move(out));
  }
  return Status::Ok();
}

// Looks `name` up in the root's /etc/passwd (field 3) or /etc/group.
Result<int64_t> LookupId(Root* root, const char* file, const std::string& name) {
  auto data = root->ReadFile(file, 4u << 20);
  if (!data.ok()) return Status::InvalidArgument("owner_unknown", std::string(file) + " is unreadable");
  std::string_view text(reinterpret_cast<const char*>(data->data()), data->size());
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    // name:password:id:...
    const size_t c1 = line.find(':');
    if (c1 == std::string_view::npos || line.substr(0, c1) != name) continue;
    const size_t c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const size_t c3 = line.find(':', c2 + 1);
    const std::string_view id = line.substr(c2 + 1, c3 == std::string_view::npos ? std::string_view::npos : c3 - c2 - 1);
    if (id.empty() || id.size() > 10 || id.find_first_not_of("0123456789") != std::string_view::npos) continue;
    return static_cast<int64_t>(std::stoll(std::string(id)));
  }
  return Status::InvalidArgument("owner_unknown", name + " is not in " + file);
}

Result<Owner> ResolveOwner(Root* root, const ConfigOwner& user, const ConfigOwner& group) {
  Owner out;
  if (user.id) out.uid = static_cast<uid_t>(*user.id);
  if (!user.id && user.name) {
    auto id = LookupId(root, "/etc/passwd", *user.name);
    if (!id.ok()) return id.status();
    out.uid = static_cast<uid_t>(*id);
  }
  if (group.id) out.gid = static_cast<gid_t>(*group.id);
  if (!group.id && group.name) {
    auto id = LookupId(root, "/etc/group", *group.name);
    if (!id.ok()) return id.status();
    out.gid = static_cast<gid_t>(*id);
  }
  return out;
}

std::span<const uint8_t> AsBytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// The owners of a plan's directories, files and links, in plan order.
struct ResolvedOwners {
  std::vector<Owner> directories, files, links;
};

// path_exists unless what Probe `found` at `path` may be replaced (as the
// write would: never a directory, anything else only with `overwrite`);
// `same` says whether it already is what would be written (kept as it is).
Status CheckReplaceable(const std::optional<struct stat>& found, std::string_view path, bool overwrite,
                        bool same) {
  if (!found || same) return Status::Ok();
  if (S_ISDIR(found->st_mode)) return Status::InvalidArgument("path_exists", std::string(path) + " is a directory");
  if (!overwrite) return Status::InvalidArgument("path_exists", std::string(path) + " exists and overwrite is false");
  return Status::Ok();
}

// Whether the regular file at `path` holds exactly `data` (WriteFile's
// idempotence rule for overwrite false).
bool SameFile(Root* root, const std::optional<struct stat>& found, std::string_view path,
              std::span<const uint8_t> data) {
  if (!found || !S_ISREG(found->st_mode) || static_cast<size_t>(found->st_size) != data.size()) return false;
  auto existing = root->ReadFile(path, data.size());
  return existing.ok() && std::equal(existing->begin(), existing->end(), data.begin(), data.end());
}

Status CheckFile(Root* root, std::string_view path, std::span<const uint8_t> data, bool overwrite) {
  auto found = root->Probe(path);
  if (!found.ok()) return found.status();
  return CheckReplaceable(*found, path, overwrite, SameFile(root, *found, path, data));
}

// A symbolic link is the same when it holds `target`; a hard link when it is
// the target's file already (Root::Hardlink keeps both).
Status CheckLink(Root* root, std::string_view path, std::string_view target, bool hard, bool overwrite) {
  auto found = root->Probe(path);
  if (!found.ok()) return found.status();
  bool same = false;
  if (*found && !hard && S_ISLNK((*found)->st_mode)) {
    auto text = root->ReadLink(path);
    same = text.ok() && *text == target;
  } else if (*found && hard) {
    auto to = root->Probe(target);
    same = to.ok() && *to && (*to)->st_dev == (*found)->st_dev && (*to)->st_ino == (*found)->st_ino;
  }
  return CheckReplaceable(*found, path, overwrite, same);
}

// The whole plan checked against `root` before anything is written (issue
// 32: a run that failed half-way had written /etc/hostname already): every
// owner resolved, every target's directory writable, nothing in the way
// that the write would refuse. Returns the resolved owners.
Result<ResolvedOwners> CheckPlan(const IgnitionPlan& plan, Root* root, const std::vector<std::string>& also_writes) {
  ResolvedOwners out;
  for (const auto& d : plan.directories) {
    auto owner = ResolveOwner(root, d.user, d.group);
    if (!owner.ok()) return owner.status().Annotate(d.path);
    out.directories.push_back(*owner);
    auto found = root->Probe(d.path);
    if (!found.ok()) return found.status();
    if (*found && !S_ISDIR((*found)->st_mode)) {
      return Status::InvalidArgument("path_exists", d.path + " exists and is not a directory");
    }
  }
  std::set<std::string> planned_files;
  static const std::vector<uint8_t> kEmpty;
  for (const auto& f : plan.files) {
    auto owner = ResolveOwner(root, f.user, f.group);
    if (!owner.ok()) return owner.status().Annotate(f.path);
    out.files.push_back(*owner);
    if (Status s = CheckFile(root, f.path, f.contents ? *f.contents : kEmpty, f.overwrite); !s.ok()) return s;
    planned_files.insert(f.path);
  }
  for (const auto& l : plan.links) {
    auto owner = ResolveOwner(root, l.user, l.group);
    if (!owner.ok()) return owner.status().Annotate(l.path);
    out.links.push_back(*owner);
    if (l.hard && !planned_files.count(l.target)) {
      auto target = root->Probe(l.target);
      if (!target.ok()) return target.status();
      if (!*target || !S_ISREG((*target)->st_mode)) {
        return Status::InvalidArgument("path_invalid", l.path + ": hard link target " + l.target +
                                                           " is not a regular file");
      }
    }
    if (Status s = CheckLink(root, l.path, l.target, l.hard, l.overwrite); !s.ok()) return s;
  }
  for (const auto& u : plan.units) {
    const std::string path = kUnitDir + u.name;
    if (u.mask) {
      if (Status s = CheckLink(root, path, "/dev/null", false, true); !s.ok()) return s;
    } else if (u.contents) {
      if (Status s = CheckFile(root, path, AsBytes(*u.contents), true); !s.ok()) return s;
    }
    for (const auto& d : u.dropins) {
      if (Status s = CheckFile(root, path + ".d/" + d.name, AsBytes(d.contents), true); !s.ok()) return s;
    }
    if (u.enabled) {
      auto found = root->Probe(kWantsDir + u.name);
      if (!found.ok()) return found.status();
      if (*found && (*u.enabled ? S_ISDIR((*found)->st_mode) : !S_ISLNK((*found)->st_mode))) {
        return Status::InvalidArgument("path_exists", kWantsDir + u.name + " is not a symlink");
      }
    }
  }
  for (const auto& p : also_writes) {
    if (auto found = root->Probe(p); !found.ok()) return found.status();
  }
  return out;
}

}  // namespace

Result<std::vector<uint8_t>> DecodeDataUrl(std::string_view url, size_t max_bytes) {
  Result<wire::DataUrl> decoded = wire::DecodeDataUrl(url, max_bytes);
  if (!decoded.ok()) return decoded.status();
  return std::vector<uint8_t>(decoded->data.begin(), decoded->data.end());
}

Result<IgnitionPlan> ParseIgnitionConfig(std::string_view text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Invalid("config", "not a JSON object");
  IgnitionPlan plan;
  const json* ignition = Member(doc, "ignition");
  if (ignition == nullptr || !ignition->is_object()) return Invalid("ignition", "is required");
  std::optional<std::string> version;
  if (Status s = GetString(*ignition, "version", "ignition", &version); !s.ok()) return s;
  if (!version || version->rfind("3.", 0) != 0) return Invalid("ignition.version", "must be 3.x");
  plan.version = *version;
  if (const json* config = Member(*ignition, "config")) {
    for (const char* k : {"merge", "replace"}) {
      const json* v = config->is_object() ? Member(*config, k) : nullptr;
      if (v != nullptr && !(v->is_array() && v->empty()) && !(v->is_object() && !Member(*v, "source"))) {
        plan.not_applied.push_back(std::string("ignition.config.") + k);
      }
    }
  }
  if (const json* storage = Member(doc, "storage")) {
    if (Status s = ParseStorage(*storage, &plan); !s.ok()) return s;
  }
  if (const json* systemd = Member(doc, "systemd")) {
    if (Status s = ParseSystemd(*systemd, &plan); !s.ok()) return s;
  }
  if (const json* passwd = Member(doc, "passwd"); passwd != nullptr && passwd->is_object()) {
    for (const char* k : {"users", "groups"}) {
      const json* v = Member(*passwd, k);
      if (v != nullptr && v->is_array() && !v->empty()) {
        plan.not_applied.push_back(std::string("passwd.") + k + " (" + std::to_string(v->size()) + ")");
      }
    }
  }
  if (const json* kargs = Member(doc, "kernelArguments"); kargs != nullptr && kargs->is_object()) {
    for (const char* k : {"shouldExist", "shouldNotExist"}) {
      const json* v = Member(*kargs, k);
      if (v != nullptr && v->is_array() && !v->empty()) plan.not_applied.push_back(std::string("kernelArguments.") + k);
    }
  }
  return plan;
}

Status ApplyIgnition(const IgnitionPlan& plan, const std::string& root_dir,
                     const std::vector<std::string>& also_writes) {
  auto root = Root::Open(root_dir);
  if (!root.ok()) return root.status();
  // Everything checked first; nothing is written unless all of it can be.
  auto owners = CheckPlan(plan, &*root, also_writes);
  if (!owners.ok()) return owners.status();
  for (size_t i = 0; i < plan.directories.size(); ++i) {
    const auto& d = plan.directories[i];
    if (Status s = root->MakeDirectory(d.path, d.mode, owners->directories[i]); !s.ok()) return s;
  }
  for (size_t i = 0; i < plan.files.size(); ++i) {
    const auto& f = plan.files[i];
    static const std::vector<uint8_t> kEmpty;
    if (Status s = root->WriteFile(f.path, f.contents ? *f.contents : kEmpty, f.mode, owners->files[i], f.overwrite);
        !s.ok()) {
      return s;
    }
  }
  for (size_t i = 0; i < plan.links.size(); ++i) {
    const auto& l = plan.links[i];
    Status s = l.hard ? root->Hardlink(l.path, l.target, l.overwrite)
                      : root->Symlink(l.path, l.target, owners->links[i], l.overwrite);
    if (!s.ok()) return s;
  }
  for (const auto& u : plan.units) {
    const std::string path = kUnitDir + u.name;
    if (u.mask) {
      if (Status s = root->Symlink(path, "/dev/null", {}, true); !s.ok()) return s;
    } else if (u.contents) {
      if (Status s = root->WriteFile(path, AsBytes(*u.contents), 0644, {}, true); !s.ok()) return s;
    }
    for (const auto& d : u.dropins) {
      if (Status s = root->WriteFile(path + ".d/" + d.name, AsBytes(d.contents), 0644, {}, true); !s.ok()) {
        return s;
      }
    }
    if (u.enabled) {
      const std::string wants = kWantsDir + u.name;
      if (*u.enabled) {
        // A unit the config does not write is expected where the
        // distribution installs units.
        const std::string target = u.contents ? path : "/usr/lib/systemd/system/" + u.name;
        if (Status s = root->Symlink(wants, target, {}, true); !s.ok()) return s;
      } else if (Status s = root->RemoveSymlink(wants); !s.ok()) {
        return s;
      }
    }
  }
  return Status::Ok();
}

}  // namespace rackgate::agent
