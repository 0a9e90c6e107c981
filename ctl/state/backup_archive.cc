// rackgatectl backup: what goes in the archive, its manifest, and the
// archive written atomically (docs/operations.md, "Backups and restore").
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
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/files.h"
#include "base/hex.h"
#include "base/utc_time.h"
#include "ctl/state/backup_util.h"
#include "core/pki.h"
#include "storage/backup.h"
#include "storage/copy.h"
#include "storage/store.h"

namespace rackgate::ctl {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace backup_internal;  // NOLINT

struct Item {
  std::string name;    // in the archive, under kBackupRoot
  std::string source;  // where it was read
  std::string role;    // store, state, config, named
  mode_t mode = 0600;
  int64_t size = 0;
  std::string sha256;
  std::vector<uint8_t> data;
  bool streamed = false;
  std::string owner, group;  // names (numbers when the system has none)
};

std::string UserName(uid_t uid) {
  const passwd* pw = ::getpwuid(uid);
  return pw != nullptr ? pw->pw_name : std::to_string(uid);
}

std::string GroupName(gid_t gid) {
  const group* gr = ::getgrgid(gid);
  return gr != nullptr ? gr->gr_name : std::to_string(gid);
}

Result<Item> SmallItem(const std::string& name, const std::string& source, const std::string& role) {
  struct stat st {};
  if (::stat(source.c_str(), &st) != 0) {
    return Status::IoError("file_unreadable", "cannot read " + source + ": " + std::strerror(errno));
  }
  auto data = ReadFile(source, kMaxSmallFile);
  if (!data.ok()) return data.status();
  Item item{name, source, role, static_cast<mode_t>(st.st_mode & 07777), 0, "", std::move(*data), false};
  item.size = static_cast<int64_t>(item.data.size());
  item.sha256 = Sha256Of(item.data);
  item.owner = UserName(st.st_uid);
  item.group = GroupName(st.st_gid);
  return item;
}

// Every regular file under `dir`, as `prefix` + its relative path, in name
// order; symbolic links are followed no further than the files they name.
Status AddTree(const std::string& dir, const std::string& prefix, const std::string& role, std::vector<Item>* out) {
  std::error_code ec;
  std::vector<std::string> rel;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) rel.push_back(fs::relative(it->path(), dir, ec).string());
    if (rel.size() > kMaxFiles) return Status::InvalidArgument("field_invalid", dir + " holds too many files");
  }
  if (ec) return Status::IoError("file_unreadable", "cannot list " + dir + ": " + ec.message());
  std::sort(rel.begin(), rel.end());
  for (const auto& r : rel) {
    auto item = SmallItem(prefix + r, dir + "/" + r, role);
    if (!item.ok()) return item.status();
    out->push_back(std::move(*item));
  }
  return Status::Ok();
}


// The files rackgated's config names, each with the keys that name it: EK
// anchors and the other files the appliance reads (docs/config.md).
std::map<std::string, std::vector<std::string>> NamedPaths(const json& config) {
  std::map<std::string, std::vector<std::string>> out;
  const auto add = [&](const json& v, const std::string& key) {
    if (v.is_string() && !v.get<std::string>().empty()) out[v.get<std::string>()].push_back(key);
  };
  for (const char* key : {"ek_roots", "ek_intermediates"}) {
    if (config.contains(key) && config.at(key).is_array()) {
      for (const auto& v : config.at(key)) add(v, key);
    }
  }
  for (const char* key : {"tls_certificate", "tls_key", "cluster_ca_certificate", "cluster_ca_key",
                          "database_password_file", "agent_bundle"}) {
    if (config.contains(key)) add(config.at(key), key);
  }
  if (config.contains("webhooks") && config.at("webhooks").is_array()) {
    for (const auto& hook : config.at("webhooks")) {
      if (!hook.is_object()) continue;
      for (const char* key : {"secret_file", "ca_file"}) {
        if (hook.contains(key)) add(hook.at(key), std::string("webhooks.") + key);
      }
    }
  }
  if (config.contains("kubernetes") && config.at("kubernetes").is_object() &&
      config.at("kubernetes").contains("kubeconfig")) {
    add(config.at("kubernetes").at("kubeconfig"), "kubernetes.kubeconfig");
  }
  return out;
}

std::string StorePath(const json& config, const std::string& state_dir) {
  const std::string database = config.contains("database") && config.at("database").is_string()
                                   ? config.at("database").get<std::string>()
                                   : "";
  if (database.empty()) return state_dir + "/rackgate.db";
  return storage::DatabaseFile(database).value_or("");
}

std::string DatabaseOf(const json& config) {
  return config.contains("database") && config.at("database").is_string() ? config.at("database").get<std::string>()
                                                                           : "";
}

// ------------------------------------------------------------- the store --

struct StoreCopy {
  json manifest;              // the manifest's "store"
  json audit;                 // the manifest's "audit"
  std::optional<Item> item;   // the SQLite copy (a temp file), none on PostgreSQL
};

json AuditJson(const storage::AuditChainReport& r) {
  return {{"head_id", r.head_id}, {"head_hash", r.head_hash}, {"rows", r.rows}, {"intact", r.intact}};
}

// The fleet's database: not in the archive. Its audit head is recorded when
// the database answers, so that the restore can be checked against it.
Result<StoreCopy> PostgresStore(const json& config, const BackupOptions& options) {
  StoreCopy copy;
  std::string database = DatabaseOf(config);
  copy.manifest = {{"kind", "postgresql"},
                   {"included", false},
                   {"database", storage::RedactDatabase(database)},
                   {"schema_version", storage::Store::CurrentSchemaVersion()},
                   {"take", "the database holds the machines, pools, certificates and the audit log: back it up "
                            "with pg_dump --format=custom (or pg_basebackup for the cluster) beside this archive "
                            "(docs/operations.md, \"Backups and restore\")"}};
  if (config.contains("database_password_file") && config.at("database_password_file").is_string()) {
    auto secret = ReadFile(config.at("database_password_file").get<std::string>(), 1024);
    if (secret.ok()) {
      std::string s(secret->begin(), secret->end());
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      database += (database.find('?') == std::string::npos ? '?' : '&') + std::string("password=") +
                  hex::PercentEncode(s);
    }
  }
  if (options.progress) options.progress("reading the audit chain's head from the database");
  auto store = storage::OpenStore(database);
  if (!store.ok()) return store.status().Annotate(storage::RedactDatabase(DatabaseOf(config)));
  auto chain = (*store)->VerifyAuditChain();
  if (!chain.ok()) return chain.status();
  copy.audit = AuditJson(*chain);
  return copy;
}

Result<StoreCopy> SqliteStore(const std::string& path, const std::string& temp, const BackupOptions& options) {
  StoreCopy copy;
  int64_t last = -1;
  auto report = storage::BackupSqliteFile(path, temp, [&](int64_t done, int64_t total) {
    if (!options.progress || done == last) return;
    last = done;
    options.progress("copying the store: " + std::to_string(done) + "/" + std::to_string(total) + " pages");
  });
  if (!report.ok()) return report.status().Annotate(path);
  auto chain = storage::VerifyAuditChainFile(temp);
  if (!chain.ok()) return chain.status();
  copy.audit = AuditJson(*chain);
  copy.manifest = {{"kind", "sqlite"},
                   {"included", true},
                   {"path", path},
                   {"schema_version", report->schema_version},
                   {"bytes", report->bytes}};
  if (options.progress) options.progress("hashing the store copy");
  Item item{"store/rackgate.db", temp, "store", 0600, report->bytes, "", {}, true};
  if (struct stat st {}; ::stat(path.c_str(), &st) == 0) {
    item.owner = UserName(st.st_uid);
    item.group = GroupName(st.st_gid);
  }
  Sha256 h;
  FILE* f = std::fopen(temp.c_str(), "rb");
  if (f == nullptr) return Status::IoError("file_unreadable", "cannot read " + temp);
  std::vector<char> buf(1 << 20);
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) h.Update(buf.data(), n);
  std::fclose(f);
  item.sha256 = h.Hex();
  copy.item = std::move(item);
  return copy;
}

// --------------------------------------------------------- tar writing --


Status WriteError(archive* a, const std::string& out) {
  return Status::IoError("file_unwritable", "cannot write " + out + ": " + archive_error_string(a));
}

Status WriteEntry(archive* a, const Item& item, int64_t mtime, const std::string& out) {
  std::unique_ptr<archive_entry, EntryFree> e(archive_entry_new());
  archive_entry_set_pathname(e.get(), (std::string(kBackupRoot) + item.name).c_str());
  archive_entry_set_filetype(e.get(), AE_IFREG);
  archive_entry_set_perm(e.get(), item.mode & 07777);
  archive_entry_set_size(e.get(), item.size);
  archive_entry_set_mtime(e.get(), mtime, 0);
  if (archive_write_header(a, e.get()) != ARCHIVE_OK) return WriteError(a, out);
  if (!item.streamed) {
    if (!item.data.empty() && archive_write_data(a, item.data.data(), item.data.size()) < 0) {
      return WriteError(a, out);
    }
    return Status::Ok();
  }
  FILE* f = std::fopen(item.source.c_str(), "rb");
  if (f == nullptr) return Status::IoError("file_unreadable", "cannot read " + item.source);
  std::vector<char> buf(1 << 20);
  size_t n = 0;
  int64_t total = 0;
  Status s = Status::Ok();
  while (s.ok() && (n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    total += static_cast<int64_t>(n);
    if (archive_write_data(a, buf.data(), n) < 0) s = WriteError(a, out);
  }
  std::fclose(f);
  if (s.ok() && total != item.size) s = Status::IoError("file_unreadable", item.source + " changed while archived");
  return s;
}

Status FsyncDir(const std::string& path) {
  const std::string dir = fs::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::IoError("file_unwritable", "cannot open " + dir);
  ::fsync(fd);
  ::close(fd);
  return Status::Ok();
}

// The archive at a temp name beside `out`, then renamed over it.
Status WriteArchive(const std::string& out, const json& manifest, const std::vector<Item>& items, int64_t mtime) {
  std::string tmp = out + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return Status::IoError("file_unwritable", "cannot create a file beside " + out + ": " + std::strerror(errno));
  ::fchmod(fd, 0600);
  Status s = [&]() -> Status {
    std::unique_ptr<archive, ArchiveWriteFree> a(archive_write_new());
    archive_write_set_format_pax_restricted(a.get());
    archive_write_set_bytes_in_last_block(a.get(), 1);
    if (archive_write_open_fd(a.get(), fd) != ARCHIVE_OK) return WriteError(a.get(), out);
    const std::string text = manifest.dump(2) + "\n";
    Item m{"manifest.json", "", "manifest", 0600, 0, "", std::vector<uint8_t>(text.begin(), text.end()), false};
    m.size = static_cast<int64_t>(m.data.size());
    const std::string sum = Sha256Of(m.data) + "\n";
    Item ms{"manifest.sha256", "", "manifest", 0600, static_cast<int64_t>(sum.size()), "",
            std::vector<uint8_t>(sum.begin(), sum.end()), false};
    for (const Item* item : {&m, &ms}) {
      if (Status w = WriteEntry(a.get(), *item, mtime, out); !w.ok()) return w;
    }
    for (const auto& item : items) {
      if (Status w = WriteEntry(a.get(), item, mtime, out); !w.ok()) return w;
    }
    if (archive_write_close(a.get()) != ARCHIVE_OK) return WriteError(a.get(), out);
    if (::fsync(fd) != 0) return Status::IoError("file_unwritable", "cannot sync " + out + ": " + std::strerror(errno));
    return Status::Ok();
  }();
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), out.c_str()) != 0) {
    s = Status::IoError("file_unwritable", "cannot rename onto " + out + ": " + std::strerror(errno));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return FsyncDir(out);
}

// The state folders, the config and the files it names, in archive order.
Result<std::vector<Item>> CollectFiles(const std::string& config_path, const json& config, const std::string& state_dir,
                                       json* named_out) {
  std::vector<Item> items;
  for (const char* sub : kStateDirs) {
    const std::string dir = state_dir + "/" + sub;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    if (Status s = AddTree(dir, std::string("state/") + sub + "/", "state", &items); !s.ok()) return s;
  }
  auto cfg = SmallItem("config/rackgated.json", config_path, "config");
  if (!cfg.ok()) return cfg.status();
  items.push_back(std::move(*cfg));
  *named_out = json::array();
  int index = 0;
  for (const auto& [path, keys] : NamedPaths(config)) {
    bool covered = false;
    for (const char* sub : kStateDirs) covered = covered || Under(path, state_dir + "/" + sub);
    if (covered) continue;  // archived with its state folder
    std::error_code ec;
    const bool dir = fs::is_directory(path, ec);
    const std::string prefix = "named/" + std::to_string(index) + "/";
    Status s = dir ? AddTree(path, prefix, "named", &items)
                   : [&]() -> Status {
                       auto item = SmallItem(prefix + fs::path(path).filename().string(), path, "named");
                       if (!item.ok()) return item.status();
                       items.push_back(std::move(*item));
                       return Status::Ok();
                     }();
    if (!s.ok()) return s.Annotate(keys.front());
    named_out->push_back({{"index", index}, {"path", path}, {"kind", dir ? "directory" : "file"}, {"keys", keys}});
    ++index;
  }
  return items;
}

json ApplianceNames(const std::string& state_dir) {
  auto names = core::ReadServingCertNames(state_dir + "/tls/server.crt");
  if (!names.ok()) return {{"dns_names", json::array()}, {"ip_addresses", json::array()}};
  return {{"dns_names", names->dns_names}, {"ip_addresses", names->ip_addresses}};
}

}  // namespace

Result<BackupReport> CreateBackup(const BackupOptions& options) {
  auto config = ReadConfig(options.config_path);
  if (!config.ok()) return config.status();
  std::string state_dir = options.state_dir;
  if (state_dir.empty()) {
    state_dir = config->contains("state_dir") && config->at("state_dir").is_string()
                    ? config->at("state_dir").get<std::string>()
                    : kDefaultStateDir;
  }
  const std::string database = DatabaseOf(*config);
  const bool server = storage::IsServerDatabase(database);
  // The copy of the store beside the archive (same file system: no copy of
  // the key material ends up in /tmp), removed whatever happens.
  const std::string temp = options.out + ".store." + std::to_string(::getpid());
  struct Remove {
    std::string path;
    ~Remove() { ::unlink(path.c_str()); }
  } remove_temp{temp};
  ::unlink(temp.c_str());
  auto store = server ? PostgresStore(*config, options) : SqliteStore(StorePath(*config, state_dir), temp, options);
  if (!store.ok()) return store.status();
  json named;
  auto items = CollectFiles(options.config_path, *config, state_dir, &named);
  if (!items.ok()) return items.status();
  if (store->item) items->insert(items->begin(), *store->item);
  json files = json::array();
  for (const auto& item : *items) {
    files.push_back({{"name", item.name}, {"role", item.role}, {"size", item.size}, {"mode", ModeText(item.mode)},
                     {"sha256", item.sha256}, {"source", item.source}, {"owner", item.owner},
                     {"group", item.group}});
  }
  if (store->item) files[0]["source"] = store->manifest.at("path");
  json manifest = {{"format", kBackupFormat},
                   {"format_version", kBackupFormatVersion},
                   {"rackgate_version", RACKGATE_VERSION},
                   {"created_at", UtcTime(options.now, TimeStyle::kRfc3339)},
                   {"appliance", ApplianceNames(state_dir)},
                   {"state_dir", state_dir},
                   {"config", fs::absolute(options.config_path).lexically_normal().string()},
                   {"store", store->manifest},
                   {"audit", store->audit},
                   {"named", named},
                   {"files", files}};
  if (options.progress) options.progress("writing " + options.out + ": " + std::to_string(items->size()) + " files");
  if (Status s = WriteArchive(options.out, manifest, *items, options.now); !s.ok()) return s;
  BackupReport report{manifest, 0};
  struct stat st {};
  if (::stat(options.out.c_str(), &st) == 0) report.bytes = st.st_size;
  return report;
}

}  // namespace rackgate::ctl
