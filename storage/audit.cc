// The audit log: writing its rows, reading it back, and machine events that
// change no state.
#include "storage/audit.h"

#include <algorithm>
#include <span>

#include "base/sha256.h"
#include "storage/schema.h"

#include "storage/sql_store.h"
#include "storage/sqlite.h"
#include "storage/validation.h"

namespace rackgate::storage {

namespace {

// Every column of a row, in ReadAudit's order; append WHERE/ORDER BY.
constexpr char kAuditSelect[] =
    "SELECT id, at, actor, action, machine_id, hostname, from_state, to_state, why, detail_json, prev_hash, hash "
    "FROM audit ";

AuditEntry ReadAudit(const Stmt& s) {
  AuditEntry e;
  e.id = s.Int(0);
  e.at = s.Int(1);
  e.actor = s.Text(2);
  e.action = s.Text(3);
  e.machine_id = s.OptInt(4);
  e.hostname = s.Text(5);
  e.from_state = s.OptText(6);
  e.to_state = s.OptText(7);
  e.why = s.Text(8);
  e.detail_json = s.Text(9);
  e.prev_hash = s.Text(10);
  e.hash = s.Text(11);
  return e;
}

void PutField(std::string* out, const std::optional<std::string>& v) {
  if (!v) {
    out->push_back('\x00');
    return;
  }
  const uint32_t n = static_cast<uint32_t>(v->size());
  out->push_back('\x01');
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>((n >> shift) & 0xff));
  out->append(*v);
}

std::optional<std::string> IntText(const std::optional<int64_t>& v) {
  if (!v) return std::nullopt;
  return std::to_string(*v);
}

// The newest row's id and hash; 0 and the genesis for an empty log.
std::pair<int64_t, std::string> ChainHead(Connection& c) {
  Stmt s = c.Prepare("SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1");
  if (!s.Step()) return {0, kAuditGenesis};
  return {s.Int(0), s.Text(1)};
}

constexpr char kAppendOnlyTrigger[] =
    "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit\n"
    "BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;";

}  // namespace

std::string AuditRowEncoding(const AuditEntry& e) {
  std::string out = kAuditHashDomain;
  out.push_back('\x00');
  PutField(&out, e.prev_hash);
  PutField(&out, std::to_string(e.id));
  PutField(&out, std::to_string(e.at));
  PutField(&out, e.actor);
  PutField(&out, e.action);
  PutField(&out, IntText(e.machine_id));
  PutField(&out, e.hostname);
  PutField(&out, e.from_state);
  PutField(&out, e.to_state);
  PutField(&out, e.why);
  PutField(&out, e.detail_json);
  return out;
}

std::string AuditRowHash(const AuditEntry& e) {
  const std::string enc = AuditRowEncoding(e);
  return sha256::Hex(std::span(reinterpret_cast<const uint8_t*>(enc.data()), enc.size()));
}

AuditChainReport WalkAuditChain(Stmt& s, const std::optional<AuditAnchor>& anchor) {
  AuditChainReport r;
  r.head_hash = kAuditGenesis;
  const auto broken = [&](int64_t id, const char* problem, std::string message) {
    r.intact = false;
    r.bad_row_id = id;
    r.problem = problem;
    r.message = std::move(message);
    return r;
  };
  while (s.Step()) {
    const AuditEntry e = ReadAudit(s);
    const std::string row = "row " + std::to_string(e.id);
    const std::string before = r.head_id == 0 ? "the genesis" : "row " + std::to_string(r.head_id);
    if (e.hash.empty()) {
      return broken(e.id, "unchained", row + " has no hash: it was written outside rackgate (by hand, with the "
                                             "append-only triggers dropped)");
    }
    if (AuditRowHash(e) != e.hash) {
      return broken(e.id, "hash_mismatch",
                    row + " was edited after it was written: its hash does not match its content");
    }
    if (e.prev_hash != r.head_hash) {
      if (e.id != r.head_id + 1) {
        return broken(e.id, "row_missing",
                      row + " does not chain to " + before + ": rows " + std::to_string(r.head_id + 1) + ".." +
                          std::to_string(e.id - 1) + " were deleted");
      }
      return broken(e.id, "prev_mismatch",
                    row + " does not chain to " + before + ": a row before it was deleted, inserted or re-hashed");
    }
    if (e.id != r.head_id + 1) {
      return broken(e.id, "row_missing",
                    row + " follows " + before + ": rows " + std::to_string(r.head_id + 1) + ".." +
                        std::to_string(e.id - 1) + " are missing and the chain was re-hashed over the gap");
    }
    if (anchor && e.id == anchor->id && e.hash != anchor->hash) {
      return broken(e.id, "anchor_mismatch",
                    row + "'s hash is not the one kept outside: the chain was rewritten from " + row +
                        " or before");
    }
    ++r.rows;
    r.head_id = e.id;
    r.head_hash = e.hash;
  }
  if (anchor && anchor->id > r.head_id) {
    return broken(anchor->id, "anchor_missing",
                  "row " + std::to_string(anchor->id) + ", whose hash was kept outside, is gone: the newest rows "
                  "were cut off (the chain now ends at row " + std::to_string(r.head_id) + ")");
  }
  return r;
}

void BackfillAuditChain(Connection* c) {
  // SECURITY: the append-only trigger is lifted only inside the migration's
  // transaction, for rows that had no hash yet, and comes back before commit.
  c->Exec("DROP TRIGGER audit_no_update");
  std::string prev = kAuditGenesis;
  int64_t last = 0;
  for (;;) {
    std::vector<AuditEntry> batch;
    {
      Stmt s = c->Prepare(std::string(kAuditSelect) + "WHERE id > ?1 ORDER BY id LIMIT 1000");
      s.BindInt(1, last);
      while (s.Step()) batch.push_back(ReadAudit(s));
    }
    if (batch.empty()) break;
    for (AuditEntry& e : batch) {
      e.prev_hash = prev;
      e.hash = AuditRowHash(e);
      Stmt u = c->Prepare("UPDATE audit SET prev_hash = ?2, hash = ?3 WHERE id = ?1");
      u.BindInt(1, e.id).BindText(2, e.prev_hash).BindText(3, e.hash).Run();
      prev = e.hash;
      last = e.id;
    }
  }
  c->Exec(kAppendOnlyTrigger);
}

void WriteAudit(Connection& c, const Actor& actor, int64_t now, const AuditRow& row) {
  auto name = [](const std::optional<MachineState>& state) -> std::optional<std::string> {
    if (!state) return std::nullopt;
    return std::string(StateName(*state));
  };
  // The chain (docs/audit.md): the transaction holds the write lock, so no
  // other writer moves the head between its read and the INSERT. It is read
  // once per transaction; the rows after the first chain to the one before.
  std::optional<Connection::AuditHead>& head = c.audit_head();
  if (!head) {
    auto [id, hash] = ChainHead(c);
    head = Connection::AuditHead{id, std::move(hash)};
  }
  const int64_t head_id = head->id;
  std::string head_hash = head->hash;
  AuditEntry e;
  e.id = head_id + 1;
  e.at = now;
  e.actor = actor.name;
  e.action = row.action;
  if (row.machine != nullptr) {
    e.machine_id = row.machine->id;
    e.hostname = row.machine->hostname;
  }
  e.from_state = name(row.from_state);
  e.to_state = name(row.to_state);
  e.why = actor.why;
  e.detail_json = Dump(row.detail);
  e.prev_hash = std::move(head_hash);
  e.hash = AuditRowHash(e);
  Stmt s = c.Prepare(
      "INSERT INTO audit (id, at, actor, action, machine_id, hostname, from_state, to_state, why, detail_json, "
      "prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
  s.BindInt(1, e.id).BindInt(2, e.at).BindText(3, e.actor).BindText(4, e.action).BindOptInt(5, e.machine_id);
  s.BindText(6, e.hostname).BindOptText(7, e.from_state).BindOptText(8, e.to_state).BindText(9, e.why);
  s.BindText(10, e.detail_json).BindText(11, e.prev_hash).BindText(12, e.hash);
  s.Run();
  head = Connection::AuditHead{e.id, e.hash};
}

Status SqlStore::AuditMachineEvent(int64_t machine_id, const std::string& action, const std::string& detail_json,
                                      const Actor& actor, int64_t now) {
  return Guard([&]() -> Status {
    CheckActor(actor);
    CheckSize("action", action.size(), 1, 64);
    const json detail = DetailObject("detail_json", detail_json);
    db_->Write([&](Connection& c) {
      Machine m = MustMachineById(c, machine_id);
      WriteAudit(c, actor, now, {action, &m, m.state, m.state, detail});
      return true;
    });
    return Status::Ok();
  });
}

Status SqlStore::AuditAdminRefusal(const std::string& hostname, const std::string& detail_json,
                                      const Actor& actor, int64_t now) {
  return Guard([&]() -> Status {
    CheckActor(actor);
    const json detail = DetailObject("detail_json", detail_json);
    db_->Write([&](Connection& c) {
      std::optional<Machine> m;
      if (!hostname.empty() && hostname.size() <= 253) m = MachineByHostname(c, hostname);
      WriteAudit(c, actor, now, {"admin_refused", m ? &*m : nullptr, std::nullopt, std::nullopt, detail});
      return true;
    });
    return Status::Ok();
  });
}

Status SqlStore::AuditApplianceEvent(const std::string& action, const std::string& detail_json, const Actor& actor,
                                     int64_t now) {
  return Guard([&]() -> Status {
    CheckActor(actor);
    CheckSize("action", action.size(), 1, 64);
    const json detail = DetailObject("detail_json", detail_json);
    db_->Write([&](Connection& c) {
      WriteAudit(c, actor, now, {action, nullptr, std::nullopt, std::nullopt, detail});
      return true;
    });
    return Status::Ok();
  });
}

Result<std::vector<AuditEntry>> SqlStore::ListAudit(const AuditFilter& filter) {
  return Guard([&]() -> Result<std::vector<AuditEntry>> {
    const char* kColumns = kAuditSelect;
    static constexpr char kWhere[] = "WHERE id > ?1 AND (CAST(?3 AS TEXT) IS NULL OR hostname = ?3) ";
    // since_id 0: the newest `limit` (ids start at 1), returned oldest first.
    const std::string sql = filter.since_id > 0
                                ? std::string(kColumns) + kWhere + "ORDER BY id LIMIT ?2"
                                : "SELECT * FROM (" + std::string(kColumns) + kWhere +
                                      "ORDER BY id DESC LIMIT ?2) AS newest ORDER BY id";
    return db_->Read([&](Connection& c) {
      Stmt s = c.Prepare(sql);
      s.BindInt(1, filter.since_id).BindInt(2, std::clamp(filter.limit, 1, 10000)).BindOptText(3, filter.hostname);
      std::vector<AuditEntry> out;
      while (s.Step()) out.push_back(ReadAudit(s));
      return out;
    });
  });
}

Result<AuditChainReport> SqlStore::VerifyAuditChain(const std::optional<AuditAnchor>& anchor) {
  return Guard([&]() -> Result<AuditChainReport> {
    return db_->Read([&](Connection& c) {
      Stmt s = c.Prepare(std::string(kAuditSelect) + "ORDER BY id");
      return WalkAuditChain(s, anchor);
    });
  });
}

Result<AuditChainReport> VerifyAuditChainFile(const std::string& path, const std::optional<AuditAnchor>& anchor) {
  return Guard([&]() -> Result<AuditChainReport> {
    sqlite3* raw = nullptr;
    // Read-only and never migrated: the file is evidence, and rackgated may
    // be down because of it.
    const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
    DbPtr db(raw);
    if (rc != SQLITE_OK) return SqliteStatus(db.get(), rc, "open " + path + " read-only");
    sqlite3_busy_timeout(db.get(), 5000);
    const auto prepare = [&](const std::string& sql) -> std::unique_ptr<SqliteStmt> {
      sqlite3_stmt* st = nullptr;
      const int prc = sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &st, nullptr);
      auto owned = std::make_unique<SqliteStmt>(db.get(), st);
      if (prc != SQLITE_OK) Fail(SqliteStatus(db.get(), prc, "read " + path));
      return owned;
    };
    {
      auto app = prepare("PRAGMA application_id");
      Stmt s(app.get());
      if (!s.Step() || s.Int(0) != kApplicationId) {
        return Status::Unsupported("db_not_rackgate", path + " is not a rackgate database");
      }
    }
    {
      auto cols = prepare("SELECT count(*) FROM pragma_table_info('audit') WHERE name IN ('prev_hash', 'hash')");
      Stmt s(cols.get());
      if (!s.Step() || s.Int(0) != 2) {
        return Status::Unsupported("db_schema_old", path + " predates the audit chain; start rackgated once (it "
                                                    "migrates the database and chains the existing rows)");
      }
    }
    auto begin = prepare("BEGIN");
    Stmt(begin.get()).Run();
    auto rows = prepare(std::string(kAuditSelect) + "ORDER BY id");
    AuditChainReport report;
    {
      Stmt s(rows.get());
      report = WalkAuditChain(s, anchor);
    }
    auto end = prepare("COMMIT");
    Stmt(end.get()).Run();
    return report;
  });
}

}  // namespace rackgate::storage
