// An appliance's backup archive (docs/operations.md, "Backups and restore"):
// one tar file with a manifest first, written by `rackgatectl backup` from a
// live appliance and checked whole by `rackgatectl restore` before it
// writes anything. The format is docs/operations.md's "The archive".
#ifndef RACKGATE_CTL_STATE_BACKUP_ARCHIVE_H_
#define RACKGATE_CTL_STATE_BACKUP_ARCHIVE_H_

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace rackgate::ctl {

// The manifest's "format" and the only "format_version" this code reads.
inline constexpr char kBackupFormat[] = "rackgate-backup";
inline constexpr int kBackupFormatVersion = 1;
// Every entry of the archive is under this folder; the manifest is its first
// entry, the manifest's SHA-256 (hex) its second.
inline constexpr char kBackupRoot[] = "rackgate-backup/";
inline constexpr char kManifestEntry[] = "rackgate-backup/manifest.json";
inline constexpr char kManifestSumEntry[] = "rackgate-backup/manifest.sha256";

struct BackupOptions {
  std::string config_path;  // rackgated's config (required: the backup holds it)
  std::string state_dir;    // empty: the config's state_dir
  std::string out;          // the archive; written atomically, mode 0600
  int64_t now = 0;          // unix seconds, for created_at
  std::function<void(const std::string& line)> progress;  // may be empty
};

struct BackupReport {
  nlohmann::json manifest;
  int64_t bytes = 0;  // the archive's size
};

// Writes the archive: the SQLite store (an online copy, storage/backup.h)
// or, on PostgreSQL, none (the manifest says which database backup to take);
// STATE/ca, STATE/tls and STATE/cluster-ca whole; the config; every file or
// directory the config names outside those (EK anchors, a database password
// file, webhook secrets). Reasons: config_unreadable / config_invalid,
// file_unreadable, file_unwritable, and the store's (db_missing, db_busy,
// db_error). Nothing is left at `out` on failure.
Result<BackupReport> CreateBackup(const BackupOptions& options);

struct RestoreOptions {
  std::string archive;
  std::string state_dir;   // empty: the state_dir of the archived config
  std::string config_out;  // where the config goes; empty: where it was
  // Non-empty: the files the config names outside the state directory go
  // under this folder (their absolute path appended) rather than back to
  // their own paths, and the written config names them there.
  std::string rebase;
  bool force = false;      // overwrite a target that is not empty
  std::function<void(const std::string& line)> progress;
};

struct RestoreReport {
  nlohmann::json manifest;
  std::string state_dir;
  std::string config_path;
  std::string store_path;             // empty on PostgreSQL
  std::vector<std::string> written;   // every file written, in order
  // Files outside the state that were there and differed (a fresh
  // install's config), renamed to NAME.before-restore.
  std::vector<std::string> set_aside;
  nlohmann::json audit;               // the restored chain's verdict (SQLite)
  bool owner_set = false;             // chowned to the rackgate user
};

// Checks the whole archive (every entry listed in the manifest, with its
// size and SHA-256, none missing, none extra), then the target, then writes.
// Reasons: backup_foreign (kUnsupported: not a tar, or not a rackgate
// backup, or a format version this code does not read), backup_damaged
// (kCorruption: a checksum, size, entry or the tar itself is wrong),
// backup_newer (kUnsupported: the store's schema is newer than this code's),
// restore_target_not_empty (kUnsupported: the target has a store, or files
// in STATE/ca, tls or cluster-ca; options.force sets them aside as
// NAME.before-restore), db_in_use (rackgated runs on the target: never
// overwritten), file_unwritable. Nothing is written when any check fails.
// The config and the files it names may exist (a fresh install ships a
// config): one that differs is kept as NAME.before-restore.
Result<RestoreReport> RestoreBackup(const RestoreOptions& options);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_STATE_BACKUP_ARCHIVE_H_
