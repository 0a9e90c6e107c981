// The structure of a template: keys, types and paths as Ignition's schema has them.
#include "core/ignition.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <vector>

#include "core/ignition/internal.h"

namespace rackgate::core::ignition {

using nlohmann::json;

namespace {

// Unknown keys are refused: Ignition only warns about them, so a typo such as
// "overwirte" would otherwise pass silently.
Status CheckKeys(const json& obj, const std::string& pointer,
                 std::initializer_list<std::string_view> allowed) {
  if (!obj.is_object()) return Invalid(pointer, "expected an object");
  for (const auto& [key, value] : obj.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return Invalid(Child(pointer, key), "unknown key");
    }
  }
  return Status::Ok();
}

Status OptString(const json& obj, const char* key, const std::string& pointer) {
  if (Absent(obj, key) || obj.at(key).is_string()) return Status::Ok();
  return Invalid(Child(pointer, key), "expected a string");
}

Status ReqString(const json& obj, const char* key, const std::string& pointer) {
  if (Absent(obj, key)) return Invalid(Child(pointer, key), "required");
  return OptString(obj, key, pointer);
}

Status OptBool(const json& obj, const char* key, const std::string& pointer) {
  if (Absent(obj, key) || obj.at(key).is_boolean()) return Status::Ok();
  return Invalid(Child(pointer, key), "expected true or false");
}

Status OptInt(const json& obj, const char* key, const std::string& pointer, int64_t lo,
              int64_t hi) {
  if (Absent(obj, key)) return Status::Ok();
  const json& v = obj.at(key);
  bool ok = false;
  if (v.is_number_unsigned()) {
    ok = v.get<uint64_t>() <= static_cast<uint64_t>(hi) &&
         (lo <= 0 || v.get<uint64_t>() >= static_cast<uint64_t>(lo));
  } else if (v.is_number_integer()) {
    ok = v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  }
  if (ok) return Status::Ok();
  return Invalid(Child(pointer, key),
                 "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
}

Status OptStrings(const json& obj, const char* key, const std::string& pointer) {
  if (Absent(obj, key)) return Status::Ok();
  const json& v = obj.at(key);
  if (!v.is_array()) return Invalid(Child(pointer, key), "expected a list of strings");
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v.at(i).is_string()) return Invalid(Child(Child(pointer, key), i), "expected a string");
  }
  return Status::Ok();
}

// Calls check(element, pointer) for each element of the optional list of
// objects obj[key].
template <typename Check>
Status ForEachObject(const json& obj, const char* key, const std::string& pointer, Check check) {
  if (Absent(obj, key)) return Status::Ok();
  const json& v = obj.at(key);
  const std::string here = Child(pointer, key);
  if (!v.is_array()) return Invalid(here, "expected a list");
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v.at(i).is_object()) return Invalid(Child(here, i), "expected an object");
    Status st = check(v.at(i), Child(here, i));
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

constexpr int64_t kMaxId = 4294967295;  // uid_t / gid_t

Status CheckResource(const json& r, const std::string& p, bool source_required) {
  Status st = CheckKeys(r, p, {"compression", "httpHeaders", "source", "verification"});
  if (st.ok()) st = source_required ? ReqString(r, "source", p) : OptString(r, "source", p);
  if (st.ok()) st = OptString(r, "compression", p);
  if (st.ok()) {
    st = ForEachObject(r, "httpHeaders", p, [](const json& h, const std::string& hp) {
      Status s = CheckKeys(h, hp, {"name", "value"});
      if (s.ok()) s = ReqString(h, "name", hp);
      if (s.ok()) s = OptString(h, "value", hp);
      return s;
    });
  }
  if (st.ok() && !Absent(r, "verification")) {
    const std::string vp = Child(p, "verification");
    st = CheckKeys(r.at("verification"), vp, {"hash"});
    if (st.ok()) st = OptString(r.at("verification"), "hash", vp);
  }
  return st;
}

Status CheckOptResource(const json& obj, const char* key, const std::string& p, bool required) {
  if (Absent(obj, key)) return Status::Ok();
  return CheckResource(obj.at(key), Child(p, key), required);
}

Status CheckIgnition(const json& ign, const std::string& p, SpecVersion* version) {
  Status st = CheckKeys(ign, p, {"config", "proxy", "security", "timeouts", "version"});
  if (!st.ok()) return st;
  if (Absent(ign, "version")) return Invalid(Child(p, "version"), "required");
  if (!ign.at("version").is_string()) return Invalid(Child(p, "version"), "expected a string");
  const std::string& text = ign.at("version").get_ref<const std::string&>();
  std::optional<VersionText> v = ParseVersionText(text, /*allow_suffix=*/true);
  if (!v || v->prerelease || !IsSupported(v->version)) {
    return Status::InvalidArgument("template_version_unsupported",
                                   "/ignition/version: rackgate serves spec 3.0.0 to 3.3.0");
  }
  *version = v->version;
  if (!Absent(ign, "config")) {
    const json& c = ign.at("config");
    const std::string cp = Child(p, "config");
    st = CheckKeys(c, cp, {"merge", "replace"});
    if (st.ok()) {
      st = ForEachObject(c, "merge", cp, [](const json& r, const std::string& rp) {
        return CheckResource(r, rp, /*source_required=*/true);
      });
    }
    if (st.ok()) st = CheckOptResource(c, "replace", cp, /*required=*/false);
    if (!st.ok()) return st;
  }
  if (!Absent(ign, "proxy")) {
    const json& x = ign.at("proxy");
    const std::string xp = Child(p, "proxy");
    st = CheckKeys(x, xp, {"httpProxy", "httpsProxy", "noProxy"});
    if (st.ok()) st = OptString(x, "httpProxy", xp);
    if (st.ok()) st = OptString(x, "httpsProxy", xp);
    if (st.ok()) st = OptStrings(x, "noProxy", xp);
    if (!st.ok()) return st;
  }
  if (!Absent(ign, "security")) {
    const json& s = ign.at("security");
    const std::string sp = Child(p, "security");
    st = CheckKeys(s, sp, {"tls"});
    if (st.ok() && !Absent(s, "tls")) {
      const std::string tp = Child(sp, "tls");
      st = CheckKeys(s.at("tls"), tp, {"certificateAuthorities"});
      if (st.ok()) {
        st = ForEachObject(s.at("tls"), "certificateAuthorities", tp,
                           [](const json& r, const std::string& rp) {
                             return CheckResource(r, rp, /*source_required=*/true);
                           });
      }
    }
    if (!st.ok()) return st;
  }
  if (!Absent(ign, "timeouts")) {
    const json& t = ign.at("timeouts");
    const std::string tp = Child(p, "timeouts");
    st = CheckKeys(t, tp, {"httpResponseHeaders", "httpTotal"});
    if (st.ok()) st = OptInt(t, "httpResponseHeaders", tp, 0, INT32_MAX);
    if (st.ok()) st = OptInt(t, "httpTotal", tp, 0, INT32_MAX);
  }
  return st;
}


Status CheckOwner(const json& node, const char* key, const std::string& p) {
  if (Absent(node, key)) return Status::Ok();
  const std::string op = Child(p, key);
  Status st = CheckKeys(node.at(key), op, {"id", "name"});
  if (st.ok()) st = OptInt(node.at(key), "id", op, 0, kMaxId);
  if (st.ok()) st = OptString(node.at(key), "name", op);
  return st;
}

// What files, directories and links share: path, overwrite, user, group.
// Paths must be absolute and unique across the three lists (Ignition refuses
// duplicates too).
Status CheckNode(const json& n, const std::string& p, std::map<std::string, std::string>* paths) {
  Status st = ReqString(n, "path", p);
  if (!st.ok()) return st;
  const std::string& path = n.at("path").get_ref<const std::string&>();
  if (path.empty() || path[0] != '/') return Invalid(Child(p, "path"), "must be absolute");
  auto [it, inserted] = paths->emplace(CleanPath(path), p);
  if (!inserted) return Invalid(Child(p, "path"), "same path as " + it->second);
  st = OptBool(n, "overwrite", p);
  if (st.ok()) st = CheckOwner(n, "user", p);
  if (st.ok()) st = CheckOwner(n, "group", p);
  return st;
}

Status CheckStorage(const json& s, const std::string& p) {
  Status st =
      CheckKeys(s, p, {"directories", "disks", "files", "filesystems", "links", "luks", "raid"});
  if (!st.ok()) return st;
  std::map<std::string, std::string> paths;  // cleaned path -> pointer of its node
  st = ForEachObject(s, "files", p, [&](const json& f, const std::string& fp) {
    Status fs = CheckKeys(
        f, fp, {"append", "contents", "group", "mode", "overwrite", "path", "rackgate", "user"});
    if (fs.ok()) fs = CheckNode(f, fp, &paths);
    if (fs.ok()) fs = OptInt(f, "mode", fp, 0, 07777);
    if (fs.ok()) fs = CheckOptResource(f, "contents", fp, /*required=*/false);
    if (fs.ok()) {
      fs = ForEachObject(f, "append", fp, [](const json& r, const std::string& rp) {
        return CheckResource(r, rp, /*source_required=*/false);
      });
    }
    if (fs.ok() && f.contains("rackgate")) {
      const std::string rp = Child(fp, "rackgate");
      fs = CheckKeys(f.at("rackgate"), rp, {"secret"});
      if (fs.ok()) fs = OptBool(f.at("rackgate"), "secret", rp);
    }
    return fs;
  });
  if (!st.ok()) return st;
  st = ForEachObject(s, "directories", p, [&](const json& d, const std::string& dp) {
    Status ds = CheckKeys(d, dp, {"group", "mode", "overwrite", "path", "user"});
    if (ds.ok()) ds = CheckNode(d, dp, &paths);
    if (ds.ok()) ds = OptInt(d, "mode", dp, 0, 07777);
    return ds;
  });
  if (!st.ok()) return st;
  st = ForEachObject(s, "links", p, [&](const json& l, const std::string& lp) {
    Status ls = CheckKeys(l, lp, {"group", "hard", "overwrite", "path", "target", "user"});
    if (ls.ok()) ls = CheckNode(l, lp, &paths);
    if (ls.ok()) ls = ReqString(l, "target", lp);
    if (ls.ok()) ls = OptBool(l, "hard", lp);
    return ls;
  });
  if (!st.ok()) return st;
  // Disks, RAID and filesystems are left to ignition-validate; a LUKS key
  // file is a resource, so its source is walked for placeholders and secrets.
  auto any = [](const json&, const std::string&) { return Status::Ok(); };
  for (const char* key : {"disks", "filesystems", "raid"}) {
    st = ForEachObject(s, key, p, any);
    if (!st.ok()) return st;
  }
  return ForEachObject(s, "luks", p, [](const json& l, const std::string& lp) {
    return CheckOptResource(l, "keyFile", lp, /*required=*/false);
  });
}

Status CheckSystemd(const json& s, const std::string& p) {
  Status st = CheckKeys(s, p, {"units"});
  if (!st.ok()) return st;
  return ForEachObject(s, "units", p, [](const json& u, const std::string& up) {
    Status us = CheckKeys(u, up, {"contents", "dropins", "enabled", "mask", "name"});
    if (us.ok()) us = ReqString(u, "name", up);
    if (us.ok()) us = OptBool(u, "enabled", up);
    if (us.ok()) us = OptBool(u, "mask", up);
    if (us.ok()) us = OptString(u, "contents", up);
    if (us.ok()) {
      us = ForEachObject(u, "dropins", up, [](const json& d, const std::string& dp) {
        Status ds = CheckKeys(d, dp, {"contents", "name"});
        if (ds.ok()) ds = ReqString(d, "name", dp);
        if (ds.ok()) ds = OptString(d, "contents", dp);
        return ds;
      });
    }
    return us;
  });
}

Status CheckPasswd(const json& s, const std::string& p) {
  Status st = CheckKeys(s, p, {"groups", "users"});
  if (!st.ok()) return st;
  st = ForEachObject(s, "users", p, [](const json& u, const std::string& up) {
    Status us = CheckKeys(u, up,
                          {"gecos", "groups", "homeDir", "name", "noCreateHome", "noLogInit",
                           "noUserGroup", "passwordHash", "primaryGroup", "shell", "shouldExist",
                           "sshAuthorizedKeys", "system", "uid"});
    if (us.ok()) us = ReqString(u, "name", up);
    for (const char* key : {"gecos", "homeDir", "passwordHash", "primaryGroup", "shell"}) {
      if (us.ok()) us = OptString(u, key, up);
    }
    for (const char* key : {"noCreateHome", "noLogInit", "noUserGroup", "shouldExist", "system"}) {
      if (us.ok()) us = OptBool(u, key, up);
    }
    if (us.ok()) us = OptStrings(u, "groups", up);
    if (us.ok()) us = OptStrings(u, "sshAuthorizedKeys", up);
    if (us.ok()) us = OptInt(u, "uid", up, 0, kMaxId);
    return us;
  });
  if (!st.ok()) return st;
  return ForEachObject(s, "groups", p, [](const json& g, const std::string& gp) {
    Status gs = CheckKeys(g, gp, {"gid", "name", "passwordHash", "shouldExist", "system"});
    if (gs.ok()) gs = ReqString(g, "name", gp);
    if (gs.ok()) gs = OptString(g, "passwordHash", gp);
    if (gs.ok()) gs = OptBool(g, "shouldExist", gp);
    if (gs.ok()) gs = OptBool(g, "system", gp);
    if (gs.ok()) gs = OptInt(g, "gid", gp, 0, kMaxId);
    return gs;
  });
}

Status CheckKernelArguments(const json& k, const std::string& p) {
  Status st = CheckKeys(k, p, {"shouldExist", "shouldNotExist"});
  if (st.ok()) st = OptStrings(k, "shouldExist", p);
  if (st.ok()) st = OptStrings(k, "shouldNotExist", p);
  return st;
}

}  // namespace

// Lexically cleaned absolute path (as Go's path.Clean): so that
// "/etc//kubernetes/./admin.conf" is matched and deduplicated as
// "/etc/kubernetes/admin.conf".
std::string CleanPath(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(i, slash - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = slash + 1;
  }
  std::string out;
  for (std::string_view part : parts) {
    out += '/';
    out += part;
  }
  return out.empty() ? "/" : out;
}


Status CheckStructure(const json& root, SpecVersion* version) {
  Status st = CheckKeys(root, "", {"ignition", "kernelArguments", "passwd", "storage", "systemd"});
  if (!st.ok()) return st;
  if (Absent(root, "ignition")) return Invalid("/ignition", "required");
  st = CheckIgnition(root.at("ignition"), "/ignition", version);
  if (st.ok() && !Absent(root, "storage")) st = CheckStorage(root.at("storage"), "/storage");
  if (st.ok() && !Absent(root, "systemd")) st = CheckSystemd(root.at("systemd"), "/systemd");
  if (st.ok() && !Absent(root, "passwd")) st = CheckPasswd(root.at("passwd"), "/passwd");
  if (st.ok() && !Absent(root, "kernelArguments")) {
    st = CheckKernelArguments(root.at("kernelArguments"), "/kernelArguments");
  }
  return st;
}

}  // namespace rackgate::core::ignition
