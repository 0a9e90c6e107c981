// rackgatectl backup and restore: a round trip, and each refusal of restore
// (a damaged byte, a missing file, a foreign tar, a newer schema, a target
// that is not empty) writing nothing.
#include "ctl/state/backup_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/hex.h"
#include "ctl/state/init_command.h"
#include "storage/store.h"

namespace rackgate::ctl {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "rg-backup-test.XXXXXX").string();
    path_ = ::mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

std::string Sha256Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  return hex::Encode(std::span<const uint8_t>(md, n));
}

// Copies the tar at `in` to `out`, each entry through `edit` (nullopt drops
// it); a changed manifest gets its checksum entry recomputed, as a forger
// would, so that only the check under test can refuse it.
void RewriteArchive(const std::string& in, const std::string& out,
                    const std::function<std::optional<std::string>(const std::string&, const std::string&)>& edit) {
  archive* r = archive_read_new();
  archive_read_support_format_tar(r);
  ASSERT_EQ(archive_read_open_filename(r, in.c_str(), 10240), ARCHIVE_OK);
  archive* w = archive_write_new();
  archive_write_set_format_pax_restricted(w);
  ASSERT_EQ(archive_write_open_filename(w, out.c_str()), ARCHIVE_OK);
  archive_entry* e = nullptr;
  std::string manifest;
  while (archive_read_next_header(r, &e) == ARCHIVE_OK) {
    const std::string name = archive_entry_pathname(e);
    std::string data(static_cast<size_t>(archive_entry_size(e)), '\0');
    if (!data.empty()) archive_read_data(r, data.data(), data.size());
    std::optional<std::string> now = edit(name, data);
    if (name == kManifestEntry && now) manifest = *now;
    if (name == kManifestSumEntry && now && *now == data) now = Sha256Hex(manifest) + "\n";
    if (!now) continue;
    archive_entry* o = archive_entry_clone(e);
    archive_entry_set_size(o, static_cast<la_int64_t>(now->size()));
    archive_write_header(w, o);
    archive_write_data(w, now->data(), now->size());
    archive_entry_free(o);
  }
  archive_write_close(w);
  archive_write_free(w);
  archive_read_free(r);
}

class BackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = dir_.path() + "/state";
    std::string token = dir_.path() + "/token";
    std::vector<std::string> words = {"rackgatectl", "init", "--state-dir", state_, "--token-out", token};
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    ASSERT_EQ(RunInit(static_cast<int>(argv.size()), argv.data(), 2), 0);
    fs::create_directories(state_ + "/cluster-ca");
    WriteText(state_ + "/cluster-ca/ca.key", "cluster key\n");
    ::chmod((state_ + "/cluster-ca/ca.key").c_str(), 0600);
    roots_ = dir_.path() + "/roots";
    fs::create_directories(roots_);
    WriteText(roots_ + "/vendor.pem", "a vendor root\n");
    ::chmod((roots_ + "/vendor.pem").c_str(), 0644);
    config_ = dir_.path() + "/rackgated.json";
    WriteText(config_, json{{"state_dir", state_}, {"ek_roots", {roots_}}, {"port", 22623}}.dump());
    archive_ = dir_.path() + "/backup.tar";
    BackupOptions options;
    options.config_path = config_;
    options.out = archive_;
    options.now = 1700000000;
    auto report = CreateBackup(options);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    manifest_ = report->manifest;
  }

  RestoreOptions Fresh(const std::string& archive) {
    RestoreOptions o;
    o.archive = archive;
    o.state_dir = dir_.path() + "/fresh/state";
    o.config_out = dir_.path() + "/fresh/rackgated.json";
    o.rebase = dir_.path() + "/fresh/root";
    return o;
  }

  // The refusal, and not a file of the fresh appliance written.
  void ExpectRefused(const std::string& archive, const std::string& reason) {
    auto r = RestoreBackup(Fresh(archive));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().reason(), reason) << r.status().ToString();
    EXPECT_FALSE(fs::exists(dir_.path() + "/fresh")) << "a refused restore wrote something";
  }

  TempDir dir_;
  std::string state_, roots_, config_, archive_;
  json manifest_;
};

TEST_F(BackupTest, ArchiveIsPrivateAndItsManifestNamesEverything) {
  struct stat st {};
  ASSERT_EQ(::stat(archive_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(manifest_.at("format"), kBackupFormat);
  EXPECT_EQ(manifest_.at("store").at("kind"), "sqlite");
  EXPECT_EQ(manifest_.at("store").at("schema_version"), storage::Store::CurrentSchemaVersion());
  EXPECT_GT(manifest_.at("audit").at("head_id").get<int64_t>(), 0);
  std::vector<std::string> names;
  for (const auto& f : manifest_.at("files")) names.push_back(f.at("name"));
  for (const char* want : {"store/rackgate.db", "state/ca/ca.crt", "state/ca/ca.key", "state/tls/server.key",
                           "state/cluster-ca/ca.key", "config/rackgated.json", "named/0/vendor.pem"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  EXPECT_EQ(manifest_.at("appliance").at("dns_names"), json({"localhost"}));
}

TEST_F(BackupTest, RestoresOntoAFreshApplianceWithModesAndTheSameAuditHead) {
  RestoreOptions o = Fresh(archive_);
  auto r = RestoreBackup(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->audit.at("head_id"), manifest_.at("audit").at("head_id"));
  EXPECT_EQ(r->audit.at("head_hash"), manifest_.at("audit").at("head_hash"));
  EXPECT_TRUE(r->audit.at("matches_manifest").get<bool>());
  // The restore's own row, chained after the restored head.
  EXPECT_EQ(r->audit.at("recorded").at("id"), manifest_.at("audit").at("head_id").get<int64_t>() + 1);
  storage::AuditAnchor head{manifest_.at("audit").at("head_id"), manifest_.at("audit").at("head_hash")};
  auto chain = storage::VerifyAuditChainFile(o.state_dir + "/rackgate.db", head);
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_TRUE(chain->intact) << chain->message;
  EXPECT_EQ(chain->head_id, r->audit.at("recorded").at("id"));
  auto store = storage::Store::Open(o.state_dir + "/rackgate.db");
  ASSERT_TRUE(store.ok());
  auto rows = (*store)->ListAudit();
  ASSERT_TRUE(rows.ok());
  bool found = false;
  for (const auto& row : *rows) found = found || row.action == "backup_restored";
  EXPECT_TRUE(found);
  EXPECT_EQ(ReadText(o.state_dir + "/ca/ca.key"), ReadText(state_ + "/ca/ca.key"));
  struct stat st {};
  ASSERT_EQ(::stat((o.state_dir + "/ca/ca.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((o.state_dir + "/rackgate.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((o.rebase + roots_ + "/vendor.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  json config = json::parse(ReadText(o.config_out));
  EXPECT_EQ(config.at("state_dir"), o.state_dir);
  EXPECT_EQ(config.at("ek_roots"), json({o.rebase + roots_}));
  EXPECT_EQ(config.at("port"), 22623);
}

TEST_F(BackupTest, KeepsAFreshInstallsConfigAside) {
  RestoreOptions o = Fresh(archive_);
  fs::create_directories(dir_.path() + "/fresh");
  WriteText(o.config_out, "{\"state_dir\": \"/var/lib/rackgate\"}\n");
  auto r = RestoreBackup(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->set_aside, std::vector<std::string>{o.config_out + ".before-restore"});
  EXPECT_EQ(ReadText(o.config_out + ".before-restore"), "{\"state_dir\": \"/var/lib/rackgate\"}\n");
  EXPECT_EQ(json::parse(ReadText(o.config_out)).at("state_dir"), o.state_dir);
}

TEST_F(BackupTest, RefusesADamagedByte) {
  // One byte of the CA certificate, inside the archive.
  std::string bytes = ReadText(archive_);
  const size_t at = bytes.find("BEGIN CERTIFICATE");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 30] ^= 0x01;
  const std::string damaged = dir_.path() + "/damaged.tar";
  WriteText(damaged, bytes);
  ExpectRefused(damaged, "backup_damaged");
}

TEST_F(BackupTest, RefusesAMissingFile) {
  const std::string cut = dir_.path() + "/cut.tar";
  RewriteArchive(archive_, cut, [](const std::string& name, const std::string& data) -> std::optional<std::string> {
    if (name == std::string(kBackupRoot) + "state/ca/ca.key") return std::nullopt;
    return data;
  });
  ExpectRefused(cut, "backup_damaged");
}

TEST_F(BackupTest, RefusesAnEditedManifestWhoseChecksumWasNotRedone) {
  const std::string edited = dir_.path() + "/edited.tar";
  RewriteArchive(archive_, edited, [](const std::string& name, const std::string& data) -> std::optional<std::string> {
    if (name != kManifestSumEntry) return data;
    return std::string(64, '0') + "\n";
  });
  ExpectRefused(edited, "backup_damaged");
}

TEST_F(BackupTest, RefusesAForeignTarAndAFileThatIsNoTar) {
  const std::string foreign = dir_.path() + "/foreign.tar";
  RewriteArchive(archive_, foreign, [](const std::string& name, const std::string& data) -> std::optional<std::string> {
    if (name == kManifestEntry || name == kManifestSumEntry) return std::nullopt;
    return data;
  });
  ExpectRefused(foreign, "backup_foreign");
  const std::string text = dir_.path() + "/notes.txt";
  WriteText(text, std::string(4096, 'x'));
  ExpectRefused(text, "backup_foreign");
  // A manifest of another format version: this code cannot read it.
  const std::string future = dir_.path() + "/future.tar";
  RewriteArchive(archive_, future, [](const std::string& name, const std::string& data) -> std::optional<std::string> {
    if (name != kManifestEntry) return data;
    json m = json::parse(data);
    m["format_version"] = kBackupFormatVersion + 1;
    return m.dump(2) + "\n";
  });
  ExpectRefused(future, "backup_foreign");
}

TEST_F(BackupTest, RefusesAManifestThatNamesAPathOutside) {
  for (const std::string evil : {"state/ca/../../../evil", "state/evil", "/etc/evil"}) {
    const std::string out = dir_.path() + "/evil.tar";
    RewriteArchive(archive_, out, [&](const std::string& name, const std::string& data) -> std::optional<std::string> {
      if (name != kManifestEntry) return data;
      json m = json::parse(data);
      for (auto& f : m["files"]) {
        if (f["name"] == "state/ca/ca.crt") f["name"] = evil;
      }
      return m.dump(2) + "\n";
    });
    ExpectRefused(out, "backup_damaged");
  }
}

TEST_F(BackupTest, RefusesANewerSchema) {
  const std::string newer = dir_.path() + "/newer.tar";
  RewriteArchive(archive_, newer, [](const std::string& name, const std::string& data) -> std::optional<std::string> {
    if (name != kManifestEntry) return data;
    json m = json::parse(data);
    m["store"]["schema_version"] = storage::Store::CurrentSchemaVersion() + 1;
    return m.dump(2) + "\n";
  });
  ExpectRefused(newer, "backup_newer");
}

TEST_F(BackupTest, RefusesATargetThatIsNotEmptyUnlessForced) {
  RestoreOptions o = Fresh(archive_);
  ASSERT_TRUE(RestoreBackup(o).ok());
  WriteText(o.state_dir + "/ca/marker", "left by the operator");
  fs::remove(o.state_dir + "/rackgate.db");  // the CA folder alone makes the target used
  auto again = RestoreBackup(o);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().reason(), "restore_target_not_empty") << again.status().ToString();
  EXPECT_NE(again.status().message().find("--force"), std::string::npos);
  o.force = true;
  auto forced = RestoreBackup(o);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_TRUE(fs::exists(o.state_dir + "/ca.before-restore/marker"));
  EXPECT_FALSE(fs::exists(o.state_dir + "/ca/marker"));
}

// A fleet appliance (PostgreSQL; RACKGATE_TEST_POSTGRES from script/pg-lab):
// the database stays out of the archive, the manifest says so and still
// names the audit head, and restore writes the files only.
TEST(BackupPostgresTest, TheDatabaseStaysOutAndTheManifestSaysSo) {
  const char* url = std::getenv("RACKGATE_TEST_POSTGRES");
  if (url == nullptr || *url == '\0') GTEST_SKIP() << "RACKGATE_TEST_POSTGRES unset (script/pg-lab run)";
  TempDir dir;
  const std::string state = dir.path() + "/state";
  std::vector<std::string> words = {"rackgatectl", "init", "--state-dir", state, "--database", url,
                                    "--token-out", dir.path() + "/token"};
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  ASSERT_EQ(RunInit(static_cast<int>(argv.size()), argv.data(), 2), 0);
  const std::string config = dir.path() + "/rackgated.json";
  WriteText(config, json{{"state_dir", state}, {"database", url}}.dump());
  BackupOptions options{config, "", dir.path() + "/fleet.tar", 1700000000, {}};
  auto report = CreateBackup(options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const json& m = report->manifest;
  EXPECT_EQ(m.at("store").at("kind"), "postgresql");
  EXPECT_FALSE(m.at("store").at("included").get<bool>());
  EXPECT_NE(m.at("store").at("take").get<std::string>().find("pg_dump"), std::string::npos);
  EXPECT_GT(m.at("audit").at("head_id").get<int64_t>(), 0);
  for (const auto& f : m.at("files")) EXPECT_NE(f.at("name").get<std::string>().rfind("store/", 0), 0u);
  RestoreOptions o{options.out, dir.path() + "/fresh/state", dir.path() + "/fresh/rackgated.json", "", false, {}};
  auto r = RestoreBackup(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->store_path.empty());
  EXPECT_TRUE(r->audit.is_null());
  EXPECT_EQ(ReadText(o.state_dir + "/ca/ca.key"), ReadText(state + "/ca/ca.key"));
  EXPECT_EQ(json::parse(ReadText(o.config_out)).at("database"), url);
}

}  // namespace
}  // namespace rackgate::ctl
