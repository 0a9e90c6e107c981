// The audit log: writing its rows, reading it back, and machine events that
// change no state.
#include "storage/audit.h"

#include <algorithm>

#include "storage/sqlite_store.h"
#include "storage/validation.h"

namespace rackgate::storage {

namespace {

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
  return e;
}

}  // namespace

void WriteAudit(Connection& c, const Actor& actor, int64_t now, const AuditRow& row) {
  Stmt s = c.Prepare(
      "INSERT INTO audit (at, actor, action, machine_id, hostname, from_state, to_state, why, detail_json) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  s.BindInt(1, now).BindText(2, actor.name).BindText(3, row.action);
  if (row.machine != nullptr) {
    s.BindInt(4, row.machine->id).BindText(5, row.machine->hostname);
  } else {
    s.BindNull(4).BindText(5, "");
  }
  auto name = [](const std::optional<MachineState>& state) -> std::optional<std::string> {
    if (!state) return std::nullopt;
    return std::string(StateName(*state));
  };
  s.BindOptText(6, name(row.from_state)).BindOptText(7, name(row.to_state)).BindText(8, actor.why);
  s.BindText(9, Dump(row.detail));
  s.Run();
}

Status SqliteStore::AuditMachineEvent(int64_t machine_id, const std::string& action, const std::string& detail_json,
                                      const Actor& actor, int64_t now) {
  return Guard([&]() -> Status {
    CheckActor(actor);
    CheckSize("action", action.size(), 1, 64);
    CheckSize("detail_json", detail_json.size(), 2, 64 * 1024);
    json detail = json::parse(detail_json, nullptr, false);
    if (!detail.is_object()) return Status::InvalidArgument("field_invalid", "detail_json must be a JSON object");
    db_->Write([&](Connection& c) {
      Machine m = MustMachineById(c, machine_id);
      WriteAudit(c, actor, now, {action, &m, m.state, m.state, detail});
      return true;
    });
    return Status::Ok();
  });
}

Status SqliteStore::AuditAdminRefusal(const std::string& hostname, const std::string& detail_json,
                                      const Actor& actor, int64_t now) {
  return Guard([&]() -> Status {
    CheckActor(actor);
    CheckSize("detail_json", detail_json.size(), 2, 64 * 1024);
    json detail = json::parse(detail_json, nullptr, false);
    if (!detail.is_object()) return Status::InvalidArgument("field_invalid", "detail_json must be a JSON object");
    db_->Write([&](Connection& c) {
      std::optional<Machine> m;
      if (!hostname.empty() && hostname.size() <= 253) m = MachineByHostname(c, hostname);
      WriteAudit(c, actor, now, {"admin_refused", m ? &*m : nullptr, std::nullopt, std::nullopt, detail});
      return true;
    });
    return Status::Ok();
  });
}

Result<std::vector<AuditEntry>> SqliteStore::ListAudit(const AuditFilter& filter) {
  return Guard([&]() -> Result<std::vector<AuditEntry>> {
    static constexpr char kColumns[] =
        "SELECT id, at, actor, action, machine_id, hostname, from_state, to_state, why, detail_json FROM audit ";
    static constexpr char kWhere[] = "WHERE id > ?1 AND (?3 IS NULL OR hostname = ?3) ";
    // since_id 0: the newest `limit` (ids start at 1), returned oldest first.
    const std::string sql = filter.since_id > 0
                                ? std::string(kColumns) + kWhere + "ORDER BY id LIMIT ?2"
                                : "SELECT * FROM (" + std::string(kColumns) + kWhere +
                                      "ORDER BY id DESC LIMIT ?2) ORDER BY id";
    return db_->Read([&](Connection& c) {
      Stmt s = c.Prepare(sql);
      s.BindInt(1, filter.since_id).BindInt(2, std::clamp(filter.limit, 1, 10000)).BindOptText(3, filter.hostname);
      std::vector<AuditEntry> out;
      while (s.Step()) out.push_back(ReadAudit(s));
      return out;
    });
  });
}

}  // namespace rackgate::storage
