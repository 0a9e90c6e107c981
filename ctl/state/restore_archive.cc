// rackgatectl restore: the archive checked whole, then the target, then
// written (docs/operations.md, "Backups and restore").
#include "ctl/state/backup_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/files.h"
#include "ctl/offline.h"
#include "base/hex.h"
#include "ctl/state/backup_util.h"
#include "storage/backup.h"
#include "storage/copy.h"
#include "storage/store.h"

namespace rackgate::ctl {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace backup_internal;  // NOLINT

// Reads the archive entry by entry. Every failure of libarchive after the
// first header is a damaged archive; before it, a foreign one.
class ArchiveReader {
 public:
  static Result<ArchiveReader> Open(const std::string& path) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return Status::IoError("file_unreadable", "no archive file at " + path);
    ArchiveReader r;
    r.a_.reset(archive_read_new());
    archive_read_support_format_tar(r.a_.get());
    if (archive_read_open_filename(r.a_.get(), path.c_str(), 64 << 10) != ARCHIVE_OK) {
      return Foreign(path + ": " + archive_error_string(r.a_.get()));
    }
    return r;
  }
  // The next entry's name and size; nullopt at the end.
  Result<std::optional<std::pair<std::string, int64_t>>> Next() {
    archive_entry* e = nullptr;
    const int rc = archive_read_next_header(a_.get(), &e);
    if (rc == ARCHIVE_EOF) return std::optional<std::pair<std::string, int64_t>>();
    if (rc != ARCHIVE_OK) {
      const std::string why = archive_error_string(a_.get()) ? archive_error_string(a_.get()) : "unreadable";
      return first_ ? Foreign("not a tar archive (" + why + ")") : Damaged("the tar archive breaks off (" + why + ")");
    }
    first_ = false;
    if (archive_entry_filetype(e) != AE_IFREG) {
      return Damaged(std::string("entry ") + archive_entry_pathname(e) + " is not a file");
    }
    return std::optional(std::make_pair(std::string(archive_entry_pathname(e)), archive_entry_size(e)));
  }
  // Reads the current entry's data, chunk by chunk.
  Status Read(const std::function<Status(const char*, size_t)>& sink) {
    std::vector<char> buf(1 << 20);
    for (;;) {
      const la_ssize_t n = archive_read_data(a_.get(), buf.data(), buf.size());
      if (n == 0) return Status::Ok();
      if (n < 0) return Damaged(std::string("an entry breaks off (") + archive_error_string(a_.get()) + ")");
      if (Status s = sink(buf.data(), static_cast<size_t>(n)); !s.ok()) return s;
    }
  }

 private:
  ArchiveReader() = default;
  std::unique_ptr<archive, ArchiveReadFree> a_;
  bool first_ = true;
};

Result<std::vector<uint8_t>> ReadSmall(ArchiveReader* r, int64_t size, size_t max, const std::string& name) {
  if (size < 0 || static_cast<uint64_t>(size) > max) return Damaged(name + " is larger than a manifest can be");
  std::vector<uint8_t> out;
  Status s = r->Read([&](const char* p, size_t n) -> Status {
    if (out.size() + n > max) return Damaged(name + " is larger than a manifest can be");
    out.insert(out.end(), p, p + n);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

// SECURITY: names in the manifest decide where files are written: relative,
// no `..`, in one of the archive's folders, the state ones only in the state
// folders a backup holds.
bool SafeName(const std::string& name) {
  if (name.empty() || name.front() == '/' || name.back() == '/' || name.find('\0') != std::string::npos) return false;
  size_t i = 0;
  while (i <= name.size()) {
    const size_t j = std::min(name.find('/', i), name.size());
    const std::string part = name.substr(i, j - i);
    if (part.empty() || part == "." || part == "..") return false;
    i = j + 1;
  }
  bool state = false;
  for (const char* sub : kStateDirs) state = state || name.rfind("state/" + std::string(sub) + "/", 0) == 0;
  return state || name == "store/rackgate.db" || name == "config/rackgated.json" || name.rfind("named/", 0) == 0;
}

bool SafeAbsolute(const std::string& path) {
  return !path.empty() && path.front() == '/' && path.find("/../") == std::string::npos &&
         path.find('\0') == std::string::npos &&
         !(path.size() >= 3 && path.compare(path.size() - 3, 3, "/..") == 0);
}

struct ManifestFile {
  std::string name, sha256;
  int64_t size = 0;
  mode_t mode = 0600;
  std::string owner, group;  // as the backup recorded them; may be empty
};

// The manifest's shape, every field the restore relies on checked.
Result<std::vector<ManifestFile>> ManifestFiles(const json& m) {
  std::vector<ManifestFile> out;
  const auto bad = [](const std::string& what) { return Damaged("the manifest's " + what + " is malformed"); };
  if (!m.contains("files") || !m.at("files").is_array() || m.at("files").size() > kMaxFiles) return bad("files");
  if (!m.contains("state_dir") || !m.at("state_dir").is_string() || !SafeAbsolute(m.at("state_dir").get<std::string>())) {
    return bad("state_dir");
  }
  if (!m.contains("store") || !m.at("store").is_object() || !m.at("store").contains("schema_version") ||
      !m.at("store").at("schema_version").is_number_integer()) {
    return bad("store");
  }
  if (!m.contains("named") || !m.at("named").is_array()) return bad("named");
  for (const auto& n : m.at("named")) {
    if (!n.is_object() || !n.contains("path") || !n.at("path").is_string() ||
        !SafeAbsolute(n.at("path").get<std::string>())) {
      return bad("named");
    }
  }
  std::set<std::string> seen;
  for (const auto& f : m.at("files")) {
    if (!f.is_object() || !f.contains("name") || !f.at("name").is_string() || !f.contains("size") ||
        !f.at("size").is_number_integer() || !f.contains("sha256") || !f.at("sha256").is_string() ||
        !f.contains("mode") || !f.at("mode").is_string()) {
      return bad("files");
    }
    ManifestFile mf{f.at("name").get<std::string>(), f.at("sha256").get<std::string>(), f.at("size").get<int64_t>()};
    if (!SafeName(mf.name) || !hex::IsSha256Hex(mf.sha256) || mf.size < 0 || !seen.insert(mf.name).second) {
      return bad("file " + mf.name);
    }
    mf.mode = static_cast<mode_t>(std::strtoul(f.at("mode").get<std::string>().c_str(), nullptr, 8) & 0777);
    if (f.contains("owner") && f.at("owner").is_string()) mf.owner = f.at("owner").get<std::string>();
    if (f.contains("group") && f.at("group").is_string()) mf.group = f.at("group").get<std::string>();
    out.push_back(std::move(mf));
  }
  return out;
}

// First pass: the manifest, then every entry hashed against it.
Result<json> VerifyArchive(const std::string& path, const std::function<void(const std::string&)>& progress) {
  auto r = ArchiveReader::Open(path);
  if (!r.ok()) return r.status();
  auto first = r->Next();
  if (!first.ok()) return first.status();
  if (!*first || (*first)->first != kManifestEntry) {
    return Foreign(path + " is not a rackgate backup (its first entry is not " + std::string(kManifestEntry) + ")");
  }
  auto text = ReadSmall(&*r, (*first)->second, kMaxManifest, "the manifest");
  if (!text.ok()) return text.status();
  json m = json::parse(text->begin(), text->end(), nullptr, false);
  if (m.is_discarded() || !m.is_object()) return Damaged("the manifest is not JSON");
  if (!m.contains("format") || m.at("format") != kBackupFormat) return Foreign(path + " is not a rackgate backup");
  if (!m.contains("format_version") || m.at("format_version") != kBackupFormatVersion) {
    return Foreign(path + " is a rackgate backup of format version " +
                   (m.contains("format_version") ? m.at("format_version").dump() : std::string("?")) +
                   ", which rackgate " RACKGATE_VERSION " does not read (it reads version " +
                   std::to_string(kBackupFormatVersion) + "): restore with the rackgate that wrote it (" +
                   (m.contains("rackgate_version") ? m.at("rackgate_version").dump() : std::string("?")) + ")");
  }
  auto sum_entry = r->Next();
  if (!sum_entry.ok()) return sum_entry.status();
  if (!*sum_entry || (*sum_entry)->first != kManifestSumEntry) return Damaged("the manifest's checksum is missing");
  auto sum = ReadSmall(&*r, (*sum_entry)->second, 128, "the manifest's checksum");
  if (!sum.ok()) return sum.status();
  if (std::string(sum->begin(), sum->end()) != Sha256Of(*text) + "\n") return Damaged("the manifest's checksum differs");
  auto files = ManifestFiles(m);
  if (!files.ok()) return files.status();
  std::map<std::string, const ManifestFile*> want;
  for (const auto& f : *files) want[f.name] = &f;
  for (;;) {
    auto next = r->Next();
    if (!next.ok()) return next.status();
    if (!*next) break;
    const std::string full = (*next)->first;
    const std::string name = full.rfind(kBackupRoot, 0) == 0 ? full.substr(std::strlen(kBackupRoot)) : full;
    auto it = want.find(name);
    if (it == want.end()) return Damaged("entry " + full + " is not in the manifest (or twice in the archive)");
    if (progress && it->second->size > kMaxSmallFile) progress("verifying " + name);
    Sha256 h;
    int64_t got = 0;
    if (Status s = r->Read([&](const char* p, size_t n) {
          h.Update(p, n);
          got += static_cast<int64_t>(n);
          return Status::Ok();
        });
        !s.ok()) {
      return s;
    }
    if (got != it->second->size || (*next)->second != it->second->size) return Damaged(name + " has the wrong size");
    if (h.Hex() != it->second->sha256) return Damaged(name + "'s SHA-256 differs from the manifest's");
    want.erase(it);
  }
  if (!want.empty()) return Damaged("the archive lacks " + want.begin()->first);
  return m;
}

// Where the restore puts things: the state directory and the files the
// config names, mapped from the backed-up appliance's paths.
class Placement {
 public:
  Placement(const json& m, const RestoreOptions& o) : old_state_(m.at("state_dir").get<std::string>()) {
    state_ = o.state_dir.empty() ? old_state_ : o.state_dir;
    for (const auto& n : m.at("named")) {
      const std::string p = n.at("path").get<std::string>();
      if (Under(p, old_state_)) continue;
      named_[p] = o.rebase.empty() ? p : o.rebase + p;
    }
  }
  const std::string& state_dir() const { return state_; }
  // A path of the backed-up appliance, where it is restored.
  std::string Map(const std::string& p) const {
    std::string best_from, best_to;
    for (const auto& [from, to] : named_) {
      if (Under(p, from) && from.size() > best_from.size()) best_from = from, best_to = to;
    }
    if (best_from.empty() && Under(p, old_state_)) best_from = old_state_, best_to = state_;
    if (best_from.empty()) return p;
    return best_to + p.substr(best_from.size());
  }
  // The config, every path in it moved with the files it names.
  json MapConfig(json c) const {
    if (c.is_string()) {
      const std::string s = c.get<std::string>();
      if (s.rfind("sqlite:", 0) == 0) return "sqlite:" + Map(s.substr(7));
      if (!s.empty() && s.front() == '/') return Map(s);
      return c;
    }
    if (c.is_array() || c.is_object()) {
      for (auto& v : c) v = MapConfig(v);
    }
    return c;
  }

 private:
  std::string old_state_, state_;
  std::map<std::string, std::string> named_;
};

// Where each archived file goes.
std::map<std::string, std::string> Targets(const json& m, const Placement& place, const std::string& config_out,
                                           std::string* store_path) {
  std::map<std::string, std::string> out;
  // named/<index>/: the path it came from, and whether it was a directory.
  std::map<std::string, std::pair<std::string, bool>> named;
  for (const auto& n : m.at("named")) {
    named["named/" + n.at("index").dump() + "/"] = {n.at("path").get<std::string>(),
                                                    n.value("kind", std::string()) == "directory"};
  }
  for (const auto& f : m.at("files")) {
    const std::string name = f.at("name").get<std::string>();
    if (name.rfind("store/", 0) == 0) {
      const json& store = m.at("store");
      const std::string path = store.contains("path") && store.at("path").is_string()
                                   ? store.at("path").get<std::string>()
                                   : m.at("state_dir").get<std::string>() + "/rackgate.db";
      *store_path = place.Map(path);
      out[name] = *store_path;
    } else if (name.rfind("state/", 0) == 0) {
      out[name] = place.state_dir() + "/" + name.substr(6);
    } else if (name == "config/rackgated.json") {
      out[name] = config_out;
    } else {
      const size_t slash = name.find('/', 6);
      auto it = named.find(name.substr(0, slash + 1));
      if (slash == std::string::npos || it == named.end()) continue;
      const auto& [source, dir] = it->second;
      out[name] = dir ? place.Map(source) + "/" + name.substr(slash + 1) : place.Map(source);
    }
  }
  return out;
}

// Never onto a running appliance; onto one with state (a store, or
// anything in STATE/ca, tls, cluster-ca) only with --force. The config and
// the files it names are no such state: a fresh install ships a config and
// EK anchor folders, which the restore sets aside when they differ.
Status CheckTarget(const std::string& state_dir, const std::string& store_path, const std::string& config_out,
                   bool force) {
  if (!store_path.empty()) {
    if (Status s = storage::CheckSqliteNotInUse(store_path); !s.ok()) return s;
  }
  if (auto existing = ReadConfig(config_out); existing.ok()) {
    const std::string sock = existing->value("admin_socket", std::string("/run/rackgate/admin.sock"));
    if (SocketAnswers(sock)) {
      return Status::IoError("db_in_use", "rackgated answers on " + sock + ", the admin socket of " + config_out +
                                              ": stop it (`systemctl stop rackgated`) and run this again");
    }
  }
  if (force) return Status::Ok();
  std::vector<std::string> used;
  std::error_code ec;
  if (!store_path.empty() && fs::exists(store_path, ec)) used.push_back(store_path);
  for (const char* sub : kStateDirs) {
    const std::string dir = state_dir + "/" + sub;
    if (fs::is_directory(dir, ec) && !fs::is_empty(dir, ec)) used.push_back(dir);
  }
  if (used.empty()) return Status::Ok();
  return Status::Unsupported("restore_target_not_empty",
                             used.front() + " exists: restore onto a fresh appliance (no store, nothing in " +
                                 state_dir + "/ca, tls or cluster-ca), or give --force to set the old state aside "
                                 "as NAME.before-restore (rackgated stopped)");
}

Status MakeDirs(const std::string& dir, std::vector<std::string>* made) {
  std::error_code ec;
  std::vector<fs::path> missing;
  for (fs::path p = dir; !p.empty() && p != p.root_path() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0750) != 0 && errno != EEXIST) {
      return Status::IoError("file_unwritable", "cannot create " + it->string() + ": " + std::strerror(errno));
    }
    made->push_back(it->string());
  }
  return Status::Ok();
}

struct Owner {
  bool set = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Run as root: the state is the rackgate user's, as the package makes it.
Owner RackgateOwner() {
  Owner o;
  if (::geteuid() != 0) return o;
  const passwd* pw = ::getpwnam("rackgate");
  if (pw == nullptr) return o;
  o = {true, pw->pw_uid, pw->pw_gid};
  return o;
}

// One file written beside its target, hashed again as it is written.
struct Staged {
  std::string temp, target;
};

Status StageEntry(ArchiveReader* r, const ManifestFile& f, const std::string& target, bool owned, const Owner& owner,
                  std::vector<Staged>* staged) {
  std::string temp = target + ".restore.XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) return Status::IoError("file_unwritable", "cannot create a file beside " + target + ": " + std::strerror(errno));
  staged->push_back({temp, target});
  // SECURITY: keys and the store are the rackgate user's alone, whatever
  // mode the archive names.
  const bool secret =
      f.name.rfind("store/", 0) == 0 || (target.size() > 4 && target.compare(target.size() - 4, 4, ".key") == 0);
  ::fchmod(fd, secret ? 0600 : f.mode);
  if (owned && owner.set) (void)::fchown(fd, owner.uid, owner.gid);
  if (!owned && ::geteuid() == 0) {
    // The config and the files it names: the owner and group they had,
    // where this system knows those names; else root and rackgate's group.
    const passwd* pw = f.owner.empty() ? nullptr : ::getpwnam(f.owner.c_str());
    const group* gr = f.group.empty() ? nullptr : ::getgrnam(f.group.c_str());
    (void)::fchown(fd, pw != nullptr ? pw->pw_uid : 0,
                   gr != nullptr ? gr->gr_gid : (owner.set ? owner.gid : static_cast<gid_t>(-1)));
  }
  Sha256 h;
  Status s = r->Read([&](const char* p, size_t n) -> Status {
    h.Update(p, n);
    while (n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Status::IoError("file_unwritable", "cannot write " + temp + ": " + std::strerror(errno));
      p += w;
      n -= static_cast<size_t>(w);
    }
    return Status::Ok();
  });
  if (s.ok() && ::fsync(fd) != 0) s = Status::IoError("file_unwritable", "cannot sync " + temp);
  ::close(fd);
  if (s.ok() && h.Hex() != f.sha256) s = Damaged(f.name + " changed while it was restored");
  return s;
}

// Moves what a --force restore replaces out of the way: the state folders
// and the store (with its -wal and -shm, which would otherwise be replayed
// into the restored file) to NAME.before-restore. Returns what it moved.
std::vector<std::string> SetAside(const std::string& state_dir, const std::string& store_path) {
  std::vector<std::string> paths, moved;
  for (const char* sub : kStateDirs) paths.push_back(state_dir + "/" + sub);
  if (!store_path.empty()) {
    for (const char* ext : {"", "-wal", "-shm", "-journal"}) paths.push_back(store_path + ext);
  }
  for (const auto& p : paths) {
    std::error_code ec;
    if (!fs::exists(p, ec)) continue;
    const std::string aside = p + ".before-restore";
    fs::remove_all(aside, ec);
    if (::rename(p.c_str(), aside.c_str()) == 0) moved.push_back(p);
  }
  return moved;
}

// A failed --force restore puts back what SetAside moved.
void PutBack(const std::vector<std::string>& moved) {
  for (const auto& p : moved) {
    std::error_code ec;
    fs::remove_all(p, ec);
    ::rename((p + ".before-restore").c_str(), p.c_str());
  }
}

bool SameContent(const std::string& a, const std::string& b) {
  auto x = ReadFile(a, kMaxSmallFile);
  auto y = ReadFile(b, kMaxSmallFile);
  return x.ok() && y.ok() && *x == *y;
}

// Second pass: every file staged beside its target, then all renamed.
Status WriteFiles(const RestoreOptions& o, const json& m, const Placement& place,
                  const std::map<std::string, std::string>& targets, RestoreReport* report) {
  std::map<std::string, ManifestFile> files;
  auto list = ManifestFiles(m);
  if (!list.ok()) return list.status();
  for (auto& f : *list) files[f.name] = f;
  const Owner owner = RackgateOwner();
  report->owner_set = owner.set;
  std::vector<std::string> made;
  if (Status s = MakeDirs(place.state_dir(), &made); !s.ok()) return s;
  auto r = ArchiveReader::Open(o.archive);
  if (!r.ok()) return r.status();
  const std::vector<std::string> moved = o.force ? SetAside(place.state_dir(), report->store_path)
                                                 : std::vector<std::string>();
  std::vector<Staged> staged;
  Status s = Status::Ok();
  while (s.ok()) {
    auto next = r->Next();
    if (!next.ok()) { s = next.status(); break; }
    if (!*next) break;
    const std::string name = (*next)->first.substr(std::strlen(kBackupRoot));
    auto it = targets.find(name);
    if (it == targets.end()) continue;  // the manifest itself
    const bool owned = Under(it->second, place.state_dir()) || name.rfind("store/", 0) == 0;
    s = MakeDirs(fs::path(it->second).parent_path().string(), &made);
    if (s.ok() && o.progress && files.at(name).size > kMaxSmallFile) o.progress("writing " + it->second);
    if (s.ok()) s = StageEntry(&*r, files.at(name), it->second, owned, owner, &staged);
  }
  if (s.ok() && owner.set) {
    for (const auto& d : made) {
      if (Under(d, place.state_dir())) {
        (void)::chown(d.c_str(), owner.uid, owner.gid);
        ::chmod(d.c_str(), 0700);
      }
    }
    (void)::chown(place.state_dir().c_str(), owner.uid, owner.gid);
  }
  if (!s.ok()) {
    for (const auto& st : staged) ::unlink(st.temp.c_str());
    PutBack(moved);
    return s;
  }
  for (const auto& st : staged) {
    // A file outside the state that is there already (a fresh install's
    // config, an EK anchor) and differs is kept as NAME.before-restore; a
    // config always (the restore rewrites its paths).
    std::error_code ec;
    if (!Under(st.target, place.state_dir()) && st.target != report->store_path && fs::exists(st.target, ec) &&
        (st.target == report->config_path || !SameContent(st.temp, st.target))) {
      const std::string aside = st.target + ".before-restore";
      if (::rename(st.target.c_str(), aside.c_str()) == 0) report->set_aside.push_back(aside);
    }
    if (::rename(st.temp.c_str(), st.target.c_str()) != 0) {
      return Status::IoError("file_unwritable", "cannot rename onto " + st.target + ": " + std::strerror(errno));
    }
    report->written.push_back(st.target);
  }
  return Status::Ok();
}

// The restored config: the archived one with its paths moved.
Status RewriteConfig(const std::string& path, const Placement& place) {
  auto config = ReadConfig(path);
  if (!config.ok()) return config.status();
  json moved = place.MapConfig(*config);
  moved["state_dir"] = place.state_dir();
  const std::string text = moved.dump(2) + "\n";
  struct stat st {};
  ::stat(path.c_str(), &st);
  std::string temp = path + ".restore.XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) return Status::IoError("file_unwritable", "cannot rewrite " + path);
  ::fchmod(fd, st.st_mode & 0777);
  (void)::fchown(fd, st.st_uid, st.st_gid);
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(temp.c_str(), path.c_str()) != 0) {
    ::unlink(temp.c_str());
    return Status::IoError("file_unwritable", "cannot rewrite " + path);
  }
  return Status::Ok();
}

// Who restored, as the admin API names a local operator: uid:N(name).
std::string LocalActor() {
  const uid_t uid = ::getuid();
  const passwd* pw = ::getpwuid(uid);
  return "uid:" + std::to_string(uid) + "(" + (pw != nullptr ? pw->pw_name : "?") + ")";
}

}  // namespace

Result<RestoreReport> RestoreBackup(const RestoreOptions& options) {
  if (options.progress) options.progress("verifying " + options.archive);
  auto m = VerifyArchive(options.archive, options.progress);
  if (!m.ok()) return m.status();
  const int schema = m->at("store").at("schema_version").get<int>();
  if (schema > storage::Store::CurrentSchemaVersion()) {
    return Status::Unsupported("backup_newer",
                               "the backup's store has schema version " + std::to_string(schema) + ", newer than " +
                                   std::to_string(storage::Store::CurrentSchemaVersion()) + " of rackgate " +
                                   RACKGATE_VERSION + ": install rackgate " +
                                   m->value("rackgate_version", std::string("?")) + " or later and restore with it");
  }
  RestoreReport report;
  report.manifest = *m;
  const Placement place(*m, options);
  report.state_dir = place.state_dir();
  // The config goes where the backed-up appliance had it, unless told.
  report.config_path = options.config_out;
  if (report.config_path.empty()) {
    report.config_path = m->contains("config") && m->at("config").is_string() ? m->at("config").get<std::string>() : "";
    if (!SafeAbsolute(report.config_path)) return Damaged("the manifest's config is malformed");
  }
  const auto targets = Targets(*m, place, report.config_path, &report.store_path);
  if (Status s = CheckTarget(report.state_dir, report.store_path, report.config_path, options.force); !s.ok()) {
    return s;
  }
  if (options.progress) options.progress("writing " + std::to_string(targets.size()) + " files");
  if (Status s = WriteFiles(options, *m, place, targets, &report); !s.ok()) return s;
  if (Status s = RewriteConfig(report.config_path, place); !s.ok()) return s;
  if (!report.store_path.empty()) {
    const json& head = m->at("audit");
    storage::AuditAnchor anchor{head.value("head_id", int64_t{0}), head.value("head_hash", std::string())};
    auto chain = storage::VerifyAuditChainFile(report.store_path,
                                               anchor.id > 0 ? std::optional(anchor) : std::nullopt);
    if (!chain.ok()) return chain.status();
    report.audit = {{"head_id", chain->head_id},
                    {"head_hash", chain->head_hash},
                    {"rows", chain->rows},
                    {"intact", chain->intact},
                    {"matches_manifest", chain->intact && chain->head_id == anchor.id &&
                                             chain->head_hash == anchor.hash}};
    if (!chain->intact) {
      report.audit["problem"] = chain->message;
      return report;
    }
    // The restore is itself an operator action: one audit row, chained
    // after the restored head (which the anchor check above covered).
    storage::RestoreRecord record{options.archive, m->value("created_at", std::string()),
                                  m->value("rackgate_version", std::string()), anchor.id, anchor.hash};
    auto recorded = storage::RecordSqliteRestore(report.store_path, record, LocalActor(),
                                                 static_cast<int64_t>(std::time(nullptr)));
    if (!recorded.ok()) return recorded.status().Annotate("recording the restore");
    report.audit["recorded"] = {{"action", "backup_restored"}, {"id", recorded->head_id},
                                {"hash", recorded->head_hash}};
  }
  return report;
}

}  // namespace rackgate::ctl
